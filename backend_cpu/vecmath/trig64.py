"""Trigonometry in IR for f64: sin, cos, tan and atan2, straight-line and vectorizable.

sin, cos, tan: the argument is reduced by pi/2 in double-double
(reduce64.py: Cody-Waite below 2^28, Payne-Hanek with a table above,
both exact enough for every double), then
    sin(r_hi + r_lo) = r_hi + (r_hi z S(z) + r_lo (1 - z/2))        z = r_hi^2
    cos(r_hi + r_lo) = w + ((1 - w) - z/2) + z^2 C(z) - r_hi r_lo,   w = 1 - z/2
with S and C Taylor series through r^17 and r^18 (truncation below 2^-60 for
|r| <= pi/4). Adding the small parts to the exact leading term last keeps the
error near half an ulp. The quadrant picks sin or cos and the sign; tan is
sin/cos or -cos/sin (about 2 ulp).

atan2(y, x): t = min(|x|,|y|) / max(|x|,|y|) in [0, 1] (with the division's
rounding error kept as t_lo); with c = round(8t)/8 (0 below 1/8),
atan t = atan c + atan u, u = (t - c) / (1 + t c), |u| <= 1/8, so a short
Taylor series in u suffices and atan c comes from a 9-entry double-double
table (selects). The octant is then fixed up as theta = offset +- atan t with
offset in {0, pi/2, pi} added in double-double, and the sign of y copied.
"""
from __future__ import annotations

import math

from .coeffs import atan_steps_dd, atan_tail, cos_series, sin_tail
from .math_builder import MathBuilder
from .reduce64 import pio2_parts, reduce_pio2

_SIN_TAIL = sin_tail(8)            # -1/3!, ..., -1/17!
_COS_TAIL = cos_series(10)[2:]     # 1/4!, ..., 1/18!: cos r = 1 - z/2 + z^2 C(z)
_ATAN_STEPS = 8
_ATAN_TAIL = atan_tail(9)          # u^3/3 ... u^19/19; next term < 2^-64 relative


def _sin_cos(d: MathBuilder, r_hi, r_lo):
    """(sin r, cos r) for the double-double r = r_hi + r_lo, |r| <= pi/4."""
    b = d.b
    z = b.fmul(r_hi, r_hi)
    r_lo_scaled = d.fma(b.fmul(r_lo, z), d.const(-0.5), r_lo)      # r_lo * cos r_hi
    sin_r = b.fadd(r_hi, d.fma(b.fmul(r_hi, z), d.horner(z, _SIN_TAIL), r_lo_scaled))
    half_z = b.fmul(z, d.const(0.5))
    w = b.fsub(d.const(1.0), half_z)
    w_err = b.fsub(b.fsub(d.const(1.0), w), half_z)                 # exact rounding error
    tail = d.fma(b.fmul(z, z), d.horner(z, _COS_TAIL),
                 d.fma(b.fneg(r_hi), r_lo, w_err))
    return sin_r, b.fadd(w, tail)


def _flip_sign(d: MathBuilder, value, sign_source):
    """value with its sign flipped where sign_source has the sign bit set (-0 too)."""
    sign = d.b.and_(d.as_int(sign_source), d.iconst(-(1 << 63)))
    return d.as_float(d.b.xor(d.as_int(value), sign))


def _bit(d: MathBuilder, q, bit: int):
    return d.b.icmp_signed("!=", d.b.and_(q, d.iconst(bit)), d.iconst(0))


def _finite_or_nan(d: MathBuilder, ax, result):
    return d.select(d.cmp("<", ax, d.const(math.inf)), result, d.const(math.nan))


def _reduced(d: MathBuilder, x):
    """(x flushed, |x|, sin r, cos r, quadrant)."""
    x = d.flush_denormal(x)
    ax = d.fabs(x)
    r_hi, r_lo, q = reduce_pio2(d, ax)
    sin_r, cos_r = _sin_cos(d, r_hi, r_lo)
    return x, ax, sin_r, cos_r, q


def sin(d: MathBuilder, x):
    assert d.kind == "double"
    x, ax, sin_r, cos_r, q = _reduced(d, x)
    value = d.select(_bit(d, q, 1), cos_r, sin_r)
    value = d.select(_bit(d, q, 2), d.b.fneg(value), value)
    return _finite_or_nan(d, ax, _flip_sign(d, value, x))


def cos(d: MathBuilder, x):
    assert d.kind == "double"
    x, ax, sin_r, cos_r, q = _reduced(d, x)
    q = d.b.add(q, d.iconst(1))                       # cos(y) = sin(y + pi/2)
    value = d.select(_bit(d, q, 1), cos_r, sin_r)
    value = d.select(_bit(d, q, 2), d.b.fneg(value), value)
    return _finite_or_nan(d, ax, value)


def tan(d: MathBuilder, x):
    """tan r in even quadrants, -cot r = -cos r / sin r in odd ones."""
    assert d.kind == "double"
    x, ax, sin_r, cos_r, q = _reduced(d, x)
    odd = _bit(d, q, 1)
    value = d.b.fdiv(d.select(odd, d.b.fneg(cos_r), sin_r), d.select(odd, sin_r, cos_r))
    return _finite_or_nan(d, ax, _flip_sign(d, value, x))


def _atan_unit(d: MathBuilder, t, t_lo):
    """atan(t + t_lo) for t in [0, 1] as an unevaluated sum (hi, lo), |lo| << |hi|."""
    b = d.b
    # Below 1/8, c = 0 (u = t): with c = 1/8 there, atan c + atan u would cancel
    # into a lower binade and magnify u's rounding errors.
    steps = d.rint(b.fmul(t, d.const(float(_ATAN_STEPS))))
    steps = d.select(d.cmp("<", t, d.const(1.0 / _ATAN_STEPS)), d.const(0.0), steps)
    c = b.fmul(steps, d.const(1.0 / _ATAN_STEPS))
    # t - c is exact; t_lo matters where atan t lands in a lower binade than t.
    denominator = d.fma(t, c, d.const(1.0))
    u = b.fdiv(b.fsub(t, c), denominator)
    u_lo = b.fdiv(t_lo, denominator)
    z = b.fmul(u, u)
    # atan(u + u_lo) = u + (u z A(z) + u_lo) to well below an ulp of the result.
    tail = d.fma(b.fmul(u, z), d.horner(z, _ATAN_TAIL), u_lo)
    table = atan_steps_dd(_ATAN_STEPS)
    c_hi, c_lo = d.const(0.0), d.const(0.0)
    for k in range(1, _ATAN_STEPS + 1):
        here = d.cmp("==", steps, d.const(float(k)))
        c_hi = d.select(here, d.const(table[k][0]), c_hi)
        c_lo = d.select(here, d.const(table[k][1]), c_lo)
    hi, err = d.fast_two_sum(c_hi, u)                              # |atan c| >= |u|
    return hi, b.fadd(b.fadd(err, c_lo), tail)


def atan2(d: MathBuilder, y, x):
    """atan2(y, x); IEEE zero/inf cases as in the f32 version (see trig.py)."""
    assert d.kind == "double"
    b = d.b
    x = d.flush_denormal(x)
    y = d.flush_denormal(y)
    ax, ay = d.fabs(x), d.fabs(y)
    steep = d.cmp(">", ay, ax)
    big, small = d.select(steep, ay, ax), d.select(steep, ax, ay)
    # Tiny operands are scaled up (exactly) so that the residual below is not flushed.
    scale = d.select(d.cmp("<", big, d.const(2.0 ** -900)), d.const(2.0 ** 600), d.const(1.0))
    big, small = b.fmul(big, scale), b.fmul(small, scale)
    t = b.fdiv(small, big)
    t = d.select(d.cmp("==", big, d.const(0.0)), d.const(0.0), t)
    t = d.select(d.cmp("==", small, d.const(math.inf)), d.const(1.0), t)
    t = d.select(d.is_nan(t), d.const(0.0), t)        # NaN lanes: result replaced below
    # The division's rounding error, exactly (0 where t was replaced above).
    t_lo = b.fdiv(d.fma(b.fneg(t), big, small), big)
    t_lo = d.select(d.is_nan(t_lo), d.const(0.0), t_lo)
    at_hi, at_lo = _atan_unit(d, t, t_lo)
    # theta = offset + sign * atan t:  at, pi/2 - at, pi - at, pi/2 + at.
    x_negative = b.icmp_signed("<", d.as_int(x), d.iconst(0))
    negate = b.xor(steep, x_negative)
    at_hi = d.select(negate, b.fneg(at_hi), at_hi)
    at_lo = d.select(negate, b.fneg(at_lo), at_lo)
    pio2_hi, pio2_lo = pio2_parts()[:2]
    use_pi = b.and_(x_negative, b.not_(steep))
    any_offset = b.or_(steep, x_negative)
    off_hi = d.select(use_pi, d.const(2 * pio2_hi),
                      d.select(any_offset, d.const(pio2_hi), d.const(0.0)))
    off_lo = d.select(use_pi, d.const(2 * pio2_lo),
                      d.select(any_offset, d.const(pio2_lo), d.const(0.0)))
    hi, err = d.two_sum(off_hi, at_hi)
    theta = b.fadd(hi, b.fadd(err, b.fadd(off_lo, at_lo)))
    result = d.copysign(theta, y)
    return d.select(b.fcmp_unordered("uno", x, y), d.const(math.nan), result)
