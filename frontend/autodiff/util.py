"""Small helpers the gradient functions share (built from frontend ops)."""
from __future__ import annotations

from .. import ops
from ..kernels.common import keepdims_shape, normalize_axes


def unbroadcast(g, shape):
    """`g` summed back to `shape`, undoing numpy broadcasting (the gradient of a
    broadcast is a sum over the dims it stretched)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = list(range(lead)) + [lead + i for i, n in enumerate(shape)
                                if n == 1 and g.shape[lead + i] != 1]
    if axes:
        g = ops.reduce_sum(g, axes)
    return g if g.shape == shape else ops.reshape(g, shape)


def reduction_axes(node) -> tuple[int, ...]:
    """The axes a reduction node reduced, non-negative and sorted."""
    return normalize_axes(node.attrs.get("axis"), node.inputs[0].ndim)


def expand_to_input(node, g):
    """The cotangent of a reduction's result broadcast back over the reduced axes."""
    x = node.inputs[0]
    axes = reduction_axes(node)
    if not node.attrs.get("keepdims", False):
        g = ops.reshape(g, keepdims_shape(x.shape, axes))
    return ops.broadcast_to(g, x.shape)


def sum_to_param(g, param_shape, x_shape, axes):
    """Cotangent of a normalization parameter: a per-feature parameter (shape of the
    normalized dims of x) sums over the other dims; otherwise undo broadcasting."""
    if tuple(param_shape) == tuple(x_shape[a] for a in axes):
        others = [d for d in range(len(x_shape)) if d not in axes]
        return ops.reduce_sum(g, others) if others else g
    return unbroadcast(g, param_shape)


def param_as_input_shape(p, x_shape, axes):
    """A normalization parameter broadcastable against x (the kernel's rule)."""
    if tuple(p.shape) == tuple(x_shape[a] for a in axes):
        return ops.reshape(p, [n if d in axes else 1 for d, n in enumerate(x_shape)])
    return p
