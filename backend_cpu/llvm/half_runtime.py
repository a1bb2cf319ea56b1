"""The f16 conversion routines LLVM calls on x86 targets without F16C (SSE4.2).

Without the F16C instructions LLVM lowers `fpext half` and `fptrunc ... to half`
into calls of the compiler runtime's `__extendhfsf2`, `__truncsfhf2` and
`__truncdfhf2`. The C library of this process need not have them (glibc's
libgcc_s does not export them), and MCJIT binds a missing symbol to address
zero: the first f16 kernel would crash the process. So the backend brings its
own, written here in LLVM IR on the bit patterns (no float arithmetic that the
flush-to-zero mode of the calling kernel could change, except where noted), and
publishes them with `llvm.add_symbol` the first time a kernel needs them
(native_symbols.py asks).

    half -> float     exact (subnormal halves become normal floats)
    float  -> half    round to nearest even; overflow to inf; NaN stays NaN (quiet)
    double -> half    the same, rounded once from the double (not through float)

A half travels in an XMM register in the x86-64 calling convention, as LLVM
passes it to these routines.
"""
from __future__ import annotations

import threading

from llvmlite import binding as llvm
from llvmlite import ir

from . import target_machine

HALF, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
I16, I32, I64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)

ROUTINES = ("__extendhfsf2", "__truncsfhf2", "__truncdfhf2")

_lock = threading.Lock()
_engines: list = []          # keeps the code alive for the life of the process


def _extend(module: ir.Module) -> None:
    fn = ir.Function(module, ir.FunctionType(F32, [HALF]), "__extendhfsf2")
    b = ir.IRBuilder(fn.append_basic_block())
    h = b.zext(b.bitcast(fn.args[0], I16), I32)
    c = lambda v: ir.Constant(I32, v)      # noqa: E731
    sign = b.shl(b.and_(h, c(0x8000)), c(16))
    exponent = b.and_(b.lshr(h, c(10)), c(0x1F))
    mantissa = b.and_(h, c(0x3FF))
    normal = b.or_(b.shl(b.add(exponent, c(112)), c(23)), b.shl(mantissa, c(13)))
    special = b.or_(c(0x7F800000), b.shl(mantissa, c(13)))          # inf, NaN (payload kept)
    # A subnormal half is mantissa * 2^-24: an exact product, and a normal float.
    tiny = b.bitcast(b.fmul(b.uitofp(mantissa, F32), ir.Constant(F32, 2.0 ** -24)), I32)
    magnitude = b.select(b.icmp_unsigned("==", exponent, c(0x1F)), special,
                         b.select(b.icmp_unsigned("==", exponent, c(0)), tiny, normal))
    b.ret(b.bitcast(b.or_(sign, magnitude), F32))


def _truncate(module: ir.Module, name: str, source: ir.Type, bits: int) -> None:
    """`name`: float (bits 32) or double (bits 64) -> half, rounding once."""
    fn = ir.Function(module, ir.FunctionType(HALF, [source]), name)
    b = ir.IRBuilder(fn.append_basic_block())
    ity = ir.IntType(bits)
    c = lambda v: ir.Constant(ity, v)      # noqa: E731
    mant = 23 if bits == 32 else 52
    bias = 127 if bits == 32 else 1023
    drop = mant - 10                                       # mantissa bits a half lacks
    x = b.bitcast(fn.args[0], ity)
    sign = b.and_(b.lshr(x, c(bits - 16)), c(0x8000))
    a = b.and_(x, c((1 << (bits - 1)) - 1))
    infinity = c(((1 << (bits - 1 - mant)) - 1) << mant)   # exponent all ones
    # The smallest magnitude that rounds to inf: 65520 = (2 - 2^-11) * 2^15.
    overflow = c(((bias + 15) << mant) | (((1 << 11) - 1) << (mant - 11)))
    smallest_normal = c((bias - 14) << mant)
    # Normal halves: re-bias the exponent, round the dropped bits to nearest even.
    rebased = b.sub(a, c((bias - 15) << mant))
    odd = b.and_(b.lshr(rebased, c(drop)), c(1))
    rounded = b.lshr(b.add(b.add(rebased, c((1 << (drop - 1)) - 1)), odd), c(drop))
    # Subnormal halves: adding 2^(mant - 24) puts the unit 2^-24 at the last bit, so the
    # float adder rounds to nearest even for us (the caller's flush-to-zero only touches
    # inputs below the float's normal range, which are 0 as halves anyway).
    magic = ir.Constant(source, 2.0 ** (mant - 24))
    shifted = b.bitcast(b.fadd(b.bitcast(a, source), magic), ity)
    subnormal = b.sub(shifted, b.bitcast(magic, ity))
    nan = b.or_(c(0x7E00), b.and_(b.lshr(a, c(drop)), c(0x3FF)))
    magnitude = b.select(
        b.icmp_unsigned(">", a, infinity), nan,
        b.select(b.icmp_unsigned(">=", a, overflow), c(0x7C00),
                 b.select(b.icmp_unsigned(">=", a, smallest_normal), rounded, subnormal)))
    result = b.trunc(b.or_(sign, magnitude), I16)
    b.ret(b.bitcast(result, HALF))


def build_module() -> str:
    module = ir.Module(name="xlapy_half_runtime")
    _extend(module)
    _truncate(module, "__truncsfhf2", F32, 32)
    _truncate(module, "__truncdfhf2", F64, 64)
    return str(module)


def ensure() -> None:
    """Makes the routines callable by JIT'd code in this process (once; thread-safe)."""
    with _lock:
        if _engines or all(llvm.address_of_symbol(name) for name in ROUTINES):
            return
        jit = target_machine.jit_compile(build_module())
        for name in ROUTINES:
            llvm.add_symbol(name, jit.lookup(name))
        _engines.append(jit)
