"""Convolution and pooling kernels (NHWC): Conv2D, DepthwiseConv2dNative, MaxPool,
AvgPool.

Attributes follow TensorFlow: `strides`, `dilations` and `ksize` as an int,
a pair (h, w) or four values [1, h, w, 1]; `padding` "SAME", "VALID" or
explicit ((top, bottom), (left, right)). SAME pads so the output has
ceil(in / stride) positions, the odd pixel going below/right, as TF does.
"""
from __future__ import annotations

import math

from ...hlo.builder import make_window

from ..registry import XlaOpKernel, register_xla_op
from .common import full, lowest, require_float, require_same_types


def spatial_pair(value, what: str) -> tuple[int, int]:
    """(h, w) from an int, a pair or an NHWC quadruple [1, h, w, 1]."""
    if isinstance(value, int):
        return value, value
    value = [int(v) for v in value]
    if len(value) == 2:
        return value[0], value[1]
    if len(value) == 4 and value[0] == 1 and value[3] == 1:
        return value[1], value[2]
    raise ValueError(f"{what} must be an int, (h, w) or [1, h, w, 1], got {value}")


def spatial_padding(padding, sizes, windows, strides, dilations) -> list[tuple[int, int]]:
    """Per spatial dim (low, high) padding for "SAME", "VALID" or explicit pairs."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(sizes)
        if mode != "SAME":
            raise ValueError(f"padding must be 'SAME', 'VALID' or pairs, got {padding!r}")
        result = []
        for n, k, s, d in zip(sizes, windows, strides, dilations):
            extent = (k - 1) * d + 1
            total = max((math.ceil(n / s) - 1) * s + extent - n, 0)
            result.append((total // 2, total - total // 2))
        return result
    pairs = [tuple(int(v) for v in p) for p in padding]
    if len(pairs) == 4:          # TF's explicit NHWC form: [[0,0],[t,b],[l,r],[0,0]]
        pairs = pairs[1:3]
    if len(pairs) != len(sizes) or any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise ValueError(f"explicit padding needs a non-negative (low, high) pair per "
                         f"spatial dim, got {padding}")
    return pairs


def _check_nhwc(ctx, x, what: str = "input") -> None:
    if x.shape.rank != 4:
        raise ValueError(f"{what} must be NHWC (rank 4), got {list(x.shape.dims)}")
    if ctx.attr("data_format", "NHWC") != "NHWC":
        raise ValueError("only data_format='NHWC' is supported")


def _conv(ctx, x, w, groups: int):
    """convolution of NHWC x with HWIO w: window, padding and output checks."""
    n, h, wd, c = x.shape.dims
    kh, kw, _, _ = w.shape.dims
    strides = spatial_pair(ctx.attr("strides", 1), "strides")
    dilations = spatial_pair(ctx.attr("dilations", 1), "dilations")
    pads = spatial_padding(ctx.attr("padding", "VALID"), (h, wd), (kh, kw), strides, dilations)
    window = make_window([kh, kw], strides=list(strides), padding=pads,
                         window_dilation=list(dilations))
    return ctx.builder.convolution(x, w, window, "b01f_01io->b01f", feature_group_count=groups)


@register_xla_op("Conv2D")
class Conv2D(XlaOpKernel):
    """input [N, H, W, C] * filter [KH, KW, C / groups, O] -> [N, OH, OW, O]."""

    def compile(self, ctx):
        x, w = ctx.inputs
        require_same_types([x, w])
        _check_nhwc(ctx, x)
        if w.shape.rank != 4:
            raise ValueError(f"filter must be [KH, KW, in, out], got {list(w.shape.dims)}")
        c, ci = x.shape.dims[3], w.shape.dims[2]
        if ci == 0 or c % ci or w.shape.dims[3] % (c // ci):
            raise ValueError(f"input channels {c} do not fit filter in-channels {ci} "
                             f"(filter {list(w.shape.dims)})")
        ctx.set_output(0, _conv(ctx, x, w, c // ci))


@register_xla_op("DepthwiseConv2dNative")
class DepthwiseConv2dNative(XlaOpKernel):
    """input [N, H, W, C] * filter [KH, KW, C, M] -> [N, OH, OW, C*M]; channel c*M+m is
    input channel c filtered by filter[..., c, m]."""

    def compile(self, ctx):
        x, w = ctx.inputs
        require_same_types([x, w])
        _check_nhwc(ctx, x)
        kh, kw, c, m = w.shape.dims if w.shape.rank == 4 else (0, 0, -1, 0)
        if c != x.shape.dims[3]:
            raise ValueError(f"filter {list(w.shape.dims)} must be [KH, KW, "
                             f"{x.shape.dims[3]}, multiplier]")
        # One group per input channel: the filter becomes [KH, KW, 1, C*M].
        grouped = ctx.builder.reshape(w, [kh, kw, 1, c * m])
        ctx.set_output(0, _conv(ctx, x, grouped, c))


def _pool_window(ctx, x):
    """The NHWC window of a pooling op and its padding."""
    _check_nhwc(ctx, x)
    kh, kw = spatial_pair(ctx.attr("ksize"), "ksize")
    sh, sw = spatial_pair(ctx.attr("strides", (kh, kw)), "strides")
    _, h, w, _ = x.shape.dims
    pads = spatial_padding(ctx.attr("padding", "VALID"), (h, w), (kh, kw), (sh, sw), (1, 1))
    return make_window([1, kh, kw, 1], strides=[1, sh, sw, 1],
                       padding=[(0, 0), *pads, (0, 0)]), (kh, kw), pads


@register_xla_op("MaxPool")
class MaxPool(XlaOpKernel):
    """Max over each window; padding never wins (it is -inf)."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        etype = x.shape.element_type
        window, _, _ = _pool_window(ctx, x)
        reducer = b.scalar_computation(f"maximum_{etype}", "maximum", etype)
        ctx.set_output(0, b.reduce_window(x, b.constant(lowest(etype), etype), window,
                                          to_apply=reducer))


@register_xla_op("AvgPool")
class AvgPool(XlaOpKernel):
    """Mean over each window, counting only real (unpadded) pixels, as TF does."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        etype = require_float(x)
        window, (kh, kw), pads = _pool_window(ctx, x)
        reducer = b.scalar_computation(f"add_{etype}", "add", etype)
        zero = b.constant(0, etype)
        total = b.reduce_window(x, zero, window, to_apply=reducer)
        if all(p == (0, 0) for p in pads):
            counts = full(b, kh * kw, etype, total.shape.dims)
        else:
            # The same window over ones counts the real pixels of each window.
            ones = full(b, 1, etype, x.shape.dims)
            counts = b.reduce_window(ones, zero, window, to_apply=reducer)
        ctx.set_output(0, b.divide(total, counts))
