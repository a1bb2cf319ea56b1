"""Instruction attributes: from their text (`dimensions={1,0}`) to the Python form
hlo/ir.py documents, and back.

The grammar keeps every attribute value as source text. `decode_attribute`
turns the value of a known attribute into its structured form and raises
`AttributeValueError` when that text is malformed; any attribute it does not
know stays a `RawAttr` and prints back verbatim. `encode_attribute` is the
inverse and always produces the canonical spelling, so that
`decode(encode(v)) == v` — the property the printer's round trip rests on.

Called computations decode to their names here; the parser swaps the names
for `HloComputation` objects once the whole module has been read.

Some checks need more than the text of one attribute and are functions the
parser (and the verifier) call with the instruction's shapes:
`check_origin(value, shape)` (an `origin=` tree fits the result shape) and
`layout_constraints_problem(constraints, operand_shapes)` (a custom-call's
`operand_layout_constraints` has one shape per operand, each the operand's shape
with a layout).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from .ir import LiteralAttr, PadDim, RawAttr, ReplicaGroups, SliceDim, Window, WindowDim
from .literal import format_literal
from .shape import Shape
from .opcodes import CALLED_COMPUTATION_ATTRS, CALLED_COMPUTATION_LIST_ATTRS, OPCODES
from .replica_groups import parse_replica_groups
from .sharding import HloSharding, ShardingError, parse_sharding


class AttributeValueError(ValueError):
    """The text of a known attribute does not have the form that attribute needs."""


INT_LIST_ATTRS = frozenset({
    "dimensions", "dynamic_slice_sizes", "slice_sizes",
    "lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims",
    "offset_dims", "collapsed_slice_dims", "start_index_map",
    "operand_batching_dims", "start_indices_batching_dims",
    "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
    "input_batching_dims", "scatter_indices_batching_dims",
    "fft_length", "lhs_ragged_dims", "rhs_group_dims", "shifts",
})
INT_ATTRS = frozenset({"index", "iota_dimension", "index_vector_dim",
                       "feature_group_count", "batch_group_count", "channel_id",
                       "exponent_bits", "mantissa_bits", "k", "feature_index",
                       "num_carries"})
BOOL_ATTRS = frozenset({"is_stable", "indices_are_sorted", "unique_indices",
                        "use_global_device_ids", "constrain_layout",
                        "largest", "left_side", "lower", "unit_diagonal", "is_reverse"})
ENUM_ATTRS = {
    "direction": ("EQ", "NE", "LT", "LE", "GT", "GE"),
    "type": ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"),
    "kind": ("kLoop", "kInput", "kOutput", "kCustom"),
    "algorithm": ("rng_default", "rng_three_fry", "rng_philox"),
    "distribution": ("rng_uniform", "rng_normal"),
    "fft_type": ("FFT", "IFFT", "RFFT", "IRFFT"),
    "transpose_a": ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"),
    "mode": ("rotate", "permute"),
}

# A dot's `algorithm=` (PrecisionConfig.Algorithm, lower case without ALG_): the operand
# types, the accumulation type and the passes of a split product (x3, x6, x9).
DOT_ALGORITHMS = ("unset", "dot_any_f8_any_f8_f32", "dot_any_f8_any_f8_f32_fast_accum",
                  "dot_f16_f16_f16", "dot_f16_f16_f32", "dot_bf16_bf16_bf16",
                  "dot_bf16_bf16_f32", "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6",
                  "dot_bf16_bf16_f32_x9", "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3",
                  "dot_f32_f32_f32", "dot_f64_f64_f64")

_INT = r"-?[0-9]+"
_INT_LIST_RE = re.compile(rf"\{{\s*(?:{_INT}\s*(?:,\s*{_INT}\s*)*)?\}}")
_DIM_LABELS_RE = re.compile(r"[0-9a-z?]+_[0-9a-z?]+->[0-9a-z?]+")   # XLA writes ? for an unused slot
_NAME_RE = re.compile(r"%?[A-Za-z_][A-Za-z0-9_.\-]*")
_SLICE_DIM_RE = re.compile(rf"\[\s*({_INT})\s*:\s*({_INT})\s*(?::\s*({_INT})\s*)?\]")
_SLICE_RE = re.compile(rf"\{{\s*(?:{_SLICE_DIM_RE.pattern}\s*(?:,\s*{_SLICE_DIM_RE.pattern}\s*)*)?\}}")
_PAD_DIM_RE = re.compile(rf"({_INT})_({_INT})(?:_({_INT}))?")


# --- decoding ---------------------------------------------------------------------

def decode_attribute(key: str, text: str, opcode: str | None = None) -> Any:
    """The structured value of attribute `key` written as `text` (on an instruction of
    `opcode`, for the keys whose meaning depends on it); RawAttr if unknown."""
    if key == "algorithm" and opcode == "dot":
        if text not in DOT_ALGORITHMS:
            raise AttributeValueError(f"a dot's algorithm must be one of "
                                      f"{', '.join(DOT_ALGORITHMS)}, got {text!r}")
        return text
    if key == "slice_sizes" and opcode in ("collective-permute", "collective-permute-start"):
        return _decode_int_list_list(key, text)
    if key in INT_LIST_ATTRS:
        return _decode_int_list(key, text)
    if key in INT_ATTRS:
        if not re.fullmatch(_INT, text):
            raise AttributeValueError(f"{key} must be an integer, got {text!r}")
        return int(text)
    if key in BOOL_ATTRS:
        if text not in ("true", "false"):
            raise AttributeValueError(f"{key} must be true or false, got {text!r}")
        return text == "true"
    if key in ENUM_ATTRS:
        if text not in ENUM_ATTRS[key]:
            raise AttributeValueError(f"{key} must be one of {', '.join(ENUM_ATTRS[key])}, "
                                      f"got {text!r}")
        return text
    if key in CALLED_COMPUTATION_ATTRS:
        return _decode_name(key, text)
    if key in CALLED_COMPUTATION_LIST_ATTRS:
        return _decode_name_list(key, text)
    decoder = _SPECIAL_DECODERS.get(key)
    if decoder is not None:
        return decoder(text)
    return RawAttr(text)


def _decode_int_list(key: str, text: str) -> tuple[int, ...]:
    if not _INT_LIST_RE.fullmatch(text):
        raise AttributeValueError(f"{key} must be a list of integers like {{1,0}}, got {text!r}")
    return tuple(int(v) for v in re.findall(_INT, text))


def _decode_int_list_list(key: str, text: str) -> tuple[tuple[int, ...], ...]:
    """`{{1,8,128},{1,8,128}}`: the in-place collective-permute's slice sizes, one list
    per (input offset, output offset) pair."""
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise AttributeValueError(f"{key} must be a list of integer lists like "
                                  f"{{{{1,8}},{{1,8}}}}, got {text!r}")
    groups = re.findall(r"\{[^{}]*\}", inner[1:-1])
    rest = re.sub(r"\{[^{}]*\}", "", inner[1:-1])
    if not groups or rest.replace(",", "").strip():
        raise AttributeValueError(f"{key} must be a list of integer lists like "
                                  f"{{{{1,8}},{{1,8}}}}, got {text!r}")
    return tuple(_decode_int_list(key, g) for g in groups)


def _decode_name(key: str, text: str) -> str:
    if not _NAME_RE.fullmatch(text):
        raise AttributeValueError(f"{key} must name a computation, got {text!r}")
    return text.lstrip("%")


def _decode_name_list(key: str, text: str) -> tuple[str, ...]:
    inner = _braces_content(key, text)
    names = [n.strip() for n in inner.split(",")] if inner.strip() else []
    for name in names:
        if not _NAME_RE.fullmatch(name):
            raise AttributeValueError(f"{key} must be a list of computation names, got {text!r}")
    return tuple(n.lstrip("%") for n in names)


def _braces_content(key: str, text: str) -> str:
    if not (text.startswith("{") and text.endswith("}")):
        raise AttributeValueError(f"{key} must be written in braces, got {text!r}")
    return text[1:-1]


def _decode_slice(text: str) -> tuple[SliceDim, ...]:
    if not _SLICE_RE.fullmatch(text):
        raise AttributeValueError(f"slice must look like {{[0:4], [1:9:2]}}, got {text!r}")
    return tuple(SliceDim(int(start), int(limit), int(stride) if stride else 1)
                 for start, limit, stride in _SLICE_DIM_RE.findall(text))


def _decode_padding(text: str) -> tuple[PadDim, ...]:
    if text == "{}":                      # a rank-0 pad (see _encode_padding)
        return ()
    dims = []
    for part in text.split("x"):
        m = _PAD_DIM_RE.fullmatch(part)
        if m is None:
            raise AttributeValueError(f"padding must look like 0_1x2_3 or 0_1_1x2_3_0, got {text!r}")
        low, high, interior = m.groups()
        dims.append(PadDim(int(low), int(high), int(interior) if interior else 0))
    return tuple(dims)


def _decode_window(text: str) -> Window:
    """`{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=2x2 rhs_reversal=0x1}`."""
    fields: dict[str, list[str]] = {}
    for item in _braces_content("window", text).split():
        key, eq, value = item.partition("=")
        if not eq or key not in _WINDOW_FIELDS or key in fields:
            raise AttributeValueError(f"window has a bad field {item!r}; expected "
                                      f"{', '.join(_WINDOW_FIELDS)} (each once)")
        fields[key] = value.split("x")
    if not fields:
        return Window(())
    if "size" not in fields:
        raise AttributeValueError(f"window needs size=, got {text!r}")
    rank = len(fields["size"])
    try:
        size = [int(v) for v in fields["size"]]
        stride = [int(v) for v in fields.get("stride", ["1"] * rank)]
        pads = [_decode_window_pad(v) for v in fields.get("pad", ["0_0"] * rank)]
        lhs = [int(v) for v in fields.get("lhs_dilate", ["1"] * rank)]
        rhs = [int(v) for v in fields.get("rhs_dilate", ["1"] * rank)]
        rev = [_decode_01(v) for v in fields.get("rhs_reversal", ["0"] * rank)]
    except ValueError:
        raise AttributeValueError(f"window fields must be numbers joined by 'x', got {text!r}") from None
    if any(len(f) != rank for f in (stride, pads, lhs, rhs, rev)):
        raise AttributeValueError(f"window fields disagree on the number of dimensions: {text!r}")
    return Window(tuple(
        WindowDim(size=size[i], stride=stride[i], pad_low=pads[i][0], pad_high=pads[i][1],
                  window_dilation=rhs[i], base_dilation=lhs[i], reversal=rev[i])
        for i in range(rank)))


_WINDOW_FIELDS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")


def _decode_window_pad(text: str) -> tuple[int, int]:
    m = re.fullmatch(rf"({_INT})_({_INT})", text)
    if m is None:
        raise ValueError(text)
    return int(m.group(1)), int(m.group(2))


def _decode_01(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


def _decode_dim_labels(text: str) -> str:
    if not _DIM_LABELS_RE.fullmatch(text):
        raise AttributeValueError(f"dim_labels must look like b01f_01io->b01f, got {text!r}")
    return text


_SPARSITY_RE = re.compile(r"([LR])\.(\d+)@(\d+):(\d+)")


def _decode_sparsity(text: str) -> tuple[tuple[str, int, int, int], ...]:
    """A sparse dot's descriptors, `L.1@2:4` or `L.1@2:4_R.0@2:4`: (side, dimension,
    n, m) -- n of every m elements along that operand dimension are stored."""
    parts = text.split("_")
    found = [_SPARSITY_RE.fullmatch(p) for p in parts]
    if not parts or not all(found):
        raise AttributeValueError(f"sparsity must look like L.1@2:4 (side, dimension, n:m), "
                                  f"got {text!r}")
    return tuple((f[1], int(f[2]), int(f[3]), int(f[4])) for f in found)


def encode_sparsity(value) -> str:
    return "_".join(f"{side}.{d}@{n}:{m}" for side, d, n, m in value)


def _decode_string(text: str) -> str:
    if not (len(text) >= 2 and text[0] == text[-1] == '"'):
        raise AttributeValueError(f"expected a quoted string, got {text!r}")
    try:
        return json.loads(text)
    except ValueError:
        raise AttributeValueError(f"bad string literal {text!r}") from None


def _decode_replica_groups(text: str) -> ReplicaGroups:
    try:
        return parse_replica_groups(text)
    except ValueError as e:
        raise AttributeValueError(str(e)) from None


def _decode_sharding(text: str) -> HloSharding:
    try:
        return parse_sharding(text)
    except ShardingError as e:
        raise AttributeValueError(str(e)) from None


_PAIR_RE = re.compile(rf"\{{\s*({_INT})\s*,\s*({_INT})\s*\}}")
_PAIRS_RE = re.compile(rf"\{{\s*(?:{_PAIR_RE.pattern}\s*(?:,\s*{_PAIR_RE.pattern}\s*)*)?\}}")


def _decode_source_target_pairs(text: str) -> tuple[tuple[int, int], ...]:
    if not _PAIRS_RE.fullmatch(text):
        raise AttributeValueError(f"source_target_pairs must look like {{{{0,1}},{{1,2}}}}, "
                                  f"got {text!r}")
    return tuple((int(a), int(b)) for a, b in _PAIR_RE.findall(text[1:-1]))


_SPECIAL_DECODERS: dict[str, Callable[[str], Any]] = {
    "replica_groups": _decode_replica_groups,
    "sharding": _decode_sharding,
    "source_target_pairs": _decode_source_target_pairs,
    "slice": _decode_slice,
    "padding": _decode_padding,
    "window": _decode_window,
    "dim_labels": _decode_dim_labels,
    "sparsity": lambda text: _decode_sparsity(text),
    "custom_call_target": _decode_string,
    "result_accuracy": lambda text: _decode_result_accuracy(text),
    "origin": lambda text: _decode_origin(text),
}


# --- result_accuracy --------------------------------------------------------------

def result_accuracy_opcodes() -> list[str]:
    """The ops XLA's parser takes result_accuracy on: the unary transcendental ones (an
    accuracy/speed trade-off; the opcode table's flag); anywhere else it is an
    unexpected attribute. A function: a row added later (docs/adding_an_op.md) counts."""
    return sorted(op for op, info in OPCODES.items() if info.transcendental and info.arity == 1)
_RESULT_ACCURACY_MODES = ("default", "highest")
_NUMBER = r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"


@dataclass(frozen=True)
class ResultAccuracy:
    """`result_accuracy={mode=highest}` or `{tolerance={atol=..,rtol=..,ulps=..}}`
    (mode None): how exact a transcendental op must be (xla_data.proto ResultAccuracy)."""
    mode: str | None = None
    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0

    def to_text(self) -> str:
        if self.mode is not None:
            return f"{{mode={self.mode}}}"
        return f"{{tolerance={{atol={self.atol!r},rtol={self.rtol!r},ulps={self.ulps}}}}}"


def _decode_result_accuracy(text: str) -> ResultAccuracy:
    usage = "result_accuracy must be {mode=default|highest} or {tolerance={atol=x,rtol=y,ulps=n}}"
    m = re.fullmatch(r"\{\s*([A-Za-z_]+)\s*=\s*(.*?)\s*\}", text, re.S)
    if m is None:
        raise AttributeValueError(f"{usage}, got {text!r}")
    key, value = m.groups()
    if key == "mode":
        if value.lower() not in _RESULT_ACCURACY_MODES:
            raise AttributeValueError(f"result_accuracy mode must be default or highest, "
                                      f"got {value!r}")
        return ResultAccuracy(mode=value.lower())
    if key != "tolerance":
        raise AttributeValueError(f"{usage}: unknown field {key!r}")
    inner = _braces_content("result_accuracy tolerance", value)
    fields: dict[str, str] = {}
    for item in (i.strip() for i in inner.split(",")) if inner.strip() else ():
        name, eq, number = (p.strip() for p in item.partition("="))
        if not eq or name not in ("atol", "rtol", "ulps") or name in fields:
            raise AttributeValueError(f"result_accuracy tolerance has a bad field {item!r}; "
                                      f"expected atol=, rtol=, ulps= (each at most once)")
        if not re.fullmatch(_NUMBER, number) or (name == "ulps" and not re.fullmatch(_INT, number)):
            kind = "an integer" if name == "ulps" else "a number"
            raise AttributeValueError(f"result_accuracy tolerance {name} must be {kind}, "
                                      f"got {number!r}")
        fields[name] = number
    atol, rtol = float(fields.get("atol", 0)), float(fields.get("rtol", 0))
    ulps = int(fields.get("ulps", 0))
    for name, v in (("atol", atol), ("rtol", rtol), ("ulps", ulps)):
        if not math.isfinite(v) or v < 0:
            raise AttributeValueError(f"result_accuracy tolerance {name} must be finite and "
                                      f"not negative, got {fields[name]}")
    return ResultAccuracy(None, atol, rtol, ulps)


# --- origin (the original value an instruction computes) ------------------------------

@dataclass(frozen=True)
class OriginalValue:
    """`origin={...}`: for each leaf of the result, the instruction (and index into its
    shape) of the unoptimized program it stands for. `tree` is a leaf `(name, index)`,
    None for an empty leaf `{}`, or a list-like tuple node `OriginTuple`; `synthetic`
    is XLA's `{[synthetic_call]}` (a value no original instruction computed)."""
    tree: Any = None
    synthetic: bool = False

    def to_text(self) -> str:
        return "{[synthetic_call]}" if self.synthetic else "{" + _origin_text(self.tree) + "}"


class OriginTuple(tuple):
    """A tuple node of an origin tree (a plain tuple is a leaf)."""


def _origin_text(node) -> str:
    if isinstance(node, OriginTuple):
        return "(" + ", ".join(_origin_text(n) for n in node) + ")"
    if node is None:
        return "{}"
    name, index = node
    suffix = " {" + ",".join(str(i) for i in index) + "}" if index else ""
    return "{" + json.dumps(name) + suffix + "}"


_ORIGIN_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(-?[0-9]+)|([{}(),])|(\[\s*synthetic_call\s*\])|(\S))')


def _decode_origin(text: str) -> OriginalValue:
    tokens = []
    pos = 0
    while pos < len(text):
        m = _ORIGIN_TOKEN.match(text, pos)
        if m is None:            # only trailing blanks are left
            break
        pos = m.end()
        string, number, punct, synthetic, other = m.groups()
        if other is not None:
            raise AttributeValueError(f"origin: unexpected {other!r} in {text!r}")
        tokens.append(("s", json.loads(string)) if string is not None else
                      ("i", int(number)) if number is not None else
                      ("synthetic", None) if synthetic is not None else (punct, None))
    at = [0]

    def peek():
        return tokens[at[0]][0] if at[0] < len(tokens) else "end"

    def take(kind):
        if peek() != kind:
            got = "the end" if peek() == "end" else repr(tokens[at[0]][1] if peek() in "si"
                                                            else peek())
            raise AttributeValueError(f"origin must look like {{{{\"name\"}}}} or "
                                      f"{{({{\"a\"}}, {{\"b\" {{1}}}})}}: expected "
                                      f"{kind!r}, got {got} in {text!r}")
        if kind == "end":
            return None
        at[0] += 1
        return tokens[at[0] - 1][1]

    def tree():
        if peek() == "(":
            take("(")
            children = []
            if peek() != ")":
                children.append(tree())
                while peek() == ",":
                    take(",")
                    children.append(tree())
            take(")")
            return OriginTuple(children)
        take("{")
        if peek() == "}":
            take("}")
            return None
        name = take("s")
        if peek() == ",":
            take(",")
        index = []
        if peek() == "{":
            take("{")
            while peek() == "i":
                index.append(take("i"))
                if peek() == ",":
                    take(",")
            take("}")
        take("}")
        return (name, tuple(index))

    take("{")
    if peek() == "synthetic":
        take("synthetic")
        value = OriginalValue(synthetic=True)
    else:
        value = OriginalValue(tree())
    take("}")
    take("end")
    return value


def check_origin(value: OriginalValue, shape: Shape) -> None:
    """Raises AttributeValueError unless every leaf of the origin tree sits at a
    position the result shape has (XLA keeps the tree as a ShapeTree of the shape)."""
    def walk(node, sub: Shape, where: str) -> None:
        if not isinstance(node, OriginTuple):
            return
        if not sub.is_tuple:
            raise AttributeValueError(f"origin has a tuple at {where} but the shape there "
                                      f"is {sub.to_text(with_layout=False)}")
        if len(node) > len(sub.tuple_shapes):
            raise AttributeValueError(f"origin has {len(node)} elements at {where} but the "
                                      f"shape there has {len(sub.tuple_shapes)}")
        for i, child in enumerate(node):
            walk(child, sub.tuple_shapes[i], f"{where[:-1]}{',' * (where != '{}')}{i}}}")
    if not value.synthetic:
        walk(value.tree, shape, "{}")


# --- custom-call operand_layout_constraints ------------------------------------------

def layout_constraints_problem(constraints, operand_shapes) -> str | None:
    """What is wrong with a custom-call's operand_layout_constraints (XLA's parser
    rule: one per operand, each compatible with, i.e. equal up to layout to, its
    operand's shape), or None."""
    if len(constraints) != len(operand_shapes):
        return (f"expected {len(operand_shapes)} operand layout constraints (one per "
                f"operand), {len(constraints)} given")
    for i, (c, s) in enumerate(zip(constraints, operand_shapes)):
        if c != s:                        # Shape equality ignores layouts
            return (f"operand layout constraint shape {c} for operand {i} is not compatible "
                    f"with operand shape {s}")
    return None


# --- encoding ---------------------------------------------------------------------

def _encode_literal(shape: Shape, value) -> str:
    """`s32[2]{0} {1, 2}`; a tuple as XLA prints it, each element with its shape:
    `( s32[2]{0} {1, 2}, f32[] 0.5 )`."""
    if shape.is_tuple:
        return "( " + ", ".join(_encode_literal(s, v)
                                for s, v in zip(shape.tuple_shapes, value)) + " )"
    return f"{shape.to_text()} {format_literal(value, shape)}"


def encode_attribute(key: str, value: Any) -> str:
    """The canonical text of an attribute value (the inverse of decode_attribute)."""
    if isinstance(value, RawAttr):
        return value.text
    if isinstance(value, ReplicaGroups):
        return value.text
    if isinstance(value, HloSharding):
        return value.to_text()
    if isinstance(value, (Shape, ResultAccuracy, OriginalValue)):
        return value.to_text()
    if isinstance(value, LiteralAttr):
        return _encode_literal(value.shape, value.value)
    if key == "operand_layout_constraints":
        return "{" + ", ".join(s.to_text() for s in value) + "}"
    if key == "execution_thread":
        return json.dumps(value)
    if key == "source_target_pairs":
        return "{" + ",".join(f"{{{int(a)},{int(b)}}}" for a, b in value) + "}"
    if key == "sparsity":
        return encode_sparsity(value)
    if key in CALLED_COMPUTATION_ATTRS:
        return "%" + value.name
    if key in CALLED_COMPUTATION_LIST_ATTRS:
        return "{" + ", ".join("%" + c.name for c in value) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if key in INT_LIST_ATTRS and value and isinstance(value[0], tuple):
        return "{" + ",".join("{" + ",".join(str(int(v)) for v in group) + "}"
                              for group in value) + "}"
    if key in INT_LIST_ATTRS:
        return "{" + ",".join(str(int(v)) for v in value) + "}"
    if key == "slice":
        return "{" + ", ".join(_encode_slice_dim(d) for d in value) + "}"
    if key == "padding":
        return _encode_padding(value)
    if key == "window":
        return _encode_window(value)
    if key == "custom_call_target":
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        return value
    raise TypeError(f"cannot print attribute {key}={value!r}")


def _encode_slice_dim(d: SliceDim) -> str:
    return f"[{d.start}:{d.limit}]" if d.stride == 1 else f"[{d.start}:{d.limit}:{d.stride}]"


def _encode_padding(dims) -> str:
    if not dims:
        return "{}"                       # rank 0: "padding=" alone would not parse back
    # Like XLA: the interior part is written for every dimension once any has one.
    if any(d.interior for d in dims):
        return "x".join(f"{d.low}_{d.high}_{d.interior}" for d in dims)
    return "x".join(f"{d.low}_{d.high}" for d in dims)


def _encode_window(window: Window) -> str:
    dims = window.dims
    if not dims:
        return "{}"

    def join(values):
        return "x".join(str(v) for v in values)

    # Fields left at their default for every dimension are omitted, as XLA does.
    parts = [f"size={join(d.size for d in dims)}"]
    if any(d.stride != 1 for d in dims):
        parts.append(f"stride={join(d.stride for d in dims)}")
    if any(d.pad_low or d.pad_high for d in dims):
        parts.append("pad=" + "x".join(f"{d.pad_low}_{d.pad_high}" for d in dims))
    if any(d.base_dilation != 1 for d in dims):
        parts.append(f"lhs_dilate={join(d.base_dilation for d in dims)}")
    if any(d.window_dilation != 1 for d in dims):
        parts.append(f"rhs_dilate={join(d.window_dilation for d in dims)}")
    if any(d.reversal for d in dims):
        parts.append(f"rhs_reversal={join(int(d.reversal) for d in dims)}")
    return "{" + " ".join(parts) + "}"
