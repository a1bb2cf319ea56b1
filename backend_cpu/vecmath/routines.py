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
`llvm/fp_env.emit_set_flush_denormals`).

How each opcode is computed (no libm calls: every routine vectorizes):

  opcode                  f32                                 f64
  exponential, log,       polynomial in IR (explog)           same code, longer series
  exponential-minus-one,
  log-plus-one, tanh,
  logistic
  cbrt                    Newton in f64 (misc)                Newton + exact residual
  erf                     fitted polynomials (misc)           longer fits (coeffs64)
  sine, cosine, tan       in f64 with full-range reduction    double-double reduction,
                          (trig)                              Payne-Hanek table beyond
                                                              2^28 (trig64,
                                                              reduce64)
  atan2                   in f64 (trig)                       double-double table of
                                                              atan(k/8) (trig64)
  power                   exp(y log|x|) in f64                double-double log with a
                          (explog)                            table (pow64)
  sqrt, rsqrt             the sqrt instruction (+ a divide)   same
"""
from __future__ import annotations

from typing import Callable, Sequence

from llvmlite import ir

from ...hlo.opcodes import OPCODES

from . import explog, misc, pow64, trig, trig64
from .math_builder import MathBuilder

# One row per opcode the table (hlo/opcodes.py) flags `transcendental`: its f32 and
# f64 routine, each `routine(m: MathBuilder, *args) -> value`. The opcodes come from
# the table; tests/test_op_table.py fails for a flagged opcode without a row here.
ROUTINES: dict[str, tuple[Callable, Callable]] = {
    #                          f32                f64
    "exponential":            (explog.exp,        explog.exp),
    "exponential-minus-one":  (explog.expm1,      explog.expm1),
    "log":                    (explog.log,        explog.log),
    "log-plus-one":           (explog.log1p,      explog.log1p),
    "tanh":                   (explog.tanh,       explog.tanh),
    "logistic":               (explog.logistic,   explog.logistic),
    "power":                  (explog.pow_f32,    pow64.pow_f64),
    "erf":                    (misc.erf,          misc.erf),
    "cbrt":                   (misc.cbrt,         misc.cbrt),
    "sqrt":                   (misc.sqrt,         misc.sqrt),
    "rsqrt":                  (misc.rsqrt,        misc.rsqrt),
    "sine":                   (trig.sin,          trig64.sin),
    "cosine":                 (trig.cos,          trig64.cos),
    "tan":                    (trig.tan,          trig64.tan),
    "atan2":                  (trig.atan2,        trig64.atan2),
}


def emit_math(builder: ir.IRBuilder, opcode: str, args: Sequence[ir.Value]) -> ir.Value:
    """Emits `opcode` applied lane-wise to `args`; the result has the args' type."""
    if opcode not in ROUTINES:
        raise ValueError(f"vecmath: unsupported opcode {opcode!r}")
    arity = OPCODES[opcode].arity
    if len(args) != arity:
        raise ValueError(f"vecmath: {opcode} takes {arity} argument(s), got {len(args)}")
    ty = args[0].type
    if any(a.type != ty for a in args):
        raise TypeError(f"vecmath: {opcode} arguments differ in type: "
                        f"{', '.join(str(a.type) for a in args)}")
    m = MathBuilder(builder, ty)
    f32, f64 = ROUTINES[opcode]
    return (f32 if m.kind == "float" else f64)(m, *args)


# The floating-point mode (flush-to-zero) lives in llvm/fp_env.py; the math kernels of
# standalone.py take it from there.

