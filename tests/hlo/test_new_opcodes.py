"""The evaluator on the opcodes of issue 17, against numpy written by hand.

reduce-precision against float16/bfloat16 rounding, topk against a sort,
cholesky and triangular-solve against numpy.linalg, fft against numpy.fft, the
batch norms against their formulas, map, stochastic-convert by hand, rng's
documented generator, the scheduling wrappers, and the text of every new op
printed back as parsed. (rng-bit-generator against XLA's bits:
tests/backend_cpu/test_rng_bit_generator.py.)
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo
from xlapy.hlo.eval_common import round_to_bf16

RNG = np.random.default_rng(7)


def run(text, *args):
    return hlo.evaluate(hlo.parse_module(text), list(args))


def test_reduce_precision_is_f16_and_bf16_rounding():
    x = (RNG.standard_normal(1000) * 100).astype(np.float32)
    x = np.concatenate([x, np.float32([65504, 65519, 65520, 1e6, -1e6, 6.1e-5, 1e-6, -1e-8,
                                       np.inf, -np.inf, 0, -0.0])])
    text = """HloModule m
ENTRY e {
  x = f32[1012] parameter(0)
  h = f32[1012] reduce-precision(x), exponent_bits=5, mantissa_bits=10
  b = f32[1012] reduce-precision(x), exponent_bits=8, mantissa_bits=7
  ROOT t = (f32[1012], f32[1012]) tuple(h, b)
}"""
    half, bf = run(text, x)
    with np.errstate(over="ignore"):
        as_half = x.astype(np.float16).astype(np.float32)
    normal = np.abs(as_half) >= np.finfo(np.float16).tiny
    np.testing.assert_array_equal(half[normal | np.isinf(as_half)], as_half[normal | np.isinf(as_half)])
    assert np.all(half[~normal & np.isfinite(as_half)] == 0)       # f16 denormals -> 0
    np.testing.assert_array_equal(bf, round_to_bf16(x))


def test_reduce_precision_keeps_nan_and_zero_mantissa_gives_inf_for_nan():
    nan = np.float32(np.nan)
    text = """HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  a = f32[3] reduce-precision(x), exponent_bits=5, mantissa_bits=2
  b = f32[3] reduce-precision(x), exponent_bits=5, mantissa_bits=0
  ROOT t = (f32[3], f32[3]) tuple(a, b)
}"""
    a, b = run(text, np.array([nan, 1.75, 1.5], np.float32))
    assert np.isnan(a[0]) and a[1] == 1.75 and a[2] == 1.5
    # No mantissa bit: NaN becomes inf, 1.75 rounds to 2, 1.5 (a tie) to even 2.
    assert b[0] == np.inf and b[1] == 2 and b[2] == 2


def test_map():
    text = """HloModule m
f {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  two = s32[] constant(2)
  m = s32[] multiply(a, two)
  ROOT s = s32[] subtract(m, b)
}
ENTRY e {
  x = s32[2,3] parameter(0)
  y = s32[2,3] parameter(1)
  ROOT r = s32[2,3] map(x, y), dimensions={0,1}, to_apply=f
}"""
    x, y = np.arange(6, dtype=np.int32).reshape(2, 3), np.full((2, 3), 5, np.int32)
    np.testing.assert_array_equal(run(text, x, y)[0], 2 * x - y)


def test_topk_orders_like_xla():
    x = np.array([[1, np.nan, 3, -0.0, 0.0, 3, -np.inf]], np.float32)
    text = """HloModule m
ENTRY e {
  x = f32[1,7] parameter(0)
  ROOT t = (f32[1,7], s32[1,7]) topk(x), k=7, largest=true
}"""
    values, indices = run(text, x)
    # JAX's lax.top_k on XLA CPU: [nan, 3, 3, 1, 0, -0, -inf], indices [1, 2, 5, 0, 4, 3, 6].
    np.testing.assert_array_equal(indices, [[1, 2, 5, 0, 4, 3, 6]])
    assert np.isnan(values[0, 0]) and np.signbit(values[0, 5]) and not np.signbit(values[0, 4])
    smallest = run(text.replace("k=7, largest=true", "k=3, largest=false")
                   .replace("(f32[1,7], s32[1,7])", "(f32[1,3], s32[1,3])"), x)
    np.testing.assert_array_equal(smallest[1], [[6, 3, 4]])


def test_custom_call_topk_and_refusal():
    text = """HloModule m
ENTRY e {
  x = f32[2,5] parameter(0)
  ROOT t = (f32[2,2], s32[2,2]) custom-call(x), custom_call_target="TopK"
}"""
    x = np.array([[5, 1, 4, 2, 3], [0, 9, 8, 9, 1]], np.float32)
    values, indices = run(text, x)
    np.testing.assert_array_equal(values, [[5, 4], [9, 9]])
    np.testing.assert_array_equal(indices, [[0, 2], [1, 3]])
    with pytest.raises(hlo.EvaluationError, match="unsupported custom-call target 'nope'"):
        run(text.replace('"TopK"', '"nope"'), x)


def _spd(n, batch=()):
    a = RNG.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_matches_numpy_and_fails_to_nan(lower):
    a = _spd(5, (3,))
    a[2, 1, 1] = -100.0
    # Garbage in the triangle that is not read.
    junk = np.triu(np.full((5, 5), 7.0), 1)
    given = a + (junk if lower else junk.T)
    text = f"""HloModule m
ENTRY e {{
  a = f64[3,5,5] parameter(0)
  ROOT l = f64[3,5,5] cholesky(a), lower={str(lower).lower()}
}}"""
    (l,) = run(text, given)
    for i in range(2):
        ref = np.linalg.cholesky(a[i])
        np.testing.assert_allclose(l[i], ref if lower else ref.T, rtol=1e-12, atol=1e-12)
    assert np.isnan(l[2]).all()


def test_cholesky_complex_hermitian():
    b = RNG.standard_normal((4, 4)) + 1j * RNG.standard_normal((4, 4))
    a = (b @ b.conj().T + 4 * np.eye(4)).astype(np.complex128)
    (l,) = run("""HloModule m
ENTRY e {
  a = c128[4,4] parameter(0)
  ROOT l = c128[4,4] cholesky(a), lower=true
}""", a)
    np.testing.assert_allclose(l, np.linalg.cholesky(a), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
@pytest.mark.parametrize("unit", [True, False])
def test_triangular_solve_matches_numpy(left, lower, transpose, unit):
    a = RNG.standard_normal((2, 4, 4)) + 4 * np.eye(4)
    b = RNG.standard_normal((2, 4, 3) if left else (2, 3, 4))
    text = f"""HloModule m
ENTRY e {{
  a = f64[2,4,4] parameter(0)
  b = f64[2,{"4,3" if left else "3,4"}] parameter(1)
  ROOT x = f64[2,{"4,3" if left else "3,4"}] triangular-solve(a, b), left_side={str(left).lower()}, lower={str(lower).lower()}, unit_diagonal={str(unit).lower()}, transpose_a={transpose}
}}"""
    (x,) = run(text, a, b)
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        tri[:, np.arange(4), np.arange(4)] = 1
    op = tri if transpose == "NO_TRANSPOSE" else np.swapaxes(tri, -1, -2)
    if left:
        np.testing.assert_allclose(op @ x, b, rtol=1e-10, atol=1e-10)
    else:
        np.testing.assert_allclose(x @ op, b, rtol=1e-10, atol=1e-10)


def test_fft_kinds_match_numpy():
    x = (RNG.standard_normal((3, 8)) + 1j * RNG.standard_normal((3, 8))).astype(np.complex64)
    r = RNG.standard_normal((3, 8)).astype(np.float32)
    text = """HloModule m
ENTRY e {
  x = c64[3,8] parameter(0)
  r = f32[3,8] parameter(1)
  f = c64[3,8] fft(x), fft_type=FFT, fft_length={8}
  i = c64[3,8] fft(x), fft_type=IFFT, fft_length={3,8}
  rf = c64[3,5] fft(r), fft_type=RFFT, fft_length={8}
  ir = f32[3,8] fft(rf), fft_type=IRFFT, fft_length={8}
  ROOT t = (c64[3,8], c64[3,8], c64[3,5], f32[3,8]) tuple(f, i, rf, ir)
}"""
    f, i, rf, ir = run(text, x, r)
    np.testing.assert_allclose(f, np.fft.fft(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(i, np.fft.ifft2(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rf, np.fft.rfft(r), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ir, r, rtol=1e-5, atol=1e-5)
    assert f.dtype == np.complex64 and ir.dtype == np.float32


def test_batch_norm_formulas():
    x = RNG.standard_normal((6, 2, 3))
    scale, offset, g = RNG.standard_normal(2), RNG.standard_normal(2), RNG.standard_normal((6, 2, 3))
    text = """HloModule m
ENTRY e {
  x = f64[6,2,3] parameter(0)
  s = f64[2] parameter(1)
  o = f64[2] parameter(2)
  g = f64[6,2,3] parameter(3)
  t = (f64[6,2,3], f64[2], f64[2]) batch-norm-training(x, s, o), epsilon=0.5, feature_index=1
  m = f64[2] get-tuple-element(t), index=1
  v = f64[2] get-tuple-element(t), index=2
  y = f64[6,2,3] get-tuple-element(t), index=0
  inf = f64[6,2,3] batch-norm-inference(x, s, o, m, v), epsilon=0.5, feature_index=1
  d = (f64[6,2,3], f64[2], f64[2]) batch-norm-grad(x, s, m, v, g), epsilon=0.5, feature_index=1
  dx = f64[6,2,3] get-tuple-element(d), index=0
  ds = f64[2] get-tuple-element(d), index=1
  do = f64[2] get-tuple-element(d), index=2
  ROOT r = (f64[6,2,3], f64[2], f64[2], f64[6,2,3], f64[6,2,3], f64[2], f64[2]) tuple(y, m, v, inf, dx, ds, do)
}"""
    y, m, v, inf, dx, ds, do = run(text, x, scale, offset, g)
    mean = x.mean(axis=(0, 2))
    var = x.var(axis=(0, 2))
    b = (slice(None), None)
    xhat = (x - mean[b]) / np.sqrt(var[b] + 0.5)
    np.testing.assert_allclose(m, mean, rtol=1e-12)
    np.testing.assert_allclose(v, var, rtol=1e-12)
    np.testing.assert_allclose(y, xhat * scale[b] + offset[b], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(inf, y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(do, g.sum(axis=(0, 2)), rtol=1e-12)
    np.testing.assert_allclose(ds, (g * xhat).sum(axis=(0, 2)), rtol=1e-12)
    # dx by finite differences of sum(g * y(x)) with the batch statistics recomputed.
    eps, idx = 1e-6, (3, 1, 2)
    def loss(x_):
        mu, sd = x_.mean(axis=(0, 2)), np.sqrt(x_.var(axis=(0, 2)) + 0.5)
        return np.sum(g * ((x_ - mu[b]) / sd[b] * scale[b] + offset[b]))
    up, down = x.copy(), x.copy()
    up[idx] += eps
    down[idx] -= eps
    np.testing.assert_allclose(dx[idx], (loss(up) - loss(down)) / (2 * eps), rtol=1e-6)


def test_stochastic_convert_by_hand():
    x = np.array([1.25, -1.25, 2.5, np.nan, np.inf, -np.inf, 300, -300, 127.9, 0.75], np.float32)
    r = np.array([2**30, 2**30 - 1, 2**31, 0, 0, 0, 0, 0, 0, 2**31], np.uint32)
    (y,) = run("""HloModule m
ENTRY e {
  x = f32[10] parameter(0)
  r = u32[10] parameter(1)
  ROOT y = s8[10] stochastic-convert(x, r)
}""", x, r)
    # 1.25 rounds up iff r < 0.25 * 2^32; NaN -> 0; saturating at +-127/-128.
    np.testing.assert_array_equal(y, [1, -2, 2, 0, 127, -128, 127, -128, 127, 1])


def test_rng_is_a_documented_deterministic_generator():
    text = """HloModule m
ENTRY e {
  a = f32[] constant(2)
  b = f32[] constant(4)
  u = f32[1000] rng(a, b), distribution=rng_uniform
  n = f32[1000] rng(a, b), distribution=rng_normal
  ROOT t = (f32[1000], f32[1000]) tuple(u, n)
}"""
    u, n = run(text)
    assert u.min() >= 2 and u.max() < 4 and abs(u.mean() - 3) < 0.1
    assert abs(n.mean() - 2) < 0.5 and abs(n.std() - 4) < 0.5
    again = run(text)
    assert u.tobytes() == again[0].tobytes() and n.tobytes() == again[1].tobytes()
    assert u.tobytes() != n.tobytes()            # keyed by the instruction's name


def test_scheduling_wrappers_pass_values_through():
    text = """HloModule m
wrapped {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
ENTRY e {
  x = f32[4] parameter(0)
  s = ((f32[4]), f32[4], s32[]) async-start(x), calls=wrapped
  d = f32[4] async-done(s)
  cs = (f32[4], f32[4], u32[]) copy-start(d)
  c = f32[4] copy-done(cs)
  t = token[] after-all()
  ROOT a = f32[4] add-dependency(c, t)
}"""
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run(text, x)[0], -x)


TEXTS = [
    "r = f32[4]{0} reduce-precision(f32[4]{0} x), exponent_bits=5, mantissa_bits=10",
    "r = (f32[2,3]{1,0}, s32[2,3]{1,0}) topk(f32[2,9]{1,0} y), k=3, largest=false",
    "r = c64[4,8]{1,0} fft(c64[4,8]{1,0} z), fft_type=IFFT, fft_length={4,8}",
    "r = (u64[2]{0}, u32[4]{0}) rng-bit-generator(u64[2]{0} s), algorithm=rng_three_fry",
]


@pytest.mark.parametrize("line", TEXTS)
def test_new_ops_print_back_as_parsed(line):
    text = f"""HloModule m, entry_computation_layout={{()->()}}

ENTRY %e () -> () {{
  %x = f32[4]{{0}} parameter(0)
  %y = f32[2,9]{{1,0}} parameter(1)
  %z = c64[4,8]{{1,0}} parameter(2)
  %s = u64[2]{{0}} parameter(3)
  {line}
  ROOT %t = () tuple()
}}"""
    module = hlo.parse_module(text)
    printed = module.to_text()
    assert hlo.parse_module(printed).to_text() == printed
    for attribute in line.split("), ", 1)[1].split(", "):
        assert attribute in printed
