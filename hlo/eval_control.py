"""Reference semantics of the ops that run other computations, and the unsupported ones.

call and fusion evaluate their called computation on their operands; while
runs `body` as long as `condition` holds; conditional picks a branch by a pred
(true -> the first branch) or an s32 index (out of range -> the last branch).
Ops with side effects or randomness have no reference value and raise.
"""
from __future__ import annotations

import numpy as np

from .eval_common import EvaluationError
from .opcodes import reference


@reference("call")
def call(instr, operands, ctx):
    return ctx.call(instr.attrs["to_apply"], operands)


@reference("fusion")
def fusion(instr, operands, ctx):
    return ctx.call(instr.attrs["calls"], operands)


@reference("while")
def while_loop(instr, operands, ctx):
    condition, body = instr.attrs["condition"], instr.attrs["body"]
    state = operands[0]
    while bool(ctx.call(condition, [state])):
        state = ctx.call(body, [state])
    return state


def branches_of(instr) -> list:
    """The branch computations in selector order (a pred selects index 0 when true)."""
    if "branch_computations" in instr.attrs:
        return list(instr.attrs["branch_computations"])
    return [instr.attrs["true_computation"], instr.attrs["false_computation"]]


@reference("conditional")
def conditional(instr, operands, ctx):
    selector, args = operands[0], operands[1:]
    branches = branches_of(instr)
    if selector.dtype == np.bool_:
        index = 0 if bool(selector) else 1
    else:
        index = int(selector)
        if index < 0 or index >= len(branches):
            index = len(branches) - 1
    return ctx.call(branches[index], [args[index]])


@reference("custom-call", "after-all", "rng", "rng-bit-generator", "rng-get-and-update-state")
def unsupported(instr, operands, ctx):
    what = instr.opcode
    if what == "custom-call":
        what += f" {instr.attrs.get('custom_call_target', '?')!r}"
    raise EvaluationError(f"{instr.name}: {what} is not supported by the evaluator")
