"""Reference semantics of the elementwise arithmetic ops (unary and binary).

The floating-point model is XLA's CPU backend:
- f16 (and bf16) math is computed in f32 and rounded back after every op;
- transcendental functions are computed in f64 and rounded to the result type
  (XLA's approximations are within a few ulps of the true value, so the most
  accurate reference is the closest one);
- f32/f64 arithmetic reads denormal inputs as zero and flushes denormal
  results (`log(1e-40)` is -inf), except sign-bit-only ops (abs, negate).

Integer ops follow XLA's defined results where C leaves them undefined:
x / 0 = -1 (all bits set), x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0,
shifts by >= the bit width give 0 (or the sign for arithmetic right shifts).
Comparisons, select, clamp and conversions live in `eval_compare_convert.py`.
"""
from __future__ import annotations

import math

import numpy as np

from .eval_common import EvaluationError, compute_dtype, float_max_min, flush, flush_all, to_result
from .opcodes import OPCODES, reference


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in f64 (numpy has none): math.erf applied element by element."""
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x), dtype=np.float64)


def _logistic(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + e^-x), written with exp of a non-positive argument so it never overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# The unary transcendental functions (the rows flagged `transcendental` in opcodes.py),
# evaluated in f64; power and atan2 are in _FLOAT_BINARY.
FLOAT_MATH = {
    "exponential": np.exp,
    "exponential-minus-one": np.expm1,
    "log": np.log,
    "log-plus-one": np.log1p,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "cbrt": np.cbrt,
    "sine": np.sin,
    "cosine": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "sinh": np.sinh,
    "logistic": _logistic,
    "erf": _erf,
}


# Complex arguments take numpy's complex functions (FLOAT_MATH), but for these.
COMPLEX_MATH = {
    "logistic": lambda z: 1 / (1 + np.exp(-z)),     # XLA's definition; _logistic is real-only
}


def _is_float(value: np.ndarray) -> bool:
    return value.dtype.kind == "f"


@reference(*FLOAT_MATH)
def float_math(instr, operands, ctx):
    (x,) = operands
    if x.dtype.kind == "c":          # numpy's complex functions, on flushed parts
        with np.errstate(all="ignore"):
            y = COMPLEX_MATH.get(instr.opcode, FLOAT_MATH[instr.opcode])(flush(x, ctx))
        return flush(to_result(y, instr), ctx)
    if not _is_float(x):
        raise EvaluationError(f"{instr.name}: {instr.opcode} needs a float operand, got {x.dtype}")
    x = flush(x, ctx)
    with np.errstate(all="ignore"):
        y = FLOAT_MATH[instr.opcode](x.astype(np.float64))
        y = y.astype(compute_dtype(x))
    return flush(to_result(y, instr), ctx)


# --- unary ops that are not transcendental ------------------------------------------

@reference("abs", "negate")
def abs_negate(instr, operands, ctx):
    # abs and negate only touch the sign bit: denormals pass through, ints wrap. The
    # abs of a complex number is arithmetic (a hypot): its parts are flushed, as XLA's.
    x = operands[0]
    fn = np.abs if instr.opcode == "abs" else np.negative
    complex_abs = instr.opcode == "abs" and x.dtype.kind == "c"
    with np.errstate(all="ignore"):
        y = to_result(fn(flush(x, ctx) if complex_abs else x), instr)
    return flush(y, ctx) if complex_abs else y


@reference("copy")
def copy(instr, operands, ctx):
    return _deep_copy(operands[0])


def _deep_copy(value):
    # A copy of a tuple (legal HLO) copies each element.
    if isinstance(value, tuple):
        return tuple(_deep_copy(v) for v in value)
    return np.array(value, copy=True)


@reference("sign")
def sign(instr, operands, ctx):
    x = operands[0]
    if _is_float(x):
        x = flush(x, ctx)
        one = x.dtype.type(1)
        # +-0 and NaN are their own sign.
        return to_result(np.where(x > 0, one, np.where(x < 0, -one, x)), instr)
    if x.dtype.kind == "c":      # z / |z|, on flushed parts
        with np.errstate(all="ignore"):
            return flush(to_result(np.sign(flush(x, ctx)), instr), ctx)
    return to_result(np.sign(x), instr)


def _round_half_away_from_zero(x):
    # x - trunc(x) is exact, so the tie test is exact (x + 0.5 would round first).
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


_ROUNDING = {
    "floor": np.floor,
    "ceil": np.ceil,
    "round-nearest-even": np.rint,
    "round-nearest-afz": _round_half_away_from_zero,
}


@reference(*_ROUNDING)
def rounding(instr, operands, ctx):
    # Denormal inputs read as zero: floor(-1e-40) is -0, not -1.
    return to_result(_ROUNDING[instr.opcode](flush(operands[0], ctx)), instr)


@reference("is-finite")
def is_finite(instr, operands, ctx):
    return np.isfinite(operands[0])


@reference("not")
def logical_not(instr, operands, ctx):
    x = operands[0]
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def _unsigned_view(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


@reference("popcnt")
def popcnt(instr, operands, ctx):
    return to_result(np.bitwise_count(_unsigned_view(operands[0])), instr)


@reference("count-leading-zeros")
def count_leading_zeros(instr, operands, ctx):
    x = _unsigned_view(operands[0])
    width = x.dtype.itemsize * 8
    count = np.zeros(x.shape, dtype=np.int64)
    # Binary search for the highest set bit: shift the top half down while it is empty.
    step = width // 2
    y = x.copy()
    while step:
        empty = (y >> x.dtype.type(width - step)) == 0
        count += np.where(empty, step, 0)
        y = np.where(empty, y << x.dtype.type(step), y)
        step //= 2
    count = np.where(x == 0, width, count)
    return to_result(count, instr)


@reference("real", "imag")
def real_imag(instr, operands, ctx):
    fn = np.real if instr.opcode == "real" else np.imag
    return to_result(fn(operands[0]), instr)


@reference("complex")
def make_complex(instr, operands, ctx):
    re, im = operands
    # Part by part: re + 1j * im would make (0, inf) into (nan, inf), as 1j * inf is.
    z = np.empty(np.broadcast_shapes(re.shape, im.shape), np.result_type(re.dtype, np.complex64))
    z.real, z.imag = re, im
    return to_result(z, instr)


# --- binary arithmetic ----------------------------------------------------------------

_FLOAT_BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "remainder": np.fmod,           # C fmod: the sign of the dividend
    "power": np.power,
    "atan2": np.arctan2,
}

_INT_BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "maximum": np.maximum,
    "minimum": np.minimum,
}

_PRED_BINARY = {
    "and": np.logical_and, "multiply": np.logical_and, "minimum": np.logical_and,
    "or": np.logical_or, "add": np.logical_or, "maximum": np.logical_or,
    "xor": np.logical_xor, "subtract": np.logical_xor,
}


@reference("add", "subtract", "multiply", "divide", "remainder", "power", "atan2",
           "and", "or", "xor", "maximum", "minimum")
def binary(instr, operands, ctx):
    a, b = operands
    kind = a.dtype.kind
    with np.errstate(all="ignore"):
        if kind in "fc":
            return _float_binary(instr, a, b, ctx)
        if kind == "b":
            fn = _PRED_BINARY.get(instr.opcode)
        elif instr.opcode in ("divide", "remainder"):
            return to_result(_int_divide(a, b, instr.opcode), instr)
        elif instr.opcode == "power":
            return to_result(_int_power(a, b), instr)
        else:
            fn = _INT_BINARY.get(instr.opcode)
        if fn is None:
            raise EvaluationError(f"{instr.name}: {instr.opcode} is not defined for {a.dtype}")
        return to_result(fn(a, b), instr)


def _float_binary(instr, a, b, ctx):
    if instr.opcode in ("maximum", "minimum"):
        # NaN-propagating (np.maximum, unlike np.fmax) and -0 < +0. Like every
        # arithmetic instruction under DAZ, max/min read a denormal input as zero.
        a, b = flush_all((a, b), ctx)
        return to_result(float_max_min(instr.opcode, a, b), instr)
    fn = _FLOAT_BINARY.get(instr.opcode)
    if fn is None:
        raise EvaluationError(f"{instr.name}: {instr.opcode} is not defined for {a.dtype}")
    a, b = flush_all((a, b), ctx)
    if a.dtype.kind == "c":
        fn = complex_atan2 if instr.opcode == "atan2" else fn
        return flush(to_result(fn(a, b), instr), ctx)
    if OPCODES[instr.opcode].transcendental:      # power, atan2: in f64, as the unary ones
        y = fn(a.astype(np.float64), b.astype(np.float64)).astype(compute_dtype(a))
    else:
        work = compute_dtype(a)
        y = fn(a.astype(work, copy=False), b.astype(work, copy=False))
    return flush(to_result(y, instr), ctx)


def complex_atan2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """atan2 of complex numbers as XLA's emitter defines it: -i log((x + iy) /
    sqrt(x^2 + y^2)), each step a complex operation in the operands' precision (so
    0/0 gives NaN where XLA's does, and real inputs give the real atan2 of their
    signs' quadrant)."""
    i = np.asarray(1j, dtype=y.dtype)
    return -i * np.log((x + i * y) / np.sqrt(x * x + y * y))


def _int_divide(a, b, opcode):
    """Truncating division and remainder with XLA's results for /0 and INT_MIN/-1."""
    by_zero = b == 0
    divisor = np.where(by_zero, b.dtype.type(1), b)
    if a.dtype.kind == "i":
        # INT_MIN / -1 overflows in C; XLA defines it as INT_MIN (remainder 0),
        # which is what dividing by 1 gives.
        overflow = (a == np.iinfo(a.dtype).min) & (b == -1)
        divisor = np.where(overflow, b.dtype.type(1), divisor)
    remainder = np.fmod(a, divisor)             # sign of the dividend, like C
    if opcode == "remainder":
        return np.where(by_zero, a, remainder)
    quotient = (a - remainder) // divisor       # exact: a - remainder is a multiple
    all_ones = np.invert(np.zeros((), dtype=a.dtype))
    return np.where(by_zero, all_ones, quotient)


def _int_power(base, exponent):
    """base ** exponent with wrapping; a negative exponent gives 0 unless base is 1.

    Exponentiation by squaring over every bit of the exponent (XLA's evaluator;
    its CPU emitter unrolls only 6 bits, which differs for exponents >= 64).
    """
    shape = np.broadcast_shapes(base.shape, exponent.shape)
    result = np.ones(shape, dtype=base.dtype)
    square = np.broadcast_to(base, shape).copy()
    negative = exponent < 0
    bits = np.broadcast_to(np.where(negative, 0, exponent), shape).copy()
    while np.any(bits):
        odd = (bits & 1) == 1
        result = np.where(odd, result * square, result)
        square = square * square
        bits = bits >> 1
    return np.where(negative, (base == 1).astype(base.dtype), result)


@reference("shift-left", "shift-right-logical", "shift-right-arithmetic")
def shift(instr, operands, ctx):
    x, amount = operands
    width = x.dtype.itemsize * 8
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    # The amount is read as unsigned: negative amounts are over-wide too.
    too_wide = amount.view(unsigned) >= width if amount.dtype != unsigned else amount >= width
    safe = np.where(too_wide, 0, amount).astype(unsigned)
    if instr.opcode == "shift-left":
        y = np.where(too_wide, 0, np.left_shift(x.view(unsigned), safe).view(x.dtype))
    elif instr.opcode == "shift-right-logical":
        y = np.where(too_wide, 0, np.right_shift(x.view(unsigned), safe).view(x.dtype))
    else:
        signed = np.dtype(f"i{x.dtype.itemsize}")
        xs = x.view(signed)
        sign_fill = np.right_shift(xs, signed.type(width - 1))
        y = np.where(too_wide, sign_fill, np.right_shift(xs, safe.astype(signed))).view(x.dtype)
    return to_result(y, instr)
