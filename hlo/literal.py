"""Constant literals: from the parsed text of `constant(...)` to numpy, and back.

The grammar hands over a literal as nested `LiteralList` / `LiteralTuple` nodes
whose leaves are number or word tokens (`1.5`, `-inf`, `nan`, `true`). An array
literal nests exactly `rank` lists deep, `{ {1, 2}, {3, 4} }` for `f32[2,2]`; a
scalar is a bare leaf; a bare real leaf for an array shape (`f32[10] constant(15)`)
is read as XLA's parser reads it: the first element takes the value and the others
are zero (XLA ignores the nesting check there; its own CPU tests rely on it); `{...}` marks a constant XLA elided (value None). Complex
elements are pairs `(re, im)`; a tuple-shaped constant is `( {..}, 3 )` and
becomes a tuple of arrays.

The nesting is checked against the shape before anything is allocated, so a
literal can never make the parser build an array larger than the text.

Printing is canonical: floats in the shortest text that reads back to the same
value in their own precision (`0.1` for f32, not `0.100000001`), `inf`, `-inf`,
`nan`, `-0`; integers plainly; pred as `true`/`false`.

The narrow types (bf16, the 8-bit floats, s2/s4/u2/u4; see dtypes.py) are read
with XLA's conversion from the written number (narrow_types.cast) and held as
ml_dtypes arrays. A finite number that rounds to no finite value is an error,
as in XLA (`f8e4m3fn[] constant(500)`; 464 rounds to 448 and is fine); `inf` in
a type without infinities gives its NaN, as XLA's conversion does. NaN payloads
(`nan(0x1)`) exist in the types with infinities (IEEE-like bit layouts: f16,
bf16, f32, f64, f8e5m2, f8e4m3, f8e3m4); the `fn`/`fnuz`/`fnu` types have one
NaN per sign (or one in all) and print it as `nan` or `-nan`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtypes import dtype as _dtype
from .narrow_types import from_literal as _cast
from .shape import Shape


class LiteralError(ValueError):
    """A literal that does not match its shape or element type; `at` is the token to blame."""

    def __init__(self, message: str, at: Any = None):
        super().__init__(message)
        self.at = at


@dataclass
class LiteralList:
    """`{a, b, ...}`; `token` is the opening brace (for error positions)."""
    items: list
    token: Any


@dataclass
class LiteralTuple:
    """`(a, b, ...)`: a complex pair or the elements of a tuple-shaped constant."""
    items: list
    token: Any


@dataclass
class Elided:
    """`{...}`: a constant XLA did not print."""
    token: Any


# Bound on how deeply literal braces may nest: deeper than any real rank.
MAX_LITERAL_DEPTH = 64


# --- reading -------------------------------------------------------------------

def build_literal(node: Any, shape: Shape):
    """The numpy value of literal `node` for `shape` (a tuple of them for tuple shapes)."""
    if isinstance(node, Elided):
        return None
    if shape.is_tuple:
        if not isinstance(node, LiteralTuple) or len(node.items) != len(shape.tuple_shapes):
            raise LiteralError(f"a constant of tuple shape {shape} needs "
                               f"{len(shape.tuple_shapes)} elements in parentheses", _token_of(node))
        return tuple(build_literal(item, s) for item, s in zip(node.items, shape.tuple_shapes))
    if not shape.is_array:
        raise LiteralError(f"no literal for shape {shape}", _token_of(node))
    if shape.rank > MAX_LITERAL_DEPTH:
        raise LiteralError(f"literal of rank {shape.rank} is too deep", _token_of(node))
    leaves: list = []
    if shape.rank > 0 and not isinstance(node, (LiteralList, LiteralTuple)):
        return _first_element_only(node, shape)
    _collect_leaves(node, shape.dims, 0, leaves)
    values = _convert_leaves(leaves, shape.element_type)
    return values.reshape(shape.dims)


def _first_element_only(leaf: Any, shape: Shape):
    """XLA's reading of one bare number for an array shape: element 0, zeros elsewhere."""
    if shape.numel == 0:
        raise LiteralError(f"value {_leaf_text(leaf)} cannot be set in a literal of shape "
                           f"{shape}: it has no elements", _token_of(leaf))
    first = _convert_leaves([leaf], shape.element_type)
    values = np.zeros(shape.numel, dtype=first.dtype)
    values[0] = first[0]
    return values.reshape(shape.dims)


def _collect_leaves(node: Any, dims: tuple[int, ...], depth: int, out: list) -> None:
    """Checks that `node` nests like `dims` and appends its leaves to `out`, in order."""
    if depth == len(dims):
        if isinstance(node, (LiteralList, Elided)):
            raise LiteralError(f"literal nests deeper than the shape's rank {len(dims)}",
                               node.token)
        out.append(node)
        return
    if not isinstance(node, LiteralList):
        raise LiteralError(f"expected a {{...}} list of {dims[depth]} elements for "
                           f"dimension {depth}", _token_of(node))
    if len(node.items) != dims[depth]:
        raise LiteralError(f"dimension {depth} has size {dims[depth]} but the literal "
                           f"gives {len(node.items)} elements", node.token)
    for item in node.items:
        _collect_leaves(item, dims, depth + 1, out)


def _convert_leaves(leaves: list, element_type: str) -> np.ndarray:
    dt = _dtype(element_type)
    if dt.numpy is None:
        raise LiteralError(f"no literal of element type {element_type}",
                           _token_of(leaves[0]) if leaves else None)
    if dt.is_complex:
        values = [_complex_leaf(leaf, element_type) for leaf in leaves]
    elif dt.is_float:
        values = [_float_leaf(leaf, element_type) for leaf in leaves]
        payloads = [(i, v) for i, v in enumerate(values) if isinstance(v, _NanPayload)]
        if payloads:
            return _with_payloads(values, payloads, element_type)
    elif dt.is_pred:
        values = [_pred_leaf(leaf) for leaf in leaves]
    else:
        lo, hi = dt.int_range
        # XLA reads u64 literals as 64-bit integers: u64[] constant(-1) is 2^64 - 1.
        values = [_int_leaf(leaf, element_type, -2 ** 63, hi) % 2 ** 64
                  if element_type == "u64" else _int_leaf(leaf, element_type, lo, hi)
                  for leaf in leaves]
    if dt.is_narrow:
        wide = np.array(values, dtype=np.float64 if dt.is_float else np.int64)
        return _cast(wide, element_type)
    with np.errstate(over="ignore"):     # 65505 in f16 rounds to 65504, as XLA's does
        return np.array(values, dtype=dt.numpy)


@dataclass
class _NanPayload:
    """`-nan(0x7f)`: a NaN whose significand bits are `payload`."""
    negative: bool
    payload: int


def _payload_bits(element_type: str) -> int:
    """The significand bits a NaN payload may use (0: the type has no payloads)."""
    d = _dtype(element_type)
    return d.mantissa_bits if d.has_inf else 0


def _with_payloads(values: list, payloads: list, element_type: str) -> np.ndarray:
    """The array of `values`, the NaNs with payloads given their exact bits."""
    d = _dtype(element_type)
    plain = [math.nan if isinstance(v, _NanPayload) else v for v in values]
    if d.is_narrow:
        array = _cast(np.array(plain, dtype=np.float64), element_type)
    else:
        array = np.array(plain, dtype=d.numpy)
    bits = array.view(np.dtype(f"u{array.itemsize}"))
    mantissa = d.mantissa_bits
    sign = 1 << (d.bits - 1)
    exponent_all_ones = (sign - 1) >> mantissa << mantissa
    for i, nan in payloads:
        bits[i] = (sign if nan.negative else 0) | exponent_all_ones | nan.payload
    return array


def nan_payload(value, element_type: str) -> int | None:
    """The significand bits of NaN `value` if they are not the plain quiet NaN's."""
    mantissa = _payload_bits(element_type) if element_type in _FLOAT_TYPES else 0
    if not mantissa:
        return None
    array = np.array([value], dtype=_dtype(element_type).numpy)
    bits = int(array.view(np.dtype(f"u{array.itemsize}"))[0])
    payload = bits & ((1 << mantissa) - 1)
    return None if payload == 1 << (mantissa - 1) else payload


_FLOAT_TYPES = frozenset(name for name in ("f16", "bf16", "f32", "f64", "f8e5m2", "f8e4m3fn",
                                           "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz",
                                           "f8e8m0fnu", "f8e4m3", "f8e3m4", "f4e2m1fn"))


def _leaf_text(leaf: Any) -> str:
    if isinstance(leaf, (LiteralList, LiteralTuple, Elided)):
        raise LiteralError("expected a number here", leaf.token)
    return str(leaf)


_NAN_PAYLOAD_RE = re.compile(r"([-+]?)nan\(0x([0-9a-fA-F]+)\)")


def _float_leaf(leaf: Any, element_type: str):
    text = _leaf_text(leaf)
    m = _NAN_PAYLOAD_RE.fullmatch(text)
    if m is not None:
        payload = int(m.group(2), 16)
        mantissa = _payload_bits(element_type)
        if not mantissa:
            raise LiteralError(f"{element_type} has no NaN payloads (its only NaN is "
                               f"written nan)", leaf)
        if not 0 < payload < 1 << mantissa:
            raise LiteralError(f"NaN payload {text} does not fit the {mantissa} significand "
                               f"bits of {element_type} (or is 0, which is infinity)", leaf)
        return _NanPayload(m.group(1) == "-", payload)
    if text.lower().startswith(("nan", "+nan", "-nan", "inf", "+inf", "-inf")) \
            and text.lower().lstrip("+-") not in ("nan", "inf"):
        raise LiteralError(f"{text!r} is not a {element_type} number", leaf)
    try:
        value = float(text)   # accepts inf, -inf, nan, -nan, -0, 1e+30
    except ValueError:
        raise LiteralError(f"{text!r} is not a {element_type} number", leaf) from None
    # As XLA: a finite number that rounds to infinity in the element type is an error,
    # not inf (f16 65520, f64 1.8e308, bf16 1e100); 65505 in f16 rounds to 65504 and is fine.
    finite_text = text.lower().lstrip("+-") not in ("inf", "nan", "infinity")
    if finite_text and not math.isfinite(_rounded(value, element_type)):
        raise LiteralError(f"value {text} is out of range for literal's primitive type "
                           f"{element_type.upper()}", leaf)
    return value


def _rounded(value: float, element_type: str) -> float:
    """`value` rounded to nearest in `element_type` (inf if it overflows)."""
    if not math.isfinite(value):
        return value
    if _dtype(element_type).is_narrow:
        return float(_cast(np.array([value]), element_type).astype(np.float64)[0])
    with np.errstate(over="ignore"):
        return float(_dtype(element_type).numpy.type(value))


def _int_leaf(leaf: Any, element_type: str, lo: int, hi: int) -> int:
    text = _leaf_text(leaf)
    # Integers are plain decimal; Python's int() would also accept '1_000'.
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isdigit() or not digits.isascii() or len(digits) > 40:
        raise LiteralError(f"{text!r} is not a {element_type} integer", leaf)
    value = int(text)
    if not lo <= value <= hi:
        raise LiteralError(f"value {text} is out of range for literal's primitive type "
                           f"{element_type.upper()} [{lo}, {hi}]", leaf)
    return value


def _pred_leaf(leaf: Any) -> bool:
    text = _leaf_text(leaf)
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise LiteralError(f"{text!r} is not a pred value (true, false, 1 or 0)", leaf)


def _complex_leaf(leaf: Any, element_type: str) -> complex:
    if not isinstance(leaf, LiteralTuple) or len(leaf.items) != 2:
        raise LiteralError("a complex element is written (real, imag)", _token_of(leaf))
    part = "f32" if element_type == "c64" else "f64"
    real, imag = (_float_leaf(item, part) for item in leaf.items)
    if isinstance(real, _NanPayload) or isinstance(imag, _NanPayload):
        raise LiteralError("NaN payloads are not supported in complex literals",
                           _token_of(leaf))
    return complex(real, imag)


def _token_of(node: Any) -> Any:
    return node.token if isinstance(node, (LiteralList, LiteralTuple, Elided)) else node


# --- printing -------------------------------------------------------------------

def format_literal(value, shape: Shape) -> str:
    """The canonical text of a constant's value (what goes inside `constant(...)`)."""
    if value is None:
        return "{...}"
    if shape.is_tuple:
        return "(" + ", ".join(format_literal(v, s)
                               for v, s in zip(value, shape.tuple_shapes)) + ")"
    array = np.asarray(value)
    fmt = _element_formatter(shape.element_type)
    if array.ndim == 0:
        return fmt(array[()])
    return _format_nested(array, fmt, _row_formatter(shape.element_type, array))


def _format_nested(array: np.ndarray, fmt, row=None) -> str:
    if array.ndim == 1:
        texts = row(array) if row is not None else [fmt(v) for v in array]
        return "{" + ", ".join(texts) + "}"
    if array.shape[0] == 0:
        return "{}"
    # XLA spaces the braces of multi-dimensional literals: { {1, 2}, {3, 4} }.
    return "{ " + ", ".join(_format_nested(sub, fmt, row) for sub in array) + " }"


def _row_formatter(element_type: str, array: np.ndarray):
    """The texts of a 1-D row at once, for predicates and wide integers (what `fmt` gives
    element by element): a causal mask pred[256,256] is 65536 elements, which printing
    the 12-layer GPT step's module (its compile key) formatted one call each."""
    dt = _dtype(element_type)
    if array.dtype != dt.numpy:
        return None
    if dt.is_pred:
        return lambda row: np.where(row, "true", "false").tolist()
    if dt.is_integer and array.dtype.kind in "iu":
        return lambda row: row.astype(str).tolist()
    return None


def _element_formatter(element_type: str):
    dt = _dtype(element_type)
    if dt.is_pred:
        return lambda v: "true" if v else "false"
    if dt.is_integer:
        return lambda v: str(int(v))
    if dt.is_complex:
        part = dt.numpy.type(0).real.dtype.type
        return lambda v: f"({format_float(part(v.real))}, {format_float(part(v.imag))})"
    if dt.is_narrow:
        return lambda v: _format_narrow(v, element_type)
    scalar = dt.numpy.type
    return lambda v: format_float(scalar(v))


def _format_narrow(value, element_type: str) -> str:
    """A bf16 or 8-bit float: the fewest digits that read back to the same value."""
    value = np.asarray(value, dtype=_dtype(element_type).numpy)
    with np.errstate(invalid="ignore"):
        wide = float(value.astype(np.float64))
    if math.isnan(wide):
        payload = nan_payload(value[()], element_type)
        bits = int(value.view(np.dtype(f"u{value.itemsize}")))
        sign = "-" if bits >> (value.itemsize * 8 - 1) else ""
        if element_type.endswith("fnuz") or element_type == "f8e8m0fnu":
            sign = ""                    # the one NaN; its sign bit is part of its encoding
        return f"{sign}nan" if payload is None else f"{sign}nan(0x{payload:x})"
    if not math.isfinite(wide) or wide == 0:
        return format_float(np.float64(wide))
    for digits in range(1, 18):
        text = f"{wide:.{digits}g}"
        if _rounded(float(text), element_type) == wide:
            return text
    return format_float(np.float64(wide))


def format_float(value: np.floating) -> str:
    """Shortest text that reads back to `value` in its own precision; a NaN with a
    payload other than the quiet NaN's prints it, as XLA does: `-nan(0x7f)`."""
    if np.isnan(value):
        sign = "-" if np.signbit(value) else ""
        element_type = {2: "f16", 4: "f32", 8: "f64"}.get(np.asarray(value).itemsize)
        payload = nan_payload(value, element_type) if element_type else None
        return f"{sign}nan" if payload is None else f"{sign}nan(0x{payload:x})"
    if np.isinf(value):
        return "-inf" if value < 0 else "inf"
    if value == 0:
        return "-0" if np.signbit(value) else "0"
    magnitude = abs(float(value))
    if 1e-4 <= magnitude < 1e16:
        return np.format_float_positional(value, unique=True, trim="-")
    return np.format_float_scientific(value, unique=True, trim="-")
