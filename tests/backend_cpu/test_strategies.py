"""The kernel strategy table (backend_cpu/strategies.py): which row emits each kernel,
and why the rows before it declined.

Most cases only emit the kernels (`compiler.emitted_strategies`: LLVM IR, no
optimization) for every ISA level, since the choice must not depend on the target;
one compiles for real to read `CpuExecutable.kernel_strategies()`.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo, passes
from xlapy.backend_cpu import strategies
from xlapy.backend_cpu.compiler import emitted_strategies
from tests.backend_cpu.helpers import uniquify
from tests.corpus_util import CORPUS


def choices(text: str, isa=None, pipeline: bool = False) -> list:
    """The strategies.Choice of every kernel of the module `text`."""
    module = hlo.parse_module(uniquify(text))
    if pipeline:
        passes.cpu_pipeline().run(module)
    target = isa.target if isa is not None else backend_cpu.CompileOptions().target()
    return emitted_strategies(module.to_text(), target)


def only(records: list, chosen: str | None = None):
    """The one record (of the kernel that `chosen` emitted, when given)."""
    if chosen is not None:
        records = [r for r in records if r.chosen == chosen]
    assert len(records) == 1, records
    return records[0]


def declined(record) -> dict:
    return dict(record.declined)


def test_the_table_is_ordered_with_the_fallbacks_last():
    names = strategies.STRATEGY_NAMES
    assert len(set(names)) == len(names)
    assert names[0] == "host_sort"
    assert names[-2:] == ("loop_nest", "per_output_loops")
    for name in ("gemm", "row_normalize", "block_transpose", "column_reduce", "conv_gemm"):
        assert name in names


def test_decision_is_true_only_without_a_reason():
    assert strategies.Decision()
    assert not strategies.Decision("not a dot")
    assert strategies.Decision(found=0)


def test_softmax_takes_row_normalize(isa):
    record = only(choices((CORPUS / "softmax_f32.hlo").read_text(), isa, pipeline=True))
    assert record.chosen == "row_normalize"
    why = declined(record)
    assert why["gemm"] == "not a dot"
    assert why["block_transpose"] == "not a transpose"
    assert "row reduce" in why["column_reduce_epilogue"]
    # Every row before the chosen one answered, in table order.
    names = strategies.STRATEGY_NAMES
    assert [name for name, _ in record.declined] == list(names[:names.index("row_normalize")])


COLUMN_SOFTMAX = """
HloModule column_softmax
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  p = f32[64,32] parameter(0)
  e = f32[64,32] exponential(p)
  zero = f32[] constant(0)
  s = f32[32] reduce(e, zero), dimensions={0}, to_apply=add
  b = f32[64,32] broadcast(s), dimensions={1}
  ROOT d = f32[64,32] divide(e, b)
}
ENTRY main {
  x = f32[64,32] parameter(0)
  ROOT f = f32[64,32] fusion(x), kind=kLoop, calls=fused
}
"""


def test_a_column_softmax_is_a_column_normalization(isa):
    # Over dimension 0: blocks of columns (issue 19), not a row normalization.
    record = only(choices(COLUMN_SOFTMAX, isa))
    assert record.chosen == "column_normalize"
    assert "row_normalize" not in declined(record)
    # In f16 the column emitter declines (f32/f64 reduces only); row_normalize says why
    # it does not apply either, and the loop nest takes it.
    narrow = only(choices(COLUMN_SOFTMAX.replace("f32", "f16"), isa))
    assert narrow.chosen == "loop_nest"
    assert declined(narrow)["column_normalize"].endswith(" reduces f16 (f32 and f64 only)")
    assert declined(narrow)["row_normalize"] == "f16 output (f32 and f64 only)"


def test_large_transpose_takes_the_register_blocks(isa):
    record = only(choices("""
        HloModule t
        ENTRY main {
          x = f32[1024,512] parameter(0)
          ROOT t = f32[512,1024] transpose(x), dimensions={1,0}
        }""", isa, pipeline=True))
    assert record.chosen == "block_transpose"
    assert declined(record)["row_shuffle"] == "the minor dimension moves"


def test_a_transpose_keeping_the_minor_dimension_is_no_block_transpose(isa):
    record = only(choices("""
        HloModule t
        ENTRY main {
          x = f32[8,4,16] parameter(0)
          ROOT t = f32[4,8,16] transpose(x), dimensions={1,0,2}
        }""", isa))
    assert record.chosen == "loop_nest"      # small: the row shuffle waits for 16 MiB
    why = declined(record)
    assert why["row_shuffle"].startswith("small: 2048 bytes")
    assert why["block_transpose"].startswith("minor dims not swapped")


def test_a_dot_takes_the_gemm_and_a_tiny_one_the_loop_nest(isa):
    big = only(choices("""
        HloModule d
        ENTRY main {
          a = f32[64,96] parameter(0)
          b = f32[96,80] parameter(1)
          ROOT d = f32[64,80] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        }""", isa))
    assert big.chosen == "gemm"
    assert declined(big) == {"host_sort": "not a sort", "materialize_inner": "not a fusion"}
    tiny = only(choices("""
        HloModule d
        ENTRY main {
          a = f32[4,8] parameter(0)
          b = f32[8,2] parameter(1)
          ROOT d = f32[4,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        }""", isa))
    assert tiny.chosen == "loop_nest"
    assert declined(tiny)["gemm"] == "small: 64 multiply-adds (the generic dot below 32768)"


def test_column_reduces(isa):
    records = choices((CORPUS / "reduce_sum_axes_f32.hlo").read_text(), isa)

    def of(name):
        return only([r for r in records if f"_{name}_" in r.kernel + "_"])
    assert of("reduce_sum_42").chosen == "column_reduce"        # dims={0} of [8,16,32]
    assert of("reduce_sum_44").chosen == "loop_nest"            # dims={2}: a row reduce
    assert declined(of("reduce_sum_44"))["column_reduce"] == \
        "reduces the input's minor dimension 2 (a row reduce)"
    # A mean over the rows, fused: column reduces into scratch, then the division.
    mean = only(choices("""
        HloModule mean
        add {
          a = f32[] parameter(0)
          b = f32[] parameter(1)
          ROOT s = f32[] add(a, b)
        }
        ENTRY main {
          x = f32[256,64] parameter(0)
          zero = f32[] constant(0)
          s = f32[64] reduce(x, zero), dimensions={0}, to_apply=add
          n = f32[] constant(256)
          nb = f32[64] broadcast(n), dimensions={}
          ROOT m = f32[64] divide(s, nb)
        }""", isa, pipeline=True))
    assert mean.chosen == "column_reduce_epilogue"


def test_convolutions(isa):
    depthwise = only(choices((CORPUS / "conv2d_depthwise.hlo").read_text(), isa))
    assert depthwise.chosen == "conv_depthwise"
    assert declined(depthwise)["gemm"] == "not a dot"
    dense = only(choices("""
        HloModule c
        ENTRY main {
          x = f32[2,16,16,8] parameter(0)
          w = f32[3,3,8,16] parameter(1)
          ROOT c = f32[2,16,16,16] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
        }""", isa))
    assert dense.chosen == "conv_gemm"
    assert declined(dense)["conv_depthwise"] == "no feature or batch grouping"


SORT = """
HloModule s
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction={direction}
}
ENTRY main {
  x = f32[4,16] parameter(0)
  ROOT s = f32[4,16] sort(x), dimensions={1}, to_apply=cmp
}
"""


def test_sorts_on_the_host_or_by_the_merge_sort_kernel(isa):
    host = only(choices(SORT.replace("{direction}", "LT"), isa))
    assert host.chosen == "host_sort" and host.declined == ()
    kernel = only(choices(SORT.replace("{direction}", "LE"), isa))
    assert kernel.chosen == "merge_sort"
    assert declined(kernel)["host_sort"] == "the comparator compares LE (a key sort takes LT or GT)"


def test_multi_output_fusions():
    records = choices((CORPUS / "layernorm_f32.hlo").read_text(), pipeline=True)
    assert {r.chosen for r in records} <= set(strategies.STRATEGY_NAMES)
    horizontal = only(choices("""
        HloModule h
        ENTRY main {
          a = f32[16,3] parameter(0)
          b = f32[3] parameter(1)
          na = f32[16,3] negate(a)
          nb = f32[3] negate(b)
          ea = f32[16,3] exponential(na)
          eb = f32[3] exponential(nb)
          ROOT t = (f32[16,3], f32[3]) tuple(ea, eb)
        }""", pipeline=True))
    assert horizontal.chosen == "per_output_loops"
    assert declined(horizontal)["loop_nest"] == "the outputs differ in shape"


def test_the_executable_exposes_its_records_also_from_the_disk_cache():
    text = (CORPUS / "softmax_f32.hlo").read_text()
    options = backend_cpu.CompileOptions(pipeline="default", cache=False)
    first = backend_cpu.compile(hlo.parse_module(text), options)
    again = backend_cpu.compile(hlo.parse_module(text), options)     # from the disk cache
    assert [r.chosen for r in first.kernel_strategies()] == ["row_normalize"]
    assert again.kernel_strategies() == first.kernel_strategies()
    kernel, chosen, rows = first.kernel_strategies()[0]
    assert kernel.startswith("k1_") and chosen == "row_normalize"
    assert ("gemm", "not a dot") in rows
    if first.target.runs_on_host:
        x = np.random.default_rng(0).standard_normal((32, 100)).astype(np.float32)
        np.testing.assert_allclose(again.run(x)[0], first.run(x)[0])


def test_records_follow_while_bodies():
    records = choices("""
        HloModule w
        cond {
          s = (s32[], f32[64,64]) parameter(0)
          i = s32[] get-tuple-element(s), index=0
          n = s32[] constant(3)
          ROOT lt = pred[] compare(i, n), direction=LT
        }
        body {
          s = (s32[], f32[64,64]) parameter(0)
          i = s32[] get-tuple-element(s), index=0
          one = s32[] constant(1)
          j = s32[] add(i, one)
          m = f32[64,64] get-tuple-element(s), index=1
          d = f32[64,64] dot(m, m), lhs_contracting_dims={1}, rhs_contracting_dims={0}
          ROOT r = (s32[], f32[64,64]) tuple(j, d)
        }
        ENTRY main {
          zero = s32[] constant(0)
          x = f32[64,64] parameter(0)
          s = (s32[], f32[64,64]) tuple(zero, x)
          ROOT w = (s32[], f32[64,64]) while(s), condition=cond, body=body
        }""")
    assert "gemm" in [r.chosen for r in records]
    assert all(r.chosen in strategies.STRATEGY_NAMES for r in records)


@pytest.mark.parametrize("name", ["attention_block", "conv2d_grad", "argsort_2d",
                                  "reduce_mean_var_f32", "rmsnorm_f32"])
def test_every_record_declines_only_the_rows_before_its_choice(name):
    names = strategies.STRATEGY_NAMES
    for pipeline in (False, True):
        for record in choices((CORPUS / f"{name}.hlo").read_text(), pipeline=pipeline):
            before = names[:names.index(record.chosen)]
            assert [n for n, _ in record.declined] == [n for n in before
                                                       if n in dict(record.declined)]
            assert all(reason for _, reason in record.declined)
