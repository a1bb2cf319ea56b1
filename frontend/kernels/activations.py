"""Activation-function kernels: ReLU family, ELU/SELU, GELU, SiLU, softplus.

Each is a few elementwise HLO ops on a floating-point input; written so that
the fused CPU kernel stays free of overflow (softplus never calls exp on a
large positive number).
"""
from __future__ import annotations

import math

from ..registry import XlaOpKernel, register_xla_op
from .common import require_float

SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805


@register_xla_op("Relu")
class Relu(XlaOpKernel):
    """max(x, 0)."""

    def compile(self, ctx):
        x = ctx.input(0)
        ctx.set_output(0, ctx.builder.maximum(x, ctx.zeros_like(x)))


@register_xla_op("Relu6")
class Relu6(XlaOpKernel):
    """min(max(x, 0), 6)."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        ctx.set_output(0, b.minimum(b.maximum(x, ctx.zeros_like(x)), ctx.full_like(6, x)))


@register_xla_op("LeakyRelu")
class LeakyRelu(XlaOpKernel):
    """x where x > 0, else alpha * x (attribute alpha, default 0.2 as in TensorFlow)."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        require_float(x)
        alpha = ctx.attr("alpha", 0.2)
        positive = b.compare(x, ctx.zeros_like(x), "GT")
        ctx.set_output(0, b.select(positive, x, b.multiply(ctx.full_like(alpha, x), x)))


def _elu(ctx, x, alpha: float):
    b = ctx.builder
    positive = b.compare(x, ctx.zeros_like(x), "GT")
    scaled = b.exponential_minus_one(x)
    if alpha != 1.0:
        scaled = b.multiply(ctx.full_like(alpha, x), scaled)
    return b.select(positive, x, scaled)


@register_xla_op("Elu")
class Elu(XlaOpKernel):
    """x where x > 0, else expm1(x)."""

    def compile(self, ctx):
        require_float(ctx.input(0))
        ctx.set_output(0, _elu(ctx, ctx.input(0), 1.0))


@register_xla_op("Selu")
class Selu(XlaOpKernel):
    """scale * (x where x > 0, else alpha * expm1(x)), the self-normalizing constants."""

    def compile(self, ctx):
        x = ctx.input(0)
        require_float(x)
        ctx.set_output(0, ctx.builder.multiply(ctx.full_like(SELU_SCALE, x),
                                               _elu(ctx, x, SELU_ALPHA)))


@register_xla_op("Gelu")
class Gelu(XlaOpKernel):
    """Exact: x/2 * (1 + erf(x / sqrt 2)); approximate=True: the tanh form."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        require_float(x)
        half_x = b.multiply(ctx.full_like(0.5, x), x)
        one = ctx.full_like(1, x)
        if ctx.attr("approximate", False):
            # tanh(sqrt(2/pi) * (x + 0.044715 x^3))
            cube = b.multiply(b.multiply(x, x), x)
            inner = b.add(x, b.multiply(ctx.full_like(0.044715, x), cube))
            t = b.tanh(b.multiply(ctx.full_like(math.sqrt(2 / math.pi), x), inner))
        else:
            t = b.erf(b.multiply(x, ctx.full_like(1 / math.sqrt(2), x)))
        ctx.set_output(0, b.multiply(half_x, b.add(one, t)))


@register_xla_op("Silu")
class Silu(XlaOpKernel):
    """x * sigmoid(beta * x) (also called swish; attribute beta, default 1)."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        require_float(x)
        beta = float(ctx.attr("beta", 1.0))
        scaled = x if beta == 1.0 else b.multiply(ctx.full_like(beta, x), x)
        ctx.set_output(0, b.multiply(x, b.logistic(scaled)))


@register_xla_op("Softplus")
class Softplus(XlaOpKernel):
    """log(1 + exp(x)) computed as max(x, 0) + log1p(exp(-|x|)): no overflow."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        require_float(x)
        tail = b.log_plus_one(b.exp(b.negate(b.abs(x))))
        ctx.set_output(0, b.add(b.maximum(x, ctx.zeros_like(x)), tail))
