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

from ..llvm.ir_toolkit import I64, PTR, VOID, const, convert, element_ptr, for_range, storage_type

from .spec import Arith

ALIGN = 64   # bytes; packed buffers and NR-wide panel rows start on a cache line


@dataclass(frozen=True)
class PackLayout:
    """How one operand is packed: its element type, which of its axes has unit stride
    (that decides the loop order and whether rows copy as vectors), and the panel width
    W with the vector width. The strides themselves are arguments of the routine, so
    one routine serves every GEMM of a module with the same layout class."""
    dtype: str
    x_unit: bool      # s_x == 1: panel rows are contiguous in the source
    k_unit: bool      # s_k == 1 (and s_x != 1): transposed into the panel
    width: int
    lanes: int
    # k_unit only: transpose lanes x lanes squares in registers (fast, but ~50 ms of
    # LLVM time) rather than copy element by element (about 3x slower per element).
    in_registers: bool = True

    @classmethod
    def of(cls, dtype: str, s_x: int, s_k: int, width: int, lanes: int,
           in_registers: bool = True) -> "PackLayout":
        k_unit = s_k == 1 and s_x != 1
        return cls(dtype, s_x == 1, k_unit, width, lanes, in_registers and k_unit and lanes > 1)

    def key(self) -> str:
        unit = "x" if self.x_unit else "k" if self.k_unit else "none"
        how = ".regs" if self.in_registers else ""
        return f"{self.dtype}.unit_{unit}.w{self.width}.v{self.lanes}{how}"


def emit_pack(module: ir.Module, name: str, layout: PackLayout, arith: Arith) -> ir.Function:
    """Adds `void name(ptr dst, ptr src, i64 x0, i64 xcount, i64 k0, i64 kcount,
    i64 s_x, i64 s_k)`.

    Packs source elements x0 <= x < x0+xcount, k0 <= k < k0+kcount (element (x, k) at
    x*s_x + k*s_k) into ceil(xcount/W) micro-panels of W x kcount elements at dst
    (W*kcount elements apart).
    """
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR] + [I64] * 6), name)
    fn.linkage = "internal"
    # Out of line, the routine is compiled once for every block size: inlined, LLVM
    # would specialize (and fully unroll) it on each call site's constant sizes.
    fn.attributes.add("noinline")
    for arg in fn.args[:2]:
        arg.add_attribute("noalias")
    dst, src, x0, xcount, k0, kcount, s_x, s_k = fn.args
    if layout.x_unit:
        s_x = const(1)    # known: lets LLVM see the contiguous accesses
    if layout.k_unit:
        s_k = const(1)
    strides = (s_x, s_k)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    w = layout.width
    full_end = b.mul(b.sdiv(xcount, const(w)), const(w))   # x of the first partial panel
    if layout.x_unit:
        _copy_rows_as_vectors(b, layout, arith, dst, src, x0, full_end, k0, kcount, s_k)
    else:
        with for_range(b, 0, full_end, w, name="p") as p0:
            panel = element_ptr(b, dst, arith.type, b.mul(p0, kcount))
            first = b.add(x0, p0)
            if layout.in_registers:
                _copy_transposing(b, layout, arith, panel, src, first, k0, kcount, strides)
            else:
                _copy_scalars(b, layout, arith, panel, src, first, const(w), k0, kcount,
                              strides)
    with b.if_then(b.icmp_signed("<", full_end, xcount)):
        panel = element_ptr(b, dst, arith.type, b.mul(full_end, kcount))
        width = b.sub(xcount, full_end)
        _copy_scalars(b, layout, arith, panel, src, b.add(x0, full_end), width, k0, kcount,
                      strides)
        _zero_columns(b, layout, arith, panel, width, kcount)
    b.ret_void()
    return fn


def _copy_rows_as_vectors(b, layout, arith, dst, src, x0, full_end, k0, kcount, s_k):
    """x contiguous in the source: k outer, so the source is read row after row, each
    row's [x0, x0 + full_end) going out to every full panel as W/lanes vector copies
    (a narrower last vector when W is not a multiple of lanes, as for A's 6 rows).
    Panel by panel instead, each k would touch another cache line and page."""
    src_ty = storage_type(layout.dtype)
    w = layout.width
    aligned = w % layout.lanes == 0   # then every panel row starts aligned
    panel_stride = b.mul(kcount, const(w))
    with for_range(b, 0, kcount, name="kk") as kk:
        src_row = b.add(x0, b.mul(b.add(k0, kk), s_k))
        with for_range(b, 0, full_end, w, name="p") as p0:
            dst_row = b.add(b.mul(b.sdiv(p0, const(w)), panel_stride), b.mul(kk, const(w)))
            for v in range(0, w, layout.lanes):
                count = min(layout.lanes, w - v)
                offset = b.add(src_row, b.add(p0, const(v)))
                value = b.load(element_ptr(b, src, src_ty, offset),
                               typ=ir.VectorType(src_ty, count), align=1)
                value = convert(b, value, layout.dtype, arith.type, arith.is_float)
                b.store(value, element_ptr(b, dst, arith.type, b.add(dst_row, const(v))),
                        align=min(ALIGN, count * arith.nbytes) if aligned else arith.nbytes)


def _copy_transposing(b, layout, arith, panel, src, first, k0, kcount, strides):
    """k contiguous in the source (row-major A, transposed B): load `lanes` consecutive
    k of each of `lanes` x at once and transpose the square in registers, so that
    both the loads and the panel stores are vectors. The k remainder goes scalar."""
    lanes, w = layout.lanes, layout.width
    k_vec = b.and_(kcount, const(-lanes))
    # Squares side by side along x: one loop body (each square is ~100 instructions of
    # shuffles, costly to compile), unrolled by nobody.
    full = w // lanes * lanes
    with for_range(b, 0, k_vec, lanes, name="kv", transform=False) as kk:
        if full == lanes:
            _transpose_square_block(b, layout, arith, panel, src, first, k0, kk, strides,
                                    const(0), lanes)
        elif full:
            with for_range(b, 0, full, lanes, name="xb", transform=False) as x_base:
                _transpose_square_block(b, layout, arith, panel, src, first, k0, kk, strides,
                                        x_base, lanes)
        if w > full:   # the panel's last x, fewer than lanes (A's 6 rows: all of them)
            _transpose_square_block(b, layout, arith, panel, src, first, k0, kk, strides,
                                    const(full), w - full)
    rest_panel = element_ptr(b, panel, arith.type, b.mul(k_vec, const(w)))
    _copy_scalars(b, layout, arith, rest_panel, src, first, const(w), b.add(k0, k_vec),
                  b.sub(kcount, k_vec), strides)


def _transpose_square_block(b, layout, arith, panel, src, first, k0, kk, strides, x_base,
                            count):
    """panel[(kk + j)*W + x_base + i] = src[first + x_base + i, k0 + kk + j] for
    i < count (<= lanes), j < lanes."""
    lanes, w = layout.lanes, layout.width
    src_ty = storage_type(layout.dtype)
    rows = []
    for i in range(count):
        x = b.add(first, b.add(x_base, const(i)))
        offset = b.add(b.mul(x, strides[0]), b.add(k0, kk))
        row = b.load(element_ptr(b, src, src_ty, offset), typ=ir.VectorType(src_ty, lanes),
                     align=1)
        rows.append(convert(b, row, layout.dtype, arith.type, arith.is_float))
    rows += [ir.Constant(arith.vector(lanes), None)] * (lanes - count)
    for j, column in enumerate(transpose_square(b, rows)):
        if count < lanes:   # a panel narrower than a vector (A's MR rows)
            column = b.shuffle_vector(column, column, _mask(range(count)))
        dst = element_ptr(b, panel, arith.type,
                          b.add(b.mul(b.add(kk, const(j)), const(w)), x_base))
        b.store(column, dst, align=arith.nbytes)


def transpose_square(b, rows: list) -> list:
    """The transpose of an L x L matrix held as L vectors of L lanes (L a power of 2):
    log2(L) butterfly stages, each a two-input shufflevector per row (one vpermt2ps
    on AVX-512). Stage `bit` swaps that bit of the row index with the column index's:

        new[r][c] = old[r with bit := c's bit][c with bit := r's bit]
    """
    n = len(rows)
    bit = 1
    while bit < n:
        new = []
        for r in range(n):
            low, high = rows[r & ~bit], rows[r | bit]
            mask = [((c & ~bit) | (bit if r & bit else 0)) + (n if c & bit else 0)
                    for c in range(n)]
            new.append(b.shuffle_vector(low, high, _mask(mask)))
        rows, bit = new, bit * 2
    return rows


def _mask(indices) -> ir.Constant:
    indices = list(indices)
    return ir.Constant(ir.VectorType(ir.IntType(32), len(indices)), indices)


def _copy_scalars(b, layout, arith, panel, src, first, width, k0, kcount, strides):
    """Element by element, the inner loop along the source's unit-stride axis when
    there is one (sequential reads; the writes then stride by W, which stays in L1)."""
    def copy(x, kk):
        src_ty = storage_type(layout.dtype)
        offset = b.add(b.mul(b.add(first, x), strides[0]), b.mul(b.add(k0, kk), strides[1]))
        value = b.load(element_ptr(b, src, src_ty, offset), typ=src_ty)
        value = convert(b, value, layout.dtype, arith.type, arith.is_float)
        b.store(value, element_ptr(b, panel, arith.type,
                                   b.add(b.mul(kk, const(layout.width)), x)))

    # Strided copies are left scalar: vectorized, they become gathers or scatters that
    # cost more compile time than they save (packing is a few % of the GEMM).
    if layout.k_unit:
        with for_range(b, 0, width, name="x") as x:
            with for_range(b, 0, kcount, name="kk", transform=False) as kk:
                copy(x, kk)
    else:
        with for_range(b, 0, kcount, name="kk") as kk:
            with for_range(b, 0, width, name="x", transform=layout.x_unit) as x:
                copy(x, kk)


def _zero_columns(b, layout, arith, panel, width, kcount):
    """Zero the panel past the matrix edge, so the micro-kernel adds nothing there."""
    with for_range(b, 0, kcount, name="kz") as kk:
        row = b.mul(kk, const(layout.width))
        with for_range(b, width, layout.width, name="xz") as x:
            b.store(arith.zero(arith.type), element_ptr(b, panel, arith.type, b.add(row, x)))
