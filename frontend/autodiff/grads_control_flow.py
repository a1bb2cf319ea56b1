"""Gradients of Cond and of While loops with a static trip count (fori_loop).

Cond: the gradient is another cond on the same predicate whose branches run
the VJP of the corresponding forward branch (replayed on the operands) and
return one cotangent per float operand; a branch that does not use an
operand returns zeros for it.

While with a static trip count N (fori_loop with Python int bounds), or at most N
iterations (while_loop with maximum_iterations=N, whose counter says how many ran;
the iterations past it are skipped by a cond in both loops below): the
forward loop is run again while recording the loop variables at the start of
each iteration in [N, ...] stacks (the "tape"); a second loop then walks the
iterations backwards, k = N-1 .. 0, replaying the body on the recorded
state k and pulling the cotangent of the variables through its VJP.
Cotangents of values the body captured add up over the iterations. A loop
whose trip count is not static has no gradient (a clear error).

    forward:   v0 -> body -> v1 -> body -> ... -> vN
    tape:      stack[k] = v_k
    backward:  ct_vN -> body'(stack[N-1]) -> ... -> body'(stack[0]) -> ct_v0
"""
from __future__ import annotations

from .. import ops
from ..control_flow import cond, fori_loop
from ..trace import current_graph
from .backprop import is_differentiable, vjp
from .registry import NoGradientError, register_gradient


def replay(branch, inputs) -> list:
    """Records `branch`'s nodes again in the current trace, on `inputs` (one per
    parameter of its graph); returns the new outputs."""
    graph = current_graph()
    values = {id(p): t for p, t in zip(branch.graph.params, inputs)}
    for node in branch.graph.reachable_nodes(branch.outputs):
        outs = graph.add_node(node.op, [values[id(t)] for t in node.inputs], node.attrs)
        values.update(zip((id(t) for t in node.outputs), outs))
    return [values[id(t)] for t in branch.outputs]


def _body_vjp(branch, operands, float_out, cts):
    """{operand position: cotangent} of `branch` replayed on `operands` (all node
    operands), given cotangents `cts` of its outputs `float_out`."""
    inputs = [ops.identity(operands[i]) for i in branch.input_index]
    outputs = replay(branch, inputs)
    wrt = [k for k, t in enumerate(inputs) if is_differentiable(t)]
    grads = vjp(current_graph(), [outputs[i] for i in float_out], cts,
                [inputs[k] for k in wrt])
    result: dict[int, object] = {}
    for k, g in zip(wrt, grads):
        i = branch.input_index[k]
        result[i] = g if i not in result else result[i] + g
    return result


@register_gradient("Cond")
def _cond_grad(node, grads):
    pred, operands = node.inputs[0], node.inputs[1:]
    float_in = [i for i, t in enumerate(operands) if is_differentiable(t)]
    float_out = [i for i, t in enumerate(node.outputs) if is_differentiable(t)]
    if not float_in or not float_out:
        return [None] * len(node.inputs)

    def branch_vjp(branch):
        def fn(primals, cts):
            got = _body_vjp(branch, primals, float_out, cts)
            return [got[i] if i in got else ops.zeros_like(primals[i]) for i in float_in]
        return fn

    true_b, false_b = node.attrs["branches"]
    cts = [grads[i] for i in float_out]
    out = cond(pred, branch_vjp(true_b), branch_vjp(false_b), (list(operands), cts))
    by_operand = dict(zip(float_in, out))
    return [None] + [by_operand.get(i) for i in range(len(operands))]


@register_gradient("While")
def _while_grad(node, grads):
    n, count = node.attrs["trip_count"], None
    if n is None and node.attrs.get("max_trip") is not None:
        # while_loop(maximum_iterations=N): at most N iterations, and the counter
        # (loop variable 0) says how many ran; iterations k >= count are skipped.
        n, count = node.attrs["max_trip"], node.outputs[0]
    if n is None:
        where = f"\n  at {node.source}" if node.source else ""
        raise NoGradientError("the gradient of a while_loop needs a static trip count: use "
                              "fori_loop with Python int bounds, or while_loop with "
                              f"maximum_iterations={where}")
    nv, body = node.attrs["num_vars"], node.attrs["body"]
    vars0, consts = node.inputs[:nv], node.inputs[nv:]
    fv = [i for i in range(nv) if is_differentiable(vars0[i])]
    fc = [j for j, c in enumerate(consts) if is_differentiable(c)]
    if n == 0:
        return [grads[i] if i in fv else None for i in range(nv)] + [None] * len(consts)
    stacks = _record_states(body, vars0, consts, n, count)

    def backward(j, state):
        k = (n - 1) - j

        def step(ct_vars, ct_consts):
            operands = [ops.apply("DynamicIndex", [s, k]) for s in stacks] + list(consts)
            got = _body_vjp(body, operands, fv, list(ct_vars))
            new_vars = [got.get(i, ops.zeros_like(vars0[i])) for i in fv]
            new_consts = [c + got[nv + j] if nv + j in got else c
                          for c, j in zip(ct_consts, fc)]
            return new_vars, new_consts

        if count is None:
            return step(*state)
        return cond(k < count, step, lambda cv, cc: (list(cv), list(cc)),
                    (list(state[0]), list(state[1])))

    ct_vars, ct_consts = fori_loop(0, n, backward, ([grads[i] for i in fv],
                                                    [ops.zeros_like(consts[j]) for j in fc]))
    result = [None] * len(node.inputs)
    for i, g in zip(fv, ct_vars):
        result[i] = g
    for j, g in zip(fc, ct_consts):
        result[nv + j] = g
    return result


def _record_states(body, vars0, consts, n: int, count=None) -> list:
    """The forward loop run again, stacking every variable at the start of each
    iteration: stacks[v][k] = variable v before iteration k (k < count, if given)."""
    def record(k, state):
        def step(values, stacks):
            stacks = [ops.apply("DynamicUpdateIndex", [s, v, k])
                      for s, v in zip(stacks, values)]
            operands = list(values) + list(consts)
            return list(replay(body, [operands[i] for i in body.input_index])), stacks

        if count is None:
            return step(*state)
        return cond(k < count, step, lambda v, s: (list(v), list(s)),
                    (list(state[0]), list(state[1])))

    empty = [ops.zeros((n,) + v.shape, v.dtype) for v in vars0]
    _, stacks = fori_loop(0, n, record, (list(vars0), empty))
    return stacks


@register_gradient("DynamicIndex")
def _dynamic_index_grad(node, grads):
    x, i = node.inputs
    return [ops.apply("DynamicUpdateIndex", [ops.zeros_like(x), grads[0], i]), None]


@register_gradient("DynamicUpdateIndex")
def _dynamic_update_index_grad(node, grads):
    x, v, i = node.inputs
    g = grads[0]
    return [ops.apply("DynamicUpdateIndex", [g, ops.zeros_like(v), i]),
            ops.apply("DynamicIndex", [g, i]), None]
