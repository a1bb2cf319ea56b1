"""Matrix-vector products (m == 1 or n == 1) for emit_gemm.

Each matrix element is used once, so packing would only add traffic: the kernel
streams the matrix straight from memory. Both cases are one problem,

    out[o] = sum_k mat[o*s_o + k*s_k] * vec[k*s_v]      for o in an output range,

with (mat, vec) = (lhs, rhs) when n == 1 and (rhs, lhs) when m == 1. The loop order
follows the matrix's layout so that vector loads are contiguous:

    s_k == 1  "dot":  per output, a vector accumulator along k, summed at the end
    s_o == 1  "axpy": per block of `lanes` outputs, acc += mat[o:o+lanes, k] * vec[k]
    otherwise         a scalar loop (no contiguous direction to vectorize)
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .gemm_ir import (GemmSpec, I32, const, convert, element_ptr, entry_alloca, for_range, narrow,
                      splat, storage_type)


@dataclass(frozen=True)
class _Operand:
    ptr: ir.Value
    dtype: str

    def load(self, b, arith, index, lanes=None):
        """Element(s) at `index` converted to the accumulation type (contiguous if lanes)."""
        ety = storage_type(self.dtype)
        ptr = element_ptr(b, self.ptr, ety, index)
        value = b.load(ptr, typ=ir.VectorType(ety, lanes) if lanes else ety, align=1 if lanes else None)
        return convert(b, value, self.dtype, arith.type, arith.is_float)


@dataclass(frozen=True)
class _MatVec:
    mat: _Operand
    vec: _Operand
    s_o: int
    s_k: int
    s_v: int


def emit_gemv(fn: ir.Function, spec: GemmSpec, vector_bits: int) -> None:
    """Fills `fn` (emit_gemm's signature) for m == 1 or n == 1."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lhs, rhs, out, m_begin, m_end = fn.args
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
    """Rows contiguous along k: a vector accumulator per output, reduced at the end."""
    arith = spec.arith
    vty = arith.vector(lanes)
    k_main = spec.k - spec.k % lanes
    with for_range(b, begin, end, name="o") as o:
        slot = entry_alloca(b, vty)
        b.store(arith.zero(vty), slot)
        row = b.mul(o, const(mv.s_o))
        with for_range(b, 0, k_main, lanes, name="kv") as k:
            m = mv.mat.load(b, arith, b.add(row, k), lanes)
            v = _load_vec_lanes(b, arith, mv, k, lanes)
            b.store(arith.madd(b, m, v, b.load(slot, typ=vty)), slot)
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
    """Columns contiguous along the outputs: acc[o:o+lanes] += mat[o:o+lanes, k] * vec[k]."""
    arith = spec.arith
    vty = arith.vector(lanes)
    count = b.sub(end, begin)
    vector_end = b.add(begin, b.and_(count, const(-lanes)))
    with for_range(b, begin, vector_end, lanes, name="o") as o:
        slot = entry_alloca(b, vty)
        b.store(arith.zero(vty), slot)
        with for_range(b, 0, spec.k, name="k") as k:
            m = mv.mat.load(b, arith, b.add(o, b.mul(k, const(mv.s_k))), lanes)
            v = splat(b, mv.vec.load(b, arith, b.mul(k, const(mv.s_v))), lanes)
            b.store(arith.madd(b, m, v, b.load(slot, typ=vty)), slot)
        _store(b, spec, out, o, b.load(slot, typ=vty), lanes)
    with for_range(b, vector_end, end, name="orem") as o:
        _store(b, spec, out, o, _scalar_dot(b, spec, mv, o, 0))
