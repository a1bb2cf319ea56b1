"""Elementwise math, comparisons, logic and reductions (TensorFlow names).

Binary functions broadcast and promote (see core.promote). Functions that only
make sense on floats (exp, log, tanh, ...) turn integer inputs into float32
first, as numpy turns them into floats.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..elementwise_table import (BINARY_ROWS, BOOL, FLOAT, ROUNDING, TRUEDIV, UNARY_ROWS,
                                 BinaryOp, UnaryOp)
from .core import (apply, cast, constant, promote, promote_for, static_int, static_value,
                   to_float, to_tensor, user_error)


def _binary(op: str, x, y):
    return apply(op, promote_for(op, x, y))


def floordiv(x, y, name=None): return _binary("FloorDiv", x, y)
def floormod(x, y, name=None): return _binary("FloorMod", x, y)


mod = floormod


def truncatediv(x, y, name=None):
    """x / y rounded toward zero (C's integer division; trunc(x / y) for floats)."""
    return _binary("TruncateDiv", x, y)


def _true_division_type(dtype):
    """TF's truediv: 8- and 16-bit integers divide in float32, wider ones in float64."""
    return "float32" if dtypes.canonical(dtype).itemsize <= 2 else "float64"


def divide_no_nan(x, y, name=None):
    """x / y, and 0 where y is 0 (even when x is 0 or not finite); floats only."""
    x, y = promote_for("divide_no_nan", x, y)
    if not dtypes.is_float(x.dtype):
        raise user_error(TypeError, f"divide_no_nan: needs floating point, got {x.dtype}")
    return apply("DivNoNan", [x, y])


# --- binary ops that are one opcode: one function per row of frontend/elementwise_table.py

def _promoted(row: BinaryOp, x, y):
    return promote_for(row.name, x, y)


def _promoted_to_float(row: BinaryOp, x, y):
    x, y = promote_for(row.name, x, y)
    return (x, y) if dtypes.is_float(x.dtype) else (to_float(x), to_float(y))


def _true_division(row: BinaryOp, x, y):
    x, y = promote_for(row.name, x, y)
    if not dtypes.is_float(x.dtype):
        if dtypes.is_bool(x.dtype):
            raise user_error(TypeError, f"{row.function}: bool tensors cannot be divided")
        target = _true_division_type(x.dtype)
        x, y = cast(x, target), cast(y, target)
    return x, y


def _as_bools(row: BinaryOp, x, y):
    """Logical ops work on bools; other inputs become `x != 0` first."""
    return cast(x, "bool"), cast(y, "bool")


_OPERANDS = {FLOAT: _promoted_to_float, TRUEDIV: _true_division, BOOL: _as_bools}
_OPERAND_DOCS = {FLOAT: "integers become float32", TRUEDIV: "integers divide as floats",
                 BOOL: "inputs become bools (x != 0)"}


def binary_function(row: BinaryOp):
    """The `ops` function of a binary row, named `row.function`, with TF's parameter
    names (`row.args`)."""
    op, operands = row.name, _OPERANDS.get(row.inputs, _promoted)
    if row.args == ("x", "y"):
        def fn(x, y, name=None):
            return apply(op, list(operands(row, x, y)))
    elif row.args == ("y", "x"):
        def fn(y, x, name=None):
            return apply(op, list(operands(row, y, x)))
    else:
        raise ValueError(f"{op}: unsupported parameter names {row.args}")
    fn.__name__ = fn.__qualname__ = row.function
    rule = _OPERAND_DOCS.get(row.inputs, "inputs broadcast and promote")
    fn.__doc__ = (row.doc + "\n\n" if row.doc else "") + f"Elementwise {op}; {rule}."
    return fn


# add, maximum, less, logical_and, ...: module attributes, exported by `ops`.
BINARY_FUNCTIONS = {row.function: binary_function(row) for row in BINARY_ROWS}
globals().update(BINARY_FUNCTIONS)
_B = BINARY_FUNCTIONS       # _B["maximum"]: for this module's own use


def truediv(x, y, name=None):
    return _B["divide"](x, y)


def logical_xor(x, y, name="LogicalXor"):
    return apply("NotEqual", [cast(x, "bool"), cast(y, "bool")])


def logical_not(x, name=None): return apply("LogicalNot", [cast(x, "bool")])


def square(x, name=None): return apply("Square", [to_tensor(x)])


# --- unary ops that are one opcode: one function per row of frontend/elementwise_table.py

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
UNARY_FUNCTIONS = {row.function: unary_function(row) for row in UNARY_ROWS}
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


def _ones_like(x):
    return apply("OnesLike", [x])


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


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    x = to_tensor(x)
    if dtypes.is_bool(x.dtype):
        x = cast(x, dtypes.DEFAULT_INT)
    return apply("Cumprod", [x], axis=static_int(axis, "cumprod: axis"),
                 exclusive=bool(exclusive), reverse=bool(reverse))


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """log(cumsum(exp(x))) without overflow (exclusive: -inf first)."""
    return apply("CumulativeLogsumexp", [to_float(x)],
                 axis=static_int(axis, "cumulative_logsumexp: axis"),
                 exclusive=bool(exclusive), reverse=bool(reverse))


# --- statistics and norms -------------------------------------------------------------

def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """mean(|x - mean(x)|^2) over `axis` (the population variance, as TF)."""
    x = to_float(input_tensor)
    centered = x - reduce_mean(x, axis, keepdims=True)
    return reduce_mean(centered * centered, axis, keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    return UNARY_FUNCTIONS["sqrt"](reduce_variance(input_tensor, axis, keepdims))


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """sqrt(sum(x^2)) over `axis`; integer inputs give the truncated integer norm."""
    x = to_tensor(input_tensor)
    if dtypes.is_float(x.dtype):
        return UNARY_FUNCTIONS["sqrt"](reduce_sum(x * x, axis, keepdims))
    wide = cast(x, "float64")
    return cast(UNARY_FUNCTIONS["sqrt"](reduce_sum(wide * wide, axis, keepdims)), x.dtype)


def count_nonzero(input, axis=None, keepdims=None, dtype="int64", name=None):
    x = to_tensor(input)
    nonzero = cast(x, "bool") if not dtypes.is_bool(x.dtype) else x
    return reduce_sum(cast(nonzero, dtype), axis, bool(keepdims))


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """t * clip_norm / max(l2norm(t, axes), clip_norm): t rescaled so its L2 norm over
    `axes` is at most clip_norm (TF's formula; a zero t stays zero)."""
    t = to_float(t)
    squares = reduce_sum(t * t, axes, keepdims=True)
    positive = squares > 0
    safe = where(positive, squares, _ones_like(squares))
    norm = where(positive, UNARY_FUNCTIONS["sqrt"](safe), squares)
    clip_norm = cast(to_tensor(clip_norm), t.dtype)
    return t * clip_norm / _B["maximum"](norm, clip_norm)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """(the tensors scaled by clip_norm / max(global_norm, clip_norm), global_norm),
    global_norm = sqrt(sum of every tensor's squares); None entries stay None."""
    tensors = [None if t is None else to_float(t) for t in t_list]
    present = [t for t in tensors if t is not None]
    if use_norm is None:
        total = None
        for t in present:
            s = cast(reduce_sum(t * t), "float32" if t.dtype.itemsize <= 4 else "float64")
            total = s if total is None else total + cast(s, total.dtype)
        norm = UNARY_FUNCTIONS["sqrt"](total) if total is not None else to_float(0.0)
    else:
        norm = to_float(use_norm)
    clip_norm = cast(to_tensor(clip_norm), norm.dtype)
    scale = clip_norm * _B["minimum"](1.0 / norm, 1.0 / clip_norm)
    return [None if t is None else t * cast(scale, t.dtype) for t in tensors], norm


# --- elementwise functions beyond the unary table ------------------------------------------

def _float_unary(op: str, doc: str):
    def fn(x, name=None):
        return apply(op, [to_float(x)])
    fn.__name__ = fn.__qualname__ = op.lower()
    fn.__doc__ = doc
    return fn


asin = _float_unary("Asin", "Elementwise arcsine (NaN outside [-1, 1]).")
acos = _float_unary("Acos", "Elementwise arccosine (NaN outside [-1, 1]).")
atan = _float_unary("Atan", "Elementwise arctangent.")
sinh = _float_unary("Sinh", "Elementwise hyperbolic sine.")
cosh = _float_unary("Cosh", "Elementwise hyperbolic cosine.")
asinh = _float_unary("Asinh", "Elementwise inverse hyperbolic sine.")
acosh = _float_unary("Acosh", "Elementwise inverse hyperbolic cosine (NaN below 1).")
atanh = _float_unary("Atanh", "Elementwise inverse hyperbolic tangent.")
erfc = _float_unary("Erfc", "Elementwise 1 - erf(x), accurate where erf(x) is near 1.")
erfinv = _float_unary("Erfinv", "Elementwise inverse of erf (+-inf at +-1).")
lgamma = _float_unary("Lgamma", "Elementwise log|Gamma(x)|.")
digamma = _float_unary("Digamma", "Elementwise d/dx log Gamma(x).")


def _float_binary(op: str, x, y):
    x, y = promote_for(op.lower(), x, y)
    if not dtypes.is_float(x.dtype):
        x, y = to_float(x), to_float(y)
    return apply(op, [x, y])


def xlogy(x, y, name=None):
    """x * log(y), 0 where x == 0."""
    return _float_binary("Xlogy", x, y)


def xlog1py(x, y, name=None):
    """x * log1p(y), 0 where x == 0."""
    return _float_binary("Xlog1py", x, y)


def reciprocal(x, name=None):
    x = to_tensor(x)
    return _B["divide"](1, x) if not dtypes.is_float(x.dtype) else 1.0 / x


def squared_difference(x, y, name=None):
    x, y = promote_for("squared_difference", x, y)
    return square(x - y)


def is_nan(x, name=None):
    x = to_float(x)
    return _B["not_equal"](x, x)


def is_inf(x, name=None):
    x = to_float(x)
    return _B["equal"](UNARY_FUNCTIONS["abs"](x), np.inf)


def log_sigmoid(x, name=None):
    """log(sigmoid(x)) = -softplus(-x), without overflow."""
    from .nn import softplus
    return -softplus(-to_float(x))


# --- segments, top-k, counting ---------------------------------------------------------------

def _segment_ids(segment_ids, what: str):
    ids = to_tensor(segment_ids)
    if not dtypes.is_integer(ids.dtype):
        raise user_error(TypeError, f"{what}: segment_ids must be integers, got "
                                    f"{ids.aval_text()}")
    return ids


def _unsorted(mode: str, data, segment_ids, num_segments):
    what = f"unsorted_segment_{mode}"
    return apply("UnsortedSegment", [to_tensor(data), _segment_ids(segment_ids, what)],
                 num_segments=static_int(num_segments, f"{what}: num_segments"), mode=mode)


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """Row s of the result sums the rows of data whose segment id is s (ids outside
    [0, num_segments) are dropped)."""
    return _unsorted("sum", data, segment_ids, num_segments)


def unsorted_segment_max(data, segment_ids, num_segments, name=None):
    """Row s is the maximum of data's rows with id s; the lowest value where none."""
    return _unsorted("max", data, segment_ids, num_segments)


def unsorted_segment_min(data, segment_ids, num_segments, name=None):
    return _unsorted("min", data, segment_ids, num_segments)


def _sorted_segments(what: str, segment_ids) -> int:
    """The number of segments, max(segment_ids) + 1: a shape, so the ids must be known
    at trace time."""
    value = static_value(segment_ids)
    if value is None:
        raise user_error(ValueError, f"{what}: the number of segments is the result's "
                                     "shape, so segment_ids must be known at trace time "
                                     "(or use unsorted_segment_* with num_segments)")
    value = np.asarray(value)
    if value.size and (np.any(np.diff(value.reshape(-1)) < 0) or value.min() < 0):
        raise user_error(ValueError, f"{what}: segment_ids must be sorted and >= 0")
    return int(value.max()) + 1 if value.size else 0


def segment_sum(data, segment_ids, name=None):
    n = _sorted_segments("segment_sum", segment_ids)
    return unsorted_segment_sum(data, segment_ids, n)


def segment_mean(data, segment_ids, name=None):
    """The mean of each segment's rows; 0 for an empty segment (as TF)."""
    n = _sorted_segments("segment_mean", segment_ids)
    data = to_tensor(data)
    total = unsorted_segment_sum(data, segment_ids, n)
    ids = to_tensor(segment_ids)
    counts = unsorted_segment_sum(_ones_like(cast(ids, data.dtype)), ids, n)
    counts = _B["maximum"](counts, 1)
    from .array import reshape
    counts = reshape(counts, (n,) + (1,) * (data.ndim - ids.ndim))
    return total / counts if dtypes.is_float(data.dtype) else floordiv(total, counts)


def segment_max(data, segment_ids, name=None):
    """The maximum of each segment's rows; 0 for an empty segment (as TF)."""
    n = _sorted_segments("segment_max", segment_ids)
    data = to_tensor(data)
    ids = to_tensor(segment_ids)
    out = unsorted_segment_max(data, ids, n)
    present = unsorted_segment_max(_ones_like(cast(ids, "int32")), ids, n) > 0
    from .array import reshape
    present = reshape(present, (n,) + (1,) * (data.ndim - ids.ndim))
    return where(present, out, _zeros_like(out))


def top_k(input, k=1, sorted=True, index_type="int32", name=None):
    """(values, indices) of the k largest entries of the last dim, largest first; ties
    keep the lower index first. NaN counts as the largest."""
    from .array import sort_with_indices, strided_slice_last
    x = to_tensor(input)
    k = static_int(k, "top_k: k")
    if x.ndim == 0 or not 0 <= k <= x.shape[-1]:
        raise user_error(ValueError, f"top_k: k={k} must be in [0, {x.shape[-1] if x.ndim else 0}]"
                                     f" (the last dim of {x.aval_text()})")
    values, indices = sort_with_indices(x, -1, descending=True, index_type=index_type)
    return strided_slice_last(values, k), strided_slice_last(indices, k)


def in_top_k(targets, predictions, k, name=None):
    """Whether predictions[i, targets[i]] is among the k largest of row i (ties count as
    in); False where that prediction is not finite or the target is out of range."""
    from .array import gather, expand_dims
    predictions = to_float(predictions)
    targets = to_tensor(targets)
    n = predictions.shape[-1]
    valid = _B["logical_and"](targets >= 0, targets < n)
    picked = gather(predictions, targets, axis=1, batch_dims=1)
    above = reduce_sum(cast(predictions > expand_dims(picked, -1), "int32"), -1)
    return _B["logical_and"](_B["logical_and"](valid, UNARY_FUNCTIONS["is_finite"](picked)),
                       above < static_int(k, "in_top_k: k"))


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype="int32", name=None,
             axis=None, binary_output=False):
    """Counts (or sums of weights) of each value in [0, length) of arr; length is
    max(arr) + 1 at least minlength and at most maxlength, so it must be known at trace
    time: minlength == maxlength, or arr known. axis=-1 counts each row of a 2-D arr."""
    arr = to_tensor(arr) if not isinstance(arr, np.ndarray) else arr
    value = static_value(arr)
    if minlength is not None and maxlength is not None and minlength == maxlength:
        length = int(minlength)
    elif value is not None:
        length = int(value.max()) + 1 if value.size else 0
        if minlength is not None:
            length = max(length, int(minlength))
        if maxlength is not None:
            length = min(length, int(maxlength))
    else:
        raise user_error(ValueError, "bincount: the result's length is max(arr) + 1, so arr "
                                     "must be known at trace time, or minlength == "
                                     "maxlength given")
    arr = to_tensor(arr)
    if weights is None:
        contrib = _ones_like(cast(arr, dtype))
    else:
        contrib = to_tensor(weights)
    if axis is None or arr.ndim == 1:
        from .array import reshape
        out = unsorted_segment_sum(reshape(contrib, [-1]), reshape(arr, [-1]), length)
    elif axis in (-1, arr.ndim - 1) and arr.ndim == 2:
        from .array import reshape
        rows = arr.shape[0]
        offsets = reshape(apply("Range", [], start=0, limit=rows, delta=1,
                                dtype=dtypes.hlo_name(arr.dtype)), [rows, 1])
        inside = _B["logical_and"](arr >= 0, arr < length)
        flat = where(inside, arr + offsets * length, -_zeros_like(arr) - 1)
        out = reshape(unsorted_segment_sum(reshape(contrib, [-1]), reshape(flat, [-1]),
                                           rows * length), [rows, length])
    else:
        raise user_error(ValueError, f"bincount: axis must be None or -1 (a 2-D arr), "
                                     f"got {axis}")
    if binary_output:
        out = cast(out > 0, out.dtype)
    return out


# --- complex numbers ----------------------------------------------------------------------------

def complex(real, imag, name=None):
    """real + i imag: float32 parts give complex64, float64 parts complex128 (integer or
    Python number parts become float32 first); the two broadcast."""
    re, im = promote_for("complex", real, imag)
    if not dtypes.is_float(re.dtype):
        re, im = to_float(re), to_float(im)
    if re.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise user_error(TypeError, f"complex: real and imag must be float32 or float64, "
                                    f"got {re.dtype.name}")
    return apply("Complex", [re, im])


def _is_complex(x) -> bool:
    return dtypes.kind(x.dtype) == "complex"


def real(input, name=None):
    """The real part of a complex tensor (complex64 -> float32); a real tensor as it is."""
    x = to_tensor(input)
    return apply("Real", [x]) if _is_complex(x) else x


def imag(input, name=None):
    """The imaginary part of a complex tensor; zeros for a real tensor."""
    x = to_tensor(input)
    if _is_complex(x):
        return apply("Imag", [x])
    from .array import zeros_like
    return zeros_like(x)


def conj(x, name=None):
    """The complex conjugate a - bi; a real tensor as it is."""
    x = to_tensor(x)
    return apply("Conj", [x]) if _is_complex(x) else x


def angle(input, name=None):
    """The argument of a complex number, atan2(imag, real) in (-pi, pi]; for a real
    tensor pi where it is negative and 0 elsewhere (as TF)."""
    x = to_tensor(input)
    if _is_complex(x):
        return apply("Angle", [x])
    from .array import zeros_like
    x = to_float(x)
    return where(x < 0, zeros_like(x) + np.pi, zeros_like(x))
