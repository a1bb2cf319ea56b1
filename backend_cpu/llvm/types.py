"""How HLO element types live in LLVM: storage types, compute types, loads, stores,
and how many lanes a vector of them has on the compile target (`lanes_for`).

Every element has two LLVM types:

- the *storage* type, how it sits in a buffer: `pred` is one byte (`i8`, 0 or 1,
  like numpy's bool), integers are `iN`, `f16` is `half`, `f32`/`f64` are
  `float`/`double`;
- the *compute* type, how element generators pass it around: the same, except
  that `pred` is an `i1` so that compares and selects need no conversions.

`f16` arithmetic is done on `half` values: LLVM promotes each operation to
`float` and rounds back, which is exactly XLA's per-instruction f16 rounding.

Complex elements (c64, c128) are an LLVM struct of two floats `{re, im}`
(`{float, float}`, `{double, double}`) in both roles: numpy's layout in memory,
and one value that selects, loads, stores and memo tables treat like any other.
elemental/complex_ops.py computes on the two parts.

The narrow types (bf16, the 8-bit floats, s2/s4/u2/u4; hlo/dtypes.py) are their
bits in both roles: `bf16` is an `i16`, an 8-bit float an `i8`, and s2/s4/u2/u4 one
`i8` each whose low bits hold the value (unpacked, as ml_dtypes stores them). No
arithmetic is done on them: passes/narrow_types.py puts converts to their compute
type around every instruction that computes, and elemental/narrow_convert.py does
those converts on the bits.
"""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from ...hlo.dtypes import dtype as _dtype

from .. import target as targets

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
HALF = ir.HalfType()
FLOAT = ir.FloatType()
DOUBLE = ir.DoubleType()
PTR = ir.PointerType()          # opaque pointer (llvmlite 0.45+)
VOID = ir.VoidType()

_FLOATS = {"f16": HALF, "f32": FLOAT, "f64": DOUBLE}
# A complex element and the real type of each of its two parts.
COMPLEX_PARTS = {"c64": "f32", "c128": "f64"}


def _unsupported(name: str) -> NotImplementedError:
    return NotImplementedError(f"backend_cpu: element type {name} is not supported")


def storage_type(name: str) -> ir.Type:
    """The LLVM type of one element of type `name` in memory."""
    d = _dtype(name)
    if d.is_pred:
        return I8
    if d.is_narrow:
        return ir.IntType(max(8, d.bits))
    if d.is_integer:
        return ir.IntType(d.bits)
    if name in _FLOATS:
        return _FLOATS[name]
    if name in COMPLEX_PARTS:
        part = _FLOATS[COMPLEX_PARTS[name]]
        return ir.LiteralStructType([part, part])
    raise _unsupported(name)


def compute_type(name: str) -> ir.Type:
    """The LLVM type element generators use for type `name`."""
    return I1 if _dtype(name).is_pred else storage_type(name)


def element_bytes(name: str) -> int:
    return max(1, _dtype(name).bits // 8)


def element_align(name: str) -> int:
    """The alignment a load or store of one element may assume: its size, but a complex
    element only that of its parts (numpy aligns complex128 to 8 bytes, not 16)."""
    if name in COMPLEX_PARTS:
        return element_bytes(COMPLEX_PARTS[name])
    return element_bytes(name)


def is_complex(name: str) -> bool:
    return name in COMPLEX_PARTS


def is_float(name: str) -> bool:
    """Computed as a float in LLVM (not the narrow floats: those are their bits)."""
    d = _dtype(name)
    return d.is_float and not d.is_narrow


def is_narrow(name: str) -> bool:
    return _dtype(name).is_narrow


def is_signed(name: str) -> bool:
    return _dtype(name).is_signed


def is_pred(name: str) -> bool:
    return _dtype(name).is_pred


def bits(name: str) -> int:
    return _dtype(name).bits


def from_storage(b: ir.IRBuilder, value: ir.Value, name: str) -> ir.Value:
    """A loaded element (or vector of them) -> its compute value (`pred` bytes become `i1`)."""
    if is_pred(name):
        return b.icmp_unsigned("!=", value, ir.Constant(value.type, None))
    return value


def to_storage(b: ir.IRBuilder, value: ir.Value, name: str) -> ir.Value:
    """A compute value -> the element to store (`i1` becomes the byte 0 or 1)."""
    if is_pred(name):
        ty = value.type
        return b.zext(value, ir.VectorType(I8, ty.count) if isinstance(ty, ir.VectorType) else I8)
    return value


def constant(name: str, value) -> ir.Constant:
    """An LLVM constant of compute type for a Python/numpy scalar."""
    ty = compute_type(name)
    if is_narrow(name):
        d = _dtype(name)
        raw = np.asarray(value).astype(d.numpy) if np.asarray(value).dtype != d.numpy \
            else np.asarray(value)
        if d.is_float:
            return ir.Constant(ty, int(raw.view(np.dtype(f"u{raw.itemsize}"))))
        return ir.Constant(ty, int(raw.astype(np.int64)) & ((1 << d.bits) - 1))
    if is_float(name):
        return ir.Constant(ty, float(value))
    if is_complex(name):
        z = complex(np.asarray(value).item())
        part = ty.elements[0]
        return ir.Constant(ty, [ir.Constant(part, z.real), ir.Constant(part, z.imag)])
    if is_pred(name):
        return ir.Constant(I1, int(bool(value)))
    width = bits(name)
    return ir.Constant(ty, int(value) & ((1 << width) - 1))


def lanes_for(etype: str) -> int:
    """Lanes per vector for a kernel storing `etype`: one register of the target's
    width of f32 or f64 (16 or 8 on AVX-512, 8 or 4 on AVX2); narrower types take as
    many lanes as f32, so their wider operands still fit a few registers."""
    size = {"f64": 8, "s64": 8, "u64": 8}.get(etype, 4)
    return targets.current().lanes(size)
