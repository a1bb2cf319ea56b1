"""Indexing kernels: StridedSlice (Python's basic slicing), GatherV2, OneHot.

StridedSlice takes the index itself as its attribute `index`: a tuple of
ints, `slice` objects, None (a new axis) and at most one Ellipsis, as Python
spells `x[1:, ::-2, None, ...]`. It lowers to reverse (for negative steps),
slice and a reshape that drops the int-indexed dims and adds the new axes.
"""
from __future__ import annotations

from ...hlo import Shape

from ..registry import XlaOpKernel, register_xla_op
from .common import is_integer, normalize_axis


def expand_index(index, rank: int) -> list:
    """The index with Ellipsis expanded and missing trailing dims filled with `:`."""
    index = list(index) if isinstance(index, tuple) else [index]
    if sum(item is Ellipsis for item in index) > 1:
        raise IndexError("an index can have only one Ellipsis")
    consumed = sum(1 for item in index if item is not None and item is not Ellipsis)
    if consumed > rank:
        raise IndexError(f"too many indices ({consumed}) for a tensor of rank {rank}")
    fill = [slice(None)] * (rank - consumed)
    if Ellipsis in index:
        at = index.index(Ellipsis)
        return index[:at] + fill + index[at + 1:]
    return index + fill


@register_xla_op("StridedSlice")
class StridedSlice(XlaOpKernel):
    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        dims = ctx.input_shape(0)
        starts, limits, strides, reversed_dims, out_dims = [], [], [], [], []
        d = 0
        for item in expand_index(ctx.attr("index"), len(dims)):
            if item is None:
                out_dims.append(1)
                continue
            n = dims[d]
            if isinstance(item, slice):
                start, stop, step = item.indices(n)
                count = len(range(start, stop, step))
                if step < 0:
                    # Index i of the reversed dim is n-1-i of the original one.
                    reversed_dims.append(d)
                    start, step = n - 1 - start, -step
                if count == 0:
                    start = 0
                starts.append(start)
                limits.append(start + (count - 1) * step + 1 if count else start)
                strides.append(step)
                out_dims.append(count)
            else:
                i = int(item)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for dim {d} of size {n}")
                i %= n
                starts.append(i)
                limits.append(i + 1)
                strides.append(1)
            d += 1
        if reversed_dims:
            x = b.reverse(x, reversed_dims)
        if (starts, limits, strides) != ([0] * len(dims), list(dims), [1] * len(dims)):
            x = b.slice(x, starts, limits, strides)
        if tuple(out_dims) != tuple(x.shape.dims):
            x = b.reshape(x, out_dims)
        ctx.set_output(0, x)


@register_xla_op("GatherV2")
class GatherV2(XlaOpKernel):
    """params.take(indices, axis): result dims are params' with `axis` replaced by the
    index dims. Negative indices count from the end (as in numpy); indices out of
    range are clamped (XLA's rule)."""

    def compile(self, ctx):
        b = ctx.builder
        params, indices = ctx.inputs
        itype = indices.shape.element_type
        if not is_integer(itype):
            raise TypeError(f"indices must be integers, got {itype}")
        if ctx.attr("batch_dims", 0):
            raise ValueError("batch_dims other than 0 are not supported")
        pdims = ctx.input_shape(0)
        axis = normalize_axis(ctx.attr("axis", 0), len(pdims))
        if itype[0] == "s":
            # i < 0 -> i + n
            size = b.broadcast(b.constant(pdims[axis], itype), indices.shape.dims)
            negative = b.compare(indices, b.broadcast(b.constant(0, itype),
                                                      indices.shape.dims), "LT")
            indices = b.select(negative, b.add(indices, size), indices)
        irank = indices.shape.rank
        offset_dims = [d for d in range(len(pdims) - 1 + irank) if not axis <= d < axis + irank]
        out = b.gather(params, indices, offset_dims=offset_dims, collapsed_slice_dims=[axis],
                       start_index_map=[axis], index_vector_dim=irank,
                       slice_sizes=[1 if d == axis else n for d, n in enumerate(pdims)])
        ctx.set_output(0, out)


@register_xla_op("OneHot")
class OneHot(XlaOpKernel):
    """out[..., j, ...] = on_value if indices[...] == j else off_value (j on `axis`)."""

    def compile(self, ctx):
        b, indices = ctx.builder, ctx.input(0)
        itype = indices.shape.element_type
        if not is_integer(itype):
            raise TypeError(f"indices must be integers, got {itype}")
        depth = int(ctx.attr("depth"))
        if depth < 0:
            raise ValueError(f"depth must be non-negative, got {depth}")
        dims = list(ctx.input_shape(0))
        axis = normalize_axis(ctx.attr("axis", -1), len(dims) + 1)
        out_dims = dims[:axis] + [depth] + dims[axis:]
        ramp = b.iota(Shape(itype, tuple(out_dims)), axis)
        spread = b.broadcast(indices, out_dims,
                             dims=[d for d in range(len(out_dims)) if d != axis])
        hit = b.compare(ramp, spread, "EQ")
        etype = ctx.attr("dtype", "f32")
        on = b.broadcast(b.constant(ctx.attr("on_value", 1), etype), out_dims)
        off = b.broadcast(b.constant(ctx.attr("off_value", 0), etype), out_dims)
        ctx.set_output(0, b.select(hit, on, off))


def nd_index(b, indices, batch_dims: int):
    """indices [B..., I..., D] as full index vectors [B..., I..., B + D]: the batch
    coordinates (iotas) put in front of each index vector."""
    idims = tuple(indices.shape.dims)
    if batch_dims == 0:
        return indices
    itype = indices.shape.element_type
    lead = idims[:-1] + (1,)
    parts = [b.iota(Shape(itype, lead), d) for d in range(batch_dims)]
    return b.concatenate(parts + [indices], len(idims) - 1)


def check_nd(pdims, idims, batch_dims: int, what: str = "indices"):
    """The depth D of nd indices [B..., I..., D] into params [B..., P1..PD, rest...]."""
    if len(idims) < 1:
        raise ValueError(f"{what} must have rank >= 1 (the last dim is the index depth)")
    if not 0 <= batch_dims < len(idims) or batch_dims > len(pdims):
        raise ValueError(f"batch_dims {batch_dims} must be >= 0 and less than the rank of "
                         f"{what} {list(idims)} and at most the rank of params {list(pdims)}")
    if tuple(pdims[:batch_dims]) != tuple(idims[:batch_dims]):
        raise ValueError(f"the batch dims of params {list(pdims)} and {what} {list(idims)} "
                         "differ")
    depth = idims[-1]
    if batch_dims + depth > len(pdims):
        raise ValueError(f"index depth {depth} (the last dim of {what} {list(idims)}) is "
                         f"more than the {len(pdims) - batch_dims} non-batch dims of "
                         f"params {list(pdims)}")
    return depth


@register_xla_op("GatherNd")
class GatherNd(XlaOpKernel):
    """params [B..., P1..PD, rest...], indices [B..., I..., D] -> [B..., I..., rest...]:
    out[b, i] = params[b, indices[b, i]] (attribute batch_dims = len(B)). Indices out
    of range are clamped (XLA's rule)."""

    def compile(self, ctx):
        b = ctx.builder
        params, indices = ctx.inputs
        if not is_integer(indices.shape.element_type):
            raise TypeError(f"indices must be integers, got {indices.shape.element_type}")
        pdims, idims = ctx.input_shape(0), ctx.input_shape(1)
        nb = int(ctx.attr("batch_dims", 0))
        depth = check_nd(pdims, idims, nb)
        full = nd_index(b, indices, nb)
        k = nb + depth                        # params dims addressed by an index
        irank = len(idims) - 1
        out = b.gather(params, full, offset_dims=list(range(irank, irank + len(pdims) - k)),
                       collapsed_slice_dims=list(range(k)), start_index_map=list(range(k)),
                       index_vector_dim=irank,
                       slice_sizes=[1] * k + list(pdims[k:]))
        ctx.set_output(0, out)


@register_xla_op("ReverseV2")
class ReverseV2(XlaOpKernel):
    """x with the dims in `axis` reversed."""

    def compile(self, ctx):
        x = ctx.input(0)
        axes = sorted({normalize_axis(a, x.shape.rank) for a in ctx.attr("axis")})
        ctx.set_output(0, ctx.builder.reverse(x, axes) if axes else x)


def _combiner(b, mode: str, etype: str):
    """The scalar computation a scatter combines old and new values with."""
    if mode == "update":
        sub = b.sub_builder(f"scatter_update_{etype}")
        sub.parameter(Shape.scalar(etype), "old")
        new = sub.parameter(Shape.scalar(etype), "new")
        return sub.build(new)
    opcode = {"add": "add", "max": "maximum", "min": "minimum"}[mode]
    if etype == "pred":
        opcode = {"add": "or", "maximum": "or", "minimum": "and"}[opcode]
    return b.scalar_computation(f"scatter_{opcode}_{etype}", opcode, etype)


@register_xla_op("TensorScatterNd")
class TensorScatterNd(XlaOpKernel):
    """Inputs (tensor [B..., P1..PD, rest...], indices [B..., I..., D], updates
    [B..., I..., rest...]): tensor with each update combined into tensor[b, index]
    by `mode` (update, add, max, min); attribute batch_dims = len(B). Updates whose
    index is out of range are dropped (XLA's rule)."""

    def compile(self, ctx):
        b = ctx.builder
        tensor, indices, updates = ctx.inputs
        if not is_integer(indices.shape.element_type):
            raise TypeError(f"indices must be integers, got {indices.shape.element_type}")
        etype = tensor.shape.element_type
        if updates.shape.element_type != etype:
            raise TypeError(f"updates ({updates.shape.element_type}) must have the tensor's "
                            f"type ({etype})")
        pdims, idims = ctx.input_shape(0), ctx.input_shape(1)
        nb = int(ctx.attr("batch_dims", 0))
        depth = check_nd(pdims, idims, nb)
        k = nb + depth
        irank = len(idims) - 1
        want = tuple(idims[:-1]) + tuple(pdims[k:])
        if tuple(updates.shape.dims) != want:
            raise ValueError(f"updates must have shape {list(want)} (indices {list(idims)} "
                             f"without the depth, then tensor {list(pdims)} after the "
                             f"{depth} indexed dims), got {list(updates.shape.dims)}")
        full = nd_index(b, indices, nb)
        out = b.scatter(tensor, full, updates, _combiner(b, ctx.attr("mode"), etype),
                        update_window_dims=list(range(irank, irank + len(pdims) - k)),
                        inserted_window_dims=list(range(k)),
                        scatter_dims_to_operand_dims=list(range(k)), index_vector_dim=irank)
        ctx.set_output(0, out)
