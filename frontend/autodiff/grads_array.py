"""Gradients of reductions, shape ops and indexing.

Movement ops move the cotangent back (reshape, transpose by the inverse
permutation, slice <-> pad, concat <-> split); reductions broadcast it back
over the reduced axes; gathers and strided slices scatter it, with
repeated indices adding up.
"""
from __future__ import annotations

import math

from .. import ops
from ..kernels.common import count, normalize_axis
from .registry import register_gradient
from .util import expand_to_input, reduction_axes, unbroadcast


# --- reductions ------------------------------------------------------------------------

@register_gradient("Sum")
def _sum_grad(node, grads):
    return [expand_to_input(node, grads[0])]


@register_gradient("Mean")
def _mean_grad(node, grads):
    n = count(node.inputs[0].shape, reduction_axes(node))
    return [expand_to_input(node, grads[0]) / float(max(n, 1))]


@register_gradient("Prod")
def _prod_grad(node, grads):
    # d prod / d x_i is the product of the other elements. With no zero among the
    # reduced elements that is prod / x_i; with one zero, only the zero's own
    # derivative is non-zero (the product of the rest); with two or more, none is.
    # The product of the non-zero elements gives all three cases without 0 / 0.
    x = node.inputs[0]
    axes = reduction_axes(node)
    is_zero = ops.equal(x, ops.zeros_like(x))
    nonzero = ops.where(is_zero, ops.ones_like(x), x)
    rest = ops.reduce_prod(nonzero, axes, keepdims=True)
    zeros = ops.reduce_sum(ops.cast(is_zero, x.dtype), axes, keepdims=True)
    others = ops.where(ops.equal(zeros, ops.zeros_like(zeros)), rest / nonzero,
                       ops.where(ops.logical_and(is_zero, ops.equal(zeros, ops.ones_like(zeros))),
                                 rest + ops.zeros_like(x), ops.zeros_like(x)))
    return [expand_to_input(node, grads[0]) * others]


def _extremum_grad(node, grads):
    # The cotangent is shared equally by the elements that attain the extremum.
    x = node.inputs[0]
    hit = ops.cast(ops.equal(x, expand_to_input(node, node.outputs[0])), x.dtype)
    ties = ops.reduce_sum(hit, reduction_axes(node), keepdims=True)
    return [expand_to_input(node, grads[0]) * hit / ties]


register_gradient("Max")(_extremum_grad)
register_gradient("Min")(_extremum_grad)


@register_gradient("Cumsum")
def _cumsum_grad(node, grads):
    a = node.attrs
    return [ops.cumsum(grads[0], a.get("axis", 0), exclusive=a.get("exclusive", False),
                       reverse=not a.get("reverse", False))]


# --- shape ops -------------------------------------------------------------------------

def _reshape_back(node, grads):
    return [ops.reshape(grads[0], node.inputs[0].shape)]


for _op in ("Reshape", "ExpandDims", "Squeeze"):
    register_gradient(_op)(_reshape_back)


@register_gradient("Transpose")
def _transpose_grad(node, grads):
    rank = node.inputs[0].ndim
    perm = node.attrs.get("perm")
    perm = list(reversed(range(rank))) if perm is None else [p % rank for p in perm]
    inverse = [0] * rank
    for i, p in enumerate(perm):
        inverse[p] = i
    return [ops.transpose(grads[0], inverse)]


@register_gradient("BroadcastTo")
def _broadcast_to_grad(node, grads):
    return [unbroadcast(grads[0], node.inputs[0].shape)]


@register_gradient("ConcatV2")
def _concat_grad(node, grads):
    axis = normalize_axis(node.attrs["axis"], node.outputs[0].ndim)
    sizes = [t.shape[axis] for t in node.inputs]
    if len(sizes) == 1:
        return [grads[0]]
    return ops.split(grads[0], sizes, axis)


@register_gradient("Split")
def _split_grad(node, grads):
    return [ops.concat(grads, node.attrs.get("axis", 0))]


@register_gradient("Slice")
def _slice_grad(node, grads):
    x, g = node.inputs[0], grads[0]
    begin = node.attrs["begin"]
    return [ops.pad(g, [(b, n - b - s) for b, s, n in zip(begin, g.shape, x.shape)])]


@register_gradient("Pad")
def _pad_grad(node, grads):
    x = node.inputs[0]
    begin = [p[0] for p in node.attrs["paddings"]]
    return [ops.slice(grads[0], begin, x.shape)]


@register_gradient("Tile")
def _tile_grad(node, grads):
    # [m0*d0, m1*d1] -> [m0, d0, m1, d1], summed over the m's
    x = node.inputs[0]
    multiples = [int(m) for m in node.attrs["multiples"]]
    wide = [v for m, d in zip(multiples, x.shape) for v in (m, d)]
    if math.prod(wide) == 0:
        return [ops.zeros_like(x)]
    g = ops.reshape(grads[0], wide)
    return [ops.reduce_sum(g, list(range(0, 2 * x.ndim, 2)))]


# --- indexing ----------------------------------------------------------------------------

@register_gradient("StridedSlice")
def _strided_slice_grad(node, grads):
    x = node.inputs[0]
    return [ops.apply("StridedSliceGrad", [grads[0]], index=node.attrs["index"],
                      shape=tuple(x.shape))]


@register_gradient("GatherV2")
def _gather_grad(node, grads):
    params, indices = node.inputs
    return [ops.apply("GatherGrad", [grads[0], indices], axis=node.attrs.get("axis", 0),
                      shape=tuple(params.shape)), None]


@register_gradient("GatherNd")
def _gather_nd_grad(node, grads):
    params, indices = node.inputs
    nb = node.attrs.get("batch_dims", 0)
    return [ops.apply("TensorScatterNd", [ops.zeros_like(params), indices, grads[0]],
                      mode="add", batch_dims=nb), None]


@register_gradient("TensorScatterNd")
def _tensor_scatter_nd_grad(node, grads):
    tensor, indices, updates = node.inputs
    g, out = grads[0], node.outputs[0]
    mode, nb = node.attrs["mode"], node.attrs.get("batch_dims", 0)

    def gather(t):
        return ops.apply("GatherNd", [t, indices], batch_dims=nb)

    def scatter(base, values, how):
        return ops.apply("TensorScatterNd", [base, indices, values], mode=how, batch_dims=nb)

    if mode == "add":
        return [g, None, gather(g)]
    if mode == "update":
        # the overwritten elements of tensor get nothing; each update its element's
        return [scatter(g, ops.zeros_like(updates), "update"), None, gather(g)]
    # max / min: the cotangent is shared by the tensor element and the updates that
    # equal the result (TF's rule)
    x_hit = ops.cast(ops.equal(tensor, out), g.dtype)
    y_hit = ops.cast(ops.equal(updates, gather(out)), g.dtype)
    count = x_hit + scatter(ops.zeros_like(tensor), y_hit, "add")
    share = g / ops.maximum(count, ops.ones_like(count))
    return [share * x_hit, None, gather(share) * y_hit]


@register_gradient("ReverseV2")
def _reverse_grad(node, grads):
    return [ops.reverse(grads[0], list(node.attrs["axis"]))]
