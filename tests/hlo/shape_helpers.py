"""Small helpers for the shape-inference, verifier and builder tests: shapes from
text and called computations built with the HloBuilder."""
from __future__ import annotations

import re

from xlapy.hlo import HloBuilder, Shape
from xlapy.hlo.builder import make_window  # noqa: F401  (re-exported for the tests)

_ARRAY = re.compile(r"^([a-z0-9]+)\[([0-9,]*)\]$")


def S(text: str) -> Shape:
    """`S("f32[4,5]")` -> Shape("f32", (4, 5)); `S("(f32[], s32[2])")` -> a tuple shape."""
    text = text.strip()
    if text == "token[]":
        return Shape("token")
    if text.startswith("("):
        inner = text[1:-1].strip()
        parts, depth, start = [], 0, 0
        for i, c in enumerate(inner):
            depth += c == "("
            depth -= c == ")"
            if c == "," and depth == 0 and inner[start:i].count("[") == inner[start:i].count("]"):
                parts.append(inner[start:i])
                start = i + 1
        if inner:
            parts.append(inner[start:])
        return Shape.tuple_of(S(p) for p in parts)
    m = _ARRAY.match(text)
    assert m, f"bad shape text {text!r}"
    dims = tuple(int(d) for d in m[2].split(",")) if m[2] else ()
    return Shape(m[1], dims)


def scalar_fn(opcode: str, arg_types, name: str = "fn"):
    """A computation of scalar parameters whose root is `opcode` over them.

    scalar_fn("add", ["f32", "f32"]) is an f32 adder; scalar_fn("compare", ...)
    compares the first two parameters with LT (a sort comparator or select).
    """
    b = HloBuilder(name)
    params = [b.parameter(Shape.scalar(t)) for t in arg_types]
    if opcode == "compare":
        return b.build(b.compare(params[0], params[1], "LT"))
    return b.build(b.op(opcode, params))


def argmax_reducer(value_type: str = "f32", index_type: str = "s64"):
    """(v_acc, i_acc, v, i) -> (max v, its index): a variadic reducer."""
    b = HloBuilder("argmax")
    va, ia, v, i = (b.parameter(Shape.scalar(t))
                    for t in (value_type, index_type, value_type, index_type))
    take = b.compare(va, v, "GE")
    return b.build(b.tuple([b.select(take, va, v), b.select(take, ia, i)]))


def identity_fn(shape: Shape, name: str = "ident"):
    """(x: shape) -> x."""
    b = HloBuilder(name)
    return b.build(b.parameter(shape))


def unary_fn(shape: Shape, opcode: str, name: str = "fn"):
    """(x: shape) -> opcode(x)."""
    b = HloBuilder(name)
    return b.build(b.op(opcode, [b.parameter(shape)]))


def const_fn(param: Shape, value, dtype: str, name: str = "const"):
    """(x: param) -> constant(value) of dtype: e.g. a loop condition returning pred[]."""
    b = HloBuilder(name)
    b.parameter(param)
    return b.build(b.constant(value, dtype))
