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
