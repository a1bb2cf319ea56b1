"""Kernels of the collective ops: one traced node -> one HLO collective.

    CollectiveReduceV2(x)      all-reduce(x), to_apply=<merge op>   (then / group_size
                               for final_op "Div")
    CollectiveReduceStart(x)   all-reduce-start(x)                  the two halves of an
    CollectiveReduceDone(s)    all-reduce-done(s)                   all-reduce (buckets)
    CollectiveGatherV2(x)      all-gather(x), dimensions={0}
    CollectiveBcastV2(x)       collective-broadcast(x)              the group's first
                                                                    replica's x to all
    ReplicaId()                convert(replica-id()) to s32

Every collective node carries `replica_groups` (tuples of replica ids, the groups
ops/collective.py chose) and becomes a cross-replica collective: no channel_id, so
the ids are replicas of a module with `replica_count` = the trace's replicas and one
partition (hlo/collectives.py). Arguments were checked by ops/collective.py; these
kernels only emit.
"""
from __future__ import annotations

from ...hlo import Shape
from ...hlo.ir import ReplicaGroups
from ..registry import XlaOpKernel, register_xla_op

# TF's merge_op names -> the HLO opcode of the reducer computation.
MERGE_OPCODES = {"Add": "add", "Mul": "multiply", "Min": "minimum", "Max": "maximum"}


def _groups(ctx) -> ReplicaGroups:
    return ReplicaGroups(tuple(tuple(g) for g in ctx.attr("replica_groups")))


def _reducer(ctx, opcode: str, etype: str):
    return ctx.builder.scalar_computation(f"{opcode}_{etype}", opcode, etype)


@register_xla_op("CollectiveReduceV2")
class CollectiveReduce(XlaOpKernel):
    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        etype = x.shape.element_type
        opcode = MERGE_OPCODES[ctx.attr("merge_op")]
        out = b.op("all-reduce", [x], to_apply=_reducer(ctx, opcode, etype),
                   replica_groups=_groups(ctx))
        if ctx.attr("final_op") == "Div":
            # TF's Div: the reduced value divided by the group size (integers
            # truncate toward zero, as HLO's divide does).
            out = b.divide(out, ctx.full_like(ctx.attr("group_size"), out))
        ctx.set_output(0, out)


@register_xla_op("CollectiveReduceStart")
class CollectiveReduceStart(XlaOpKernel):
    def compile(self, ctx):
        x = ctx.input(0)
        reducer = _reducer(ctx, ctx.attr("reduce"), x.shape.element_type)
        ctx.set_output(0, ctx.builder.op("all-reduce-start", [x], to_apply=reducer,
                                         replica_groups=_groups(ctx)))


@register_xla_op("CollectiveReduceDone")
class CollectiveReduceDone(XlaOpKernel):
    def compile(self, ctx):
        ctx.set_output(0, ctx.builder.op("all-reduce-done", [ctx.input(0)]))


@register_xla_op("CollectiveGatherV2")
class CollectiveGather(XlaOpKernel):
    def compile(self, ctx):
        x = ctx.input(0)
        dims = list(x.shape.dims)
        dims[0] *= ctx.attr("group_size")
        result = Shape(x.shape.element_type, tuple(dims))
        ctx.set_output(0, ctx.builder.op("all-gather", [x], result, dimensions=(0,),
                                         replica_groups=_groups(ctx)))


@register_xla_op("CollectiveBcastV2")
class CollectiveBroadcast(XlaOpKernel):
    def compile(self, ctx):
        ctx.set_output(0, ctx.builder.op("collective-broadcast", [ctx.input(0)],
                                         replica_groups=_groups(ctx)))


@register_xla_op("ReplicaId")
class ReplicaId(XlaOpKernel):
    def compile(self, ctx):
        b = ctx.builder
        ctx.set_output(0, b.convert(b.op("replica-id", []), "s32"))
