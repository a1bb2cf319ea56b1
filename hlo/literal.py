"""Constant literals: from the parsed text of `constant(...)` to numpy, and back.

The grammar hands over a literal as nested `LiteralList` / `LiteralTuple` nodes
whose leaves are number or word tokens (`1.5`, `-inf`, `nan`, `true`). An array
literal nests exactly `rank` lists deep, `{ {1, 2}, {3, 4} }` for `f32[2,2]`; a
scalar is a bare leaf; `{...}` marks a constant XLA elided (value None). Complex
elements are pairs `(re, im)`; a tuple-shaped constant is `( {..}, 3 )` and
becomes a tuple of arrays.

The nesting is checked against the shape before anything is allocated, so a
literal can never make the parser build an array larger than the text.

Printing is canonical: floats in the shortest text that reads back to the same
value in their own precision (`0.1` for f32, not `0.100000001`), `inf`, `-inf`,
`nan`, `-0`; integers plainly; pred as `true`/`false`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtypes import dtype as _dtype
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
    _collect_leaves(node, shape.dims, 0, leaves)
    values = _convert_leaves(leaves, shape.element_type)
    if shape.element_type == "bf16":
        values = round_to_bf16(values)
    return values.reshape(shape.dims)


def round_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), still as float32."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) \
        & np.uint32(0xFFFF0000)
    # NaN stays NaN (rounding could carry its payload into the exponent: inf).
    return np.where(np.isnan(values), values, rounded.view(np.float32)).astype(np.float32)


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
        values = [_complex_leaf(leaf) for leaf in leaves]
    elif dt.is_float:
        values = [_float_leaf(leaf, element_type) for leaf in leaves]
    elif dt.is_pred:
        values = [_pred_leaf(leaf) for leaf in leaves]
    else:
        info = np.iinfo(dt.numpy)
        values = [_int_leaf(leaf, element_type, info.min, info.max) for leaf in leaves]
    return np.array(values, dtype=dt.numpy)


def _leaf_text(leaf: Any) -> str:
    if isinstance(leaf, (LiteralList, LiteralTuple, Elided)):
        raise LiteralError("expected a number here", leaf.token)
    return str(leaf)


def _float_leaf(leaf: Any, element_type: str) -> float:
    text = _leaf_text(leaf)
    try:
        value = float(text)   # accepts inf, -inf, nan, -nan, -0, 1e+30
    except ValueError:
        raise LiteralError(f"{text!r} is not a {element_type} number", leaf) from None
    # Overflow to inf in a narrow type is a typo, not a value (e.g. 1e6 in f16).
    limit = float(np.finfo(_dtype(element_type).numpy).max) if element_type != "bf16" else 3.4e38
    if math.isfinite(value) and abs(value) > limit * (1 + 2 ** -10):
        raise LiteralError(f"{text} is out of range for {element_type}", leaf)
    return value


def _int_leaf(leaf: Any, element_type: str, lo: int, hi: int) -> int:
    text = _leaf_text(leaf)
    # Integers are plain decimal; Python's int() would also accept '1_000'.
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isdigit() or not digits.isascii() or len(digits) > 40:
        raise LiteralError(f"{text!r} is not a {element_type} integer", leaf)
    value = int(text)
    if not lo <= value <= hi:
        raise LiteralError(f"{text} is out of range for {element_type} [{lo}, {hi}]", leaf)
    return value


def _pred_leaf(leaf: Any) -> bool:
    text = _leaf_text(leaf)
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise LiteralError(f"{text!r} is not a pred value (true, false, 1 or 0)", leaf)


def _complex_leaf(leaf: Any) -> complex:
    if not isinstance(leaf, LiteralTuple) or len(leaf.items) != 2:
        raise LiteralError("a complex element is written (real, imag)", _token_of(leaf))
    real, imag = (_float_leaf(item, "f64") for item in leaf.items)
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
    return _format_nested(array, fmt)


def _format_nested(array: np.ndarray, fmt) -> str:
    if array.ndim == 1:
        return "{" + ", ".join(fmt(v) for v in array) + "}"
    if array.shape[0] == 0:
        return "{}"
    # XLA spaces the braces of multi-dimensional literals: { {1, 2}, {3, 4} }.
    return "{ " + ", ".join(_format_nested(sub, fmt) for sub in array) + " }"


def _element_formatter(element_type: str):
    dt = _dtype(element_type)
    if dt.is_pred:
        return lambda v: "true" if v else "false"
    if dt.is_integer:
        return lambda v: str(int(v))
    if dt.is_complex:
        part = dt.numpy.type(0).real.dtype.type
        return lambda v: f"({format_float(part(v.real))}, {format_float(part(v.imag))})"
    if element_type == "bf16":
        return _format_bf16
    scalar = dt.numpy.type
    return lambda v: format_float(scalar(v))


def _format_bf16(value) -> str:
    """bf16 values live in float32; print the fewest digits that round back to them."""
    value = np.float32(value)
    if not np.isfinite(value) or value == 0:
        return format_float(value)
    for digits in range(1, 10):
        text = f"{float(value):.{digits}g}"
        if round_to_bf16(np.array([float(text)], dtype=np.float32))[0] == value:
            return text
    return format_float(value)


def format_float(value: np.floating) -> str:
    """Shortest text that reads back to `value` in its own precision."""
    if np.isnan(value):
        return "-nan" if np.signbit(value) else "nan"
    if np.isinf(value):
        return "-inf" if value < 0 else "inf"
    if value == 0:
        return "-0" if np.signbit(value) else "0"
    magnitude = abs(float(value))
    if 1e-4 <= magnitude < 1e16:
        return np.format_float_positional(value, unique=True, trim="-")
    return np.format_float_scientific(value, unique=True, trim="-")
