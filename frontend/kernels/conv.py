"""Convolution and pooling kernels, channels last: Conv2D, DepthwiseConv2dNative,
MaxPool, AvgPool (NHWC) and Conv3D, MaxPool3D, AvgPool3D (NDHWC).

Attributes follow TensorFlow: `strides`, `dilations` and `ksize` as an int, one
value per spatial dim ((h, w) or (d, h, w)), or one per dim of the input with 1
for batch and channels ([1, h, w, 1], [1, d, h, w, 1]); a single value [k] means
k for every spatial dim (TF's pools accept it); `padding` "SAME", "VALID" or
explicit (low, high) pairs per spatial dim. SAME pads so the output has
ceil(in / stride) positions, the odd pixel going below/right, as TF does.

One kernel class serves both ranks: `SPATIAL` (2 or 3) is its number of spatial
dims and `LAYOUT` the only data_format it takes.
"""
from __future__ import annotations

import math

from ...hlo.builder import make_window

from ..registry import XlaOpKernel, register_xla_op
from .common import accumulation_type, full, lowest, require_float, require_same_types

LAYOUTS = {2: "NHWC", 3: "NDHWC"}


def spatial_tuple(value, what: str, n: int = 2) -> tuple[int, ...]:
    """n spatial values from an int, [k], n values, or n + 2 with 1 for batch/channels."""
    if isinstance(value, int):
        return (value,) * n
    value = [int(v) for v in value]
    if len(value) == 1:
        return (value[0],) * n
    if len(value) == n:
        return tuple(value)
    if len(value) == n + 2 and value[0] == 1 and value[-1] == 1:
        return tuple(value[1:-1])
    form = "(h, w) or [1, h, w, 1]" if n == 2 else "(d, h, w) or [1, d, h, w, 1]"
    raise ValueError(f"{what} must be an int, {form}, got {value}")


def spatial_pair(value, what: str) -> tuple[int, int]:
    """(h, w) from an int, a pair or an NHWC quadruple [1, h, w, 1]."""
    return spatial_tuple(value, what, 2)


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
    if len(pairs) == len(sizes) + 2:   # TF's explicit form: [[0,0],[t,b],[l,r],[0,0]]
        pairs = pairs[1:-1]
    if len(pairs) != len(sizes) or any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise ValueError(f"explicit padding needs a non-negative (low, high) pair per "
                         f"spatial dim, got {padding}")
    return pairs


def conv_labels(n: int) -> str:
    """Channels-last dimension labels of an n-D convolution: b01f_01io->b01f."""
    s = "012"[:n]
    return f"b{s}f_{s}io->b{s}f"


def check_layout(ctx, x, n: int, what: str = "input") -> None:
    layout = LAYOUTS[n]
    if x.shape.rank != n + 2:
        raise ValueError(f"{what} must be {layout} (rank {n + 2}), got {list(x.shape.dims)}")
    if ctx.attr("data_format", layout) != layout:
        raise ValueError(f"only data_format='{layout}' is supported")


def _conv(ctx, x, w, groups: int):
    """convolution of channels-last x with a [K..., I, O] filter w."""
    n = x.shape.rank - 2
    ks = w.shape.dims[:n]
    strides = spatial_tuple(ctx.attr("strides", 1), "strides", n)
    dilations = spatial_tuple(ctx.attr("dilations", 1), "dilations", n)
    pads = spatial_padding(ctx.attr("padding", "VALID"), x.shape.dims[1:-1], ks, strides,
                           dilations)
    window = make_window(list(ks), strides=list(strides), padding=pads,
                         window_dilation=list(dilations))
    return ctx.builder.convolution(x, w, window, conv_labels(n), feature_group_count=groups)


@register_xla_op("Conv2D")
class Conv2D(XlaOpKernel):
    """input [N, H, W, C] * filter [KH, KW, C / groups, O] -> [N, OH, OW, O]."""
    SPATIAL = 2

    def compile(self, ctx):
        x, w = ctx.inputs
        n = self.SPATIAL
        require_same_types([x, w])
        check_layout(ctx, x, n)
        if w.shape.rank != n + 2:
            ks = "KH, KW" if n == 2 else "KD, KH, KW"
            raise ValueError(f"filter must be [{ks}, in, out], got {list(w.shape.dims)}")
        c, ci = x.shape.dims[-1], w.shape.dims[-2]
        if ci == 0 or c % ci or w.shape.dims[-1] % (c // ci):
            raise ValueError(f"input channels {c} do not fit filter in-channels {ci} "
                             f"(filter {list(w.shape.dims)})")
        ctx.set_output(0, _conv(ctx, x, w, c // ci))


@register_xla_op("Conv3D")
class Conv3D(Conv2D):
    """input [N, D, H, W, C] * filter [KD, KH, KW, C / groups, O] -> [N, OD, OH, OW, O]."""
    SPATIAL = 3


@register_xla_op("DepthwiseConv2dNative")
class DepthwiseConv2dNative(XlaOpKernel):
    """input [N, H, W, C] * filter [KH, KW, C, M] -> [N, OH, OW, C*M]; channel c*M+m is
    input channel c filtered by filter[..., c, m]."""

    def compile(self, ctx):
        x, w = ctx.inputs
        require_same_types([x, w])
        check_layout(ctx, x, 2)
        kh, kw, c, m = w.shape.dims if w.shape.rank == 4 else (0, 0, -1, 0)
        if c != x.shape.dims[3]:
            raise ValueError(f"filter {list(w.shape.dims)} must be [KH, KW, "
                             f"{x.shape.dims[3]}, multiplier]")
        # One group per input channel: the filter becomes [KH, KW, 1, C*M].
        grouped = ctx.builder.reshape(w, [kh, kw, 1, c * m])
        ctx.set_output(0, _conv(ctx, x, grouped, c))


def pool_geometry(ctx, dims, n: int):
    """(window sizes, strides, padding) of a pool over n spatial dims of `dims`."""
    ks = spatial_tuple(ctx.attr("ksize"), "ksize", n)
    ss = spatial_tuple(ctx.attr("strides", ks), "strides", n)
    pads = spatial_padding(ctx.attr("padding", "VALID"), dims[1:-1], ks, ss, (1,) * n)
    return ks, ss, pads


def pool_window(ks, ss, pads, base_dilation=None):
    """The channels-last window of a pool: 1 over batch and channels."""
    kw = {} if base_dilation is None else {"base_dilation": [1, *base_dilation, 1]}
    return make_window([1, *ks, 1], strides=[1, *ss, 1], padding=[(0, 0), *pads, (0, 0)],
                       **kw)


def _pool_window(ctx, x, n: int):
    check_layout(ctx, x, n)
    ks, ss, pads = pool_geometry(ctx, x.shape.dims, n)
    return pool_window(ks, ss, pads), ks, pads


@register_xla_op("MaxPool")
class MaxPool(XlaOpKernel):
    """Max over each window; padding never wins (it is -inf)."""
    SPATIAL = 2

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        etype = x.shape.element_type
        window, _, _ = _pool_window(ctx, x, self.SPATIAL)
        reducer = b.scalar_computation(f"maximum_{etype}", "maximum", etype)
        ctx.set_output(0, b.reduce_window(x, b.constant(lowest(etype), etype), window,
                                          to_apply=reducer))


@register_xla_op("MaxPool3D")
class MaxPool3D(MaxPool):
    SPATIAL = 3


@register_xla_op("AvgPool")
class AvgPool(XlaOpKernel):
    """Mean over each window, counting only real (unpadded) pixels, as TF does; f16 and
    bf16 windows sum in f32."""
    SPATIAL = 2

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        given = require_float(x)
        window, ks, pads = _pool_window(ctx, x, self.SPATIAL)
        etype = accumulation_type(given)            # f16/bf16 windows sum in f32
        x = b.convert(x, etype) if etype != given else x
        reducer = b.scalar_computation(f"add_{etype}", "add", etype)
        zero = b.constant(0, etype)
        total = b.reduce_window(x, zero, window, to_apply=reducer)
        if all(p == (0, 0) for p in pads):
            counts = full(b, math.prod(ks), etype, total.shape.dims)
        else:
            # The same window over ones counts the real pixels of each window.
            ones = full(b, 1, etype, x.shape.dims)
            counts = b.reduce_window(ones, zero, window, to_apply=reducer)
        mean = b.divide(total, counts)
        ctx.set_output(0, b.convert(mean, given) if etype != given else mean)


@register_xla_op("AvgPool3D")
class AvgPool3D(AvgPool):
    SPATIAL = 3
