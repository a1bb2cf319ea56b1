"""Tuple simplification: forwards values through tuple / get-tuple-element pairs."""
from __future__ import annotations

from ..hlo import HloComputation, HloInstruction, HloModule

from .hlo_utils import new_instruction, replace_keeping_layout, same_bytes
from .pass_base import HloModulePass, register_pass


def _forwarded(instr: HloInstruction) -> HloInstruction | None:
    """The value `instr` merely passes through, or None."""
    if instr.opcode == "get-tuple-element":
        source = instr.operands[0]
        if source.opcode == "tuple":
            # get-tuple-element(tuple(a, b), 1) -> b
            return source.operands[instr.attrs["index"]]
    elif instr.opcode == "constant" and isinstance(instr.literal, tuple):
        # constant((a, (b, c))) -> tuple(constant(a), tuple(constant(b), constant(c))):
        # then get-tuple-element forwards to an array constant that fusion and the
        # simplifier can see, and the backend only ever meets array constants.
        return _tuple_of_constants(instr, instr.shape, instr.literal)
    elif instr.opcode == "tuple" and instr.operands:
        # tuple(gte(t, 0), ..., gte(t, n-1)) -> t, when t has exactly n elements
        first = instr.operands[0]
        if first.opcode != "get-tuple-element":
            return None
        source = first.operands[0]
        if len(source.shape.tuple_shapes) != len(instr.operands) \
                or not same_bytes(source.shape, instr.shape):
            return None   # the tuple re-lays out an element: its users must not read t
        for i, op in enumerate(instr.operands):
            if (op.opcode != "get-tuple-element" or op.operands[0] is not source
                    or op.attrs["index"] != i):
                return None
        return source
    return None


def _tuple_of_constants(anchor: HloInstruction, shape, literal) -> HloInstruction:
    if not isinstance(literal, tuple):
        return new_instruction(anchor.parent, "constant", shape, before=anchor, literal=literal)
    elements = [_tuple_of_constants(anchor, s, value)
                for s, value in zip(shape.tuple_shapes, literal)]
    return new_instruction(anchor.parent, "tuple", shape, elements, before=anchor)


def simplify_tuples(comp: HloComputation) -> bool:
    changed = False
    for instr in comp.post_order():
        value = _forwarded(instr)
        if value is None:
            continue
        # The forwarded value may be stored in another layout than `instr` declares
        # (gte(tuple(x)) declared {1,0}, x {0,1}): users read it in instr's layout, via a
        # copy where they differ, or a bitcast user would reinterpret other bytes.
        replace_keeping_layout(instr, value)
        changed = True
    return changed


@register_pass
class TupleSimplifier(HloModulePass):
    """Forwards `get-tuple-element(tuple(...), i)` to the i-th operand, replaces
    `tuple(gte(t, 0), ..., gte(t, n-1))` by `t`, and spells a tuple-shaped constant as a
    tuple of array constants. Exact; True iff anything changed."""

    name = "tuple-simplifier"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations_post_order():
            changed |= simplify_tuples(comp)
        return changed
