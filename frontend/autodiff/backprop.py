"""Reverse-mode differentiation of a traced graph: the backward pass.

The graph's nodes are in program order, so walking them backwards visits
every node after all the nodes that use its outputs. Each visited node gets
the sum of the cotangents of its outputs and hands cotangents to its inputs
through its registered gradient function:

    forward:   x -> [Exp] -> e -> [Sum] -> y
    backward:  ct[y] = seed;  ct[e] = Sum'(ct[y]);  ct[x] = Exp'(ct[e])

Only nodes on a path from the `wrt` tensors to the outputs are visited, and
only floating-point and complex tensors carry cotangents. The gradient ops are
recorded in the current trace, next to the forward ops, so one HLO module
computes both.

Complex tensors follow TF's convention (grads_complex.py): the gradient
functions are written for reals (g * f'(x)); for an op with a complex input or
output that is not in grads_complex.HANDLES_COMPLEX (a holomorphic one: add,
multiply, exp, matmul, reshape, ...) the step conjugates the cotangents going in
and coming out, which gives g * conj(f'(z)).
"""
from __future__ import annotations

from .. import dtypes, ops
from ..tensor import Tensor
from .grads_complex import HANDLES_COMPLEX
from .registry import gradient_function


def is_differentiable(t: Tensor) -> bool:
    """Float and complex tensors (bfloat16 included: numpy does not count it as
    np.floating)."""
    return dtypes.kind(t.dtype) in ("float", "complex")


def _is_complex(t: Tensor) -> bool:
    return dtypes.kind(t.dtype) == "complex"


def _conjugated(fn):
    """The gradient of a holomorphic op in TF's convention (grads_complex.py) from its
    real-valued gradient function: conj(fn(conj(g))), i.e. g * conj(f'(z))."""
    def gradient(node, grads):
        flip = [ops.math.conj(g) if g is not None and _is_complex(g) else g for g in grads]
        return [ops.math.conj(g) if g is not None and _is_complex(ops.to_tensor(g)) else g
                for g in fn(node, flip)]
    return gradient


def active_nodes(graph, outputs, wrt) -> tuple[list, set]:
    """Nodes on a path from `wrt` to `outputs`, in program order, and the ids of the
    float tensors that depend on `wrt` (the only ones that need a cotangent)."""
    active = {id(t) for t in wrt}
    on_path = []
    for node in graph.reachable_nodes(outputs):
        if any(id(t) in active for t in node.inputs):
            on_path.append(node)
            active.update(id(t) for t in node.outputs if is_differentiable(t))
    return on_path, active


def vjp(graph, outputs, seeds, wrt, on_ready=None) -> list[Tensor]:
    """Cotangents of `wrt` given cotangents `seeds` of `outputs` (Tensors of `graph`).

    A wrt tensor that the outputs do not depend on gets zeros. `on_ready(i, ct)`, if
    given, is called once per wrt tensor as soon as its cotangent is complete: right
    after the backward step of its first consumer in program order (the last
    contribution), so ops it records land in the middle of the backward pass
    (gradient all-reduce buckets, frontend/bucketing.py). The list returned holds
    the same cotangents.
    """
    cotangent: dict[int, Tensor] = {}
    for out, seed in zip(outputs, seeds):
        if seed is not None and is_differentiable(out):
            _accumulate(cotangent, out, seed)
    nodes, active = active_nodes(graph, outputs, wrt)
    # ready_after[k]: the wrt positions whose last contribution comes from nodes[k].
    ready_after: dict[int, list[int]] = {}
    if on_ready is not None:
        first_use = {}
        for k, node in enumerate(nodes):
            for t in node.inputs:
                first_use.setdefault(id(t), k)
        for i, t in enumerate(wrt):
            if id(t) in first_use:
                ready_after.setdefault(first_use[id(t)], []).append(i)
    for k in range(len(nodes) - 1, -1, -1):
        node = nodes[k]
        _backward_step(node, cotangent, active)
        for i in ready_after.get(k, ()):
            on_ready(i, _result(cotangent, wrt[i]))
    results = [_result(cotangent, t) for t in wrt]
    if on_ready is not None:
        used = {i for ready in ready_after.values() for i in ready}
        for i, t in enumerate(wrt):
            if i not in used:
                on_ready(i, results[i])
    return results


def _result(cotangent: dict, t: Tensor) -> Tensor:
    if id(t) not in cotangent:
        cotangent[id(t)] = ops.zeros_like(t)      # made once: on_ready and the result agree
    return cotangent[id(t)]


def _backward_step(node, cotangent: dict, active: set) -> None:
    """Hands the cotangents of node's outputs to its inputs (through its gradient)."""
    out_grads = [cotangent.get(id(t)) for t in node.outputs]
    if all(g is None for g in out_grads):
        return
    fn = gradient_function(node.op, node.source)
    if fn is None:
        return
    if node.op not in HANDLES_COMPLEX and any(map(_is_complex, [*node.inputs, *node.outputs])):
        fn = _conjugated(fn)
    out_grads = [g if g is not None or not is_differentiable(t) else ops.zeros_like(t)
                 for g, t in zip(out_grads, node.outputs)]
    in_grads = list(fn(node, out_grads))
    if len(in_grads) != len(node.inputs):
        raise RuntimeError(f"gradient of {node.op} returned {len(in_grads)} values for "
                           f"{len(node.inputs)} inputs")
    for t, g in zip(node.inputs, in_grads):
        if g is not None and id(t) in active:
            _accumulate(cotangent, t, _checked(node, t, g))


def _checked(node, t: Tensor, g) -> Tensor:
    """The cotangent of input `t` as a Tensor of t's shape and dtype."""
    g = ops.to_tensor(g)
    if g.dtype != t.dtype:
        g = ops.cast(g, t.dtype)
    if g.shape != t.shape:
        raise RuntimeError(f"gradient of {node.op} gave {g.aval_text()} for input "
                           f"{t.aval_text()} (a bug in its gradient function)")
    return g


def _accumulate(cotangent: dict, t: Tensor, g: Tensor) -> None:
    previous = cotangent.get(id(t))
    cotangent[id(t)] = g if previous is None else ops.add(previous, g)
