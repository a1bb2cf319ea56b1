"""Elementwise kernels: arithmetic, comparisons, logic, math functions, casts.

Binary kernels broadcast by numpy's rules (as tf2xla's binary ops do) and
expect one element type (the ops layer promotes first). Most kernels are one
HLO opcode and are made from the rows of frontend/elementwise_table.py; the rest
are small classes.
"""
from __future__ import annotations

from ..registry import XlaOpKernel, register_xla_op
from ..elementwise_table import BINARY_ROWS, BOOL, COMPARISON, FLOAT, NUMBER, UNARY_ROWS
from ..elementwise_table import BinaryOp, UnaryOp
from .common import broadcast_all, is_float, require_float, require_same_types


def binary_operands(ctx):
    """The two inputs, checked for one element type and broadcast together."""
    x, y = ctx.input(0), ctx.input(1)
    require_same_types([x, y])
    return broadcast_all(ctx.builder, [x, y])


def binary_kernel(row: BinaryOp):
    """Registers the kernel of a binary row: `row.opcode(x, y)` (a compare in the row's
    direction), after broadcasting the two."""
    name, opcode, inputs, direction = row.name, row.opcode, row.inputs, row.direction

    class Binary(XlaOpKernel):
        def compile(self, ctx):
            x, y = binary_operands(ctx)
            if inputs == BOOL and x.shape.element_type != "pred":
                raise TypeError(f"operands must be bool, got {x.shape.element_type}")
            if inputs == FLOAT:
                require_float(x)
            if inputs == COMPARISON:
                ctx.set_output(0, ctx.builder.compare(x, y, direction))
            else:
                ctx.set_output(0, ctx.builder.op(opcode, [x, y]))
    Binary.__name__ = Binary.__qualname__ = name
    Binary.__doc__ = (f"{name}(x, y): compare {direction}, a bool result."
                      if inputs == COMPARISON else
                      f"{name}(x, y) = {opcode}(x, y), broadcast by numpy's rules.")
    return register_xla_op(name)(Binary)


def unary_kernel(row: UnaryOp):
    """Registers the kernel of a row of the unary table: `row.opcode(x)` (complex inputs
    too where the row says so)."""
    name, opcode, float_only = row.name, row.opcode, row.inputs != NUMBER
    complex_ok = row.complex

    class Unary(XlaOpKernel):
        def compile(self, ctx):
            x = ctx.input(0)
            if float_only and not (complex_ok and x.shape.element_type in ("c64", "c128")):
                require_float(x)
            elif x.shape.element_type == "pred":
                raise TypeError("input must be a number, got bool")
            ctx.set_output(0, ctx.builder.op(opcode, [x]))
    Unary.__name__ = Unary.__qualname__ = name
    Unary.__doc__ = f"{name}(x) = {opcode}(x)."
    return register_xla_op(name)(Unary)


for _row in BINARY_ROWS:
    binary_kernel(_row)
for _row in UNARY_ROWS:
    unary_kernel(_row)


@register_xla_op("LogicalNot")
class LogicalNot(XlaOpKernel):
    def compile(self, ctx):
        x = ctx.input(0)
        if x.shape.element_type != "pred":
            raise TypeError(f"input must be bool, got {x.shape.element_type}")
        ctx.set_output(0, ctx.builder.not_(x))


@register_xla_op("Square")
class Square(XlaOpKernel):
    def compile(self, ctx):
        x = ctx.input(0)
        ctx.set_output(0, ctx.builder.multiply(x, x))


@register_xla_op("FloorDiv")
class FloorDiv(XlaOpKernel):
    """Division rounded toward -inf (Python's //); HLO divide truncates integers."""

    def compile(self, ctx):
        b = ctx.builder
        x, y = binary_operands(ctx)
        if is_float(x.shape.element_type):
            ctx.set_output(0, b.floor(b.divide(x, y)))
            return
        # q = trunc(x / y); step down when the remainder is non-zero and the
        # signs of x and y differ: -7 // 2 = -4, not -3.
        q = b.divide(x, y)
        r = b.remainder(x, y)
        zero = ctx.zeros_like(x)
        adjust = b.and_(b.compare(r, zero, "NE"),
                        b.compare(b.compare(r, zero, "LT"), b.compare(y, zero, "LT"), "NE"))
        ctx.set_output(0, b.select(adjust, b.subtract(q, ctx.full_like(1, q)), q))


@register_xla_op("FloorMod")
class FloorMod(XlaOpKernel):
    """Remainder with the sign of the divisor (Python's %); HLO remainder truncates."""

    def compile(self, ctx):
        b = ctx.builder
        x, y = binary_operands(ctx)
        r = b.remainder(x, y)
        zero = ctx.zeros_like(x)
        # r + y when r is non-zero and its sign differs from y's: -7 % 2 = 1.
        adjust = b.and_(b.compare(r, zero, "NE"),
                        b.compare(b.compare(r, zero, "LT"), b.compare(y, zero, "LT"), "NE"))
        ctx.set_output(0, b.select(adjust, b.add(r, y), r))


@register_xla_op("TruncateDiv")
class TruncateDiv(XlaOpKernel):
    """x / y rounded toward zero: HLO divide for integers (which truncates), trunc(x / y)
    for floats."""

    def compile(self, ctx):
        b = ctx.builder
        x, y = binary_operands(ctx)
        q = b.divide(x, y)
        if is_float(x.shape.element_type):
            # trunc(q) = floor(|q|) with q's sign; NaN and inf pass through
            q = b.multiply(b.sign(q), b.floor(b.abs(q)))
            q = b.select(b.compare(q, q, "NE"), b.divide(x, y), q)
        ctx.set_output(0, q)


@register_xla_op("DivNoNan")
class DivNoNan(XlaOpKernel):
    """x / y where y != 0, else 0."""

    def compile(self, ctx):
        b = ctx.builder
        x, y = binary_operands(ctx)
        zero = ctx.zeros_like(x)
        safe = b.select(b.compare(y, zero, "EQ"), ctx.full_like(1, y), y)
        ctx.set_output(0, b.select(b.compare(y, zero, "EQ"), zero, b.divide(x, safe)))


@register_xla_op("Select")
class Select(XlaOpKernel):
    """Select(cond, x, y): x where cond else y; the three broadcast together."""

    def compile(self, ctx):
        cond, x, y = ctx.inputs
        if cond.shape.element_type != "pred":
            raise TypeError(f"condition must be bool, got {cond.shape.element_type}")
        require_same_types([x, y], "the two branches")
        cond, x, y = broadcast_all(ctx.builder, [cond, x, y])
        ctx.set_output(0, ctx.builder.select(cond, x, y))


@register_xla_op("ClipByValue")
class ClipByValue(XlaOpKernel):
    """min(max(x, lo), hi), broadcast together (numpy's clip; NaN stays NaN)."""

    def compile(self, ctx):
        b = ctx.builder
        require_same_types(ctx.inputs)
        x, lo, hi = broadcast_all(b, ctx.inputs)
        ctx.set_output(0, b.minimum(b.maximum(x, lo), hi))


@register_xla_op("Cast")
class Cast(XlaOpKernel):
    """Cast(x, dtype=HLO type name). To bool means x != 0 (numpy's astype(bool))."""

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        target = ctx.attr("dtype")
        if target == x.shape.element_type:
            ctx.set_output(0, x)
        elif target == "pred":
            ctx.set_output(0, b.compare(x, ctx.zeros_like(x), "NE"))
        else:
            ctx.set_output(0, b.convert(x, target))
