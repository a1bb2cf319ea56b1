"""Control-flow kernels: Cond -> HLO `conditional`, While -> HLO `while`, and the
dynamic indexing ops the loop gradient uses to record and replay its state.

A Cond or While node carries its bodies as traced sub-graphs (`Branch`
objects of frontend/control_flow.py, in the node's attributes). Each body
becomes one HLO sub-computation that takes the whole operand list as ONE
tuple parameter (HLO branches and loop bodies take a single parameter) and
picks out the elements its own parameters stand for:

    Cond(pred, a, b, cap_t, cap_f)   ->  conditional(pred, (a, b, cap_t, cap_f) x2)
        true branch reads elements 0, 1, 2; false branch reads 0, 1, 3
    While(v0, v1, caps...)           ->  while((v0, v1, caps...))
        body returns (v0', v1', caps...): captured values ride along unchanged

DynamicIndex(x, i) is x[i] along dim 0 and DynamicUpdateIndex(x, v, i) is x
with x[i] = v, for a scalar integer i known only at run time (clamped into
range, as HLO dynamic-slice is).
"""
from __future__ import annotations

from ...hlo import Shape

from .. import registry
from ..registry import XlaOpKernel, register_xla_op
from .common import is_integer


def lower_branch(b, branch, operand_shapes, name: str):
    """Emits `branch` into a sub-builder whose one parameter is the tuple of the
    node's operands. Returns (sub-builder, the parameter, the output values)."""
    sub = b.sub_builder(name)
    state = sub.parameter(Shape.tuple_of(operand_shapes), "state")
    position = {id(p): i for p, i in zip(branch.graph.params, branch.input_index)}
    values = {}

    def value(t):
        if id(t) not in values:          # a parameter: read its tuple element once
            values[id(t)] = sub.get_tuple_element(state, position[id(t)])
        return values[id(t)]

    for node in branch.graph.reachable_nodes(branch.outputs):
        results = registry.lower_op(node.op, sub, [value(t) for t in node.inputs], node.attrs)
        for t, v in zip(node.outputs, results):
            values[id(t)] = v
    return sub, state, [value(t) for t in branch.outputs]


@register_xla_op("Cond")
class Cond(XlaOpKernel):
    """Inputs (pred, operands...); attribute `branches` = (true, false) Branches."""

    def compile(self, ctx):
        b = ctx.builder
        pred, operands = ctx.input(0), ctx.inputs[1:]
        if pred.shape != Shape.scalar("pred"):
            raise TypeError(f"the predicate must be a bool scalar, got {pred.shape}")
        shapes = [o.shape for o in operands]
        comps = []
        for branch, label in zip(ctx.attr("branches"), ("true", "false")):
            sub, _, outputs = lower_branch(b, branch, shapes, f"cond_{label}")
            comps.append(sub.build(sub.tuple(outputs)))
        state = b.tuple(operands)
        result = b.conditional(pred, comps, [state, state])
        for i in range(len(result.shape.tuple_shapes)):
            ctx.set_output(i, b.get_tuple_element(result, i))


@register_xla_op("While")
class While(XlaOpKernel):
    """Inputs (loop variables..., captured values...); attributes `cond` and `body`
    (Branches over all inputs), `num_vars`, `trip_count` (None if not static)."""

    def compile(self, ctx):
        b = ctx.builder
        state_in = ctx.inputs
        shapes = [v.shape for v in state_in]
        nv = ctx.attr("num_vars")
        cond_b, _, (keep_going,) = lower_branch(b, ctx.attr("cond"), shapes, "while_cond")
        if keep_going.shape != Shape.scalar("pred"):
            raise TypeError(f"cond_fn must return a bool scalar, got {keep_going.shape}")
        cond = cond_b.build(keep_going)
        body_b, state, new_vars = lower_branch(b, ctx.attr("body"), shapes, "while_body")
        carried = [body_b.get_tuple_element(state, i) for i in range(nv, len(state_in))]
        body = body_b.build(body_b.tuple(list(new_vars) + carried))
        result = b.while_(cond, body, b.tuple(state_in))
        for i in range(nv):
            ctx.set_output(i, b.get_tuple_element(result, i))


def _index_operands(ctx, x, i):
    if x.shape.rank < 1:
        raise ValueError(f"needs a tensor of rank >= 1, got {list(x.shape.dims)}")
    if i.shape.rank != 0 or not is_integer(i.shape.element_type):
        raise TypeError(f"the index must be an integer scalar, got {i.shape}")
    zero = ctx.builder.constant(0, i.shape.element_type)
    return [i] + [zero] * (x.shape.rank - 1)


@register_xla_op("DynamicIndex")
class DynamicIndex(XlaOpKernel):
    """x[i] along dim 0 (inputs x, i)."""

    def compile(self, ctx):
        b, (x, i) = ctx.builder, ctx.inputs
        starts = _index_operands(ctx, x, i)
        row = b.dynamic_slice(x, starts, [1, *x.shape.dims[1:]])
        ctx.set_output(0, b.reshape(row, x.shape.dims[1:]))


@register_xla_op("DynamicUpdateIndex")
class DynamicUpdateIndex(XlaOpKernel):
    """x with x[i] = v along dim 0 (inputs x, v, i)."""

    def compile(self, ctx):
        b, (x, v, i) = ctx.builder, ctx.inputs
        starts = _index_operands(ctx, x, i)
        if tuple(v.shape.dims) != tuple(x.shape.dims[1:]):
            raise ValueError(f"update {list(v.shape.dims)} must be a row of "
                             f"{list(x.shape.dims)}")
        row = b.reshape(v, [1, *v.shape.dims])
        ctx.set_output(0, b.dynamic_update_slice(x, row, starts))
