"""The canonical printer: its exact format, literal spellings, and generated round trips."""
from textwrap import dedent

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from xlapy.hlo import (HloComputation, HloInstruction, HloModule, RawAttr, Shape, parse_module,
                 print_module)
from xlapy.hlo.literal import format_float
from xlapy.hlo.printer import print_computation, print_instruction
from tests.hlo.test_roundtrip_corpus import assert_modules_equal

SOURCE = dedent("""
    HloModule m, entry_computation_layout={(f32[4]{0})->f32[]}

    ENTRY main {
      p = f32[4]{0} parameter(0)
      z = f32[] constant(0)
      ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add, metadata={op_name="sum"}
    }

    add {
      x = f32[] parameter(0)
      y = f32[] parameter(1)
      ROOT s = f32[] add(x, y)
    }
    """)

EXPECTED = dedent("""\
    HloModule m, entry_computation_layout={(f32[4]{0})->f32[]}

    %add (x: f32[], y: f32[]) -> f32[] {
      %x = f32[] parameter(0)
      %y = f32[] parameter(1)
      ROOT %s = f32[] add(%x, %y)
    }

    ENTRY %main (p: f32[4]) -> f32[] {
      %p = f32[4]{0} parameter(0)
      %z = f32[] constant(0)
      ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add, metadata={op_name="sum"}
    }
    """)


def test_module_format_callees_first_entry_last():
    assert print_module(parse_module(SOURCE)) == EXPECTED


def test_print_without_metadata():
    text = print_module(parse_module(SOURCE), print_metadata=False)
    assert "metadata" not in text
    assert "to_apply=%add\n" in text


def test_print_instruction_and_computation_helpers():
    module = parse_module(SOURCE)
    root = module.entry.root
    assert print_instruction(root, print_metadata=False) == \
        "%r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add"
    assert print_computation(module.entry).startswith("ENTRY %main (p: f32[4]) -> f32[] {\n")
    assert print_computation(module.computation("add")).startswith("%add (x: f32[]")
    assert module.to_text() == EXPECTED


def test_parameters_print_in_number_order_in_the_signature():
    module = parse_module("HloModule m\nENTRY e {\n  b = s32[] parameter(1)\n"
                          "  a = f32[2] parameter(0)\n  ROOT t = (f32[2], s32[]) tuple(a, b)\n}\n")
    first = print_module(module).split("\n")[2]
    assert first == "ENTRY %e (a: f32[2], b: s32[]) -> (f32[2], s32[]) {"


def test_long_operand_lists_and_tuples_carry_index_comments():
    names = [f"p{i}" for i in range(7)]
    body = "".join(f"  {n} = f32[] parameter({i})\n" for i, n in enumerate(names))
    shape = "(" + ", ".join(["f32[]"] * 7) + ")"
    text = f"HloModule m\nENTRY e {{\n{body}  ROOT t = {shape} tuple({', '.join(names)})\n}}\n"
    printed = print_module(parse_module(text))
    assert "tuple(%p0, %p1, %p2, %p3, %p4, /*index=5*/%p5, %p6)" in printed
    assert "f32[], /*index=5*/f32[], f32[]) tuple(" in printed


def test_attribute_spellings_are_canonical():
    text = dedent("""
        HloModule m
        ENTRY e {
          p = f32[20,30] parameter(0)
          z = f32[] constant(0)
          s = f32[6,8] slice(p), slice={ [2:20:3],[0:8:1] }
          q = f32[30,33] pad(p, z), padding=1_-2_0x0_3_1
          w = f32[10,15] reduce-window(p, z), window={pad=0_1x0_0 size=3x2 stride=1x1}, to_apply=e2
          t = f32[30,20] transpose(p), dimensions={ 1 , 0 }
          ROOT c = f32[30,20] copy(t), control-predecessors={s, q}, unknown={ keep  as is }
        }
        e2 {
          a = f32[] parameter(0)
          b = f32[] parameter(1)
          ROOT m = f32[] maximum(a, b)
        }""")
    printed = print_module(parse_module(text))
    assert "slice={[2:20:3], [0:8]}" in printed
    assert "padding=1_-2_0x0_3_1" in printed
    assert "window={size=3x2 pad=0_1x0_0}" in printed
    assert "dimensions={1,0}" in printed
    assert "unknown={ keep  as is }, control-predecessors={%s, %q}" in printed


def test_layouts_print_when_known():
    module = parse_module("HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n"
                          "  ROOT n = f32[2,3] negate(p)\n}\n")
    printed = print_module(module)
    assert "%p = f32[2,3]{0,1} parameter(0)" in printed
    assert "ROOT %n = f32[2,3] negate(%p)" in printed


def const_text(shape: str, literal: str) -> str:
    module = parse_module(f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({literal})\n}}\n")
    line = print_module(module).split("\n")[3]
    return line[line.index("constant(") + len("constant("):-1]


@pytest.mark.parametrize("shape,literal,expected", [
    ("f32[]", "0.100000001", "0.1"),
    ("f32[]", "3.14159274", "3.1415927"),
    ("f64[]", "0.1", "0.1"),
    ("f16[]", "0.1", "0.1"),
    ("f32[]", "1e30", "1e+30"),
    ("f32[]", "-1e-30", "-1e-30"),
    ("f32[]", "65504.0", "65504"),
    ("f32[5]", "{inf, -inf, nan, -0, 0}", "{inf, -inf, nan, -0, 0}"),
    ("f32[]", "-nan", "-nan"),
    ("s64[]", "-9223372036854775808", "-9223372036854775808"),
    ("u8[3]", "{0, 128, 255}", "{0, 128, 255}"),
    ("pred[3]", "{1, 0, true}", "{true, false, true}"),
    ("pred[]", "false", "false"),
    ("f32[2,2]", "{{1,2},{3,4}}", "{ {1, 2}, {3, 4} }"),
    ("f32[2,0]", "{ {}, {} }", "{ {}, {} }"),
    ("f32[0,2]", "{}", "{}"),
    ("f32[1000,1000]", "{...}", "{...}"),
    ("c64[1]", "{(1, -2.5)}", "{(1, -2.5)}"),
    ("bf16[3]", "{0.1, 0.100097656, -3e38}", "{0.1, 0.1, -3e+38}"),
    ("(f32[2], s32[])", "({1, 2}, 3)", "({1, 2}, 3)"),
])
def test_literal_spellings(shape, literal, expected):
    assert const_text(shape, literal) == expected


@given(st.floats(width=32, allow_nan=False))
def test_f32_text_is_shortest_round_trip(value):
    x = np.float32(value)
    text = format_float(x)
    assert np.float32(float(text)) == x and np.signbit(np.float32(float(text))) == np.signbit(x)
    assert len(text.replace("-", "").replace("e+", "e")) <= len(repr(float(x)))


# --- generated modules ---------------------------------------------------------------

DTYPES = ["f32", "f64", "f16", "s32", "u8", "pred"]
UNARY = {"f": ["negate", "abs", "exponential", "tanh", "sqrt"], "i": ["negate", "abs", "not"],
         "b": ["not"]}
BINARY = {"f": ["add", "multiply", "maximum", "divide"], "i": ["add", "subtract", "and"],
          "b": ["and", "or", "xor"]}


def _family(element_type: str) -> str:
    return "b" if element_type == "pred" else "f" if element_type.startswith("f") else "i"


@st.composite
def generated_modules(draw):
    """A random chain of elementwise ops over one shape and dtype, with constants."""
    element_type = draw(st.sampled_from(DTYPES))
    dims = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    layout = draw(st.sampled_from([None, tuple(reversed(range(len(dims))))]))
    shape = Shape(element_type, dims, layout)
    np_dtype = shape.dtype.numpy
    comp = HloComputation("main")
    values = []
    for i in range(draw(st.integers(1, 3))):
        values.append(comp.add_instruction(HloInstruction(
            "parameter", shape, name=f"p{i}", parameter_number=i)))
    for i in range(draw(st.integers(0, 2))):
        literal = draw(hnp.arrays(np_dtype, dims))
        values.append(comp.add_instruction(HloInstruction(
            "constant", shape, name=f"c{i}", literal=literal)))
    family = _family(element_type)
    for i in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            op, operands = draw(st.sampled_from(UNARY[family])), [draw(st.sampled_from(values))]
        else:
            op = draw(st.sampled_from(BINARY[family]))
            operands = [draw(st.sampled_from(values)), draw(st.sampled_from(values))]
        attrs = {"metadata": RawAttr(f'{{op_name="gen/{op}"}}')} if draw(st.booleans()) else {}
        values.append(comp.add_instruction(HloInstruction(op, shape, operands, attrs,
                                                          name=f"{op}.{i}")))
    comp.root = values[-1]
    module = HloModule("generated")
    if draw(st.booleans()):
        comp.root = _add_reduction(module, comp, values[-1], draw(st.sampled_from(BINARY[family])))
    module.add_computation(comp, entry=True)
    return module


def _add_reduction(module, comp, value, op):
    """reduce(value, init) over every dimension with a `reducer` computation; returns
    the new root tuple(value, reduce)."""
    scalar = Shape(value.shape.element_type, ())
    reducer = HloComputation("reducer")
    a = reducer.add_instruction(HloInstruction("parameter", scalar, name="r.a", parameter_number=0))
    b = reducer.add_instruction(HloInstruction("parameter", scalar, name="r.b", parameter_number=1))
    reducer.root = reducer.add_instruction(HloInstruction(op, scalar, [a, b], name="r.op"))
    module.add_computation(reducer)
    init = comp.add_instruction(HloInstruction(
        "constant", scalar, name="init", literal=np.zeros((), scalar.dtype.numpy)))
    reduce = comp.add_instruction(HloInstruction(
        "reduce", scalar, [value, init], name="reduce",
        attrs={"dimensions": tuple(range(value.shape.rank)), "to_apply": reducer}))
    return comp.add_instruction(HloInstruction(
        "tuple", Shape.tuple_of([value.shape, scalar]), [value, reduce], name="out"))


@given(generated_modules())
def test_generated_modules_round_trip(module):
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text
    assert_modules_equal(module, again)


@pytest.mark.parametrize("element_type", ["pred", "s8", "s32", "s64", "u8", "u32", "u64"])
@pytest.mark.parametrize("dims", [(5,), (3, 4), (2, 0), (2, 3, 4)])
def test_rows_of_predicates_and_integers_print_as_elements_do(element_type, dims):
    """format_literal prints predicate and integer rows at once (literal._row_formatter):
    the same text as formatting each element, extremes included."""
    from xlapy.hlo import literal
    from xlapy.hlo.dtypes import dtype
    np_type = dtype(element_type).numpy
    rng = np.random.default_rng(len(dims))
    if element_type == "pred":
        a = rng.integers(0, 2, dims).astype(bool)
    else:
        info = np.iinfo(np_type)
        a = rng.integers(info.min, info.max, dims, dtype=np_type, endpoint=True)
        a.flat[:2] = [info.min, info.max][:a.size]
    fmt = literal._element_formatter(element_type)
    assert literal.format_literal(a, Shape(element_type, dims)) == literal._format_nested(a, fmt)
