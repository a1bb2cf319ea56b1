"""Dots on the packed GEMM: mapping a `dot` (maybe batched, maybe transposed) onto
`gemm.emit_gemm`'s row-major out[m, n] = lhs[m, k] @ rhs[k, n].

The operands must be arrays in memory, reached from the kernel's buffers through
parameters, bitcasts and transposes only: each of those is a *strided view*
(pointer, dims, element strides), so a transposed operand costs nothing — its
strides go to the GEMM, which folds them into packing. Several free (or
contracting) dimensions merge into one when they are contiguous in memory.

The kernel's [begin, end) count *work units* (`run_units`): unit p covers a
fixed range of GEMM rows (without batch dimensions; cut by `gemm_row_split`)
or of batch indices (each batch entry runs the whole GEMM on offset pointers),
and owns region p of a scratch slot for the GEMM's packing buffers. Units run
concurrently on different threads, so no two share packing memory, and the
generated code allocates nothing itself.

Small products stay on the generic dot generator (contraction.py): for them the
packed GEMM costs more compile time than it saves.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import llvmlite.ir as ir

from .kernel_ir import strides as layout_strides
from .llvm_types import element_bytes
from .loops import for_range, i64

# Below this many multiply-adds the generic dot generator is used.
GEMM_MIN_FLOPS = 32 * 1024


@dataclass
class View:
    """A strided array in memory: element (i0, i1, ...) is at pointer + sum(i * stride)."""
    pointer: ir.Value
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    etype: str


def resolve_view(instr, param_views: dict) -> View | None:
    """The strided view of `instr` if it is a parameter, bitcast or transpose of one."""
    if instr.opcode == "parameter":
        return param_views.get(instr.parameter_number)
    if instr.opcode == "bitcast" and instr.shape.element_type == instr.operands[0].shape.element_type:
        inner = resolve_view(instr.operands[0], param_views)
        # A bitcast reinterprets the bytes of its operand as the operand declares them:
        # the memory must be in exactly that layout. A fused parameter bound to an
        # operand of another layout, or a transpose that is not itself a bitcast, holds
        # other bytes (the generators then do it element by element).
        if inner is None or not _has_layout(inner, instr.operands[0].shape):
            return None
        return View(inner.pointer, instr.shape.dims, tuple(layout_strides(instr.shape)), inner.etype)
    if instr.opcode == "transpose":
        inner = resolve_view(instr.operands[0], param_views)
        if inner is None:
            return None
        perm = instr.dims()
        return View(inner.pointer, tuple(inner.dims[p] for p in perm),
                    tuple(inner.strides[p] for p in perm), inner.etype)
    return None


def _has_layout(view: View, shape) -> bool:
    """True when the view is `shape`'s array stored in `shape`'s layout (the strides of
    size-1 dimensions do not matter)."""
    return tuple(view.dims) == tuple(shape.dims) and all(
        size == 1 or stride == expected
        for size, stride, expected in zip(view.dims, view.strides, layout_strides(shape)))


def _merge(view: View, dims: list[int]) -> tuple[int, int] | None:
    """(size, stride) of `dims` taken as one dimension, or None if not contiguous."""
    dims = [d for d in dims if view.dims[d] != 1]
    if not dims:
        return 1, 0
    for outer, inner in zip(dims, dims[1:]):
        if view.strides[outer] != view.strides[inner] * view.dims[inner]:
            return None
    return prod(view.dims[d] for d in dims), view.strides[dims[-1]]


def why_not_gemm(dot, lhs: View | None, rhs: View | None, out_shape) -> str | None:
    """Why `dot` (operands seen as the strided views `lhs`, `rhs`) does not go to the
    packed GEMM, or None when it does (try_emit_gemm)."""
    from . import gemm
    if lhs is None or rhs is None:
        return "an operand is not an array in memory (a parameter, bitcast or transpose of one)"
    if not out_shape.has_default_layout():
        return "the output is not in the default layout"
    merged = _gemm_dims(dot, lhs, rhs)
    names = ("lhs free", "lhs contracting", "rhs contracting", "rhs free")
    for name, m in zip(names, merged):
        if m is None:
            return f"the {name} dimensions are not contiguous in memory"
    (m, sm), (k, slk), (k2, srk), (n, sn) = merged
    if k != k2:
        return f"contracting sizes differ ({k} and {k2})"
    if m * n * k < GEMM_MIN_FLOPS:
        return f"small: {m * n * k} multiply-adds (the generic dot below {GEMM_MIN_FLOPS})"
    return gemm.spec_error(lhs_dtype=lhs.etype, rhs_dtype=rhs.etype,
                           out_dtype=out_shape.element_type, m=m, n=n, k=k,
                           lhs_strides=(sm, slk), rhs_strides=(srk, sn))


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
    from . import gemm
    if why_not_gemm(dot, lhs, rhs, out.shape) is not None:
        return None
    a = dot.attrs
    lb, rb = list(a.get("lhs_batch_dims", ())), list(a.get("rhs_batch_dims", ()))
    (m, sm), (k, slk), (k2, srk), (n, sn) = _gemm_dims(dot, lhs, rhs)
    args = dict(lhs_dtype=lhs.etype, rhs_dtype=rhs.etype, out_dtype=out.shape.element_type,
                m=m, n=n, k=k, lhs_strides=(sm, slk), rhs_strides=(srk, sn))
    try:
        fn = gemm.emit_gemm(kernel.function.module, f"{kernel.name}_gemm", **args)
    except ValueError:
        return None
    scratch_bytes = gemm.gemm_scratch_bytes(**args)
    b = kernel.b
    if not lb:
        parts = gemm.gemm_partitions(m, n, k, _threads())
        cuts = [begin for begin, _ in gemm.gemm_row_split(m, parts)] + [m]
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
    count = prod(batch_dims)
    return run_units(kernel, even_cuts(count, 2 * m * n * k * count), scratch_bytes, batches)


def even_cuts(count: int, flops: int) -> list[int]:
    """Unit boundaries splitting `count` items evenly over the intra-op threads, with at
    least MIN_FLOPS_PER_PARTITION of `flops` (the whole launch's) per unit."""
    from .gemm import MIN_FLOPS_PER_PARTITION
    units = max(1, min(_threads(), count, flops // MIN_FLOPS_PER_PARTITION))
    return [count * p // units for p in range(units + 1)]


def run_units(kernel, cuts: list[int], scratch_bytes: int, body, pass_unit: bool = False) -> int:
    """Makes the kernel's [begin, end) count work units: unit p calls
    `body(lo, hi, scratch)` on items [cuts[p], cuts[p + 1]) with region p of a scratch
    slot of this kernel (`scratch_bytes` each, 64-byte aligned; null when 0), and
    with `pass_unit`, `body(lo, hi, scratch, p)`. Returns the partition extent (the
    number of units), which is also the most partitions worth launching. A launch
    with fewer partitions runs several units in turn."""
    units = len(cuts) - 1
    b = kernel.b
    table_type = ir.ArrayType(ir.IntType(64), len(cuts))
    table = ir.GlobalVariable(kernel.function.module, table_type, f"{kernel.name}.units")
    table.initializer = ir.Constant(table_type, cuts)
    table.global_constant, table.linkage = True, "internal"
    base = _aligned_scratch(kernel, units * scratch_bytes) if scratch_bytes else None
    with for_range(b, kernel.begin, kernel.end, "unit") as p:
        bound = [b.load(b.gep(table, [i64(0), q], inbounds=True, source_etype=table_type),
                        typ=ir.IntType(64)) for q in (p, b.add(p, i64(1)))]
        scratch = ir.Constant(ir.PointerType(), None) if base is None else \
            b.gep(base, [b.mul(p, i64(scratch_bytes))], inbounds=True, source_etype=ir.IntType(8))
        body(bound[0], bound[1], scratch, *([p] if pass_unit else []))
    kernel.max_partitions = units
    return units


def _aligned_scratch(kernel, nbytes: int) -> ir.Value:
    """A pointer to `nbytes` of this kernel's scratch slot, rounded up to 64 bytes."""
    from ..hlo.shape import Shape
    from .gemm_packing import ALIGN
    slot = kernel.scratch_slot(Shape("u8", (nbytes + ALIGN,)))
    e, pointer = kernel.entry, kernel.slot_pointer(slot)
    pad = e.and_(e.sub(i64(0), e.ptrtoint(pointer, ir.IntType(64))), i64(ALIGN - 1))
    return e.gep(pointer, [pad], inbounds=True, source_etype=ir.IntType(8), name="gemm.scratch")


def _offset(b, pointer, elements, etype):
    return b.gep(pointer, [b.mul(elements, i64(element_bytes(etype)))], inbounds=True,
                 source_etype=ir.IntType(8))


def _threads() -> int:
    from .. import runtime
    return runtime.get_options().intra_op_threads
