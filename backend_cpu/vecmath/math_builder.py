"""Type-generic IR building blocks for the vector math library.

`MathBuilder` wraps an `llvmlite.ir.IRBuilder` together with one floating-point
type (a scalar `float`/`double` or a vector of them) and offers the handful of
operations every math routine is made of: splat constants, fused multiply-add,
Horner polynomials, selects, integer views of the bits, conversions between the
f32 and f64 versions of the same shape, the error-free transformations of
double-double arithmetic (`two_sum`, `two_prod`) and per-lane loads from a
constant table.

Everything emitted is straight-line code: branches are replaced by `select`, so
that a scalar use inside a loop stays vectorizable and a vector use stays one
basic block.
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from .. import target as targets

F32 = ir.FloatType()
F64 = ir.DoubleType()

# Bit layout of the two IEEE binary formats: (int bits, mantissa bits, exponent bias).
_LAYOUT = {"float": (32, 23, 127), "double": (64, 52, 1023)}


def float_kind(ty: ir.Type) -> str:
    """'float' or 'double' for a scalar or vector floating-point type, else an error."""
    element = ty.element if isinstance(ty, ir.VectorType) else ty
    if isinstance(element, ir.FloatType):
        return "float"
    if isinstance(element, ir.DoubleType):
        return "double"
    raise TypeError(f"vecmath: expected float or double (or a vector of them), got {ty}")


def _intrinsic_suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_intrinsic_suffix(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return {"float": "f32", "double": "f64"}[float_kind(ty)]


class MathBuilder:
    """An IRBuilder bound to one float type `ty` (scalar or vector).

    Constants are splatted to the shape of `ty`; `.int_ty` is the integer type
    of the same shape and width, used to look at the bits.
    """

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type):
        self.b = builder
        self.ty = ty
        self.kind = float_kind(ty)
        self.bits, self.mant_bits, self.bias = _LAYOUT[self.kind]
        self.lanes = ty.count if isinstance(ty, ir.VectorType) else None
        self.int_ty = self._shaped(ir.IntType(self.bits))
        self.bool_ty = self._shaped(ir.IntType(1))

    # ---- types and constants -------------------------------------------------
    def _shaped(self, element: ir.Type) -> ir.Type:
        return element if self.lanes is None else ir.VectorType(element, self.lanes)

    def with_kind(self, kind: str) -> "MathBuilder":
        """The builder for the same shape with element type 'float' or 'double'."""
        return MathBuilder(self.b, self._shaped(F32 if kind == "float" else F64))

    def splat(self, element_ty: ir.Type, value) -> ir.Constant:
        ty = self._shaped(element_ty)
        if self.lanes is None:
            return ir.Constant(ty, value)
        return ir.Constant(ty, [ir.Constant(element_ty, value)] * self.lanes)

    def const(self, value: float) -> ir.Constant:
        return self.splat(F32 if self.kind == "float" else F64, float(value))

    def iconst(self, value: int) -> ir.Constant:
        return self.splat(ir.IntType(self.bits), int(value))

    def bits_const(self, value: int) -> ir.Value:
        """A float constant given by its bit pattern (NaN payloads, exact values)."""
        return self.b.bitcast(self.iconst(value), self.ty)

    # ---- intrinsics and arithmetic -------------------------------------------
    def intrinsic(self, name: str, args: Sequence[ir.Value], ret_ty: ir.Type | None = None):
        arg_ty = args[0].type
        full = f"{name}.{_intrinsic_suffix(arg_ty)}"
        module = self.b.module
        fn = module.globals.get(full)
        if fn is None:
            fnty = ir.FunctionType(ret_ty or arg_ty, [a.type for a in args])
            fn = ir.Function(module, fnty, name=full)
        return self.b.call(fn, list(args))

    def fma(self, a, b, c):
        """a * b + c with one rounding.

        x86 targets without FMA (SSE4.2) would turn `llvm.fma` into a libm call per
        element; there it is computed in vector IR instead: f32 in f64 (the product is
        exact there; the sum rounds twice, which can differ from one rounding in the
        last bit at a tie), f64 by Dekker's exact product and a compensated sum
        (exact wherever the routines rely on it: fma(a, b, -fl(a*b)) is the product's
        error).
        """
        target = targets.current()
        if not target.is_x86 or target.has("fma"):
            return self.intrinsic("llvm.fma", [a, b, c])
        if self.kind == "float":
            wide = self._shaped(F64)
            a64, b64, c64 = (self.b.fpext(v, wide) for v in (a, b, c))
            return self.b.fptrunc(self.b.fadd(self.b.fmul(a64, b64), c64), self.ty)
        # Veltkamp's split needs room on both sides of the exponent range: its low
        # halves are 2^-27 of the operand (flushed to zero below 2^-995) and its
        # scaling by 2^27 overflows above 2^996. Far-out operands are scaled by exact
        # powers of two first, and the product is scaled back.
        scale_a, unscale_a = self._split_range(a)
        scale_b, unscale_b = self._split_range(b)
        p, e = self._dekker_product(self.b.fmul(a, scale_a), self.b.fmul(b, scale_b))
        # One factor at a time: 2^-1200 itself is not a double.
        p = self.b.fmul(self.b.fmul(p, unscale_a), unscale_b)
        e = self.b.fmul(self.b.fmul(e, unscale_a), unscale_b)
        s, err = self.two_sum(p, c)
        exact = self.b.fadd(s, self.b.fadd(err, e))
        # The error terms of an infinite or NaN operand or product are NaN (inf - inf):
        # there the plain a * b + c is what one rounding gives (fma(0, 0, -inf) = -inf,
        # which the compensation turned into NaN: complex multiply of i*inf by i),
        # except that finite a and b with an infinite c give c even where a * b
        # overflows (the exact product is finite).
        inf = self.const(float("inf"))
        plain = self.b.fadd(self.b.fmul(a, b), c)
        finite = self.cmp("<", self.fabs(plain), inf)
        c_wins = self.b.and_(self.cmp("==", self.fabs(c), inf),
                             self.b.and_(self.cmp("<", self.fabs(a), inf),
                                         self.cmp("<", self.fabs(b), inf)))
        return self.select(finite, exact, self.select(c_wins, c, plain))

    def _split_range(self, x):
        """(2^k, 2^-k): k = 600 for |x| < 2^-500, -600 for |x| > 2^900, else 0."""
        ax = self.fabs(x)
        tiny = self.cmp("<", ax, self.const(2.0 ** -500))
        huge = self.cmp(">", ax, self.const(2.0 ** 900))
        up = self.b.select(tiny, self.const(2.0 ** 600),
                           self.b.select(huge, self.const(2.0 ** -600), self.const(1.0)))
        down = self.b.select(tiny, self.const(2.0 ** -600),
                             self.b.select(huge, self.const(2.0 ** 600), self.const(1.0)))
        return up, down

    def _dekker_product(self, a, b):
        """(p, e): p = fl(a * b), a * b = p + e exactly, without an FMA (Veltkamp's split
        into 26-bit halves; for |a|, |b| within [2^-995, 2^996])."""
        def split(x):
            t = self.b.fmul(x, self.const(134217729.0))        # 2^27 + 1
            hi = self.b.fsub(t, self.b.fsub(t, x))
            return hi, self.b.fsub(x, hi)
        p = self.b.fmul(a, b)
        (ah, al), (bh, bl) = split(a), split(b)
        e = self.b.fadd(self.b.fadd(self.b.fadd(self.b.fsub(self.b.fmul(ah, bh), p),
                                                self.b.fmul(ah, bl)), self.b.fmul(al, bh)),
                        self.b.fmul(al, bl))
        return p, e

    def fabs(self, x):
        return self.intrinsic("llvm.fabs", [x])

    def copysign(self, magnitude, sign):
        return self.intrinsic("llvm.copysign", [magnitude, sign])

    def rint(self, x):
        """Round to nearest integer, ties to even (the default FP mode)."""
        return self.intrinsic("llvm.rint", [x])

    def floor(self, x):
        return self.intrinsic("llvm.floor", [x])

    def sqrt(self, x):
        return self.intrinsic("llvm.sqrt", [x])

    def horner(self, x, coeffs: Sequence[float]):
        """c0 + c1*x + c2*x^2 + ... evaluated with fused multiply-adds."""
        acc = self.const(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.const(c))
        return acc

    # ---- error-free transformations (double-double arithmetic) -----------------
    def two_sum(self, a, b):
        """(s, e) with s = fl(a + b) and a + b = s + e exactly (Knuth, no ordering needed)."""
        s = self.b.fadd(a, b)
        b_virtual = self.b.fsub(s, a)
        a_virtual = self.b.fsub(s, b_virtual)
        return s, self.b.fadd(self.b.fsub(a, a_virtual), self.b.fsub(b, b_virtual))

    def fast_two_sum(self, a, b):
        """(s, e) as `two_sum`, valid when |a| >= |b| (or a == 0)."""
        s = self.b.fadd(a, b)
        return s, self.b.fsub(b, self.b.fsub(s, a))

    def two_prod(self, a, b):
        """(p, e) with p = fl(a * b) and a * b = p + e exactly (one fused multiply-add)."""
        p = self.b.fmul(a, b)
        return p, self.fma(a, b, self.b.fneg(p))

    # ---- comparisons and selection -------------------------------------------
    def cmp(self, op: str, a, b):
        """Ordered comparison: false whenever an operand is NaN."""
        return self.b.fcmp_ordered(op, a, b)

    def is_nan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    def clamp(self, x, lo: float, hi: float):
        """min(max(x, lo), hi) that lets NaN through unchanged."""
        x = self.select(self.cmp("<", x, self.const(lo)), self.const(lo), x)
        return self.select(self.cmp(">", x, self.const(hi)), self.const(hi), x)

    def flush_denormal(self, x):
        """DAZ done explicitly: a subnormal input reads as a zero of its sign.

        The comparison `|x| < smallest normal` is true for zeros and subnormals
        whether or not the CPU's DAZ bit is set, so routines that inspect
        exponent bits see the same input the hardware arithmetic sees.
        """
        tiny = self.cmp("<", self.fabs(x), self.bits_const(1 << self.mant_bits))
        return self.select(tiny, self.copysign(self.const(0.0), x), x)

    def keep_signed_zero(self, x, result):
        """f(±0) = ±0 for odd functions whose formula would lose the sign."""
        return self.select(self.cmp("==", x, self.const(0.0)),
                           self.copysign(self.const(0.0), x), result)

    # ---- bits ----------------------------------------------------------------
    def as_int(self, x):
        return self.b.bitcast(x, self.int_ty)

    def as_float(self, i):
        return self.b.bitcast(i, self.ty)

    def pow2i(self, n):
        """2**n as a float for an integer vector n within the normal exponent range."""
        biased = self.b.add(n, self.iconst(self.bias))
        return self.as_float(self.b.shl(biased, self.iconst(self.mant_bits)))

    def ldexp(self, value, n):
        """value * 2^n for an integer vector n of any size, rounding once.

        On AVX-512 this is one `vscalef` instruction that gets overflow (inf),
        underflow (0 under FTZ) and NaN right by itself. Elsewhere LLVM would
        expand a vector ldexp into libm calls, so it is done as two exact
        power-of-two multiplications instead (n must then be within twice the
        normal exponent range).
        """
        if targets.current().has("avx512f"):
            n32 = n if self.bits == 32 else self.b.trunc(n, self._shaped(ir.IntType(32)))
            fn_name = f"llvm.ldexp.{_intrinsic_suffix(self.ty)}.{_intrinsic_suffix(n32.type)}"
            fn = self.b.module.globals.get(fn_name)
            if fn is None:
                fn = ir.Function(self.b.module, ir.FunctionType(self.ty, [self.ty, n32.type]),
                                 name=fn_name)
            return self.b.call(fn, [value, n32])
        half = self.b.ashr(n, self.iconst(1))
        rest = self.b.sub(n, half)
        return self.b.fmul(self.b.fmul(value, self.pow2i(half)), self.pow2i(rest))

    def to_int(self, x_integral):
        """Integer value of a float holding a small integer (no NaN/inf allowed)."""
        return self.b.fptosi(x_integral, self.int_ty)

    def to_float(self, i):
        return self.b.sitofp(i, self.ty)

    # ---- constant tables ------------------------------------------------------
    def table_lookup(self, name: str, values: Sequence[float], index):
        """values[index] per lane, from a private constant array `name` in the module.

        `index` is an integer of this builder's shape; every lane must be in
        range (callers clamp). A scalar index is a load (LLVM's loop vectorizer
        makes a gather of it), a vector index a masked gather.
        """
        element = F32 if self.kind == "float" else F64
        table = self.b.module.globals.get(name)
        if table is None:
            array_ty = ir.ArrayType(element, len(values))
            table = ir.GlobalVariable(self.b.module, array_ty, name=name)
            table.initializer = ir.Constant(array_ty, [float(v) for v in values])
            table.global_constant = True
            table.linkage = "private"
            table.unnamed_addr = True
        zero = ir.Constant(ir.IntType(32), 0)
        if self.lanes is None:
            return self.b.load(self.b.gep(table, [zero, index], inbounds=True))
        # A vector of addresses and one masked gather (a single instruction on AVX2/AVX-512).
        i64 = ir.IntType(64)
        if index.type != self._shaped(i64):
            index = self.b.zext(index, self._shaped(i64))
        base = self.b.ptrtoint(self.b.gep(table, [zero, zero], inbounds=True), i64)
        offsets = self.b.mul(index, self.splat(i64, self.bits // 8))
        addresses = self.b.inttoptr(self.b.add(self._splat_value(base), offsets),
                                    ir.VectorType(ir.PointerType(), self.lanes))
        mask = self.splat(ir.IntType(1), 1)
        gather = f"llvm.masked.gather.{_intrinsic_suffix(self.ty)}.v{self.lanes}p0"
        fn = self.b.module.globals.get(gather)
        if fn is None:
            fn = ir.Function(self.b.module, ir.FunctionType(
                self.ty, [addresses.type, ir.IntType(32), mask.type, self.ty]), name=gather)
        return self.b.call(fn, [addresses, ir.Constant(ir.IntType(32), self.bits // 8),
                                mask, ir.Constant(self.ty, ir.Undefined)])

    def _splat_value(self, scalar):
        """A vector of this builder's shape with every lane `scalar` (an i64 value)."""
        vec_ty = self._shaped(scalar.type)
        single = self.b.insert_element(ir.Constant(vec_ty, ir.Undefined), scalar,
                                       ir.Constant(ir.IntType(32), 0))
        return self.b.shuffle_vector(single, ir.Constant(vec_ty, ir.Undefined),
                                     ir.Constant(self._shaped(ir.IntType(32)), [0] * self.lanes))

    # ---- conversions ---------------------------------------------------------
    def widen(self, x):
        """float -> double of the same shape (exact)."""
        return self.b.fpext(x, self.with_kind("double").ty)

    def narrow(self, x):
        """double -> float of the same shape (one rounding)."""
        return self.b.fptrunc(x, self.with_kind("float").ty)
