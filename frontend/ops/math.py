"""Elementwise math, comparisons, logic and reductions (TensorFlow names).

Binary functions broadcast and promote (see core.promote). Functions that only
make sense on floats (exp, log, tanh, ...) turn integer inputs into float32
first, as numpy turns them into floats.
"""
from __future__ import annotations

from .. import dtypes
from ..unary_table import FLOAT, ROUNDING, ROWS, UnaryOp
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


def square(x): return apply("Square", [to_tensor(x)])


# --- unary ops that are one opcode: one function per row of frontend/unary_table.py -----

def unary_function(row: UnaryOp):
    """The `ops` function of a row of the unary table, named `row.function`."""
    op = row.name
    if row.inputs == FLOAT:
        def fn(x):
            return apply(op, [to_float(x)])
        doc = f"Elementwise {op} (integer inputs become float32)."
    elif row.inputs == ROUNDING:
        def fn(x):
            x = to_tensor(x)
            return x if not dtypes.is_float(x.dtype) else apply(op, [x])
        doc = f"Elementwise {op}; integers are returned unchanged."
    else:
        def fn(x):
            return apply(op, [to_tensor(x)])
        doc = f"Elementwise {op}."
    fn.__name__ = fn.__qualname__ = row.function
    fn.__doc__ = doc
    return fn


# negative, exp, tanh, floor, ...: module attributes, exported by `ops` (ops/__init__.py).
UNARY_FUNCTIONS = {row.function: unary_function(row) for row in ROWS}
globals().update(UNARY_FUNCTIONS)
neg = UNARY_FUNCTIONS["negative"]


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
