"""Shape and indexing functions (TensorFlow names): reshape, transpose, concat,
split, slicing, padding, tiling, gathering, and tensors made from nothing
(fill, zeros, range, one_hot).
"""
from __future__ import annotations

import builtins
import numbers

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .core import apply, apply_multi, cast, promote, static_int, to_tensor, user_error


def identity(x): return apply("Identity", [to_tensor(x)])


def reshape(x, shape):
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    return apply("Reshape", [to_tensor(x)],
                 shape=tuple(static_int(d, "reshape: shape entry") for d in shape))


def transpose(x, perm=None):
    perm = None if perm is None else tuple(static_int(p, "transpose: perm") for p in perm)
    return apply("Transpose", [to_tensor(x)], perm=perm)


def expand_dims(x, axis):
    return apply("ExpandDims", [to_tensor(x)], axis=static_int(axis, "expand_dims: axis"))


def squeeze(x, axis=None):
    if axis is not None and not isinstance(axis, numbers.Integral):
        axis = tuple(int(a) for a in axis)
    return apply("Squeeze", [to_tensor(x)], axis=axis)


def broadcast_to(x, shape):
    return apply("BroadcastTo", [to_tensor(x)], shape=tuple(int(d) for d in shape))


def concat(values, axis):
    """Joins tensors along `axis` (their dtypes are promoted to one)."""
    values = list(values)
    if not values:
        raise user_error(ValueError, "concat: needs at least one tensor")
    return apply("ConcatV2", promote(*values), axis=static_int(axis, "concat: axis"))


def stack(values, axis=0):
    """Joins tensors of one shape along a new axis."""
    return concat([expand_dims(v, axis) for v in promote(*values)], axis)


def split(value, num_or_size_splits, axis=0):
    """A list of pieces: N equal ones, or the given sizes (one may be -1)."""
    x = to_tensor(value)
    axis = static_int(axis, "split: axis")
    if not -x.ndim <= axis < x.ndim:
        raise user_error(ValueError, f"split: axis {axis} is out of range for "
                                     f"{x.aval_text()}")
    n = x.shape[axis]
    if isinstance(num_or_size_splits, numbers.Integral):
        k = int(num_or_size_splits)
        if k <= 0 or n % k:
            raise user_error(ValueError, f"split: dim {axis} of {x.aval_text()} does not "
                                         f"split into {k} equal pieces")
        sizes = [n // k] * k
    else:
        sizes = [int(s) for s in num_or_size_splits]
        if sizes.count(-1) == 1:
            sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
    return apply_multi("Split", [x], axis=axis, sizes=tuple(sizes))


def slice(input_, begin, size):
    """input_[begin[i] : begin[i] + size[i]] per dim (size -1: to the end), as tf.slice."""
    return apply("Slice", [to_tensor(input_)], begin=tuple(int(b) for b in begin),
                 size=tuple(int(s) for s in size))


def _static_index_item(item):
    if item is None or item is Ellipsis:
        return item
    if isinstance(item, builtins.slice):
        parts = (item.start, item.stop, item.step)
        if any(isinstance(p, Tensor) for p in parts):
            raise user_error(TypeError, "slice bounds must be known at trace time")
        if item.step == 0:
            raise user_error(ValueError, "slice step cannot be zero")
        return item
    if isinstance(item, numbers.Integral) and not isinstance(item, bool):
        return int(item)
    raise user_error(TypeError, f"unsupported index {item!r}: use ints, slices, None, "
                                "... or one integer tensor (a gather)")


def getitem(x, index):
    """x[index] with Python's basic indexing; an integer tensor or array gathers on axis 0."""
    x = to_tensor(x)
    if isinstance(index, (Tensor, np.ndarray, list)):
        return gather(x, index, axis=0)
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(_static_index_item(i) for i in items)
    return apply("StridedSlice", [x], index=items)


def strided_slice(input_, begin, end, strides=None):
    """input_[begin[0]:end[0]:strides[0], ...] (tf.strided_slice without the masks)."""
    strides = strides or [1] * len(begin)
    if not len(begin) == len(end) == len(strides):
        raise user_error(ValueError, f"strided_slice: begin {list(begin)}, end {list(end)} "
                                     f"and strides {list(strides)} differ in length")
    return getitem(input_, tuple(builtins.slice(int(b), int(e), int(s))
                                 for b, e, s in zip(begin, end, strides)))


def pad(tensor, paddings, mode="CONSTANT", constant_values=0):
    if str(mode).upper() != "CONSTANT":
        raise user_error(ValueError, f"pad: only mode='CONSTANT' is supported, "
                                     f"got {mode!r}")
    return apply("Pad", [to_tensor(tensor)],
                 paddings=tuple(tuple(int(v) for v in p) for p in paddings),
                 constant_values=constant_values)


def tile(input_, multiples):
    return apply("Tile", [to_tensor(input_)], multiples=tuple(int(m) for m in multiples))


def gather(params, indices, axis=0, batch_dims=0):
    """params.take(indices, axis) (negative indices count from the end)."""
    indices = to_tensor(indices)
    if not dtypes.is_integer(indices.dtype):
        raise user_error(TypeError, f"gather: indices must be integers, "
                                    f"got {indices.aval_text()}")
    return apply("GatherV2", [to_tensor(params), indices], axis=int(axis),
                 batch_dims=int(batch_dims))


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1, dtype="float32"):
    indices = to_tensor(indices)
    return apply("OneHot", [indices], depth=static_int(depth, "one_hot: depth"),
                 on_value=on_value, off_value=off_value, axis=int(axis),
                 dtype=dtypes.hlo_name(dtypes.canonical(dtype)))


# --- tensors from nothing -----------------------------------------------------------

def fill(dims, value, dtype=None):
    """A tensor of shape `dims` holding `value` (dtype: value's default type if None)."""
    dtype = dtypes.default_dtype(value) if dtype is None else dtypes.canonical(dtype)
    return apply("Fill", [], dims=tuple(int(d) for d in dims), value=value,
                 dtype=dtypes.hlo_name(dtype))


def zeros(shape, dtype="float32"): return fill(shape, 0, dtype)
def ones(shape, dtype="float32"): return fill(shape, 1, dtype)


def zeros_like(x, dtype=None):
    x = to_tensor(x)
    return apply("ZerosLike", [x if dtype is None else cast(x, dtype)])


def ones_like(x, dtype=None):
    x = to_tensor(x)
    return apply("OnesLike", [x if dtype is None else cast(x, dtype)])


def range(start, limit=None, delta=1, dtype=None):
    """start, start + delta, ... below `limit` (tf.range); range(n) counts from 0."""
    if limit is None:
        start, limit = 0, start
    if dtype is None:
        dtype = dtypes.DEFAULT_FLOAT if any(isinstance(v, float) for v in (start, limit, delta)) \
            else dtypes.DEFAULT_INT
    return apply("Range", [], start=start, limit=limit, delta=delta,
                 dtype=dtypes.hlo_name(dtypes.canonical(dtype)))
