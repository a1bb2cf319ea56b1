"""Elementwise math, comparisons, logic and reductions (TensorFlow names).

Binary functions broadcast and promote (see core.promote). Functions that only
make sense on floats (exp, log, tanh, ...) turn integer inputs into float32
first, as numpy turns them into floats.
"""
from __future__ import annotations

from .. import dtypes
from .core import apply, cast, promote, promote_for, to_float, to_tensor


def _binary(op: str, x, y):
    return apply(op, promote_for(op, x, y))


def add(x, y): return _binary("Add", x, y)
def subtract(x, y): return _binary("Sub", x, y)
def multiply(x, y): return _binary("Mul", x, y)
def maximum(x, y): return _binary("Maximum", x, y)
def minimum(x, y): return _binary("Minimum", x, y)
def floordiv(x, y): return _binary("FloorDiv", x, y)
def floormod(x, y): return _binary("FloorMod", x, y)


mod = floormod


def divide(x, y):
    """True division (`/`): integers divide as float32 (JAX's choice; numpy uses float64)."""
    x, y = promote(x, y)
    if not dtypes.is_float(x.dtype):
        x, y = to_float(x), to_float(y)
    return apply("Div", [x, y])


truediv = divide


def pow(x, y):
    """x ** y; integer powers stay integers (negative integer exponents are undefined)."""
    return _binary("Pow", x, y)


def equal(x, y): return _binary("Equal", x, y)
def not_equal(x, y): return _binary("NotEqual", x, y)
def less(x, y): return _binary("Less", x, y)
def less_equal(x, y): return _binary("LessEqual", x, y)
def greater(x, y): return _binary("Greater", x, y)
def greater_equal(x, y): return _binary("GreaterEqual", x, y)


def _logical(op: str, x, y):
    """Logical ops work on bools; other inputs become `x != 0` first."""
    return apply(op, [cast(x, "bool"), cast(y, "bool")])


def logical_and(x, y): return _logical("LogicalAnd", x, y)
def logical_or(x, y): return _logical("LogicalOr", x, y)
def logical_not(x): return apply("LogicalNot", [cast(x, "bool")])


def negative(x): return apply("Neg", [to_tensor(x)])


neg = negative


def abs(x): return apply("Abs", [to_tensor(x)])
def sign(x): return apply("Sign", [to_tensor(x)])
def square(x): return apply("Square", [to_tensor(x)])


def _float_unary(op: str):
    def fn(x):
        return apply(op, [to_float(x)])
    fn.__name__ = op.lower()
    fn.__doc__ = f"Elementwise {op} (integer inputs become float32)."
    return fn


exp = _float_unary("Exp")
log = _float_unary("Log")
log1p = _float_unary("Log1p")
expm1 = _float_unary("Expm1")
sqrt = _float_unary("Sqrt")
rsqrt = _float_unary("Rsqrt")
tanh = _float_unary("Tanh")
sigmoid = _float_unary("Sigmoid")
erf = _float_unary("Erf")
sin = _float_unary("Sin")
cos = _float_unary("Cos")


def _rounding(op: str):
    def fn(x):
        x = to_tensor(x)
        return x if not dtypes.is_float(x.dtype) else apply(op, [x])
    fn.__name__ = op.lower()
    fn.__doc__ = f"Elementwise {op}; integers are returned unchanged."
    return fn


floor = _rounding("Floor")
ceil = _rounding("Ceil")
round = _rounding("Round")          # half to even, as numpy.round and tf.round


def where(condition, x, y):
    """x where condition else y, all three broadcast (tf.where with both branches)."""
    x, y = promote(x, y)
    return apply("Select", [cast(condition, "bool"), x, y])


select = where


def clip_by_value(t, clip_value_min, clip_value_max):
    return apply("ClipByValue", promote(t, clip_value_min, clip_value_max))


# --- reductions ---------------------------------------------------------------------

def _axis_attr(axis):
    if axis is None or isinstance(axis, int):
        return axis
    return tuple(int(a) for a in axis)


def _reduce(op: str, x, axis, keepdims: bool, bool_to_int: bool = False):
    x = to_tensor(x)
    if bool_to_int and dtypes.is_bool(x.dtype):
        x = cast(x, dtypes.DEFAULT_INT)      # numpy sums bools as integers
    return apply(op, [x], axis=_axis_attr(axis), keepdims=bool(keepdims))


def reduce_sum(x, axis=None, keepdims=False): return _reduce("Sum", x, axis, keepdims, True)
def reduce_prod(x, axis=None, keepdims=False): return _reduce("Prod", x, axis, keepdims, True)
def reduce_max(x, axis=None, keepdims=False): return _reduce("Max", x, axis, keepdims)
def reduce_min(x, axis=None, keepdims=False): return _reduce("Min", x, axis, keepdims)


def reduce_mean(x, axis=None, keepdims=False):
    """Mean; integer inputs give a truncated integer mean, as in TensorFlow."""
    return _reduce("Mean", x, axis, keepdims, True)


def reduce_all(x, axis=None, keepdims=False):
    return _reduce("All", cast(x, "bool"), axis, keepdims)


def reduce_any(x, axis=None, keepdims=False):
    return _reduce("Any", cast(x, "bool"), axis, keepdims)


def _arg_reduce(op: str, x, axis, output_type):
    x = to_tensor(x)
    if axis is None:
        if x.ndim != 1:
            from .array import reshape
            x = reshape(x, [-1])
        axis = 0
    x = cast(x, dtypes.DEFAULT_INT) if dtypes.is_bool(x.dtype) else x
    itype = dtypes.hlo_name(dtypes.canonical(output_type))
    return apply(op, [x], axis=int(axis), output_type=itype)


def argmax(x, axis=None, output_type="int64"):
    """Index of the first maximum along `axis` (None: of the flattened tensor)."""
    return _arg_reduce("ArgMax", x, axis, output_type)


def argmin(x, axis=None, output_type="int64"):
    return _arg_reduce("ArgMin", x, axis, output_type)


def cumsum(x, axis=0, exclusive=False, reverse=False):
    x = to_tensor(x)
    if dtypes.is_bool(x.dtype):
        x = cast(x, dtypes.DEFAULT_INT)
    return apply("Cumsum", [x], axis=int(axis), exclusive=bool(exclusive), reverse=bool(reverse))
