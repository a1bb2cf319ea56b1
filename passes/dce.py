"""Dead code elimination."""
from __future__ import annotations

from ..hlo import HloComputation, HloModule

from .pass_base import HloModulePass, register_pass


def is_removable(instr, ordered: set[int] = frozenset()) -> bool:
    """Dead if nothing reads it and removing it cannot be observed.

    `ordered`: ids of instructions that are some instruction's control
    predecessor; they carry an ordering constraint and are kept.
    """
    return (not instr.users and not instr.is_root and instr.opcode != "parameter"
            and not instr.has_side_effect() and id(instr) not in ordered)


def remove_dead_instructions(comp: HloComputation) -> bool:
    """Removes unused side-effect-free instructions of one computation; True if any."""
    changed = False
    ordered = {id(p) for i in comp.instructions for p in i.control_predecessors}
    # Users before operands: removing a user can make its operands dead in the same sweep.
    with comp.batch_removals():
        for instr in reversed(comp.post_order()):
            if is_removable(instr, ordered):
                comp.remove_instruction(instr)
                changed = True
    return changed


def remove_unreachable_computations(module: HloModule) -> bool:
    """Drops computations that no instruction reachable from the entry calls."""
    reachable = {id(c) for c in module.computations_post_order()}
    dead = [c for c in module.computations if id(c) not in reachable]
    for comp in dead:
        module.remove_computation(comp)
    return bool(dead)


@register_pass
class DCE(HloModulePass):
    """Removes dead instructions and unreachable computations.

    An instruction is dead when it has no users, is not a root, is not a
    parameter (computation signatures never change, so the entry keeps every
    parameter) and has no side effect. Returns True iff anything was removed.
    """

    name = "dce"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations_post_order():
            changed |= remove_dead_instructions(comp)
        changed |= remove_unreachable_computations(module)
        return changed
