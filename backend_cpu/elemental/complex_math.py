"""The arithmetic and functions of complex numbers in LLVM IR, on their two parts.

Every recipe takes the parts (re, im) of its operands as LLVM float values (`split`
takes a complex value apart, `join` puts one together; complex_ops.py says how
complex values are represented and dispatches to these) and returns the parts of
the result. Semantics are the reference evaluator's, which is numpy's on parts
flushed like floats (hlo/eval_elementwise.py):

- multiply: (fma(a, c, -bd), fma(a, d, bc)), as numpy's vector loops on an FMA
  machine (where numpy has no FMA its results differ from these by the rounding of
  one product: only a cancelling sum shows it);
- divide: numpy's algorithm (Smith's scaling by the larger part of the divisor, and
  x / 0 as (re / 0, im / 0)), so inf and NaN come out where numpy's do;
- abs: hypot without overflow or underflow, inf when a part is inf (even with a NaN);
- sqrt, log, exp, expm1, log1p, sine, cosine, tan, tanh, rsqrt (1 / sqrt), logistic
  (1 / (1 + e^-z)) and sign (z / |z|): the C99 formulas numpy's libm uses, with the special values of C99's
  Annex G (csqrt(x + inf i) = inf + inf i, cexp(-inf + NaN i) = 0, ...). They are
  computed in f64 for both c64 and c128 (so c64 never overflows inside), with the
  f64 vector-math routines (vecmath/); c128 scales where an intermediate could
  overflow (sqrt, exp, cosh/sinh).

Everything is straight-line code (selects, no branches), like scalar_ops.py.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..llvm.types import DOUBLE, FLOAT
from ..vecmath import routines
from ..vecmath.math_builder import MathBuilder
from .scalar_ops import call_intrinsic

F64 = DOUBLE
INF = float("inf")


# --- parts ------------------------------------------------------------------------------

def split(b: ir.IRBuilder, z: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(re, im) of a complex value."""
    return b.extract_value(z, 0), b.extract_value(z, 1)


def join(b: ir.IRBuilder, ty: ir.Type, re: ir.Value, im: ir.Value) -> ir.Value:
    """The complex value of type `ty` ({T, T}) with parts `re`, `im` (of type T)."""
    return b.insert_value(b.insert_value(ir.Constant(ty, ir.Undefined), re, 0), im, 1)


def _c(x: ir.Value, value: float) -> ir.Constant:
    return ir.Constant(x.type, value)


def _fabs(b, x):
    return call_intrinsic(b, "llvm.fabs", [x])


def _fsqrt(b, x):
    return call_intrinsic(b, "llvm.sqrt", [x])


def _copysign(b, magnitude, sign):
    return call_intrinsic(b, "llvm.copysign", [magnitude, sign])


def _is_nan(b, x):
    return b.fcmp_unordered("uno", x, x)


def _is_inf(b, x):
    return b.fcmp_ordered("==", _fabs(b, x), _c(x, INF))


def _is_finite(b, x):
    return b.fcmp_ordered("<", _fabs(b, x), _c(x, INF))


def _eq(b, x, value: float):
    return b.fcmp_ordered("==", x, _c(x, value))


def _math(b, opcode: str, *args):
    return routines.emit_math(b, opcode, list(args))


def _wide(b, x):
    return b.fpext(x, F64) if x.type == FLOAT else x


def _narrow(b, x, ty):
    return b.fptrunc(x, ty) if ty == FLOAT else x


# --- arithmetic in the parts' own type (numpy rounds every step in it) ---------------------

def multiply(b, ar, ai, br, bi):
    """(ar br - ai bi, ar bi + ai br), each with one fused multiply-add, the way numpy's
    vectorized loops compute it (and more accurate than two roundings)."""
    m = MathBuilder(b, ar.type)
    return m.fma(ar, br, b.fneg(b.fmul(ai, bi))), m.fma(ar, bi, b.fmul(ai, br))


def divide(b, ar, ai, br, bi):
    """numpy's complex division: scale by the larger part of the divisor (Smith); a zero
    divisor divides each part by |re| (inf or NaN); a NaN divisor takes the last case."""
    abr, abi = _fabs(b, br), _fabs(b, bi)
    one = _c(ar, 1.0)
    rat = b.fdiv(bi, br)
    scl = b.fdiv(one, b.fadd(br, b.fmul(bi, rat)))
    r1 = b.fmul(b.fadd(ar, b.fmul(ai, rat)), scl)
    i1 = b.fmul(b.fsub(ai, b.fmul(ar, rat)), scl)
    r0, i0 = b.fdiv(ar, abr), b.fdiv(ai, abr)
    rat2 = b.fdiv(br, bi)
    scl2 = b.fdiv(one, b.fadd(bi, b.fmul(br, rat2)))
    r2 = b.fmul(b.fadd(b.fmul(ar, rat2), ai), scl2)
    i2 = b.fmul(b.fsub(b.fmul(ai, rat2), ar), scl2)
    real_larger = b.fcmp_ordered(">=", abr, abi)
    zero = b.and_(_eq(b, abr, 0.0), _eq(b, abi, 0.0))
    re = b.select(real_larger, b.select(zero, r0, r1), r2)
    im = b.select(real_larger, b.select(zero, i0, i1), i2)
    return re, im


# --- functions, computed in f64 --------------------------------------------------------------

def hypot(b, x, y, scaled: bool):
    """|x + iy| in f64; `scaled`: without overflow or underflow for any f64 parts (c128),
    else the plain sqrt(x^2 + y^2), exact enough and safe for parts widened from f32.
    inf when a part is inf (NaN or not), else NaN when a part is NaN."""
    if scaled:
        ax, ay = _fabs(b, x), _fabs(b, y)
        x_larger = b.fcmp_ordered(">=", ax, ay)
        big, small = b.select(x_larger, ax, ay), b.select(x_larger, ay, ax)
        t = b.fdiv(small, big)
        r = b.fmul(big, _fsqrt(b, b.fadd(_c(t, 1.0), b.fmul(t, t))))
        r = b.select(_eq(b, big, 0.0), _c(r, 0.0), r)
        r = b.select(b.or_(_is_nan(b, x), _is_nan(b, y)), _c(r, float("nan")), r)
    else:
        r = _fsqrt(b, b.fadd(b.fmul(x, x), b.fmul(y, y)))
    return b.select(b.or_(_is_inf(b, x), _is_inf(b, y)), _c(r, INF), r)


def abs_(b, x, y, part):
    return _narrow(b, hypot(b, _wide(b, x), _wide(b, y), part == DOUBLE), part)


def sqrt(b, x, y, part):
    """csqrt: t = sqrt((|x| + |z|) / 2); x >= 0: (t, y / 2t), else (|y| / 2t, +-t)."""
    x, y = _wide(b, x), _wide(b, y)
    scaled = part == DOUBLE
    if scaled:      # |x| + |z| may overflow: sqrt(z) = 2 sqrt(z / 4)
        big = b.or_(b.fcmp_ordered(">", _fabs(b, x), _c(x, 2.0 ** 1020)),
                    b.fcmp_ordered(">", _fabs(b, y), _c(y, 2.0 ** 1020)))
        s = b.select(big, _c(x, 0.25), _c(x, 1.0))
        xs, ys = b.fmul(x, s), b.fmul(y, s)
    else:
        xs, ys = x, y
    h = hypot(b, xs, ys, scaled)
    t = _fsqrt(b, b.fmul(b.fadd(_fabs(b, xs), h), _c(x, 0.5)))
    two_t = b.fadd(t, t)
    re = b.select(b.fcmp_ordered(">=", xs, _c(x, 0.0)), t, b.fdiv(_fabs(b, ys), two_t))
    im = b.select(b.fcmp_ordered(">=", xs, _c(x, 0.0)), b.fdiv(ys, two_t), _copysign(b, t, ys))
    if scaled:
        back = b.select(big, _c(x, 2.0), _c(x, 1.0))
        re, im = b.fmul(re, back), b.fmul(im, back)
    zero = b.and_(_eq(b, x, 0.0), _eq(b, y, 0.0))
    re = b.select(zero, _c(x, 0.0), re)
    im = b.select(zero, y, im)
    y_inf = _is_inf(b, y)                       # csqrt(x + inf i) = inf + inf i, any x
    re = b.select(y_inf, _c(x, INF), re)
    im = b.select(y_inf, y, im)
    return _narrow(b, re, part), _narrow(b, im, part)


def log(b, x, y, part):
    """clog: (log |z|, atan2(y, x)); log 0 = -inf, log of an inf part = inf."""
    xw, yw = _wide(b, x), _wide(b, y)
    re = _math(b, "log", hypot(b, xw, yw, part == DOUBLE))
    im = _math(b, "atan2", yw, xw)
    return _narrow(b, re, part), _narrow(b, im, part)


def log1p(b, x, y, part):
    """numpy's log1p of a complex: log(z + 1), with z + 1 formed first."""
    xw, yw = _wide(b, x), _wide(b, y)
    x1 = b.fadd(xw, _c(xw, 1.0))
    re = _math(b, "log", hypot(b, x1, yw, part == DOUBLE))
    im = _math(b, "atan2", yw, x1)
    return _narrow(b, re, part), _narrow(b, im, part)


def _exp_factors(b, x, part):
    """e^x as a product of two factors that do not overflow where e^x * cos y does not:
    e^(x/2) twice for c128, (e^x, None) for c64 (f64 holds e^x of any f32 x)."""
    if part == DOUBLE:
        h = _math(b, "exponential", b.fmul(x, _c(x, 0.5)))
        return h, h
    return _math(b, "exponential", x), None


def _scale(b, factors, v):
    first, second = factors
    v = b.fmul(first, v)
    return v if second is None else b.fmul(v, second)


def exp(b, x, y, part):
    """cexp: e^x (cos y, sin y); y = 0 gives (e^x, y); -inf with a non-finite y gives 0,
    +inf with a non-finite y gives (inf, NaN)."""
    xw, yw = _wide(b, x), _wide(b, y)
    factors = _exp_factors(b, xw, part)
    re = _scale(b, factors, _math(b, "cosine", yw))
    im = _scale(b, factors, _math(b, "sine", yw))
    y_zero = _eq(b, yw, 0.0)
    re = b.select(y_zero, _scale(b, factors, _c(xw, 1.0)), re)
    im = b.select(y_zero, yw, im)
    y_bad = b.not_(_is_finite(b, yw))
    low = b.and_(y_bad, _eq(b, xw, -INF))
    high = b.and_(y_bad, _eq(b, xw, INF))
    re = b.select(low, _c(xw, 0.0), b.select(high, _c(xw, INF), re))
    im = b.select(low, _c(xw, 0.0), b.select(high, _c(xw, float("nan")), im))
    return _narrow(b, re, part), _narrow(b, im, part)


def expm1(b, x, y, part):
    """numpy's expm1 of a complex: (expm1(x) cos y - 2 sin^2(y/2), e^x sin y)."""
    xw, yw = _wide(b, x), _wide(b, y)
    a = _math(b, "sine", b.fmul(yw, _c(yw, 0.5)))
    re = b.fsub(b.fmul(_math(b, "exponential-minus-one", xw), _math(b, "cosine", yw)),
                b.fmul(_c(yw, 2.0), b.fmul(a, a)))
    im = b.fmul(_math(b, "exponential", xw), _math(b, "sine", yw))
    return _narrow(b, re, part), _narrow(b, im, part)


def _cosh_sinh(b, y):
    """(cosh y, sinh y) in f64: from expm1 near 0 (no cancellation), from e^(|y|/2)
    squared for large |y| (finite as long as the result is)."""
    ay = _fabs(b, y)
    e2 = _math(b, "exponential", b.fmul(ay, _c(y, 0.5)))
    e = b.fmul(e2, e2)
    large = b.fcmp_ordered(">", ay, _c(y, 20.0))
    half_e = b.fmul(b.fmul(_c(y, 0.5), e2), e2)
    cosh = b.select(large, half_e,
                    b.fmul(_c(y, 0.5), b.fadd(e, b.fdiv(_c(y, 1.0), e))))
    em = _math(b, "exponential-minus-one", ay)
    sinh_small = b.fmul(_c(y, 0.5), b.fadd(em, b.fdiv(em, b.fadd(em, _c(y, 1.0)))))
    sinh = _copysign(b, b.select(large, half_e, sinh_small), y)
    return cosh, sinh


def sin_cos(b, x, y, part, cosine: bool):
    """csin: (sin x cosh y, cos x sinh y); ccos: (cos x cosh y, -sin x sinh y); with
    C99's values at x = 0, y = 0 and a non-finite x with an infinite y."""
    xw, yw = _wide(b, x), _wide(b, y)
    sx, cx = _math(b, "sine", xw), _math(b, "cosine", xw)
    ch, sh = _cosh_sinh(b, yw)
    zero = _c(xw, 0.0)
    x_zero, y_zero = _eq(b, xw, 0.0), _eq(b, yw, 0.0)
    x_bad_y_inf = b.and_(b.not_(_is_finite(b, xw)), _is_inf(b, yw))
    if cosine:
        re = b.fmul(cx, ch)
        im = b.fneg(b.fmul(sx, sh))
        im = b.select(b.or_(x_zero, y_zero), zero, im)
        re = b.select(x_bad_y_inf, _c(xw, INF), re)
        im = b.select(x_bad_y_inf, _c(xw, float("nan")), im)
    else:
        re = b.select(x_zero, xw, b.fmul(sx, ch))
        im = b.select(y_zero, yw, b.fmul(cx, sh))
        re = b.select(x_bad_y_inf, _c(xw, float("nan")), re)
        im = b.select(x_bad_y_inf, _c(xw, INF), im)      # +inf for either sign of y
    return _narrow(b, re, part), _narrow(b, im, part)


def _tanh_wide(b, x, y):
    """ctanh in f64 (Kahan): t = tan y, s = sinh x, beta = 1 + t^2,
    ((beta sqrt(1 + s^2) s, t) / (1 + beta s^2)); for |x| > 22 tanh x is +-1 in f64 and
    the imaginary part 4 sin y cos y e^(-2|x|); an infinite x gives (+-1, 0)."""
    t = _math(b, "tan", y)
    _, s = _cosh_sinh(b, x)
    one = _c(x, 1.0)
    beta = b.fadd(one, b.fmul(t, t))
    rho = _fsqrt(b, b.fadd(one, b.fmul(s, s)))
    denom = b.fadd(one, b.fmul(beta, b.fmul(s, s)))
    re = b.fdiv(b.fmul(b.fmul(beta, rho), s), denom)
    im = b.fdiv(t, denom)
    ax = _fabs(b, x)
    large = b.fcmp_ordered(">", ax, _c(x, 22.0))
    far = _math(b, "exponential", b.fmul(ax, _c(x, -2.0)))
    im_large = b.fmul(b.fmul(_c(x, 4.0), b.fmul(_math(b, "sine", y), _math(b, "cosine", y))), far)
    re = b.select(large, _copysign(b, one, x), re)
    im = b.select(large, im_large, im)
    x_inf = _is_inf(b, x)
    im = b.select(x_inf, _c(x, 0.0), im)
    # A finite x with an infinite or NaN y: NaN (not the +-1 of the large-|x| branch).
    y_bad = b.and_(b.not_(_is_finite(b, y)), _is_finite(b, x))
    re = b.select(y_bad, _c(x, float("nan")), re)
    re = b.select(_eq(b, x, 0.0), x, re)        # tanh(iy) = i tan y
    im = b.select(_eq(b, y, 0.0), y, im)        # tanh(x) is real
    return re, im


def tanh(b, x, y, part):
    re, im = _tanh_wide(b, _wide(b, x), _wide(b, y))
    return _narrow(b, re, part), _narrow(b, im, part)


def tan(b, x, y, part):
    # tan z = -i tanh(iz), iz = -y + ix
    xw, yw = _wide(b, x), _wide(b, y)
    re, im = _tanh_wide(b, b.fneg(yw), xw)
    return _narrow(b, im, part), _narrow(b, b.fneg(re), part)


def rsqrt(b, x, y, part):
    # The evaluator's 1 / sqrt(z): a complex division, as numpy divides.
    sr, si = sqrt(b, x, y, part)
    return divide(b, _c(sr, 1.0), _c(sr, 0.0), sr, si)


def logistic(b, x, y, part):
    """1 / (1 + e^-z), each step as the evaluator (numpy) takes it, in the parts' type."""
    er, ei = exp(b, b.fneg(x), b.fneg(y), part)
    one, nought = _c(x, 1.0), _c(x, 0.0)
    return divide(b, one, nought, b.fadd(one, er), ei)


def sign(b, x, y, part):
    """z / |z| (numpy 2): 0 at 0; one infinite part gives its unit direction (even with
    a NaN beside it); two infinite parts or a NaN otherwise give NaN."""
    xw, yw = _wide(b, x), _wide(b, y)
    h = hypot(b, xw, yw, part == DOUBLE)
    re, im = b.fdiv(xw, h), b.fdiv(yw, h)
    zero = _eq(b, h, 0.0)
    re = b.select(zero, _c(xw, 0.0), re)
    im = b.select(zero, _c(xw, 0.0), im)
    x_inf, y_inf = _is_inf(b, xw), _is_inf(b, yw)
    only_x = b.and_(x_inf, b.not_(y_inf))       # (inf, NaN) too: numpy gives (1, 0)
    only_y = b.and_(y_inf, b.not_(x_inf))
    one, nought = _c(xw, 1.0), _c(xw, 0.0)
    re = b.select(only_x, _copysign(b, one, xw), b.select(only_y, _copysign(b, nought, xw), re))
    im = b.select(only_x, _copysign(b, nought, yw), b.select(only_y, _copysign(b, one, yw), im))
    return _narrow(b, re, part), _narrow(b, im, part)


# --- binary functions: the evaluator's steps, one recipe each -----------------------------

def atan2(b, yr, yi, xr, xi, part):
    """XLA's complex atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)), step by step as
    the evaluator takes it (hlo/eval_elementwise.complex_atan2): the products and sums
    in the parts' type, sqrt and log by their recipes."""
    x2, y2 = multiply(b, xr, xi, xr, xi), multiply(b, yr, yi, yr, yi)
    rr, ri = sqrt(b, b.fadd(x2[0], y2[0]), b.fadd(x2[1], y2[1]), part)
    iyr, iyi = multiply(b, _c(yr, 0.0), _c(yr, 1.0), yr, yi)
    qr, qi = divide(b, b.fadd(xr, iyr), b.fadd(xi, iyi), rr, ri)
    lr, li = log(b, qr, qi, part)
    return multiply(b, _c(lr, -0.0), _c(lr, -1.0), lr, li)


def _multiply_plain(b, ar, ai, br, bi):
    """(ar br - ai bi, ar bi + ai br), four roundings and no fused multiply-add: numpy's
    scalar C product in its complex power (nc_prod), and C's complex product."""
    return (b.fsub(b.fmul(ar, br), b.fmul(ai, bi)), b.fadd(b.fmul(ar, bi), b.fmul(ai, br)))


def _multiply_annex_g(b, ar, ai, br, bi):
    """C's complex product (what libm's cpow computes w log z with): the plain one,
    except that a NaN + NaN i from an infinite factor is recomputed with the infinite
    factor boxed to its signs (C99 Annex G): (2.5) (inf + NaN i) is inf + inf i."""
    re, im = _multiply_plain(b, ar, ai, br, bi)
    both_nan = b.and_(_is_nan(b, re), _is_nan(b, im))

    def boxed(x, y):
        """An infinite factor's parts as +-1 / +-0 (a NaN part as +-0), and whether it
        is infinite."""
        inf = b.or_(_is_inf(b, x), _is_inf(b, y))
        one, zero = _c(x, 1.0), _c(x, 0.0)
        bx = _copysign(b, b.select(_is_inf(b, x), one, zero), x)
        by = _copysign(b, b.select(_is_inf(b, y), one, zero), y)
        return inf, bx, by

    def unnan(x):
        return b.select(_is_nan(b, x), _copysign(b, _c(x, 0.0), x), x)

    a_inf, bar, bai = boxed(ar, ai)
    b_inf, bbr, bbi = boxed(br, bi)
    # Box whichever factor is infinite; the other loses its NaNs to +-0.
    xr = b.select(a_inf, bar, unnan(ar))
    xi = b.select(a_inf, bai, unnan(ai))
    yr = b.select(b_inf, bbr, unnan(br))
    yi = b.select(b_inf, bbi, unnan(bi))
    inf = _c(re, INF)
    rr = b.fmul(inf, b.fsub(b.fmul(xr, yr), b.fmul(xi, yi)))
    ri = b.fmul(inf, b.fadd(b.fmul(xr, yi), b.fmul(xi, yr)))
    recover = b.and_(both_nan, b.or_(a_inf, b_inf))
    return b.select(recover, rr, re), b.select(recover, ri, im)


# numpy's integer exponents: |n| < 100 by repeated squaring (7 bits).
_POWER_BITS = 7


def power(b, ar, ai, br, bi, part):
    """numpy's complex power (the evaluator's np.power), its branches as selects:
    z^0 = 1; 0^w = 0 when re(w) > 0, else NaN; a real integer exponent n with
    |n| < 100 multiplies (n = 1, 2, 3 unrolled; else squaring from 1, then 1 / that
    for n < 0); any other exponent is exp(w log z) (libm's cpow)."""
    one, zero = _c(ar, 1.0), _c(ar, 0.0)
    nan = _c(ar, float("nan"))
    # The integer path.
    n_float = call_intrinsic(b, "llvm.trunc", [br])
    integral = b.and_(_eq(b, bi, 0.0), b.fcmp_ordered("==", n_float, br))
    small = b.and_(b.fcmp_ordered("<", n_float, _c(br, 100.0)),
                   b.fcmp_ordered(">", n_float, _c(br, -100.0)))
    n = b.fptosi(b.select(b.and_(integral, small), _fabs(b, n_float), zero),
                 ir.IntType(32))
    acc = (one, zero)
    p = (ar, ai)
    for k in range(_POWER_BITS):
        bit = b.icmp_unsigned("!=", b.and_(n, ir.Constant(n.type, 1 << k)),
                              ir.Constant(n.type, 0))
        prod = _multiply_plain(b, acc[0], acc[1], p[0], p[1])
        acc = (b.select(bit, prod[0], acc[0]), b.select(bit, prod[1], acc[1]))
        if k + 1 < _POWER_BITS:
            p = _multiply_plain(b, p[0], p[1], p[0], p[1])
    inv = divide(b, one, zero, acc[0], acc[1])
    negative = b.fcmp_ordered("<", br, zero)
    looped = (b.select(negative, inv[0], acc[0]), b.select(negative, inv[1], acc[1]))
    sq = _multiply_plain(b, ar, ai, ar, ai)
    cube = _multiply_plain(b, ar, ai, sq[0], sq[1])
    n_eq = lambda v: b.fcmp_ordered("==", n_float, _c(br, v))          # noqa: E731
    int_re = b.select(n_eq(1.0), ar, b.select(n_eq(2.0), sq[0],
                                             b.select(n_eq(3.0), cube[0], looped[0])))
    int_im = b.select(n_eq(1.0), ai, b.select(n_eq(2.0), sq[1],
                                             b.select(n_eq(3.0), cube[1], looped[1])))
    # The general path: exp(w log z), each step rounded to the parts' type as libm's
    # cpowf / cpow round it (w log z may be huge: its rounding decides the angle).
    lr, li = log(b, ar, ai, part)
    er, ei = _multiply_annex_g(b, br, bi, lr, li)
    gr, gi = exp(b, er, ei, part)
    use_int = b.and_(integral, small)
    re, im = b.select(use_int, int_re, gr), b.select(use_int, int_im, gi)
    # The zero base, then the zero exponent (which wins, as in numpy).
    base_zero = b.and_(_eq(b, ar, 0.0), _eq(b, ai, 0.0))
    positive = b.fcmp_ordered(">", br, zero)
    re = b.select(base_zero, b.select(positive, zero, nan), re)
    im = b.select(base_zero, b.select(positive, zero, nan), im)
    exp_zero = b.and_(_eq(b, br, 0.0), _eq(b, bi, 0.0))
    return b.select(exp_zero, one, re), b.select(exp_zero, zero, im)


def negate(b, x, y, part):
    return b.fneg(x), b.fneg(y)
