"""Reference semantics of compare, select, clamp, convert and bitcast-convert.

- compare: `type=FLOAT` is IEEE (NaN unordered; denormals read as zero, as on
  XLA's CPU backend), `type=TOTALORDER` orders floats by their bits
  (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN), SIGNED/UNSIGNED are plain.
- convert: float -> int truncates toward zero and saturates at the target's
  range, NaN -> 0; int -> int wraps; anything -> pred is `x != 0` (a denormal
  float reads as zero); float ->
  narrower float rounds to nearest even (overflow gives inf).
- bitcast-convert reinterprets the bytes; between widths XLA adds (narrowing)
  or removes (widening) a minor-most dimension.
"""
from __future__ import annotations

import numpy as np

from .eval_common import (EvaluationError, float_max_min, flush_all, np_dtype_of, round_to_bf16,
                          to_result)
from .opcodes import reference

_COMPARES = {
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less,
    "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
}


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers ordered like the floats `x` in IEEE total order."""
    signed = np.dtype(f"i{x.dtype.itemsize}")
    bits = x.view(signed)
    magnitude_mask = np.iinfo(signed).max
    # Negative floats: flipping the magnitude bits reverses their order.
    return np.where(bits < 0, bits ^ signed.type(magnitude_mask), bits)


@reference("compare")
def compare(instr, operands, ctx):
    a, b = operands
    direction = instr.attrs.get("direction")
    fn = _COMPARES.get(direction)
    if fn is None:
        raise EvaluationError(f"{instr.name}: unknown compare direction {direction!r}")
    kind = instr.attrs.get("type")
    if a.dtype.kind == "f":
        if kind == "TOTALORDER":
            a, b = total_order_key(a), total_order_key(b)
        else:
            a, b = flush_all((a, b), ctx)
    elif a.dtype.kind == "c" and direction not in ("EQ", "NE"):
        raise EvaluationError(f"{instr.name}: complex numbers only compare EQ or NE")
    return fn(a, b)


@reference("select")
def select(instr, operands, ctx):
    pred, on_true, on_false = operands
    return np.where(pred, on_true, on_false)


@reference("clamp")
def clamp(instr, operands, ctx):
    lo, x, hi = operands
    # min(max(x, lo), hi) with NaN-propagating max/min (and -0 < +0 for floats).
    if x.dtype.kind == "f":
        lo, x, hi = np.broadcast_arrays(*flush_all((lo, x, hi), ctx))
        return to_result(float_max_min("minimum", float_max_min("maximum", x, lo), hi), instr)
    with np.errstate(all="ignore"):
        return to_result(np.minimum(np.maximum(x, lo), hi), instr)


# --- convert ---------------------------------------------------------------------

@reference("convert")
def convert(instr, operands, ctx):
    x = operands[0]
    target = np_dtype_of(instr)
    if instr.operands[0].shape.element_type == instr.shape.element_type:
        return x                          # a no-op (XLA removes it): nothing is flushed
    if target == np.bool_:
        if x.dtype.kind == "f":
            (x,) = flush_all((x,), ctx)   # DAZ: a denormal reads as zero, so converts to false
        return x != 0
    if x.dtype.kind == "f" and target.kind in "iu":
        return float_to_int(x, target)
    with np.errstate(all="ignore"):
        if x.dtype.kind == "c" and target.kind != "c":
            x = np.real(x)
        if x.dtype.kind == "f" and target.kind == "f":
            (x,) = flush_all((x,), ctx)
            y = x.astype(target)
            (y,) = flush_all((y,), ctx)
        else:
            y = x.astype(target)
    if instr.shape.element_type == "bf16":
        y = round_to_bf16(y)
    return y


def float_to_int(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Truncation toward zero, saturating at the range of `target`; NaN -> 0."""
    info = np.iinfo(target)
    t = np.trunc(x.astype(np.float64))
    # 2**63 and 2**64 are exact doubles; the limits themselves may not be.
    too_big = t >= float(info.max) + 1.0
    too_small = t < float(info.min)
    nan = np.isnan(t)
    safe = np.where(too_big | too_small | nan, 0.0, t)
    y = safe.astype(target)
    y = np.where(too_big, target.type(info.max), y)
    y = np.where(too_small, target.type(info.min), y)
    return y.astype(target, copy=False)


# --- bitcast-convert ---------------------------------------------------------------

@reference("bitcast-convert")
def bitcast_convert(instr, operands, ctx):
    x = np.ascontiguousarray(operands[0])
    target = np_dtype_of(instr)
    # bf16 is held as f32 here: its bits are the upper half of the f32 bits; it takes
    # part as a u16 array of those bits.
    if instr.operands[0].shape.element_type == "bf16":
        x = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    to_bf16 = instr.shape.element_type == "bf16"
    result = _reinterpret(x, np.dtype(np.uint16) if to_bf16 else target, instr.shape.dims)
    if to_bf16:
        return (result.astype(np.uint32) << 16).view(np.float32)
    return result


def _reinterpret(x, target, dims):
    src_size, dst_size = x.dtype.itemsize, target.itemsize
    if src_size == dst_size:
        return x.view(target)
    if src_size > dst_size:
        # f32[n] -> u8[n,4]: the bytes of each element become a new minor dimension.
        return x.reshape(x.shape + (1,)).view(target).reshape(dims)
    # u8[n,4] -> f32[n]: the minor dimension is consumed.
    return np.ascontiguousarray(x).view(target).reshape(dims)
