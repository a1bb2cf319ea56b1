"""Shape kernels: Const, Identity, Reshape, Transpose, ExpandDims, Squeeze,
BroadcastTo, ConcatV2, Split, Slice, Pad, Tile, Fill, ZerosLike, OnesLike, Range.

Shapes, axes and sizes are static attributes (known at trace time), as in
tf2xla, where they must be compile-time constants.
"""
from __future__ import annotations

import math

import numpy as np

from ...hlo import Shape

from ..registry import XlaOpKernel, register_xla_op
from .common import broadcast_to, normalize_axis, require_same_types


@register_xla_op("Const")
class Const(XlaOpKernel):
    """A constant; attribute `value` is a numpy array (of a dtype with an HLO type)."""

    def compile(self, ctx):
        value = np.asarray(ctx.attr("value"))
        ctx.set_output(0, ctx.builder.constant(value))


@register_xla_op("Identity")
class Identity(XlaOpKernel):
    def compile(self, ctx):
        ctx.set_output(0, ctx.input(0))


@register_xla_op("StopGradient")
class StopGradient(XlaOpKernel):
    """The input itself; the gradient stops here (autodiff/registry.py)."""

    def compile(self, ctx):
        ctx.set_output(0, ctx.input(0))


def resolve_shape(shape, numel: int) -> tuple[int, ...]:
    """A reshape target with at most one -1 filled in; ValueError when sizes differ."""
    shape = [int(d) for d in shape]
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in shape):
        raise ValueError(f"invalid target shape {shape} (one -1 at most, no other negatives)")
    known = math.prod(d for d in shape if d != -1)
    if unknown:
        if known == 0 or numel % known:
            raise ValueError(f"cannot reshape {numel} elements into {shape}")
        shape[unknown[0]] = numel // known
    if math.prod(shape) != numel:
        raise ValueError(f"cannot reshape {numel} elements into {shape}")
    return tuple(shape)


@register_xla_op("Reshape")
class Reshape(XlaOpKernel):
    def compile(self, ctx):
        x = ctx.input(0)
        dims = resolve_shape(ctx.attr("shape"), x.shape.numel)
        ctx.set_output(0, ctx.builder.reshape(x, dims))


@register_xla_op("Transpose")
class Transpose(XlaOpKernel):
    """Result dim i is input dim perm[i]; no perm reverses the dims."""

    def compile(self, ctx):
        x = ctx.input(0)
        rank = x.shape.rank
        perm = ctx.attr("perm", None)
        perm = tuple(reversed(range(rank))) if perm is None else \
            tuple(normalize_axis(p, rank) for p in perm)
        if sorted(perm) != list(range(rank)):
            raise ValueError(f"perm {list(perm)} is not a permutation of {rank} dims")
        ctx.set_output(0, ctx.builder.transpose(x, perm))


@register_xla_op("ExpandDims")
class ExpandDims(XlaOpKernel):
    def compile(self, ctx):
        x = ctx.input(0)
        dims = list(ctx.input_shape(0))
        axis = normalize_axis(ctx.attr("axis"), len(dims) + 1)
        dims.insert(axis, 1)
        ctx.set_output(0, ctx.builder.reshape(x, dims))


@register_xla_op("Squeeze")
class Squeeze(XlaOpKernel):
    """Drops size-1 dims: those in `axis`, or all of them when axis is None."""

    def compile(self, ctx):
        x = ctx.input(0)
        dims = ctx.input_shape(0)
        axis = ctx.attr("axis", None)
        if axis is None:
            drop = {i for i, d in enumerate(dims) if d == 1}
        else:
            axis = (axis,) if isinstance(axis, (int, np.integer)) else axis
            drop = {normalize_axis(a, len(dims)) for a in axis}
            bad = [i for i in drop if dims[i] != 1]
            if bad:
                raise ValueError(f"cannot squeeze axis {bad[0]} of size {dims[bad[0]]}")
        ctx.set_output(0, ctx.builder.reshape(x, [d for i, d in enumerate(dims)
                                                  if i not in drop]))


@register_xla_op("BroadcastTo")
class BroadcastTo(XlaOpKernel):
    def compile(self, ctx):
        ctx.set_output(0, broadcast_to(ctx.builder, ctx.input(0), ctx.attr("shape")))


@register_xla_op("ConcatV2")
class ConcatV2(XlaOpKernel):
    """Joins its inputs along `axis`; the other dims must agree."""

    def compile(self, ctx):
        values = ctx.inputs
        if not values:
            raise ValueError("needs at least one input")
        require_same_types(values, "inputs")
        ranks = {v.shape.rank for v in values}
        if len(ranks) > 1:
            raise ValueError(f"inputs have different ranks {sorted(ranks)}")
        rank = ranks.pop()
        if rank == 0:
            raise ValueError("cannot concatenate scalars")
        axis = normalize_axis(ctx.attr("axis"), rank)
        others = {tuple(d for i, d in enumerate(v.shape.dims) if i != axis) for v in values}
        if len(others) > 1:
            raise ValueError(f"dims other than axis {axis} must agree")
        if len(values) == 1:
            ctx.set_output(0, values[0])
        else:
            ctx.set_output(0, ctx.builder.concatenate(values, axis))


def _slice_along(b, x, axis: int, start: int, stop: int):
    dims = x.shape.dims
    starts = [start if d == axis else 0 for d in range(len(dims))]
    limits = [stop if d == axis else n for d, n in enumerate(dims)]
    return b.slice(x, starts, limits)


@register_xla_op("Split")
class Split(XlaOpKernel):
    """Cuts `axis` into pieces of the given `sizes` (one output each)."""

    def compile(self, ctx):
        x = ctx.input(0)
        axis = normalize_axis(ctx.attr("axis", 0), x.shape.rank)
        sizes = [int(s) for s in ctx.attr("sizes")]
        if sum(sizes) != x.shape.dims[axis] or min(sizes, default=0) < 0:
            raise ValueError(f"sizes {sizes} do not add up to dim {axis} of size "
                             f"{x.shape.dims[axis]}")
        start = 0
        for i, size in enumerate(sizes):
            ctx.set_output(i, _slice_along(ctx.builder, x, axis, start, start + size))
            start += size


@register_xla_op("Slice")
class Slice(XlaOpKernel):
    """x[begin[i] : begin[i] + size[i]] in every dim; size -1 means to the end."""

    def compile(self, ctx):
        x = ctx.input(0)
        dims = ctx.input_shape(0)
        begin, size = list(ctx.attr("begin")), list(ctx.attr("size"))
        if len(begin) != len(dims) or len(size) != len(dims):
            raise ValueError(f"begin {begin} and size {size} need one entry per dim "
                             f"of {list(dims)}")
        limits = [n if s == -1 else b + s for b, s, n in zip(begin, size, dims)]
        for b_, lim, n in zip(begin, limits, dims):
            if not 0 <= b_ <= lim <= n:
                raise ValueError(f"slice begin {begin} size {size} is out of bounds "
                                 f"for {list(dims)}")
        ctx.set_output(0, ctx.builder.slice(x, begin, limits))


@register_xla_op("Pad")
class Pad(XlaOpKernel):
    """Constant padding: `paddings` is one (before, after) pair per dim."""

    def compile(self, ctx):
        x = ctx.input(0)
        paddings = [tuple(int(v) for v in p) for p in ctx.attr("paddings")]
        if len(paddings) != x.shape.rank or any(len(p) != 2 or min(p) < 0 for p in paddings):
            raise ValueError(f"paddings {paddings} need one non-negative (before, after) "
                             f"pair per dim of {list(x.shape.dims)}")
        value = ctx.constant(ctx.attr("constant_values", 0), x)
        ctx.set_output(0, ctx.builder.pad(x, value, paddings))


@register_xla_op("Tile")
class Tile(XlaOpKernel):
    """Repeats the whole input `multiples[i]` times along dim i."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        dims = ctx.input_shape(0)
        multiples = [int(m) for m in ctx.attr("multiples")]
        if len(multiples) != len(dims) or min(multiples, default=0) < 0:
            raise ValueError(f"multiples {multiples} need one non-negative count per dim "
                             f"of {list(dims)}")
        # [d0, d1] -> broadcast to [m0, d0, m1, d1] -> reshape to [m0*d0, m1*d1].
        wide = [v for m, d in zip(multiples, dims) for v in (m, d)]
        tiled = b.broadcast(x, wide, dims=[2 * i + 1 for i in range(len(dims))])
        ctx.set_output(0, b.reshape(tiled, [m * d for m, d in zip(multiples, dims)]))


@register_xla_op("Fill")
class Fill(XlaOpKernel):
    """A tensor of `dims` filled with `value`, of element type `dtype`."""

    def compile(self, ctx):
        dims = [int(d) for d in ctx.attr("dims")]
        if any(d < 0 for d in dims):
            raise ValueError(f"negative dimension in {dims}")
        value = ctx.builder.constant(ctx.attr("value"), ctx.attr("dtype"))
        ctx.set_output(0, ctx.builder.broadcast(value, dims))


@register_xla_op("ZerosLike")
class ZerosLike(XlaOpKernel):
    def compile(self, ctx):
        ctx.set_output(0, ctx.zeros_like(ctx.input(0)))


@register_xla_op("OnesLike")
class OnesLike(XlaOpKernel):
    def compile(self, ctx):
        ctx.set_output(0, ctx.full_like(1, ctx.input(0)))


@register_xla_op("Range")
class Range(XlaOpKernel):
    """start, start + delta, ... up to (not including) limit, as iota * delta + start."""

    def compile(self, ctx):
        b = ctx.builder
        start, limit, delta = ctx.attr("start"), ctx.attr("limit"), ctx.attr("delta", 1)
        etype = ctx.attr("dtype")
        if delta == 0:
            raise ValueError("delta must not be zero")
        n = max(0, math.ceil((limit - start) / delta))
        ramp = b.iota(Shape(etype, (n,)), 0)
        if delta != 1:
            ramp = b.multiply(ramp, b.broadcast(b.constant(delta, etype), (n,)))
        if start != 0:
            ramp = b.add(ramp, b.broadcast(b.constant(start, etype), (n,)))
        ctx.set_output(0, ramp)
