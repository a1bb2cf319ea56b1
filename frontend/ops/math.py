"""Elementwise math, comparisons, logic and reductions (TensorFlow names).

Binary functions broadcast and promote (see core.promote). Functions that only
make sense on floats (exp, log, tanh, ...) turn integer inputs into float32
first, as numpy turns them into floats.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..unary_table import FLOAT, ROUNDING, ROWS, UnaryOp
from .core import (apply, cast, constant, promote, promote_for, static_int, static_value,
                   to_float, to_tensor, user_error)


def _binary(op: str, x, y):
    return apply(op, promote_for(op, x, y))


def add(x, y, name=None): return _binary("Add", x, y)
def subtract(x, y, name=None): return _binary("Sub", x, y)
def multiply(x, y, name=None): return _binary("Mul", x, y)
def maximum(x, y, name=None): return _binary("Maximum", x, y)
def minimum(x, y, name=None): return _binary("Minimum", x, y)
def floordiv(x, y, name=None): return _binary("FloorDiv", x, y)
def floormod(x, y, name=None): return _binary("FloorMod", x, y)


mod = floormod


def truncatediv(x, y, name=None):
    """x / y rounded toward zero (C's integer division; trunc(x / y) for floats)."""
    return _binary("TruncateDiv", x, y)


def truncatemod(x, y, name=None):
    """The remainder of truncatediv: the sign of x (C's % and fmod)."""
    return _binary("TruncateMod", x, y)


def _true_division_type(dtype):
    """TF's truediv: 8- and 16-bit integers divide in float32, wider ones in float64."""
    return "float32" if dtypes.canonical(dtype).itemsize <= 2 else "float64"


def divide(x, y, name=None):
    """True division (`/`): integers divide as floats, as TF's truediv does (float32 for
    8- and 16-bit integers, float64 for 32- and 64-bit ones)."""
    x, y = promote_for("divide", x, y)
    if not dtypes.is_float(x.dtype):
        if dtypes.is_bool(x.dtype):
            raise user_error(TypeError, "divide: bool tensors cannot be divided")
        target = _true_division_type(x.dtype)
        x, y = cast(x, target), cast(y, target)
    return apply("Div", [x, y])


def truediv(x, y, name=None):
    return divide(x, y)


def divide_no_nan(x, y, name=None):
    """x / y, and 0 where y is 0 (even when x is 0 or not finite); floats only."""
    x, y = promote_for("divide_no_nan", x, y)
    if not dtypes.is_float(x.dtype):
        raise user_error(TypeError, f"divide_no_nan: needs floating point, got {x.dtype}")
    return apply("DivNoNan", [x, y])


def pow(x, y, name=None):
    """x ** y; integer powers stay integers (negative integer exponents are undefined)."""
    return _binary("Pow", x, y)


def equal(x, y, name=None): return _binary("Equal", x, y)
def not_equal(x, y, name=None): return _binary("NotEqual", x, y)
def less(x, y, name=None): return _binary("Less", x, y)
def less_equal(x, y, name=None): return _binary("LessEqual", x, y)
def greater(x, y, name=None): return _binary("Greater", x, y)
def greater_equal(x, y, name=None): return _binary("GreaterEqual", x, y)


def _logical(op: str, x, y):
    """Logical ops work on bools; other inputs become `x != 0` first."""
    return apply(op, [cast(x, "bool"), cast(y, "bool")])


def logical_and(x, y, name=None): return _logical("LogicalAnd", x, y)
def logical_or(x, y, name=None): return _logical("LogicalOr", x, y)
def logical_xor(x, y, name="LogicalXor"): return _logical("NotEqual", x, y)
def logical_not(x, name=None): return apply("LogicalNot", [cast(x, "bool")])


def square(x, name=None): return apply("Square", [to_tensor(x)])


# --- unary ops that are one opcode: one function per row of frontend/unary_table.py -----

def unary_function(row: UnaryOp):
    """The `ops` function of a row of the unary table, named `row.function`."""
    op = row.name
    if row.inputs == FLOAT:
        def fn(x, name=None):
            return apply(op, [to_float(x)])
        doc = f"Elementwise {op} (integer inputs become float32)."
    elif row.inputs == ROUNDING:
        def fn(x, name=None):
            x = to_tensor(x)
            return x if not dtypes.is_float(x.dtype) else apply(op, [x])
        doc = f"Elementwise {op}; integers are returned unchanged."
    else:
        def fn(x, name=None):
            return apply(op, [to_tensor(x)])
        doc = f"Elementwise {op}."
    fn.__name__ = fn.__qualname__ = row.function
    fn.__doc__ = doc
    return fn


# negative, exp, tanh, floor, ...: module attributes, exported by `ops` (ops/__init__.py).
UNARY_FUNCTIONS = {row.function: unary_function(row) for row in ROWS}
globals().update(UNARY_FUNCTIONS)
neg = UNARY_FUNCTIONS["negative"]


def where(condition, x=None, y=None, name=None):
    """x where condition else y, all three broadcast (tf.where with both branches).

    With the condition alone: the [n, rank] int64 coordinates of its true (non-zero)
    elements, row-major. The count is the result's shape, so the condition's value must
    be known at trace time (a numpy array, a Python value or a constant)."""
    if x is None and y is None:
        value = static_value(condition)
        if value is None:
            raise user_error(ValueError, "where(condition) with one argument needs a "
                                         "condition known at trace time: the number of "
                                         "true elements is the result's shape")
        return constant(np.argwhere(np.asarray(value) != 0).astype(np.int64))
    if x is None or y is None:
        raise user_error(ValueError, "where: give both x and y, or neither")
    x, y = promote(x, y)
    return apply("Select", [cast(condition, "bool"), x, y])


select = where


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    return apply("ClipByValue", promote(t, clip_value_min, clip_value_max))


# --- reductions ---------------------------------------------------------------------

def _axis_attr(axis):
    if axis is None or isinstance(axis, numbers.Integral):
        return None if axis is None else int(axis)
    return tuple(int(a) for a in axis)


def _reduce(op: str, x, axis, keepdims: bool, bool_to_int: bool = False):
    x = to_tensor(x)
    if bool_to_int and dtypes.is_bool(x.dtype):
        x = cast(x, dtypes.DEFAULT_INT)      # numpy sums bools as integers
    return apply(op, [x], axis=_axis_attr(axis), keepdims=bool(keepdims))


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Sum", input_tensor, axis, keepdims, True)


def reduce_prod(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Prod", input_tensor, axis, keepdims, True)


def reduce_max(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Max", input_tensor, axis, keepdims)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Min", input_tensor, axis, keepdims)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    """Mean; integer inputs give a truncated integer mean, as in TensorFlow."""
    return _reduce("Mean", input_tensor, axis, keepdims, True)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("All", cast(input_tensor, "bool"), axis, keepdims)


def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Any", cast(input_tensor, "bool"), axis, keepdims)


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) over `axis`, shifted by the maximum (TF's formula: a non-finite
    maximum is not subtracted, so all -inf gives -inf and +inf gives +inf)."""
    x = to_float(input_tensor)
    from .array import stop_gradient
    raw = reduce_max(x, axis, keepdims=True)
    shift = stop_gradient(where(UNARY_FUNCTIONS["is_finite"](raw), raw, _zeros_like(raw)))
    total = reduce_sum(UNARY_FUNCTIONS["exp"](x - shift), axis, keepdims=True)
    out = UNARY_FUNCTIONS["log"](total) + shift
    if not keepdims:
        from .array import reshape
        kept = _kept_dims(x.shape, axis)
        out = reshape(out, kept)
    return out


def _zeros_like(x):
    return apply("ZerosLike", [x])


def _kept_dims(shape, axis):
    rank = len(shape)
    if axis is None:
        return ()
    axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    drop = {int(a) % rank for a in axes} if rank else set()
    return tuple(n for d, n in enumerate(shape) if d not in drop)


def _arg_reduce(op: str, x, axis, output_type):
    x = to_tensor(x)
    if axis is None:
        axis = 0                          # TF 2: no axis means axis 0 (not the flattened x)
    if x.ndim == 0:
        raise user_error(ValueError, f"{op.lower()}: needs a tensor of rank >= 1, got "
                                     f"{x.aval_text()}")
    x = cast(x, dtypes.DEFAULT_INT) if dtypes.is_bool(x.dtype) else x
    itype = dtypes.hlo_name(dtypes.canonical(output_type))
    return apply(op, [x], axis=static_int(axis, f"{op.lower()}: axis"), output_type=itype)


def argmax(input, axis=None, output_type="int64", name=None):
    """Index of the first maximum along `axis` (None: axis 0, as in TF 2)."""
    return _arg_reduce("ArgMax", input, axis, output_type)


def argmin(input, axis=None, output_type="int64", name=None):
    return _arg_reduce("ArgMin", input, axis, output_type)


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    x = to_tensor(x)
    if dtypes.is_bool(x.dtype):
        x = cast(x, dtypes.DEFAULT_INT)
    return apply("Cumsum", [x], axis=static_int(axis, "cumsum: axis"),
                 exclusive=bool(exclusive), reverse=bool(reverse))
