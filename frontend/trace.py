"""Tracing: a Python function run on symbolic tensors records a graph of ops.

While a function is traced, every op the user calls appends one `Node` to
the current `Graph`: the op name (a registered kernel), its input tensors,
its attributes and its output tensors. Nodes are appended in program order,
so the node list is already a topological order; lowering walks it forward,
and a gradient registry can walk it backwards (each node has everything a
TensorFlow-style gradient function needs: op, inputs, attrs, outputs).

    graph = Graph("f")
    with tracing(graph):
        x = graph.parameter((2, 3), np.float32)
        y = graph.add_node("Relu", [x], {})[0]

Output shapes come from the kernel itself (`registry.abstract_eval`), so an
op that cannot accept its inputs fails here, at the user's line: the error
names the op, the input shapes and the first stack frame outside frontend/.
"""
from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading
from dataclasses import dataclass, field

import numpy as np

from ..hlo import ShapeError

from . import registry
from .tensor import Tensor

_FRONTEND_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# One stack of traces per thread: threads may trace (jit_compile) at the same time.
_local = threading.local()


def _stack() -> list["Graph"]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


@dataclass(eq=False)
class Node:
    """One traced op: `outputs = op(*inputs, **attrs)`, recorded at `source`."""
    op: str
    inputs: list[Tensor]
    attrs: dict
    outputs: list[Tensor] = field(default_factory=list)
    source: str = ""

    def __repr__(self) -> str:
        ins = ", ".join(t.aval_text() for t in self.inputs)
        return f"Node({self.op}({ins}) -> {[t.aval_text() for t in self.outputs]})"


class Graph:
    """The ops of one traced function, in program order, and its parameters."""

    def __init__(self, name: str = "main"):
        self.name = name
        self.nodes: list[Node] = []
        self.params: list[Tensor] = []
        # The replicas the traced program runs on (one SPMD program, every replica runs
        # all of it); strategies of frontend/distribute.py set it, lowering writes it as
        # the module's replica_count, collective ops (ops/collective.py) read it.
        self.num_replicas = 1
        # What the collective ops of this trace used, to check TF's key rules
        # (ops/collective.py): group_key -> group_size, (group_key, instance_key) -> use.
        self.collective_keys: dict = {}

    def parameter(self, shape, dtype) -> Tensor:
        """A symbolic input (the next ENTRY parameter)."""
        t = Tensor(self, None, len(self.params), tuple(int(d) for d in shape), np.dtype(dtype))
        self.params.append(t)
        return t

    def add_node(self, op: str, inputs, attrs: dict) -> list[Tensor]:
        """Records `op(inputs, attrs)` and returns its output tensors."""
        inputs = list(inputs)
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"{op}: input {t!r} is not a traced Tensor")
            if t.graph is not self:
                raise ValueError(f"{op}: input {t.aval_text()} belongs to another trace "
                                 "(a tensor leaked out of the function that made it)")
        source = user_source_line()
        try:
            avals = registry.abstract_eval(op, [(t.shape, t.dtype) for t in inputs], attrs)
        except (ShapeError, ValueError, TypeError, IndexError) as e:
            kind = next(k for k in (TypeError, IndexError, ValueError) if isinstance(e, k))
            raise kind(describe_error(op, inputs, e, source)) from None
        node = Node(op, inputs, dict(attrs), source=source)
        node.outputs = [Tensor(self, node, i, shape, dt) for i, (shape, dt) in enumerate(avals)]
        self.nodes.append(node)
        return node.outputs

    def reachable_nodes(self, outputs) -> list[Node]:
        """The nodes `outputs` depend on, in program order (dead code left out)."""
        live: set[int] = set()
        work = [t.node for t in outputs if t.node is not None]
        while work:
            node = work.pop()
            if id(node) in live:
                continue
            live.add(id(node))
            work.extend(t.node for t in node.inputs if t.node is not None)
        return [n for n in self.nodes if id(n) in live]


    def to_text(self) -> str:
        """The graph as lines `%3 = Relu(%1) {attrs}  : float32[2,3]` (for reading)."""
        names: dict[int, str] = {id(p): f"%arg{p.index}" for p in self.params}
        params = ", ".join(f"{names[id(p)]}: {p.aval_text()}" for p in self.params)
        lines = [f"graph {self.name}({params})"]
        for node in self.nodes:
            for t in node.outputs:
                names[id(t)] = f"%{len(names) - len(self.params)}"
            outs = ", ".join(names[id(t)] for t in node.outputs)
            ins = ", ".join(names.get(id(t), "?") for t in node.inputs)
            attrs = ", ".join(f"{k}={_short(v)}" for k, v in node.attrs.items())
            types = ", ".join(t.aval_text() for t in node.outputs)
            lines.append(f"  {outs} = {node.op}({ins})" + (f" {{{attrs}}}" if attrs else "")
                         + f"  : {types}")
        return "\n".join(lines)


def _short(value) -> str:
    """An attribute value for to_text: arrays by shape and dtype, the rest by repr."""
    if isinstance(value, np.ndarray) and value.size > 4:
        return f"<{value.dtype}{list(value.shape)}>"
    return repr(value.tolist() if isinstance(value, np.ndarray) else value)


def describe_error(op: str, inputs, error: Exception, source: str) -> str:
    shapes = ", ".join(t.aval_text() for t in inputs) or "no inputs"
    where = f"\n  at {source}" if source else ""
    return f"{op}: {error} (inputs: {shapes}){where}"


def user_source_line() -> str:
    """"file:line: code" of the innermost frame outside frontend/ (the user's line)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_FRONTEND_DIR):
            code = linecache.getline(filename, frame.f_lineno).strip()
            return f"{filename}:{frame.f_lineno}: {code}"
        frame = frame.f_back
    return ""


# --- the current trace ----------------------------------------------------------------

@contextlib.contextmanager
def tracing(graph: Graph):
    """Makes `graph` the current trace inside the `with` block."""
    _stack().append(graph)
    try:
        yield graph
    finally:
        _stack().pop()


def current_graph() -> Graph | None:
    stack = _stack()
    return stack[-1] if stack else None
