"""Dots on the packed GEMM: mapping a `dot` (maybe batched, maybe transposed) onto
`packed_gemm.emit_gemm`'s row-major out[m, n] = lhs[m, k] @ rhs[k, n].

The operands must be arrays in memory, reached from the kernel's buffers through
parameters, bitcasts and transposes only: each of those is a *strided view*
(pointer, dims, element strides), so a transposed operand costs nothing — its
strides go to the GEMM, which folds them into packing. Several free (or
contracting) dimensions merge into one when they are contiguous in memory.

The kernel's [begin, end) count *work units* (gemm/partition.run_units): unit p
covers a fixed range of GEMM rows (without batch dimensions; cut by
`gemm_row_split`) or of batch indices (each batch entry runs the whole GEMM on
offset pointers), and owns region p of a scratch slot for the GEMM's packing
buffers. The operands' strided views are gemm/operands.py.

Small products stay on the generic dot generator (elemental/contraction.py): for them the
packed GEMM costs more compile time than it saves.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import llvmlite.ir as ir

from ..gemm import packed_gemm
from ..gemm.operands import View
from ..gemm.partition import even_cuts, intra_op_threads, run_units
from ..gemm.packing import ALIGN
from ..llvm.loops import for_range, i64
from ..llvm.types import element_bytes
from ...hlo.shape import Shape

# Below this many multiply-adds the generic dot generator is used.
GEMM_MIN_FLOPS = 32 * 1024


def _merge(view: View, dims: list[int]) -> tuple[int, int] | None:
    """(size, stride) of `dims` taken as one dimension, or None if not contiguous."""
    dims = [d for d in dims if view.dims[d] != 1]
    if not dims:
        return 1, 0
    for outer, inner in zip(dims, dims[1:]):
        if view.strides[outer] != view.strides[inner] * view.dims[inner]:
            return None
    return prod(view.dims[d] for d in dims), view.strides[dims[-1]]


def why_not_gemm(dot, lhs: View | None, rhs: View | None, out_shape,
                 relayout: bool = False) -> str | None:
    """Why `dot` (operands seen as the strided views `lhs`, `rhs`) does not go to the
    packed GEMM, or None when it does (try_emit_gemm). `relayout`: the kernel has
    scratch memory, so an operand of a dot without batch dimensions whose dimensions do
    not merge may be copied into the GEMM's order first (see _plan)."""
    if lhs is None or rhs is None:
        return "an operand is not an array in memory (a parameter, bitcast or transpose of one)"
    if not out_shape.has_default_layout():
        return "the output is not in the default layout"
    plan = _plan(dot, lhs, rhs, relayout)
    if isinstance(plan, str):
        return plan
    (m, sm), (k, slk), (k2, srk), (n, sn) = plan.merged
    if k != k2:
        return f"contracting sizes differ ({k} and {k2})"
    if m * n * k < GEMM_MIN_FLOPS:
        return f"small: {m * n * k} multiply-adds (the generic dot below {GEMM_MIN_FLOPS})"
    return packed_gemm.spec_error(lhs_dtype=lhs.etype, rhs_dtype=rhs.etype,
                           out_dtype=out_shape.element_type, m=m, n=n, k=k,
                           lhs_strides=(sm, slk), rhs_strides=(srk, sn))


@dataclass(frozen=True)
class _Plan:
    """How a dot maps onto the GEMM: the merged [(m, stride), (k, stride) of lhs,
    (k, stride) of rhs, (n, stride)], and which operands are first copied into scratch
    memory in the GEMM's row-major order (lhs as [m, k], rhs as [k, n])."""
    merged: list
    copy_lhs: bool = False
    copy_rhs: bool = False


def _plan(dot, lhs: View, rhs: View, relayout: bool) -> _Plan | str:
    """The _Plan of `dot`, or why there is none.

    Without copies, each operand's free and contracting dimensions must each merge into
    one strided dimension. JAX's attention gradients contract a [B, S, H, D] operand
    whose layout keeps S minor over (B, S) or keep (B, S) free around (H, D): neither
    merges, and the generic dot is ~50x slower than the GEMM. With `relayout` (no batch
    dimensions; scratch memory), such an operand is copied once into [m, k] or [k, n]
    order, O(m k) or O(k n) work against the GEMM's O(m n k)."""
    merged = _gemm_dims(dot, lhs, rhs)
    names = ("lhs free", "lhs contracting", "rhs contracting", "rhs free")
    failed = [name for name, m in zip(names, merged) if m is None]
    if not failed:
        return _Plan(merged)
    if not relayout or dot.attrs.get("lhs_batch_dims"):
        return f"the {failed[0]} dimensions are not contiguous in memory"
    a = dot.attrs
    lc, rc = list(a["lhs_contracting_dims"]), list(a["rhs_contracting_dims"])
    k = prod(lhs.dims[d] for d in lc)
    copy_lhs = merged[0] is None or merged[1] is None
    copy_rhs = merged[2] is None or merged[3] is None
    if copy_lhs:
        m = prod(lhs.dims) // max(k, 1)
        merged[0], merged[1] = (m, k), (k, 1)
    if copy_rhs:
        n = prod(rhs.dims) // max(prod(rhs.dims[d] for d in rc), 1)
        merged[2], merged[3] = (prod(rhs.dims[d] for d in rc), n), (n, 1)
    return _Plan(merged, copy_lhs, copy_rhs)


def _gemm_dims(dot, lhs: View, rhs: View) -> list:
    """[(m, stride), (k, stride) of lhs, (k, stride) of rhs, (n, stride)], None where
    the dimensions do not merge into one."""
    a = dot.attrs
    lb, rb = list(a.get("lhs_batch_dims", ())), list(a.get("rhs_batch_dims", ()))
    lc, rc = list(a.get("lhs_contracting_dims", ())), list(a.get("rhs_contracting_dims", ()))
    lhs_free = [d for d in range(len(lhs.dims)) if d not in lb and d not in lc]
    rhs_free = [d for d in range(len(rhs.dims)) if d not in rb and d not in rc]
    return [_merge(lhs, lhs_free), _merge(lhs, lc), _merge(rhs, rc), _merge(rhs, rhs_free)]


def try_emit_gemm(kernel, dot, lhs: View | None, rhs: View | None, out) -> int | None:
    """Emits `dot` through the GEMM into `out` (a Buffer); the extent, or None to decline
    (why_not_gemm says why)."""
    relayout = kernel.scratch_slot is not None
    if why_not_gemm(dot, lhs, rhs, out.shape, relayout) is not None:
        return None
    a = dot.attrs
    lb, rb = list(a.get("lhs_batch_dims", ())), list(a.get("rhs_batch_dims", ()))
    plan = _plan(dot, lhs, rhs, relayout)
    (m, sm), (k, slk), (k2, srk), (n, sn) = plan.merged
    args = dict(lhs_dtype=lhs.etype, rhs_dtype=rhs.etype, out_dtype=out.shape.element_type,
                m=m, n=n, k=k, lhs_strides=(sm, slk), rhs_strides=(srk, sn))
    count = prod(dot.shape.dims[i] for i in range(len(lb)))
    threads = intra_op_threads()
    nr = packed_gemm.plan_gemm(packed_gemm.GemmSpec(
        args["lhs_dtype"], args["rhs_dtype"], args["out_dtype"], m, n, k, (sm, slk), (srk, sn)),
        packed_gemm.host_vector_bits()).tile.nr if m > 1 and n > 1 and k > 0 else 1
    columns = not lb and not (plan.copy_lhs or plan.copy_rhs) \
        and packed_gemm.splits_columns(m, n, k, threads, nr)
    try:
        fn = packed_gemm.emit_gemm(kernel.function.module, f"{kernel.name}_gemm", **args,
                                   batch=count, columns=columns)
    except ValueError:
        return None
    scratch_bytes = packed_gemm.gemm_scratch_bytes(**args)
    b = kernel.b
    if columns:
        parts = packed_gemm.gemm_column_partitions(m, n, k, threads, nr)
        cuts = [begin for begin, _ in packed_gemm.gemm_column_split(n, parts, nr)] + [n]
        return run_units(kernel, cuts, scratch_bytes, lambda lo, hi, scratch: b.call(
            fn, [lhs.pointer, rhs.pointer, out.pointer, lo, hi, scratch]))
    if not lb:
        parts = packed_gemm.gemm_partitions(m, n, k, threads)
        cuts = [begin for begin, _ in packed_gemm.gemm_row_split(m, parts)] + [m]
        if plan.copy_lhs or plan.copy_rhs:
            return _run_relayout(kernel, dot, lhs, rhs, out, plan, fn, cuts, scratch_bytes)
        return run_units(kernel, cuts, scratch_bytes, lambda lo, hi, scratch: b.call(
            fn, [lhs.pointer, rhs.pointer, out.pointer, lo, hi, scratch]))
    batch_dims = [dot.shape.dims[i] for i in range(len(lb))]

    def batches(lo, hi, scratch):
        with for_range(b, lo, hi, "batch") as flat:
            rest, offsets = flat, [i64(0), i64(0), i64(0)]
            for i in reversed(range(len(lb))):
                idx = b.urem(rest, i64(batch_dims[i]))
                rest = b.udiv(rest, i64(batch_dims[i]))
                offsets[0] = b.add(offsets[0], b.mul(idx, i64(lhs.strides[lb[i]])))
                offsets[1] = b.add(offsets[1], b.mul(idx, i64(rhs.strides[rb[i]])))
            offsets[2] = b.mul(flat, i64(m * n))
            pointers = [_offset(b, v.pointer, off, v.etype) for v, off in
                        ((lhs, offsets[0]), (rhs, offsets[1]), (out, offsets[2]))]
            b.call(fn, pointers + [i64(0), i64(m), scratch])
    return run_units(kernel, even_cuts(count, 2 * m * n * k * count), scratch_bytes, batches)


def _offset(b, pointer, elements, etype):
    return b.gep(pointer, [b.mul(elements, i64(element_bytes(etype)))], inbounds=True,
                 source_etype=ir.IntType(8))


def _run_relayout(kernel, dot, lhs: View, rhs: View, out, plan: _Plan, fn, cuts: list[int],
                  scratch_bytes: int) -> int:
    """The GEMM of a dot without batch dimensions after copying the operands that
    _plan says into row-major scratch. Unit p (rows [lo, hi) of the GEMM) copies the
    lhs rows it multiplies into one [m, k] buffer of the kernel (units write disjoint
    rows) and, when the rhs is copied, the whole [k, n] rhs into its own region after
    its packing scratch (every unit reads all of it; no unit waits for another)."""
    b = kernel.b
    a = dot.attrs
    lc, rc = list(a["lhs_contracting_dims"]), list(a["rhs_contracting_dims"])
    lhs_free = [d for d in range(len(lhs.dims)) if d not in lc]
    rhs_free = [d for d in range(len(rhs.dims)) if d not in rc]
    (m, _), (k, _), _, (n, _) = plan.merged
    esize = element_bytes(lhs.etype)
    gemm_bytes = _round_up(scratch_bytes, ALIGN)
    rhs_bytes = _round_up(k * n * element_bytes(rhs.etype), ALIGN) if plan.copy_rhs else 0
    lhs_buffer = None
    if plan.copy_lhs:
        lhs_buffer = kernel.slot_pointer(kernel.scratch_slot(Shape("u8", (m * k * esize,))))

    module = kernel.function.module
    copy_lhs = _copy_function(module, f"{kernel.name}_relayout_lhs", lhs, lhs_free, lc) \
        if plan.copy_lhs else None
    copy_rhs = _copy_function(module, f"{kernel.name}_relayout_rhs", rhs, rc, rhs_free) \
        if plan.copy_rhs else None

    def unit(lo, hi, scratch):
        lhs_pointer, rhs_pointer = lhs.pointer, rhs.pointer
        if copy_lhs is not None:
            b.call(copy_lhs, [lhs.pointer, lhs_buffer, lo, hi])
            lhs_pointer = lhs_buffer
        if copy_rhs is not None:
            rhs_pointer = b.gep(scratch, [i64(gemm_bytes)], inbounds=True,
                                source_etype=ir.IntType(8))
            b.call(copy_rhs, [rhs.pointer, rhs_pointer, i64(0), i64(k)])
        b.call(fn, [lhs_pointer, rhs_pointer, out.pointer, lo, hi, scratch])
    return run_units(kernel, cuts, gemm_bytes + rhs_bytes, unit)


def _copy_function(module: ir.Module, name: str, view: View, row_dims: list[int],
                   col_dims: list[int]) -> ir.Function:
    """`void name(ptr src, ptr dst, i64 lo, i64 hi)`: dst[r, c] = the view's element for
    rows r in [lo, hi), where the row index is `row_dims` flattened (the last fastest),
    the column index `col_dims` flattened, and dst is row-major. Elements are copied as
    integers of their width (any dtype). A function of its own: the kernel around the
    GEMM driver is not optimized (compiler.py, llvm/ir_policy.py), this loop must be."""
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ir.IntType(64),
                                                             ir.IntType(64)]), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    src_pointer, dst, lo, hi = fn.args
    for arg in (src_pointer, dst):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    cols = prod(view.dims[d] for d in col_dims)
    ity = ir.IntType(8 * element_bytes(view.etype))
    with for_range(b, lo, hi, "relayout.row", unroll=False) as r:
        rest, src = r, i64(0)
        for d in reversed(row_dims):
            src = b.add(src, b.mul(b.urem(rest, i64(view.dims[d])), i64(view.strides[d])))
            rest = b.udiv(rest, i64(view.dims[d]))
        _copy_columns(b, src_pointer, view, col_dims, ity, src, b.mul(r, i64(cols)), dst)
    b.ret_void()
    return fn


def _copy_columns(b, src_pointer, view: View, col_dims: list[int], ity, src, at, dst) -> None:
    if not col_dims:
        value = b.load(b.gep(src_pointer, [src], inbounds=True, source_etype=ity), typ=ity)
        b.store(value, b.gep(dst, [at], inbounds=True, source_etype=ity))
        return
    d, inner = col_dims[0], prod(view.dims[e] for e in col_dims[1:])
    with for_range(b, 0, view.dims[d], "relayout.col") as j:
        _copy_columns(b, src_pointer, view, col_dims[1:], ity,
                      b.add(src, b.mul(j, i64(view.strides[d]))),
                      b.add(at, b.mul(j, i64(inner))), dst)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
