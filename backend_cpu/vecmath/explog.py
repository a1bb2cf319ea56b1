"""Exponentials and logarithms in IR: exp, expm1, log, log1p, tanh, logistic, pow.

All routines take a `MathBuilder` (which fixes the float type and the vector
shape) and IR values, and return an IR value of the same type. They are the
same code for f32 and f64; only the polynomial degrees and the clamping
thresholds differ.

Shared argument reduction (exp family): x = n*ln2 + r with |r| <= ln2/2, where
n = round(x / ln2) is found by the "magic number" trick: adding 1.5 * 2^p (p
the mantissa width) rounds to an integer and leaves that integer in the low
bits, so no float->int conversion (poison on NaN in LLVM) is needed.
`ln2` is split in two (hi + lo); with fused multiply-adds x - n*ln2_hi is exact.

Logarithm: x = 2^k * m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
s = f / (2 + f), and log(1 + f) = 2 atanh(s) = f - s * (f - R(s^2)), which
keeps the leading term f exact so that the rounding of s matters little.
"""
from __future__ import annotations

import math

import numpy as np

from .. import target as targets

from .coeffs import EXP_F32_MINIMAX6, atanh_tail, ln2_parts, taylor_exp, taylor_expm1_tail
from .math_builder import MathBuilder

LN2 = math.log(2.0)
LOG2E = 1.0 / LN2

# Per float kind:
#   ln2_hi          ln2 rounded to the format (ln2_lo, below, holds the rest)
#   exp_degree      Taylor degree of e^r; expm1_degree likewise for expm1(r)
#   atanh_terms     terms of the 2*atanh(s) series in log
#   lo, hi          exp clamps x to [lo, hi]: beyond, e^x is 0 (even unflushed) or inf
#   tanh_one        tanh(x) rounds to 1 for |x| above this
#   expm1_lo        expm1(x) rounds to -1 below this
#   expm1_big       above this, expm1(x) rounds like e^x
#   max_scale       largest n for which 2^n is built directly in expm1's small path
#   magic           1.5 * 2^(mantissa bits): adding it rounds to an integer
_F32_LN2_HI, _F32_LN2_LO = ln2_parts(24)
_F64_LN2_HI, _F64_LN2_LO = ln2_parts(53)
_PARAMS = {
    "float": dict(ln2_hi=_F32_LN2_HI, exp_degree=7, expm1_degree=8, atanh_terms=4,
                  lo=-104.0, hi=89.0, tanh_one=10.0, expm1_lo=-30.0, expm1_big=20.0,
                  max_scale=64, magic=1.5 * 2.0 ** 23),
    "double": dict(ln2_hi=_F64_LN2_HI, exp_degree=13, expm1_degree=14, atanh_terms=10,
                   lo=-746.0, hi=710.0, tanh_one=22.0, expm1_lo=-60.0, expm1_big=40.0,
                   max_scale=512, magic=1.5 * 2.0 ** 52),
}


def _ln2_lo(kind: str) -> float:
    return _F32_LN2_LO if kind == "float" else _F64_LN2_LO


def _exp_poly(m: MathBuilder, r, degree: int | None = None):
    """P(r) ~ e^r for |r| <= ln2/2: f32's minimax polynomial at the default degree, else
    Taylor's of the given degree."""
    if degree is None and m.kind == "float":
        return m.horner(r, EXP_F32_MINIMAX6)
    return m.horner(r, taylor_exp(degree or _PARAMS[m.kind]["exp_degree"]))


def _reduce_exp(m: MathBuilder, x):
    """Returns (n as an integer vector, r) with x = n*ln2 + r, |r| <= ln2/2 (up to an
    ulp more where one rounding of x/ln2 + magic lands n on the other side of a half)."""
    p = _PARAMS[m.kind]
    magic = m.const(p["magic"])
    if targets.current().has("fma"):
        shifted = m.fma(x, m.const(LOG2E), magic)
    else:                        # an emulated fma would cost more than the rounding saves
        shifted = m.b.fadd(m.b.fmul(x, m.const(LOG2E)), magic)
    n_float = m.b.fsub(shifted, magic)
    n_int = m.b.sub(m.as_int(shifted), m.as_int(magic))
    neg_n = m.b.fneg(n_float)
    r = m.fma(neg_n, m.const(p["ln2_hi"]), x)
    r = m.fma(neg_n, m.const(_ln2_lo(m.kind)), r)
    return n_int, r


def _normal_range(kind: str) -> tuple[float, float]:
    """(low, high) in the format: for low <= x <= high, n = round(x / ln2) and the
    polynomial P(r) make a normal P(r) * 2^n. low is the first value at or above
    emin * ln2 (there r >= 0, so P(r) >= 1 keeps n = emin normal), high the last one
    below (emax + 1) * ln2 (there r < 0, so P(r) < 1 keeps n = emax + 1 finite)."""
    dtype, emin, emax = (np.float32, -126, 127) if kind == "float" else (np.float64, -1022, 1023)
    low, high = dtype(emin * LN2), dtype((emax + 1) * LN2)
    if float(low) < emin * LN2:
        low = np.nextafter(low, dtype(0))
    if float(high) >= (emax + 1) * LN2:
        high = np.nextafter(high, dtype(0))
    return float(low), float(high)


def exp(m: MathBuilder, x, degree: int | None = None):
    """e^x. Clamping x keeps n small; overflow and underflow then come out of
    the final scaling by 2^n as inf and 0 (flushed to 0 under FTZ).
    `degree` overrides the polynomial degree (pow needs less than full f64).

    Without AVX-512's vscalef the scaling by 2^n would take two multiplications
    and their exponent arithmetic (ldexp); there exp adds n to the polynomial's
    exponent field instead and settles the ends of the range by comparisons."""
    p = _PARAMS[m.kind]
    if not targets.current().has("avx512f"):
        return _exp_by_exponent(m, x, degree)
    x = m.clamp(x, p["lo"], p["hi"])
    n_int, r = _reduce_exp(m, x)
    return m.ldexp(_exp_poly(m, r, degree), n_int)


def _exp_by_exponent(m: MathBuilder, x, degree: int | None):
    """e^x = P(r) * 2^n, the product formed by adding n to P(r)'s exponent bits.

    For x in the normal range n is at least the minimum exponent where P(r) >= 1
    (x / ln2 >= -126 rounds to n = -126 only with r >= 0) and the sum of exponents
    stays finite below the overflow threshold, so the integer addition is the exact
    product. Below the range the result is 0 (a subnormal, flushed: DESIGN.md);
    above it inf, and NaN stays NaN (x * inf). The same bits as vscalef's, whose
    product rounds to the same subnormal-then-flushed 0 or inf at the ends."""
    low, high = _normal_range(m.kind)
    n_int, r = _reduce_exp(m, x)
    poly = _exp_poly(m, r, degree)
    scaled = m.as_float(m.b.add(m.as_int(poly), m.b.shl(n_int, m.iconst(m.mant_bits))))
    scaled = m.select(m.cmp("<", x, m.const(low)), m.const(0.0), scaled)
    beyond = m.b.fcmp_unordered("ugt", x, m.const(high))          # above, or NaN
    return m.select(beyond, m.b.fmul(x, m.const(math.inf)), scaled)


def exp_dd(m: MathBuilder, hi, lo):
    """e^(hi + lo) for a double-double argument (|lo| tiny next to ulp(hi) or hi
    beyond the clamps): lo joins the reduced argument, so it is not rounded
    against hi. Used by f64 pow."""
    p = _PARAMS[m.kind]
    n_int, r = _reduce_exp(m, m.clamp(hi, p["lo"], p["hi"]))
    r = m.b.fadd(r, lo)
    return m.ldexp(m.horner(r, taylor_exp(p["exp_degree"])), n_int)


def exp_normal_range(m: MathBuilder, x):
    """e^x for x (and e^x) well inside the normal range: no clamp, one scaling."""
    n_int, r = _reduce_exp(m, x)
    return m.ldexp(_exp_poly(m, r), n_int)


def _expm1_reduced(m: MathBuilder, r):
    """expm1(r) for |r| <= ln2/2: r + r^2 * P(r)."""
    poly = m.horner(r, taylor_expm1_tail(_PARAMS[m.kind]["expm1_degree"]))
    return m.fma(m.b.fmul(r, r), poly, r)


def _expm1_from(m: MathBuilder, s, em1_r):
    """e^x - 1 = s * expm1(r) + (s - 1) with s = 2^n: one fused rounding, and
    s - 1 is exact for the n where it matters (small |x|)."""
    return m.fma(s, em1_r, m.b.fsub(s, m.const(1.0)))


def expm1(m: MathBuilder, x):
    """e^x - 1, accurate near 0."""
    p = _PARAMS[m.kind]
    xc = m.clamp(x, p["expm1_lo"], p["hi"])
    n_int, r = _reduce_exp(m, xc)
    em1_r = _expm1_reduced(m, r)
    # Small and moderate x: 2^n capped to stay finite (the capped value is only
    # used where the select below discards it).
    cap = m.iconst(p["max_scale"])
    small = _expm1_from(m, m.pow2i(m.select(m.b.icmp_signed(">", n_int, cap), cap, n_int)),
                        em1_r)
    # Large x: the "-1" is below the rounding of e^x, so reuse the exp path.
    big = m.ldexp(m.b.fadd(em1_r, m.const(1.0)), n_int)
    result = m.select(m.cmp(">", xc, m.const(p["expm1_big"])), big, small)
    return m.keep_signed_zero(x, result)


def _log_core(m: MathBuilder, x, terms: int | None = None):
    """log(x) for finite x > 0 (no special-value handling); x must not be subnormal."""
    p = _PARAMS[m.kind]
    bits = m.as_int(x)
    sqrt_half_bits = m.as_int(m.const(math.sqrt(0.5)))
    # k = exponent of x relative to [sqrt(1/2), sqrt(2)); m = x / 2^k in that range.
    k = m.b.ashr(m.b.sub(bits, sqrt_half_bits), m.iconst(m.mant_bits))
    mant = m.as_float(m.b.sub(bits, m.b.shl(k, m.iconst(m.mant_bits))))
    f = m.b.fsub(mant, m.const(1.0))
    log1p_f = _log1p_reduced_atanh(m, f, terms or p["atanh_terms"])
    e = m.to_float(k)
    tail = m.fma(e, m.const(_ln2_lo(m.kind)), log1p_f)
    return m.fma(e, m.const(p["ln2_hi"]), tail)


def _log1p_reduced_atanh(m: MathBuilder, f, terms: int):
    """log(1+f) = 2 atanh(s), s = f/(2+f), as f - s*(f - R(s^2)) (see module doc)."""
    s = m.b.fdiv(f, m.b.fadd(f, m.const(2.0)))
    z = m.b.fmul(s, s)
    big_r = m.b.fmul(z, m.horner(z, atanh_tail(terms)))
    return m.fma(m.b.fneg(s), m.b.fsub(f, big_r), f)


def _log_specials(m: MathBuilder, x, result):
    """log(+inf) = inf, log(±0) = -inf, log(x < 0) = log(NaN) = NaN."""
    inf = m.const(math.inf)
    result = m.select(m.cmp("==", x, inf), inf, result)
    result = m.select(m.cmp("==", x, m.const(0.0)), m.const(-math.inf), result)
    negative_or_nan = m.b.fcmp_unordered("<", x, m.const(0.0))
    return m.select(negative_or_nan, m.const(math.nan), result)


def log(m: MathBuilder, x):
    x = m.flush_denormal(x)
    return _log_specials(m, x, _log_core(m, x))


def log1p(m: MathBuilder, x):
    """log(1 + x) = log(u) + c/u, where u = fl(1 + x) and c = (1 + x) - u exactly."""
    x = m.flush_denormal(x)
    one = m.const(1.0)
    u = m.b.fadd(one, x)
    # TwoSum: the rounding error of 1 + x, exactly.
    x_part = m.b.fsub(u, one)
    c = m.b.fadd(m.b.fsub(one, m.b.fsub(u, x_part)), m.b.fsub(x, x_part))
    result = m.b.fadd(_log_core(m, u), m.b.fdiv(c, u))
    return m.keep_signed_zero(x, _log_specials(m, u, result))


def tanh(m: MathBuilder, x):
    """tanh|x| = e / (e + 2) with e = expm1(2|x|); saturates to ±1, keeps -0."""
    p = _PARAMS[m.kind]
    a = m.fabs(x)
    a = m.select(m.cmp(">", a, m.const(p["tanh_one"])), m.const(p["tanh_one"]), a)
    # 2a is in [0, 2 * tanh_one]: 2^n stays finite, no clamping or special cases.
    n_int, r = _reduce_exp(m, m.b.fadd(a, a))
    e = _expm1_from(m, m.pow2i(n_int), _expm1_reduced(m, r))
    return m.copysign(m.b.fdiv(e, m.b.fadd(e, m.const(2.0))), x)


def logistic(m: MathBuilder, x):
    """1 / (1 + e^-x): exp overflow gives 1/inf = 0, underflow gives 1."""
    e = exp(m, m.b.fneg(x))
    return m.b.fdiv(m.const(1.0), m.b.fadd(m.const(1.0), e))


def pow_f32(m: MathBuilder, x, y):
    """x^y for f32: exp(y * log|x|) evaluated in f64 (over 36 good bits), then
    the sign and the IEEE special cases applied with selects."""
    assert m.kind == "float"
    x = m.flush_denormal(x)
    y = m.flush_denormal(y)
    d = m.with_kind("double")
    ax = m.fabs(x)
    # |y * log|x|| < 104 wherever the result is a normal f32, so relative errors of
    # 1e-12 in the log and 1e-11 in the exp stay far below an f32 ulp: shorter
    # series than full f64 needs (6 atanh terms: z^7/15 < 2e-12; exp degree 9).
    ax_d = m.widen(ax)
    log_ax = _log_specials(d, ax_d, _log_core(d, ax_d, terms=6))
    magnitude = m.narrow(exp(d, d.b.fmul(m.widen(y), log_ax), degree=9))
    return pow_special_cases(m, x, y, magnitude)


def pow_special_cases(m: MathBuilder, x, y, magnitude):
    """x^y from magnitude = |x|^y (flushed x and y): the sign for odd integer y and
    the IEEE special cases, with selects. Shared by the f32 and f64 versions."""
    y_is_int = m.cmp("==", m.floor(y), y)                       # also true for ±inf
    # Floats at or above 2^(mantissa bits + 1) are even integers.
    small_y = m.cmp("<", m.fabs(y), m.const(2.0 ** (m.mant_bits + 1)))
    y_int = m.b.fptosi(m.select(small_y, y, m.const(0.0)), m.int_ty)
    lowest_bit = m.b.trunc(y_int, m.bool_ty)
    y_is_odd = m.b.and_(m.b.and_(y_is_int, small_y), lowest_bit)
    x_sign_set = m.b.icmp_signed("<", m.as_int(x), m.iconst(0))
    result = m.select(m.b.and_(x_sign_set, y_is_odd), m.b.fneg(magnitude), magnitude)
    # Negative finite base with a non-integer exponent: NaN.
    finite_negative = m.b.and_(m.cmp("<", x, m.const(0.0)),
                               m.cmp(">", x, m.const(-math.inf)))
    result = m.select(m.b.and_(finite_negative, m.b.not_(y_is_int)),
                      m.const(math.nan), result)
    # x^0 = 1 and 1^y = 1 even for NaN; (-1)^(±inf) = 1.
    one = m.const(1.0)
    ax = m.fabs(x)
    is_one = m.b.or_(m.cmp("==", x, one), m.cmp("==", y, m.const(0.0)))
    unit_inf = m.b.and_(m.cmp("==", ax, one), m.cmp("==", m.fabs(y), m.const(math.inf)))
    return m.select(m.b.or_(is_one, unit_inf), one, result)
