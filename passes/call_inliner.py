"""Call inlining: replaces `call` instructions by the body of the called computation."""
from __future__ import annotations

from hlo import HloComputation, HloInstruction, HloModule

from .hlo_utils import clone_instruction
from .pass_base import HloModulePass, register_pass


def inline_call(call: HloInstruction) -> HloInstruction:
    """Clones the callee's instructions before `call`, with its parameters bound to the
    call's operands; the call's users then read the cloned root. Returns that root."""
    comp = call.parent
    callee = call.to_apply
    value: dict[int, HloInstruction] = {}
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            value[id(instr)] = call.operands[instr.parameter_number]
            continue
        value[id(instr)] = clone_instruction(instr, comp, [value[id(o)] for o in instr.operands],
                                             before=call)
    root = value[id(callee.root)]
    call.replace_all_uses_with(root)
    comp.remove_instruction(call)
    return root


def inline_calls(comp: HloComputation) -> bool:
    calls = [i for i in comp.instructions if i.opcode == "call" and i.to_apply is not None]
    for call in calls:
        inline_call(call)
    return bool(calls)


@register_pass
class CallInliner(HloModulePass):
    """Inlines every `call` (JAX emits them for jnp helpers such as `clip`).

    Callees are inlined bottom-up, so nested calls disappear in one run; the
    callees, now unreachable, are left for DCE. True iff any call was inlined.
    """

    name = "call-inliner"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations_post_order():
            if not comp.is_fusion_computation:
                changed |= inline_calls(comp)
        return changed
