"""Complex numbers (c64, c128) in compiled kernels: which instructions a kernel can
compute on them, and the dispatch of their elementwise ops, reducer and dot steps.

Representation: a complex element is one LLVM value, the struct `{re, im}` of two
floats (`{float, float}` for c64, `{double, double}` for c128; llvm/types.py). In
memory that is numpy's layout (real part first), so a buffer of complex numbers is
loaded and stored element by element like any other (aligned to the part's size,
as numpy aligns them); movement ops (broadcast, transpose, slice, concatenate, pad,
reshape, copy, gather, dynamic slices) and `select` never look inside it: they move
or select whole structs. The recipes (complex_math.py) take the two parts apart
(`extractvalue`), compute on them as floats, and put the result together
(`insertvalue`); LLVM's SROA/instcombine keeps the parts in registers. Vector
generators (vector_gen.py) and the streaming, GEMM, transpose and column-reduce
emitters work on vectors of scalars and decline complex kernels (strategies.py keeps
them to the rows made of element generators), so complex loops are scalar code that
LLVM's vectorizer may still widen.

Here: real, imag, complex(re, im); compare EQ / NE (both parts equal, ordered / not
that); convert: real -> complex (imaginary part 0), complex <-> complex per part,
complex -> float takes the real part (the evaluator's rule); a reduce with add or
multiply keeps one accumulator, in order; a dot adds l * r per step, in order.
Like every kernel these run with denormals flushed (DESIGN.md); the evaluator
flushes complex parts the same way.

What is not compiled stays on the host (backend_cpu/library_ops.py runs it through
the evaluator): `cbrt`, `erf`, maximum/minimum and TOTALORDER
compares on complex, complex -> integer or pred converts, bitcast-convert, and the
non-elementwise ops other than the movement ops, reduce, reduce-window and dot
(fft, scatter, sort, convolution, map, ...). `why_not_compiled(instr)` says which
instruction keeps a kernel on the host.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..llvm.types import COMPLEX_PARTS, compute_type, is_complex
from . import complex_math as cm
from .complex_math import join, split
from .scalar_ops import emit_convert

# The recipes, by opcode: (b, re, im, part type) -> (re, im) of the result.
_UNARY = {
    "negate": cm.negate,
    "sqrt": cm.sqrt,
    "rsqrt": cm.rsqrt,
    "log": cm.log,
    "log-plus-one": cm.log1p,
    "exponential": cm.exp,
    "exponential-minus-one": cm.expm1,
    "sine": lambda b, x, y, p: cm.sin_cos(b, x, y, p, cosine=False),
    "cosine": lambda b, x, y, p: cm.sin_cos(b, x, y, p, cosine=True),
    "tan": cm.tan,
    "tanh": cm.tanh,
    "sign": cm.sign,
    "logistic": cm.logistic,
}

_BINARY = {
    "add": lambda b, ar, ai, br, bi: (b.fadd(ar, br), b.fadd(ai, bi)),
    "subtract": lambda b, ar, ai, br, bi: (b.fsub(ar, br), b.fsub(ai, bi)),
    "multiply": cm.multiply,
    "divide": cm.divide,
}

# Binary functions whose recipes take the part type too.
_BINARY_FUNCTIONS = {"atan2": cm.atan2, "power": cm.power}

# Elementwise opcodes computed here; `copy` and `select` move whole values.
ELEMENTWISE = frozenset(_UNARY) | frozenset(_BINARY) | frozenset(_BINARY_FUNCTIONS) | {
    "abs", "real", "imag", "complex", "convert", "compare", "select", "copy"}
# Other opcodes a compiled kernel computes on complex values (elemental/generators.py).
MOVEMENT = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "broadcast",
                      "reshape", "bitcast", "transpose", "slice", "reverse", "pad",
                      "concatenate", "dynamic-slice", "dynamic-update-slice", "gather"})
LOOPING = frozenset({"reduce", "reduce-window", "dot"})
# What a complex value converts to in a kernel: its real part, as one of these.
_REALS = ("f16", "f32", "f64")


# --- dispatch -------------------------------------------------------------------------------

def _complex(shape) -> bool:
    return any(leaf.is_array and leaf.dtype.is_complex for leaf in shape.leaves())


def handles(instr) -> bool:
    """True when this module emits the elementwise `instr`: a complex operand or result,
    or real / imag / complex (which have no recipe in scalar_ops.py)."""
    return instr.opcode in ("real", "imag", "complex") or _complex(instr.shape) \
        or any(_complex(o.shape) for o in instr.operands)


def emit_elementwise(b, instr, args, operand_types) -> ir.Value:
    """The value of the elementwise `instr` (see `handles`) from its operands' values."""
    op, t, out = instr.opcode, operand_types[0], instr.shape.element_type
    if op in ("copy",):
        return args[0]
    if op == "select":
        return b.select(*args)
    if op in ("real", "imag"):
        if is_complex(t):
            return b.extract_value(args[0], 0 if op == "real" else 1)
        return args[0] if op == "real" else ir.Constant(args[0].type, 0.0)
    if op == "complex":
        return join(b, compute_type(out), args[0], args[1])
    if op == "convert":
        return convert(b, args[0], t, out)
    if op == "compare":
        return _compare(b, args, instr.attrs["direction"])
    part = compute_type(COMPLEX_PARTS[t])
    if op == "abs":
        return cm.abs_(b, *split(b, args[0]), part)
    if op in _UNARY:
        return join(b, args[0].type, *_UNARY[op](b, *split(b, args[0]), part))
    if op in _BINARY:
        return join(b, args[0].type, *_BINARY[op](b, *split(b, args[0]), *split(b, args[1])))
    if op in _BINARY_FUNCTIONS:
        return join(b, args[0].type,
                    *_BINARY_FUNCTIONS[op](b, *split(b, args[0]), *split(b, args[1]), part))
    raise NotImplementedError(f"backend_cpu: {op} on {t} is not compiled")


def binary(b, opcode: str, x, y) -> ir.Value:
    """A reducer step (add, multiply) on two complex values."""
    return join(b, x.type, *_BINARY[opcode](b, *split(b, x), *split(b, y)))


def multiply_add(b, acc, x, y) -> ir.Value:
    """acc + x * y on complex values: a dot's step."""
    return binary(b, "add", acc, binary(b, "multiply", x, y))


def zero(etype: str) -> ir.Constant:
    ty = compute_type(etype)
    part = ty.elements[0]
    return ir.Constant(ty, [ir.Constant(part, 0.0), ir.Constant(part, 0.0)])


def _compare(b, args, direction: str):
    (xr, xi), (yr, yi) = split(b, args[0]), split(b, args[1])
    if direction == "EQ":
        return b.and_(b.fcmp_ordered("==", xr, yr), b.fcmp_ordered("==", xi, yi))
    return b.or_(b.fcmp_unordered("!=", xr, yr), b.fcmp_unordered("!=", xi, yi))


def convert(b, x, src: str, dst: str) -> ir.Value:
    """real -> complex (im 0), complex -> complex per part, complex -> float (real part)."""
    if src == dst:
        return x
    if is_complex(src) and is_complex(dst):
        re, im = split(b, x)
        p_src, p_dst = COMPLEX_PARTS[src], COMPLEX_PARTS[dst]
        return join(b, compute_type(dst), emit_convert(b, re, p_src, p_dst),
                    emit_convert(b, im, p_src, p_dst))
    if is_complex(src):
        return emit_convert(b, b.extract_value(x, 0), COMPLEX_PARTS[src], dst)
    p_dst = COMPLEX_PARTS[dst]
    re = emit_convert(b, x, src, p_dst)
    return join(b, compute_type(dst), re, ir.Constant(re.type, 0.0))


def why_not_compiled(instr) -> str | None:
    """Why a kernel cannot compute `instr` (an instruction whose operands or result may
    be complex), or None when it can. Fusions and the computations an instruction
    applies (a reducer) are looked through."""
    op = instr.opcode
    if op == "fusion":
        return _why_not_comp(instr.attrs["calls"])
    if not handles(instr):
        return _why_not_called(instr)
    if instr.info.is_elementwise:
        if op not in ELEMENTWISE:
            return f"{op} on complex"
        if op == "convert":
            src, dst = instr.operands[0].shape.dtype, instr.shape.dtype
            if not dst.is_complex and dst.name not in _REALS:
                return f"convert from complex to {dst.name}"
            if src.is_narrow:
                return f"convert from {src.name} to complex"
        if op == "compare" and (instr.attrs["direction"] not in ("EQ", "NE")
                                or instr.attrs.get("type") == "TOTALORDER"):
            return "an ordered compare of complex numbers"
        return None
    if op in MOVEMENT:
        return None
    if op in LOOPING:
        return _why_not_called(instr)
    return f"{op} on complex"


def _why_not_called(instr) -> str | None:
    comp = instr.attrs.get("to_apply") if instr.opcode in ("reduce", "reduce-window") else None
    return _why_not_comp(comp) if comp is not None else None


def _why_not_comp(comp) -> str | None:
    for i in comp.instructions:
        reason = why_not_compiled(i)
        if reason is not None:
            return f"{i.name}: {reason}"
    return None


__all__ = ["ELEMENTWISE", "binary", "convert", "emit_elementwise", "handles", "multiply_add",
           "why_not_compiled", "zero"]
