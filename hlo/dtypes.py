"""Element types of HLO and their numpy counterparts.

Each `DType` knows its text spelling (`f32`), its numpy dtype, its width and its
kind. The types numpy lacks come from `ml_dtypes` (the package JAX uses for
them): `bf16`, the 8-bit floats `f8e5m2`, `f8e4m3fn`, `f8e4m3b11fnuz`,
`f8e5m2fnuz`, `f8e4m3fnuz`, `f8e8m0fnu`, `f8e4m3`, `f8e3m4`, the 4-bit float
`f4e2m1fn` (no inf, no NaN: ml_dtypes' conversion, as XLA's, saturates to +-6 and
gives -0 for NaN; the CPU backend refuses it), and the narrow integers `s2`, `s4`,
`u2`, `u4`. Their arrays hold the values natively (two bytes
per bf16, one byte per 8-bit float and per 2- or 4-bit integer: XLA's CPU keeps
s4/u4 unpacked in memory too, unless a layout says `E(4)`).

XLA's CPU backend does no arithmetic in these types: it converts each operand
to a wider *compute type*, computes there and rounds the result back
(`DType.compute`): bf16 and f8e8m0fnu compute in f32, the other 8-bit floats in
f16 (whose own arithmetic is done in f32 and rounded to f16), s2/s4 in s8, u2/u4
in u8. The evaluator and the backend follow that model.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    name: str          # the text spelling: "f32"
    bits: int
    kind: str          # "pred" | "signed" | "unsigned" | "float" | "complex" | "token" | "tuple"
    numpy: np.dtype | None
    compute: str | None = None   # the type XLA's CPU computes this one in (narrow types)
    exponent_bits: int = 0       # floats: the layout of the bits (fields of the encoding)
    mantissa_bits: int = 0

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("signed", "unsigned")

    @property
    def is_signed(self) -> bool:
        return self.kind == "signed"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "unsigned"

    @property
    def is_pred(self) -> bool:
        return self.kind == "pred"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_narrow(self) -> bool:
        """A type XLA computes in a wider one (`compute`): bf16, the f8s, s2/s4/u2/u4."""
        return self.compute is not None

    @property
    def has_inf(self) -> bool:
        """Floats with infinities: not the `fn` (finite) and `fnuz` types."""
        return self.is_float and not self.name.endswith(("fn", "fnuz", "fnu"))

    @property
    def int_range(self) -> tuple[int, int]:
        """(lowest, highest) of an integer type, the narrow ones included."""
        if self.is_signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1

    @property
    def is_array(self) -> bool:
        return self.kind not in ("token", "tuple")

    def __repr__(self) -> str:
        return self.name


def _d(name, bits, kind, np_type, compute=None):
    np_type = np.dtype(np_type) if np_type is not None else None
    exponent = mantissa = 0
    if kind == "float":
        info = ml_dtypes.finfo(np_type)
        mantissa = info.nmant
        exponent = bits - 1 - mantissa if name != "f8e8m0fnu" else 8
    return DType(name, bits, kind, np_type, compute, exponent, mantissa)


DTYPES: dict[str, DType] = {d.name: d for d in [
    _d("pred", 8, "pred", np.bool_),
    _d("s2", 2, "signed", ml_dtypes.int2, "s8"),
    _d("s4", 4, "signed", ml_dtypes.int4, "s8"),
    _d("s8", 8, "signed", np.int8),
    _d("s16", 16, "signed", np.int16),
    _d("s32", 32, "signed", np.int32),
    _d("s64", 64, "signed", np.int64),
    _d("u2", 2, "unsigned", ml_dtypes.uint2, "u8"),
    _d("u4", 4, "unsigned", ml_dtypes.uint4, "u8"),
    _d("u8", 8, "unsigned", np.uint8),
    _d("u16", 16, "unsigned", np.uint16),
    _d("u32", 32, "unsigned", np.uint32),
    _d("u64", 64, "unsigned", np.uint64),
    _d("f16", 16, "float", np.float16),
    _d("bf16", 16, "float", ml_dtypes.bfloat16, "f32"),
    _d("f8e5m2", 8, "float", ml_dtypes.float8_e5m2, "f16"),
    _d("f8e4m3fn", 8, "float", ml_dtypes.float8_e4m3fn, "f16"),
    _d("f8e4m3b11fnuz", 8, "float", ml_dtypes.float8_e4m3b11fnuz, "f16"),
    _d("f8e5m2fnuz", 8, "float", ml_dtypes.float8_e5m2fnuz, "f16"),
    _d("f8e4m3fnuz", 8, "float", ml_dtypes.float8_e4m3fnuz, "f16"),
    _d("f8e8m0fnu", 8, "float", ml_dtypes.float8_e8m0fnu, "f32"),
    _d("f8e4m3", 8, "float", ml_dtypes.float8_e4m3, "f16"),
    _d("f8e3m4", 8, "float", ml_dtypes.float8_e3m4, "f16"),
    _d("f4e2m1fn", 4, "float", ml_dtypes.float4_e2m1fn, "f16"),
    _d("f32", 32, "float", np.float32),
    _d("f64", 64, "float", np.float64),
    _d("c64", 64, "complex", np.complex64),
    _d("c128", 128, "complex", np.complex128),
    _d("token", 0, "token", None),
]}

_FROM_NUMPY = {d.numpy: d for d in DTYPES.values() if d.numpy is not None}


def dtype(name: str) -> DType:
    """The DType spelled `name`; raises KeyError with the known names."""
    try:
        return DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown element type {name!r} (known: {', '.join(DTYPES)})") from None


def from_numpy(np_dtype) -> DType:
    """The DType of a numpy dtype (`np.float32` -> f32)."""
    key = np.dtype(np_dtype)
    try:
        return _FROM_NUMPY[key]
    except KeyError:
        raise TypeError(f"numpy dtype {key} has no HLO element type") from None


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype used to hold elements of type `name`."""
    d = dtype(name)
    if d.numpy is None:
        raise TypeError(f"element type {name} has no numpy representation")
    return d.numpy
