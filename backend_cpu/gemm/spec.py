"""What one GEMM computes: `GemmSpec` (types, sizes, strides), and its *accumulation*
arithmetic.

The GEMM reads operands of any HLO element type but computes in one accumulation
type chosen from the output type (f16 accumulates in f32, s8 in i32, ...). `Arith`
bundles that choice with the few operations the kernels need (zero, multiply-add, add),
so the micro-kernel is written once for floats and integers; `narrow` rounds a result
back to the output's storage type.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...hlo.dtypes import dtype as hlo_dtype

from ..llvm.ir_toolkit import intrinsic, storage_type


@dataclass(frozen=True)
class Arith:
    """The accumulation type of a GEMM and its multiply-add."""
    type: ir.Type          # scalar accumulation type: float, double, i32 or i64
    is_float: bool
    bits: int

    @property
    def nbytes(self) -> int:
        return self.bits // 8

    def vector(self, lanes: int) -> ir.VectorType:
        return ir.VectorType(self.type, lanes)

    def zero(self, ty: ir.Type) -> ir.Constant:
        """Zero of the scalar or vector type `ty` (a zeroinitializer)."""
        return ir.Constant(ty, None)

    def madd(self, b: ir.IRBuilder, x, y, acc):
        """acc + x*y: `llvm.fmuladd` for floats -- one fused multiply-add where the
        target has FMA (one rounding, like XLA's CPU backend with FMA contraction), a
        multiply and an add where it has not (SSE4.2: `llvm.fma` would call libm per
        element); a wrapping mul and add for integers."""
        if self.is_float:
            return b.call(intrinsic(b.module, "llvm.fmuladd", x.type, 3), [x, y, acc])
        return b.add(acc, b.mul(x, y))

    def add(self, b: ir.IRBuilder, x, y):
        return b.fadd(x, y) if self.is_float else b.add(x, y)


def accumulation_arith(out_dtype: str) -> Arith:
    """f64 -> double; other floats -> float; integers of up to 32 bits -> i32 (wrapping
    arithmetic modulo 2^32 then truncated equals arithmetic modulo 2^bits), 64-bit -> i64."""
    d = hlo_dtype(out_dtype)
    if out_dtype == "f64":
        return Arith(ir.DoubleType(), True, 64)
    if out_dtype in ("f32", "f16"):
        return Arith(ir.FloatType(), True, 32)
    if d.is_integer:
        bits = 64 if d.bits == 64 else 32
        return Arith(ir.IntType(bits), False, bits)
    raise NotImplementedError(f"gemm: output element type {out_dtype} is not supported")


def narrow(b: ir.IRBuilder, value, arith: Arith, out_dtype: str):
    """Accumulation type -> the output's storage type (f32 -> f16 rounds to nearest even)."""
    out_ty = storage_type(out_dtype)
    lanes = value.type.count if isinstance(value.type, ir.VectorType) else None
    target = ir.VectorType(out_ty, lanes) if lanes else out_ty
    if out_ty == arith.type:
        return value
    return b.fptrunc(value, target) if arith.is_float else b.trunc(value, target)



@dataclass(frozen=True)
class GemmSpec:
    """One GEMM, fully static: out[i, j] = sum_k lhs[i, k] * rhs[k, j], where lhs[i, k]
    sits at element offset i*lhs_strides[0] + k*lhs_strides[1] (likewise rhs) and out
    is a contiguous row-major [m, n]."""
    lhs_dtype: str
    rhs_dtype: str
    out_dtype: str
    m: int
    n: int
    k: int
    lhs_strides: tuple[int, int]
    rhs_strides: tuple[int, int]

    @property
    def arith(self) -> Arith:
        return accumulation_arith(self.out_dtype)
