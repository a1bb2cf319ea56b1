"""Call inlining: replaces `call` instructions by the body of the called computation."""
from __future__ import annotations

from collections import Counter

from ..hlo import HloComputation, HloInstruction, HloModule

from .hlo_utils import in_layout
from .pass_base import HloModulePass, register_pass


def inline_call(call: HloInstruction, only_caller: bool = False,
                callee: HloComputation | None = None) -> HloInstruction:
    """Puts the callee's instructions before `call`, with its parameters bound to the
    call's operands; the call's users then read the callee's root. Returns that root.

    With `only_caller` (no other instruction refers to the callee) the
    instructions are moved, keeping their names, and the callee is removed;
    otherwise they are cloned. `callee`: the called computation when `call` is not a
    `call` (a fusion's `calls`).
    """
    comp = call.parent
    callee = callee if callee is not None else call.to_apply
    value: dict[int, HloInstruction] = {}
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            # A parameter declared in another layout than its argument's: the callee's
            # instructions (a bitcast) read it in the parameter's layout (`in_layout`).
            value[id(instr)] = in_layout(call.operands[instr.parameter_number], instr.shape,
                                         comp, before=call)
        elif only_caller:
            for i, op in enumerate(list(instr.operands)):
                instr.replace_operand(i, value[id(op)])
            comp.move_instruction(instr, before=call)
            value[id(instr)] = instr
        else:
            value[id(instr)] = comp.clone_instruction(instr, [value[id(o)] for o in instr.operands],
                                                      before=call)
    # The call's users read its declared layout, which the callee's root need not have.
    root = in_layout(value[id(callee.root)], call.shape, comp, before=call)
    call.replace_all_uses_with(root)
    comp.remove_instruction(call)
    if only_caller:
        callee.parent.remove_computation(callee)
    return root


def inline_calls(comp: HloComputation, references: Counter) -> bool:
    calls = [i for i in comp.instructions if i.opcode == "call" and i.to_apply is not None]
    for call in calls:
        inline_call(call, only_caller=references[id(call.to_apply)] == 1)
    return bool(calls)


@register_pass
class CallInliner(HloModulePass):
    """Inlines every `call` (JAX emits them for jnp helpers such as `clip`).

    Callees are inlined bottom-up, so nested calls disappear in one run. A
    callee called once is moved (names kept) and removed; one called from
    several places is cloned and left for DCE. True iff any call was inlined.
    """

    name = "call-inliner"

    def run(self, module: HloModule) -> bool:
        references = Counter(id(callee) for instr in module.instructions()
                             for callee in instr.called_computations())
        changed = False
        for comp in module.computations_post_order():
            if not comp.is_fusion_computation:
                changed |= inline_calls(comp, references)
        return changed
