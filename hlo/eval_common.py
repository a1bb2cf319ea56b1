"""Shared pieces of the numpy reference evaluator.

The evaluator is split by op family (`eval_elementwise.py`, `eval_movement.py`,
`eval_reduce.py`, ...). Each family module registers `ref(instr, operand_values,
ctx)` functions in the opcode table with `@reference(...)`; this module holds
what they share:

- `EvaluationError`, the one exception the evaluator raises;
- the floating-point model of XLA's CPU backend: which dtype an op computes in
  (f16 is upcast to f32 and rounded back after every op; bf16 and the other
  narrow types are widened before a ref sees them, see evaluator.py) and
  flush-to-zero of denormals (inputs read as zero, results flushed) for f32
  (so bf16) and f64 arithmetic;
- `recognize_binary_reducer`, which spots computations such as
  `ROOT add(p0, p1)` so reductions and scatters can use numpy's ufuncs instead
  of evaluating the computation element by element.
"""
from __future__ import annotations

import numpy as np

from .dtypes import dtype as _dtype
from .narrow_types import cast as narrow_cast, narrow_dtype_of
from .opcodes import OPCODES


class EvaluationError(Exception):
    """An HLO module (or argument) the evaluator cannot run, with the reason."""


# --- dtypes --------------------------------------------------------------------

def np_dtype_of(instr) -> np.dtype:
    """The numpy dtype holding `instr`'s (array) result."""
    d = _dtype(instr.shape.element_type)
    if d.numpy is None:
        raise EvaluationError(f"{instr.name}: element type {d.name} has no numpy form")
    return d.numpy


def compute_dtype(value: np.ndarray) -> np.dtype:
    """The dtype XLA's CPU backend computes a float op in: f16 is upcast to f32."""
    if value.dtype == np.float16:
        return np.dtype(np.float32)
    return value.dtype


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Rounds f32 values to bfloat16 precision (nearest even), kept as f32 (for tests
    and callers that hold f32; the evaluator holds bf16 natively)."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    # Round to nearest even on the low 16 bits; NaNs keep a quiet NaN.
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out)


def to_result(value, instr) -> np.ndarray:
    """`value` cast to the element type of `instr` (narrow types with XLA's rounding)."""
    value = np.asarray(value)
    target = np_dtype_of(instr)
    if value.dtype != target:
        if _dtype(instr.shape.element_type).is_narrow:
            return narrow_cast(value, instr.shape.element_type)
        if narrow_dtype_of(value) is not None:
            value = value.astype(np.float32 if narrow_dtype_of(value).is_float
                                 else np.int64)
        with np.errstate(all="ignore"):
            value = value.astype(target)
    return value


# --- denormals -------------------------------------------------------------------

_TINY = {np.dtype(np.float32): np.finfo(np.float32).tiny,
         np.dtype(np.float64): np.finfo(np.float64).tiny}


def flush(value: np.ndarray, ctx) -> np.ndarray:
    """Denormal f32/f64 values replaced by a zero of the same sign (XLA CPU's FTZ/DAZ).

    f16 is not flushed: XLA computes it in f32, where every f16 value is normal,
    and the conversion back to f16 keeps f16 denormals. A complex value is flushed
    part by part (XLA's kernels compute on the parts as floats).
    """
    if not ctx.flush_denormals:
        return value
    value = np.asarray(value)
    if value.dtype.kind == "c":
        re, im = value.real, value.imag
        flushed = flush(re, ctx), flush(im, ctx)
        if flushed[0] is re and flushed[1] is im:
            return value
        z = np.empty(value.shape, value.dtype)
        z.real, z.imag = flushed
        return z
    tiny = _TINY.get(value.dtype)
    if tiny is None:
        return value
    denormal = np.abs(value) < tiny
    if not denormal.any():
        return value
    return np.where(denormal, np.copysign(value.dtype.type(0), value), value)


def flush_all(values, ctx) -> list[np.ndarray]:
    return [flush(v, ctx) for v in values]


# --- recognizing simple reducer computations ------------------------------------

# The binary ops a reducer computation may consist of to be run with numpy ufuncs: the
# rows flagged `reducer` in opcodes.py.


def recognize_binary_reducer(comp) -> str | None:
    """The opcode if `comp` is `ROOT op(parameter(0), parameter(1))` over scalars, else None.

    Such computations are combined with numpy ufuncs (`np.add.reduce`, `np.add.at`)
    instead of being evaluated element by element.
    """
    root = comp.root
    if root is None or not OPCODES[root.opcode].reducer or len(root.operands) != 2:
        return None
    params = comp.parameters
    if len(params) != 2 or not root.shape.is_array or root.shape.dims:
        return None
    ops = root.operands
    if {id(ops[0]), id(ops[1])} != {id(params[0]), id(params[1])}:
        return None
    return root.opcode


def reducer_ufunc(opcode: str, dtype: np.dtype):
    """The numpy ufunc combining two values like `opcode` does for `dtype`.

    np.maximum and np.minimum propagate NaN like XLA (np.fmax would not)."""
    if opcode == "and":
        return np.logical_and if dtype == np.bool_ else np.bitwise_and
    if opcode == "or":
        return np.logical_or if dtype == np.bool_ else np.bitwise_or
    return {"add": np.add, "multiply": np.multiply,
            "maximum": np.maximum, "minimum": np.minimum}[opcode]


def float_max_min(opcode: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 maximum/minimum, as XLA's CPU backend emits them (llvm.maximum):
    NaN propagates and -0 < +0. np.maximum alone returns either zero for (+0, -0)."""
    is_max = opcode == "maximum"
    with np.errstate(all="ignore"):
        y = np.maximum(a, b) if is_max else np.minimum(a, b)
        both_zero = (a == 0) & (b == 0)
    if not np.any(both_zero):
        return y
    # Of two zeros, the maximum is -0 only if both are; the minimum if either is.
    sign_a, sign_b = np.signbit(a), np.signbit(b)
    negative = sign_a & sign_b if is_max else sign_a | sign_b
    zero = np.where(negative, -0.0, 0.0).astype(y.dtype)
    return np.where(both_zero, zero, y)


def reducer_identity(opcode: str, dtype: np.dtype):
    """The neutral element of a recognized reducer (fills padding that is skipped)."""
    dtype = np.dtype(dtype)
    if opcode == "add" or opcode == "or":
        return dtype.type(0)
    if opcode == "multiply":
        return dtype.type(1)
    if opcode == "and":
        return np.True_ if dtype == np.bool_ else ~dtype.type(0)
    if dtype.kind == "f":
        return dtype.type(-np.inf if opcode == "maximum" else np.inf)
    if dtype == np.bool_:
        return np.bool_(opcode == "minimum")
    info = np.iinfo(dtype)
    return dtype.type(info.min if opcode == "maximum" else info.max)


def as_tuple(value) -> tuple:
    """A variadic op's result as a tuple (single results are 1-tuples)."""
    return value if isinstance(value, tuple) else (value,)
