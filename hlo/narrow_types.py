"""Values of the narrow element types (bf16, the 8-bit floats, s2/s4/u2/u4) as numpy
arrays: converting to them with XLA's rounding, and widening them to the type XLA's
CPU computes them in (`DType.compute`, see dtypes.py).

Conversions follow XLA's CPU backend (checked against it with JAX, see
tests/hlo/test_ml_dtypes.py):

- to a narrow float from f32, f16 or another narrow float: round to nearest even,
  once (ml_dtypes does exactly this). Overflow gives inf where the type has one;
  the `fn`/`fnuz` types have none and give NaN, except that a value that rounds
  to the largest finite value stays finite; f8e8m0fnu (powers of two, no zero, no
  sign) gives NaN for zero, negatives and overflow, and its smallest value for
  anything tinier. Denormals are kept: XLA converts with bit operations, which
  the flush-to-zero mode of its f32 arithmetic does not touch;
- from f64: to bf16 through f32 (XLA rounds twice there, and the f32 step
  flushes f32 denormals to zero); to the 8-bit floats once, correctly (done here
  by rounding to f32 with round-to-odd first, which keeps enough bits that the
  second rounding is exact), except that f8e8m0fnu gives NaN below its smallest
  value 2^-127 (as for zero) where from f32 it gives 2^-127;
- from integers: through f64 as a float would be;
- to s2/s4/u2/u4: from a float, truncation toward zero saturated at the
  type's range, NaN -> 0 (ml_dtypes would wrap); from an integer, the low bits
  (wraps, like every integer conversion).
"""
from __future__ import annotations

import numpy as np

from .dtypes import DTYPES, DType, dtype as _dtype
from .shape import Shape

# ml_dtypes' dtypes do not share a numpy kind (bfloat16 is "V", the 8-bit floats "f"):
# look them up by identity.
_NARROW_BY_NUMPY = {d.numpy: d for d in DTYPES.values() if d.is_narrow}


def is_narrow(element_type: str) -> bool:
    return _dtype(element_type).is_narrow


def narrow_dtype_of(array: np.ndarray) -> DType | None:
    """The narrow DType of an array held in one (an ml_dtypes array), else None."""
    return _NARROW_BY_NUMPY.get(np.asarray(array).dtype)


def widen(array: np.ndarray) -> np.ndarray:
    """An array of a narrow type in its compute type (exact); other arrays unchanged."""
    d = narrow_dtype_of(np.asarray(array))
    if d is None:
        return array
    return np.asarray(array).astype(_dtype(d.compute).numpy)


def as_float(array: np.ndarray) -> np.ndarray:
    """Narrow floats as f32 (exact), narrow ints as s8/u8; other arrays unchanged."""
    array = np.asarray(array)
    d = narrow_dtype_of(array)
    if d is None:
        return array
    return array.astype(np.float32 if d.is_float else _dtype(d.compute).numpy)


def f64_to_f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """f64 values rounded to f32 toward zero, with the last bit set if inexact.

    Rounding this to a type with at least two fewer significand bits gives the
    correctly rounded result of the f64 value (no double-rounding error)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        f = x.astype(np.float32)
        back = f.astype(np.float64)
    inexact = (back != x) & np.isfinite(x)
    away = inexact & (np.abs(back) > np.abs(x))         # RNE went up in magnitude
    f = np.where(away, np.nextafter(f, np.float32(0)), f).astype(np.float32)
    bits = f.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


def _f64_to_f32_flushed(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        f = x.astype(np.float32)
    tiny = np.abs(f) < np.finfo(np.float32).tiny
    return np.where(tiny, np.copysign(np.float32(0), f), f).astype(np.float32)


def from_literal(values: np.ndarray, element_type: str) -> np.ndarray:
    """f64 numbers read from HLO text as `element_type`, as XLA's parser converts them
    (the C++ conversion of ml_dtypes, not the CPU backend's convert): bf16 through f32
    without flushing, the 8-bit floats rounded once, f8e8m0fnu saturating at 2^-127."""
    target = _dtype(element_type)
    x = np.asarray(values)
    if not target.is_float or x.dtype != np.float64:
        return cast(x, element_type)
    with np.errstate(all="ignore"):
        x = x.astype(np.float32) if element_type == "bf16" else f64_to_f32_round_to_odd(x)
        return x.astype(target.numpy)


def cast(values, element_type: str) -> np.ndarray:
    """`values` (any numeric numpy array) converted to `element_type` as XLA's CPU
    converts; for the narrow types, see the module docstring. Other targets use
    numpy's astype (the evaluator's convert adds its own rules for them)."""
    target = _dtype(element_type)
    x = as_float(np.asarray(values))
    if not target.is_narrow:
        with np.errstate(all="ignore"):
            return x.astype(target.numpy)
    if target.is_float:
        if x.dtype.kind == "c":
            x = np.real(x)
        if x.dtype.kind in "iub":
            x = x.astype(np.float64)
        if x.dtype == np.float64:
            if element_type == "bf16":
                x = _f64_to_f32_flushed(x)
            else:
                if element_type == "f8e8m0fnu":
                    x = np.where(np.abs(x) < 2.0 ** -127, np.nan, x)
                x = f64_to_f32_round_to_odd(x)
        with np.errstate(all="ignore"):
            return x.astype(target.numpy)
    lo, hi = target.int_range
    if x.dtype.kind == "c":
        x = np.real(x)
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            t = np.trunc(x.astype(np.float64))
        t = np.where(np.isnan(t), 0.0, np.clip(t, lo, hi))
        return t.astype(np.int64).astype(target.numpy)
    wide = x.astype(np.int64) if x.dtype != np.uint64 else x.astype(np.uint64)
    mask = (1 << target.bits) - 1
    low = (wide & mask).astype(np.int64)
    if target.is_signed:
        low = np.where(low > hi, low - (1 << target.bits), low)
    return low.astype(target.numpy)


# --- which instructions compute in a narrow type ------------------------------------------

# Instructions that move or pass values without arithmetic work on the narrow values
# themselves; every other instruction on a narrow type computes in the compute type
# (the evaluator widens its operands, the CPU backend's narrow-type-normalization
# pass puts converts around it).
_NATIVE_KINDS = frozenset({"leaf", "movement", "control", "collective"})
_WIDENED_MOVEMENT = frozenset({"scatter", "iota"})      # a combiner; values made up
_NATIVE_OPS = frozenset({"convert", "bitcast-convert", "select", "custom-call",
                         "rng-bit-generator", "after-all", "replica-id", "partition-id",
                         "rng-get-and-update-state"})


def has_narrow(shape: Shape) -> bool:
    if shape.is_tuple:
        return any(has_narrow(s) for s in shape.tuple_shapes)
    return shape.is_array and shape.dtype.is_narrow


def computes_narrow(instr) -> bool:
    """Does `instr` do arithmetic on a narrow type (so it computes in the compute type)?"""
    kind = instr.info.kind
    if instr.opcode in _NATIVE_OPS or (kind in _NATIVE_KINDS
                                       and instr.opcode not in _WIDENED_MOVEMENT):
        return False
    return has_narrow(instr.shape) or any(has_narrow(o.shape) for o in instr.operands)


def wide_shape(shape: Shape) -> Shape:
    """`shape` with each narrow element type replaced by its compute type."""
    if shape.is_tuple:
        return Shape.tuple_of([wide_shape(s) for s in shape.tuple_shapes])
    if shape.is_array and shape.dtype.is_narrow:
        return shape.with_element_type(shape.dtype.compute)
    return shape
