"""Reverse-mode differentiation of a traced graph: the backward pass.

The graph's nodes are in program order, so walking them backwards visits
every node after all the nodes that use its outputs. Each visited node gets
the sum of the cotangents of its outputs and hands cotangents to its inputs
through its registered gradient function:

    forward:   x -> [Exp] -> e -> [Sum] -> y
    backward:  ct[y] = seed;  ct[e] = Sum'(ct[y]);  ct[x] = Exp'(ct[e])

Only nodes on a path from the `wrt` tensors to the outputs are visited, and
only floating-point tensors carry cotangents. The gradient ops are recorded
in the current trace, next to the forward ops, so one HLO module computes
both.
"""
from __future__ import annotations

import numpy as np

from .. import ops
from ..tensor import Tensor
from .registry import gradient_function


def is_differentiable(t: Tensor) -> bool:
    return np.issubdtype(t.dtype, np.floating)


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


def vjp(graph, outputs, seeds, wrt) -> list[Tensor]:
    """Cotangents of `wrt` given cotangents `seeds` of `outputs` (Tensors of `graph`).

    A wrt tensor that the outputs do not depend on gets zeros.
    """
    cotangent: dict[int, Tensor] = {}
    for out, seed in zip(outputs, seeds):
        if seed is not None and is_differentiable(out):
            _accumulate(cotangent, out, seed)
    nodes, active = active_nodes(graph, outputs, wrt)
    for node in reversed(nodes):
        out_grads = [cotangent.get(id(t)) for t in node.outputs]
        if all(g is None for g in out_grads):
            continue
        fn = gradient_function(node.op, node.source)
        if fn is None:
            continue
        out_grads = [g if g is not None or not is_differentiable(t) else ops.zeros_like(t)
                     for g, t in zip(out_grads, node.outputs)]
        in_grads = list(fn(node, out_grads))
        if len(in_grads) != len(node.inputs):
            raise RuntimeError(f"gradient of {node.op} returned {len(in_grads)} values for "
                               f"{len(node.inputs)} inputs")
        for t, g in zip(node.inputs, in_grads):
            if g is not None and id(t) in active:
                _accumulate(cotangent, t, _checked(node, t, g))
    return [cotangent.get(id(t)) if id(t) in cotangent else ops.zeros_like(t) for t in wrt]


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
