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
from .core import (apply, apply_multi, cast, constant, promote, promote_for, static_int,
                   static_value, to_tensor, user_error)


def identity(input, name=None): return apply("Identity", [to_tensor(input)])


def stop_gradient(input, name=None):
    """The input, as a constant to differentiation: no gradient flows through it."""
    return apply("StopGradient", [to_tensor(input)])


def reshape(tensor, shape, name=None):
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    return apply("Reshape", [to_tensor(tensor)],
                 shape=tuple(static_int(d, "reshape: shape entry") for d in shape))


def transpose(a, perm=None, conjugate=False, name="transpose"):
    """Result dim i is a's dim perm[i] (no perm: reversed); conjugate=True also
    conjugates complex values (a no-op for real ones, as in TF)."""
    a = to_tensor(a)
    perm = None if perm is None else tuple(static_int(p, "transpose: perm") for p in perm)
    if conjugate and dtypes.kind(a.dtype) == "complex":
        raise user_error(NotImplementedError, "transpose: conjugate=True of complex tensors "
                                              "is not supported")
    return apply("Transpose", [a], perm=perm)


def expand_dims(input, axis, name=None):
    return apply("ExpandDims", [to_tensor(input)], axis=static_int(axis, "expand_dims: axis"))


def squeeze(input, axis=None, name=None):
    if axis is not None and not isinstance(axis, numbers.Integral):
        axis = tuple(int(a) for a in axis)
    return apply("Squeeze", [to_tensor(input)], axis=axis)


def broadcast_to(input, shape, name=None):
    return apply("BroadcastTo", [to_tensor(input)], shape=tuple(int(d) for d in shape))


def concat(values, axis, name="concat"):
    """Joins tensors along `axis` (their dtypes are promoted to one)."""
    values = list(values)
    if not values:
        raise user_error(ValueError, "concat: needs at least one tensor")
    return apply("ConcatV2", promote(*values), axis=static_int(axis, "concat: axis"))


def stack(values, axis=0, name="stack"):
    """Joins tensors of one shape along a new axis."""
    return concat([expand_dims(v, axis) for v in promote(*values)], axis)


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """A list of pieces: N equal ones, or the given sizes (one may be -1); `num`, if
    given, must be the number of pieces."""
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
    if num is not None and static_int(num, "split: num") != len(sizes):
        raise user_error(ValueError, f"split: num={num} but the split gives {len(sizes)} "
                                     "pieces")
    return apply_multi("Split", [x], axis=axis, sizes=tuple(sizes))


def slice(input_, begin, size, name=None):
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


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0,
                  ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0, var=None,
                  name=None):
    """input_[begin[0]:end[0]:strides[0], ...] with TF's masks: bit i of begin_mask
    (end_mask) ignores begin[i] (end[i]); of ellipsis_mask makes entry i `...`; of
    new_axis_mask a new axis of size 1; of shrink_axis_mask the index begin[i]."""
    begin = [static_int(v, "strided_slice: begin") for v in begin]
    end = [static_int(v, "strided_slice: end") for v in end]
    strides = [1] * len(begin) if strides is None else \
        [static_int(v, "strided_slice: strides") for v in strides]
    if not len(begin) == len(end) == len(strides):
        raise user_error(ValueError, f"strided_slice: begin {begin}, end {end} "
                                     f"and strides {strides} differ in length")
    if bin(int(ellipsis_mask)).count("1") > 1:
        raise user_error(ValueError, "strided_slice: ellipsis_mask may set one bit only")
    items = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if ellipsis_mask & bit:
            items.append(Ellipsis)
        elif new_axis_mask & bit:
            items.append(None)
        elif shrink_axis_mask & bit:
            items.append(b)
        else:
            if s == 0:
                raise user_error(ValueError, "strided_slice: a stride cannot be zero")
            items.append(builtins.slice(None if begin_mask & bit else b,
                                        None if end_mask & bit else e, s))
    return getitem(input_, tuple(items))


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """Pads each dim by its (before, after) pair: with `constant_values`, or by mirroring
    the edge (REFLECT: without the edge element, SYMMETRIC: with it)."""
    x = to_tensor(tensor)
    paddings = tuple(tuple(static_int(v, "pad: paddings") for v in p) for p in paddings)
    mode = str(mode).upper()
    if mode == "CONSTANT":
        return apply("Pad", [x], paddings=paddings, constant_values=constant_values)
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise user_error(ValueError, f"pad: mode must be 'CONSTANT', 'REFLECT' or "
                                     f"'SYMMETRIC', got {mode!r}")
    if len(paddings) != x.ndim or any(len(p) != 2 or min(p) < 0 for p in paddings):
        raise user_error(ValueError, f"pad: paddings {list(paddings)} need one non-negative "
                                     f"(before, after) pair per dim of {x.aval_text()}")
    edge = 0 if mode == "SYMMETRIC" else 1      # REFLECT leaves out the edge element
    for d, (lo, hi) in enumerate(paddings):
        n = x.shape[d]
        if max(lo, hi) > n - edge:
            raise user_error(ValueError, f"pad: {mode} padding {(lo, hi)} of dim {d} must "
                                         f"be at most {n - edge} (its size {n}"
                                         f"{' - 1' if edge else ''})")
        parts = []
        if lo:
            parts.append(reverse(_along(x, d, edge, edge + lo), [d]))
        parts.append(x)
        if hi:
            parts.append(reverse(_along(x, d, n - edge - hi, n - edge), [d]))
        if len(parts) > 1:
            x = concat(parts, d)
    return x


def _along(x, axis: int, start: int, stop: int):
    """x[..., start:stop, ...] on `axis`."""
    begin = [start if d == axis else 0 for d in builtins.range(x.ndim)]
    size = [stop - start if d == axis else -1 for d in builtins.range(x.ndim)]
    return slice(x, begin, size)


def reverse(tensor, axis, name=None):
    """tensor with the dims in `axis` reversed."""
    x = to_tensor(tensor)
    axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    axes = tuple(static_int(a, "reverse: axis") for a in axes)
    return apply("ReverseV2", [x], axis=axes)


def tile(input, multiples, name=None):
    return apply("Tile", [to_tensor(input)], multiples=tuple(int(m) for m in multiples))


def gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """params.take(indices, axis) (negative indices count from the end); with
    batch_dims=k the first k dims of params and indices are batch dims, gathered
    pairwise. axis=None means batch_dims."""
    params, indices = to_tensor(params), to_tensor(indices)
    if not dtypes.is_integer(indices.dtype):
        raise user_error(TypeError, f"gather: indices must be integers, "
                                    f"got {indices.aval_text()}")
    batch_dims = static_int(batch_dims, "gather: batch_dims")
    if batch_dims < 0:
        batch_dims += indices.ndim
    axis = batch_dims if axis is None else static_int(axis, "gather: axis")
    if axis < 0:
        axis += params.ndim
    if batch_dims == 0:
        return apply("GatherV2", [params, indices], axis=axis, batch_dims=0)
    if not 0 <= batch_dims <= min(indices.ndim, axis) or axis >= params.ndim:
        raise user_error(ValueError, f"gather: batch_dims {batch_dims} must be at most the "
                                     f"rank of indices ({indices.ndim}) and at most axis "
                                     f"{axis}, which must be < the rank of params "
                                     f"({params.ndim})")
    if params.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise user_error(ValueError, f"gather: the batch dims of params {params.aval_text()} "
                                     f"and indices {indices.aval_text()} differ")
    # Move `axis` next to the batch dims, gather_nd with one index per batch element,
    # then put params' dims between the batch dims and axis back before the index dims.
    b = batch_dims
    perm = list(builtins.range(b)) + [axis] + [d for d in builtins.range(b, params.ndim)
                                               if d != axis]
    moved = transpose(params, perm) if perm != list(builtins.range(params.ndim)) else params
    out = gather_nd(moved, expand_dims(indices, -1), batch_dims=b)
    # out: [B..., I..., params[b:axis], params[axis+1:]]
    ni, nm = indices.ndim - b, axis - b
    order = (list(builtins.range(b)) + list(builtins.range(b + ni, b + ni + nm)) +
             list(builtins.range(b, b + ni)) + list(builtins.range(b + ni + nm, out.ndim)))
    return transpose(out, order) if order != list(builtins.range(out.ndim)) else out


def gather_nd(params, indices, batch_dims=0, name=None):
    """params[indices[..., 0], indices[..., 1], ...] for each leading index of indices;
    with batch_dims=k the first k dims of both are batch dims. Negative and
    out-of-range indices are clamped (XLA's rule)."""
    params, indices = to_tensor(params), to_tensor(indices)
    if not dtypes.is_integer(indices.dtype):
        raise user_error(TypeError, f"gather_nd: indices must be integers, "
                                    f"got {indices.aval_text()}")
    return apply("GatherNd", [params, indices],
                 batch_dims=static_int(batch_dims, "gather_nd: batch_dims"))


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """on_value at each index along a new `axis` (default last), off_value elsewhere;
    dtype defaults to the values' type, else float32 (as TF)."""
    indices = to_tensor(indices)
    if dtype is None:
        known = [v for v in (on_value, off_value) if v is not None]
        dtype = dtypes.default_dtype(known[0]) if known else "float32"
    return apply("OneHot", [indices], depth=static_int(depth, "one_hot: depth"),
                 on_value=1 if on_value is None else on_value,
                 off_value=0 if off_value is None else off_value,
                 axis=-1 if axis is None else static_int(axis, "one_hot: axis"),
                 dtype=dtypes.hlo_name(dtypes.canonical(dtype)))


# --- tensors from nothing -----------------------------------------------------------

def fill(dims, value, name=None, *, dtype=None):
    """A tensor of shape `dims` holding `value` (dtype: value's default type if None)."""
    dtype = dtypes.default_dtype(value) if dtype is None else dtypes.canonical(dtype)
    return apply("Fill", [], dims=tuple(int(d) for d in dims), value=value,
                 dtype=dtypes.hlo_name(dtype))


def zeros(shape, dtype="float32", name=None): return fill(shape, 0, dtype=dtype)
def ones(shape, dtype="float32", name=None): return fill(shape, 1, dtype=dtype)


def zeros_like(input, dtype=None, name=None):
    x = to_tensor(input)
    return apply("ZerosLike", [x if dtype is None else cast(x, dtype)])


def ones_like(input, dtype=None, name=None):
    x = to_tensor(input)
    return apply("OnesLike", [x if dtype is None else cast(x, dtype)])


def range(start, limit=None, delta=1, dtype=None, name="range"):
    """start, start + delta, ... below `limit` (tf.range); range(n) counts from 0."""
    if limit is None:
        start, limit = 0, start
    if dtype is None:
        dtype = dtypes.DEFAULT_FLOAT if any(isinstance(v, float) for v in (start, limit, delta)) \
            else dtypes.DEFAULT_INT
    return apply("Range", [], start=start, limit=limit, delta=delta,
                 dtype=dtypes.hlo_name(dtypes.canonical(dtype)))


def _scatter(mode: str, tensor, indices, updates):
    tensor, updates = promote_for(f"tensor_scatter_nd_{mode}", tensor, updates)
    indices = to_tensor(indices)
    if not dtypes.is_integer(indices.dtype):
        raise user_error(TypeError, f"tensor_scatter_nd_{mode}: indices must be integers, "
                                    f"got {indices.aval_text()}")
    return apply("TensorScatterNd", [tensor, indices, updates], mode=mode, batch_dims=0)


def tensor_scatter_nd_update(tensor, indices, updates, name=None):
    """tensor with tensor[indices[i]] = updates[i] (out-of-range indices are dropped)."""
    return _scatter("update", tensor, indices, updates)


def tensor_scatter_nd_add(tensor, indices, updates, name=None):
    """tensor with updates[i] added at indices[i] (repeated indices add up)."""
    return _scatter("add", tensor, indices, updates)


def tensor_scatter_nd_sub(tensor, indices, updates, name=None):
    return _scatter("add", tensor, indices, -to_tensor(updates))


def tensor_scatter_nd_max(tensor, indices, updates, name=None):
    return _scatter("max", tensor, indices, updates)


def tensor_scatter_nd_min(tensor, indices, updates, name=None):
    return _scatter("min", tensor, indices, updates)


def scatter_nd(indices, updates, shape, name=None):
    """Zeros of `shape` with updates[i] added at indices[i]."""
    updates = to_tensor(updates)
    dims = [static_int(d, "scatter_nd: shape") for d in shape]
    return _scatter("add", zeros(dims, updates.dtype), indices, updates)


# --- sorting, searching, rearranging ----------------------------------------------------------

def _direction(direction, what: str) -> bool:
    d = str(direction).upper()
    if d not in ("ASCENDING", "DESCENDING"):
        raise user_error(ValueError, f"{what}: direction must be 'ASCENDING' or "
                                     f"'DESCENDING', got {direction!r}")
    return d == "DESCENDING"


def sort_with_indices(x, axis=-1, descending=False, index_type="int32"):
    """(sorted x, the permutation) along `axis`, stable."""
    x = to_tensor(x)
    if dtypes.is_bool(x.dtype):
        x = cast(x, "int32")
    return apply_multi("Sort", [x], axis=static_int(axis, "sort: axis"),
                       descending=bool(descending),
                       index_type=dtypes.hlo_name(dtypes.canonical(index_type)))


def strided_slice_last(x, k: int):
    """x[..., :k]."""
    return slice(x, [0] * x.ndim, [-1] * (x.ndim - 1) + [k])


def sort(values, axis=-1, direction="ASCENDING", name=None):
    """values sorted along `axis` (NaN last ascending, first descending)."""
    return sort_with_indices(values, axis, _direction(direction, "sort"))[0]


def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """The int32 indices that sort `values` along `axis` (always stable here)."""
    return sort_with_indices(values, axis, _direction(direction, "argsort"))[1]


def roll(input, shift, axis, name=None):
    """Elements shifted by `shift` along `axis` (both ints or equal-length lists; known at
    trace time), wrapping around."""
    x = to_tensor(input)
    shifts = [shift] if isinstance(shift, numbers.Integral) else list(shift)
    axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    if len(shifts) != len(axes):
        raise user_error(ValueError, f"roll: shift {shifts} and axis {axes} differ in length")
    total: dict[int, int] = {}
    for s, a in zip(shifts, axes):
        a = static_int(a, "roll: axis")
        if not -x.ndim <= a < x.ndim:
            raise user_error(ValueError, f"roll: axis {a} is out of range for {x.aval_text()}")
        a %= x.ndim
        total[a] = total.get(a, 0) + static_int(s, "roll: shift")
    for a, s in total.items():
        n = x.shape[a]
        s = s % n if n else 0
        if s:
            x = concat([_along(x, a, n - s, n), _along(x, a, 0, n - s)], a)
    return x


def repeat(input, repeats, axis=None, name=None):
    """Each element repeated `repeats` times (an int, or one count per element along
    `axis`; known at trace time); axis None repeats the flattened input."""
    x = to_tensor(input)
    if axis is None:
        x, axis = reshape(x, [-1]), 0
    axis = static_int(axis, "repeat: axis") % max(x.ndim, 1)
    counts = static_value(repeats)
    if counts is None:
        raise user_error(ValueError, "repeat: repeats must be known at trace time (the "
                                     "result's shape depends on it)")
    counts = np.asarray(counts).astype(np.int64).reshape(-1)
    n = x.shape[axis]
    if counts.size == 1:
        counts = np.repeat(counts, n)
    if counts.size != n or (counts < 0).any():
        raise user_error(ValueError, f"repeat: repeats {counts.tolist()} must be one "
                                     f"non-negative count or {n} of them")
    return gather(x, constant(np.repeat(np.arange(n), counts).astype(np.int32)), axis=axis)


def searchsorted(sorted_sequence, values, side="left", out_type="int32", name=None):
    """For each value, the index in the (last dim of the) sorted sequence where it would
    be inserted: after the elements < it (left) or <= it (right)."""
    seq, vals = promote_for("searchsorted", sorted_sequence, values)
    side = str(side).lower()
    if side not in ("left", "right"):
        raise user_error(ValueError, f"searchsorted: side must be 'left' or 'right', "
                                     f"got {side!r}")
    if seq.ndim == 0 or vals.ndim == 0 or seq.shape[:-1] != vals.shape[:-1]:
        raise user_error(ValueError, f"searchsorted: sorted_sequence {seq.aval_text()} and "
                                     f"values {vals.aval_text()} must agree but in the last dim")
    from .math import less, less_equal, reduce_sum
    before = (less if side == "left" else less_equal)(expand_dims(seq, -2),
                                                      expand_dims(vals, -1))
    return reduce_sum(cast(before, out_type), -1)


def unstack(value, num=None, axis=0, name="unstack"):
    """The slices of `value` along `axis`, as a list."""
    x = to_tensor(value)
    axis = static_int(axis, "unstack: axis")
    if not -x.ndim <= axis < x.ndim:
        raise user_error(ValueError, f"unstack: axis {axis} is out of range for "
                                     f"{x.aval_text()}")
    n = x.shape[axis]
    if num is not None and static_int(num, "unstack: num") != n:
        raise user_error(ValueError, f"unstack: num={num} but dim {axis} has size {n}")
    if n == 0:
        return []
    pieces = split(x, n, axis) if n > 1 else [x]
    return [squeeze(p, axis) for p in pieces]


def meshgrid(*args, **kwargs):
    """N-D coordinate grids from 1-D tensors; indexing 'xy' (default: the first two
    output dims swapped, as numpy and TF) or 'ij'."""
    indexing = kwargs.pop("indexing", "xy")
    kwargs.pop("name", None)
    if kwargs:
        raise user_error(TypeError, f"meshgrid: unexpected arguments {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise user_error(ValueError, f"meshgrid: indexing must be 'xy' or 'ij', got "
                                     f"{indexing!r}")
    vectors = [reshape(to_tensor(a), [-1]) for a in args]
    shape = [v.shape[0] for v in vectors]
    if indexing == "xy" and len(vectors) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, v in enumerate(vectors):
        dim = i
        if indexing == "xy" and len(vectors) >= 2 and i < 2:
            dim = 1 - i
        view = [1] * len(vectors)
        view[dim] = v.shape[0]
        out.append(broadcast_to(reshape(v, view), shape))
    return out


def sequence_mask(lengths, maxlen=None, dtype="bool", name=None):
    """mask[..., j] = j < lengths[...]; maxlen defaults to max(lengths), which must then
    be known at trace time."""
    lengths = to_tensor(lengths)
    if maxlen is None:
        value = static_value(lengths)
        if value is None:
            raise user_error(ValueError, "sequence_mask: give maxlen, or lengths known at "
                                         "trace time (the result's shape is max(lengths))")
        maxlen = int(np.max(value)) if np.size(value) else 0
    maxlen = static_int(maxlen, "sequence_mask: maxlen")
    ramp = range(0, maxlen, 1, dtype=lengths.dtype)
    from .math import less
    return cast(less(ramp, expand_dims(lengths, -1)), dtype)


def linspace(start, stop, num, name=None, axis=0):
    """num evenly spaced values from start to stop (both included); start and stop may
    be tensors of one shape, then the values run along `axis`."""
    start, stop = promote_for("linspace", start, stop)
    if not dtypes.is_float(start.dtype):
        start, stop = cast(start, "float32"), cast(stop, "float32")
    num = static_int(num, "linspace: num")
    if num < 0:
        raise user_error(ValueError, f"linspace: num must be >= 0, got {num}")
    rank = start.ndim
    axis = static_int(axis, "linspace: axis")
    axis = axis % (rank + 1)
    step_count = constant(np.arange(num, dtype=start.dtype).reshape(
        [num if d == axis else 1 for d in builtins.range(rank + 1)]))
    a, b = expand_dims(start, axis), expand_dims(stop, axis)
    if num <= 1:
        return a * ones_like(step_count) if num == 1 else a * step_count
    values = a + step_count * ((b - a) / float(num - 1))
    # the last value is stop itself, as TF ensures
    last = [num - 1 if d == axis else 0 for d in builtins.range(rank + 1)]
    return concat([slice(values, [0] * (rank + 1),
                         [num - 1 if d == axis else -1 for d in builtins.range(rank + 1)]),
                   b], axis) if last else values
