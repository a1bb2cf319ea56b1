"""Sorting and segment kernels: Sort (values and the permutation), UnsortedSegment
(sum, max or min of the rows of data that share a segment id).

Sort is one stable HLO sort of (values, iota) along `axis`, in XLA's total order
for floats (NaN last ascending, first descending), so ties keep their order and
the indices are a permutation. UnsortedSegment scatters each row into a result of
`num_segments` rows filled with the reduction's identity; ids outside
[0, num_segments) are dropped (XLA's scatter skips them).
"""
from __future__ import annotations

from ...hlo import Shape

from ..registry import XlaOpKernel, register_xla_op
from .common import full, highest, is_integer, lowest, normalize_axis


@register_xla_op("Sort")
class Sort(XlaOpKernel):
    """Outputs (sorted values, indices of type `index_type`) along `axis`; attribute
    `descending`. Stable."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        if x.shape.rank == 0:
            raise ValueError("cannot sort a scalar")
        axis = normalize_axis(ctx.attr("axis", -1), x.shape.rank)
        itype = ctx.attr("index_type", "s32")
        etype = x.shape.element_type
        index = b.iota(Shape(itype, x.shape.dims), axis)
        direction = "GT" if ctx.attr("descending", False) else "LT"
        comparator = b.comparator(f"sort_{direction.lower()}_{etype}", [etype, itype],
                                  direction)
        pair = b.sort([x, index], axis, comparator, is_stable=True)
        ctx.set_output(0, b.get_tuple_element(pair, 0))
        ctx.set_output(1, b.get_tuple_element(pair, 1))


@register_xla_op("UnsortedSegment")
class UnsortedSegment(XlaOpKernel):
    """Inputs (data [I..., rest...], segment_ids [I...]) -> [num_segments, rest...]:
    row s reduces (attribute mode: sum, max, min) the rows of data whose id is s;
    an empty segment holds the identity (0, the lowest or the highest value)."""

    def compile(self, ctx):
        b = ctx.builder
        data, ids = ctx.inputs
        if not is_integer(ids.shape.element_type):
            raise TypeError(f"segment_ids must be integers, got {ids.shape.element_type}")
        ddims, idims = ctx.input_shape(0), ctx.input_shape(1)
        if tuple(ddims[:len(idims)]) != tuple(idims):
            raise ValueError(f"segment_ids {list(idims)} must be a prefix of data's shape "
                             f"{list(ddims)}")
        n = int(ctx.attr("num_segments"))
        if n < 0:
            raise ValueError(f"num_segments must be >= 0, got {n}")
        mode = ctx.attr("mode", "sum")
        etype = data.shape.element_type
        init = {"sum": 0, "max": lowest(etype), "min": highest(etype)}[mode]
        opcode = {"sum": "add", "max": "maximum", "min": "minimum"}[mode]
        rest = tuple(ddims[len(idims):])
        base = full(b, init, etype, (n,) + rest)
        combine = b.scalar_computation(f"segment_{opcode}_{etype}", opcode, etype)
        k = len(idims)
        out = b.scatter(base, ids, data, combine,
                        update_window_dims=list(range(k, k + len(rest))),
                        inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                        index_vector_dim=k)
        ctx.set_output(0, out)
