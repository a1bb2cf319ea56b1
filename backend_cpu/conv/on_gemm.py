"""Convolutions on the packed GEMM: im2col chunk by chunk, one GEMM per chunk.

Any convolution whose kernel is in memory (a parameter, bitcast or transpose of
one) and whose element type is f32 or f64 — any `dim_labels`, stride, padding,
lhs/rhs dilation, window reversal, feature or batch grouping — is computed per
group as out[row, f] = P[row, k] @ W[k, f] (plan.py explains the notation
and the choices). The kernel's [begin, end) count work units
(gemm/partition.run_units); a unit runs a range of work items, an item being one
(group, chunk of rows):

    for each item (g, rows [r0, r1)):
        build P[r0:r1, :] for group g in the unit's patch buffer  (patches.py)
        GEMM: P chunk @ W[:, g's features] -> the output rows in place, or a tile
        copy the tile into the output through its labels/layout  (when not in place)

Each unit owns a region of two scratch slots — the GEMM's packing buffers, and
[patch chunk | tile | kernel copy] — so units share no memory. An lhs-dilated
convolution is split into dense sub-convolutions by output phase first
(phases.py). Depthwise convolutions take a direct loop instead, vectorized
over the channels when they are innermost (depthwise.py), else along the
innermost spatial dimension (stencil.py); tiny convolutions stay on the
generic generator of elemental/contraction.py.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...hlo.shape import Shape

from ..gemm import packed_gemm
from ..gemm.operands import View
from ..gemm.packing import ALIGN
from ..gemm.partition import even_cuts, intra_op_threads, run_units
from ..llvm.loops import for_range, i64
from ..llvm.types import constant, storage_type

from .patches import PatchBuilder, copy_rhs, copy_tile, element
from .phases import split_phases
from .plan import ConvPlan, plan_conv, plan_refusal


def why_not_conv(conv, rhs_view, out_shape) -> str | None:
    """Why no convolution emitter of memory views (the depthwise loops, the GEMMs)
    takes `conv`, or None: they need its kernel in memory, as the HLO declares it."""
    if rhs_view is None:
        return "the kernel is not an array in memory (a parameter, bitcast or transpose of one)"
    if rhs_view.etype != out_shape.element_type:
        return f"{rhs_view.etype} kernel, {out_shape.element_type} output"
    if tuple(rhs_view.dims) != tuple(conv.operands[1].shape.dims):
        return "the kernel in memory is not shaped as the operand"
    return None


def why_not_conv_gemm(conv, rhs_view, out) -> str | None:
    """Why `conv` is not computed by im2col + GEMMs (emit_conv_gemm), or None."""
    reason = why_not_conv(conv, rhs_view, out.shape)
    if reason is not None:
        return reason
    phases = split_phases(conv, rhs_view, out)
    parts = [(conv, rhs_view)] if phases is None else \
        [(p.conv, p.rhs) for p in phases if p.conv is not None]
    for part_conv, part_rhs in parts:
        plan = plan_conv(part_conv, part_rhs.dims, part_rhs.strides, intra_op_threads(),
                         allow_direct=phases is None)
        if plan is None:
            return plan_refusal(part_conv, part_rhs.dims, part_rhs.strides, intra_op_threads(),
                                allow_direct=phases is None)
        error = packed_gemm.spec_error(**_gemm_args(plan))
        if error is not None:
            return error
    return None


def emit_conv_gemm(kernel, conv, lhs_gen, rhs_view, out) -> int | None:
    """Emits `conv` as chunked im2col + GEMMs; the partition extent, or None to decline
    (why_not_conv_gemm says why)."""
    if why_not_conv(conv, rhs_view, out.shape) is not None:
        return None
    phases = split_phases(conv, rhs_view, out)
    parts = [_Part(conv, 0, rhs_view, out)] if phases is None else \
        [_Part(p.conv, p.rhs_offset, p.rhs, p.out) for p in phases if p.conv is not None]
    zero_outputs = [p.out for p in phases or () if p.conv is None]
    for index, part in enumerate(parts):
        part.plan = plan_conv(part.conv, part.rhs.dims, part.rhs.strides, intra_op_threads(),
                              allow_direct=phases is None)
        if part.plan is None:
            return None
        args = _gemm_args(part.plan)
        try:
            part.gemm = packed_gemm.emit_gemm(kernel.function.module,
                                              f"{kernel.name}_gemm{index}", **args)
        except ValueError:
            return None
        part.gemm_bytes = packed_gemm.gemm_scratch_bytes(**args)
    starts = [0]
    for part in parts:
        starts.append(starts[-1] + part.plan.items)
    cuts = even_cuts(starts[-1], sum(part.plan.flops for part in parts))
    regions = [_regions(part.plan) for part in parts]
    region = max((r["end"] for r in regions), default=0)
    # The patch chunks, tiles and kernel copies of all units: a typed buffer of the
    # kernel's own, so its loads and stores carry alias metadata (LLVM then
    # vectorizes the copies without run-time overlap checks).
    shape = Shape(out.shape.element_type, ((len(cuts) - 1) * region,))
    work = kernel.buffer(kernel.scratch_slot(shape), shape) if parts else None
    b = kernel.b
    for part in parts:
        part.builder = PatchBuilder(kernel, part.plan, part.conv, lhs_gen)
        part.rhs = replace(part.rhs, pointer=element(b, part.rhs.pointer, i64(part.rhs_offset),
                                                     _ty(part.plan)))

    def unit(lo, hi, gemm_scratch, p):
        if zero_outputs:        # rows no tap reaches: unit 0 zeroes them
            with b.if_then(b.icmp_signed("==", p, i64(0))):
                for zeros in zero_outputs:
                    _emit_zero_fill(kernel, zeros)
        base = b.mul(p, i64(region))
        for part, first, stop, offsets in zip(parts, starts, starts[1:], regions):
            at = {name: b.add(base, i64(offset)) for name, offset in offsets.items()
                  if name != "end"}
            part_lo = _imax(b, lo, i64(first))
            part_hi = _imin(b, hi, i64(stop))
            with b.if_then(b.icmp_signed("<", part_lo, part_hi)):
                _emit_items(kernel, part, work, at, b.sub(part_lo, i64(first)),
                            b.sub(part_hi, i64(first)), gemm_scratch)
    if len(parts) > 1:
        # One patch build and tile copy per phase: optimized for size, LLVM spends a
        # third less time on them (the stride-2 input gradient of the convnet example:
        # 76 -> 51 ms of O3) at the same speed (their copy loops stay vectorized).
        kernel.function.attributes.add("optsize")
    return run_units(kernel, cuts, max((part.gemm_bytes for part in parts), default=0), unit,
                     pass_unit=True)


@dataclass
class _Part:
    """One convolution computed by GEMMs: the whole one, or a phase of it."""
    conv: object
    rhs_offset: int
    rhs: View
    out: object
    plan: ConvPlan | None = None
    gemm: object = None
    gemm_bytes: int = 0
    builder: PatchBuilder | None = None


def _emit_items(kernel, part: _Part, work, at: dict, lo, hi, gemm_scratch) -> None:
    """Work items [lo, hi) of one part (the module docstring's loop)."""
    b, plan, rhs = kernel.b, part.plan, part.rhs
    weights, (_, f_stride) = rhs.pointer, plan.rhs_strides or (0, 1)
    if plan.rhs_strides is None:
        copy_rhs(kernel, plan, rhs, work, at["weights"])
        weights = work.address(b, [at["weights"]])
    with for_range(b, lo, hi, "conv.item") as item:
        g = b.udiv(item, i64(plan.chunks))
        r0 = b.mul(b.urem(item, i64(plan.chunks)), i64(plan.chunk_rows))
        r1 = _imin(b, b.add(r0, i64(plan.chunk_rows)), i64(plan.m))
        part.builder.emit(g, r0, r1, work, at["patches"])
        w = element(b, weights, b.mul(g, i64(plan.features * f_stride)), _ty(plan))
        target = element(b, part.out.pointer, b.mul(r0, i64(plan.features)), _ty(plan)) \
            if plan.direct else work.address(b, [at["tile"]])
        b.call(part.gemm, [work.address(b, [at["patches"]]), w, target, i64(0),
                           b.sub(r1, r0), gemm_scratch])
        if not plan.direct:
            copy_tile(kernel, plan, part.out, g, r0, r1, work, at["tile"])


def _emit_zero_fill(kernel, out) -> None:
    """Stores 0 to every element of `out` (a phase's rows)."""
    b, index = kernel.b, []

    def nest(level):
        if level == len(out.shape.dims):
            out.store(b, list(index), constant(out.shape.element_type, 0))
            return
        with for_range(b, 0, out.shape.dims[level], f"zero{level}") as i:
            index.append(i)
            nest(level + 1)
            index.pop()
    nest(0)


def _imin(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _imax(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _ty(plan: ConvPlan):
    return storage_type(plan.etype)


def _gemm_args(plan: ConvPlan) -> dict:
    """emit_gemm's arguments for one chunk: m = chunk rows, n = Fg, k = K."""
    rows, k = plan.chunk_rows, plan.k
    return dict(lhs_dtype=plan.etype, rhs_dtype=plan.etype, out_dtype=plan.etype,
                m=rows, n=plan.features, k=k,
                lhs_strides=(1, rows) if plan.columns_major else (k, 1),
                rhs_strides=plan.rhs_strides or (plan.features * plan.groups, 1))


def _regions(plan: ConvPlan) -> dict[str, int]:
    """Element offsets of a unit's buffers in its region of the work buffer, each
    64-byte aligned (the arena's slots are); "end" is the region's size."""
    esize = 8 if plan.etype == "f64" else 4
    sizes = {"patches": plan.chunk_rows * plan.k,
             "tile": 0 if plan.direct else plan.chunk_rows * plan.features,
             "weights": 0 if plan.rhs_strides else plan.k * plan.features * plan.groups}
    offsets, at, step = {}, 0, ALIGN // esize
    for name, size in sizes.items():
        offsets[name] = at
        at += -(-size // step) * step
    return {**offsets, "end": at}
