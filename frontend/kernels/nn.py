"""Neural-network kernels: Softmax, LogSoftmax, BiasAdd, LayerNorm, RMSNorm and the
softmax cross-entropy losses.

Softmax-like kernels shift by the row maximum before `exp` (no overflow) and
are written as max-reduce, subtract, exp, sum-reduce, divide: exactly the
pattern the row fusion pass keeps in one kernel. Their sums of f16/bf16 values
accumulate in f32 (common.sum_wide), as TF's XLA kernels do.
"""
from __future__ import annotations

from ...hlo import Shape

from ..registry import XlaOpKernel, register_xla_op
from .common import (broadcast_to, count, expand_reduced, normalize_axes, normalize_axis,
                     reduce, require_float, require_same_types, sum_wide)


def shifted_logits(b, x, axis: int):
    """x - max(x, axis), broadcast back: the stable argument of exp."""
    dims = x.shape.dims
    m = reduce(b, x, "maximum", -float("inf"), [axis])
    return b.subtract(x, expand_reduced(b, m, dims, [axis]))


def log_softmax(b, x, axis: int):
    shifted = shifted_logits(b, x, axis)
    total = sum_wide(b, b.exp(shifted), [axis])
    return b.subtract(shifted, expand_reduced(b, b.log(total), x.shape.dims, [axis]))


@register_xla_op("Softmax")
class Softmax(XlaOpKernel):
    """exp(x - max) / sum(exp(x - max)) along `axis` (default -1)."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        require_float(x)
        axis = normalize_axis(ctx.attr("axis", -1), x.shape.rank)
        e = b.exp(shifted_logits(b, x, axis))
        total = sum_wide(b, e, [axis])
        ctx.set_output(0, b.divide(e, expand_reduced(b, total, x.shape.dims, [axis])))


@register_xla_op("LogSoftmax")
class LogSoftmax(XlaOpKernel):
    """(x - max) - log(sum(exp(x - max))) along `axis`."""

    def compile(self, ctx):
        x = ctx.input(0)
        require_float(x)
        axis = normalize_axis(ctx.attr("axis", -1), x.shape.rank)
        ctx.set_output(0, log_softmax(ctx.builder, x, axis))


@register_xla_op("BiasAdd")
class BiasAdd(XlaOpKernel):
    """x + bias along the channel dim: the last (NHWC) or dim 1 (data_format="NCHW")."""

    def compile(self, ctx):
        b = ctx.builder
        x, bias = ctx.inputs
        require_same_types([x, bias])
        dims = x.shape.dims
        if bias.shape.rank != 1 or len(dims) < 2:
            raise ValueError(f"bias must be 1-D and x at least 2-D, got {list(bias.shape.dims)} "
                             f"and {list(dims)}")
        channel = 1 if ctx.attr("data_format", "NHWC") == "NCHW" else len(dims) - 1
        if bias.shape.dims[0] != dims[channel]:
            raise ValueError(f"bias size {bias.shape.dims[0]} does not match channel dim "
                             f"{channel} of size {dims[channel]}")
        ctx.set_output(0, b.add(x, b.broadcast(bias, dims, dims=[channel])))


def _normalizer_inputs(ctx, n_params: int):
    """x, its normalized axes, and the parameters broadcast to x's shape."""
    b, x = ctx.builder, ctx.input(0)
    require_float(x)
    require_same_types(ctx.inputs)
    dims = x.shape.dims
    axes = normalize_axes(ctx.attr("axis", -1), len(dims))
    params = []
    for p in ctx.inputs[1:1 + n_params]:
        pd = tuple(p.shape.dims)
        if pd == tuple(dims[a] for a in axes):
            params.append(b.broadcast(p, dims, dims=list(axes)))
        else:
            params.append(broadcast_to(b, p, dims))
    return b, x, axes, params


def _mean(b, x, axes):
    n = count(x.shape.dims, axes)
    total = sum_wide(b, x, axes)
    return b.divide(total, b.broadcast(b.constant(n, x.shape.element_type), total.shape.dims))


@register_xla_op("LayerNorm")
class LayerNorm(XlaOpKernel):
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over `axis` (inputs x, gamma, beta).

    gamma and beta have the shape of the normalized dims (or broadcast to x)."""

    def compile(self, ctx):
        b, x, axes, (gamma, beta) = _normalizer_inputs(ctx, 2)
        dims = x.shape.dims
        centered = b.subtract(x, expand_reduced(b, _mean(b, x, axes), dims, axes))
        var = _mean(b, b.multiply(centered, centered), axes)
        eps = b.broadcast(ctx.constant(ctx.attr("epsilon", 1e-5), x), var.shape.dims)
        inv = expand_reduced(b, b.rsqrt(b.add(var, eps)), dims, axes)
        ctx.set_output(0, b.add(b.multiply(b.multiply(centered, inv), gamma), beta))


@register_xla_op("RMSNorm")
class RMSNorm(XlaOpKernel):
    """x / sqrt(mean(x^2) + epsilon) * gamma over `axis` (inputs x, gamma)."""

    def compile(self, ctx):
        b, x, axes, (gamma,) = _normalizer_inputs(ctx, 1)
        ms = _mean(b, b.multiply(x, x), axes)
        eps = b.broadcast(ctx.constant(ctx.attr("epsilon", 1e-6), x), ms.shape.dims)
        inv = expand_reduced(b, b.rsqrt(b.add(ms, eps)), x.shape.dims, axes)
        ctx.set_output(0, b.multiply(b.multiply(x, inv), gamma))


def _cross_entropy(ctx, logits, labels):
    """(loss, backprop) of softmax cross-entropy over the last dim, labels a distribution."""
    b = ctx.builder
    axis = logits.shape.rank - 1
    logp = log_softmax(b, logits, axis)
    loss = b.negate(sum_wide(b, b.multiply(labels, logp), [axis]))
    ctx.set_output(0, loss)
    ctx.set_output(1, b.subtract(b.exp(logp), labels))


@register_xla_op("SoftmaxCrossEntropyWithLogits")
class SoftmaxCrossEntropyWithLogits(XlaOpKernel):
    """Inputs (logits, labels) of one shape [..., classes]; outputs loss [...] and
    backprop (softmax - labels), as TensorFlow's op."""

    def compile(self, ctx):
        logits, labels = ctx.inputs
        require_float(logits, "logits")
        require_same_types([logits, labels])
        if logits.shape.rank < 1 or logits.shape.dims != labels.shape.dims:
            raise ValueError(f"logits {list(logits.shape.dims)} and labels "
                             f"{list(labels.shape.dims)} must have one shape [..., classes]")
        _cross_entropy(ctx, logits, labels)


@register_xla_op("SparseSoftmaxCrossEntropyWithLogits")
class SparseSoftmaxCrossEntropyWithLogits(XlaOpKernel):
    """Inputs logits [..., classes] and integer labels [...]; outputs loss [...] and backprop."""

    def compile(self, ctx):
        b = ctx.builder
        logits, labels = ctx.inputs
        require_float(logits, "logits")
        ldims, cdims = labels.shape.dims, logits.shape.dims
        if not labels.shape.dtype.is_integer:
            raise TypeError(f"labels must be integers, got {labels.shape.element_type}")
        if len(cdims) < 1 or tuple(cdims[:-1]) != tuple(ldims):
            raise ValueError(f"labels {list(ldims)} must be logits {list(cdims)} "
                             "without the class dim")
        itype = labels.shape.element_type
        axis = len(cdims) - 1
        classes = b.iota(Shape(itype, cdims), axis)
        hit = b.compare(classes, b.broadcast(labels, cdims, dims=list(range(axis))), "EQ")
        one_hot = b.convert(hit, logits.shape.element_type)
        _cross_entropy(ctx, logits, one_hot)
