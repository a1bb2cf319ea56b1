"""What sharding propagation and the SPMD partitioner share: which dimensions of an
instruction's result are "the same" as which dimensions of each operand, how a
sharding moves along such a correspondence, and the import of Shardy's annotations.

`dim_map(instr, i)` -> a list, one entry per result dimension: the dimension of
operand i that carries the same index (so a split of one can be a split of the
other), or None. The dimensions a window slides over (reduce-window's, a
convolution's spatial ones) are mapped too although an output index reads a range
of input indices: the partitioner gives each tile the borders it needs by a halo
exchange (passes/spmd_halo.py). `derive(sharding, mapping)` builds the sharding of the target
(one entry of `mapping` per target dimension: a dimension of the source or None):
the mapped dimensions keep their tiles and devices, the source's other grid
dimensions (tiled dimensions not mapped, and its replicated subgroup) become one
trailing replicated group. Going forward (operand -> result) uses `dim_map`
directly; going backward uses `invert(dim_map, operand_rank)`.

`import_shardy(module)` gives every instruction that has only Shardy's
`xla.sdy.sharding` frontend attribute the equivalent `sharding=`, and turns the
identity custom-calls that carry a sharding (`xla.sdy.FuncResultSharding`,
`Sharding`) into `copy` instructions annotated with it, so the rest of the
pipeline reads one form.
"""
from __future__ import annotations

import numpy as np

from ..hlo import OPCODES, HloInstruction, HloModule, HloSharding
from ..hlo.sharding import ShardingError, sdy_meshes_of, sdy_sharding_of

ANNOTATION_CALLS = ("xla.sdy.FuncResultSharding", "Sharding", "xla.sdy.Sharding")

def is_elementwise(instr) -> bool:
    """Every operand has the result's dims and element i of the result reads element i
    of each operand (bitcast-convert to another width is not: hlo/opcodes.py)."""
    if not instr.shape.is_array:
        return False
    if not (OPCODES[instr.opcode].is_elementwise or
            instr.opcode in ("select", "clamp", "convert", "copy", "map")):
        return False
    return all(o.shape.is_array and o.shape.dims == instr.shape.dims for o in instr.operands)


def derive(s: HloSharding | None, mapping, source_rank: int | None = None) -> HloSharding | None:
    """The sharding of a target whose dimension j is the source's `mapping[j]`."""
    if s is None:
        return None
    if s.kind != "tiled":
        return s if s.kind in ("replicated", "maximal") else None
    if any(k != "replicated" for k in s.subgroups):
        return None
    a = s.assignment()
    used = [m for m in mapping if m is not None]
    rest = [d for d in range(a.ndim) if d not in used]
    t = a.transpose(used + rest)
    dims = [a.shape[m] if m is not None else 1 for m in mapping]
    rep = int(np.prod([a.shape[d] for d in rest])) if rest else 1
    t = t.reshape(dims + [rep])
    return HloSharding.tiled(t, replicate_last=True)


def invert(mapping, rank: int):
    inv = [None] * rank
    for j, m in enumerate(mapping):
        if m is not None:
            inv[m] = j
    return inv


def dim_map(instr, i: int):
    """Result dimension j -> the dimension of operand i with the same index (or None);
    None for the whole map when the op has no such correspondence."""
    op = instr.operands[i]
    if not (instr.shape.is_array and op.shape.is_array):
        return None
    out_rank, in_rank = len(instr.shape.dims), len(op.shape.dims)
    code = instr.opcode
    if is_elementwise(instr):
        return list(range(out_rank))
    if code in ("copy", "reverse", "slice", "pad", "reduce-precision") and i == 0:
        return list(range(out_rank))
    if code == "concatenate":
        d = instr.dims()[0]
        return [j if j != d else None for j in range(out_rank)]
    if code == "broadcast":
        m = [None] * out_rank
        for k, d in enumerate(instr.dims()):
            m[d] = k
        return m
    if code == "transpose":
        return list(instr.dims())
    if code == "reshape":
        return _reshape_map(op.shape.dims, instr.shape.dims)
    if code in ("dynamic-slice", "dynamic-update-slice") and i == 0:
        sizes = instr.shape.dims if code == "dynamic-slice" else op.shape.dims
        return [j if sizes[j] == op.shape.dims[j] else None for j in range(out_rank)]
    if code == "dot":
        a = instr.attrs
        lb, rb = a.get("lhs_batch_dims", ()), a.get("rhs_batch_dims", ())
        lc, rc = a.get("lhs_contracting_dims", ()), a.get("rhs_contracting_dims", ())
        lhs_rank, rhs_rank = len(instr.operands[0].shape.dims), len(instr.operands[1].shape.dims)
        lnc = [d for d in range(lhs_rank) if d not in lb and d not in lc]
        rnc = [d for d in range(rhs_rank) if d not in rb and d not in rc]
        if i == 0:
            return list(lb) + lnc + [None] * len(rnc)
        return list(rb) + [None] * len(lnc) + rnc
    if code == "reduce" and i < len(instr.operands) // 2 and instr.shape.is_array:
        kept = [d for d in range(in_rank) if d not in instr.dims()]
        return kept
    if code == "convolution" and i < 2:
        labels = instr.attrs["dim_labels"]
        lhs_l, rest = labels.split("_")
        rhs_l, out_l = rest.split("->")
        m = [None] * out_rank
        if i == 0:
            # batch and spatial dimensions: spmd-partitioner exchanges halos for the
            # spatial ones (passes/spmd_halo.py)
            for j, c in enumerate(out_l):
                if c != "f":
                    m[j] = lhs_l.index(c)
        else:
            m[out_l.index("f")] = rhs_l.index("o")
        return m
    if code == "reduce-window" and len(instr.operands) == 2 and i == 0:
        return list(range(out_rank))      # windowed dimensions via halo exchange
    if code == "gather" and i == 0:
        a = instr.attrs
        offset = list(a.get("offset_dims", ()))
        removed = set(a.get("collapsed_slice_dims", ())) | set(a.get("operand_batching_dims", ()))
        window = [d for d in range(in_rank) if d not in removed]
        sizes = a.get("slice_sizes", ())
        smap = set(a.get("start_index_map", ()))
        m = [None] * out_rank
        for od, wd in zip(offset, window):
            if wd not in smap and sizes[wd] == op.shape.dims[wd]:
                m[od] = wd
        return m
    if code == "scatter" and i == 0 and len(instr.operands) == 3:
        return list(range(out_rank))
    return None


def _reshape_map(src, dst):
    """Dimensions of a reshape that stay whole: same size, same product before them."""
    m = [None] * len(dst)
    pre_src, acc = {}, 1
    for d, n in enumerate(src):
        pre_src.setdefault((acc, n), d)
        acc *= n
    acc = 1
    for j, n in enumerate(dst):
        if n > 1 and (acc, n) in pre_src:
            m[j] = pre_src[(acc, n)]
        acc *= n
    return m


def import_shardy(module: HloModule) -> bool:
    """Shardy annotations -> `sharding=`; annotation custom-calls -> annotated copies."""
    meshes = sdy_meshes_of(module.config)
    changed = False
    for comp in module.computations:
        for instr in list(comp.instructions):
            if meshes and "sharding" not in instr.attrs:
                try:
                    s = sdy_sharding_of(instr, meshes)
                except ShardingError as e:
                    raise ShardingError(f"%{instr.name}: {e}") from None
                if s is not None:
                    instr.attrs["sharding"] = s
                    changed = True
            if instr.opcode == "custom-call" and \
                    instr.attrs.get("custom_call_target") in ANNOTATION_CALLS and \
                    len(instr.operands) == 1 and instr.shape.is_array:
                s = instr.attrs.get("sharding")
                keep = {"sharding": s} if s is not None else {}
                if "metadata" in instr.attrs:
                    keep["metadata"] = instr.attrs["metadata"]
                copy = comp.add_instruction(
                    HloInstruction("copy", instr.shape, [instr.operands[0]], attrs=keep,
                                   name=instr.name), before=instr)
                comp.replace_instruction(instr, copy)
                changed = True
    return changed
