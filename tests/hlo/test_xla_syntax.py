"""HLO text that XLA's parser reads, written the way XLA's hlo_parser_test.cc writes it:
a table of modules that must parse, verify and print back (printing is stable: the
canonical text parses to a module that prints the same), a table of canonical texts
that print back exactly, and a table of texts that must fail with a given message.
"""
import numpy as np
import pytest

from xlapy.hlo import ParseError, parse_module, print_module, verify

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

# (id, text): must parse, verify and print back stably.
ACCEPTED = [
    ("slash_slash_comments", """HloModule slash_slash_comment:
// Garbage
ENTRY c1 {
  // Foo bar
  ROOT const1 = f32[1]{0} constant({12345}) // Something else
}"""),
    ("slash_slash_comment_crlf",
     "HloModule m:\r\n// Garbage\r\nENTRY c1 {\r\n// Foo bar\r\n"
     "ROOT const1 = f32[1]{0} constant({12345}) // Something else\r\n}"),
    ("block_comments", """/* module description. */
HloModule comments:

ENTRY /*comment*/ c1 {
  /* blah */
  ROOT const1 = /*foo*/f32[1]{0} constant({12345 /*bar*/})
  /* comment */
}

/* something else */
"""),
    ("no_header", """c1 {
  const1 = f32[1]{0} constant({12345})
}
c2 {
  const2 = f32[1]{0} constant({67890})
}"""),
    ("legacy_header_no_entry", """HloModule no_entry:
c1 {
  const1 = f32[1]{0} constant({12345})
}
c2 {
  const2 = f32[1]{0} constant({67890})
}"""),
    ("names_scoped_per_computation", """HloModule m
add {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT s = f32[] add(p0, p1)
}
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[] parameter(1)
  ROOT s = f32[] reduce(p0, p1), dimensions={0}, to_apply=add
}"""),
    ("operands_without_shapes", """HloModule m
ENTRY e {
  t = (f32[2], s32[]) parameter(0)
  a = f32[2] get-tuple-element(t), index=0
  ROOT n = f32[2] add(a, a)
}"""),
    ("operands_with_shapes", """HloModule m
ENTRY e {
  t = (f32[2], s32[]) parameter(0)
  a = f32[2]{0} get-tuple-element((f32[2]{0}, s32[]) t), index=0
  ROOT n = f32[2]{0} add(f32[2]{0} a, f32[2] a)
}"""),
    ("nested_instruction_operands", """HloModule m
""" + ADD + """ENTRY e {
  x = f32[4] parameter(0)
  ROOT r = f32[] reduce(x, f32[] constant(0)), dimensions={0}, to_apply=add
}"""),
    ("nested_twice", """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  constant = f32[] constant(2)
  ROOT r = f32[4] multiply(x, f32[4] broadcast(f32[] negate(f32[] constant(3))))
}"""),
    ("computation_attributes", """HloModule m
%f (x: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0)
  ROOT %n = f32[2]{0} negate(f32[2]{0} %x)
}, execution_thread="aux"

ENTRY %e (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  ROOT %c = f32[2]{0} call(f32[2]{0} %p), to_apply=%f
}"""),
    ("result_layout_in_signature", """HloModule m
ENTRY %e (p: f32[2,3]) -> f32[2,3]{0,1} {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %c = f32[2,3]{0,1} copy(%p)
}"""),
    ("tuple_result_layout_in_signature", """HloModule m
ENTRY %e (p: f32[2,3]) -> (f32[2,3]{0,1}, f32[]) {
  %p = f32[2,3]{1,0} parameter(0)
  %c = f32[2,3]{0,1} copy(%p)
  %z = f32[] constant(0)
  ROOT %t = (f32[2,3]{0,1}, f32[]) tuple(%c, %z)
}"""),
    ("inline_to_apply", """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[] reduce(p0, c), dimensions={0}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] add(a, b)
  }
}"""),
    ("omitted_empty_window", """HloModule m
""" + ADD + """ENTRY e {
  p = f32[] parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[] reduce-window(p, c), to_apply=add
}"""),
    ("omitted_empty_window_convolution", """HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  w = f32[3,4] parameter(1)
  ROOT c = f32[2,4] convolution(x, w), dim_labels=bf_io->bf
}"""),
    ("outfeed_shape_and_literal_attributes", """HloModule m
ENTRY e {
  p = (u32[3]{0}, pred[]) parameter(0)
  ROOT o = s32[2] custom-call(p), custom_call_target="x", outfeed_shape=(u32[3]{0}, pred[]), literal=s32[2]{0} {1, 2}
}"""),
    ("literal_attribute_without_layout", """HloModule m
ENTRY e {
  ROOT o = s32[2] custom-call(), custom_call_target="x", literal=s32[2] {1, 2}
}"""),
    ("operand_layout_constraints", """HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3] parameter(1)
  ROOT o = f32[2] custom-call(a, b), custom_call_target="x", operand_layout_constraints={f32[2,3]{0,1}, f32[3]{0}}
}"""),
    ("nan_payloads", """HloModule NanPayload_module
ENTRY %NanPayload () -> bf16[2] {
  ROOT %constant = bf16[2]{0} constant({-nan(0x7f), -nan(0x3f)})
}"""),
    ("u64_minus_one", """HloModule m
ENTRY e {
  ROOT c = u64[] constant(-1)
}"""),
    ("u64_above_s64", """HloModule m
ENTRY e {
  ROOT c = u64[] constant(9223372036854775808)
}"""),
    ("f16_rounds_down_to_max", """HloModule m
ENTRY e {
  ROOT c = f16[] constant(-65505)
}"""),
    ("bf16_above_f16_max", """HloModule m
ENTRY e {
  ROOT c = bf16[] constant(-65505)
}"""),
    ("dynamic_dims", """HloModule m
ENTRY e {
  p = f32[<=1801] parameter(0)
  q = f32[?,4] parameter(1)
  ROOT t = (f32[<=1801], f32[?,4]) tuple(p, q)
}"""),
    ("full_layouts", """HloModule m
ENTRY e {
  p = f32[8,128]{1,0:T(8,128)(2,1)S(1)E(32)} parameter(0)
  ROOT n = f32[8,128]{0,1:T(8,128)L(1024)} negate(p)
}"""),
    ("scalar_memory_space", """HloModule m
ENTRY e {
  p = f32[]{:S(1)} parameter(0)
  ROOT n = f32[] negate(p)
}"""),
]


@pytest.mark.parametrize("text", [t for _, t in ACCEPTED], ids=[i for i, _ in ACCEPTED])
def test_accepted_texts_parse_verify_and_print_back(text):
    module = parse_module(text)
    verify(module)
    printed = print_module(module)
    again = parse_module(printed)
    verify(again)
    assert print_module(again) == printed


# (id, canonical text): prints back exactly as written.
EXACT = [
    ("layouts_kept", """HloModule m

ENTRY %e (p: f32[8,128], q: f32[2,3]) -> f32[8,128] {
  %p = f32[8,128]{1,0:T(8,128)(2,1)S(1)E(32)} parameter(0)
  %q = f32[2,3]{0,1:T(2,*)(4)S(2)} parameter(1)
  ROOT %n = f32[8,128]{0,1:T(8,128)} negate(%p)
}
"""),
    ("dynamic_dims_kept", """HloModule m

ENTRY %e (p: f32[<=1801], q: f32[?,4]) -> (f32[<=1801], f32[?,4]) {
  %p = f32[<=1801]{0} parameter(0)
  %q = f32[?,4]{1,0} parameter(1)
  ROOT %t = (f32[<=1801]{0}, f32[?,4]{1,0}) tuple(%p, %q)
}
"""),
    ("nan_payloads_kept", """HloModule m

ENTRY %e () -> (bf16[2], f32[3], f16[2], f64[2]) {
  %b = bf16[2]{0} constant({-nan(0x7f), -nan(0x3f)})
  %f = f32[3]{0} constant({nan(0x1), -nan, nan})
  %h = f16[2]{0} constant({nan(0x3ff), -nan(0x1)})
  %d = f64[2]{0} constant({nan(0x8000000000001), -nan(0x1)})
  ROOT %t = (bf16[2]{0}, f32[3]{0}, f16[2]{0}, f64[2]{0}) tuple(%b, %f, %h, %d)
}
"""),
    ("computation_attribute_kept", """HloModule m

%f (x: f32[2]) -> f32[2] {
  ROOT %x = f32[2]{0} parameter(0)
}, execution_thread="aux"

ENTRY %e (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  ROOT %c = f32[2]{0} call(%p), to_apply=%f
}
"""),
]


@pytest.mark.parametrize("text", [t for _, t in EXACT], ids=[i for i, _ in EXACT])
def test_canonical_texts_print_back_exactly(text):
    assert print_module(parse_module(text)) == text


def test_no_entry_runs_the_last_computation_and_names_the_module_after_it():
    module = parse_module(dict(ACCEPTED)["no_header"])
    assert module.entry.name == "c2"
    assert module.name == "module_c2"
    assert parse_module(dict(ACCEPTED)["legacy_header_no_entry"]).name == "no_entry"


def test_names_scoped_per_computation_are_renamed_apart():
    module = parse_module(dict(ACCEPTED)["names_scoped_per_computation"])
    names = [i.name for i in module.instructions()]
    assert len(names) == len(set(names))
    assert [p.name for p in module.computation("add").parameters] == ["p0", "p1"]
    assert [p.name for p in module.entry.parameters] == ["p0.1", "p1.1"]


def test_nested_instructions_become_instructions_before_their_user():
    module = parse_module(dict(ACCEPTED)["nested_twice"])
    opcodes = [i.opcode for i in module.entry.instructions]
    assert opcodes == ["parameter", "constant", "constant", "negate", "broadcast", "multiply"]
    names = [i.name for i in module.entry.instructions]
    assert names[1] == "constant" and names[2] == "constant.1"   # the text's name stays


def test_inline_computation_becomes_a_computation():
    module = parse_module(dict(ACCEPTED)["inline_to_apply"])
    reducer = module.entry.root.attrs["to_apply"]
    assert reducer.name == "r.to_apply"
    assert reducer in module.computations and reducer.root.opcode == "add"


def test_attribute_values_that_are_shapes_and_literals():
    module = parse_module(dict(ACCEPTED)["outfeed_shape_and_literal_attributes"])
    attrs = module.entry.root.attrs
    assert attrs["outfeed_shape"].to_text() == "(u32[3]{0}, pred[])"
    assert attrs["literal"].shape.dims == (2,)
    np.testing.assert_array_equal(attrs["literal"].value, [1, 2])


def test_layout_details_do_not_change_the_order():
    from xlapy.hlo import layout
    shape = parse_module(dict(ACCEPTED)["full_layouts"]).entry.parameters[0].shape
    assert shape.minor_to_major() == (1, 0)
    assert layout.tiles(shape.layout_extra) == ((8, 128), (2, 1))
    assert layout.memory_space(shape.layout_extra) == 1
    assert layout.element_size_bits(shape.layout_extra) == 32


def test_constant_values():
    def value(text):
        return parse_module(f"HloModule m\nENTRY e {{\n  ROOT c = {text}\n}}").entry.root.literal
    assert value("u64[] constant(-1)") == np.uint64(2 ** 64 - 1)
    assert value("f16[] constant(-65505)") == np.float16(-65504)
    bits = value("f32[2] constant({-nan(0x7f), nan})").view(np.uint32)
    assert list(bits) == [0xFF80007F, 0x7FC00000]


GOOD = """HloModule m
""" + ADD + """ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
}"""


def edit(old, new):
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


# (id, text, a fragment of the message): must fail to parse.
REJECTED = [
    ("f16_overflow", edit("constant(0)", "constant(-65520)").replace("z = f32[]", "z = f16[]"),
     "out of range for literal's primitive type F16"),
    ("f64_overflow", edit("z = f32[] constant(0)", "z = f64[] constant(1.8e308)"),
     "out of range for literal's primitive type F64"),
    ("f64_underflow", edit("z = f32[] constant(0)", "z = f64[] constant(-1.8e308)"),
     "out of range for literal's primitive type F64"),
    ("f32_overflow", edit("constant(0)", "constant(3.5e38)"), "out of range"),
    ("bf16_overflow", edit("z = f32[] constant(0)", "z = bf16[] constant(1e100)"), "out of range"),
    ("c64_overflow", edit("z = f32[] constant(0)", "z = c64[] constant((1e100, 0))"),
     "out of range"),
    ("u32_overflow", edit("z = f32[] constant(0)", "z = u32[] constant(4294967296)"),
     "out of range for literal's primitive type U32"),
    ("u32_negative", edit("z = f32[] constant(0)", "z = u32[] constant(-1)"),
     "out of range for literal's primitive type U32"),
    ("u64_below_s64", edit("z = f32[] constant(0)", "z = u64[] constant(-9223372036854775809)"),
     "out of range for literal's primitive type U64"),
    ("nan_payload_too_wide", edit("constant(0)", "constant(nan(0x800000))"),
     "does not fit the 23 significand bits"),
    ("nan_payload_zero", edit("constant(0)", "constant(nan(0x0))"), "is 0, which is infinity"),
    ("declared_operand_shape_disagrees", edit("reduce(p, z)", "reduce(f32[5] p, z)"),
     "operand 'p' is declared f32[5] here but defined as f32[4]"),
    ("declared_operand_type_disagrees", edit("reduce(p, z)", "reduce(p, s32[] z)"),
     "declared s32[] here but defined as f32[]"),
    ("signature_disagrees_with_root", edit("ENTRY e {", "ENTRY e (p: f32[4]) -> f32[2] {"),
     "declared to return f32[2] but its root 'r' is f32[]"),
    ("duplicate_name_in_one_computation", edit("z = f32[] constant(0)",
                                               "p = f32[] constant(0)"),
     "duplicate instruction name 'p' in computation 'e'"),
    ("operand_of_another_computation", edit("reduce(p, z)", "reduce(p, a)"),
     "operand 'a' is defined in another computation"),
    ("two_entries", edit("add {", "ENTRY add {"), "a second ENTRY"),
    ("bad_layout_item", edit("f32[4] parameter", "f32[4]{0:Q(1)} parameter"),
     "unknown layout item"),
    ("layout_item_twice", edit("f32[4] parameter", "f32[4]{0:S(1)S(2)} parameter"),
     "given twice"),
    ("bad_tile", edit("f32[4] parameter", "f32[4]{0:T(a)} parameter"), "a tile is a list"),
    ("layout_not_a_permutation", edit("f32[4] parameter", "f32[4]{1} parameter"),
     "not a permutation"),
    ("bad_dynamic_dim", edit("f32[4] parameter", "f32[<4] parameter"), "unexpected"),
    ("unterminated_inline_computation", edit("to_apply=add", "to_apply={ a = f32[] parameter(0)"),
     "unexpected"),
    ("bad_execution_thread", GOOD.replace("ROOT s = f32[] add(a, b)\n}",
                                          "ROOT s = f32[] add(a, b)\n}, execution_thread=main"),
     "execution_thread must be a quoted name"),
    ("misspelled_header", GOOD.replace("HloModule", "HloModul"), "expected 'HloModule'"),
]


@pytest.mark.parametrize("text,fragment", [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_rejected_texts(text, fragment):
    with pytest.raises(ParseError) as info:
        parse_module(text)
    assert fragment in info.value.message


def test_dynamic_shapes_verify_but_are_refused_by_whoever_computes():
    from xlapy.hlo import EvaluationError, VerifyError, check_static_shapes, evaluate
    for dims in ("<=4", "?"):
        module = parse_module(f"""HloModule m
ENTRY e {{
  p = f32[{dims}] parameter(0)
  ROOT n = f32[{dims}] negate(p)
}}""")
        verify(module)
        with pytest.raises(VerifyError, match=r"%p = f32\[.*dynamic dimensions"):
            check_static_shapes(module)
        with pytest.raises(EvaluationError, match="only static shapes"):
            evaluate(module, [np.zeros(4, np.float32)])
    check_static_shapes(parse_module(GOOD))


def test_branch_index_must_be_a_scalar():
    from xlapy.hlo import VerifyError
    text = """HloModule m
b0 {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
ENTRY e {
  i = s32[2] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x), branch_computations={b0, b0}
}"""
    with pytest.raises(VerifyError, match="branch selector"):
        verify(parse_module(text))


ALIAS_BODY = """
ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %q = f32[2] parameter(1)
  %p0 = f32[] get-tuple-element((f32[], f32[]) %p), index=0
  %p1 = f32[] get-tuple-element((f32[], f32[]) %p), index=1
  ROOT %out = (f32[], f32[], f32[2]) tuple(%p0, %p1, %q)
}
"""


def test_aliasing_is_structured():
    from xlapy.hlo.aliasing import Alias, Donor, aliases_of, donors_of
    module = parse_module("HloModule Module, input_output_alias={ {0}: (0, {0}, must-alias), "
                          "{1}: (0, {1}) }, buffer_donor={ (1, {}) }" + ALIAS_BODY)
    assert aliases_of(module) == (Alias((0,), 0, (0,), True), Alias((1,), 0, (1,), False))
    assert donors_of(module) == (Donor(1, ()),)
    assert print_module(parse_module(print_module(module))) == print_module(module)


@pytest.mark.parametrize("header,fragment", [
    ("input_output_alias={ {0 : (0, {0}), {1}: (0, {1}) }", "unexpected end of file"),
    ("input_output_alias={ {0, a}: (0, {0}) }", "cannot read"),
    ("input_output_alias={ {0}: (0, {0}, maybe) }", "cannot read"),
    ("input_output_alias={ {0}: (2, {0}) }", "the entry has 2 parameters"),
    ("input_output_alias={ {3}: (0, {0}) }", "does not name an element"),
    ("input_output_alias={ {0}: (0, {5}) }", "does not name an element"),
    ("input_output_alias={ {0}: (0, {}) }", "names a tuple"),
    ("input_output_alias={ {0}: (1, {}) }", "differ in shape"),
    ("input_output_alias={ {0}: (0, {0}), {0}: (0, {1}) }", "aliased twice"),
    ("input_output_alias={ {0}: (0, {0}), {1}: (0, {0}) }", "aliased twice"),
    ("buffer_donor={ (0, {0}), (0, {0}) }", "already donated"),
    ("input_output_alias={ {0}: (0, {0}) }, buffer_donor={ (0, {0}) }", "already aliased"),
    ("buffer_donor={ (3, {}) }", "the entry has 2 parameters"),
    ("buffer_donor={ (0, {}) (1, {}) }", "expected ','"),
])
def test_aliasing_rejected(header, fragment):
    with pytest.raises(ParseError) as info:
        parse_module(f"HloModule Module, {header}" + ALIAS_BODY)
    assert fragment in info.value.message
    if "end of file" not in fragment:
        assert info.value.line == 1


# --- property: what the printer writes, the parser reads back to the same text ---------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.hlo_strategies import hlo_modules  # noqa: E402

LAYOUT_EXTRAS = ("", "S(1)", "T(2,128)(2,1)", "T(8)L(64)E(16)", "T(2,*)(4)S(2)")


@st.composite
def modules_with_new_syntax(draw):
    """A generated module whose shapes carry layout details and dynamic dimensions,
    whose reducers may be spelled inline and whose text carries comments."""
    from xlapy.hlo.shape import Shape
    module = draw(hlo_modules())
    for instr in module.instructions():
        shape = instr.shape
        if shape.is_tuple or not shape.dims or not draw(st.booleans()):
            continue
        dynamic = tuple(draw(st.booleans()) for _ in shape.dims)
        instr.shape = Shape(shape.element_type, shape.dims, shape.minor_to_major(),
                            dynamic=dynamic, layout_extra=draw(st.sampled_from(LAYOUT_EXTRAS)))
    if draw(st.booleans()):
        module.entry.attrs["execution_thread"] = "main"
    return module


def _with_comments(text: str, draw) -> str:
    lines = text.split("\n")
    out = []
    for line in lines:
        out.append(line + (" // note" if line.strip() and draw(st.booleans()) else ""))
        if draw(st.booleans()):
            out.append("  // a comment line")
    return "\n".join(out)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(modules_with_new_syntax(), st.data())
def test_print_parse_print_is_stable_with_the_new_syntax(module, data):
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text
    # Comments anywhere a line ends change nothing; neither does leaving out the header.
    assert print_module(parse_module(_with_comments(text, data.draw))) == text
    headerless = text.split("\n", 1)[1]
    if "entry_computation_layout" not in text.split("\n", 1)[0]:
        renamed = print_module(parse_module(headerless))
        assert renamed.split("\n", 1)[1] == headerless
