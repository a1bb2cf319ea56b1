"""Loop-invariant code motion: work of a while body that gives the same value on every
trip is done once, before the loop, and the body reads the result from a new state
leaf.

An instruction of the body is invariant when it reads only leaves the body passes
through unchanged (`passthrough_leaves`), constants, and other invariant instructions,
and may be moved (`is_movable`: no side effect, no rng, no collective, no control flow;
those stay, and so does everything that reads them only through them).

What moves: the invariant values the rest of the body reads. Not all are worth a leaf
of their own (the rule is XLA's, in our words):
  - constants and state leaves are there already;
  - cheap ops -- broadcast, iota, reshape, bitcast, slice, get-tuple-element, tuple --
    stay in the body: loop fusion folds them into the kernels that read them, so
    recomputing them costs nothing, and their results are often much larger than their
    operands (a broadcast of a scalar leaf). Their operands are considered instead;
  - a value larger than the invariant leaves and constants it is computed from stays
    too (hoisting it would grow the loop's memory by more than it reads); its operands
    are considered instead.
Everything else is computed before the loop: a transpose or a dot of the weights a
recurrent body reads every trip, an exp of a constant table.

Loops whose state is not a tuple read through get-tuple-element, or whose cond or body
another instruction calls, are left alone (while_state.can_reshape_state). True iff a
value was hoisted.
"""
from __future__ import annotations

from ..hlo import HloInstruction, HloModule

from .dce import remove_dead_instructions
from .hlo_utils import in_layout
from .pass_base import HloModulePass, register_pass
from .while_loop_analysis import is_movable, passthrough_leaves, single_caller, whiles
from .while_state import add_leaves, can_reshape_state, init_elements

# Cheap to recompute where they are read (see the module docstring).
CHEAP = frozenset({"broadcast", "iota", "reshape", "bitcast", "slice", "get-tuple-element",
                   "tuple", "constant", "parameter"})


def _invariants(body) -> tuple[dict[int, HloInstruction], dict[int, int]]:
    """(the invariant instructions by id, the bytes each is computed from: the distinct
    state leaves and constants in its operand cone)."""
    param = body.parameters[0]
    keep = passthrough_leaves(body)
    invariant: dict[int, HloInstruction] = {}
    sources: dict[int, dict[int, int]] = {}
    for instr in body.post_order():
        if instr is body.root or instr.control_predecessors:
            continue
        if instr.opcode == "get-tuple-element" and instr.operands[0] is param:
            if instr.attrs["index"] in keep:
                invariant[id(instr)] = instr
                sources[id(instr)] = {id(instr): _nbytes(instr)}
            continue
        if instr.opcode == "constant":
            invariant[id(instr)] = instr
            sources[id(instr)] = {id(instr): _nbytes(instr)}
            continue
        if instr.opcode == "parameter" or not is_movable(instr):
            continue
        if all(id(op) in invariant for op in instr.operands):
            invariant[id(instr)] = instr
            merged: dict[int, int] = {}
            for op in instr.operands:
                merged.update(sources[id(op)])
            sources[id(instr)] = merged
    return invariant, {key: sum(s.values()) for key, s in sources.items()}


def _nbytes(instr: HloInstruction) -> int:
    return sum(leaf.nbytes for leaf in instr.shape.leaves())


def hoistable_values(body) -> list[HloInstruction]:
    """The invariant values of `body` to compute before the loop, in body order."""
    invariant, source_bytes = _invariants(body)
    chosen: dict[int, HloInstruction] = {}
    seen: set[int] = set()

    def consider(value: HloInstruction) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if value.opcode in ("constant", "parameter") or (
                value.opcode == "get-tuple-element" and value.operands[0].opcode == "parameter"):
            return
        if value.opcode in CHEAP or _nbytes(value) > source_bytes[id(value)] \
                or not any(op.opcode != "constant" for op in _cone_leaves(value, invariant)):
            for op in value.operands:
                consider(op)
            return
        chosen[id(value)] = value

    for instr in body.instructions:
        if id(instr) in invariant:
            continue
        for op in instr.operands:
            if id(op) in invariant:
                consider(op)
    order = {id(i): n for n, i in enumerate(body.post_order())}
    return sorted(chosen.values(), key=lambda i: order[id(i)])


def _cone_leaves(value: HloInstruction, invariant) -> list[HloInstruction]:
    """The state leaves and constants `value` is computed from."""
    found, stack, seen = [], [value], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.opcode == "constant" or (x.opcode == "get-tuple-element"
                                      and x.operands[0].opcode == "parameter"):
            found.append(x)
        else:
            stack.extend(x.operands)
    return found


def hoist(loop: HloInstruction, values: list[HloInstruction]) -> None:
    """Computes `values` (invariant instructions of the loop's body) before the loop
    and makes the body read them from new state leaves."""
    comp = loop.parent
    body = loop.attrs["body"]
    param = body.parameters[0]
    elements = init_elements(loop)
    outside: dict[int, HloInstruction] = {}

    def clone(instr: HloInstruction) -> HloInstruction:
        if id(instr) not in outside:
            if instr.opcode == "get-tuple-element" and instr.operands[0] is param:
                # the init's element, read in the leaf's layout (it may have another)
                outside[id(instr)] = in_layout(elements[instr.attrs["index"]], instr.shape,
                                               comp, before=loop)
            else:
                outside[id(instr)] = comp.clone_instruction(
                    instr, [clone(op) for op in instr.operands], before=loop)
        return outside[id(instr)]

    hoisted = [clone(v) for v in values]
    reads = add_leaves(loop, hoisted, elements)
    for value, read in zip(values, reads):
        body.replace_instruction(value, read)
    remove_dead_instructions(body)       # what computed the values in the body
    body.sort_topologically()            # (the new leaves' reads were added last)


@register_pass
class WhileLoopInvariantCodeMotion(HloModulePass):
    """Moves loop-invariant work out of while bodies (see the module docstring)."""

    name = "while-loop-invariant-code-motion"

    def run(self, module: HloModule) -> bool:
        loops = whiles(module)
        if not loops:
            return False
        callers = single_caller(module)
        changed = False
        for loop in loops:
            if not can_reshape_state(loop, callers):
                continue
            values = hoistable_values(loop.attrs["body"])
            if values:
                hoist(loop, values)
                changed = True
        return changed


__all__ = ["WhileLoopInvariantCodeMotion", "hoistable_values", "hoist"]
