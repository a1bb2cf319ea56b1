"""Reference semantics of the ops that run other computations, and the unsupported ones.

call and fusion evaluate their called computation on their operands; while
runs `body` as long as `condition` holds; conditional picks a branch by a pred
(true -> the first branch) or an s32 index (out of range -> the last branch).
custom-call computes the targets XLA's CPU backend knows (hlo/custom_calls.py:
annotations, TopK, the oneDNN matmul/softmax/layernorm through their HLO
expansion) and refuses the others by name.
"""
from __future__ import annotations

import numpy as np

from . import custom_calls, eval_library
from .eval_common import EvaluationError
from .dtypes import numpy_dtype
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


@reference("scan")
def scan(instr, operands, ctx):
    """XLA's ScanExpander as a loop: step t reads slice t of each input along d (from
    the end when is_reverse), calls to_apply(slices..., carries...) -> (outputs...,
    carries...), and writes output slice t; outputs start as zeros (no steps: zeros)."""
    carries_n = instr.attrs.get("num_carries", 0)
    (d,) = instr.dims()
    inputs = list(operands[:len(operands) - carries_n])
    carries = list(operands[len(operands) - carries_n:])
    comp = instr.attrs["to_apply"]
    result_shapes = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    outputs = [np.zeros(s.dims, numpy_dtype(s.element_type))
               for s in result_shapes[:len(result_shapes) - carries_n]]
    length = inputs[0].shape[d] if inputs else 0
    for step in range(length):
        t = length - 1 - step if instr.attrs.get("is_reverse", False) else step
        value = ctx.call(comp, [np.take(x, t, axis=d) for x in inputs] + carries)
        parts = list(value) if comp.root.shape.is_tuple else [value]
        n_out = len(parts) - carries_n
        for out, part in zip(outputs, parts[:n_out]):
            index = [slice(None)] * out.ndim
            index[d] = t
            out[tuple(index)] = part
        carries = parts[n_out:]
    results = outputs + carries
    return tuple(results) if instr.shape.is_tuple else results[0]


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


# Custom-call targets: hlo/custom_calls.py says which we compute and how.
@reference("custom-call")
def custom_call(instr, operands, ctx):
    target = custom_calls.target_of(instr)
    if target in custom_calls.ONEDNN_TARGETS:      # checked as its expansion is built
        try:
            comp = _expansion(instr, ctx)
        except custom_calls.CustomCallError as e:
            raise EvaluationError(f"{instr.name}: {e}") from None
        return ctx.call(comp, list(operands))
    refusal = custom_calls.refusal(instr)
    if refusal is not None:
        raise EvaluationError(f"{instr.name}: {refusal}")
    if target == "TopK":
        return eval_library.topk(operands[0], instr.shape.tuple_shapes[0].dims[-1],
                                 custom_calls.topk_largest(instr))
    if target == "AllocateBuffer":
        return _zeros(instr.shape)
    return operands[0]


def _zeros(shape):
    if shape.is_tuple:
        return tuple(_zeros(s) for s in shape.tuple_shapes)
    return np.zeros(shape.dims, numpy_dtype(shape.element_type))


def _expansion(instr, ctx):
    """The custom-call's expansion, built once per instruction and evaluation (a
    while body may run it many times)."""
    cache = ctx.__dict__.setdefault("_custom_call_expansions", {})
    comp = cache.get(id(instr))
    if comp is None:
        comp = cache[id(instr)] = custom_calls.expansion(instr)
    return comp


@reference("rng-get-and-update-state")
def unsupported(instr, operands, ctx):
    raise EvaluationError(f"{instr.name}: {instr.opcode} is not supported by the evaluator")


@reference("send", "send-done", "recv", "recv-done", "infeed", "outfeed")
def transfer(instr, operands, ctx):
    raise EvaluationError(f"{instr.name}: {instr.opcode} exchanges data with another program "
                          f"or the host, which the evaluator does not model")
