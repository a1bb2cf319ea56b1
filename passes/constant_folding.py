"""Constant folding with the reference evaluator."""
from __future__ import annotations

import numpy as np

from ..hlo import EvaluationError, HloComputation, HloInstruction, HloModule, numpy_dtype
from ..hlo.evaluator import evaluate_instruction

from .hlo_utils import new_instruction
from .pass_base import HloModulePass, register_pass

# Ops that are cheaper to keep than to materialize: a broadcast of a scalar or an
# iota becomes a loop in a fused kernel, while a literal is memory traffic (and
# text). Control flow is not folded here either.
NEVER_FOLDED = frozenset({"broadcast", "iota", "parameter", "constant", "tuple",
                          "get-tuple-element", "while", "conditional", "call", "fusion",
                          "custom-call", "opt-barrier"})


def can_fold(instr: HloInstruction, max_elements: int) -> bool:
    # A per-device op (a collective, replica-id, partition-id) has no one value to fold:
    # all-reduce(constant) is N times the constant on N devices.
    return (instr.opcode not in NEVER_FOLDED and not instr.has_side_effect()
            and not instr.info.per_device
            and instr.shape.is_array and instr.shape.numel <= max_elements
            and all(op.opcode == "constant" and op.literal is not None for op in instr.operands))


def fold(instr: HloInstruction) -> HloInstruction | None:
    """A constant with the value of `instr`, placed before it; None if it cannot be evaluated."""
    try:
        value = evaluate_instruction(instr, [op.literal for op in instr.operands])
    except (EvaluationError, ArithmeticError, ValueError, TypeError, NotImplementedError):
        return None        # the evaluator lacks this op or rejects the input: keep it
    if isinstance(value, tuple):
        return None
    literal = np.asarray(value, dtype=numpy_dtype(instr.shape.element_type))
    literal = literal.reshape(instr.shape.dims)
    return new_instruction(instr.parent, "constant", instr.shape, before=instr, literal=literal)


def fold_computation(comp: HloComputation, max_elements: int) -> bool:
    changed = False
    for instr in comp.post_order():
        if not can_fold(instr, max_elements):
            continue
        constant = fold(instr)
        if constant is None:
            continue
        comp.replace_instruction(instr, constant)
        changed = True
    return changed


@register_pass
class ConstantFolding(HloModulePass):
    """Replaces instructions whose operands are all constants by their value.

    Values come from the reference evaluator, so folding follows XLA's CPU
    semantics exactly (denormals flushed, integer division by zero defined).
    Never folds side-effecting ops, per-device ops (collectives, replica-id,
    partition-id), control flow, a broadcast or an iota
    (kept symbolic: cheaper than a literal), nor any result with more than
    `max_elements` elements. True iff anything was folded.
    """

    name = "constant-folding"

    def __init__(self, max_elements: int = 1024):
        self.max_elements = max_elements

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations_post_order():
            changed |= fold_computation(comp, self.max_elements)
        return changed
