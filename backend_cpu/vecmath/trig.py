"""Trigonometry in IR for f32: sin, cos, tan, atan2 (evaluated in f64).

f32 inputs are widened to f64, which makes the polynomials short and leaves
the final f64 -> f32 rounding as the dominant error (about 0.5 ulp).

Argument reduction finds |x| = q*(pi/2) + r with |r| <= pi/4 and q mod 4,
over the whole f32 range (up to 3.4e38), in two straight-line paths chosen per
lane with a select:

* |x| < 2^49 (Cody-Waite): n = round(|x| * 2/pi) in f64, r = |x| - n*P1 - n*P2
  - n*P3 with pi/2 = P1 + P2 + P3 (three doubles) and fused multiply-adds.
  |x| - n*P1 is exact: its true value is below 1 and a multiple of 2^-52.
* |x| >= 2^49 (Payne-Hanek): with |x| = M * 2^E (M a 24-bit integer),
  |x| * 2/pi = sum_j M * D_j * 2^(E - 24(j+1)), D_j the 24-bit chunks of 2/pi.
  Chunks whose term is a multiple of 4 do not change the quadrant or the
  remainder, so the sum starts at chunk k0 = ceil((E - 25) / 24) and keeps
  five chunks. Each product M * D_j is exact in f64; the two leading terms are
  reduced mod 4 exactly, and the small terms are added last so that
  cancellation near a multiple of pi/2 stays accurate. k0 takes only the
  values 1..4 here, so the chunk "gather" is a chain of selects, not a memory
  access.

f64 sin/cos/tan/atan2 are not here: they call scalar libm (see routines.py).
"""
from __future__ import annotations

import math

from .coeffs import TAN_PI_8, atan_small, cos_series, pi_over_2_parts, sin_tail, two_over_pi_chunks
from .math_builder import MathBuilder

_CHUNKS = two_over_pi_chunks(9)
_PH_MIN_EXPONENT = 26            # E >= 26  <=>  |x| >= 2^49: the Payne-Hanek path
_PIO2 = pi_over_2_parts(3)


def _mod4(d: MathBuilder, t):
    """t mod 4 for t >= 0, exact."""
    return d.b.fsub(t, d.b.fmul(d.floor(d.b.fmul(t, d.const(0.25))), d.const(4.0)))


def _reduce_cody_waite(m: MathBuilder, d: MathBuilder, ax, small):
    """(r, q) for |x| < 2^49; lanes where `small` is false get harmless values."""
    xd = m.widen(m.select(small, ax, m.const(0.0)))
    n = d.rint(d.b.fmul(xd, d.const(2.0 / math.pi)))
    neg_n = d.b.fneg(n)
    r = xd
    for part in _PIO2:
        r = d.fma(neg_n, d.const(part), r)
    q = m.b.trunc(d.b.fptosi(n, d.int_ty), m.int_ty)
    return r, q


def _reduce_payne_hanek(m: MathBuilder, d: MathBuilder, ax):
    """(r, q) for |x| >= 2^49 (garbage elsewhere, but never poison)."""
    b = m.b
    bits = m.as_int(ax)
    exponent = b.sub(b.lshr(bits, m.iconst(23)), m.iconst(150))           # E
    mantissa = b.or_(b.and_(bits, m.iconst(0x7FFFFF)), m.iconst(0x800000))  # M
    # k0 = ceil((E - 25) / 24), which is 1..4 on this path (E >= 26); smaller E
    # (lanes the select in _reduce discards) is treated as E = 26 for the index.
    lowest = m.iconst(_PH_MIN_EXPONENT)
    at_least = m.select(b.icmp_signed("<", exponent, lowest), lowest, exponent)
    k0 = b.udiv(b.sub(at_least, m.iconst(2)), m.iconst(24))
    a = b.sub(b.sub(exponent, b.mul(k0, m.iconst(24))), m.iconst(24))
    # M * 2^a once; term j is (M * 2^a) * (D[k0+j] * 2^(-24j)), exact in f64.
    scaled_mant = d.b.fmul(d.to_float(b.sext(mantissa, d.int_ty)),
                           d.pow2i(b.sext(a, d.int_ty)))
    is_k0 = [(k, b.icmp_signed("==", k0, m.iconst(k))) for k in range(2, 5)]

    def term(j):
        # The chunk "gather": a select chain in f32 (24-bit chunks times powers
        # of two are exact there), on twice as many lanes per instruction.
        chunk = m.const(math.ldexp(_CHUNKS[1 + j], -24 * j))
        for k, cond in is_k0:
            chunk = m.select(cond, m.const(math.ldexp(_CHUNKS[k + j], -24 * j)), chunk)
        return d.b.fmul(scaled_mant, m.widen(chunk))

    t = [term(j) for j in range(5)]
    head = d.b.fadd(_mod4(d, t[0]), _mod4(d, t[1]))          # exact: < 8, 49 bits
    n = d.rint(d.b.fadd(head, t[2]))
    frac = d.b.fsub(head, n)                                   # exact
    for small_term in t[2:]:
        frac = d.b.fadd(frac, small_term)
    r = d.b.fmul(frac, d.const(math.pi / 2))
    q = m.b.trunc(d.b.fptosi(n, d.int_ty), m.int_ty)
    return r, q


def _reduce(m: MathBuilder, ax):
    d = m.with_kind("double")
    small = m.cmp("<", ax, m.const(2.0 ** (_PH_MIN_EXPONENT + 23)))
    r_cw, q_cw = _reduce_cody_waite(m, d, ax, small)
    r_ph, q_ph = _reduce_payne_hanek(m, d, ax)
    return d, d.select(small, r_cw, r_ph), m.select(small, q_cw, q_ph)


def _sin_cos_poly(d: MathBuilder, r):
    z = d.b.fmul(r, r)
    # Through r^11 and r^12: truncation below 2e-10 relative for |r| <= pi/4,
    # which is what an f32 result needs.
    sin_r = d.fma(d.b.fmul(r, z), d.horner(z, sin_tail(5)), r)
    cos_r = d.horner(z, cos_series(7))
    return sin_r, cos_r


def _flip_sign(m: MathBuilder, value, sign_source):
    """value with its sign flipped where sign_source has the sign bit set (-0 too)."""
    sign = m.b.and_(m.as_int(sign_source), m.iconst(-0x80000000))
    return m.as_float(m.b.xor(m.as_int(value), sign))


def _finite_or_nan(m: MathBuilder, ax, result):
    return m.select(m.cmp("<", ax, m.const(math.inf)), result, m.const(math.nan))


def _bit(m: MathBuilder, q, bit: int):
    return m.b.icmp_signed("!=", m.b.and_(q, m.iconst(bit)), m.iconst(0))


def _sin_or_cos(m: MathBuilder, x, is_cos: bool):
    assert m.kind == "float"
    x = m.flush_denormal(x)
    ax = m.fabs(x)
    d, r, q = _reduce(m, ax)
    if is_cos:                                   # cos(y) = sin(y + pi/2)
        q = m.b.add(q, m.iconst(1))
    sin_r, cos_r = _sin_cos_poly(d, r)
    value = d.select(_bit(m, q, 1), cos_r, sin_r)
    value = d.select(_bit(m, q, 2), d.b.fneg(value), value)
    result = m.narrow(value)
    if not is_cos:
        result = _flip_sign(m, result, x)
    return _finite_or_nan(m, ax, result)


def sin(m: MathBuilder, x):
    return _sin_or_cos(m, x, is_cos=False)


def cos(m: MathBuilder, x):
    return _sin_or_cos(m, x, is_cos=True)


def tan(m: MathBuilder, x):
    """tan r for even quadrants, -cot r = -cos r / sin r for odd ones (in f64)."""
    assert m.kind == "float"
    x = m.flush_denormal(x)
    ax = m.fabs(x)
    d, r, q = _reduce(m, ax)
    sin_r, cos_r = _sin_cos_poly(d, r)
    odd = _bit(m, q, 1)
    value = d.b.fdiv(d.select(odd, d.b.fneg(cos_r), sin_r), d.select(odd, sin_r, cos_r))
    return _finite_or_nan(m, ax, _flip_sign(m, m.narrow(value), x))


def atan2(m: MathBuilder, y, x):
    """atan2(y, x) for f32 in f64: atan of min/max ratio in [0, 1], then octant fix-ups.

    The IEEE zero/inf cases fall out of it: 0/0 and inf/inf ratios are replaced
    by 0 and 1, and the sign bit of x (not x < 0) picks the left half-plane, so
    atan2(±0, -0) = ±pi.
    """
    assert m.kind == "float"
    x = m.flush_denormal(x)
    y = m.flush_denormal(y)
    d = m.with_kind("double")
    ax, ay = m.widen(m.fabs(x)), m.widen(m.fabs(y))
    y_steeper = d.cmp(">", ay, ax)
    big, small = d.select(y_steeper, ay, ax), d.select(y_steeper, ax, ay)
    t = d.b.fdiv(small, big)
    t = d.select(d.cmp("==", big, d.const(0.0)), d.const(0.0), t)
    t = d.select(d.cmp("==", small, d.const(math.inf)), d.const(1.0), t)
    # atan t = pi/4 + atan((t - 1) / (t + 1)) brings t into [-tan(pi/8), tan(pi/8)].
    far = d.cmp(">", t, d.const(TAN_PI_8))
    one = d.const(1.0)
    u = d.select(far, d.b.fdiv(d.b.fsub(t, one), d.b.fadd(t, one)), t)
    at = d.fma(u, d.horner(d.b.fmul(u, u), atan_small()),
               d.select(far, d.const(math.pi / 4), d.const(0.0)))
    theta = d.select(y_steeper, d.b.fsub(d.const(math.pi / 2), at), at)
    x_negative = m.b.icmp_signed("<", m.as_int(x), m.iconst(0))
    theta = d.select(x_negative, d.b.fsub(d.const(math.pi), theta), theta)
    result = m.copysign(m.narrow(theta), y)
    return m.select(m.b.fcmp_unordered("uno", x, y), m.const(math.nan), result)
