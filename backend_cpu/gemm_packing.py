"""Packing for the GEMM: copies a block of A or B into contiguous micro-panels.

A and B are packed the same way once described along two axes: `x`, the axis the
micro-kernel lays out side by side (A's rows, B's columns), and `k`, the contracted
axis. Element (x, kk) of the source sits at x*s_x + kk*s_k, and a micro-panel of
width W (MR for A, NR for B) is stored k-major:

    dst[panel*W*kc + kk*W + x]          zero where x is past the matrix edge

so that the micro-kernel reads both panels strictly sequentially. Packing also
converts the elements to the accumulation type (s8 -> i32, f16 -> f32, ...); any
transpose or row padding of the operand is absorbed here through the strides.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .gemm_ir import (I64, PTR, VOID, Arith, const, convert, element_ptr, for_range, imin,
                      storage_type)

ALIGN = 64   # bytes; packed buffers and NR-wide panel rows start on a cache line


@dataclass(frozen=True)
class PackLayout:
    """How one operand is read: its element type and strides along x and k, and the
    panel width W with the vector width used when rows of the panel are contiguous."""
    dtype: str
    s_x: int
    s_k: int
    width: int
    lanes: int

    def key(self) -> str:
        return f"{self.dtype}.x{self.s_x}.k{self.s_k}.w{self.width}.v{self.lanes}"


def emit_pack(module: ir.Module, name: str, layout: PackLayout, arith: Arith) -> ir.Function:
    """Adds `void name(ptr dst, ptr src, i64 x0, i64 xcount, i64 k0, i64 kcount)`.

    Packs source elements x0 <= x < x0+xcount, k0 <= k < k0+kcount into ceil(xcount/W)
    micro-panels of W x kcount elements at dst (W*kcount elements apart).
    """
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, I64, I64, I64, I64]), name)
    fn.linkage = "internal"
    for arg in fn.args[:2]:
        arg.add_attribute("noalias")
    dst, src, x0, xcount, k0, kcount = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    w = layout.width
    with for_range(b, 0, xcount, w, name="p") as p0:
        panel = element_ptr(b, dst, arith.type, b.mul(p0, kcount))
        first = b.add(x0, p0)
        width = imin(b, w, b.sub(xcount, p0))
        with b.if_else(b.icmp_signed("==", width, const(w))) as (full, edge):
            with full:
                if layout.s_x == 1 and w % layout.lanes == 0:
                    _copy_rows_as_vectors(b, layout, arith, panel, src, first, k0, kcount)
                else:
                    _copy_scalars(b, layout, arith, panel, src, first, const(w), k0, kcount)
            with edge:
                _copy_scalars(b, layout, arith, panel, src, first, width, k0, kcount)
                _zero_columns(b, layout, arith, panel, width, kcount)
    b.ret_void()
    return fn


def _copy_rows_as_vectors(b, layout, arith, panel, src, first, k0, kcount):
    """x contiguous in the source: each panel row is W/lanes vector loads and stores."""
    src_ty = storage_type(layout.dtype)
    vec_align = min(ALIGN, layout.lanes * arith.nbytes)
    with for_range(b, 0, kcount, name="kk") as kk:
        src_row = b.add(first, b.mul(b.add(k0, kk), const(layout.s_k)))
        dst_row = b.mul(kk, const(layout.width))
        for v in range(0, layout.width, layout.lanes):
            value = b.load(element_ptr(b, src, src_ty, b.add(src_row, const(v))),
                           typ=ir.VectorType(src_ty, layout.lanes), align=1)
            value = convert(b, value, layout.dtype, arith.type, arith.is_float)
            b.store(value, element_ptr(b, panel, arith.type, b.add(dst_row, const(v))),
                    align=vec_align)


def _copy_scalars(b, layout, arith, panel, src, first, width, k0, kcount):
    """Element by element, the inner loop along the source's unit-stride axis when
    there is one (sequential reads; the writes then stride by W, which stays in L1)."""
    def copy(x, kk):
        src_ty = storage_type(layout.dtype)
        offset = b.add(b.mul(b.add(first, x), const(layout.s_x)),
                       b.mul(b.add(k0, kk), const(layout.s_k)))
        value = b.load(element_ptr(b, src, src_ty, offset), typ=src_ty)
        value = convert(b, value, layout.dtype, arith.type, arith.is_float)
        b.store(value, element_ptr(b, panel, arith.type,
                                   b.add(b.mul(kk, const(layout.width)), x)))

    # Strided copies are left scalar: vectorized, they become gathers or scatters that
    # cost more compile time than they save (packing is a few % of the GEMM).
    if layout.s_k == 1 and layout.s_x != 1:
        with for_range(b, 0, width, name="x") as x:
            with for_range(b, 0, kcount, name="kk", vectorize=False) as kk:
                copy(x, kk)
    else:
        with for_range(b, 0, kcount, name="kk") as kk:
            with for_range(b, 0, width, name="x", vectorize=layout.s_x == 1) as x:
                copy(x, kk)


def _zero_columns(b, layout, arith, panel, width, kcount):
    """Zero the panel past the matrix edge, so the micro-kernel adds nothing there."""
    with for_range(b, 0, kcount, name="kz") as kk:
        row = b.mul(kk, const(layout.width))
        with for_range(b, width, layout.width, name="xz") as x:
            b.store(arith.zero(arith.type), element_ptr(b, panel, arith.type, b.add(row, x)))
