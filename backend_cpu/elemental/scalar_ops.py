"""Per-opcode scalar recipes: the LLVM side of the elementwise part of the opcode table.

Each recipe maps LLVM values in compute type (see llvm/types.py) to one LLVM
value, with XLA's defined semantics and no undefined behaviour:

- integer division by zero gives -1 (all ones), remainder by zero gives the
  dividend, INT_MIN / -1 gives INT_MIN: the divisor is made safe with a select
  before the `sdiv`, then the special results are selected in;
- shifts by >= the bit width give 0 (or the sign for an arithmetic right shift):
  the shift amount is masked before shifting, then the result selected;
- float -> int converts saturate and map NaN to 0 (`llvm.fpto[su]i.sat`);
- float max/min propagate NaN (`llvm.maximum`/`llvm.minimum`).

Everything is select-based and branch-free, so the loop vectorizer can turn a
fused loop body into straight vector code. Transcendental functions (the
opcodes the table, hlo/opcodes.py, flags `transcendental`) go through
`emit_math` only, to their routine in the vector-math library (vecmath/routines.py):
never a scalar libm call, which would keep the loop from vectorizing. An
opcode flagged but without a routine is an error here, and a test failure
(tests/test_op_table.py).

Every recipe also takes LLVM vectors (`<16 x float>`: one lane per element, see
vector_gen.py) and returns a vector: constants are splatted to the operand's
type (`const`), widths come from the lane type (`lane_type`).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...hlo.opcodes import OPCODES

from ..llvm.types import FLOAT, HALF, I1, bits, compute_type, is_float, is_pred, is_signed
from ..vecmath import routines
from . import narrow_convert


# --- small helpers ------------------------------------------------------------------

def lane_type(ty: ir.Type) -> ir.Type:
    """The element type of a vector type; a scalar type itself."""
    return ty.element if isinstance(ty, ir.VectorType) else ty


def like(ty: ir.Type, scalar: ir.Type) -> ir.Type:
    """`scalar`, or a vector of it with as many lanes as `ty` has."""
    return ir.VectorType(scalar, ty.count) if isinstance(ty, ir.VectorType) else scalar


def const(ty: ir.Type, value) -> ir.Constant:
    """A constant of type `ty`; of a vector type, `value` in every lane."""
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [const(ty.element, value)] * ty.count)
    if isinstance(ty, ir.IntType):
        return ir.Constant(ty, int(value) & ((1 << ty.width) - 1))
    return ir.Constant(ty, float(value))


def intrinsic_name(ty: ir.Type) -> str:
    """The overload suffix of a type in an intrinsic's name: f32, v16f32, i1, v8i64."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{ty.element.intrinsic_name}"
    return ty.intrinsic_name


def call_intrinsic(b: ir.IRBuilder, base: str, args, ret: ir.Type | None = None,
                   overload=None) -> ir.Value:
    """Calls `base.<types>` (e.g. llvm.maximum.f32), declaring it on first use."""
    overload = overload if overload is not None else [args[0].type]
    name = base + "".join("." + intrinsic_name(t) for t in overload)
    module = b.module
    fn = module.globals.get(name)
    if fn is None:
        fnty = ir.FunctionType(ret if ret is not None else args[0].type, [a.type for a in args])
        fn = ir.Function(module, fnty, name)
    return b.call(fn, args)


# --- transcendental functions: the one switch point to vecmath -------------------------

def is_math(opcode: str) -> bool:
    """True for an opcode the table flags transcendental (computed by `emit_math`)."""
    info = OPCODES.get(opcode)
    return info is not None and info.transcendental


def emit_math(b: ir.IRBuilder, opcode: str, args) -> ir.Value:
    """A transcendental float op on f16/f32/f64 scalars or vectors; f16 is computed in f32."""
    ty = args[0].type
    if lane_type(ty) == HALF:
        wide = [b.fpext(a, like(ty, FLOAT)) for a in args]
        return b.fptrunc(emit_math(b, opcode, wide), ty)
    return routines.emit_math(b, opcode, list(args))


# --- unary ----------------------------------------------------------------------------

def _abs(b, x, t):
    if is_float(t):
        return call_intrinsic(b, "llvm.fabs", [x])
    if not is_signed(t):
        return x
    return b.select(b.icmp_signed("<", x, const(x.type, 0)), b.sub(const(x.type, 0), x), x)


def _negate(b, x, t):
    return b.fneg(x) if is_float(t) else b.sub(const(x.type, 0), x)


def _sign(b, x, t):
    ty = x.type
    if is_float(t):   # keeps +-0 and NaN; a denormal (read as zero) gives +-0: x * 0
        r = b.select(b.fcmp_ordered(">", x, const(ty, 0)), const(ty, 1), b.fmul(x, const(ty, 0)))
        return b.select(b.fcmp_ordered("<", x, const(ty, 0)), const(ty, -1), r)
    if is_pred(t):
        return x
    if not is_signed(t):
        return b.zext(b.icmp_unsigned("!=", x, const(ty, 0)), ty)
    pos = b.zext(b.icmp_signed(">", x, const(ty, 0)), ty)
    neg = b.zext(b.icmp_signed("<", x, const(ty, 0)), ty)
    return b.sub(pos, neg)


def _not(b, x, t):
    return b.xor(x, const(x.type, -1))


def _is_finite(b, x, t):
    return b.fcmp_ordered("<", call_intrinsic(b, "llvm.fabs", [x]), const(x.type, float("inf")))


UNARY = {
    "abs": _abs,
    "negate": _negate,
    "sign": _sign,
    "not": _not,
    "copy": lambda b, x, t: x,
    "popcnt": lambda b, x, t: call_intrinsic(b, "llvm.ctpop", [x]),
    "count-leading-zeros": lambda b, x, t: call_intrinsic(b, "llvm.ctlz", [x, const(I1, 0)]),
    "floor": lambda b, x, t: call_intrinsic(b, "llvm.floor", [x]),
    "ceil": lambda b, x, t: call_intrinsic(b, "llvm.ceil", [x]),
    "round-nearest-afz": lambda b, x, t: call_intrinsic(b, "llvm.round", [x]),
    "round-nearest-even": lambda b, x, t: call_intrinsic(b, "llvm.roundeven", [x]),
    "is-finite": _is_finite,
}


# --- binary ---------------------------------------------------------------------------

def _arith(float_op, int_op):
    def recipe(b, x, y, t):
        return getattr(b, float_op if is_float(t) else int_op)(x, y)
    return recipe


def _divide(b, x, y, t):
    if is_float(t):
        return b.fdiv(x, y)
    return _int_div_rem(b, x, y, t, remainder=False)


def _remainder(b, x, y, t):
    if is_float(t):
        return b.frem(x, y)
    return _int_div_rem(b, x, y, t, remainder=True)


def _int_div_rem(b, x, y, t, remainder: bool):
    ty = x.type
    zero = b.icmp_unsigned("==", y, const(ty, 0))
    if is_signed(t):
        int_min = const(ty, 1 << (lane_type(ty).width - 1))
        overflow = b.and_(b.icmp_unsigned("==", x, int_min), b.icmp_signed("==", y, const(ty, -1)))
        safe = b.select(b.or_(zero, overflow), const(ty, 1), y)   # x / 1 = x covers INT_MIN / -1
        result = b.srem(x, safe) if remainder else b.sdiv(x, safe)
    else:
        safe = b.select(zero, const(ty, 1), y)
        result = b.urem(x, safe) if remainder else b.udiv(x, safe)
    return b.select(zero, x if remainder else const(ty, -1), result)


def _max_min(is_max: bool):
    def recipe(b, x, y, t):
        if is_float(t):
            return call_intrinsic(b, "llvm.maximum" if is_max else "llvm.minimum", [x, y])
        if is_pred(t):
            return b.or_(x, y) if is_max else b.and_(x, y)
        cmp = b.icmp_signed if is_signed(t) else b.icmp_unsigned
        return b.select(cmp(">" if is_max else "<", x, y), x, y)
    return recipe


def _shift(kind: str):
    def recipe(b, x, y, t):
        ty = x.type
        bits_ = lane_type(ty).width
        too_far = b.icmp_unsigned(">=", y, const(ty, bits_))
        amount = b.and_(y, const(ty, bits_ - 1))       # in range: no poison
        if kind == "left":
            return b.select(too_far, const(ty, 0), b.shl(x, amount))
        if kind == "logical":
            return b.select(too_far, const(ty, 0), b.lshr(x, amount))
        return b.ashr(x, b.select(too_far, const(ty, bits_ - 1), amount))
    return recipe


def _power(b, x, y, t):
    if is_float(t):
        return emit_math(b, "power", [x, y])
    # Integers: square-and-multiply over every exponent bit; negative exponents give
    # 0 except for base 1 (XLA's definition: its emitter and evaluator give
    # (-1) ** -1 = 0, not -1).
    ty = x.type
    one = const(ty, 1)
    result, base, e = one, x, y
    for _ in range(lane_type(ty).width):
        odd = b.trunc(e, like(ty, I1))
        result = b.select(odd, b.mul(result, base), result)
        base = b.mul(base, base)
        e = b.lshr(e, one)
    if not is_signed(t):
        return result
    negative = b.icmp_signed("<", y, const(ty, 0))
    special = b.select(b.icmp_signed("==", x, one), one, const(ty, 0))
    return b.select(negative, special, result)


BINARY = {
    "add": _arith("fadd", "add"),
    "subtract": _arith("fsub", "sub"),
    "multiply": _arith("fmul", "mul"),
    "divide": _divide,
    "remainder": _remainder,
    "maximum": _max_min(True),
    "minimum": _max_min(False),
    "power": _power,
    "and": lambda b, x, y, t: b.and_(x, y),
    "or": lambda b, x, y, t: b.or_(x, y),
    "xor": lambda b, x, y, t: b.xor(x, y),
    "shift-left": _shift("left"),
    "shift-right-arithmetic": _shift("arithmetic"),
    "shift-right-logical": _shift("logical"),
}

# Opcodes with no recipe here: they take or make complex numbers, which
# elemental/complex_ops.py computes (generators.py sends it every elementwise
# instruction with a complex operand or result).
UNSUPPORTED = frozenset({"real", "imag", "complex"})


# --- compare, select, clamp ---------------------------------------------------------

_OPS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def emit_compare(b, x, y, t: str, direction: str, cmp_type: str | None = None) -> ir.Value:
    op = _OPS[direction]
    if is_float(t):
        if cmp_type == "TOTALORDER":
            return b.icmp_signed(op, _total_order_key(b, x), _total_order_key(b, y))
        if direction == "NE":
            return b.fcmp_unordered(op, x, y)    # NaN != anything
        return b.fcmp_ordered(op, x, y)
    if is_signed(t) and cmp_type != "UNSIGNED":
        return b.icmp_signed(op, x, y)
    return b.icmp_unsigned(op, x, y)


def _total_order_key(b, x):
    """Float bits as a signed int ordered like -NaN < -inf < -0 < +0 < inf < NaN."""
    width = _float_bits(lane_type(x.type))
    ity = like(x.type, ir.IntType(width))
    i = b.bitcast(x, ity)
    flip = b.and_(b.ashr(i, const(ity, width - 1)), const(ity, (1 << (width - 1)) - 1))
    return b.xor(i, flip)


def _float_bits(ty) -> int:
    return {"half": 16, "float": 32, "double": 64}[str(ty)]


def emit_select(b, pred, x, y) -> ir.Value:
    return b.select(pred, x, y)


def emit_clamp(b, lo, x, hi, t: str) -> ir.Value:
    return _max_min(False)(b, _max_min(True)(b, x, lo, t), hi, t)


# --- conversions --------------------------------------------------------------------------

def emit_convert(b, x, src: str, dst: str) -> ir.Value:
    """`convert`: XLA's value conversion (saturating float->int, NaN -> 0)."""
    if src == dst:
        return x
    if narrow_convert.is_narrow(src) or narrow_convert.is_narrow(dst):
        return narrow_convert.emit_convert(b, x, src, dst, emit_convert)
    dty = like(x.type, compute_type(dst))
    if is_pred(dst):
        if is_float(src):
            return b.fcmp_unordered("!=", x, const(x.type, 0))     # NaN -> true
        return b.icmp_unsigned("!=", x, const(x.type, 0))
    if is_float(src):
        if is_float(dst):
            if bits(src) < bits(dst):
                return b.fpext(x, dty)
            if src == "f64" and dst == "f16":
                return _f64_to_f16(b, x)
            return b.fptrunc(x, dty)
        if lane_type(x.type) == HALF:
            x = b.fpext(x, like(x.type, FLOAT))
        sat = "llvm.fptosi.sat" if is_signed(dst) else "llvm.fptoui.sat"
        return call_intrinsic(b, sat, [x], ret=dty, overload=[dty, x.type])
    # integer or pred source
    if is_float(dst):
        return b.sitofp(x, dty) if is_signed(src) else b.uitofp(x, dty)
    width, to = lane_type(x.type).width, lane_type(dty).width
    if width == to:
        return x
    if width > to:
        return b.trunc(x, dty)
    return b.sext(x, dty) if is_signed(src) else b.zext(x, dty)


def _f64_to_f16(b, x):
    """f64 -> f16 without the `__truncdfhf2` libcall the JIT cannot resolve.

    Rounding twice (f64 -> f32 -> f16) can be off by one ulp at ties, unless the
    first step rounds to odd: f32 keeps more than 2 * 11 + 2 significant bits, so a
    round-to-odd f32 then rounds to the correctly rounded f16.
    """
    t = b.fptrunc(x, FLOAT)
    back = b.fpext(t, x.type)
    inexact = b.fcmp_ordered("!=", back, x)            # false for NaN
    away = b.fcmp_ordered(">", call_intrinsic(b, "llvm.fabs", [back]),
                          call_intrinsic(b, "llvm.fabs", [x]))
    i32 = ir.IntType(32)
    t_bits = b.bitcast(t, i32)
    toward_zero = b.select(away, b.sub(t_bits, const(i32, 1)), t_bits)
    odd = b.select(inexact, b.or_(toward_zero, const(i32, 1)), t_bits)
    return b.fptrunc(b.bitcast(odd, FLOAT), HALF)


def emit_bitcast_convert(b, x, src: str, dst: str) -> ir.Value:
    # pred is a byte in memory (0 or 1) and i1 in registers: to a byte type it is that
    # byte; a byte read as pred is true when nonzero, as loading a stored pred is.
    if is_pred(src) and not is_pred(dst) and bits(dst) == 8:
        return b.zext(x, like(x.type, compute_type(dst)))
    if is_pred(dst) and not is_pred(src) and bits(src) == 8:
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, None))
    if bits(src) != bits(dst):
        raise NotImplementedError("backend_cpu: bitcast-convert between different widths")
    if bits(dst) < 8:                     # s2/s4/u2/u4: the low bits of the byte
        return b.and_(x, const(x.type, (1 << bits(dst)) - 1))
    return b.bitcast(x, like(x.type, compute_type(dst)))


# --- reduce-precision -----------------------------------------------------------------------

_FLOAT_FIELDS = {"half": (5, 10), "float": (8, 23), "double": (11, 52)}


def emit_reduce_precision(b, x, exponent_bits: int, mantissa_bits: int) -> ir.Value:
    """XLA's reduce-precision on the float's bits (hlo/eval_library.reduce_precision):
    round to nearest even at the kept mantissa bit, overflow to a signed inf,
    underflow (denormals included) to a signed zero, NaN returned unchanged (inf
    when no mantissa bit is kept). Integer ops only: denormal inputs are not flushed
    first, as XLA's emitter leaves them too."""
    ty = x.type
    src_e, src_m = _FLOAT_FIELDS[str(lane_type(ty))]
    nbits = 1 + src_e + src_m
    ity = like(ty, ir.IntType(nbits))
    bits_ = b.bitcast(x, ity)
    exp_mask = ((1 << src_e) - 1) << src_m
    sign_mask = 1 << (nbits - 1)
    is_nan = b.icmp_unsigned(">", b.and_(bits_, const(ity, ~sign_mask)), const(ity, exp_mask))
    if mantissa_bits < src_m:
        shift = src_m - mantissa_bits
        last = b.lshr(b.and_(bits_, const(ity, 1 << shift)), const(ity, shift))
        bias = b.add(last, const(ity, (1 << (shift - 1)) - 1))
        bits_ = b.and_(b.add(bits_, bias), const(ity, ~((1 << shift) - 1)))
    if exponent_bits < src_e:
        exponent_bias = (1 << (src_e - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = b.and_(bits_, const(ity, exp_mask))
        signed_zero = b.and_(bits_, const(ity, sign_mask))
        over = b.icmp_unsigned(">", exponent, const(ity, (exponent_bias + reduced_bias) << src_m))
        under = b.icmp_unsigned("<=", exponent, const(ity, (exponent_bias - reduced_bias) << src_m))
        bits_ = b.select(over, b.or_(signed_zero, const(ity, exp_mask)), bits_)
        bits_ = b.select(under, signed_zero, bits_)
    result = b.bitcast(bits_, ty)
    return b.select(is_nan, x if mantissa_bits > 0 else const(ty, float("inf")), result)


# --- dispatch -----------------------------------------------------------------------------

def emit_elementwise(b, instr, args, operand_types) -> ir.Value:
    """The scalar value of an elementwise instruction from its operands' values."""
    op = instr.opcode
    t = operand_types[0]
    if op in UNARY:
        return UNARY[op](b, args[0], t)
    if op in BINARY:         # before the math: power has an integer recipe too
        return BINARY[op](b, args[0], args[1], t)
    if is_math(op):
        return emit_math(b, op, args)
    if op == "compare":
        return emit_compare(b, args[0], args[1], t, instr.attrs["direction"], instr.attrs.get("type"))
    if op == "select":
        return emit_select(b, *args)
    if op == "clamp":
        return emit_clamp(b, args[0], args[1], args[2], operand_types[1])
    if op == "convert":
        return emit_convert(b, args[0], t, instr.shape.element_type)
    if op == "bitcast-convert":
        return emit_bitcast_convert(b, args[0], t, instr.shape.element_type)
    if op == "reduce-precision":
        return emit_reduce_precision(b, args[0], instr.attrs["exponent_bits"],
                                     instr.attrs["mantissa_bits"])
    raise NotImplementedError(f"backend_cpu: no emitter for {op}")


def has_recipe(opcode: str) -> bool:
    return (opcode in UNARY or opcode in BINARY or is_math(opcode)
            or opcode in ("compare", "select", "clamp", "convert", "bitcast-convert",
                          "reduce-precision"))
