"""Reference semantics of compare, select, clamp, convert and bitcast-convert.

- compare: `type=FLOAT` is IEEE (NaN unordered; denormals read as zero, as on
  XLA's CPU backend), `type=TOTALORDER` orders floats by their bits
  (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN), SIGNED/UNSIGNED are plain.
- convert: float -> int truncates toward zero and saturates at the target's
  range, NaN -> 0; int -> int wraps; anything -> pred is `x != 0` (a denormal
  float reads as zero); float ->
  narrower float rounds to nearest even (overflow gives inf). Converts to and
  from the narrow types (bf16, the 8-bit floats, s2/s4/u2/u4) follow
  narrow_types.py: from one, the value is widened exactly (a narrow float to f32,
  keeping denormals, as XLA's bit-operation conversion does) and converted on;
  to one, narrow_types.cast rounds as XLA does.
- bitcast-convert reinterprets the bits; between widths XLA adds (narrowing)
  or removes (widening) a minor-most dimension, lowest bits first (s8[n] ->
  s4[n,2] gives each byte's low nibble, then its high one).
"""
from __future__ import annotations

import numpy as np

from .dtypes import dtype as _dtype
from .eval_common import EvaluationError, float_max_min, flush_all, np_dtype_of, to_result
from .narrow_types import cast as narrow_cast, narrow_dtype_of
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
    elif a.dtype.kind == "c":
        if direction not in ("EQ", "NE"):
            raise EvaluationError(f"{instr.name}: complex numbers only compare EQ or NE")
        a, b = flush_all((a, b), ctx)     # part by part, as floats are
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
    if _dtype(instr.shape.element_type).is_narrow:
        return narrow_cast(x, instr.shape.element_type)
    source = narrow_dtype_of(x)
    if source is not None:
        x = x.astype(np.float32 if source.is_float else _dtype(source.compute).numpy)
        # XLA widens with bit operations, keeping denormals, except that bf16 -> f64
        # extends the f32 value with the hardware, which reads f32 denormals as zero.
        if source.is_float and target.kind == "f" and not (source.name == "bf16"
                                                           and target == np.float64):
            with np.errstate(over="ignore"):
                return x.astype(target)
        if source.is_float and target == np.bool_:
            return x != 0                 # not flushed: a bf16 denormal is true in XLA
    if target == np.bool_:
        if x.dtype.kind == "f":
            (x,) = flush_all((x,), ctx)   # DAZ: a denormal reads as zero, so converts to false
        return x != 0
    if x.dtype.kind == "f" and target.kind in "iu":
        return float_to_int(x, target)
    with np.errstate(all="ignore"):
        if x.dtype.kind == "c" and target.kind != "c":
            x = np.real(x)
        # Floats, and complex parts, change precision with DAZ/FTZ (f32 -> c64 does not:
        # the part is kept as it is).
        if x.dtype.kind in "fc" and target.kind in "fc" and _part(x.dtype) != _part(target):
            (x,) = flush_all((x,), ctx)
            y = x.astype(target)
            (y,) = flush_all((y,), ctx)
        else:
            y = x.astype(target)
    return y


def _part(dt: np.dtype) -> np.dtype:
    """The real type of a float or complex dtype (float32 for complex64)."""
    return np.zeros((), dt).real.dtype


def float_to_int(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Truncation toward zero, saturating at the range of `target`; NaN -> 0."""
    info = np.iinfo(target)
    with np.errstate(invalid="ignore"):
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
    src_bits = _dtype(instr.operands[0].shape.element_type).bits
    dst_bits = _dtype(instr.shape.element_type).bits
    if src_bits >= 8 and dst_bits >= 8:
        return _reinterpret(x, target, instr.shape.dims)
    return _reinterpret_sub_byte(x, src_bits, instr.shape.element_type, dst_bits,
                                 instr.shape.dims)


def _reinterpret_sub_byte(x, src_bits, element_type, dst_bits, dims):
    """bitcast-convert where a side is 2 or 4 bits wide (s2/s4/u2/u4, one per byte)."""
    if narrow_dtype_of(x) is not None and not narrow_dtype_of(x).is_float:
        bits = x.astype(np.int64) & ((1 << src_bits) - 1)
    else:
        bits = x.view(np.dtype(f"u{x.itemsize}")).astype(np.uint64).astype(np.int64)
    if src_bits > dst_bits:               # each element splits into its low bits first
        shifts = np.arange(src_bits // dst_bits, dtype=np.int64) * dst_bits
        bits = (bits[..., None] >> shifts) & ((1 << dst_bits) - 1)
    elif src_bits < dst_bits:             # the minor dimension's elements join
        shifts = np.arange(dst_bits // src_bits, dtype=np.int64) * src_bits
        bits = np.bitwise_or.reduce(bits << shifts, axis=-1)
    bits = bits.reshape(dims)
    if dst_bits < 8:
        return narrow_cast(bits, element_type)            # wraps: the low bits
    return bits.astype(np.dtype(f"u{dst_bits // 8}")).view(_dtype(element_type).numpy)


def _reinterpret(x, target, dims):
    src_size, dst_size = x.dtype.itemsize, target.itemsize
    if src_size == dst_size:
        return x.view(target)
    if src_size > dst_size:
        # f32[n] -> u8[n,4]: the bytes of each element become a new minor dimension.
        return x.reshape(x.shape + (1,)).view(target).reshape(dims)
    # u8[n,4] -> f32[n]: the minor dimension is consumed.
    return np.ascontiguousarray(x).view(target).reshape(dims)
