"""Element types of the frontend and the rules that combine them.

Users speak numpy dtypes (`np.float32`, `"float32"`, `"f32"` all work); kernels
speak HLO element type names (`"f32"`). `canonical` turns any spelling into a
numpy dtype; `hlo_name` gives the HLO spelling.

Promotion (`result_type`) for a binary op on two tensors:

- same kind (float/float, signed/signed, unsigned/unsigned): numpy's rule, the
  wider type (`f16 + f32 -> f32`, `int8 + int32 -> int32`);
- bool with anything: the other type (`bool + int8 -> int8`);
- integer with float: the float type (`int32 + float16 -> float16`). numpy would
  widen to float64 here; like JAX, we keep the tensor's float width, because a
  silent f64 computation is rarely what an ML program wants;
- signed with unsigned: numpy's rule (`int8 + uint8 -> int16`), and an error when
  numpy would need a float (`int64 + uint64`).

bfloat16 (`dtypes.bfloat16`, also `ops.bfloat16` and the names "bfloat16" / "bf16") is
a float of its own kind: with f16 neither holds the other, so `bf16 + f16 -> f32`
(like JAX; TF refuses mixed types outright); with f32/f64 the wider wins.

Python scalars are weakly typed: they take the dtype of the tensor they meet
(`x_f16 * 2.0` stays f16; `x_int32 + 1` stays int32). A Python float meeting an
integer or bool tensor gives the default float type, float32. Values that enter
without a dtype (Python scalars and lists given to a jit function) become
float32 / int32 / bool, like the builder's bare constants.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..hlo.dtypes import DTYPES, from_numpy

DEFAULT_FLOAT = np.dtype(np.float32)
DEFAULT_INT = np.dtype(np.int32)

# TensorFlow's dtype names (tf.float32, tf.bfloat16, ...) as numpy dtypes.
bool_ = np.dtype(np.bool_)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16, float32, float64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32,
                                                       np.uint64))
TF_NAMES = ("bool_", "bfloat16", "float16", "float32", "float64", "complex64", "complex128",
            "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

# Spellings beyond numpy's own: the HLO names.
_HLO_TO_NUMPY = {name: d.numpy for name, d in DTYPES.items() if d.numpy is not None}
_NUMPY_KINDS = {"b": "bool", "i": "signed", "u": "unsigned", "f": "float", "c": "complex"}


def canonical(dtype) -> np.dtype:
    """A numpy dtype from a numpy dtype, a type object or a name ("float32", "f32")."""
    if isinstance(dtype, str) and dtype in _HLO_TO_NUMPY:
        return np.dtype(_HLO_TO_NUMPY[dtype])
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}") from None
    hlo_name(result)        # rejects dtypes without an HLO element type
    return result


def hlo_name(dtype) -> str:
    """The HLO element type name of a numpy dtype: float32 -> "f32"."""
    return from_numpy(np.dtype(dtype)).name


def kind(dtype) -> str:
    """"bool", "signed", "unsigned", "float" or "complex"."""
    dtype = np.dtype(dtype)
    k = _NUMPY_KINDS.get(dtype.kind)
    if k is None:               # ml_dtypes' types (bfloat16, ...): numpy says "V"
        k = from_numpy(dtype).kind
    return "bool" if k == "pred" else k


def is_float(dtype) -> bool:
    return kind(dtype) in ("float", "complex")


def is_integer(dtype) -> bool:
    return kind(dtype) in ("signed", "unsigned")


def is_bool(dtype) -> bool:
    return kind(dtype) == "bool"


def result_type(a, b) -> np.dtype:
    """The dtype of a binary op on tensors of dtypes `a` and `b` (see the module doc)."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    ka, kb = kind(a), kind(b)
    if ka == "bool":
        return b
    if kb == "bool":
        return a
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    if bfloat16 in (a, b):
        other = b if a == bfloat16 else a
        if kind(other) == "complex":
            return other
        # f16 and bf16 hold each other's values only in f32
        return float32 if other.itemsize <= 2 else other
    result = np.result_type(a, b)
    if is_integer(a) and not is_integer(result):
        raise TypeError(f"no integer type holds both {a} and {b}; cast one of them first")
    return result


def weak_scalar_dtype(value, tensor_dtype) -> np.dtype:
    """The dtype a Python scalar takes next to a tensor of `tensor_dtype`."""
    tensor_dtype = np.dtype(tensor_dtype)
    if isinstance(value, bool):
        return tensor_dtype
    if isinstance(value, int):
        if is_bool(tensor_dtype):
            return DEFAULT_INT
        return tensor_dtype
    if isinstance(value, float):
        return tensor_dtype if is_float(tensor_dtype) else DEFAULT_FLOAT
    if isinstance(value, complex):
        return tensor_dtype if kind(tensor_dtype) == "complex" else np.dtype(np.complex64)
    raise TypeError(f"not a Python scalar: {value!r}")


def default_dtype(value) -> np.dtype:
    """The dtype of a value that has none of its own (a Python scalar or list)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype
    array = np.asarray(value)
    if array.dtype == np.float64:
        return DEFAULT_FLOAT
    if array.dtype == np.int64:
        return DEFAULT_INT
    if array.dtype == np.complex128:
        return np.dtype(np.complex64)
    return canonical(array.dtype)


def as_array(value) -> np.ndarray:
    """`value` as a numpy array, Python scalars and lists in their default dtypes."""
    if isinstance(value, np.ndarray):
        canonical(value.dtype)
        return value
    return np.asarray(value, dtype=default_dtype(value))
