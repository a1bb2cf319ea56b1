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

from math import prod

import llvmlite.ir as ir

from ..gemm import packed_gemm
from ..gemm.operands import View
from ..gemm.partition import even_cuts, intra_op_threads, run_units
from ..llvm.loops import for_range, i64
from ..llvm.types import element_bytes

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


def why_not_gemm(dot, lhs: View | None, rhs: View | None, out_shape) -> str | None:
    """Why `dot` (operands seen as the strided views `lhs`, `rhs`) does not go to the
    packed GEMM, or None when it does (try_emit_gemm)."""
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
    return packed_gemm.spec_error(lhs_dtype=lhs.etype, rhs_dtype=rhs.etype,
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
    if why_not_gemm(dot, lhs, rhs, out.shape) is not None:
        return None
    a = dot.attrs
    lb, rb = list(a.get("lhs_batch_dims", ())), list(a.get("rhs_batch_dims", ()))
    (m, sm), (k, slk), (k2, srk), (n, sn) = _gemm_dims(dot, lhs, rhs)
    args = dict(lhs_dtype=lhs.etype, rhs_dtype=rhs.etype, out_dtype=out.shape.element_type,
                m=m, n=n, k=k, lhs_strides=(sm, slk), rhs_strides=(srk, sn))
    try:
        fn = packed_gemm.emit_gemm(kernel.function.module, f"{kernel.name}_gemm", **args)
    except ValueError:
        return None
    scratch_bytes = packed_gemm.gemm_scratch_bytes(**args)
    b = kernel.b
    if not lb:
        parts = packed_gemm.gemm_partitions(m, n, k, intra_op_threads())
        cuts = [begin for begin, _ in packed_gemm.gemm_row_split(m, parts)] + [m]
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


def _offset(b, pointer, elements, etype):
    return b.gep(pointer, [b.mul(elements, i64(element_bytes(etype)))], inbounds=True,
                 source_etype=ir.IntType(8))
