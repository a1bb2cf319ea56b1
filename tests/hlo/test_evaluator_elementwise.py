"""Edge semantics of the elementwise ops, as XLA defines them.

Each table row is written out by hand (or computed with Python's own integers
and `math`), never by running the evaluator a second way.
"""
import math

import ml_dtypes
import numpy as np
import pytest

from xlapy.hlo import Shape
from tests.hlo.evaluator_util import run_op, run_text

INT_MIN, INT_MAX = -2**31, 2**31 - 1
nan, inf = float("nan"), float("inf")


def s32(*v):
    return np.array(v, dtype=np.int32)


def f32(*v):
    return np.array(v, dtype=np.float32)


# --- integer division ---------------------------------------------------------------

# (x, y, x / y, x % y): truncating, x/0 = -1, x%0 = x, INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0.
DIVISION_S32 = [
    (7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1),
    (5, 0, -1, 5), (-5, 0, -1, -5), (0, 0, -1, 0),
    (INT_MIN, -1, INT_MIN, 0), (INT_MIN, 1, INT_MIN, 0), (INT_MAX, -1, -INT_MAX, 0),
    (INT_MIN, 0, -1, INT_MIN), (-1, INT_MIN, 0, -1),
]


def test_signed_division_table():
    x, y, q, r = (s32(*col) for col in zip(*DIVISION_S32))
    np.testing.assert_array_equal(run_op("divide", x, y), q)
    np.testing.assert_array_equal(run_op("remainder", x, y), r)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64])
def test_signed_division_other_widths(dtype):
    lo = np.iinfo(dtype).min
    x = np.array([lo, lo, 9, -9, 3], dtype=dtype)
    y = np.array([-1, 0, 0, 4, -2], dtype=dtype)
    np.testing.assert_array_equal(run_op("divide", x, y), np.array([lo, -1, -1, -2, -1], dtype))
    np.testing.assert_array_equal(run_op("remainder", x, y), np.array([0, lo, 9, -1, 1], dtype))


def test_unsigned_division_by_zero_sets_all_bits():
    x = np.array([7, 10, 0xFFFFFFFF], dtype=np.uint32)
    y = np.array([0, 3, 2], dtype=np.uint32)
    np.testing.assert_array_equal(run_op("divide", x, y), np.array([0xFFFFFFFF, 3, 0x7FFFFFFF], np.uint32))
    np.testing.assert_array_equal(run_op("remainder", x, y), np.array([7, 1, 1], np.uint32))


def test_float_remainder_has_the_sign_of_the_dividend():
    out = run_op("remainder", f32(7.5, -7.5, 7.5, 1.0, inf), f32(2, 2, -2, 0, 1))
    np.testing.assert_array_equal(out[:3], f32(1.5, -1.5, 1.5))
    assert np.isnan(out[3]) and np.isnan(out[4])


# --- shifts --------------------------------------------------------------------------

SHIFT_AMOUNTS = [0, 1, 4, 31, 32, 33, 100, -1]


def _expected_shift(op, x, n, bits=32, signed=True):
    """XLA's shifts computed on Python integers."""
    mask = (1 << bits) - 1
    u = x & mask
    if n < 0 or n >= bits:          # the amount is read as unsigned: negative is over-wide
        if op == "shift-right-arithmetic":
            return -1 if x < 0 else 0
        return 0
    if op == "shift-left":
        v = (u << n) & mask
    elif op == "shift-right-logical":
        v = u >> n
    else:
        v = (x >> n) & mask
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


@pytest.mark.parametrize("op", ["shift-left", "shift-right-logical", "shift-right-arithmetic"])
@pytest.mark.parametrize("x", [-8, 5, INT_MIN, INT_MAX])
def test_shift_table_s32(op, x):
    xs = s32(*[x] * len(SHIFT_AMOUNTS))
    expected = s32(*[_expected_shift(op, x, n) for n in SHIFT_AMOUNTS])
    np.testing.assert_array_equal(run_op(op, xs, s32(*SHIFT_AMOUNTS)), expected)


@pytest.mark.parametrize("op", ["shift-left", "shift-right-logical", "shift-right-arithmetic"])
def test_shift_table_u8(op):
    amounts = [0, 1, 7, 8, 9, 255]
    x = 0b10110001
    # Arithmetic shifts see the bits as signed (0b10110001 is negative), results as u8.
    expected = [_expected_shift(op, x - 256 if op == "shift-right-arithmetic" else x, n, 8, False) & 0xFF
                for n in amounts]
    out = run_op(op, np.full(len(amounts), x, np.uint8), np.array(amounts, np.uint8))
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.uint8))


# --- max / min / clamp / select -------------------------------------------------------

def test_maximum_minimum_propagate_nan():
    a, b = f32(nan, 1, 2, -0.0, inf), f32(1, nan, 3, 0.0, -inf)
    mx, mn = run_op("maximum", a, b), run_op("minimum", a, b)
    assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()
    np.testing.assert_array_equal(mx[2:], f32(3, 0.0, inf))
    np.testing.assert_array_equal(mn[2:], f32(2, -0.0, -inf))


def test_integer_maximum_minimum():
    a, b = s32(INT_MIN, 5, -1), s32(INT_MAX, -5, -1)
    np.testing.assert_array_equal(run_op("maximum", a, b), s32(INT_MAX, 5, -1))
    np.testing.assert_array_equal(run_op("minimum", a, b), s32(INT_MIN, -5, -1))
    u = np.array([0x80000000, 1], np.uint32), np.array([1, 0xFFFFFFFF], np.uint32)
    np.testing.assert_array_equal(run_op("maximum", *u), np.array([0x80000000, 0xFFFFFFFF], np.uint32))


def test_clamp_and_select():
    lo, hi = np.float32(-1), np.float32(1)
    out = run_op("clamp", lo, f32(-5, 0.5, 7, nan), hi, result=Shape("f32", (4,)))
    np.testing.assert_array_equal(out[:3], f32(-1, 0.5, 1))
    assert np.isnan(out[3])
    pred = np.array([True, False, True])
    np.testing.assert_array_equal(run_op("select", pred, s32(1, 2, 3), s32(4, 5, 6), result=Shape("s32", (3,))),
                                  s32(1, 5, 3))


# --- conversions ----------------------------------------------------------------------

CONVERT_INPUTS = [nan, inf, -inf, 1e10, -1e10, 2.7, -2.7, -0.7, 0.7, 300.0, -300.0,
                  2147483520.0, -2147483648.0, 255.9, -1.0]


def _saturating(v, lo, hi):
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return hi if v > 0 else lo
    return min(max(math.trunc(v), lo), hi)


@pytest.mark.parametrize("target,np_type", [("s32", np.int32), ("s8", np.int8), ("u8", np.uint8),
                                            ("u32", np.uint32), ("s64", np.int64), ("u64", np.uint64)])
def test_float_to_int_saturates_and_nan_is_zero(target, np_type):
    info = np.iinfo(np_type)
    expected = np.array([_saturating(float(np.float32(v)), int(info.min), int(info.max))
                         for v in CONVERT_INPUTS], dtype=np_type)
    np.testing.assert_array_equal(run_op("convert", f32(*CONVERT_INPUTS), result=target), expected)


def test_int_to_int_wraps():
    x = s32(300, -1, 128, -129, INT_MIN)
    np.testing.assert_array_equal(run_op("convert", x, result="u8"), np.array([44, 255, 128, 127, 0], np.uint8))
    np.testing.assert_array_equal(run_op("convert", x, result="s8"), np.array([44, -1, -128, 127, 0], np.int8))
    np.testing.assert_array_equal(run_op("convert", np.array([255, 1], np.uint8), result="s8"),
                                  np.array([-1, 1], np.int8))


def test_convert_to_pred_is_not_equal_zero():
    np.testing.assert_array_equal(run_op("convert", f32(0, -0.0, nan, 0.5, -inf), result="pred"),
                                  [False, False, True, True, True])
    np.testing.assert_array_equal(run_op("convert", s32(0, 2, -1), result="pred"), [False, True, True])
    np.testing.assert_array_equal(run_op("convert", np.array([True, False]), result="f32"), f32(1, 0))


def test_f32_to_f16_overflows_to_inf_and_rounds_to_nearest():
    out = run_op("convert", f32(70000, -70000, 65504, 65519, 65520, 1e-8, 2049), result="f16")
    assert out.dtype == np.float16
    # 65519 rounds down to the largest f16, 65520 is the halfway point and rounds to inf.
    assert out.tolist() == [inf, -inf, 65504, 65504, inf, 0.0, 2048]


def test_bitcast_convert_same_and_different_widths():
    np.testing.assert_array_equal(run_op("bitcast-convert", f32(1.0, -2.0), result="u32"),
                                  np.array([0x3F800000, 0xC0000000], np.uint32))
    as_bytes = run_op("bitcast-convert", f32(1.0, -2.0), result=Shape("u8", (2, 4)))
    np.testing.assert_array_equal(as_bytes, [[0, 0, 0x80, 0x3F], [0, 0, 0, 0xC0]])
    back = run_op("bitcast-convert", as_bytes, result=Shape("f32", (2,)))
    np.testing.assert_array_equal(back, f32(1.0, -2.0))


# --- rounding and sign -------------------------------------------------------------------

ROUND_INPUTS = [0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.0, 1e20, -3.7, 3.2]
AFZ = [1, 2, 3, -1, -3, 0, -0.0, 1e20, -4, 3]
EVEN = [0, 2, 2, -0.0, -2, 0, -0.0, 1e20, -4, 3]


@pytest.mark.parametrize("op,expected", [("round-nearest-afz", AFZ), ("round-nearest-even", EVEN)])
def test_rounding_ties(op, expected):
    out = run_op(op, f32(*ROUND_INPUTS, nan, inf))
    np.testing.assert_array_equal(out[:-2], f32(*expected))
    np.testing.assert_array_equal(np.signbit(out[:-2]), np.signbit(f32(*expected)))
    assert np.isnan(out[-2]) and out[-1] == inf


def test_floor_ceil():
    x = f32(-1.5, -0.0, 0.3, 2.0)
    np.testing.assert_array_equal(run_op("floor", x), f32(-2, -0.0, 0, 2))
    np.testing.assert_array_equal(run_op("ceil", x), f32(-1, -0.0, 1, 2))


def test_sign_keeps_signed_zero_and_nan():
    out = run_op("sign", f32(-0.0, 0.0, nan, -3, 5, -inf))
    np.testing.assert_array_equal(out[[0, 1, 3, 4, 5]], f32(-0.0, 0.0, -1, 1, -1))
    assert np.signbit(out[0]) and not np.signbit(out[1]) and np.isnan(out[2])
    np.testing.assert_array_equal(run_op("sign", s32(INT_MIN, 0, 7)), s32(-1, 0, 1))


def test_is_finite():
    np.testing.assert_array_equal(run_op("is-finite", f32(1, inf, -inf, nan, -0.0), result="pred"),
                                  [True, False, False, False, True])


# --- transcendental functions ---------------------------------------------------------

GRID = [-3.5, -1.0, -0.25, -1e-3, 0.0, 1e-3, 0.3, 1.0, 2.5, 6.0]


def _logistic(v):
    return 1 / (1 + math.exp(-v))


@pytest.mark.parametrize("op,fn", [
    ("erf", math.erf), ("logistic", _logistic), ("exponential-minus-one", math.expm1),
    ("tanh", math.tanh), ("exponential", math.exp), ("sine", math.sin), ("cosine", math.cos),
    ("cbrt", lambda v: math.copysign(abs(v) ** (1 / 3), v))
])
@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2e-7), (np.float64, 1e-15)])
def test_unary_math_matches_python_math(op, fn, dtype, rtol):
    x = np.array(GRID, dtype=dtype)
    expected = np.array([fn(float(v)) for v in x], dtype=np.float64)
    np.testing.assert_allclose(run_op(op, x).astype(np.float64), expected, rtol=rtol, atol=1e-300)


def test_log1p_expm1_accurate_for_tiny_inputs():
    x = np.array([1e-10, -1e-12], dtype=np.float64)
    np.testing.assert_allclose(run_op("log-plus-one", x), [math.log1p(1e-10), math.log1p(-1e-12)], rtol=1e-15)
    np.testing.assert_allclose(run_op("exponential-minus-one", x), [math.expm1(1e-10), math.expm1(-1e-12)],
                               rtol=1e-15)


def test_roots_and_logs_special_values():
    np.testing.assert_array_equal(run_op("cbrt", f32(-27, 8, -0.0)), f32(-3, 2, -0.0))
    np.testing.assert_array_equal(run_op("rsqrt", f32(4, 0, inf)), f32(0.5, inf, 0))
    assert np.isnan(run_op("rsqrt", f32(-1))).all() and np.isnan(run_op("sqrt", f32(-1))).all()
    np.testing.assert_array_equal(run_op("log", f32(0, 1, inf)), f32(-inf, 0, inf))


def test_atan2_quadrants_and_power():
    y, x = f32(1, 1, -1, -1, 0, -0.0), f32(1, -1, -1, 1, -1, -1)
    expected = [math.atan2(float(a), float(b)) for a, b in zip(y, x)]
    np.testing.assert_allclose(run_op("atan2", y, x), f32(*expected), rtol=1e-7)
    out = run_op("power", f32(2, -8, 0, nan, 1, 4), f32(10, 1 / 3, -1, 0, nan, 0.5))
    assert out[0] == 1024 and np.isnan(out[1]) and out[2] == inf
    assert out[3] == 1 and out[4] == 1 and out[5] == 2      # C pow: x^0 = 1, 1^y = 1


def test_integer_power():
    base = s32(2, 3, -2, 1, -1, 2, 7, 0, 3)
    exponent = s32(10, 3, 3, -5, -1, -1, 0, 0, 21)
    # Negative exponents give 0 unless the base is 1; 3**21 wraps around 2**32.
    expected = [1024, 27, -8, 1, 0, 0, 1, 1, (3**21 + 2**31) % 2**32 - 2**31]
    np.testing.assert_array_equal(run_op("power", base, exponent), s32(*expected))


# --- bit ops ----------------------------------------------------------------------------

def test_popcnt_and_count_leading_zeros():
    x = s32(0, 1, -1, INT_MIN, 0x00F00000, 255)
    np.testing.assert_array_equal(run_op("popcnt", x), s32(0, 1, 32, 1, 4, 8))
    np.testing.assert_array_equal(run_op("count-leading-zeros", x), s32(32, 31, 0, 0, 8, 24))
    u = np.array([0, 1, 0x80, 0x0F], np.uint8)
    np.testing.assert_array_equal(run_op("count-leading-zeros", u), np.array([8, 7, 0, 4], np.uint8))
    q = np.array([1, 2**40], np.int64)
    np.testing.assert_array_equal(run_op("count-leading-zeros", q), np.array([63, 23], np.int64))


def test_not_is_logical_on_pred_and_bitwise_on_ints():
    np.testing.assert_array_equal(run_op("not", np.array([True, False])), [False, True])
    np.testing.assert_array_equal(run_op("not", s32(0, -1, 5)), s32(-1, 0, -6))
    np.testing.assert_array_equal(run_op("not", np.array([0, 0xF0], np.uint8)), np.array([255, 0x0F], np.uint8))


def test_integer_arithmetic_wraps():
    np.testing.assert_array_equal(run_op("add", s32(INT_MAX), s32(1)), s32(INT_MIN))
    np.testing.assert_array_equal(run_op("multiply", s32(65536), s32(65536)), s32(0))
    np.testing.assert_array_equal(run_op("negate", s32(INT_MIN)), s32(INT_MIN))
    np.testing.assert_array_equal(run_op("abs", s32(INT_MIN, -3)), s32(INT_MIN, 3))


# --- comparisons ------------------------------------------------------------------------

TOTAL_ORDER = [-nan, -inf, -1.0, -1e-30, -0.0, 0.0, 1e-30, 1.0, inf, nan]


@pytest.mark.parametrize("direction", ["LT", "LE", "GT", "GE", "EQ", "NE"])
def test_total_order_compare(direction):
    values = f32(*TOTAL_ORDER)
    values[0] = -np.abs(values[0])          # make sure the first NaN has its sign bit set
    i, j = np.meshgrid(np.arange(len(values)), np.arange(len(values)), indexing="ij")
    out = run_op("compare", values[i.ravel()], values[j.ravel()], result="pred",
                 direction=direction, type="TOTALORDER")
    expected = {"LT": i < j, "LE": i <= j, "GT": i > j, "GE": i >= j, "EQ": i == j, "NE": i != j}[direction]
    np.testing.assert_array_equal(out, expected.ravel())


def test_ieee_compare_nan_unordered_and_signed_zeros_equal():
    a, b = f32(nan, nan, -0.0, 1), f32(nan, 1, 0.0, 1)
    np.testing.assert_array_equal(run_op("compare", a, b, result="pred", direction="EQ"),
                                  [False, False, True, True])
    np.testing.assert_array_equal(run_op("compare", a, b, result="pred", direction="NE"),
                                  [True, True, False, False])
    np.testing.assert_array_equal(run_op("compare", a, b, result="pred", direction="GE", type="FLOAT"),
                                  [False, False, True, True])


def test_unsigned_compare_orders_above_2_pow_31():
    a = np.array([0x80000000, 0, 0xFFFFFFFF], np.uint32)
    b = np.array([1, 0xFFFFFFFF, 0x7FFFFFFF], np.uint32)
    np.testing.assert_array_equal(run_op("compare", a, b, result="pred", direction="GT", type="UNSIGNED"),
                                  [True, False, True])


# --- denormals and f16 ------------------------------------------------------------------

def test_denormals_flushed_in_float_arithmetic():
    x = f32(1e-40, -1e-40)
    assert run_op("log", x)[0] == -inf
    assert np.isfinite(run_op("log", x, flush_denormals=False)[0])
    assert run_op("divide", f32(1), f32(1e-40))[0] == inf
    assert run_op("add", x, f32(0, 0)).tolist() == [0, 0]
    assert run_op("floor", f32(-1e-40))[0] == 0 and run_op("floor", f32(-1e-40), flush_denormals=False)[0] == -1
    assert run_op("compare", f32(1e-40), f32(0), result="pred", direction="EQ")[0]
    assert run_op("log", np.array([1e-310]))[0] == -inf          # f64 too


def test_data_movement_and_sign_bit_ops_keep_denormals():
    x = f32(1e-40, -1e-40)
    np.testing.assert_array_equal(run_op("copy", x), x)
    np.testing.assert_array_equal(run_op("negate", x), -x)
    np.testing.assert_array_equal(run_op("abs", x), np.abs(x))
    np.testing.assert_array_equal(run_op("reshape", x, result=Shape("f32", (2, 1))), x.reshape(2, 1))


def test_f16_denormals_are_not_flushed():
    x = np.array([1e-6, 3e-7], np.float16)          # f16 denormals, normal in f32
    np.testing.assert_array_equal(run_op("multiply", x, np.ones(2, np.float16)), x)


def test_f16_rounds_after_every_op():
    # 2048 + 1 = 2049 is not an f16 (spacing 2 there): each op rounds, so the result is 0.
    out = run_text("""
        HloModule m
        ENTRY e {
          a = f16[] parameter(0)
          b = f16[] parameter(1)
          s = f16[] add(a, b)
          ROOT d = f16[] subtract(s, a)
        }""", np.float16(2048), np.float16(1))
    assert out[0] == 0
    p = run_op("multiply", np.array([0.1], np.float16), np.array([3], np.float16))
    assert p[0] == np.float16(np.float32(np.float16(0.1)) * np.float32(3))


def test_bf16_rounds_to_nearest_even_after_every_op():
    # bf16 has 8 significant bits: 1 + 2**-8 is a tie (to 1), 1 + 3 * 2**-8 a tie (to 1 + 2**-6).
    out = run_text("""
        HloModule m
        ENTRY e {
          x = f32[3] parameter(0)
          b = bf16[3] convert(x)
          ROOT s = bf16[3] add(b, b)
        }""", f32(1 + 2**-8, 1 + 3 * 2**-8, 3e38))
    assert out[0].dtype == ml_dtypes.bfloat16   # bf16 values are held natively
    np.testing.assert_array_equal(out[0].astype(np.float32), f32(2, 2 * (1 + 2**-6), inf))


def test_complex_atan2_is_xla_s():
    """atan2 on c64 (it raised: numpy has no complex arctan2). Reference: XLA's CPU
    backend through jax 0.10.2 (jax.lax.atan2 on c64), within f32 rounding."""
    from xlapy.hlo import evaluate, parse_module
    y = np.array([1 + 2j, -3 - 0.25j, 0.5 + 0j, -2 + 0j, 1e-3 + 4j, 0j], np.complex64)
    x = np.array([0.5 - 1j, 2 + 2j, -1 + 0j, -1 + 0j, 3 - 1e-3j, 1 + 0j], np.complex64)
    xla_re = [1.9081668, -0.82617295, 2.6779451, -2.0344439, 1.5709392, 0.0]
    xla_im = [0.37908688, 0.383078, 0.0, -0.0, 0.972955, 0.0]
    for t, (a, b) in (("c64", (y, x)), ("c128", (y.astype(np.complex128),
                                                  x.astype(np.complex128)))):
        m = parse_module(f"HloModule m\nENTRY e {{\n  a = {t}[6] parameter(0)\n"
                         f"  b = {t}[6] parameter(1)\n  ROOT r = {t}[6] atan2(a, b)\n}}")
        (got,) = evaluate(m, [a, b])
        assert got.dtype == a.dtype
        np.testing.assert_allclose(got.real, xla_re, rtol=1e-6, atol=2e-7)
        np.testing.assert_allclose(got.imag, xla_im, rtol=1e-6, atol=2e-7)
    # 0 / 0 inside: NaN, as XLA gives for atan2(0, 0) on complex.
    (got,) = evaluate(m, [np.zeros(6, np.complex128), np.zeros(6, np.complex128)])
    assert np.isnan(got.real).all()
