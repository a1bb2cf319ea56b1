"""erf, cbrt, sqrt and rsqrt in IR.

erf (f32, native f32 arithmetic): two fitted polynomials joined by a select,
    |x| <  0.875: erf(x) = x * P(x^2)
    |x| >= 0.875: erf(x) = 1 - exp(-x^2) * Q(|x| - 2.4), saturating to 1 past 3.95
  (see vecmath_coeffs for how P and Q are fitted). Rounding x^2 costs little:
  exp(-x^2) moves by x^2 * 2^-24 relative, on a term that is at most 0.16.
cbrt (f32, in f64): an exponent-thirding bit trick gives a 6% first guess,
  three Newton steps g <- (2g + a/g^2)/3 bring it to ~1e-10, then one rounding.
sqrt is the IEEE instruction (correctly rounded); rsqrt is 1/sqrt(x), two
  correctly rounded steps (<= 1 ulp), not the 14-bit hardware estimate.
"""
from __future__ import annotations

import math

from .vecmath_coeffs import ERF_LARGE_CENTER, ERF_ONE_F32, ERF_SPLIT, erf_large, erf_small
from .vecmath_explog import exp
from .vecmath_ir import MathBuilder


def erf(m: MathBuilder, x):
    assert m.kind == "float"
    ax = m.fabs(x)
    near = m.b.fmul(x, m.horner(m.b.fmul(x, x), erf_small()))
    q = m.horner(m.b.fsub(ax, m.const(ERF_LARGE_CENTER)), erf_large())
    e = exp(m, m.b.fneg(m.b.fmul(ax, ax)))
    far = m.b.fsub(m.const(1.0), m.b.fmul(e, q))
    far = m.select(m.cmp(">", ax, m.const(ERF_ONE_F32)), m.const(1.0), far)
    # NaN fails `ax < split` and flows through the far branch, which keeps it.
    result = m.select(m.cmp("<", ax, m.const(ERF_SPLIT)), near, m.copysign(far, x))
    return m.keep_signed_zero(x, result)


# bits(a^(1/3)) ~ bits(a)/3 + (2/3) * bias * 2^23 for f32 bit patterns.
_CBRT_MAGIC = round(2 * 127 * 2 ** 23 / 3)


def cbrt(m: MathBuilder, x):
    assert m.kind == "float"
    x = m.flush_denormal(x)
    ax = m.fabs(x)
    guess_bits = m.b.add(m.b.udiv(m.as_int(ax), m.iconst(3)), m.iconst(_CBRT_MAGIC))
    d = m.with_kind("double")
    a = m.widen(ax)
    g = m.widen(m.as_float(guess_bits))
    third_a = d.b.fmul(a, d.const(1.0 / 3.0))
    for _ in range(3):
        g = d.fma(g, d.const(2.0 / 3.0), d.b.fdiv(third_a, d.b.fmul(g, g)))
    root = m.narrow(g)
    # 0 and inf are fixed points the bit trick does not reach; NaN passes through.
    exact = m.b.or_(m.cmp("==", ax, m.const(0.0)), m.cmp("==", ax, m.const(math.inf)))
    return m.copysign(m.select(exact, ax, root), x)


def sqrt(m: MathBuilder, x):
    return m.sqrt(x)


def rsqrt(m: MathBuilder, x):
    return m.b.fdiv(m.const(1.0), m.sqrt(x))
