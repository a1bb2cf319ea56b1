"""Reference semantics of the data-movement ops and tuples.

These ops only move or copy elements: they never round or flush denormals.
`bitcast` is the one whose meaning depends on layouts: it reinterprets the
buffer, so the elements are taken in the source's physical (major-to-minor)
order and laid down in the target's physical order. Dynamic-slice and
dynamic-update-slice clamp their start indices so the window stays in bounds.
"""
from __future__ import annotations

import numpy as np

from .eval_common import EvaluationError, np_dtype_of, to_result
from .opcodes import reference


@reference("broadcast")
def broadcast(instr, operands, ctx):
    x = operands[0]
    out_dims = instr.shape.dims
    if not out_dims:        # scalar to scalar (also inside reducers run on whole arrays)
        return x
    dims = instr.dims()
    if len(dims) != x.ndim:
        raise EvaluationError(f"{instr.name}: broadcast dimensions {dims} do not match "
                              f"an operand of rank {x.ndim}")
    # Put the operand's dimensions in output order, then insert size-1 dimensions.
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = np.transpose(x, order)
    expanded = [1] * len(out_dims)
    for i in order:
        expanded[dims[i]] = operands[0].shape[i]
    return np.broadcast_to(x.reshape(expanded), out_dims)


@reference("reshape")
def reshape(instr, operands, ctx):
    if _is_scalar_to_scalar(instr):
        return operands[0]
    return np.reshape(operands[0], instr.shape.dims)


def _is_scalar_to_scalar(instr) -> bool:
    """Scalar reshapes and bitcasts are identities on each element. Reducers and
    comparators are evaluated on whole arrays of "scalars", so these ops must not
    look at the value's shape."""
    return not instr.shape.dims and not instr.operands[0].shape.dims


def _major_to_minor(shape) -> list[int]:
    return list(reversed(shape.minor_to_major()))


@reference("bitcast")
def bitcast(instr, operands, ctx):
    """Reinterprets the buffer: physical order of the source -> physical order of the target."""
    x = operands[0]
    src, dst = instr.operands[0].shape, instr.shape
    if x.dtype.itemsize != np_dtype_of(instr).itemsize:
        raise EvaluationError(f"{instr.name}: bitcast between element sizes "
                              f"{x.dtype.itemsize} and {np_dtype_of(instr).itemsize}")
    if _is_scalar_to_scalar(instr):
        return x.view(np_dtype_of(instr))
    physical = np.transpose(x, _major_to_minor(src)).reshape(-1)
    dst_order = _major_to_minor(dst)
    physical = physical.reshape([dst.dims[d] for d in dst_order])
    y = np.transpose(physical, np.argsort(dst_order))
    return y if y.dtype == np_dtype_of(instr) else y.view(np_dtype_of(instr))


@reference("transpose")
def transpose(instr, operands, ctx):
    return np.transpose(operands[0], instr.dims())


@reference("slice")
def slice_(instr, operands, ctx):
    index = tuple(slice(s.start, s.limit, s.stride) for s in instr.attrs["slice"])
    return operands[0][index]


def clamped_starts(starts, operand_dims, sizes) -> list[int]:
    """Start indices clamped to [0, dim - size], as XLA clamps dynamic slices."""
    return [int(min(max(int(s), 0), d - n)) for s, d, n in zip(starts, operand_dims, sizes)]


@reference("dynamic-slice")
def dynamic_slice(instr, operands, ctx):
    x, starts = operands[0], operands[1:]
    sizes = instr.dims("dynamic_slice_sizes") or instr.shape.dims
    begin = clamped_starts(starts, x.shape, sizes)
    return x[tuple(slice(b, b + n) for b, n in zip(begin, sizes))]


@reference("dynamic-update-slice")
def dynamic_update_slice(instr, operands, ctx):
    x, update, starts = operands[0], operands[1], operands[2:]
    begin = clamped_starts(starts, x.shape, update.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(b, b + n) for b, n in zip(begin, update.shape))] = update
    return out


@reference("concatenate")
def concatenate(instr, operands, ctx):
    (axis,) = instr.dims()
    return np.concatenate(operands, axis=axis)


@reference("pad")
def pad(instr, operands, ctx):
    x, value = operands
    padding = instr.attrs["padding"]
    if not padding:                       # rank 0: nothing to pad (np.pad rejects 0-d)
        return x
    # Interior padding first: element i lands at i * (interior + 1).
    dilated_dims = [n + max(n - 1, 0) * p.interior for n, p in zip(x.shape, padding)]
    dilated = np.full(dilated_dims, value, dtype=x.dtype)
    dilated[tuple(slice(None, None, p.interior + 1) for p in padding)] = x
    # Then edge padding: positive amounts add, negative amounts crop.
    widths = [(max(p.low, 0), max(p.high, 0)) for p in padding]
    out = np.pad(dilated, widths, mode="constant", constant_values=value)
    crop = tuple(slice(max(-p.low, 0), out.shape[i] - max(-p.high, 0))
                 for i, p in enumerate(padding))
    return out[crop]


@reference("reverse")
def reverse(instr, operands, ctx):
    return np.flip(operands[0], axis=instr.dims())


@reference("shuffle")
def shuffle(instr, operands, ctx):
    """XLA's shuffle as its ShuffleExpander writes it: rotate, result[i] = x[(i + s) mod n]
    along each dimension; permute, result[p] = x[q] with q's shuffled coordinates read
    from indices at p (shared coordinates broadcast), the others p's own, each clamped
    into the dimension as the expander's gather clamps them."""
    (x,) = operands
    dims = list(instr.dims())
    if instr.attrs["mode"] == "rotate":
        out = x
        for d, s in zip(dims, instr.attrs["shifts"]):
            if x.shape[d]:
                out = np.roll(out, -(int(s) % x.shape[d]), axis=d)
        return np.array(out, copy=True)
    ind = np.asarray(instr.attrs["indices"].value).astype(np.int64)
    if len(dims) == 1:
        ind = ind[..., None]
    coords = list(np.indices(x.shape, sparse=True))
    for k, d in enumerate(dims):
        c = np.broadcast_to(ind[..., k], x.shape)
        coords[d] = np.clip(c, 0, max(x.shape[d] - 1, 0))
    if x.size == 0:
        return np.array(x, copy=True)
    return np.array(x[tuple(coords)], copy=True)


@reference("iota")
def iota(instr, operands, ctx):
    dims = instr.shape.dims
    axis = instr.attrs["iota_dimension"]
    shape = [1] * len(dims)
    shape[axis] = dims[axis]
    values = to_result(np.arange(dims[axis]), instr).reshape(shape)
    return np.broadcast_to(values, dims)


# --- tuples -----------------------------------------------------------------------

@reference("tuple")
def make_tuple(instr, operands, ctx):
    return tuple(operands)


@reference("get-tuple-element")
def get_tuple_element(instr, operands, ctx):
    value = operands[0]
    if not isinstance(value, tuple):
        raise EvaluationError(f"{instr.name}: get-tuple-element of a non-tuple value")
    return value[instr.attrs["index"]]


@reference("opt-barrier")
def opt_barrier(instr, operands, ctx):
    return operands[0]
