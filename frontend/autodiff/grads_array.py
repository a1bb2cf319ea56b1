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


@register_gradient("Cumprod")
def _cumprod_grad(node, grads):
    # TF's formula: the reverse cumsum of g * out, divided by x (inputs without zeros)
    x, out = node.inputs[0], node.outputs[0]
    a = node.attrs
    summed = ops.cumsum(grads[0] * out, a.get("axis", 0), exclusive=a.get("exclusive", False),
                        reverse=not a.get("reverse", False))
    return [summed / x]


@register_gradient("CumulativeLogsumexp")
def _cumulative_logsumexp_grad(node, grads):
    # d out_j / d x_i = exp(x_i - out_j) for the i that out_j accumulates, so the
    # cotangent of x_i is exp(x_i) * (reverse running sum of g_j exp(-out_j)), taken in
    # log space by the sign of g (TF's formula): no overflow.
    x, out, g = node.inputs[0], node.outputs[0], grads[0]
    a = node.attrs
    zero = ops.zeros_like(g)

    def part(h):
        logs = ops.log(ops.where(h > 0, h, zero)) - out
        return ops.exp(ops.cumulative_logsumexp(logs, a.get("axis", 0),
                                                exclusive=a.get("exclusive", False),
                                                reverse=not a.get("reverse", False)) + x)
    return [part(g) - part(-g)]


def _along_last(t, axis):
    """t with `axis` moved last, and the permutation that moves it back."""
    perm = [d for d in range(t.ndim) if d != axis] + [axis]
    back = [0] * t.ndim
    for i, p in enumerate(perm):
        back[p] = i
    return ops.transpose(t, perm), back


@register_gradient("Sort")
def _sort_grad(node, grads):
    # out[..., j] = x[..., idx[..., j]]: the cotangent goes back to position idx[..., j]
    x = node.inputs[0]
    g, idx = grads[0], node.outputs[1]
    if g is None:
        return [None]
    axis = normalize_axis(node.attrs.get("axis", -1), x.ndim)
    g_last, back = _along_last(g, axis)
    idx_last, _ = _along_last(idx, axis)
    lead = idx_last.ndim - 1
    nd = ops.expand_dims(idx_last, -1)
    back_scatter = ops.apply("TensorScatterNd", [ops.zeros_like(g_last), nd, g_last],
                             mode="add", batch_dims=lead)
    return [ops.transpose(back_scatter, back)]


@register_gradient("UnsortedSegment")
def _unsorted_segment_grad(node, grads):
    data, ids = node.inputs
    g, out = grads[0], node.outputs[0]
    n = node.attrs["num_segments"]
    inside = ops.logical_and(ids >= 0, ids < n)
    safe = ops.where(inside, ids, ops.zeros_like(ids))

    def spread(t):        # t[ids] with rows of dropped ids zero, data's shape
        rows = ops.gather(t, safe)
        mask = ops.reshape(inside, tuple(ids.shape) + (1,) * (data.ndim - ids.ndim))
        return ops.where(mask, rows, ops.zeros_like(rows))

    if node.attrs.get("mode", "sum") == "sum":
        return [spread(g), None]
    # max / min: shared by the rows that attain the extremum (TF's rule)
    hit = ops.cast(ops.equal(data, spread(out)), g.dtype)
    count = ops.math.unsorted_segment_sum(hit, ids, n)
    return [spread(g / ops.maximum(count, ops.ones_like(count))) * hit, None]
