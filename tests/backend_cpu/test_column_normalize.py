"""The column normalization kernel (emitters/column_normalize.py, issue 19): a row
fusion's column form (softmax, log-softmax, layernorm, rmsnorm over a dimension that
is not the minor one) is ONE kernel, and its numbers agree with the evaluator."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from xlapy import backend_cpu, hlo
from xlapy.backend_cpu.emitters import column_normalize
from xlapy.frontend import jit_compile, ops
from tests.corpus_util import assert_close
from tests.passes.test_column_fusion import FORMS, JAX_FORMS, normalization_hlo

DEFAULT = backend_cpu.CompileOptions(pipeline="default")
DTYPES = {"f32": np.float32, "f64": np.float64}


def compile_text(text: str, options=DEFAULT):
    return backend_cpu.compile(hlo.parse_module(text), options)


def strategies_of(executable) -> list[str]:
    return [choice.chosen for choice in executable.kernel_strategies()]


def check(text: str, args, what: str = "") -> np.ndarray:
    executable = compile_text(text)
    assert strategies_of(executable) == ["column_normalize"], \
        [choice.lines() for choice in executable.kernel_strategies()]
    actual = executable.run(*args)[0]
    expected = np.asarray(hlo.evaluate(hlo.parse_module(text), list(args))[0])
    assert_close(actual, expected, what)
    return actual


@pytest.mark.parametrize("form", FORMS)
def test_jax_forms_are_one_kernel_and_right(form):
    x = np.random.default_rng(1).standard_normal((6, 10)).astype(np.float32) * 4
    check(JAX_FORMS[form], [x], form)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_shapes_axes_and_forms(data):
    rank = data.draw(st.integers(2, 4), "rank")
    sizes = st.sampled_from([2, 3, 5, 8, 17, 33]) if rank > 2 else \
        st.sampled_from([2, 3, 7, 16, 31, 65, 130])
    dims = tuple(data.draw(st.lists(sizes, min_size=rank, max_size=rank), "dims"))
    axis = data.draw(st.integers(0, rank - 2), "axis")
    form = data.draw(st.sampled_from(FORMS), "form")
    etype = data.draw(st.sampled_from(["f32", "f64"]), "etype")
    keepdims = data.draw(st.booleans(), "keepdims")
    x = np.random.default_rng(len(dims) * 7 + axis).standard_normal(dims) * 3
    check(normalization_hlo(form, dims, axis, etype, keepdims), [x.astype(DTYPES[etype])],
          f"{form} {etype}{list(dims)} axis {axis}")


@pytest.mark.parametrize("dims,axis", [((1, 9), 0), ((9, 1, 20), 0), ((3, 1, 20), 1),
                                       ((5, 4, 1), 1)])
def test_size_one_dimensions(dims, axis):
    x = np.random.default_rng(2).standard_normal(dims).astype(np.float32)
    text = normalization_hlo("softmax", dims, axis, keepdims=False)
    executable = compile_text(text)
    actual = executable.run(x)[0]
    assert_close(actual, np.asarray(hlo.evaluate(hlo.parse_module(text), [x])[0]), "size 1")


@pytest.mark.parametrize("etype", ["f32", "f64"])
def test_nan_and_inf(etype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((12, 70)) * 8).astype(DTYPES[etype])
    x[:, 2] = -np.inf
    x[5, 2] = 0.0                 # one finite element: that column is one-hot
    x[4, 9] = np.inf              # an inf: the evaluator's nan column
    x[7, 1] = np.nan              # a nan: a nan column
    out = check(normalization_hlo("softmax", (12, 70), 0, etype), [x], f"softmax {etype}")
    assert out[5, 2] == 1.0 and np.isnan(out[:, 1]).all()
    np.testing.assert_allclose(out[:, 0].sum(), 1.0, rtol=1e-5)
    check(normalization_hlo("log_softmax", (12, 70), 0, etype), [x], f"log_softmax {etype}")


def test_zero_size():
    for dims, axis in (((0, 5), 0), ((4, 0, 3), 1)):
        x = np.zeros(dims, np.float32)
        text = normalization_hlo("softmax", dims, axis, keepdims=False)
        assert compile_text(text).run(x)[0].shape == dims


def test_blocks_split_the_columns_of_large_tensors():
    # Several blocks along the minor dimension, the last one partial and not whole
    # vectors; and several along a leading dimension with the minor one whole.
    for dims, axis in (((37, 1029), 0), ((3, 300, 5), 1), ((40, 3, 7), 0)):
        x = np.random.default_rng(4).standard_normal(dims).astype(np.float32)
        check(normalization_hlo("layernorm", dims, axis), [x], f"layernorm {dims}")


@pytest.mark.parametrize("root_type", ["bf16", "f16"])
def test_a_narrow_root_is_computed_on_scalars(root_type):
    # Mixed precision: the softmax in f32, converted at the end (the pass takes a
    # narrow root; the output pass then works on scalars).
    text = normalization_hlo("softmax", (9, 21), 0, keepdims=False)
    text = text.replace("ROOT e9 = f32[9,21] divide(e5, b8)",
                        f"e9 = f32[9,21] divide(e5, b8)\n  ROOT out = {root_type}[9,21] "
                        f"convert(e9)")
    assert "convert" in text
    x = np.random.default_rng(5).standard_normal((9, 21)).astype(np.float32)
    executable = compile_text(text)
    assert strategies_of(executable) == ["column_normalize"]
    actual = executable.run(x)[0]
    assert_close(actual, np.asarray(hlo.evaluate(hlo.parse_module(text), [x])[0]), root_type)


def test_block_geometry():
    # Rows of a page (1024 f32) when the columns hold two such blocks.
    big = column_normalize._Blocks(hlo.Shape("f32", (4096, 4096)), 0, 8)
    assert (big.bd, big.width, big.extent) == (1, 1024, 4)
    # Else two blocks, or MIN_BLOCKS when that makes them longer; whole vectors.
    narrow = column_normalize._Blocks(hlo.Shape("f32", (16384, 256)), 0, 16)
    assert (narrow.width, narrow.extent) == (128, 2)
    wide = column_normalize._Blocks(hlo.Shape("f32", (64, 65536)), 0, 8)
    assert wide.width == 4096 and wide.extent == 16      # MAX_BLOCK_COLUMNS
    assert column_normalize._Blocks(hlo.Shape("f64", (64, 4096)), 0, 4, 128).width == 128
    # [B, S, D] over S with a short D: blocks of whole D rows along B.
    bsd = column_normalize._Blocks(hlo.Shape("f32", (64, 512, 8)), 1, 8)
    assert bsd.bd == 0 and bsd.inner == [2] and bsd.extent >= 2
    assert bsd.width * 8 * 4 <= 4096


def test_frontend_softmax_axis_0_runs_one_kernel(isa):
    x = np.random.default_rng(6).standard_normal((64, 100)).astype(np.float32)
    f = jit_compile(lambda v: ops.nn.softmax(v, axis=0))
    module = hlo.parse_module(f.lower(x).as_hlo_text())
    executable = isa.compile(module, pipeline="default")
    assert strategies_of(executable) == ["column_normalize"]
    # Lanes run along the minor dimension: the target's full vectors of f32.
    assert isa.vector_type("f32") in executable.as_llvm_ir()
    if isa.runs:
        e = np.exp(x - x.max(axis=0))
        assert_close(executable.run(x)[0], e / e.sum(axis=0), "softmax axis 0")


def test_long_columns_are_summed_pairwise():
    # A layernorm down 2^18 rows: one chain of additions per column made its mean
    # drift and the output was off by 6e-4; blocks of rows combined pairwise (as the
    # other float sums of the backend) keep it within 1e-6 of the exact result.
    rows = 1 << 18
    x = np.full((rows, 16), 0.1, np.float32)
    x[::3] = 0.3
    text = normalization_hlo("layernorm", (rows, 16), 0, keepdims=False)
    executable = compile_text(text)
    assert strategies_of(executable) == ["column_normalize"]
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(axis=0)
    expected = centered / np.sqrt((centered * centered).mean(axis=0) + 1e-5)
    assert_close(executable.run(x)[0], expected.astype(np.float32), "layernorm 2^18 rows")


@pytest.mark.parametrize("form", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
@pytest.mark.parametrize("axis", [0, 1])
def test_frontend_ops_over_a_non_minor_axis(form, axis):
    # What frontend.ops emits (layer_norm and rms_norm with their default gamma
    # and beta), over axis 0 or 1 of [B, S, D]: one kernel, the evaluator's numbers.
    x = np.random.default_rng(7).standard_normal((9, 6, 40)).astype(np.float32)
    fn = getattr(ops.nn, form)
    f = jit_compile(lambda v: fn(v, axis=axis))
    text = f.lower(x).as_hlo_text()
    check(text, [x], f"{form} axis {axis}")


def test_a_large_output_streams(isa):
    # 16 MiB of output: non-temporal stores (streaming.STREAM_MIN_BYTES), whole aligned
    # vectors of the target; compiled for every ISA level, run where the host can.
    dims = (4096, 1024)
    text = normalization_hlo("softmax", dims, 0, keepdims=False)
    executable = isa.compile(hlo.parse_module(text), pipeline="default")
    assert strategies_of(executable) == ["column_normalize"]
    llvm = executable.as_llvm_ir()
    assert "!nontemporal" in llvm and isa.vector_type("f32") in llvm
    if isa.runs:
        x = np.random.default_rng(8).standard_normal(dims).astype(np.float32)
        e = np.exp(x - x.max(axis=0))
        assert_close(executable.run(x)[0], e / e.sum(axis=0), "softmax f32[4096,1024]")
