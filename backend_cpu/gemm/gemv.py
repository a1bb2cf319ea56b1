"""Matrix-vector products (m == 1 or n == 1) for emit_gemm.

Each matrix element is used once, so packing would only add traffic: the kernel
streams the matrix straight from memory. Both cases are one problem,

    out[o] = sum_k mat[o*s_o + k*s_k] * vec[k*s_v]      for o in an output range,

with (mat, vec) = (lhs, rhs) when n == 1 and (rhs, lhs) when m == 1. The loop order
follows the matrix's layout so that vector loads are contiguous:

    s_k == 1  "dot":  a few outputs at a time, vector accumulators along k, each
                      summed across its lanes at the end
    s_o == 1  "axpy": k outer; acc[o:o+lanes] += mat[o:o+lanes, k] * vec[k] over a block
                      of outputs kept in L1, the matrix read row after row
    otherwise         a scalar loop (no contiguous direction to vectorize)
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..llvm.ir_toolkit import (I32, const, convert, element_ptr, entry_alloca, for_range, imin,
                               splat, storage_type)

from .spec import GemmSpec, narrow

# Rows of a "dot" product computed together (independent FMA chains sharing vec loads).
DOT_ROWS = 4
# Outputs of an "axpy" product accumulated per pass over the matrix: 4 KiB of f32,
# resident in L1 next to the streaming matrix rows.
AXPY_BLOCK = 1024
AXPY_K_UNROLL = 4


@dataclass(frozen=True)
class _Operand:
    """One operand of the product: its base pointer and element type."""
    ptr: ir.Value
    dtype: str

    def load(self, b, arith, index, lanes=None):
        """Element(s) at `index` converted to the accumulation type (contiguous if lanes)."""
        ety = storage_type(self.dtype)
        ptr = element_ptr(b, self.ptr, ety, index)
        value = b.load(ptr, typ=ir.VectorType(ety, lanes) if lanes else ety,
                       align=1 if lanes else None)
        return convert(b, value, self.dtype, arith.type, arith.is_float)


@dataclass(frozen=True)
class _MatVec:
    """The product as out[o] = sum_k mat[o*s_o + k*s_k] * vec[k*s_v]."""
    mat: _Operand
    vec: _Operand
    s_o: int
    s_k: int
    s_v: int


def emit_gemv(fn: ir.Function, spec: GemmSpec, vector_bits: int) -> None:
    """Fills `fn` (emit_gemm's signature) for m == 1 or n == 1."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lhs, rhs, out, m_begin, m_end, _ = fn.args   # no scratch: nothing is packed
    arith = spec.arith
    lanes = max(1, vector_bits // arith.bits)
    if spec.n == 1:
        mv = _MatVec(_Operand(lhs, spec.lhs_dtype), _Operand(rhs, spec.rhs_dtype),
                     s_o=spec.lhs_strides[0], s_k=spec.lhs_strides[1], s_v=spec.rhs_strides[0])
        begin, end = m_begin, m_end
    else:  # m == 1: the outputs run along n; the partition is all of it or nothing
        mv = _MatVec(_Operand(rhs, spec.rhs_dtype), _Operand(lhs, spec.lhs_dtype),
                     s_o=spec.rhs_strides[1], s_k=spec.rhs_strides[0], s_v=spec.lhs_strides[1])
        begin, end = b.mul(m_begin, const(spec.n)), b.mul(m_end, const(spec.n))
    if mv.s_k == 1 and spec.k >= lanes:
        _emit_dot_form(b, spec, mv, out, begin, end, lanes)
    elif mv.s_o == 1 and lanes > 1:
        _emit_axpy_form(b, spec, mv, out, begin, end, lanes)
    else:
        with for_range(b, begin, end, name="o") as o:
            _store(b, spec, out, o, _scalar_dot(b, spec, mv, o, 0))
    b.ret_void()


def _store(b, spec, out, index, value, lanes=None):
    out_ty = storage_type(spec.out_dtype)
    b.store(narrow(b, value, spec.arith, spec.out_dtype), element_ptr(b, out, out_ty, index),
            align=1 if lanes else None)


def _scalar_dot(b, spec, mv, o, k_start):
    """sum over k in [k_start, k) of mat[o, k] * vec[k], scalar."""
    arith = spec.arith
    slot = entry_alloca(b, arith.type)
    b.store(arith.zero(arith.type), slot)
    row = b.mul(o, const(mv.s_o))
    with for_range(b, k_start, spec.k, name="k") as k:
        m = mv.mat.load(b, arith, b.add(row, b.mul(k, const(mv.s_k))))
        v = mv.vec.load(b, arith, b.mul(k, const(mv.s_v)))
        b.store(arith.madd(b, m, v, b.load(slot, typ=arith.type)), slot)
    return b.load(slot, typ=arith.type)


def _emit_dot_form(b, spec, mv, out, begin, end, lanes):
    """Rows contiguous along k: DOT_ROWS rows at a time share each load of `vec` and
    keep DOT_ROWS independent FMA chains in flight; leftover rows go one by one."""
    rows_end = b.add(begin, b.mul(b.sdiv(b.sub(end, begin), const(DOT_ROWS)), const(DOT_ROWS)))
    with for_range(b, begin, rows_end, DOT_ROWS, name="o") as o:
        _emit_dot_rows(b, spec, mv, out, o, DOT_ROWS, lanes)
    with for_range(b, rows_end, end, name="orem") as o:
        _emit_dot_rows(b, spec, mv, out, o, 1, lanes)


def _emit_dot_rows(b, spec, mv, out, first, nrows, lanes):
    """out[first + r] for r < nrows: vector accumulators along k, summed at the end."""
    arith = spec.arith
    vty = arith.vector(lanes)
    k_main = spec.k - spec.k % lanes
    slots = [entry_alloca(b, vty) for _ in range(nrows)]
    for slot in slots:
        b.store(arith.zero(vty), slot)
    row_offsets = [b.mul(b.add(first, const(r)), const(mv.s_o)) for r in range(nrows)]
    with for_range(b, 0, k_main, lanes, name="kv") as k:
        v = _load_vec_lanes(b, arith, mv, k, lanes)
        for slot, row in zip(slots, row_offsets):
            m = mv.mat.load(b, arith, b.add(row, k), lanes)
            b.store(arith.madd(b, m, v, b.load(slot, typ=vty)), slot)
    for r, slot in enumerate(slots):
        o = b.add(first, const(r))
        total = _horizontal_sum(b, arith, b.load(slot, typ=vty), lanes)
        if k_main < spec.k:
            total = arith.add(b, total, _scalar_dot(b, spec, mv, o, k_main))
        _store(b, spec, out, o, total)


def _load_vec_lanes(b, arith, mv, k, lanes):
    """vec[k : k+lanes] (strided: gathered lane by lane)."""
    if mv.s_v == 1:
        return mv.vec.load(b, arith, k, lanes)
    value = ir.Constant(arith.vector(lanes), None)
    for lane in range(lanes):
        x = mv.vec.load(b, arith, b.mul(b.add(k, const(lane)), const(mv.s_v)))
        value = b.insert_element(value, x, ir.Constant(I32, lane))
    return value


def _horizontal_sum(b, arith, vec, lanes):
    """Adds the lanes pairwise: halves the vector log2(lanes) times."""
    width = lanes
    while width > 1:
        half = width // 2
        lo = b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, half), list(range(half))))
        hi = b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, half),
                                                    list(range(half, width))))
        vec, width = arith.add(b, lo, hi), half
    return b.extract_element(vec, ir.Constant(I32, 0))


def _emit_axpy_form(b, spec, mv, out, begin, end, lanes):
    """Outputs contiguous in the matrix: out[o] += mat[o, k] * vec[k], k outer.

    The matrix is read row after row (sequential, prefetch-friendly) while a block of
    AXPY_BLOCK accumulators stays in L1; AXPY_K_UNROLL rows of k are folded into each
    pass over the accumulators to halve their loads and stores.
    """
    arith = spec.arith
    acc = entry_alloca(b, arith.type, AXPY_BLOCK, name="axpy_acc", align=64)
    k_main = spec.k - spec.k % AXPY_K_UNROLL
    with for_range(b, begin, end, AXPY_BLOCK, name="ob") as ob:
        width = imin(b, AXPY_BLOCK, b.sub(end, ob))
        with for_range(b, 0, width, name="z") as o:
            b.store(arith.zero(arith.type), element_ptr(b, acc, arith.type, o))
        with for_range(b, 0, k_main, AXPY_K_UNROLL, name="k") as k:
            _emit_axpy_rows(b, spec, mv, acc, ob, width, k, AXPY_K_UNROLL, lanes)
        with for_range(b, k_main, spec.k, name="krem") as k:
            _emit_axpy_rows(b, spec, mv, acc, ob, width, k, 1, lanes)
        with for_range(b, 0, width, name="st") as o:
            value = b.load(element_ptr(b, acc, arith.type, o), typ=arith.type)
            _store(b, spec, out, b.add(ob, o), value)


def _emit_axpy_rows(b, spec, mv, acc, ob, width, k, nrows, lanes):
    """acc[o] += sum_{u < nrows} mat[ob + o, k + u] * vec[k + u] for o < width."""
    arith = spec.arith
    scalars = [mv.vec.load(b, arith, b.mul(b.add(k, const(u)), const(mv.s_v)))
               for u in range(nrows)]
    rows = [b.mul(b.add(k, const(u)), const(mv.s_k)) for u in range(nrows)]
    vector_width = b.and_(width, const(-lanes))

    def update(o, count):
        ty = arith.vector(count) if count > 1 else arith.type
        slot = element_ptr(b, acc, arith.type, o)
        value = b.load(slot, typ=ty, align=arith.nbytes)
        for x, row in zip(scalars, rows):
            m = mv.mat.load(b, arith, b.add(b.add(ob, o), row), count if count > 1 else None)
            value = arith.madd(b, m, splat(b, x, count) if count > 1 else x, value)
        b.store(value, slot, align=arith.nbytes)

    with for_range(b, 0, vector_width, lanes, name="ov") as o:
        update(o, lanes)
    with for_range(b, vector_width, width, name="os", transform=False) as o:
        update(o, 1)
