"""The SPMD partitioner's dot: three plans, the cheapest taken.

Dimensions of a dot: batch (in both operands and the result), contracting (in both
operands), and each operand's free dimensions (in the result). A plan follows one
sharding and makes the other operand (and the result) agree with it:

- follow the lhs's sharding: the rhs is resharded so that its batch and contracting
  dimensions are split exactly as the lhs's (its free dimensions whole); the local dot
  then gives, on each device, the partial sum of its result tile over its part of the
  contraction; if the contraction is split, an all-reduce over the devices that split
  it adds the parts (a split batch or free dimension needs no communication);
- follow the rhs's sharding: the same with the roles swapped;
- follow the result's sharding: both operands resharded to it (contracting
  dimensions whole); no all-reduce.

The cost of a plan is the elements its reshards and all-reduce move (a reshard from a
replicated value, a local slice, is free). Padded contraction elements are set to 0
in both operands before the local dot.
"""
from __future__ import annotations

from math import prod

from ..hlo import HloInstruction, HloSharding
from ..hlo.ir import ReplicaGroups
from .sharding_maps import derive
from . import spmd_reshard as rs


def _labels(instr):
    a = instr.attrs
    lb, rb = list(a.get("lhs_batch_dims", ())), list(a.get("rhs_batch_dims", ()))
    lc, rc = list(a.get("lhs_contracting_dims", ())), list(a.get("rhs_contracting_dims", ()))
    lr, rr = len(instr.operands[0].shape.dims), len(instr.operands[1].shape.dims)
    lnc = [d for d in range(lr) if d not in lb and d not in lc]
    rnc = [d for d in range(rr) if d not in rb and d not in rc]
    return lb, rb, lc, rc, lnc, rnc


def _reshard_cost(v: rs.PVal, target: HloSharding) -> int:
    if v.sharding == target or v.sharding.is_replicated or \
            rs.same_placement(v.sharding, target):
        return 0
    return prod(v.shape.dims)


def _plans(instr, ops, want):
    lb, rb, lc, rc, lnc, rnc = _labels(instr)
    lhs, rhs = ops
    lr, rr = len(lhs.shape.dims), len(rhs.shape.dims)
    plans = []
    for follow in ("lhs", "rhs"):
        x = lhs if follow == "lhs" else rhs
        if x.sharding.kind != "tiled":
            continue
        xb, xc, xnc = (lb, lc, lnc) if follow == "lhs" else (rb, rc, rnc)
        yb, yc, yrank = (rb, rc, rr) if follow == "lhs" else (lb, lc, lr)
        ymap = [None] * yrank
        for i, d in enumerate(yb):
            ymap[d] = xb[i]
        for i, d in enumerate(yc):
            ymap[d] = xc[i]
        ys = derive(x.sharding, ymap)
        n_other = len(rnc) if follow == "lhs" else len(lnc)
        out_map = xb + (xnc + [None] * n_other if follow == "lhs" else [None] * n_other + xnc)
        out_s = derive(x.sharding, out_map)
        counts = x.sharding.tile_counts(len(x.shape.dims))
        split_c = [d for d in xc if counts[d] > 1]
        y = rhs if follow == "lhs" else lhs
        cost = _reshard_cost(y, ys) + (prod(instr.shape.dims) if split_c else 0)
        if want is not None:
            cost += _reshard_cost(rs.PVal(None, out_s, instr.shape), want)
        ls, rsh = (x.sharding, ys) if follow == "lhs" else (ys, x.sharding)
        plans.append((cost, follow, ls, rsh, out_s, split_c))
    target = want if want is not None else None
    if target is not None and target.kind == "tiled":
        nb = len(lb)
        lmap = [None] * lr
        for i, d in enumerate(lb):
            lmap[d] = i
        for j, d in enumerate(lnc):
            lmap[d] = nb + j
        rmap = [None] * rr
        for i, d in enumerate(rb):
            rmap[d] = i
        for j, d in enumerate(rnc):
            rmap[d] = nb + len(lnc) + j
        ls, rsh = derive(target, lmap), derive(target, rmap)
        cost = _reshard_cost(lhs, ls) + _reshard_cost(rhs, rsh)
        plans.append((cost, "result", ls, rsh, target, []))
    if not plans:
        r = HloSharding.replicate()
        plans.append((0, "replicated", r, r, r, []))
    plans.sort(key=lambda p: p[0])
    return plans[0]


def partition_dot(ctx, instr: HloInstruction, ops, want) -> rs.PVal:
    _, follow, ls, rsh, out_s, split_c = _plans(instr, ops, want)
    lhs = ctx.reshard_value(ops[0], ls)
    rhs = ctx.reshard_value(ops[1], rsh)
    li, ri = lhs.instr, rhs.instr
    if split_c:
        lb, rb, lc, rc, lnc, rnc = _labels(instr)
        xc, yc = (lc, rc) if follow == "lhs" else (rc, lc)
        pairs = dict(zip(xc, yc))
        zero = ctx.constant(0, instr.shape.element_type)
        if follow == "lhs":
            li = ctx.mask(lhs, split_c, zero)
            ri = ctx.mask(rhs, [pairs[d] for d in split_c], zero)
        else:
            ri = ctx.mask(rhs, split_c, zero)
            li = ctx.mask(lhs, [pairs[d] for d in split_c], zero)
    attrs = {k: v for k, v in instr.attrs.items() if k not in ("sharding", "frontend_attributes")}
    shape = rs.local_shape(instr.shape, out_s)
    r = ctx.emit("dot", [li, ri], shape, **attrs)
    if split_c:
        x = ls if follow == "lhs" else rsh
        groups = rs.groups_along(x, split_c)
        r = ctx.emit("all-reduce", [r], shape, replica_groups=ReplicaGroups(groups),
                     to_apply=ctx.reducer("add" if instr.shape.element_type != "pred" else "or",
                                          instr.shape.element_type),
                     channel_id=ctx.channel(), use_global_device_ids=True)
    v = rs.PVal(r, out_s, instr.shape)
    return ctx.reshard_value(v, want) if want is not None else v
