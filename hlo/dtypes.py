"""Element types of HLO and their numpy counterparts.

Each `DType` knows its text spelling (`f32`), its numpy dtype, its width and its
kind. `bf16`, `c64` and `c128` parse and print; `bf16` has no numpy dtype here,
so it is stored as float32 by the evaluator (see `numpy_dtype`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str          # the text spelling: "f32"
    bits: int
    kind: str          # "pred" | "signed" | "unsigned" | "float" | "complex" | "token" | "tuple"
    numpy: np.dtype | None

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
    def is_array(self) -> bool:
        return self.kind not in ("token", "tuple")

    def __repr__(self) -> str:
        return self.name


def _d(name, bits, kind, np_type):
    return DType(name, bits, kind, np.dtype(np_type) if np_type is not None else None)


# bf16 computes in f32 in the evaluator: numpy has no bfloat16.
DTYPES: dict[str, DType] = {d.name: d for d in [
    _d("pred", 8, "pred", np.bool_),
    _d("s8", 8, "signed", np.int8),
    _d("s16", 16, "signed", np.int16),
    _d("s32", 32, "signed", np.int32),
    _d("s64", 64, "signed", np.int64),
    _d("u8", 8, "unsigned", np.uint8),
    _d("u16", 16, "unsigned", np.uint16),
    _d("u32", 32, "unsigned", np.uint32),
    _d("u64", 64, "unsigned", np.uint64),
    _d("f16", 16, "float", np.float16),
    _d("bf16", 16, "float", np.float32),
    _d("f32", 32, "float", np.float32),
    _d("f64", 64, "float", np.float64),
    _d("c64", 64, "complex", np.complex64),
    _d("c128", 128, "complex", np.complex128),
    _d("token", 0, "token", None),
]}

_FROM_NUMPY = {d.numpy: d for d in DTYPES.values() if d.numpy is not None and d.name != "bf16"}


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
