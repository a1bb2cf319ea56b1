"""Convolutions on the packed GEMM: im2col chunk by chunk, one GEMM per chunk.

Any convolution whose kernel is in memory (a parameter, bitcast or transpose of
one) and whose element type is f32 or f64 — any `dim_labels`, stride, padding,
lhs/rhs dilation, window reversal, feature or batch grouping — is computed per
group as out[row, f] = P[row, k] @ W[k, f] (conv_plan.py explains the notation
and the choices). The kernel's [begin, end) count work units
(dot_emitter.run_units); a unit runs a range of work items, an item being one
(group, chunk of rows):

    for each item (g, rows [r0, r1)):
        build P[r0:r1, :] for group g in the unit's patch buffer  (conv_patches.py)
        GEMM: P chunk @ W[:, g's features] -> the output rows in place, or a tile
        copy the tile into the output through its labels/layout  (when not in place)

Each unit owns a region of two scratch slots — the GEMM's packing buffers, and
[patch chunk | tile | kernel copy] — so units share no memory. Depthwise convolutions with the channels
innermost take a direct loop vectorized over the channels instead
(conv_depthwise.py); other depthwise and tiny convolutions stay on the generic
generator of contraction.py.
"""
from __future__ import annotations

from hlo.shape import Shape

from .conv_depthwise import try_emit_depthwise
from .conv_patches import PatchBuilder, copy_rhs, copy_tile, element
from .conv_plan import ConvPlan, plan_conv
from .dot_emitter import even_cuts, run_units
from .gemm_packing import ALIGN
from .llvm_types import storage_type
from .loops import for_range, i64


def try_emit_conv_gemm(kernel, conv, lhs_gen, rhs_view, out) -> int | None:
    """Emits `conv` as chunked im2col + GEMMs; the partition extent, or None to decline."""
    from . import gemm
    from .dot_emitter import _threads
    if rhs_view is None or rhs_view.etype != out.shape.element_type:
        return None
    if tuple(rhs_view.dims) != tuple(conv.operands[1].shape.dims):
        return None
    extent = try_emit_depthwise(kernel, conv, lhs_gen, rhs_view, out)
    if extent is not None:
        return extent
    plan = plan_conv(conv, rhs_view.dims, rhs_view.strides, _threads())
    if plan is None:
        return None
    args = _gemm_args(plan)
    try:
        fn = gemm.emit_gemm(kernel.function.module, f"{kernel.name}_gemm", **args)
    except ValueError:
        return None
    cuts = even_cuts(plan.items, plan.flops)
    regions = _regions(plan)
    # The patch chunks, tiles and kernel copies of all units: a typed buffer of the
    # kernel's own, so its loads and stores carry alias metadata (LLVM then
    # vectorizes the copies without run-time overlap checks).
    shape = Shape(plan.etype, ((len(cuts) - 1) * regions["end"],))
    work = kernel.buffer(kernel.scratch_slot(shape), shape)
    builder = PatchBuilder(kernel, plan, conv, lhs_gen)
    b = kernel.b

    def unit(lo, hi, gemm_scratch, p):
        at = {name: b.add(b.mul(p, i64(regions["end"])), i64(offset))
              for name, offset in regions.items() if name != "end"}
        weights, (_, f_stride) = rhs_view.pointer, plan.rhs_strides or (0, 1)
        if plan.rhs_strides is None:
            copy_rhs(kernel, plan, rhs_view, work, at["weights"])
            weights = work.address(b, [at["weights"]])
        with for_range(b, lo, hi, "conv.item") as item:
            g = b.udiv(item, i64(plan.chunks))
            r0 = b.mul(b.urem(item, i64(plan.chunks)), i64(plan.chunk_rows))
            r1 = b.select(b.icmp_signed("<", b.add(r0, i64(plan.chunk_rows)), i64(plan.m)),
                          b.add(r0, i64(plan.chunk_rows)), i64(plan.m))
            builder.emit(g, r0, r1, work, at["patches"])
            w = element(b, weights, b.mul(g, i64(plan.features * f_stride)), _ty(plan))
            target = element(b, out.pointer, b.mul(r0, i64(plan.features)), _ty(plan)) \
                if plan.direct else work.address(b, [at["tile"]])
            b.call(fn, [work.address(b, [at["patches"]]), w, target, i64(0), b.sub(r1, r0),
                        gemm_scratch])
            if not plan.direct:
                copy_tile(kernel, plan, out, g, r0, r1, work, at["tile"])
    return run_units(kernel, cuts, gemm.gemm_scratch_bytes(**args), unit, pass_unit=True)


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
    offsets["end"] = at
    return offsets
