"""Reference semantics of the ops that run other computations, and the unsupported ones.

call and fusion evaluate their called computation on their operands; while
runs `body` as long as `condition` holds; conditional picks a branch by a pred
(true -> the first branch) or an s32 index (out of range -> the last branch).
custom-call computes the targets XLA's CPU backend knows (TopK, sharding
annotations) and refuses the others by name.
"""
from __future__ import annotations

import numpy as np

from . import eval_library
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


# Custom-call targets with a meaning of their own (XLA's CPU backend knows them):
# annotations that pass their operand through, and TopK (the k largest of each row,
# as XLA's TopkRewriter emits it). Every other target is refused with its name.
IDENTITY_TARGETS = frozenset({"Sharding", "xla.sdy.Sharding", "xla.sdy.FuncResultSharding",
                              "SPMDFullToShardShape", "SPMDShardToFullShape"})
KNOWN_TARGETS = IDENTITY_TARGETS | {"TopK"}


def unsupported_target(instr) -> str | None:
    """The one-line refusal of a custom-call whose target we do not compute, else None."""
    target = instr.attrs.get("custom_call_target", "?")
    if target in KNOWN_TARGETS:
        if target in IDENTITY_TARGETS and (len(instr.operands) != 1
                                           or instr.operands[0].shape != instr.shape):
            return f"custom-call {target!r} changes the shape (one device has nothing to split)"
        if target == "TopK" and not _topk_call_fits(instr):
            return f"custom-call 'TopK' must map x[..., n] to (values[..., k], s32 indices[..., k])"
        return None
    return f"unsupported custom-call target {target!r}"


def _topk_call_fits(instr) -> bool:
    if len(instr.operands) != 1 or not instr.shape.is_tuple or len(instr.shape.tuple_shapes) != 2:
        return False
    x = instr.operands[0].shape
    values, indices = instr.shape.tuple_shapes
    return (x.is_array and x.rank >= 1 and values.element_type == x.element_type
            and values.dims[:-1] == x.dims[:-1] and values.dims == indices.dims
            and indices.element_type == "s32" and values.dims[-1] <= x.dims[-1])


@reference("custom-call")
def custom_call(instr, operands, ctx):
    refusal = unsupported_target(instr)
    if refusal is not None:
        raise EvaluationError(f"{instr.name}: {refusal}")
    target = instr.attrs["custom_call_target"]
    if target == "TopK":
        return eval_library.topk(operands[0], instr.shape.tuple_shapes[0].dims[-1], True)
    return operands[0]


@reference("rng-get-and-update-state")
def unsupported(instr, operands, ctx):
    raise EvaluationError(f"{instr.name}: {instr.opcode} is not supported by the evaluator")
