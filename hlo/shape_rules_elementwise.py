"""Shape rules of elementwise ops: unary, binary, compare, select, clamp, conversions.

HLO has no implicit broadcasting: operands of an elementwise op have identical
dimensions (the frontend inserts explicit `broadcast`s). The exceptions XLA
keeps are a scalar predicate of `select` and scalar bounds of `clamp`.
"""
from __future__ import annotations

from .opcodes import OPCODES
from .shape import Shape
from .shape_rules_common import array, fail, need_hint, rule, same_type

FLOATS = ("float",)
FLOAT_OR_COMPLEX = ("float", "complex")
INTS = ("signed", "unsigned")
NUMERIC = ("signed", "unsigned", "float", "complex")

# Element kinds each unary op accepts; the default is any numeric type.
UNARY_KINDS = {
    "not": ("pred",) + INTS,
    "popcnt": INTS,
    "count-leading-zeros": INTS,
    "sign": ("signed", "float", "complex"),
    "negate": NUMERIC,
    "abs": ("signed", "float", "complex"),
    "is-finite": FLOATS,
    "floor": FLOATS, "ceil": FLOATS,
    "round-nearest-afz": FLOATS, "round-nearest-even": FLOATS,
    "real": FLOAT_OR_COMPLEX, "imag": FLOAT_OR_COMPLEX,
    "copy": None,                  # any array, and tuples too (copy of a tuple is legal)
}

BINARY_KINDS = {
    "and": ("pred",) + INTS, "or": ("pred",) + INTS, "xor": ("pred",) + INTS,
    "shift-left": INTS, "shift-right-arithmetic": INTS, "shift-right-logical": INTS,
    "complex": FLOATS,
    "atan2": FLOAT_OR_COMPLEX,
    "remainder": ("signed", "unsigned", "float"),
    "maximum": ("pred",) + NUMERIC, "minimum": ("pred",) + NUMERIC,
}

REAL_OF_COMPLEX = {"c64": "f32", "c128": "f64"}
COMPLEX_OF_REAL = {"f32": "c64", "f64": "c128"}


def _check_kind(opcode: str, shape: Shape, kinds) -> None:
    if kinds is not None and shape.dtype.kind not in kinds:
        fail(f"operand type {shape.element_type} not allowed (needs {' or '.join(kinds)})")


def _unary_kinds(opcode: str):
    if opcode in UNARY_KINDS:
        return UNARY_KINDS[opcode]
    return FLOAT_OR_COMPLEX if OPCODES[opcode].float_only else NUMERIC


UNARY_OPS = [n for n, info in OPCODES.items() if info.kind == "unary" or n == "sinh"]
BINARY_OPS = [n for n, info in OPCODES.items() if info.kind == "binary"]


@rule(*UNARY_OPS)
def unary_shape(opcode, shapes, attrs, hint):
    """Same dims; same type except is-finite -> pred, real/imag/abs of complex -> real."""
    (x,) = shapes
    if opcode == "copy" and x.is_tuple:
        return x
    array(x)
    _check_kind(opcode, x, _unary_kinds(opcode))
    if opcode == "is-finite":
        return x.with_element_type("pred")
    if opcode in ("real", "imag", "abs") and x.dtype.is_complex:
        return x.with_element_type(REAL_OF_COMPLEX[x.element_type])
    return x


def same_dims(a: Shape, b: Shape) -> None:
    if a.dims != b.dims:
        fail(f"operand shapes {a} and {b} differ")


@rule(*BINARY_OPS)
def binary_shape(opcode, shapes, attrs, hint):
    """Equal shapes in, the same shape out; complex(re, im) makes c64/c128."""
    a, b = (array(s) for s in shapes)
    same_dims(a, b)
    if a.element_type != b.element_type:
        fail(f"operand shapes {a} and {b} differ in element type")
    kinds = BINARY_KINDS.get(opcode, ("pred",) + NUMERIC)   # XLA leaves add & co. unrestricted
    _check_kind(opcode, a, kinds)
    if opcode == "complex":
        if a.element_type not in COMPLEX_OF_REAL:
            fail(f"operand type {a.element_type} has no complex counterpart")
        return a.with_element_type(COMPLEX_OF_REAL[a.element_type])
    return a


COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
# The comparison types that make sense for each element kind (XLA's rule).
COMPARISON_TYPES_OF_KIND = {
    "float": ("FLOAT", "TOTALORDER"), "complex": ("FLOAT", "TOTALORDER"),
    "signed": ("SIGNED",), "unsigned": ("UNSIGNED",), "pred": ("UNSIGNED",),
}


@rule("compare")
def compare_shape(opcode, shapes, attrs, hint):
    """Equal operand shapes -> pred of the same dims."""
    a, b = (array(s) for s in shapes)
    same_dims(a, b)
    same_type(a, b)
    direction = attrs.get("direction")
    if direction not in COMPARISON_DIRECTIONS:
        fail(f"direction must be one of {', '.join(COMPARISON_DIRECTIONS)}, got {direction!r}")
    ctype = attrs.get("type")
    if ctype is not None:
        allowed = COMPARISON_TYPES_OF_KIND[a.dtype.kind]
        if ctype not in allowed:
            fail(f"type={ctype} does not fit {a.element_type} operands (use {' or '.join(allowed)})")
    return a.with_element_type("pred")


@rule("select")
def select_shape(opcode, shapes, attrs, hint):
    """select(pred, on_true, on_false): pred has the operands' dims or is a scalar."""
    pred, t, f = (array(s) for s in shapes)
    if pred.element_type != "pred":
        fail(f"predicate must be pred, got {pred}")
    same_dims(t, f)
    same_type(t, f)
    if pred.dims and pred.dims != t.dims:
        fail(f"predicate {pred} does not match operands {t}")
    return t


@rule("clamp")
def clamp_shape(opcode, shapes, attrs, hint):
    """clamp(min, x, max): min and max have x's shape or are scalars."""
    lo, x, hi = (array(s) for s in shapes)
    for bound, what in ((lo, "min"), (hi, "max")):
        same_type(bound, x, f"{what} and operand element types")
        if bound.dims and bound.dims != x.dims:
            fail(f"{what} {bound} must be a scalar or match operand {x}")
    return x


@rule("convert")
def convert_shape(opcode, shapes, attrs, hint):
    """Same dims, the element type of the hint (the result type)."""
    (x,) = shapes
    array(x)
    hint = need_hint(hint, "the target element type")
    array(hint, "result")
    if hint.dims != x.dims:
        fail(f"result {hint} must keep the operand dims of {x}")
    return hint


@rule("bitcast-convert")
def bitcast_convert_shape(opcode, shapes, attrs, hint):
    """Reinterprets bits: equal widths keep dims; a narrower result adds a minor dim.

    f32[4] -> u32[4]; f32[4] -> u8[4,4] (one trailing dim of 32/8 = 4); u8[4,4] -> f32[4].
    """
    (x,) = shapes
    array(x)
    hint = need_hint(hint, "the target element type")
    array(hint, "result")
    src, dst = x.dtype.bits, hint.dtype.bits
    if src == dst:
        expected = x.dims
    elif src > dst:
        expected = x.dims + (src // dst,)
    else:
        if not x.dims or x.dims[-1] != dst // src:
            fail(f"operand {x} needs a minor dimension of {dst // src} to make {hint.element_type}")
        expected = x.dims[:-1]
    if hint.dims != expected:
        fail(f"result {hint} does not fit operand {x} (expected dims {list(expected)})")
    return hint
