"""Reduction kernels: Sum, Mean, Prod, Max, Min, All, Any, ArgMax, ArgMin, and the
running ones Cumsum, Cumprod, CumulativeLogsumexp.

Attributes: `axis` (an int, a tuple, or None for all axes; negative counts
from the end) and `keepdims`. Sums and means of f16/bf16 accumulate in f32,
as XLA's frontends do, and round once at the end.
"""
from __future__ import annotations


from ...hlo import Shape
from ...hlo.builder import make_window

from ..registry import XlaOpKernel, register_xla_op
from .common import (accumulation_type, count, highest, is_float, keepdims_shape, lowest, normalize_axes,
                     normalize_axis, reduce, require_float)

_NARROW_FLOATS = ("f16", "bf16")


def _finish(ctx, reduced, axes):
    """Applies keepdims (a reshape that puts size-1 dims back)."""
    if ctx.attr("keepdims", False):
        reduced = ctx.builder.reshape(reduced, keepdims_shape(ctx.input_shape(0), axes))
    ctx.set_output(0, reduced)


def _reduction_kernel(name: str, opcode: str, init, types: str):
    class Reduction(XlaOpKernel):
        def compile(self, ctx):
            b, x = ctx.builder, ctx.input(0)
            etype = x.shape.element_type
            if types == "bool" and etype != "pred":
                raise TypeError(f"input must be bool, got {etype}")
            if types == "number" and etype == "pred":
                raise TypeError("input must be a number, got bool (cast it first)")
            axes = normalize_axes(ctx.attr("axis", None), x.shape.rank)
            start = init(etype) if callable(init) else init
            if opcode == "add" and etype in _NARROW_FLOATS:
                wide = reduce(b, b.convert(x, "f32"), opcode, start, axes)
                _finish(ctx, b.convert(wide, etype), axes)
            else:
                _finish(ctx, reduce(b, x, opcode, start, axes), axes)
    Reduction.__name__ = Reduction.__qualname__ = name
    Reduction.__doc__ = f"{name}(x, axis, keepdims): reduce with {opcode}."
    return register_xla_op(name)(Reduction)


_reduction_kernel("Sum", "add", 0, "number")
_reduction_kernel("Prod", "multiply", 1, "number")
_reduction_kernel("Max", "maximum", lowest, "any")
_reduction_kernel("Min", "minimum", highest, "any")
_reduction_kernel("All", "and", True, "bool")
_reduction_kernel("Any", "or", False, "bool")


@register_xla_op("Mean")
class Mean(XlaOpKernel):
    """Sum / count; integer inputs divide with truncation, as in TensorFlow."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        etype = x.shape.element_type
        if etype == "pred":
            raise TypeError("input must be a number, got bool (cast it first)")
        axes = normalize_axes(ctx.attr("axis", None), x.shape.rank)
        work = "f32" if etype in _NARROW_FLOATS else etype
        total = reduce(b, b.convert(x, work) if work != etype else x, "add", 0, axes)
        n = count(ctx.input_shape(0), axes)
        mean = b.divide(total, b.broadcast(b.constant(n, work), total.shape.dims))
        _finish(ctx, b.convert(mean, etype) if work != etype else mean, axes)


class _ArgReduce(XlaOpKernel):
    """Index of the first max (min) along `axis`; NaN counts as the extreme, as in numpy.

    One variadic reduce carries (value, index) pairs; the reducer keeps the pair
    with the better value, and on ties the smaller index, so it is associative
    and commutative (XLA may reduce in any order).
    """
    direction = "GT"

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        etype = x.shape.element_type
        if etype == "pred":
            raise TypeError("input must be a number, got bool (cast it first)")
        itype = ctx.attr("output_type", "s64")
        axis = normalize_axis(ctx.attr("axis"), x.shape.rank)
        init = lowest(etype) if self.direction == "GT" else highest(etype)
        index = b.iota(Shape(itype, x.shape.dims), axis)
        reducer = self._reducer(b, etype, itype)
        pair = b.reduce([x, index], [b.constant(init, etype), b.constant(0, itype)],
                        dims=[axis], to_apply=reducer)
        ctx.set_output(0, b.get_tuple_element(pair, 1))

    def _reducer(self, b, etype: str, itype: str):
        sub = b.sub_builder(f"{self.op_name.lower()}_{etype}_{itype}")
        va = sub.parameter(Shape.scalar(etype), "value_a")
        ia = sub.parameter(Shape.scalar(itype), "index_a")
        vb = sub.parameter(Shape.scalar(etype), "value_b")
        ib = sub.parameter(Shape.scalar(itype), "index_b")
        a_first = sub.compare(ia, ib, "LT")
        better = sub.compare(va, vb, self.direction)
        pick_a = sub.or_(better, sub.and_(sub.compare(va, vb, "EQ"), a_first))
        if is_float(etype):
            # NaN beats everything; between two NaNs the first index wins.
            a_nan, b_nan = sub.compare(va, va, "NE"), sub.compare(vb, vb, "NE")
            nan_pick = sub.and_(a_nan, sub.or_(sub.not_(b_nan), a_first))
            pick_a = sub.select(sub.or_(a_nan, b_nan), nan_pick, pick_a)
        root = sub.tuple([sub.select(pick_a, va, vb), sub.select(pick_a, ia, ib)])
        return sub.build(root)


@register_xla_op("ArgMax")
class ArgMax(_ArgReduce):
    direction = "GT"


@register_xla_op("ArgMin")
class ArgMin(_ArgReduce):
    direction = "LT"


class _Cumulative(XlaOpKernel):
    """A running reduction along `axis` (attributes exclusive, reverse), as a
    reduce-window: a window of the axis' full length, padded by n-1 below, ends at
    each element: out[i] = x[0] op ... op x[i]. Exclusive shifts the input by one
    (the identity comes in)."""
    identity = 0

    def reducer(self, b, etype):
        raise NotImplementedError

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        given = x.shape.element_type
        if given == "pred":
            raise TypeError("input must be a number, got bool (cast it first)")
        etype = self.work_type(given)
        if etype != given:
            x = b.convert(x, etype)
        dims = ctx.input_shape(0)
        axis = normalize_axis(ctx.attr("axis", 0), len(dims))
        n = dims[axis]
        init = b.constant(self.identity, etype)
        if ctx.attr("reverse", False):
            x = b.reverse(x, [axis])
        if ctx.attr("exclusive", False) and n:
            x = b.pad(x, init, [(1, -1) if d == axis else (0, 0) for d in range(len(dims))])
        sizes = [max(n, 1) if d == axis else 1 for d in range(len(dims))]
        padding = [(max(n - 1, 0), 0) if d == axis else (0, 0) for d in range(len(dims))]
        out = b.reduce_window(x, init, make_window(sizes, padding=padding),
                              to_apply=self.reducer(b, etype))
        if ctx.attr("reverse", False):
            out = b.reverse(out, [axis])
        ctx.set_output(0, b.convert(out, given) if etype != given else out)

    def work_type(self, etype: str) -> str:
        """The type the scan runs in."""
        return etype


@register_xla_op("Cumsum")
class Cumsum(_Cumulative):
    """Running sums; f16/bf16 accumulate in f32 and each output is rounded once."""

    def work_type(self, etype):
        return accumulation_type(etype)

    def reducer(self, b, etype):
        return b.scalar_computation(f"add_{etype}", "add", etype)


@register_xla_op("Cumprod")
class Cumprod(_Cumulative):
    identity = 1

    def reducer(self, b, etype):
        return b.scalar_computation(f"multiply_{etype}", "multiply", etype)


@register_xla_op("CumulativeLogsumexp")
class CumulativeLogsumexp(_Cumulative):
    """log(exp(x0) + ... + exp(xi)), accumulated pairwise as max(a, b) + log1p(exp(-|a -
    b|)): never overflows; -inf is the identity."""
    identity = -float("inf")

    def compile(self, ctx):
        require_float(ctx.input(0))
        super().compile(ctx)

    def reducer(self, b, etype):
        sub = b.sub_builder(f"logaddexp_{etype}")
        x = sub.parameter(Shape.scalar(etype), "a")
        y = sub.parameter(Shape.scalar(etype), "b")
        zero = sub.constant(0, etype)
        big = sub.maximum(x, y)
        # |a - b|, taken as 0 when a == b (two infinities of one sign give NaN otherwise)
        gap = sub.select(sub.compare(x, y, "EQ"), zero, sub.abs(sub.subtract(x, y)))
        root = sub.add(big, sub.log_plus_one(sub.exp(sub.negate(gap))))
        return sub.build(root)
