"""`convert` to and from the narrow element types (bf16, the 8-bit floats, s2/s4/u2/u4)
in LLVM IR, on their bits, for scalars and vectors alike.

How the types live in a kernel (llvm/types.py): a bf16 is its 16 bits (`i16`), an
8-bit float its byte (`i8`), and s2/s4/u2/u4 one byte each whose low bits hold the
value (as ml_dtypes stores them; XLA's CPU also keeps them unpacked in memory
unless a layout says `E(4)`, which xlapy does not pack). After the
narrow-type-normalization pass (passes/narrow_types.py) no arithmetic sees these
types: only converts, bitcast-converts, selects and data movement do.

The conversions give XLA's bits (hlo/narrow_types.py, tests/hlo/test_ml_dtypes.py):

- narrow float -> f32 is exact: the fields are re-biased, a subnormal is its
  significand times its unit (a normal f32), inf/NaN kept per type;
  f8e8m0fnu is 2^(E-127), 2^-127 being an f32 denormal (built from bits);
- f32 -> narrow float rounds to nearest even with integer operations (the
  kernel's flush-to-zero mode cannot touch them): normal results re-bias and
  round the dropped bits; subnormal ones add a power of two whose unit in the
  last place is the target's subnormal unit and let the float adder round;
  overflow gives inf where the type has one, else its NaN; NaN gives NaN;
  f8e8m0fnu rounds to the nearer power of two (ties up; below 2^-126, anything
  above 2^-127 gives 2^-126), NaN for zero, negatives and overflow;
- f64 reaches bf16 through f32 (`fptrunc`, as XLA), the 8-bit floats through f32
  rounded to odd (one correct rounding in all);
- s2/s4/u2/u4: widened by sign or zero extension of their low bits; from
  integers the low bits are kept (wraps); from floats saturating, NaN -> 0.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...hlo.dtypes import dtype as _dtype

I8, I16, I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
FLOAT, DOUBLE, HALF = ir.FloatType(), ir.DoubleType(), ir.HalfType()


def _like(x_type: ir.Type, scalar: ir.Type) -> ir.Type:
    return ir.VectorType(scalar, x_type.count) if isinstance(x_type, ir.VectorType) else scalar


def _c(ty: ir.Type, value) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [_c(ty.element, value)] * ty.count)
    if isinstance(ty, ir.IntType):
        return ir.Constant(ty, int(value) & ((1 << ty.width) - 1))
    return ir.Constant(ty, float(value))


def is_narrow(name: str) -> bool:
    return _dtype(name).is_narrow


def emit_convert(b: ir.IRBuilder, x, src: str, dst: str, wide_convert) -> ir.Value:
    """`convert` where `src` or `dst` is narrow; `wide_convert(b, x, src, dst)` converts
    between the other types (scalar_ops.emit_convert)."""
    s, d = _dtype(src), _dtype(dst)
    if s.is_narrow:
        if s.is_float:
            x, src = widen_float(b, x, src), "f32"
        else:
            x, src = widen_int(b, x, src), s.compute
        if src == dst:
            return x
        if not d.is_narrow:
            return wide_convert(b, x, src, dst)
    # dst is narrow from here on; src is not.
    if d.is_float:
        return narrow_float(b, _to_f32_for(b, x, src, dst, wide_convert), dst)
    return narrow_int(b, x, src, dst, wide_convert)


# --- narrow floats ----------------------------------------------------------------------

def _fields(name: str):
    d = _dtype(name)
    m = d.mantissa_bits
    e = d.exponent_bits
    bias = {"f8e4m3b11fnuz": 11, "f8e4m3fnuz": 8, "f8e5m2fnuz": 16}.get(name, (1 << (e - 1)) - 1)
    return e, m, bias


def widen_float(b, x, name: str):
    """A narrow float's bits (i16 or i8, or vectors) -> its f32 value, exactly."""
    f32 = _like(x.type, FLOAT)
    i32 = _like(x.type, I32)
    c = lambda v: _c(i32, v)      # noqa: E731
    if name == "bf16":
        return b.bitcast(b.shl(b.zext(x, i32), c(16)), f32)
    v = b.zext(x, i32)
    if name == "f8e8m0fnu":
        bits = b.select(b.icmp_unsigned("==", v, c(0)), c(0x00400000), b.shl(v, c(23)))
        bits = b.select(b.icmp_unsigned("==", v, c(0xFF)), c(0x7FC00000), bits)
        return b.bitcast(bits, f32)
    e, m, bias = _fields(name)
    sign = b.shl(b.and_(v, c(0x80)), c(24))
    exponent = b.and_(b.lshr(v, c(m)), c((1 << e) - 1))
    mantissa = b.and_(v, c((1 << m) - 1))
    normal = b.or_(b.shl(b.add(exponent, c(127 - bias)), c(23)), b.shl(mantissa, c(23 - m)))
    unit = 2.0 ** (1 - bias - m)                     # a subnormal's unit: a normal f32
    tiny = b.bitcast(b.fmul(b.uitofp(mantissa, f32), _c(f32, unit)), i32)
    magnitude = b.select(b.icmp_unsigned("==", exponent, c(0)), tiny, normal)
    d = _dtype(name)
    if d.has_inf:                                    # IEEE-like: all-ones exponent
        top = b.icmp_unsigned("==", exponent, c((1 << e) - 1))
        special = b.select(b.icmp_unsigned("==", mantissa, c(0)), c(0x7F800000),
                           b.or_(c(0x7FC00000), b.shl(mantissa, c(23 - m))))
        magnitude = b.select(top, special, magnitude)
        nan = None
    elif name.endswith("fnuz"):
        nan = b.icmp_unsigned("==", v, c(0x80))      # the one NaN (no -0)
    else:                                            # fn: S.1111.111 only
        nan = b.icmp_unsigned("==", b.and_(v, c(0x7F)), c(0x7F))
    bits = b.or_(sign, magnitude)
    if nan is not None:
        bits = b.select(nan, b.or_(sign, c(0x7FC00000)), bits)
    return b.bitcast(bits, f32)


def _f64_to_f32_odd(b, x):
    """f64 -> f32 rounded to odd (toward zero, last bit set if inexact)."""
    f32, i32 = _like(x.type, FLOAT), _like(x.type, I32)
    t = b.fptrunc(x, f32)
    back = b.fpext(t, x.type)
    inexact = b.fcmp_ordered("!=", back, x)
    fabs = lambda v: _fabs(b, v)     # noqa: E731
    away = b.fcmp_ordered(">", fabs(back), fabs(x))
    bits = b.bitcast(t, i32)
    toward_zero = b.select(away, b.sub(bits, _c(i32, 1)), bits)
    return b.bitcast(b.select(inexact, b.or_(toward_zero, _c(i32, 1)), bits), f32)


def _fabs(b, v):
    ity = _like(v.type, ir.IntType(64 if str(_lane(v.type)) == "double" else 32))
    width = ity.element.width if isinstance(ity, ir.VectorType) else ity.width
    return b.bitcast(b.and_(b.bitcast(v, ity), _c(ity, (1 << (width - 1)) - 1)), v.type)


def _lane(ty):
    return ty.element if isinstance(ty, ir.VectorType) else ty


def _f64_for_e8m0(b, x):
    """An f32 that narrow_float rounds to the f8e8m0fnu XLA makes of f64 `x`: its
    exponent and the half-way bit of its significand, on the bits (an fptrunc
    would flush the f32 denormals 2^-127 rounds from); NaN below 2^-127."""
    i64, i32 = _like(x.type, ir.IntType(64)), _like(x.type, I32)
    bits = b.bitcast(x, i64)
    c = lambda v: _c(i64, v)      # noqa: E731
    exponent = b.and_(b.lshr(bits, c(52)), c(0x7FF))
    half = b.and_(b.lshr(bits, c(51)), c(1))
    # 2^(e-1023) with the half bit: an f32 2^(e-1023) * 1.5 rounds up, * 1 down.
    e32 = b.sub(exponent, c(1023 - 127))
    normal = b.or_(b.shl(e32, c(23)), b.shl(half, c(22)))
    # [2^-127, 2^-126): 2^-127 itself stays, anything above rounds up (as from f32).
    above = b.zext(b.icmp_unsigned("!=", b.and_(bits, c((1 << 52) - 1)), c(0)), i64)
    denormal = b.add(c(0x400000), above)
    small = b.icmp_signed("<", e32, c(1))
    magnitude = b.select(small, denormal, normal)
    too_small = b.icmp_signed("<", e32, c(0))           # below 2^-127: NaN
    huge = b.icmp_signed(">", e32, c(254))
    bad = b.or_(b.or_(too_small, huge), b.icmp_unsigned("==", exponent, c(0x7FF)))
    magnitude = b.select(bad, c(0x7FC00000), magnitude)
    sign = b.and_(b.lshr(bits, c(32)), c(0x80000000))
    return b.bitcast(b.trunc(b.or_(sign, magnitude), i32), _like(x.type, FLOAT))


def _to_f32_for(b, x, src: str, dst: str, wide_convert):
    """The f32 the rounding to narrow float `dst` starts from."""
    f32 = _like(x.type, FLOAT)
    s = _dtype(src)
    if src == "f32":
        return x
    if src == "f16":
        return b.fpext(x, f32)
    if src == "f64":
        if dst == "bf16":
            return b.fptrunc(x, f32)         # XLA rounds twice here (flush-to-zero too)
        if dst == "f8e8m0fnu":
            return _f64_for_e8m0(b, x)
        return _f64_to_f32_odd(b, x)
    if s.is_pred:
        return b.uitofp(x, f32)
    # integers go through f64, as the evaluator does (exact below 2^53)
    wide = b.sitofp(x, _like(x.type, DOUBLE)) if s.is_signed else b.uitofp(x, _like(x.type, DOUBLE))
    return _to_f32_for(b, wide, "f64", dst, wide_convert)


def narrow_float(b, x, name: str):
    """f32 (scalar or vector) -> the bits of narrow float `name`, rounded as XLA does."""
    i32 = _like(x.type, I32)
    c = lambda v: _c(i32, v)      # noqa: E731
    bits = b.bitcast(x, i32)
    a = b.and_(bits, c(0x7FFFFFFF))
    is_nan = b.icmp_unsigned(">", a, c(0x7F800000))
    if name == "bf16":
        rounded = b.lshr(b.add(b.add(bits, c(0x7FFF)), b.and_(b.lshr(bits, c(16)), c(1))), c(16))
        quiet = b.or_(b.lshr(bits, c(16)), c(0x40))
        return b.trunc(b.select(is_nan, quiet, rounded), _like(x.type, I16))
    i8 = _like(x.type, I8)
    if name == "f8e8m0fnu":
        exponent = b.lshr(a, c(23))
        up = b.icmp_unsigned("!=", b.and_(a, c(0x400000)), c(0))
        normal = b.add(exponent, b.zext(up, i32))
        # f32 denormals (below 2^-126): 2^-127 and less give 2^-127, more gives 2^-126.
        denormal = b.zext(b.icmp_unsigned(">", a, c(0x00400000)), i32)
        value = b.select(b.icmp_unsigned(">=", a, c(0x00800000)), normal, denormal)
        bad = b.or_(b.or_(b.icmp_unsigned("==", a, c(0)), b.icmp_signed("<", bits, c(0))),
                    b.or_(b.icmp_unsigned(">=", a, c(0x7F800000)),
                          b.icmp_unsigned(">=", value, c(0xFF))))
        return b.trunc(b.select(bad, c(0xFF), value), i8)
    d = _dtype(name)
    e, m, bias = _fields(name)
    emin = 1 - bias
    drop = 23 - m
    rebased = b.sub(a, c((127 - bias) << 23))
    odd = b.and_(b.lshr(rebased, c(drop)), c(1))
    rounded = b.lshr(b.add(b.add(rebased, c((1 << (drop - 1)) - 1)), odd), c(drop))
    f32 = x.type
    magic = _c(f32, 2.0 ** (emin - m + 23))
    shifted = b.bitcast(b.fadd(b.bitcast(a, f32), magic), i32)
    subnormal = b.sub(shifted, b.bitcast(magic, i32))
    magnitude = b.select(b.icmp_unsigned(">=", a, c((emin + 127) << 23)), rounded, subnormal)
    if d.has_inf:
        max_finite, overflow = ((1 << e) - 1) << m, ((1 << e) - 1) << m   # inf encoding
        max_finite -= 1
        nan = c((((1 << e) - 1) << m) | (1 << (m - 1)))
    elif name.endswith("fnuz"):
        max_finite, overflow, nan = 0x7F, 0x80, c(0x80)
    else:                                            # fn: 0x7F is NaN
        max_finite, overflow, nan = 0x7E, 0x7F, c(0x7F)
    magnitude = b.select(b.icmp_unsigned(">", magnitude, c(max_finite)), c(overflow), magnitude)
    sign = b.and_(b.lshr(bits, c(24)), c(0x80))
    if name.endswith("fnuz"):
        # No -0 (0x80 is the NaN): a zero result is +0; overflow and NaN are the NaN.
        sign = b.select(b.icmp_unsigned("==", magnitude, c(0)), c(0), sign)
        result = b.select(b.icmp_unsigned("==", magnitude, c(0x80)), c(0x80),
                          b.or_(sign, magnitude))
        result = b.select(is_nan, nan, result)
    else:
        result = b.or_(sign, b.select(is_nan, nan, magnitude))
    return b.trunc(result, i8)


# --- narrow integers ----------------------------------------------------------------------

def _saturating_to_i32(b, x, signed: bool):
    """llvm.fpto[su]i.sat to i32 (NaN -> 0), declared on first use."""
    i32 = _like(x.type, I32)

    def suffix(ty):
        if isinstance(ty, ir.VectorType):
            return f"v{ty.count}{ty.element.intrinsic_name}"
        return ty.intrinsic_name
    name = f"llvm.fpto{'s' if signed else 'u'}i.sat.{suffix(i32)}.{suffix(x.type)}"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(i32, [x.type]), name)
    return b.call(fn, [x])


def widen_int(b, x, name: str):
    """The byte of an s2/s4/u2/u4 -> its value as an i8 (sign- or zero-extended)."""
    d = _dtype(name)
    i8 = _like(x.type, I8)
    shift = _c(i8, 8 - d.bits)
    if d.is_signed:
        return b.ashr(b.shl(x, shift), shift)
    return b.and_(x, _c(i8, (1 << d.bits) - 1))


def narrow_int(b, x, src: str, dst: str, wide_convert):
    """Any non-narrow value -> the byte of s2/s4/u2/u4 `dst` (low bits, upper bits 0)."""
    d, s = _dtype(dst), _dtype(src)
    i8 = _like(x.type, I8)
    mask = _c(i8, (1 << d.bits) - 1)
    lo, hi = d.int_range
    if s.is_float:
        i32 = _like(x.type, I32)
        if src == "f16":
            x = b.fpext(x, _like(x.type, FLOAT))
        v = _saturating_to_i32(b, x, d.is_signed)
        cmp = b.icmp_signed if d.is_signed else b.icmp_unsigned
        v = b.select(cmp(">", v, _c(i32, hi)), _c(i32, hi), v)
        v = b.select(cmp("<", v, _c(i32, lo)), _c(i32, lo), v)
        return b.and_(b.trunc(v, i8), mask)
    v = wide_convert(b, x, src, "s8" if d.is_signed else "u8")   # wraps; pred is 0/1
    return b.and_(v, mask)
