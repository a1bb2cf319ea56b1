"""Lowering: a traced graph becomes one HLO module, node by node through the registry.

    ENTRY parameters  = the graph's parameters (the flattened pytree leaves), in order
    instructions      = each live node's kernel, in program order
    ROOT              = the single output, or a tuple of the flattened outputs
    replica_count     = graph.num_replicas (the replicas one SPMD program runs on)

Nodes no output depends on are not lowered (their shapes were still checked at
trace time).
"""
from __future__ import annotations

from ..hlo import HloBuilder, Shape

from . import dtypes, registry
from .trace import Graph, describe_error


def lower_graph(graph: Graph, outputs, name: str | None = None):
    """The HLO module computing `outputs` (Tensors of `graph`) from the graph's parameters."""
    b = HloBuilder(_hlo_name(name or graph.name))
    values: dict[int, object] = {}
    for p in graph.params:
        shape = Shape(dtypes.hlo_name(p.dtype), p.shape)
        values[id(p)] = b.parameter(shape, f"arg{p.index}")
    for node in graph.reachable_nodes(outputs):
        inputs = [values[id(t)] for t in node.inputs]
        try:
            results = registry.lower_op(node.op, b, inputs, node.attrs)
        except (ValueError, TypeError) as e:       # abstract_eval passed: a kernel bug
            raise RuntimeError(describe_error(node.op, node.inputs, e, node.source)) from e
        for t, v in zip(node.outputs, results):
            values[id(t)] = v
    roots = [values[id(t)] for t in outputs]
    root = roots[0] if len(roots) == 1 else b.tuple(roots)
    module = b.build_module(root, _hlo_name(name or graph.name))
    if graph.num_replicas != 1:
        module.replica_count = graph.num_replicas
    return module


def _hlo_name(name: str) -> str:
    """A name the HLO text format accepts (letters, digits, '_', '.', '-')."""
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"f_{cleaned}"
