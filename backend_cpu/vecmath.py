"""Vectorized math in LLVM IR: the elementwise transcendental HLO opcodes.

The compiler calls one function per elementwise math instruction:

    value = emit_math(builder, "exponential", [x])      # x: float/double or a vector
    value = emit_math(builder, "power", [x, y])

It emits straight-line IR (selects instead of branches) computing the opcode
for every lane, with the same type as the arguments, so a scalar use inside a
loop is vectorized by LLVM and a vector use stays a single basic block.

Accuracy (checked by tests/backend_cpu/test_vecmath_accuracy.py): f32 and
f64 within 4 ulp of the correctly rounded result over the whole input range
(measured: at most 3 ulp, most below 1); IEEE special values (±0, ±inf, NaN,
overflow/underflow thresholds); correct under flush-to-zero /
denormals-are-zero, the mode XLA's CPU kernels run in (see
`fp_env.emit_set_flush_denormals`).

How each opcode is computed (no libm calls: every routine vectorizes):

  opcode                  f32                                 f64
  exponential, log,       polynomial in IR (vecmath_explog)   same code, longer series
  exponential-minus-one,
  log-plus-one, tanh,
  logistic
  cbrt                    Newton in f64 (vecmath_misc)        Newton + exact residual
  erf                     fitted polynomials (vecmath_misc)   longer fits (vecmath_coeffs64)
  sine, cosine, tan       in f64 with full-range reduction    double-double reduction,
                          (vecmath_trig)                      Payne-Hanek table beyond
                                                              2^28 (vecmath_trig64,
                                                              vecmath_reduce64)
  atan2                   in f64 (vecmath_trig)               double-double table of
                                                              atan(k/8) (vecmath_trig64)
  power                   exp(y log|x|) in f64                double-double log with a
                          (vecmath_explog)                    table (vecmath_pow64)
  sqrt, rsqrt             the sqrt instruction (+ a divide)   same
"""
from __future__ import annotations

from typing import Callable, Sequence

from llvmlite import ir

from . import vecmath_explog as explog
from . import vecmath_misc as misc
from . import vecmath_pow64 as pow64
from . import vecmath_trig as trig
from . import vecmath_trig64 as trig64
from .vecmath_ir import MathBuilder

_F32: dict[str, Callable] = {
    "exponential": explog.exp,
    "exponential-minus-one": explog.expm1,
    "log": explog.log,
    "log-plus-one": explog.log1p,
    "tanh": explog.tanh,
    "logistic": explog.logistic,
    "power": explog.pow_f32,
    "erf": misc.erf,
    "cbrt": misc.cbrt,
    "sqrt": misc.sqrt,
    "rsqrt": misc.rsqrt,
    "sine": trig.sin,
    "cosine": trig.cos,
    "tan": trig.tan,
    "atan2": trig.atan2,
}

_F64: dict[str, Callable] = {
    **{op: _F32[op] for op in ("exponential", "exponential-minus-one", "log", "log-plus-one",
                               "tanh", "logistic", "erf", "cbrt", "sqrt", "rsqrt")},
    "power": pow64.pow_f64,
    "sine": trig64.sin,
    "cosine": trig64.cos,
    "tan": trig64.tan,
    "atan2": trig64.atan2,
}

SUPPORTED: frozenset[str] = frozenset(_F32)
BINARY: frozenset[str] = frozenset({"power", "atan2"})


def emit_math(builder: ir.IRBuilder, opcode: str, args: Sequence[ir.Value]) -> ir.Value:
    """Emits `opcode` applied lane-wise to `args`; the result has the args' type."""
    if opcode not in SUPPORTED:
        raise ValueError(f"vecmath: unsupported opcode {opcode!r}")
    arity = 2 if opcode in BINARY else 1
    if len(args) != arity:
        raise ValueError(f"vecmath: {opcode} takes {arity} argument(s), got {len(args)}")
    ty = args[0].type
    if any(a.type != ty for a in args):
        raise TypeError(f"vecmath: {opcode} arguments differ in type: "
                        f"{', '.join(str(a.type) for a in args)}")
    m = MathBuilder(builder, ty)
    table = _F32 if m.kind == "float" else _F64
    return table[opcode](m, *args)


# The floating-point mode (flush-to-zero) lives in fp_env.py; the math kernels of
# vecmath_kernel.py take it from there.

