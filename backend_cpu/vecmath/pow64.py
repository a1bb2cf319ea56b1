"""f64 power in IR: x^y = exp(y * log|x|) with log|x| in double-double.

x^y amplifies the error of y * log|x| into a relative error of the result
(up to |y log x| ~ 745 before overflow or underflow), so log|x| is needed to
about 2^-64 relative: a double-double. How:

* |x| = 2^k * z with z in [0.707, 1.414) (bit arithmetic, no branches), and
  a 128-entry table indexed by the top 7 bits of z's mantissa gives invc
  (about 1/z, rounded to 8 significant bits) and log(1/invc) as hi + lo.
* r = z * invc - 1 is exact with one fused multiply-add (|r| < 2^-7 and the
  product has few enough bits); the table is built so, and checked to be.
* log|x| = k ln2 + log c + r - r^2/2 + r^3 P(r), P the Taylor series of
  log1p through r^10; the large terms are added with error-free transforms,
  the small ones collect in the low part.
* y * log|x| = p_hi + p_lo exactly enough (two_prod), then e^(p_hi + p_lo)
  folds p_lo into the reduced argument of exp (explog.exp_dd).

The sign for odd integer y and the IEEE special cases are shared with f32
(`explog.pow_special_cases`). About 1 ulp.
"""
from __future__ import annotations

import functools
import math
import struct
from fractions import Fraction

from .coeffs import ln2_parts
from .explog import exp_dd, pow_special_cases
from .math_builder import MathBuilder

_INDEX_BITS = 7
_INVC_BITS = 8                            # significant bits of invc: keeps r exact
_OFFSET = 0x3FE6A00000000000              # ~sqrt(1/2), a multiple of 2^45: z in [OFF, 2 OFF)
_LN2_HI, _LN2_LO = ln2_parts(41)          # k * LN2_HI is exact for |k| < 2^12
_LOG1P_TAIL = [(-1.0) ** k / (k + 3) for k in range(8)]    # 1/3, -1/4, ..., -1/10


def _bits_to_float(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _log_fraction(value: Fraction, precision: int = 160) -> Fraction:
    """log(value) for a rational value near 1, as 2 atanh((v-1)/(v+1)) in integers."""
    t = (value - 1) / (value + 1)
    scale = 1 << precision
    term = abs(t.numerator) * scale // t.denominator       # |t|^(2j+1) * scale
    square = t * t
    total, j = 0, 0
    while term:
        total += term // (2 * j + 1)
        term = term * square.numerator // square.denominator
        j += 1
    return Fraction(2 * total if t >= 0 else -2 * total, scale)


def _round_to_bits(value: Fraction, bits: int) -> Fraction:
    exponent = math.floor(math.log2(value)) - (bits - 1)
    step = Fraction(2) ** exponent
    return round(value / step) * step


@functools.lru_cache(maxsize=None)
def log_table() -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """(invc, logc_hi, logc_lo) per subinterval of z, with logc = -log(invc)."""
    invcs, his, los = [], [], []
    for i in range(1 << _INDEX_BITS):
        lo_z = Fraction(_bits_to_float(_OFFSET + (i << 45)))
        hi_z = Fraction(_bits_to_float(_OFFSET + ((i + 1) << 45)))
        if lo_z <= 1 < hi_z:
            invc = Fraction(1)                             # log(1) = 0 exactly
        else:
            invc = _round_to_bits(2 / (lo_z + hi_z), _INVC_BITS)
        # r = z * invc - 1 must be exact: its bits run from |r|'s leading bit down
        # to (grain of z) * (grain of invc), at most 53 of them (hi_z is excluded).
        r_max = max(abs(lo_z * invc - 1), abs(hi_z * invc - 1))
        z_grain = Fraction(2) ** (-52 if lo_z >= 1 else -53)
        grain = z_grain * Fraction(2) ** (math.floor(math.log2(invc)) - (_INVC_BITS - 1))
        assert r_max <= grain * 2 ** 53, f"log table entry {i}: z * invc - 1 is not exact"
        logc = -_log_fraction(invc)
        invcs.append(float(invc))
        his.append(float(logc))
        los.append(float(logc - Fraction(his[-1])))
    return tuple(invcs), tuple(his), tuple(los)


def _log_dd(d: MathBuilder, ax):
    """log(ax) as (hi, lo) for finite ax > 0 (no subnormals); garbage, never poison, else."""
    b = d.b
    tmp = b.sub(d.as_int(ax), d.iconst(_OFFSET))
    index = b.and_(b.lshr(tmp, d.iconst(52 - _INDEX_BITS)), d.iconst((1 << _INDEX_BITS) - 1))
    k = b.ashr(tmp, d.iconst(52))
    z = d.as_float(b.sub(d.as_int(ax), b.shl(k, d.iconst(52))))
    invc, logc_hi, logc_lo = (d.table_lookup(f"vecmath.log.{name}", values, index)
                              for name, values in zip(("invc", "logc_hi", "logc_lo"),
                                                      log_table()))
    r = d.fma(z, invc, d.const(-1.0))                               # exact
    kd = d.to_float(k)
    t1, e1 = d.two_sum(b.fmul(kd, d.const(_LN2_HI)), logc_hi)
    t2, e2 = d.two_sum(t1, r)
    r2, r2_err = d.two_prod(r, r)
    hi, e3 = d.two_sum(t2, b.fmul(r2, d.const(-0.5)))
    r3_tail = b.fmul(b.fmul(r2, r), d.horner(r, _LOG1P_TAIL))
    lo = d.fma(kd, d.const(_LN2_LO), b.fadd(logc_lo, b.fadd(e1, e2)))
    lo = b.fadd(lo, d.fma(r2_err, d.const(-0.5), b.fadd(e3, r3_tail)))
    return d.fast_two_sum(hi, lo)


def pow_f64(d: MathBuilder, x, y):
    assert d.kind == "double"
    b = d.b
    x = d.flush_denormal(x)
    y = d.flush_denormal(y)
    ax = d.fabs(x)
    l_hi, l_lo = _log_dd(d, ax)
    # log 0 = -inf, log inf = inf, log NaN = NaN; their low parts are 0.
    inf = d.const(math.inf)
    l_hi = d.select(d.cmp("==", ax, d.const(0.0)), d.const(-math.inf), l_hi)
    l_hi = d.select(d.cmp("==", ax, inf), inf, l_hi)
    l_hi = d.select(d.is_nan(ax), ax, l_hi)
    finite = d.cmp("<", d.fabs(l_hi), inf)
    l_lo = d.select(finite, l_lo, d.const(0.0))
    p_hi, p_err = d.two_prod(y, l_hi)
    p_lo = d.fma(y, l_lo, p_err)
    # Where |p_hi| is beyond exp's range the result saturates; p_lo may be NaN there.
    p_lo = d.select(d.cmp("<", d.fabs(p_hi), d.const(1000.0)), p_lo, d.const(0.0))
    return pow_special_cases(d, x, y, exp_dd(d, p_hi, p_lo))
