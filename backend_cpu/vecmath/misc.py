"""erf, cbrt, sqrt and rsqrt in IR.

erf (f32, native f32 arithmetic): two fitted polynomials joined by a select,
    |x| <  0.875: erf(x) = x * P(x^2)
    |x| >= 0.875: erf(x) = 1 - exp(-x^2) * Q(|x| - 2.4), saturating to 1 past 3.95
  (see coeffs.py for how P and Q are fitted). Rounding x^2 costs little:
  exp(-x^2) moves by x^2 * 2^-24 relative, on a term that is at most 0.16.
erf (f64): the same two forms with longer fits (coeffs64.py): x * P(x^2)
  below 0.875, and 1 - exp(-x^2) * Q_i(|x| - c_i) with Q_i one of three
  degree-15 polynomials picked per lane by selects on the coefficients,
  saturating to 1 past 6. About 1.5 ulp.
cbrt: an exponent-thirding bit trick gives a 6% first guess, three Newton
  steps g <- (2g + a/g^2)/3 in f64 bring it to ~1e-10; f32 rounds that, f64
  first scales to [1, 8) and adds one correction step with an exact residual.
sqrt is the IEEE instruction (correctly rounded); rsqrt is 1/sqrt(x), two
  correctly rounded steps (<= 1 ulp), not the 14-bit hardware estimate.
"""
from __future__ import annotations

import math

from .coeffs import ERF_LARGE_CENTER, ERF_ONE_F32, ERF_SPLIT, erf_large, erf_small
from .coeffs64 import ERF64_LARGE, ERF64_ONE, ERF64_SMALL, ERF64_SMALL_C0_LO, ERF64_SPLIT
from .explog import exp_normal_range
from .math_builder import MathBuilder


def erf(m: MathBuilder, x):
    if m.kind == "double":
        return _erf_f64(m, x)
    ax = m.fabs(x)
    near = m.b.fmul(x, m.horner(m.b.fmul(x, x), erf_small()))
    q = m.horner(m.b.fsub(ax, m.const(ERF_LARGE_CENTER)), erf_large())
    # exp(-x^2) matters only for |x| in [0.875, 3.95], where no clamping is needed;
    # elsewhere (where its scale's exponent bits may wrap) the selects discard it.
    e = exp_normal_range(m, m.b.fneg(m.b.fmul(ax, ax)))
    far = m.b.fsub(m.const(1.0), m.b.fmul(e, q))
    far = m.select(m.cmp(">", ax, m.const(ERF_ONE_F32)), m.const(1.0), far)
    # NaN fails `ax < split` and flows through the far branch, which keeps it.
    result = m.select(m.cmp("<", ax, m.const(ERF_SPLIT)), near, m.copysign(far, x))
    return m.keep_signed_zero(x, result)


def _erf_f64(d: MathBuilder, x):
    b = d.b
    x = d.flush_denormal(x)
    ax = d.fabs(x)
    # x * P(x^2) with P's constant term in two parts: x * c0 rounds last.
    z = b.fmul(x, x)
    tail = d.fma(z, d.horner(z, ERF64_SMALL[1:]), d.const(ERF64_SMALL_C0_LO))
    near = d.fma(x, d.const(ERF64_SMALL[0]), b.fmul(x, tail))
    # The far form on |x| clamped to the fitted range (NaN passes through).
    axc = d.clamp(ax, ERF64_SPLIT, ERF64_ONE)
    center, coeffs = d.const(ERF64_LARGE[-1][1]), [d.const(c) for c in ERF64_LARGE[-1][2]]
    for upper, mid, row in reversed(ERF64_LARGE[:-1]):
        inside = d.cmp("<", axc, d.const(upper))
        center = d.select(inside, d.const(mid), center)
        coeffs = [d.select(inside, d.const(c), old) for c, old in zip(row, coeffs)]
    u = b.fsub(axc, center)
    q = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        q = d.fma(q, u, c)
    e = exp_normal_range(d, b.fneg(b.fmul(axc, axc)))
    far = d.fma(b.fneg(e), q, d.const(1.0))
    far = d.select(d.cmp(">=", ax, d.const(ERF64_ONE)), d.const(1.0), far)
    result = d.select(d.cmp("<", ax, d.const(ERF64_SPLIT)), near, d.copysign(far, x))
    return d.keep_signed_zero(x, result)


# bits(a^(1/3)) ~ bits(a)/3 + (2/3) * bias * 2^23 for f32 bit patterns.
_CBRT_MAGIC = round(2 * 127 * 2 ** 23 / 3)


def _cbrt_guess(f: MathBuilder, a):
    """A ~6% first guess of a^(1/3) for f32 a > 0 by thirding the exponent bits."""
    return f.as_float(f.b.add(f.b.udiv(f.as_int(a), f.iconst(3)), f.iconst(_CBRT_MAGIC)))


def _newton_cbrt(d: MathBuilder, a, g, steps: int):
    """g <- (2g + a/g^2) / 3, each step squaring the relative error."""
    third_a = d.b.fmul(a, d.const(1.0 / 3.0))
    for _ in range(steps):
        g = d.fma(g, d.const(2.0 / 3.0), d.b.fdiv(third_a, d.b.fmul(g, g)))
    return g


def _cbrt_finish(m: MathBuilder, x, ax, root):
    # 0, inf and NaN are fixed points the bit manipulations do not preserve.
    exact = m.b.or_(m.b.fcmp_unordered("==", ax, m.const(0.0)),
                    m.cmp("==", ax, m.const(math.inf)))
    return m.copysign(m.select(exact, ax, root), x)


def cbrt(m: MathBuilder, x):
    x = m.flush_denormal(x)
    ax = m.fabs(x)
    if m.kind == "float":
        d = m.with_kind("double")
        root = m.narrow(_newton_cbrt(d, m.widen(ax), m.widen(_cbrt_guess(m, ax)), 3))
        return _cbrt_finish(m, x, ax, root)
    return _cbrt_finish(m, x, ax, _cbrt_f64(m, ax))


def _cbrt_f64(d: MathBuilder, ax):
    """cbrt for f64 ax > 0: ax = 2^(3k) * a with a in [1, 8), Newton on a from an f32
    guess, then one correction step whose residual g^3 - a is computed exactly
    enough (fma) that the result is within about half an ulp."""
    b = d.b
    bits = d.as_int(ax)
    e = b.sub(b.lshr(bits, d.iconst(52)), d.iconst(1023))
    k = d.floor(b.fdiv(d.to_float(e), d.const(3.0)))          # exact: e/3 is never near
    k_int = d.to_int(k)                                        # an integer unless equal to it
    exp_bits = b.shl(b.add(b.sub(e, b.mul(k_int, d.iconst(3))), d.iconst(1023)), d.iconst(52))
    a = d.as_float(b.or_(b.and_(bits, d.iconst((1 << 52) - 1)), exp_bits))
    f = d.with_kind("float")
    g = _newton_cbrt(d, a, f.widen(_cbrt_guess(f, d.narrow(a))), 3)
    g2 = b.fmul(g, g)
    g2_low = d.fma(g, g, b.fneg(g2))                            # g*g = g2 + g2_low exactly
    residual = b.fadd(d.fma(g2, g, b.fneg(a)), b.fmul(g2_low, g))
    g = b.fsub(g, b.fdiv(residual, b.fmul(d.const(3.0), g2)))
    return b.fmul(g, d.pow2i(k_int))


def sqrt(m: MathBuilder, x):
    return m.sqrt(x)


def rsqrt(m: MathBuilder, x):
    return m.b.fdiv(m.const(1.0), m.sqrt(x))
