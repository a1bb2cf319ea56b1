"""Special functions that HLO has no opcode for, written as short HLO compositions:
Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Erfc, Erfinv, Lgamma, Digamma,
Trigamma (the gradient of Digamma), Xlogy, Xlog1py.

Each is a select over elementwise opcodes (no branches, so they fuse and
vectorize), arranged to stay accurate where the textbook formula is not: asinh and
acosh switch to log(2x) where x*x would overflow, sinh uses expm1 near 0, erfc a
continued fraction where 1 - erf(x) would cancel, erfinv Giles's polynomial refined
by Newton steps, lgamma and digamma Lanczos's series (g = 7, 9 terms) with the
reflection formula below 1/2. Inputs are floating point (the ops layer converts).
"""
from __future__ import annotations

import math

from ..registry import XlaOpKernel, register_xla_op
from .common import require_float, require_same_types

LANCZOS_G = 7.0
LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028,
           771.32342877765313, -176.61502916214059, 12.507343278686905,
           -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)


class _Math:
    """Shorthand for building one elementwise formula on operands of x's shape."""

    def __init__(self, ctx, like):
        self.b, self.ctx, self.like = ctx.builder, ctx, like
        self.etype = like.shape.element_type

    def c(self, value):
        return self.ctx.full_like(value, self.like)

    def __getattr__(self, name):
        return getattr(self.b, name)

    def where(self, cond, x, y):
        return self.b.select(cond, x, y)

    def lt(self, x, y): return self.b.compare(x, y, "LT")
    def le(self, x, y): return self.b.compare(x, y, "LE")
    def eq(self, x, y): return self.b.compare(x, y, "EQ")

    def eps(self) -> float:
        return {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 2.0 ** -23}.get(self.etype,
                                                                            2.0 ** -52)

    def sqrt_one_minus_sq(self, x):
        """sqrt(1 - x^2) as sqrt((1 - x)(1 + x)): no cancellation near |x| = 1."""
        one = self.c(1)
        return self.b.sqrt(self.b.multiply(self.b.subtract(one, x), self.b.add(one, x)))


def _unary(name: str, doc: str):
    """Registers a one-input kernel whose body is `fn(m, x)` (m: a _Math)."""
    def register(fn):
        class Kernel(XlaOpKernel):
            def compile(self, ctx):
                x = ctx.input(0)
                require_float(x)
                ctx.set_output(0, fn(_Math(ctx, x), x))
        Kernel.__name__ = Kernel.__qualname__ = name
        Kernel.__doc__ = doc
        register_xla_op(name)(Kernel)
        return fn
    return register


@_unary("Asin", "asin(x) = atan2(x, sqrt(1 - x^2)); NaN outside [-1, 1].")
def asin(m, x):
    return m.atan2(x, m.sqrt_one_minus_sq(x))


@_unary("Acos", "acos(x) = atan2(sqrt(1 - x^2), x); NaN outside [-1, 1].")
def acos(m, x):
    return m.atan2(m.sqrt_one_minus_sq(x), x)


@_unary("Atan", "atan(x) = atan2(x, 1).")
def atan(m, x):
    return m.atan2(x, m.c(1))


@_unary("Sinh", "sinh(x): (expm1(x) - expm1(-x)) / 2 for |x| < 1, else from exp(|x| - ln 2).")
def sinh(m, x):
    a = m.abs(x)
    small = m.multiply(m.c(0.5), m.subtract(m.exponential_minus_one(x),
                                            m.exponential_minus_one(m.negate(x))))
    # exp(a - ln2) - exp(-a - ln2) = sinh(a), finite up to where sinh overflows
    half = m.subtract(m.exp(m.subtract(a, m.c(math.log(2)))),
                      m.exp(m.subtract(m.negate(a), m.c(math.log(2)))))
    return m.where(m.lt(a, m.c(1)), small, m.multiply(m.sign(x), half))


@_unary("Cosh", "cosh(x) = exp(|x| - ln 2) + exp(-|x| - ln 2) (no overflow before cosh's).")
def cosh(m, x):
    a = m.abs(x)
    return m.add(m.exp(m.subtract(a, m.c(math.log(2)))),
                 m.exp(m.subtract(m.negate(a), m.c(math.log(2)))))


@_unary("Asinh", "asinh(x) = sign(x) log(|x| + sqrt(x^2 + 1)), in log1p form for small "
                 "|x| and as log(2|x|) where x^2 would overflow.")
def asinh(m, x):
    a = m.abs(x)
    one = m.c(1)
    # log1p(a + a^2 / (1 + sqrt(1 + a^2))) = log(a + sqrt(a^2 + 1))
    mid = m.log_plus_one(m.add(a, m.divide(m.multiply(a, a),
                                           m.add(one, m.sqrt(m.add(one, m.multiply(a, a)))))))
    big = m.add(m.log(a), m.c(math.log(2)))
    out = m.where(m.lt(a, m.c(1 / math.sqrt(m.eps()))), mid, big)
    return m.multiply(m.sign(x), out)


@_unary("Acosh", "acosh(x) = log1p(t + sqrt(t (x + 1))), t = x - 1; log(2x) for large x; "
                 "NaN below 1.")
def acosh(m, x):
    t = m.subtract(x, m.c(1))
    mid = m.log_plus_one(m.add(t, m.sqrt(m.multiply(t, m.add(x, m.c(1))))))
    big = m.add(m.log(x), m.c(math.log(2)))
    return m.where(m.lt(x, m.c(1 / math.sqrt(m.eps()))), mid, big)


@_unary("Atanh", "atanh(x) = log1p(2x / (1 - x)) / 2; +-inf at +-1, NaN outside.")
def atanh(m, x):
    return m.multiply(m.c(0.5), m.log_plus_one(m.divide(m.multiply(m.c(2), x),
                                                          m.subtract(m.c(1), x))))


ERFC_TERMS = 60


@_unary("Erfc", "erfc(x) = 1 - erf(x) for |x| < 1 (2 in f64), else exp(-x^2)/sqrt(pi) over a "
                "continued fraction (erfc(-x) = 2 - erfc(x)).")
def erfc(m, x):
    a = m.abs(x)
    # erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))):
    # 60 terms are within 3e-9 at a = 1 (enough for f32) and 3e-16 from a = 2 (f64),
    # and 1 - erf(a) loses at most erf's error / erfc(a) below those points.
    split = m.c(2.0 if m.etype == "f64" else 1.0)
    safe = m.where(m.lt(a, split), split, a)
    f = safe
    for k in range(ERFC_TERMS, 0, -1):
        f = m.add(safe, m.divide(m.c(k / 2), f))
    tail = m.divide(m.exp(m.negate(m.multiply(safe, safe))),
                    m.multiply(m.c(math.sqrt(math.pi)), f))
    tail = m.where(m.compare(a, a, "NE"), a, tail)                    # NaN stays NaN
    positive = m.where(m.lt(a, split), m.subtract(m.c(1), m.erf(a)), tail)
    return m.where(m.lt(x, m.c(0)), m.subtract(m.c(2), positive), positive)


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(m, coeffs, w):
    p = m.c(coeffs[0])
    for c in coeffs[1:]:
        p = m.add(m.c(c), m.multiply(p, w))
    return p


@_unary("Erfinv", "The inverse of erf on (-1, 1): Giles's polynomial in w = -log(1 - x^2), "
                  "then Newton steps on erf (1 in f32, 2 in f64); +-inf at +-1.")
def erfinv(m, x):
    w = m.negate(m.log(m.multiply(m.subtract(m.c(1), x), m.add(m.c(1), x))))
    central = _horner(m, _ERFINV_CENTRAL, m.subtract(w, m.c(2.5)))
    tail = _horner(m, _ERFINV_TAIL, m.subtract(m.sqrt(w), m.c(3)))
    y = m.multiply(m.where(m.lt(w, m.c(5)), central, tail), x)
    steps = 2 if m.etype == "f64" else (1 if m.etype == "f32" else 0)
    for _ in range(steps):
        # y -= (erf(y) - x) / erf'(y), erf'(y) = 2/sqrt(pi) exp(-y^2)
        slope = m.multiply(m.c(2 / math.sqrt(math.pi)), m.exp(m.negate(m.multiply(y, y))))
        step = m.divide(m.subtract(m.erf(y), x), slope)
        y = m.where(m.eq(slope, m.c(0)), y, m.subtract(y, step))
    edge = m.eq(m.abs(x), m.c(1))
    return m.where(edge, m.multiply(x, m.c(math.inf)), y)


def _reflected(m, x):
    """(x < 1/2, z = x or 1 - x so that z >= 1/2, log|sin(pi x)|, pi / tan(pi x)), with
    the sine taken of the reduced fraction of |x| (accurate for large |x|)."""
    reflect = m.lt(x, m.c(0.5))
    z = m.where(reflect, m.subtract(m.c(1), x), x)
    a = m.abs(x)
    frac = m.subtract(a, m.floor(a))                                   # in [0, 1)
    near = m.where(m.lt(m.c(0.5), frac), m.subtract(m.c(1), frac), frac)   # in [0, 1/2]
    log_sin = m.log(m.sine(m.multiply(m.c(math.pi), near)))
    # pi / tan(pi x): tan has period 1; odd in x
    signed = m.multiply(m.sign(x), frac)
    pi_cot = m.divide(m.c(math.pi), m.tan(m.multiply(m.c(math.pi), signed)))
    return reflect, z, log_sin, pi_cot


def _lanczos(m, z):
    """For z >= 1/2 with zm = z - 1: (sum A = c0 + sum ci / (zm + i), its derivative
    sum -ci / (zm + i)^2, t = zm + g + 1/2)."""
    zm = m.subtract(z, m.c(1))
    total, slope = m.c(LANCZOS[0]), m.c(0)
    for i, coeff in enumerate(LANCZOS[1:], start=1):
        d = m.add(zm, m.c(i))
        total = m.add(total, m.divide(m.c(coeff), d))
        slope = m.subtract(slope, m.divide(m.c(coeff), m.multiply(d, d)))
    return zm, total, slope, m.add(zm, m.c(LANCZOS_G + 0.5))


@_unary("Lgamma", "log|Gamma(x)| by Lanczos's series; reflection below 1/2; +inf at the "
                  "poles (0, -1, ...) and at +-inf.")
def lgamma(m, x):
    reflect, z, log_sin, _ = _reflected(m, x)
    zm, total, _, t = _lanczos(m, z)
    # log(t) as log(g + 1/2) + log1p(zm / (g + 1/2)): accurate near z = 1 and 2
    log_t = m.add(m.c(math.log(LANCZOS_G + 0.5)),
                  m.log_plus_one(m.divide(zm, m.c(LANCZOS_G + 0.5))))
    value = m.add(m.add(m.c(0.5 * math.log(2 * math.pi)),
                        m.multiply(m.add(zm, m.c(0.5)), log_t)),
                  m.subtract(m.log(total), t))
    value = m.where(reflect, m.subtract(m.subtract(m.c(math.log(math.pi)), log_sin), value),
                    value)
    pole = m.and_(m.le(x, m.c(0)), m.eq(x, m.floor(x)))
    inf = m.c(math.inf)
    value = m.where(m.or_(pole, m.eq(m.abs(x), inf)), inf, value)
    return value


@_unary("Digamma", "d/dx log Gamma(x) from the derivative of Lanczos's series; "
                   "psi(x) = psi(1 - x) - pi / tan(pi x) below 1/2; NaN at the poles.")
def digamma(m, x):
    reflect, z, _, pi_cot = _reflected(m, x)
    _, total, slope, t = _lanczos(m, z)
    value = m.add(m.subtract(m.log(t), m.divide(m.c(LANCZOS_G), t)), m.divide(slope, total))
    value = m.where(reflect, m.subtract(value, pi_cot), value)
    pole = m.and_(m.le(x, m.c(0)), m.eq(x, m.floor(x)))
    value = m.where(pole, m.c(math.nan), value)
    return m.where(m.eq(x, m.c(math.inf)), x, value)


TRIGAMMA_SHIFT = 6


@_unary("Trigamma", "psi'(x): the recurrence psi'(x) = psi'(x + 1) + 1/x^2 up to x + 6, "
                    "then the asymptotic series; reflection below 1/2.")
def trigamma(m, x):
    reflect = m.lt(x, m.c(0.5))
    z = m.where(reflect, m.subtract(m.c(1), x), x)
    total = m.c(0)
    for k in range(TRIGAMMA_SHIFT):
        d = m.add(z, m.c(k))
        total = m.add(total, m.divide(m.c(1), m.multiply(d, d)))
    y = m.add(z, m.c(TRIGAMMA_SHIFT))
    r = m.divide(m.c(1), y)
    r2 = m.multiply(r, r)
    # 1/y + 1/(2y^2) + 1/(6y^3) - 1/(30y^5) + 1/(42y^7) - 1/(30y^9) + 5/(66y^11)
    series = _horner(m, (5 / 66, -1 / 30, 1 / 42, -1 / 30, 1 / 6), r2)
    series = m.add(m.add(r, m.multiply(m.c(0.5), r2)), m.multiply(m.multiply(series, r2), r))
    value = m.add(total, series)
    # psi'(1 - x) + psi'(x) = pi^2 / sin^2(pi x)
    a = m.abs(x)
    frac = m.subtract(a, m.floor(a))
    s = m.sine(m.multiply(m.c(math.pi), frac))
    reflected = m.subtract(m.divide(m.c(math.pi ** 2), m.multiply(s, s)), value)
    value = m.where(reflect, reflected, value)
    pole = m.and_(m.le(x, m.c(0)), m.eq(x, m.floor(x)))
    return m.where(pole, m.c(math.inf), value)


def _binary_special(name: str, doc: str):
    def register(fn):
        class Kernel(XlaOpKernel):
            def compile(self, ctx):
                from .elementwise import binary_operands
                x, y = binary_operands(ctx)
                require_float(x)
                require_same_types([x, y])
                ctx.set_output(0, fn(_Math(ctx, x), x, y))
        Kernel.__name__ = Kernel.__qualname__ = name
        Kernel.__doc__ = doc
        register_xla_op(name)(Kernel)
        return fn
    return register


@_binary_special("Xlogy", "x * log(y), and 0 where x is 0 (whatever y is, as TF).")
def xlogy(m, x, y):
    zero = m.c(0)
    return m.where(m.eq(x, zero), zero, m.multiply(x, m.log(y)))


@_binary_special("Xlog1py", "x * log1p(y), and 0 where x is 0.")
def xlog1py(m, x, y):
    zero = m.c(0)
    return m.where(m.eq(x, zero), zero, m.multiply(x, m.log_plus_one(y)))
