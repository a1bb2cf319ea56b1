"""Structured control flow in traced functions: cond, while_loop, fori_loop.

    y = cond(x.sum() > 0, lambda x: x * 2, lambda x: -x, (x,))     # HLO conditional
    i, s = while_loop(lambda i, s: i < 10, lambda i, s: (i + 1, s * 2), (0, x))
    s = fori_loop(0, 10, lambda i, s: s + i, 0.0)                    # HLO while

Each body is a Python function traced once into its own `SubGraph` (a nested
trace) on symbolic parameters of the operands' shapes. A body may use tensors
of the enclosing traces; each such tensor is *captured*: it becomes an extra
parameter of the sub-graph and an extra input of the Cond / While node, so
every node's inputs stay in its own graph and the gradient sees the capture
as an ordinary input. The node keeps its bodies as `Branch` attributes; the
kernels in kernels/control_flow.py lower them to HLO sub-computations.

Loop bodies must return values of the loop variables' structure, shapes and
dtypes; branches of a cond must agree with each other. A mismatch is a
TypeError naming the variable (or output) and both types.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from . import ops, pytree
from .kernels import control_flow as _kernels  # noqa: F401  (registers Cond, While)
from .ops.core import is_python_scalar
from .tensor import Tensor
from .trace import Graph, current_graph, tracing, user_source_line


class SubGraph(Graph):
    """A nested trace (a cond branch or loop body) that captures outer tensors."""

    def __init__(self, name: str, parent: Graph):
        super().__init__(name)
        self.parent = parent
        self.captured: list[Tensor] = []           # parent tensors, one per capture param
        self._captures: dict[int, Tensor] = {}      # id(outer tensor) -> our parameter

    def add_node(self, op: str, inputs, attrs: dict) -> list[Tensor]:
        inputs = [self.capture(t) if isinstance(t, Tensor) else t for t in inputs]
        return super().add_node(op, inputs, attrs)

    def capture(self, t: Tensor) -> Tensor:
        """`t` as a tensor of this graph: itself, or the parameter capturing it."""
        if t.graph is self or not self.encloses(t.graph):
            return t                    # ours, or a leak that Graph.add_node reports
        if id(t) not in self._captures:
            outer = t if t.graph is self.parent else self.parent.capture(t)
            self.captured.append(outer)
            self._captures[id(t)] = self.parameter(t.shape, t.dtype)
        return self._captures[id(t)]

    def encloses(self, graph) -> bool:
        g = self.parent
        while g is not None:
            if g is graph:
                return True
            g = getattr(g, "parent", None)
        return False


@dataclass(eq=False)
class Branch:
    """A traced body: its graph, outputs (flat) and their pytree structure, and which
    node input each graph parameter reads (`input_index`, set by the node builder)."""
    graph: SubGraph
    outputs: list[Tensor]
    out_tree: tuple
    input_index: list[int] = field(default_factory=list)


def trace_function(fn, name: str, leaves, in_tree, parent: Graph) -> Branch:
    """`fn(*args)` traced into a new SubGraph, args of the leaves' shapes and dtypes."""
    graph = SubGraph(name, parent)
    with tracing(graph):
        params = [graph.parameter(t.shape, t.dtype) for t in leaves]
        args = pytree.unflatten(in_tree, params)
        result = fn(*args)
        out_leaves, out_tree = pytree.flatten(result)
        outputs = [graph.capture(ops.to_tensor(leaf)) for leaf in out_leaves]
    return Branch(graph, outputs, out_tree)


def _require_trace(what: str) -> Graph:
    graph = current_graph()
    if graph is None:
        raise RuntimeError(f"{what} builds traced control flow: call it inside a function "
                           "run by jit_compile (or grad)")
    return graph


def _flatten_operands(operands):
    leaves, tree = pytree.flatten(operands)
    return [ops.to_tensor(leaf) for leaf in leaves], tree


def _error(kind, message: str) -> Exception:
    where = user_source_line()
    return kind(message + (f"\n  at {where}" if where else ""))


# --- cond ---------------------------------------------------------------------------------

def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred else false_fn(*operands), as one HLO conditional.

    `operands` is a tuple of arguments (pytrees of tensors/arrays) or one value.
    A Python bool picks the branch at trace time. Both branches must return the
    same structure of shapes and dtypes.
    """
    args = operands if isinstance(operands, tuple) else (operands,)
    if isinstance(pred, (bool, np.bool_)):
        return true_fn(*args) if pred else false_fn(*args)
    graph = _require_trace("cond")
    pred = ops.to_tensor(pred)
    if pred.shape != ():
        raise _error(ValueError, f"cond: the predicate must be a scalar, got {pred.aval_text()}")
    if pred.dtype != np.bool_:
        pred = ops.cast(pred, "bool")
    leaves, in_tree = _flatten_operands(args)
    branches = [trace_function(fn, f"{graph.name}_cond_{label}", leaves, in_tree, graph)
                for fn, label in ((true_fn, "true"), (false_fn, "false"))]
    _check_branches_agree(*branches)
    n = len(leaves)
    inputs = [pred, *leaves]
    for branch in branches:
        start = len(inputs) - 1
        branch.input_index = list(range(n)) + list(range(start, start + len(
            branch.graph.captured)))
        inputs.extend(branch.graph.captured)
    outputs = graph.add_node("Cond", inputs, {"branches": tuple(branches)})
    return pytree.unflatten(branches[0].out_tree, outputs)


def _check_branches_agree(true_b: Branch, false_b: Branch) -> None:
    if true_b.out_tree != false_b.out_tree:
        raise _error(TypeError, f"cond: true_fn returns {pytree.describe(true_b.out_tree)} but "
                                f"false_fn returns {pytree.describe(false_b.out_tree)}")
    for i, (t, f) in enumerate(zip(true_b.outputs, false_b.outputs)):
        if (t.shape, t.dtype) != (f.shape, f.dtype):
            raise _error(TypeError, f"cond: output {i} is {t.aval_text()} in true_fn but "
                                    f"{f.aval_text()} in false_fn")


# --- while_loop and fori_loop -----------------------------------------------------------------

def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, maximum_iterations=None, name=None):
    """Runs `loop_vars = body(*loop_vars)` while `cond(*loop_vars)`, as HLO while.

    loop_vars is a tuple or list of loop variables (each a pytree of tensors,
    arrays or Python numbers; Python ints become int32, floats float32), or a
    single variable (then the functions take and return it directly). Returns
    the final values in the same structure.

    `maximum_iterations` (a Python int) stops the loop after that many iterations
    at most and makes it differentiable, as TF's XLA path requires: the gradient
    records up to that many states. shape_invariants, parallel_iterations,
    back_prop and swap_memory are TF's and change nothing here (shapes are static).
    """
    if maximum_iterations is None:
        return _while(cond, body, loop_vars, trip_count=None)
    if isinstance(maximum_iterations, Tensor) or not isinstance(
            maximum_iterations, numbers.Integral) or isinstance(maximum_iterations, bool):
        raise _error(TypeError, "while_loop: maximum_iterations must be a Python int "
                                f"(known at trace time), got {maximum_iterations!r:.60}")
    limit = max(int(maximum_iterations), 0)
    several = isinstance(loop_vars, (tuple, list))
    variables = tuple(loop_vars) if several else (loop_vars,)

    def counted_cond(i, *args):
        return ops.logical_and(i < limit, cond(*args))

    def counted_body(i, *args):
        result = body(*args)
        if not several:
            result = (result,)
        elif not isinstance(result, (tuple, list)):
            raise _error(TypeError, f"while_loop: body must return {len(variables)} loop "
                                    f"variables (the structure of loop_vars), got "
                                    f"{result!r:.80}")
        return (i + 1,) + tuple(result)

    names = ["the iteration counter"] + [f"loop variable {i}" for i in range(len(variables))]
    out = _while(counted_cond, counted_body, (ops.to_tensor(0, "int32"),) + variables,
                 trip_count=None, names=names, max_trip=limit)
    values = tuple(out[1:])
    return type(loop_vars)(values) if several else values[0]


def fori_loop(lower, upper, body_fn, init_val):
    """val = body_fn(i, val) for i in range(lower, upper); returns the final val.

    With Python int bounds the trip count is static, which makes the loop
    differentiable (see autodiff/grads_control_flow.py).
    """
    static = all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                 for v in (lower, upper))
    trip_count = max(int(upper) - int(lower), 0) if static else None
    lower = ops.to_tensor(lower, "int32") if static else ops.to_tensor(lower)
    _, val = _while(lambda i, val: i < upper,
                    lambda i, val: (i + 1, body_fn(i, val)),
                    (lower, init_val), trip_count=trip_count,
                    names=["the loop counter", "the loop value"])
    return val


def _while(cond_fn, body_fn, loop_vars, trip_count, names=None, max_trip=None):
    graph = _require_trace("while_loop")
    several = isinstance(loop_vars, (tuple, list))
    variables = tuple(loop_vars) if several else (loop_vars,)
    names = names or [f"loop variable {i}" for i in range(len(variables))]
    leaves, in_tree = pytree.flatten(variables)
    flat = [ops.to_tensor(leaf) for leaf in leaves]
    per_var = [pytree.flatten(v) for v in pytree.unflatten(in_tree, flat)]

    def checked_cond(*args):
        keep_going = ops.to_tensor(cond_fn(*args))
        if keep_going.shape != ():
            raise _error(TypeError, f"while_loop: cond_fn must return a scalar, got "
                                    f"{keep_going.aval_text()}")
        return ops.cast(keep_going, "bool")

    def checked_body(*args):
        result = body_fn(*args) if several else (body_fn(*args),)
        if not isinstance(result, (tuple, list)) or len(result) != len(variables):
            raise _error(TypeError, f"while_loop: body_fn must return {len(variables)} loop "
                                    f"variables (the structure of loop_vars), got {result!r:.80}")
        return tuple(_check_loop_variable(new, old, name)
                     for new, old, name in zip(result, per_var, names))

    cond_b = trace_function(checked_cond, f"{graph.name}_while_cond", flat, in_tree, graph)
    body_b = trace_function(checked_body, f"{graph.name}_while_body", flat, in_tree, graph)
    n, ncc = len(flat), len(cond_b.graph.captured)
    cond_b.input_index = list(range(n + ncc))
    body_b.input_index = list(range(n)) + list(range(n + ncc, n + ncc + len(
        body_b.graph.captured)))
    inputs = [*flat, *cond_b.graph.captured, *body_b.graph.captured]
    outputs = graph.add_node("While", inputs, {"cond": cond_b, "body": body_b,
                                               "num_vars": n, "trip_count": trip_count,
                                               "max_trip": max_trip})
    result = pytree.unflatten(in_tree, outputs)
    return type(loop_vars)(result) if several else result[0]


def _check_loop_variable(new, old, name: str):
    """`new` (a body result) as tensors of the structure, shapes and dtypes of `old`."""
    old_leaves, old_tree = old
    leaves, tree = pytree.flatten(new)
    if tree != old_tree:
        raise _error(TypeError, f"while_loop: body_fn changed the structure of {name} from "
                                f"{pytree.describe(old_tree)} to {pytree.describe(tree)}")
    tensors = []
    for j, (was, leaf) in enumerate(zip(old_leaves, leaves)):
        weak = is_python_scalar(leaf)
        now = ops.to_tensor(leaf, was.dtype if weak else None)
        if (now.shape, now.dtype) != (was.shape, was.dtype):
            leaf_name = f" (leaf {j})" if len(old_leaves) > 1 else ""
            raise _error(TypeError, f"while_loop: body_fn changed {name}{leaf_name} from "
                                    f"{was.aval_text()} to {now.aval_text()}")
        tensors.append(now)
    return pytree.unflatten(tree, tensors)
