"""Polynomial coefficients for the vector math routines.

Two kinds of tables live here:

* Taylor coefficients (exact rationals like 1/k!), used where the reduced
  argument is small enough that a truncated series is already accurate:
  exp, expm1, log (as 2*atanh), sin and cos.
* Fitted polynomials for functions without a convenient series (erf, erfc,
  and atan on a reduced interval). They are fitted here, once per process
  and deterministically, by least squares at Chebyshev nodes followed by
  iteratively reweighted least squares (Lawson's algorithm), which converges
  toward the minimax polynomial for the requested weight. The reference
  values come from Python's `math` module in double precision, which is
  ample for the f32-accuracy targets these fits serve.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Callable

import numpy as np
from numpy.polynomial import chebyshev, polynomial


def taylor_exp(degree: int) -> list[float]:
    """1, 1, 1/2!, ..., 1/degree!: exp(r) = sum c_k r^k."""
    return [1.0 / math.factorial(k) for k in range(degree + 1)]


# e^r on |r| <= ln2/2 (with 0.1% to spare) by a degree-6 polynomial 1 + r + c2 r^2 + ...,
# fitted for the least maximum relative error (iteratively reweighted least squares on
# Chebyshev nodes), each coefficient rounded to f32 in turn and the rest fitted again:
# 3.2e-9 relative as stored, below Taylor degree 7's 7.4e-9 (rounded to f32 alike), with
# one fused multiply-add less. tests/backend_cpu/test_vecmath_coeffs.py measures both.
EXP_F32_MINIMAX6 = [1.0, 1.0, float.fromhex("0x1.fffffcp-2"), float.fromhex("0x1.555492p-3"),
                    float.fromhex("0x1.5558b6p-5"), float.fromhex("0x1.1239a2p-7"),
                    float.fromhex("0x1.6a4748p-10")]


def taylor_expm1_tail(degree: int) -> list[float]:
    """1/2!, 1/3!, ...: expm1(r) = r + r^2 * sum c_k r^k, through r^degree."""
    return [1.0 / math.factorial(k) for k in range(2, degree + 1)]


def atanh_tail(terms: int) -> list[float]:
    """2/3, 2/5, 2/7, ...: 2*atanh(s) = 2s + s * z * sum c_k z^k, z = s^2."""
    return [2.0 / (2 * k + 3) for k in range(terms)]


def sin_tail(terms: int) -> list[float]:
    """-1/3!, 1/5!, ...: sin(r) = r + r * z * sum c_k z^k, z = r^2."""
    return [(-1.0) ** (k + 1) / math.factorial(2 * k + 3) for k in range(terms)]


def cos_series(terms: int) -> list[float]:
    """1, -1/2!, 1/4!, ...: cos(r) = sum c_k z^k, z = r^2."""
    return [(-1.0) ** k / math.factorial(2 * k) for k in range(terms)]


def fit_polynomial(f: Callable[[float], float], lo: float, hi: float, degree: int,
                   weight: Callable[[float], float], center: float = 0.0,
                   nodes: int = 1000, iterations: int = 40) -> tuple[list[float], float]:
    """Near-minimax fit of f on [lo, hi] minimizing max |weight(x) * (p(x) - f(x))|.

    Returns the coefficients of p in powers of (x - center) and the weighted
    maximum error reached on the fitting nodes.
    """
    t = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)       # Chebyshev nodes in [-1, 1]
    x = lo + (hi - lo) * (t + 1) / 2
    y = np.array([f(v) for v in x])
    w_err = np.array([weight(v) for v in x])
    w = np.ones_like(x)
    for _ in range(iterations):
        coef = chebyshev.chebfit(t, y, degree, w=np.sqrt(w) * w_err)
        err = np.abs((chebyshev.chebval(t, coef) - y) * w_err)
        # Lawson: grow the weight where the error is largest.
        w = w * (err / err.max() + 1e-3)
        w /= w.max()
    # Express the Chebyshev series (in t) as a power series in u = x - center:
    # t = (2x - lo - hi) / (hi - lo) = (2u + 2*center - lo - hi) / (hi - lo).
    in_t = polynomial.Polynomial(chebyshev.cheb2poly(coef))
    t_of_u = polynomial.Polynomial([(2 * center - lo - hi) / (hi - lo), 2 / (hi - lo)])
    return [float(c) for c in in_t(t_of_u).coef], float(err.max())


# erf(x) = x * P(x^2) below this |x|, and 1 - exp(-x^2) * Q(|x|) above it.
ERF_SPLIT = 0.875
# erf(x) rounds to 1 in f32 above this |x| (erfc(3.92) < 2^-25).
ERF_ONE_F32 = 3.95
ERF_LARGE_CENTER = 2.4


@functools.lru_cache(maxsize=None)
def erf_small() -> tuple[float, ...]:
    """P with erf(x) = x * P(x^2) for |x| < ERF_SPLIT, relative error < 1e-8."""
    def f(u):
        return math.erf(math.sqrt(u)) / math.sqrt(u) if u > 0 else 2 / math.sqrt(math.pi)
    coeffs, _ = fit_polynomial(f, 0.0, ERF_SPLIT ** 2, 5, weight=lambda u: 1 / f(u))
    return tuple(coeffs)


@functools.lru_cache(maxsize=None)
def erf_large() -> tuple[float, ...]:
    """Q with erfc(x) = exp(-x^2) * Q(x - ERF_LARGE_CENTER) on [ERF_SPLIT, ERF_ONE_F32].

    The weight exp(-x^2) * 2^24 measures the error of 1 - erfc(x) in f32 ulps of
    erf (which lies in [0.78, 1) here), so the fit spends its accuracy where erf
    needs it (near the split) rather than where erfc is tiny.
    """
    def f(x):
        return math.erfc(x) * math.exp(x * x)
    coeffs, _ = fit_polynomial(f, ERF_SPLIT, ERF_ONE_F32, 8,
                               weight=lambda x: math.exp(-x * x) * 2.0 ** 24,
                               center=ERF_LARGE_CENTER)
    return tuple(coeffs)


TAN_PI_8 = math.tan(math.pi / 8)


@functools.lru_cache(maxsize=None)
def atan_small() -> tuple[float, ...]:
    """A with atan(u) = u * A(u^2) for |u| <= tan(pi/8), relative error < 1e-12."""
    def f(z):
        return math.atan(math.sqrt(z)) / math.sqrt(z) if z > 0 else 1.0
    coeffs, _ = fit_polynomial(f, 0.0, TAN_PI_8 ** 2, 7, weight=lambda z: 1 / f(z))
    return tuple(coeffs)


def _pi_fixed(precision: int) -> int:
    """pi * 2^precision, exact to the last bit or two, by Machin's formula in integers."""
    guard = precision + 32

    def arctan_inv(n: int) -> int:       # arctan(1/n) * 2^guard
        total, term, k, sign = 0, (1 << guard) // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    return (4 * (4 * arctan_inv(5) - arctan_inv(239))) >> 32


def two_over_pi_chunks(count: int, bits: int = 24) -> list[int]:
    """The first count * bits bits of 2/pi after the binary point, in `bits`-bit integers.

    Computed with integer arithmetic, so no long constant has to be typed in.
    """
    precision = count * bits + 64
    two_over_pi = (2 << (2 * precision)) // _pi_fixed(precision)   # (2/pi) * 2^precision
    mask = (1 << bits) - 1
    return [(two_over_pi >> (precision - bits * (i + 1))) & mask for i in range(count)]


def ln2_parts(hi_bits: int = 53) -> tuple[float, float]:
    """(hi, lo): hi = ln 2 rounded to `hi_bits` significant bits, lo = ln 2 - hi as a double."""
    precision = 200
    ln2_fixed = 0                          # ln 2 = sum_k 1 / (k 2^k)
    for k in range(1, precision + 8):
        ln2_fixed += (1 << precision) // (k << k)
    ln2 = Fraction(ln2_fixed, 1 << precision)
    scale = 2 ** hi_bits                   # ln 2 is in [0.5, 1): hi has hi_bits bits
    hi = Fraction(round(ln2 * scale), scale)
    return float(hi), float(ln2 - hi)


def pi_over_2_parts(count: int = 3) -> list[float]:
    """Doubles p0, p1, ... with p0 + p1 + ... = pi/2 to about 53*count bits."""
    precision = 60 * count + 64
    rest = Fraction(_pi_fixed(precision), 2 << precision)
    parts = []
    for _ in range(count):
        parts.append(float(rest))
        rest -= Fraction(parts[-1])
    return parts


def _atan_fixed(numerator: int, denominator: int, precision: int) -> int:
    """atan(numerator/denominator) * 2^precision for a ratio in [0, 1), by its series
    in integers (the ratio <= 7/8 here, so a few hundred terms suffice)."""
    guard = precision + 32
    total, k, sign = 0, 1, 1
    power = (numerator << guard) // denominator           # x^k * 2^guard
    square_num, square_den = numerator * numerator, denominator * denominator
    while power:
        total += sign * (power // k)
        power = power * square_num // square_den
        k += 2
        sign = -sign
    return total >> 32


@functools.lru_cache(maxsize=None)
def atan_steps_dd(steps: int = 8) -> tuple[tuple[float, float], ...]:
    """(hi, lo) with hi + lo = atan(k/steps) to ~106 bits, for k = 0..steps."""
    precision = 200
    result = []
    for k in range(steps + 1):
        exact = (_pi_fixed(precision) // 4 if k == steps
                 else _atan_fixed(k, steps, precision))
        value = Fraction(exact, 1 << precision)
        hi = float(value)
        result.append((hi, float(value - Fraction(hi))))
    return tuple(result)


def atan_tail(terms: int) -> list[float]:
    """-1/3, 1/5, -1/7, ...: atan(u) = u + u * z * sum c_k z^k, z = u^2 (Taylor)."""
    return [(-1.0) ** (k + 1) / (2 * k + 3) for k in range(terms)]
