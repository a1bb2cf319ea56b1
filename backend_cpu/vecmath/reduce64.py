"""Argument reduction by pi/2 for f64 sin, cos and tan, over the whole double range.

`reduce_pio2(d, a)` takes a = |x| (finite or not) and returns (r_hi, r_lo, q):
a = q*(pi/2) + r_hi + r_lo with |r_hi| <= pi/4 (plus a hair), r_lo the
double-double tail, q (an integer vector) mod 4 the quadrant. r is accurate
to about 2^-100 relative even for the inputs closest to a multiple of pi/2
(for doubles those leave |r| ~ 2^-61), so sin/cos/tan round correctly after it
up to the polynomial's own error. Two straight-line paths, chosen per lane:

* a < 2^28 (Cody-Waite): n = round(a * 2/pi); pi/2 = P1 + P2 + P3 (three
  doubles). a - n*P1 is exact with one fused multiply-add (both are multiples
  of 2^-52 and the difference is below 2); n*P2 is split exactly into two
  doubles, and only n*P3 (below 2^-78 here) is rounded.

* a >= 2^28 (Payne-Hanek): a = M * 2^(e-1075) for its biased exponent e.
  Bits of 2/pi whose weight times 2^(e-1075) is a multiple of 4 change
  neither the quadrant nor r, so for the bucket b = e >> 3 a table keeps only
  C = (2/pi) mod 2^(1077-8b), in four doubles C0..C3 holding consecutive
  51-, 53-, 53- and 53-bit windows of it. Then a*C < 2^62 and each a*Cj is
  split exactly into two doubles with a fused multiply-add. The two big
  products are reduced mod 4 exactly; their sum A (a multiple of 2^-49 below
  8) and the next term give n, and the fraction a*C - n is summed in
  double-double with error-free additions, so cancellation costs nothing. The
  dropped tail of 2/pi is below 2^-148. The table and `a` are scaled by 2^600
  and 2^-600 (exact) so that no window underflows; the table has 4 doubles
  for each of the 125 buckets at or above 2^28, loaded per lane.

Both paths run for every lane (straight-line code), so the Payne-Hanek path,
which ordinary inputs never need, is about 60% of the time of an f64 sin
(measured: ~270 M/s per thread with it, ~650 without).
"""
from __future__ import annotations

import functools
import math

from .coeffs import _pi_fixed, pi_over_2_parts
from .math_builder import MathBuilder

CODY_WAITE_LIMIT = 2.0 ** 28
_BUCKET_SHIFT = 3                        # 8 exponents per table bucket
_FIRST_BUCKET = (1023 + 28) >> _BUCKET_SHIFT
_LAST_BUCKET = 2047 >> _BUCKET_SHIFT     # includes inf/NaN (their lanes are discarded)
_WINDOWS = (51, 53, 53, 53)
_SCALE = 600                             # table * 2^600, a * 2^-600


@functools.lru_cache(maxsize=None)
def _two_over_pi_fixed(precision: int) -> int:
    """floor((2/pi) * 2^precision), exact (computed with 64 guard bits)."""
    guard = precision + 64
    return ((2 << (2 * guard)) // _pi_fixed(guard)) >> 64


@functools.lru_cache(maxsize=None)
def pio2_parts() -> tuple[float, ...]:
    """(P1, P2, P3): pi/2 = P1 + P2 + P3 + O(2^-160), each rounded to nearest."""
    return tuple(pi_over_2_parts(3))


@functools.lru_cache(maxsize=None)
def payne_hanek_table() -> tuple[float, ...]:
    """4 doubles per exponent bucket: the windows C0..C3 of (2/pi) mod 2^(1077-8b), * 2^600."""
    precision = 1300                     # bit of weight 2^w sits at position w + precision
    bits = _two_over_pi_fixed(precision)
    table = []
    for bucket in range(_FIRST_BUCKET, _LAST_BUCKET + 1):
        top = 1077 - (bucket << _BUCKET_SHIFT)
        for width in _WINDOWS:
            low = top - width
            chunk = (bits >> (low + precision)) & ((1 << width) - 1)
            table.append(math.ldexp(chunk, low + _SCALE))
            top = low
    return tuple(table)


def _mod4(d: MathBuilder, t):
    """t mod 4 in [0, 4), exact for any double t (a multiple of its own ulp)."""
    return d.b.fsub(t, d.b.fmul(d.floor(d.b.fmul(t, d.const(0.25))), d.const(4.0)))


def _cody_waite(d: MathBuilder, a):
    """(r_hi, r_lo, n) for a < 2^28 (any value elsewhere, finite for finite a)."""
    b = d.b
    p1, p2, p3 = (d.const(p) for p in pio2_parts())
    n = d.rint(b.fmul(a, d.const(2.0 / math.pi)))
    neg_n = b.fneg(n)
    r1 = d.fma(neg_n, p1, a)                                   # exact
    prod, prod_err = d.two_prod(n, p2)
    s, s_err = d.two_sum(r1, b.fneg(prod))
    low = d.fma(neg_n, p3, b.fsub(s_err, prod_err))
    r_hi, r_lo = d.fast_two_sum(s, low)
    return r_hi, r_lo, n


def _payne_hanek(d: MathBuilder, a):
    """(r_hi, r_lo, n) for 2^28 <= a < inf; n in [0, 8]. `a` must be finite."""
    b = d.b
    exponent = b.lshr(d.as_int(a), d.iconst(52))
    bucket = b.lshr(exponent, d.iconst(_BUCKET_SHIFT))
    first = d.iconst(_FIRST_BUCKET)
    bucket = d.select(b.icmp_unsigned("<", bucket, first), first, bucket)
    base = b.shl(b.sub(bucket, first), d.iconst(2))           # 4 doubles per bucket
    table = payne_hanek_table()
    a_scaled = b.fmul(a, d.const(2.0 ** -_SCALE))
    products = []
    for j in range(4):
        window = d.table_lookup("vecmath.pio2.table", table, b.add(base, d.iconst(j)))
        products.append(d.two_prod(a_scaled, window))
    (h0, l0), (h1, l1), (h2, l2), (h3, _) = products
    big = _mod4(d, b.fadd(_mod4(d, h0), _mod4(d, l0)))        # exact: multiples of 2^-49
    h1 = _mod4(d, h1)
    n = d.rint(b.fadd(big, h1))
    # The fraction a*C - n, summed error-free where it matters: the two parts
    # below 2^-41 (l1, h2) are paired exactly, apart from the big ones (a shorter
    # dependency chain), and only terms far below the result are rounded: where
    # the sum cancels, u_hi ~ -small_hi and u_lo, e are below 2^-94.
    u_hi, u_lo = d.two_sum(b.fsub(big, n), h1)
    small_hi, small_lo = d.two_sum(l1, h2)
    tiny = b.fadd(small_lo, b.fadd(l2, h3))
    hi, err = d.two_sum(u_hi, small_hi)
    lo = b.fadd(b.fadd(u_lo, err), tiny)
    f_hi, f_lo = d.fast_two_sum(hi, lo)
    # r = f * pi/2 in double-double.
    p_hi, p_lo = math.pi / 2, pio2_parts()[1]
    r_hi, r_err = d.two_prod(f_hi, d.const(p_hi))
    r_lo = d.fma(f_hi, d.const(p_lo), d.fma(f_lo, d.const(p_hi), r_err))
    r_hi, r_lo = d.fast_two_sum(r_hi, r_lo)
    return r_hi, r_lo, n


def reduce_pio2(d: MathBuilder, a):
    """(r_hi, r_lo, q) for a = |x| (see the module docstring); q is an integer vector."""
    assert d.kind == "double"
    small = d.cmp("<", a, d.const(CODY_WAITE_LIMIT))
    huge = d.cmp("<", a, d.const(math.inf))
    # Each path sees only inputs it handles (others replaced by a safe value),
    # so no lane ever converts a NaN or an out-of-range value to an integer.
    r_hi_cw, r_lo_cw, n_cw = _cody_waite(d, d.select(small, a, d.const(0.0)))
    ph_input = d.select(d.b.and_(huge, d.b.not_(small)), a, d.const(CODY_WAITE_LIMIT))
    r_hi_ph, r_lo_ph, n_ph = _payne_hanek(d, ph_input)
    r_hi = d.select(small, r_hi_cw, r_hi_ph)
    r_lo = d.select(small, r_lo_cw, r_lo_ph)
    q = d.b.fptosi(d.select(small, n_cw, n_ph), d.int_ty)
    return r_hi, r_lo, q

