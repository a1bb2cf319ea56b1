"""Reshape and sharding: which shardings survive a reshape, and the partitioned reshape.

A reshape's dimensions fall into groups, in order, whose sizes have equal products on
both sides (`[B*T, H*K] -> [B, T, H, K]`: {B*T} -> {B, T}, {H*K} -> {H, K}). A group
keeps its split when only its first (major, size > 1) dimension is split, t ways, and
t divides the first dimension on both sides: a split of the major dimension into t
even blocks is the same as t contiguous blocks of the group's flattened elements,
which is the other side's major dimension split t ways. A group of one dimension on
each side (the same size) keeps any split, uneven ones included (the padding stays at
the end of that dimension). So `[D, H, K] -> [D, H*K]` with H split carries the split
to H*K (a Megatron kernel flattened), and back.

`reshape_sharding(s, src_dims, dst_dims)` is the sharding of the reshaped value (None if
the split cannot be carried); the inverse direction is the same call with the two shapes
swapped. The partitioner's reshape (`partition_reshape`) then reshapes each device's tile
locally: no communication.
"""
from __future__ import annotations

from ..hlo import HloSharding
from . import spmd_reshard as rs


def _groups(src, dst):
    """[(src dims, dst dims)] with equal products, in order (None if a size is 0)."""
    if 0 in src or 0 in dst:
        return None
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        gs, gd, ps, pd = [], [], 1, 1
        if i < len(src):
            gs.append(i)
            ps *= src[i]
            i += 1
        if j < len(dst):
            gd.append(j)
            pd *= dst[j]
            j += 1
        while ps != pd:
            if ps < pd and i < len(src):
                gs.append(i)
                ps *= src[i]
                i += 1
            elif pd < ps and j < len(dst):
                gd.append(j)
                pd *= dst[j]
                j += 1
            else:
                return None
        groups.append((gs, gd))
    return groups


def reshape_sharding(s: HloSharding | None, src, dst) -> HloSharding | None:
    """The sharding of reshape(x) : dst for x : src sharded `s` (None: not carried)."""
    if s is None or s.kind != "tiled" or any(k != "replicated" for k in s.subgroups):
        return s if s is not None and s.kind in ("replicated", "maximal") else None
    src, dst = tuple(src), tuple(dst)
    if s.data_rank != len(src):
        return None
    groups = _groups(src, dst)
    if groups is None:
        return None
    counts = s.tile_counts(len(src))
    out = [1] * len(dst)
    for gs, gd in groups:
        split = [d for d in gs if counts[d] > 1]
        if not split:
            continue
        if len(gs) == 1 and len(gd) == 1:
            out[gd[0]] = counts[gs[0]]
            continue
        first_s = next((d for d in gs if src[d] > 1), None)
        first_d = next((d for d in gd if dst[d] > 1), None)
        t = counts[split[0]]
        if split != [first_s] or first_d is None or src[first_s] % t or dst[first_d] % t:
            return None
        out[first_d] = t
    a = s.assignment()
    return HloSharding.tiled(a.reshape(out + list(a.shape[s.data_rank:])),
                             subgroups=s.subgroups)


def partition_reshape(ctx, instr, ops, want) -> "rs.PVal | None":
    """A local reshape of each tile when a sharding carries over (the operand's, or
    the one `want` implies for the operand); None when neither does."""
    x = ops[0]
    src, dst = instr.operands[0].shape.dims, instr.shape.dims
    out_s = reshape_sharding(x.sharding, src, dst)
    if want is not None and want.kind == "tiled" and out_s != want:
        in_s = reshape_sharding(want, dst, src)
        if in_s is not None and in_s.kind == "tiled":
            x, out_s = ctx.reshard_value(x, in_s), want
    if out_s is None:
        return None
    if out_s.kind != "tiled":
        x, out_s = ctx.reshard_value(x, HloSharding.replicate()), HloSharding.replicate()
    r = ctx.emit("reshape", [x.instr], rs.local_shape(instr.shape, out_s))
    v = rs.PVal(r, out_s, instr.shape)
    return ctx.reshard_value(v, want) if want is not None else v
