"""The algebraic simplifier: local rewrites that keep every result bit-identical.

Each rule looks at one instruction (and its operands) and returns a simpler
replacement or None. Rules are registered per opcode in `RULES`; the
arithmetic ones live here, the data-movement ones in `simplify_movement`
(registered when the `passes` package is imported).

Exactness: every rule is an identity of IEEE arithmetic including NaN, the
infinities and signed zeros. So `x * 1 -> x` is in, while `x * 0 -> 0` is out
(NaN * 0 is NaN) and `x + 0 -> x` only holds for `-0.0` (`-0 + +0` is `+0`),
and `x - 0` for `+0.0`. One effect of XLA's CPU float mode is not preserved,
as in XLA: an identity that removes an op also removes the flush of a
denormal input to zero (such inputs differ from the flushed value by < 1e-38).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..hlo import OPCODES, HloComputation, HloInstruction, HloModule, Shape, numpy_dtype

from .hlo_utils import new_instruction
from .pass_base import HloModulePass, register_pass

Rule = Callable[[HloInstruction], "HloInstruction | None"]
RULES: dict[str, list[Rule]] = {}


def rule(*opcodes: str):
    """Decorator: register a rewrite rule for the given opcodes."""
    def register(fn: Rule) -> Rule:
        for op in opcodes:
            RULES.setdefault(op, []).append(fn)
        return fn
    return register


# --- helpers ------------------------------------------------------------------------

def splat_value(instr: HloInstruction):
    """The single value every element of `instr` has, if it is a constant splat
    (a constant, or a broadcast of a scalar constant); else None."""
    if instr.opcode == "broadcast":
        instr = instr.operands[0]
        if not instr.shape.is_scalar:
            return None
    if instr.opcode != "constant" or instr.literal is None or instr.literal.size == 0:
        return None
    flat = instr.literal.reshape(-1)
    first = flat[0]
    if flat.size > 1 and not (flat == first).all():
        return None
    return first.item()


def is_splat(instr: HloInstruction, value) -> bool:
    """True if every element is exactly `value` (signed zeros told apart)."""
    v = splat_value(instr)
    if v is None or isinstance(v, complex):
        return False
    if isinstance(v, bool) or isinstance(value, bool):
        return isinstance(v, bool) and isinstance(value, bool) and v == value
    if v != value:
        return False
    return math.copysign(1.0, v) == math.copysign(1.0, value) if v == 0 else True


def is_float(instr: HloInstruction) -> bool:
    return instr.shape.is_array and instr.shape.dtype.is_float


def can_forward(instr: HloInstruction, value: HloInstruction) -> bool:
    """`value` may stand for `instr`: same element type, dimensions and layout."""
    a, b = instr.shape, value.shape
    return (a.is_array and b.is_array and a.element_type == b.element_type
            and a.dims == b.dims and a.minor_to_major() == b.minor_to_major())


def operand_if(instr: HloInstruction, keep: int, other_is) -> HloInstruction | None:
    """operand `keep` of a binary op when the other operand satisfies `other_is`."""
    value, other = instr.operands[keep], instr.operands[1 - keep]
    if other_is(other) and can_forward(instr, value):
        return value
    return None


def either_operand(instr: HloInstruction, other_is) -> HloInstruction | None:
    """For a commutative op: the operand whose partner satisfies `other_is`."""
    return operand_if(instr, 0, other_is) or operand_if(instr, 1, other_is)


def _splat(instr: HloInstruction, value) -> HloInstruction:
    """broadcast(constant(value)) of `instr`'s shape, placed before it."""
    dtype = numpy_dtype(instr.shape.element_type)
    scalar = new_instruction(instr.parent, "constant", Shape.scalar(instr.shape.element_type),
                             before=instr, literal=np.array(value, dtype))
    return make(instr, "broadcast", [scalar], dimensions=())


# --- arithmetic rules --------------------------------------------------------------

@rule("add")
def _add_zero(instr):
    # x + (-0.0) -> x for floats (exact for -0 too); x + 0 -> x for integers.
    zero = -0.0 if is_float(instr) else 0
    return either_operand(instr, lambda c: is_splat(c, zero))


@rule("subtract")
def _subtract_zero(instr):
    # x - (+0.0) -> x  (-0 - +0 is -0)
    return operand_if(instr, 0, lambda c: is_splat(c, 0.0 if is_float(instr) else 0))


@rule("multiply")
def _multiply_one(instr):
    # x * 1 -> x
    return either_operand(instr, lambda c: is_splat(c, 1))


@rule("divide")
def _divide_one(instr):
    # x / 1 -> x
    return operand_if(instr, 0, lambda c: is_splat(c, 1))


@rule("maximum", "minimum")
def _max_min_identity(instr):
    # max(x, -inf) -> x and min(x, +inf) -> x: NaN still wins (XLA's max propagates NaN).
    if not is_float(instr):
        return None
    bound = -math.inf if instr.opcode == "maximum" else math.inf
    return either_operand(instr, lambda c: is_splat(c, bound))


@rule("power")
def _power_small_exponent(instr):
    # x ** 1 -> x; x ** 2 -> x * x; float x ** -1 -> 1 / x; x ** 0 -> 1 (NaN ** 0 is 1).
    # Each is what a correctly rounded pow gives, special values included: the square
    # of a float is exact in twice the precision, so pow cannot round it differently.
    # (XLA's simplifier makes the same rewrites; x * x is a multiply, not a libm call.)
    x, exponent = instr.operands
    if not can_forward(instr, x):
        return None
    if is_splat(exponent, 1):
        return x
    if is_splat(exponent, 2):
        return make(instr, "multiply", [x, x])
    if is_splat(exponent, 0) or is_splat(exponent, -0.0):
        return _splat(instr, 1)
    if is_float(instr) and is_splat(exponent, -1):
        return make(instr, "divide", [_splat(instr, 1), x])
    return None


@rule("and", "or")
def _logic_identity(instr):
    # p and true -> p; p or false -> p (pred only: for integers `and` is bitwise)
    if instr.shape.element_type != "pred":
        return None
    return either_operand(instr, lambda c: is_splat(c, instr.opcode == "and"))


@rule("negate", "not")
def _double_negation(instr):
    # -(-x) -> x; not(not(x)) -> x  (two's complement wraps both ways)
    inner = instr.operands[0]
    if inner.opcode == instr.opcode and can_forward(instr, inner.operands[0]):
        return inner.operands[0]
    return None


def _is_scalar_broadcast(instr: HloInstruction) -> bool:
    return instr.opcode == "broadcast" and instr.operands[0].shape.is_scalar


def _sink_broadcasts(instr):
    # f(broadcast(a), broadcast(b)) -> broadcast(f(a, b)): one scalar op instead of
    # one per element, and constant folding can then fold f(a, b).
    if not instr.info.is_elementwise or not instr.shape.is_array or not instr.shape.dims \
            or instr.opcode == "bitcast-convert" \
            or not all(_is_scalar_broadcast(op) for op in instr.operands):
        return None         # (a bitcast-convert may change the rank: leave it)
    scalar = new_instruction(instr.parent, instr.opcode, Shape.scalar(instr.shape.element_type),
                             [op.operands[0] for op in instr.operands], before=instr,
                             attrs={k: v for k, v in instr.attrs.items() if k != "metadata"})
    return make(instr, "broadcast", [scalar], dimensions=())


for _opcode, _info in OPCODES.items():
    if _info.is_elementwise:
        rule(_opcode)(_sink_broadcasts)


@rule("convert", "copy")
def _noop_convert(instr):
    # convert to the same type, copy to the same layout -> the operand
    value = instr.operands[0]
    return value if can_forward(instr, value) else None


@rule("dot")
def _outer_product_dot(instr):
    """dot(a[M,1], b[1,N]) with a contraction of one element is an outer product:
    0 + broadcast(a') * broadcast(b') -- the same single product per element,
    computed by fusible elementwise ops instead of a GEMM call."""
    lhs, rhs = instr.operands
    if instr.dims("lhs_batch_dims") or instr.dims("rhs_batch_dims"):
        return None
    lc, rc = instr.dims("lhs_contracting_dims"), instr.dims("rhs_contracting_dims")
    if any(lhs.shape.dims[d] != 1 for d in lc) or any(rhs.shape.dims[d] != 1 for d in rc):
        return None
    etype = instr.shape.element_type
    if lhs.shape.element_type != etype or rhs.shape.element_type != etype \
            or not instr.shape.has_default_layout():
        return None
    lhs_free = [d for d in range(lhs.shape.rank) if d not in lc]
    rhs_free = [d for d in range(rhs.shape.rank) if d not in rc]
    spread = []
    offset = 0
    for value, free in ((lhs, lhs_free), (rhs, rhs_free)):
        dims = tuple(value.shape.dims[d] for d in free)
        flat = new_instruction(instr.parent, "reshape", value.shape.with_dims(dims), [value],
                               before=instr)
        spread.append(new_instruction(instr.parent, "broadcast", instr.shape, [flat],
                                      before=instr,
                                      attrs={"dimensions": tuple(range(offset, offset + len(dims)))}))
        offset += len(dims)
    product = new_instruction(instr.parent, "multiply", instr.shape, spread, before=instr)
    if not is_float(instr):
        return product
    # A dot accumulates into +0, so a -0 product comes out as +0: keep that with
    # `+0 + p`, which changes no other value (NaN and infinities included).
    return make(instr, "add", [_splat(instr, 0), product])


# --- the pass -------------------------------------------------------------------------

def simplify_computation(comp: HloComputation) -> bool:
    changed = False
    for instr in comp.post_order():
        if instr.parent is not comp:
            continue
        for fn in RULES.get(instr.opcode, ()):
            new = fn(instr)
            if new is None or new is instr:
                continue
            comp.replace_instruction(instr, new)
            changed = True
            break
    return changed


@register_pass
class AlgebraicSimplifier(HloModulePass):
    """Applies the exact rewrite rules of `RULES` once over every computation
    (wrap it in a fixed point with DCE). True iff any rule fired."""

    name = "algebraic-simplifier"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations_post_order():
            changed |= simplify_computation(comp)
        return changed


def make(instr: HloInstruction, opcode: str, operands, **attrs) -> HloInstruction:
    """A new instruction with `instr`'s shape, placed before it (for rules)."""
    return new_instruction(instr.parent, opcode, instr.shape, operands, before=instr,
                           attrs=attrs)
