"""Kernels of the gradient-only ops (TensorFlow's names): the transposes of
strided slicing, gathering, convolution and pooling, emitted as HLO.

    StridedSliceGrad     pad with interior holes (the stride), then reverse
    GatherGrad           scatter-add into zeros (repeated indices add up)
    Conv2DBackpropInput  convolution of the stride-dilated cotangent with the
                         spatially reversed, in/out-swapped filter
    Conv2DBackpropFilter convolution of the input with the cotangent as window
                         (batch and features swap roles)
    Conv3DBackprop*V2    the same two, over three spatial dims (the kernels are
                         rank-generic; MaxPool3DGrad and AvgPool3DGrad likewise)
    MaxPoolGrad          select-and-scatter: each window's cotangent goes to its max
    AvgPoolGrad          reduce-window sum of the stride-dilated cotangent / counts

They are registered like every kernel (so they trace, lower and fuse the same
way) but have no gradient of their own: second-order gradients through them
are an error naming the op.
"""
from __future__ import annotations

from ...hlo import Shape
from ...hlo.builder import make_window

from ..kernels.common import full, normalize_axis, require_float
from ..kernels.conv import (conv_labels, pool_geometry, pool_window, spatial_padding,
                            spatial_tuple)
from ..kernels.indexing import expand_index
from ..registry import XlaOpKernel, register_xla_op
from .registry import register_no_gradient


def strided_slice_plan(index, dims):
    """Per dim of the input: (start, count, step, reversed) of x[index]."""
    plan = []
    d = 0
    for item in expand_index(index, len(dims)):
        if item is None:
            continue
        n = dims[d]
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            count = len(range(start, stop, step))
            flip = step < 0
            if flip:
                start, step = n - 1 - start, -step
            plan.append((start if count else 0, count, step, flip))
        else:
            plan.append((int(item) % n, 1, 1, False))
        d += 1
    return plan


@register_xla_op("StridedSliceGrad")
class StridedSliceGrad(XlaOpKernel):
    """The cotangent of x[index] (input 0) placed back into zeros of `shape`."""

    def compile(self, ctx):
        b, g = ctx.builder, ctx.input(0)
        dims = tuple(ctx.attr("shape"))
        plan = strided_slice_plan(ctx.attr("index"), dims)
        g = b.reshape(g, [count for _, count, _, _ in plan])
        # Elements land `step` apart: interior padding step-1, edges to fill n.
        padding = []
        for (start, count, step, _), n in zip(plan, dims):
            used = start + (count - 1) * step + 1 if count else 0
            padding.append((start, n - used, step - 1) if count else (0, n, 0))
        x = b.pad(g, ctx.constant(0, g), padding)
        flipped = [d for d, (_, _, _, flip) in enumerate(plan) if flip]
        ctx.set_output(0, b.reverse(x, flipped) if flipped else x)


@register_xla_op("GatherGrad")
class GatherGrad(XlaOpKernel):
    """Inputs (cotangent of params.take(indices, axis), indices): zeros of `shape`
    with every slice of the cotangent added at its index."""

    def compile(self, ctx):
        b = ctx.builder
        g, indices = ctx.inputs
        dims = tuple(ctx.attr("shape"))
        axis = normalize_axis(ctx.attr("axis", 0), len(dims))
        itype = indices.shape.element_type
        if itype[0] == "s":          # negative indices count from the end, as in GatherV2
            size = b.broadcast(b.constant(dims[axis], itype), indices.shape.dims)
            negative = b.compare(indices, b.broadcast(b.constant(0, itype),
                                                      indices.shape.dims), "LT")
            indices = b.select(negative, b.add(indices, size), indices)
        irank = indices.shape.rank
        etype = g.shape.element_type
        zeros = full(b, 0, etype, dims)
        adder = b.scalar_computation(f"add_{etype}", "add", etype)
        window_dims = [d for d in range(g.shape.rank) if not axis <= d < axis + irank]
        ctx.set_output(0, b.scatter(zeros, indices, g, adder, update_window_dims=window_dims,
                                    inserted_window_dims=[axis],
                                    scatter_dims_to_operand_dims=[axis],
                                    index_vector_dim=irank))


def _conv_geometry(ctx, in_sizes, k_sizes):
    n = len(in_sizes)
    strides = spatial_tuple(ctx.attr("strides", 1), "strides", n)
    dilations = spatial_tuple(ctx.attr("dilations", 1), "dilations", n)
    pads = spatial_padding(ctx.attr("padding", "VALID"), in_sizes, k_sizes, strides, dilations)
    return strides, dilations, pads


@register_xla_op("Conv2DBackpropInput")
class Conv2DBackpropInput(XlaOpKernel):
    """Inputs (cotangent [N, OH, OW, O], filter [KH, KW, C, O]) -> [N, H, W, C]
    (and the same with a depth dim in front of H for Conv3D)."""

    def compile(self, ctx):
        b, (g, w) = ctx.builder, ctx.inputs
        require_float(g)
        dims = tuple(ctx.attr("input_shape"))
        n = len(dims) - 2
        sizes, ks = dims[1:-1], w.shape.dims[:n]
        strides, dilations, pads = _conv_geometry(ctx, sizes, ks)
        # dx[i] = sum_k G[i + pl - k d] w[k], G = g dilated by the stride: a
        # convolution with the reversed filter and low padding (K-1) d - pl.
        padding = []
        for size, k, s, d, (pl, _), o in zip(sizes, ks, strides, dilations, pads,
                                             g.shape.dims[1:-1]):
            low = (k - 1) * d - pl
            padding.append((low, size + pl - (o - 1) * s - 1))
        spatial = list(range(n))
        flipped = b.transpose(b.reverse(w, spatial), [*spatial, n + 1, n])
        window = make_window(list(ks), padding=padding, base_dilation=list(strides),
                             window_dilation=list(dilations))
        ctx.set_output(0, b.convolution(g, flipped, window, conv_labels(n)))


@register_xla_op("Conv2DBackpropFilter")
class Conv2DBackpropFilter(XlaOpKernel):
    """Inputs (input [N, H, W, C], cotangent [N, OH, OW, O]) -> [KH, KW, C, O]
    (and the same with a depth dim for Conv3D)."""

    def compile(self, ctx):
        b, (x, g) = ctx.builder, ctx.inputs
        require_float(x)
        fshape = tuple(ctx.attr("filter_shape"))
        n = len(fshape) - 2
        ks, sizes = fshape[:n], x.shape.dims[1:-1]
        strides, dilations, pads = _conv_geometry(ctx, sizes, ks)
        # dw[k, c, o] = sum_{n, p} x[n, p s + k d - pl, c] g[n, p, o]: a convolution
        # over the batch (as features) whose window is g, dilated by the stride.
        padding = []
        for size, k, s, d, (pl, _), op in zip(sizes, ks, strides, dilations, pads,
                                              g.shape.dims[1:-1]):
            padding.append((pl, (k - 1) * d + (op - 1) * s + 1 - size - pl))
        spatial = list(range(1, n + 1))
        lhs = b.transpose(x, [n + 1, *spatial, 0])     # [C, spatial..., N]: C as the batch
        rhs = b.transpose(g, [*spatial, 0, n + 1])     # [spatial..., N, O]: N contracted
        window = make_window(list(g.shape.dims[1:-1]), strides=list(dilations),
                             padding=padding, window_dilation=list(strides))
        out = b.convolution(lhs, rhs, window, conv_labels(n))   # [C, K..., O]
        ctx.set_output(0, b.transpose(out, [*spatial, 0, n + 1]))


@register_xla_op("Conv2DTranspose")
class Conv2DTranspose(Conv2DBackpropInput):
    """tf.nn.conv2d_transpose: Conv2DBackpropInput as a forward op (it has a gradient,
    grads_nn.py). Inputs (x [N, H, W, O], filter [KH, KW, C, O]) -> input_shape."""


# TF's names of the Conv3D gradients; the kernels above are rank-generic.
register_xla_op("Conv3DBackpropInputV2")(type("Conv3DBackpropInputV2",
                                              (Conv2DBackpropInput,), {}))
register_xla_op("Conv3DBackpropFilterV2")(type("Conv3DBackpropFilterV2",
                                               (Conv2DBackpropFilter,), {}))


@register_xla_op("MaxPoolGrad")
class MaxPoolGrad(XlaOpKernel):
    """Inputs (pooled input, cotangent of the pool): each window's cotangent is added
    to the first position of its maximum."""

    def compile(self, ctx):
        b, (x, g) = ctx.builder, ctx.inputs
        etype = x.shape.element_type
        window = pool_window(*pool_geometry(ctx, x.shape.dims, x.shape.rank - 2))
        sel = b.sub_builder(f"select_ge_{etype}")
        lhs = sel.parameter(Shape.scalar(etype), "lhs")
        rhs = sel.parameter(Shape.scalar(etype), "rhs")
        select = sel.build(sel.compare(lhs, rhs, "GE"))
        adder = b.scalar_computation(f"add_{etype}", "add", etype)
        ctx.set_output(0, b.select_and_scatter(x, g, b.constant(0, etype), window,
                                               select, adder))


@register_xla_op("AvgPoolGrad")
class AvgPoolGrad(XlaOpKernel):
    """Input (cotangent of the pool) -> cotangent of an input of `input_shape`."""

    def compile(self, ctx):
        b, g = ctx.builder, ctx.input(0)
        etype = require_float(g)
        dims = tuple(ctx.attr("input_shape"))
        ks, ss, pads = pool_geometry(ctx, dims, len(dims) - 2)
        add = b.scalar_computation(f"add_{etype}", "add", etype)
        zero = b.constant(0, etype)
        counts = b.reduce_window(full(b, 1, etype, dims), zero, pool_window(ks, ss, pads),
                                 to_apply=add)
        share = b.divide(g, counts)
        # dx[i] = sum of the shares of the windows covering i: the transpose of
        # the window sum, like a convolution's input gradient with a ones filter.
        padding = []
        for size, k, s, (pl, _), o in zip(dims[1:-1], ks, ss, pads, g.shape.dims[1:-1]):
            padding.append((k - 1 - pl, size + pl - (o - 1) * s - 1))
        backward = pool_window(ks, (1,) * len(ks), padding, base_dilation=ss)
        ctx.set_output(0, b.reduce_window(share, zero, backward, to_apply=add))


register_xla_op("MaxPool3DGrad")(type("MaxPool3DGrad", (MaxPoolGrad,), {}))
register_xla_op("AvgPool3DGrad")(type("AvgPool3DGrad", (AvgPoolGrad,), {}))


register_no_gradient("Trigamma", "the derivative of trigamma (polygamma(2, x)) is not "
                                 "implemented")
for _op in ("StridedSliceGrad", "GatherGrad", "Conv2DBackpropInput", "Conv2DBackpropFilter",
            "MaxPoolGrad", "AvgPoolGrad", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
            "MaxPool3DGrad", "AvgPool3DGrad"):
    register_no_gradient(_op, "a gradient-only kernel (second-order gradients through it "
                              "are not supported)")
