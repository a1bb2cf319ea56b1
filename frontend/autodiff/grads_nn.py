"""Gradients of contractions, softmax and losses, normalization, convolution and
pooling.

The loss gradients use the stable forms: softmax' from the softmax itself,
log_softmax' as g - softmax * sum(g), cross-entropy' as softmax - labels
(which the forward kernel already computes as its second output).
"""
from __future__ import annotations

import numpy as np

from .. import ops
from ..kernels.common import normalize_axes
from ..kernels.linalg import parse_equation
from .registry import register_gradient
from .util import param_as_input_shape, sum_to_param, unbroadcast


# --- contractions -------------------------------------------------------------------------

def _matmul_grads(a, b, g, ta: bool, tb: bool, mm):
    """Cotangents of op(a) @ op(b) where op transposes when ta / tb is set."""
    if not ta and not tb:
        return mm(g, b, False, True), mm(a, g, True, False)
    if ta and not tb:
        return mm(b, g, False, True), mm(a, g, False, False)
    if not ta and tb:
        return mm(g, b, False, False), mm(g, a, True, False)
    return mm(b, g, True, True), mm(g, a, True, True)


@register_gradient("MatMul")
def _matmul_grad(node, grads):
    a, b = node.inputs
    mm = lambda x, y, tx, ty: ops.matmul(x, y, transpose_a=tx, transpose_b=ty)  # noqa: E731
    return list(_matmul_grads(a, b, grads[0], node.attrs.get("transpose_a", False),
                              node.attrs.get("transpose_b", False), mm))


@register_gradient("BatchMatMul")
def _batch_matmul_grad(node, grads):
    x, y = node.inputs
    # the kernel itself: its adj_x/adj_y only transpose (backprop conjugates complex)
    mm = lambda p, q, tp, tq: ops.apply("BatchMatMul", [p, q], adj_x=tp,  # noqa: E731
                                        adj_y=tq)
    gx, gy = _matmul_grads(x, y, grads[0], node.attrs.get("adj_x", False),
                           node.attrs.get("adj_y", False), mm)
    return [unbroadcast(gx, x.shape), unbroadcast(gy, y.shape)]


@register_gradient("Einsum")
def _einsum_grad(node, grads):
    # d/dA of einsum("a,b->o", A, B) is einsum("o,b->a", g, B); letters of A that
    # appear in neither o nor b were summed away, so their cotangent is a broadcast.
    specs, out = parse_equation(node.attrs["equation"], len(node.inputs))
    g, result = grads[0], []
    for i, (spec, x) in enumerate(zip(specs, node.inputs)):
        others = [(s, t) for j, (s, t) in enumerate(zip(specs, node.inputs)) if j != i]
        seen = set(out).union(*(set(s) for s, _ in others))
        target = "".join(c for c in spec if c in seen)
        equation = ",".join([out] + [s for s, _ in others]) + "->" + target
        gx = ops.einsum(equation, g, *[t for _, t in others])
        if target != spec:
            gx = ops.reshape(gx, [n if c in target else 1 for c, n in zip(spec, x.shape)])
            gx = ops.broadcast_to(gx, x.shape)
        result.append(gx)
    return result


@register_gradient("BiasAdd")
def _bias_add_grad(node, grads):
    x = node.inputs[0]
    channel = 1 if node.attrs.get("data_format", "NHWC") == "NCHW" else x.ndim - 1
    return [grads[0], ops.reduce_sum(grads[0], [d for d in range(x.ndim) if d != channel])]


# --- softmax and losses -----------------------------------------------------------------------

@register_gradient("Softmax")
def _softmax_grad(node, grads):
    # s * (g - sum(g * s))
    g, s = grads[0], node.outputs[0]
    axis = node.attrs.get("axis", -1)
    return [s * (g - ops.reduce_sum(g * s, axis, keepdims=True))]


@register_gradient("LogSoftmax")
def _log_softmax_grad(node, grads):
    # g - softmax * sum(g), softmax = exp(log_softmax)
    g, logp = grads[0], node.outputs[0]
    axis = node.attrs.get("axis", -1)
    return [g - ops.exp(logp) * ops.reduce_sum(g, axis, keepdims=True)]


@register_gradient("SoftmaxCrossEntropyWithLogits")
def _softmax_xent_grad(node, grads):
    # loss = -sum(labels * log_softmax(logits)): d/dlogits = softmax - labels (output 1),
    # d/dlabels = -log_softmax. The second output (backprop) is treated as a constant.
    logits = node.inputs[0]
    g = ops.expand_dims(grads[0], -1)
    return [g * node.outputs[1], -g * ops.log_softmax(logits)]


@register_gradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent_grad(node, grads):
    return [ops.expand_dims(grads[0], -1) * node.outputs[1], None]


# --- normalization -----------------------------------------------------------------------------

def _norm_setup(node):
    x = node.inputs[0]
    axes = normalize_axes(node.attrs.get("axis", -1), x.ndim)
    n = 1
    for a in axes:
        n *= x.shape[a]
    mean = lambda t: ops.reduce_sum(t, axes, keepdims=True) / float(max(n, 1))  # noqa: E731
    return x, axes, mean


@register_gradient("LayerNorm")
def _layer_norm_grad(node, grads):
    # xhat = (x - mu) * r, r = rsqrt(var + eps); out = xhat * gamma + beta
    # dx = r * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * gamma
    x, axes, mean = _norm_setup(node)
    _, gamma, beta = node.inputs
    g = grads[0]
    centered = x - mean(x)
    r = ops.rsqrt(mean(centered * centered) + node.attrs.get("epsilon", 1e-5))
    xhat = centered * r
    dxhat = g * param_as_input_shape(gamma, x.shape, axes)
    dx = r * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    return [dx, sum_to_param(g * xhat, gamma.shape, x.shape, axes),
            sum_to_param(g, beta.shape, x.shape, axes)]


@register_gradient("RMSNorm")
def _rms_norm_grad(node, grads):
    # out = x * r * gamma, r = rsqrt(mean(x^2) + eps); dx = r * (dy - x r^2 mean(dy x))
    x, axes, mean = _norm_setup(node)
    gamma = node.inputs[1]
    g = grads[0]
    r = ops.rsqrt(mean(x * x) + node.attrs.get("epsilon", 1e-6))
    dy = g * param_as_input_shape(gamma, x.shape, axes)
    dx = r * (dy - x * r * r * mean(dy * x))
    return [dx, sum_to_param(g * x * r, gamma.shape, x.shape, axes)]


# --- convolution and pooling ---------------------------------------------------------------------

_CONV_ATTRS = ("strides", "padding", "dilations", "data_format")
_POOL_ATTRS = ("ksize", "strides", "padding", "data_format")


def _conv_grads(node, grads, backprop_input: str, backprop_filter: str):
    x, w = node.inputs
    attrs = {k: node.attrs[k] for k in _CONV_ATTRS if k in node.attrs}
    g = grads[0]
    groups = x.shape[-1] // w.shape[-2]
    if groups == 1:
        return [ops.apply(backprop_input, [g, w], input_shape=tuple(x.shape), **attrs),
                ops.apply(backprop_filter, [x, g], filter_shape=tuple(w.shape), **attrs)]
    # A grouped conv (input channels in G groups of Cg, outputs in G groups of Og) is the
    # dense conv with the block-diagonal filter W[k, h*Cg + c, o] = w[k, c, o] * (h == o
    # // Og); its gradients are the dense conv's, the filter's read back from the blocks
    # (as the depthwise gradient below does: G times the work of a grouped kernel).
    *ks, cg, out = w.shape
    spatial = len(ks)
    mask = (np.arange(groups)[:, None] == np.arange(out)[None, :] // (out // groups))
    mask = ops.constant(mask.astype(w.dtype).reshape((groups, 1, out)))
    dense_shape = (*ks, groups * cg, out)
    dense = ops.reshape(ops.expand_dims(w, spatial) * mask, dense_shape)
    dx = ops.apply(backprop_input, [g, dense], input_shape=tuple(x.shape), **attrs)
    d_dense = ops.apply(backprop_filter, [x, g], filter_shape=dense_shape, **attrs)
    dw = ops.reduce_sum(ops.reshape(d_dense, (*ks, groups, cg, out)) * mask, spatial)
    return [dx, dw]


@register_gradient("Conv2D")
def _conv2d_grad(node, grads):
    return _conv_grads(node, grads, "Conv2DBackpropInput", "Conv2DBackpropFilter")


@register_gradient("Conv3D")
def _conv3d_grad(node, grads):
    return _conv_grads(node, grads, "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2")


@register_gradient("DepthwiseConv2dNative")
def _depthwise_conv2d_grad(node, grads):
    # A depthwise conv is the dense Conv2D with the block-diagonal filter
    # W[k, c', c*M + m] = w[k, c, m] * (c' == c); its gradients are those of the
    # dense conv, the filter's read back from the diagonal. C times the work of a
    # dedicated kernel, which is fine for the small channel counts it is used on.
    x, w = node.inputs
    kh, kw, c, m = w.shape
    eye = ops.constant(np.eye(c, dtype=w.dtype).reshape(1, 1, c, c, 1))
    dense = ops.reshape(ops.expand_dims(w, 2) * eye, (kh, kw, c, c * m))
    attrs = {k: node.attrs[k] for k in _CONV_ATTRS if k in node.attrs}
    g = grads[0]
    dx = ops.apply("Conv2DBackpropInput", [g, dense], input_shape=tuple(x.shape), **attrs)
    d_dense = ops.apply("Conv2DBackpropFilter", [x, g], filter_shape=(kh, kw, c, c * m),
                        **attrs)
    dw = ops.reduce_sum(ops.reshape(d_dense, (kh, kw, c, c, m)) * eye, 2)
    return [dx, dw]


@register_gradient("Conv2DTranspose")
def _conv2d_transpose_grad(node, grads):
    # y = A_w^T x where A_w is conv2d by w: dx = A_w g = conv2d(g, w), and w's cotangent
    # is that of <conv2d(g, w), x>: the filter gradient of conv2d(g, .) against x.
    x, w = node.inputs
    attrs = {k: node.attrs[k] for k in _CONV_ATTRS if k in node.attrs}
    g = grads[0]
    return [ops.apply("Conv2D", [g, w], **attrs),
            ops.apply("Conv2DBackpropFilter", [g, x], filter_shape=tuple(w.shape), **attrs)]


def _pool_attrs(node):
    return {k: node.attrs[k] for k in _POOL_ATTRS if k in node.attrs}


@register_gradient("MaxPool")
def _max_pool_grad(node, grads):
    return [ops.apply("MaxPoolGrad", [node.inputs[0], grads[0]], **_pool_attrs(node))]


@register_gradient("MaxPool3D")
def _max_pool3d_grad(node, grads):
    return [ops.apply("MaxPool3DGrad", [node.inputs[0], grads[0]], **_pool_attrs(node))]


@register_gradient("AvgPool")
def _avg_pool_grad(node, grads):
    return [ops.apply("AvgPoolGrad", [grads[0]], input_shape=tuple(node.inputs[0].shape),
                      **_pool_attrs(node))]


@register_gradient("AvgPool3D")
def _avg_pool3d_grad(node, grads):
    return [ops.apply("AvgPool3DGrad", [grads[0]], input_shape=tuple(node.inputs[0].shape),
                      **_pool_attrs(node))]
