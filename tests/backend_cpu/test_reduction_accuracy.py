"""Long float sums keep O(log n) rounding error on every reduction path (elemental/pairwise_sum.py).

References are exact or f64 sums (math.fsum, numpy in float64), not the evaluator's
output alone. Each case names the kernel shape it reaches:

- generator: a reduce computed per output element (elemental/reduction.py), the loop
  vectorized by LLVM; a full reduce to a scalar, rows, several reduced dims;
- column: the streaming column reduce (emitters/column_reduce.py), the input's minor dim
  kept, including kept dims between reduced ones and sibling reduces;
- row on vectors: a reduce hoisted out of a streamed loop nest (elemental/vector_gen.py's
  emit_row_reduce), and softmax rows (emitters/row_normalize.py), on vectors or scalar.

Before blocking, a 1M-element f32 sum of 0.1s was off by 2.6e-4 (relative) and f32
accumulators stopped at 2^24 (2^30 ones summed to 2^29, 654,704,640 ones to 2^29).
The bounds here (1e-6 relative for f32 unless said otherwise) hold with blocks of
64 additions per lane combined pairwise: the simulated scheme gives ~6e-7 on the
worst case (equal values), ~1e-7 on random ones.
"""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import runtime
from tests.backend_cpu.helpers import check_against_evaluator, compiled, uniquify

F32_BOUND = 1e-6


def _add(t: str) -> str:
    return f"""add_{t} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
"""


def reduce_text(t: str, dims, reduced, init: str = "0", expr: str | None = None) -> str:
    """reduce(x) (or reduce(expr(x)) in a fusion) over `reduced` of t[dims]."""
    shape = f"{t}[{','.join(map(str, dims))}]"
    out = f"{t}[{','.join(str(n) for d, n in enumerate(dims) if d not in reduced)}]"
    red = ",".join(map(str, reduced))
    if expr is None:
        return f"""HloModule sum
{_add(t)}
ENTRY e {{
  x = {shape} parameter(0)
  z = {t}[] constant({init})
  ROOT r = {out} reduce(x, z), dimensions={{{red}}}, to_apply=add_{t}
}}"""
    return f"""HloModule sum
{_add(t)}
fused {{
  x = {shape} parameter(0)
  y = {shape} {expr}
  z = {t}[] constant({init})
  ROOT r = {out} reduce(y, z), dimensions={{{red}}}, to_apply=add_{t}
}}
ENTRY e {{
  x = {shape} parameter(0)
  ROOT f = {out} fusion(x), kind=kInput, calls=fused
}}"""


def run(text: str, *args) -> np.ndarray:
    return compiled(text)[1].run(*args)[0]


def rel_error(actual, exact) -> float:
    actual = np.asarray(actual, np.float64)
    exact = np.asarray(exact, np.float64)
    return float(np.max(np.abs(actual - exact) / np.maximum(np.abs(exact), 1e-300)))


def data(kind: str, shape, dtype=np.float32, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "tenths":          # equal values: every rounding error has one sign
        return np.full(shape, 0.1, dtype)
    if kind == "uniform":
        return rng.random(shape).astype(dtype)
    if kind == "shifted":         # positive with spread
        return (rng.standard_normal(shape) + 3).astype(dtype)
    raise ValueError(kind)


# --- generator: a reduce per output element ----------------------------------------------

@pytest.mark.parametrize("n", [1 << 20, 1_000_003])
@pytest.mark.parametrize("kind", ["tenths", "uniform", "shifted"])
def test_million_element_f32_sum(n, kind):
    x = data(kind, n, seed=n)
    out = run(reduce_text("f32", [n], [0]), x)
    assert rel_error(out, math.fsum(x.astype(np.float64))) < F32_BOUND


def test_f32_sum_with_an_init_value():
    n = 1 << 20
    x = data("tenths", n)
    out = run(reduce_text("f32", [n], [0], init="1000.5"), x)
    assert rel_error(out, 1000.5 + math.fsum(x.astype(np.float64))) < F32_BOUND


def test_f64_sum_of_a_million():
    x = data("shifted", 1 << 20, np.float64, seed=5)
    out = run(reduce_text("f64", [1 << 20], [0]), x)
    assert rel_error(out, math.fsum(x)) < 1e-14


@pytest.mark.parametrize("n", [100_000, 1 << 17])
def test_f16_sum_is_rounded_once(n):
    """f16 sums accumulate in f32: the only error that counts is the last rounding
    (a chain of f16 additions of 0.1 would stop near 256)."""
    x = np.full(n, 0.1, np.float16)
    out = run(reduce_text("f16", [n], [0]), x)
    exact = float(np.float16(0.1)) * n
    assert out.dtype == np.float16
    assert rel_error(out, exact) <= 2.0 ** -11


def test_f16_product_is_rounded_once():
    x = np.full(200, 1.01, np.float16)
    text = reduce_text("f16", [200], [0], init="1").replace("add(a, b)", "multiply(a, b)")
    out = run(text, x)
    assert rel_error(out, float(np.float16(1.01)) ** 200) <= 2.0 ** -11


@pytest.mark.parametrize("dims,reduced", [
    ([8, 300_000], [1]),              # long rows
    ([1000, 1000], [0, 1]),           # all dims, the inner one short of a block
    ([64, 100, 300], [0, 2]),         # a kept dim between the reduced ones
    ([2, 3, 5, 7, 11, 13, 17], [0, 1, 2, 3, 4, 5, 6]),   # many small dims
    ([300_001, 3], [0, 1]),           # a short minor dim (scalar inner loop)
])
def test_generator_sums_over_several_dims(dims, reduced):
    x = data("tenths", dims)
    out = run(reduce_text("f32", dims, reduced), x)
    exact = x.astype(np.float64).sum(axis=tuple(reduced))
    assert rel_error(out, exact) < F32_BOUND


def test_fused_input_expression():
    x = data("uniform", (4, 500_000), seed=2)
    out = run(reduce_text("f32", [4, 500_000], [1], expr="multiply(x, x)"), x)
    exact = (x.astype(np.float64) ** 2).sum(axis=1)
    assert rel_error(out, exact) < F32_BOUND


# --- 2^30 ones from a broadcast: no 4 GiB input --------------------------------------------

def _ones_fusion(dims, reduced) -> str:
    shape = f"f32[{','.join(map(str, dims))}]"
    return f"""HloModule ones
{_add("f32")}
fused {{
  one = f32[] constant(1)
  p = {shape} broadcast(one), dimensions={{}}
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={{{','.join(map(str, reduced))}}}, to_apply=add_f32
}}
ENTRY e {{
  ROOT f = f32[] fusion(), kind=kInput, calls=fused
}}"""


@pytest.mark.parametrize("dims", [[1 << 30], [1 << 15, 1 << 15], [1024, 1024, 1024],
                                  [654_704_640]])
def test_ones_past_two_to_the_24(dims):
    """f32 accumulators that only grew past 2^24 by adding ones would stop there."""
    out = run(_ones_fusion(dims, list(range(len(dims)))))
    assert out == np.float32(np.prod(dims))


def test_ones_through_the_default_pipeline():
    """The same sum written unfused: the pipeline fuses the broadcast into the reduce
    (no 4 GiB buffer) and does not fold it into a multiplication."""
    text = f"""HloModule ones
{_add("f32")}
ENTRY e {{
  one = f32[] constant(1)
  p = f32[1073741824] broadcast(one), dimensions={{}}
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={{0}}, to_apply=add_f32
}}"""
    exe = backend_cpu.compile(hlo.parse_module(text), backend_cpu.CompileOptions(pipeline="default"))
    optimized = exe.as_hlo_text()
    assert "broadcast" in optimized and "multiply" not in optimized and "fusion(" in optimized
    assert exe.run()[0] == np.float32(2 ** 30)


# --- column reduces --------------------------------------------------------------------------

@pytest.mark.parametrize("dims,reduced", [
    ([300_000, 16], [0]),             # long columns
    ([1037, 96], [0]),                # a short last block of rows
    ([3, 70_000, 33], [1]),           # a kept dim outside the rows
    ([300, 200, 16], [0, 1]),         # two reduced dims, blocks cut in the outer one
    ([100, 3, 700, 16], [0, 2]),      # a kept dim between the reduced ones
])
def test_column_sums(dims, reduced):
    x = data("tenths", dims)
    out = run(reduce_text("f32", dims, reduced), x)
    exact = x.astype(np.float64).sum(axis=tuple(reduced))
    assert rel_error(out, exact) < F32_BOUND


def test_column_sum_of_random_values_matches_the_evaluator():
    x = data("shifted", (20_000, 24), seed=9)
    check_against_evaluator(reduce_text("f32", [20_000, 24], [0], init="2.5"), [x])


def test_column_sums_f16_and_f64():
    x16 = np.full((50_000, 8), 0.1, np.float16)
    out = run(reduce_text("f16", [50_000, 8], [0]), x16)
    assert rel_error(out, np.full(8, float(np.float16(0.1)) * 50_000)) <= 2.0 ** -11
    p16 = np.full((300, 8), 1.01, np.float16)
    text = reduce_text("f16", [300, 8], [0], init="1").replace("add(a, b)", "multiply(a, b)")
    out = run(text, p16)
    assert rel_error(out, np.full(8, float(np.float16(1.01)) ** 300)) <= 2.0 ** -11
    x64 = data("shifted", (200_000, 8), np.float64, seed=3)
    out = run(reduce_text("f64", [200_000, 8], [0]), x64)
    assert rel_error(out, [math.fsum(c) for c in x64.T]) < 1e-14


# A column sum beside outputs of another shape (as XLA's horizontal fusion of a bias
# gradient with constants): no streaming walk, the reduce is a generator per output
# element whose inner loop is strided (one accumulator chain: small blocks).
MIXED_TUPLE = f"""HloModule mixed
{_add("f32")}
fc {{
  x = f32[64,512,16] parameter(0)
  z = f32[] constant(0)
  zb = f32[16] broadcast(z), dimensions={{}}
  s = f32[16] reduce(x, z), dimensions={{0,1}}, to_apply=add_f32
  a = f32[16] add(zb, s)
  h = f32[] constant(-0.5)
  hb = f32[64,512,1] broadcast(h), dimensions={{}}
  ROOT t = (f32[64,512,1], f32[16]) tuple(hb, a)
}}
ENTRY e {{
  x = f32[64,512,16] parameter(0)
  ROOT f = (f32[64,512,1], f32[16]) fusion(x), kind=kLoop, calls=fc
}}"""


def test_strided_column_sum_in_a_mixed_tuple():
    x = data("tenths", (64, 512, 16))
    out = compiled(MIXED_TUPLE)[1].run(x)[1]
    assert rel_error(out, x.astype(np.float64).sum(axis=(0, 1))) < F32_BOUND


SIBLINGS = f"""HloModule moments
{_add("f32")}
fc {{
  x = f32[200000,16] parameter(0)
  sq = f32[200000,16] multiply(x, x)
  z = f32[] constant(0)
  s = f32[16] reduce(x, z), dimensions={{0}}, to_apply=add_f32
  q = f32[16] reduce(sq, z), dimensions={{0}}, to_apply=add_f32
  n = f32[] constant(200000)
  nb = f32[16] broadcast(n), dimensions={{}}
  m = f32[16] divide(s, nb)
  v = f32[16] divide(q, nb)
  ROOT t = (f32[16], f32[16]) tuple(m, v)
}}
ENTRY e {{
  x = f32[200000,16] parameter(0)
  ROOT f = (f32[16], f32[16]) fusion(x), kind=kInput, calls=fc
}}"""


def test_sibling_column_sums_with_an_epilogue():
    x = data("shifted", (200_000, 16), seed=4)
    mean, meansq = compiled(SIBLINGS)[1].run(x)
    x64 = x.astype(np.float64)
    assert rel_error(mean, x64.mean(axis=0)) < F32_BOUND
    assert rel_error(meansq, (x64 ** 2).mean(axis=0)) < F32_BOUND


def test_blocked_column_sums_do_not_depend_on_the_thread_count():
    text = reduce_text("f32", [5000, 96], [0])
    x = data("shifted", (5000, 96), seed=6)
    results = []
    saved = runtime.get_options().intra_op_threads
    for threads in (1, 2):
        runtime.configure(intra_op_threads=threads)
        try:
            exe = backend_cpu.compile(hlo.parse_module(uniquify(text)),
                                      backend_cpu.CompileOptions(cache=False, disk_cache=False))
        finally:
            runtime.configure(intra_op_threads=saved)
        results.append(exe.run(x)[0])
    np.testing.assert_array_equal(results[0], results[1])
    assert rel_error(results[0], x.astype(np.float64).sum(axis=0)) < F32_BOUND


# --- rows on vectors: hoisted reduces and softmax rows -------------------------------------

def _broadcast_sum(rows: int, cols: int) -> str:
    """broadcast(sum(x)) per row: a hoisted row sum inside a loop nest whose output
    (16 MiB) streams, so the sum runs on vectors (emit_row_reduce); every element of
    an output row is the row's sum, as computed."""
    return f"""HloModule rowsum
{_add("f32")}
fused {{
  x = f32[{rows},{cols}] parameter(0)
  z = f32[] constant(0)
  s = f32[{rows}] reduce(x, z), dimensions={{1}}, to_apply=add_f32
  ROOT b = f32[{rows},{cols}] broadcast(s), dimensions={{0}}
}}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  ROOT f = f32[{rows},{cols}] fusion(x), kind=kLoop, calls=fused
}}"""


@pytest.mark.parametrize("rows,cols", [(64, 65536), (16, 262_147), (4, 1 << 20)])
def test_hoisted_row_sums_on_vectors(rows, cols):
    x = data("tenths", (rows, cols))
    exe = compiled(_broadcast_sum(rows, cols))[1]
    assert exe._light_pipeline            # every loop written on vectors
    out = exe.run(x)[0]
    assert rel_error(out[:, 0], x.astype(np.float64).sum(axis=1)) < F32_BOUND


def _softmax(rows: int, cols: int) -> str:
    return f"""HloModule softmax
{_add("f32")}
max {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
fused {{
  x = f32[{rows},{cols}] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[{rows}] reduce(x, ninf), dimensions={{1}}, to_apply=max
  mb = f32[{rows},{cols}] broadcast(mx), dimensions={{0}}
  d = f32[{rows},{cols}] subtract(x, mb)
  ex = f32[{rows},{cols}] exponential(d)
  z = f32[] constant(0)
  sm = f32[{rows}] reduce(ex, z), dimensions={{1}}, to_apply=add_f32
  sb = f32[{rows},{cols}] broadcast(sm), dimensions={{0}}
  ROOT o = f32[{rows},{cols}] divide(ex, sb)
}}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  ROOT f = f32[{rows},{cols}] fusion(x), kind=kLoop, calls=fused
}}"""


@pytest.mark.parametrize("rows,cols", [(64, 65536), (4, 65536), (3, 100_003)],
                         ids=["vectors", "scalar-loop", "scalar-odd"])
def test_softmax_of_long_rows(rows, cols):
    """One element log(10) above the rest: the row sums ~0.1 * cols (a large output
    streams and sums on vectors, a small one in LLVM's loop). The bound adds exp's
    and the division's roundings to the sum's error (before blocking: 1.6e-5 to
    2.6e-4 on these rows)."""
    x = np.zeros((rows, cols), np.float32)
    x[:, 0] = np.log(10.0)
    out = compiled(_softmax(rows, cols))[1].run(x)[0]
    e = np.exp(x.astype(np.float64) - np.float32(np.log(10.0)))
    assert rel_error(out, e / e.sum(axis=1, keepdims=True)) < 2 * F32_BOUND


# --- what does not change ------------------------------------------------------------------

@pytest.mark.parametrize("dims,reduced", [([300_000], [0]), ([50_000, 16], [0]),
                                          ([4, 100_000], [1])], ids=["full", "column", "rows"])
def test_blocked_sums_keep_special_values(dims, reduced):
    """-0.0 sums stay -0.0 (blocks start from -0.0, not +0.0); inf and NaN propagate
    through the levels; init +0.0 turns a -0.0 sum into +0.0 (XLA: init + sum)."""
    text = reduce_text("f32", dims, reduced, init="-0")
    x = np.full(dims, -0.0, np.float32)
    out = run(text, x)
    assert np.all(out == 0) and np.all(np.signbit(out))
    plus = run(reduce_text("f32", dims, reduced, init="0"), x)
    assert np.all(plus == 0) and not np.any(np.signbit(plus))
    y = data("uniform", dims)
    flat = y.reshape(-1)
    flat[7] = np.inf                       # the first block
    flat[-3] = np.nan                      # the last one
    expected = y.astype(np.float64).sum(axis=tuple(reduced))
    np.testing.assert_array_equal(np.isnan(run(text, y)), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(run(text, y)), np.isinf(expected))


def test_integer_sums_stay_exact():
    """Integer sums are not blocked: exact (wrapping) in any order."""
    x = np.random.default_rng(1).integers(-2 ** 31, 2 ** 31, 1 << 20, dtype=np.int64)
    out = run(reduce_text("s32", [1 << 20], [0]), x.astype(np.int32))
    assert int(out) == (int(x.sum()) + 2 ** 31) % 2 ** 32 - 2 ** 31


def test_max_and_min_are_unchanged():
    x = data("shifted", (2, 300_000), seed=8)
    for op, ref in (("maximum", np.max), ("minimum", np.min)):
        text = reduce_text("f32", [2, 300_000], [1], init="0").replace("add(a, b)", f"{op}(a, b)")
        init = np.float32(0)
        np.testing.assert_array_equal(run(text, x),
                                      (np.maximum if op == "maximum" else np.minimum)(
                                          ref(x, axis=1), init))


# --- a transformer block's gradients against f64, next to XLA's ---------------------------

FROM_JAX = Path(__file__).parents[1] / "regressions" / "from_jax"


def _transformer_inputs():
    spec = importlib.util.spec_from_file_location(
        "transformer_block_inputs", FROM_JAX / "transformer_block_inputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_transformer_block_gradients_within_twice_xlas_error():
    """jax.grad of a transformer block (tests/regressions/from_jax/
    make_transformer_block_grad.py) in f32, against JAX's f64 gradients.

    Bound: the gradients that reductions make (biases and layernorm parameters:
    column sums over the 4096 rows, row sums over 64 features) have a normwise error
    ||g - g64|| / ||g64|| and an elementwise one (relative to the largest gradient)
    at most twice XLA's own f32 error on the same program, the project's goal.
    Measured when written: norm 0.8-1.3x, elementwise 0.7-1.5x on AVX-512, AVX2
    and SSE4.2; before blocked sums `b2` had 2.21x in norm and 3.43x elementwise,
    `bo` 3.06x elementwise. The weight gradients are GEMMs contracting the 4096 rows:
    1.2-1.4x XLA's error in norm on AVX-512, AVX2 and SSE4.2 since the GEMM's k blocks
    are at most 768 long on every target (before: 1.7-2.2x on AVX2, 2.2-3.1x on SSE4.2,
    whose 16-wide tiles got 3072-long blocks). `bk`'s gradient is 0 (softmax ignores
    a per-row constant): its absolute error gets twice XLA's.

    SSE4.2 (in CI's SSE4.2 replay since f32 column sums accumulate in f64): `b1` (the
    first MLP layer's bias: a column sum over the 4096 rows of dY * gelu'(pre),
    dY = r @ w2^T) had 2.05x XLA's elementwise error there (AVX2 1.84x, AVX-512
    1.34x) while column sums added 64-step f32 chains of 2-row pairs per block. Split
    by source (rms over the 128 columns, relative to max|b1|, SSE4.2 / AVX-512): the
    column reduce's own rounding 5.2e-8 / 5.0e-8, dY's GEMM (k = 64, one sequential
    chain; SSE4.2 rounds every product) 5.4e-8 / 4.7e-8, the pre-activation's error
    3.7e-8 / 3.8e-8, the fused elementwise roundings 1.8e-8 / 1.8e-8, tanh 0.9e-8 /
    0.8e-8 (XLA's whole error: 6.8e-8). With the f64 accumulator: 1.44x on SSE4.2,
    1.34x on AVX2 and AVX-512. Failures list every gradient over its bound."""
    names = _transformer_inputs().NAMES
    inputs = _transformer_inputs().leaves()
    module = hlo.parse_module((FROM_JAX / "transformer_block_grad.hlo").read_text())
    exe = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline="default"))
    ours = exe.run(*inputs)
    with np.load(FROM_JAX / "transformer_block_grad.npz") as data:
        xla = [data[f"xla{i}"] for i in range(len(names))]
        ref = [data[f"ref{i}"] for i in range(len(names))]
    over = []
    for name, g, x, r in zip(names, ours, xla, ref):
        g, x = np.asarray(g, np.float64), x.astype(np.float64)
        if name == "bk":
            ours_abs, xla_abs = np.abs(g - r).max(), np.abs(x - r).max()
            if ours_abs > 2 * xla_abs:
                over.append(f"{name} absolute: {ours_abs:.3g} vs XLA's {xla_abs:.3g}")
            continue
        norm, scale = np.linalg.norm(r), np.abs(r).max()
        ours_err, xla_err = np.linalg.norm(g - r) / norm, np.linalg.norm(x - r) / norm
        if ours_err > 2 * xla_err:
            over.append(f"{name} normwise: {ours_err:.3g} vs XLA's {xla_err:.3g} "
                        f"({ours_err / xla_err:.2f}x)")
        ours_max, xla_max = np.abs(g - r).max() / scale, np.abs(x - r).max() / scale
        if ours_max > 2 * xla_max:
            over.append(f"{name} elementwise: {ours_max:.3g} vs XLA's {xla_max:.3g} "
                        f"({ours_max / xla_max:.2f}x)")
    assert not over, "over twice XLA's error: " + "; ".join(over)
