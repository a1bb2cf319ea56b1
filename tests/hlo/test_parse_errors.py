"""Malformed HLO: each input gives a ParseError at the right place with a clear message."""
import pytest

from xlapy.hlo import ParseError, parse_module

GOOD = """HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  z = f32[] constant(0)
  r = f32[] reduce(p, z), dimensions={0}, to_apply=add
  ROOT e = f32[4] exponential(c)
}
"""


def edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


# (id, input, expected line, expected column, a fragment of the message)
CASES = [
    ("empty", "", 1, 1, "empty input"),
    ("whitespace only", "  \n\n", 1, 1, "empty input"),
    ("truncated", GOOD[:GOOD.index("constant({1")], 11, 13, "unexpected end of file"),
    ("missing closing brace", GOOD.rstrip()[:-1], 14, 33, "unexpected end of file"),
    ("unknown opcode", edit("exponential(c)", "exponentail(c)"), 14, 19,
     "unknown opcode 'exponentail' (did you mean 'exponential'"),
    ("missing =", edit("c = f32[4] constant", "c f32[4] constant"), 11, 5, "expected '='"),
    ("bad shape", edit("p = f32[4] parameter", "p = f32[4, parameter"), 10, 14,
     "expected an integer"),
    ("unknown dtype", edit("p = f32[4]", "p = f31[4]"), 10, 7,
     "unknown element type 'f31' (did you mean 'f32'?)"),
    ("undefined operand", edit("exponential(c)", "exponential(cc)"), 14, 31,
     "undefined operand 'cc'"),
    ("operand from another computation", edit("exponential(c)", "exponential(x)"), 14, 31,
     "defined in another computation"),
    ("duplicate instruction", edit("c = f32[4] constant", "p = f32[4] constant"), 11, 3,
     "duplicate instruction name 'p'"),
    ("duplicate computation", edit("ENTRY main", "add {\n  ROOT q = f32[] parameter(0)\n}\nENTRY main"),
     9, 1, "duplicate computation name 'add'"),
    ("bad attribute value", edit("dimensions={0}", "dimensions={a}"), 13, 38,
     "dimensions must be a list of integers"),
    ("bad enum value", edit("exponential(c)", "compare(c, c), direction=LESS"), 14, 44,
     "direction must be one of EQ"),
    ("unknown called computation", edit("to_apply=add", "to_apply=ad"), 13, 52,
     "unknown computation 'ad' (did you mean 'add'?)"),
    # The group runs on to the computation's closing brace, so the end of file is found open.
    ("unbalanced braces in attribute", edit("dimensions={0}", "dimensions={0"), 15, 2,
     "unexpected end of file"),
    ("invalid UTF-8", GOOD.encode().replace(b"main", b"ma\xffn"), 9, 9, "invalid UTF-8 byte 0xff"),
    ("two ENTRY", edit("add {", "ENTRY add {"), 9, 7, "second ENTRY"),
    ("two ROOTs", edit("z = f32[] constant(0)", "ROOT z = f32[] constant(0)"), 14, 8,
     "second ROOT"),
    ("empty computation", edit("add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                               "  ROOT s = f32[] add(x, y)\n}", "add {\n}"), 4, 1,
     "has no instructions"),
    ("huge dimension", edit("p = f32[4]", "p = f32[123456789012345678901234567890]"), 10, 11,
     "too large"),
    ("literal too short", edit("{1, 2, 3, 4}", "{1, 2, 3}"), 11, 23, "gives 3 elements"),
    ("literal not a number", edit("{1, 2, 3, 4}", "{1, 2, x, 4}"), 11, 30, "'x' is not a f32"),
    ("literal out of range", edit("z = f32[] constant(0)", "z = s8[] constant(300)"), 12, 21,
     "out of range for literal's primitive type S8"),
    ("deeply nested literal", edit("{1, 2, 3, 4}", "{" * 3000 + "}" * 3000), 11, 23,
     "gives 1 elements"),
    ("deeply nested tuple shape", edit("p = f32[4]", "p = " + "(" * 3000 + ")" * 3000), 10, 2974,
     "nest deeper"),
    ("parameter without number", edit("p = f32[4] parameter(0)", "p = f32[4] parameter(x)"),
     10, 24,
     "parameter takes one number"),
    ("duplicate parameter number", edit("p = f32[4] parameter(0)",
                                        "p = f32[4] parameter(0)\n  p2 = f32[4] parameter(0)"),
     11, 25, "parameter(0) is defined twice"),
    ("stray character", edit("exponential(c)", "exponential(c) @"), 14, 34,
     "unexpected '@'; expected one of "),
    ("unterminated string", edit("dimensions={0}", 'metadata={op_name="abc}'), 13, 45,
     "unterminated string"),
    ("unterminated comment", edit("c = f32", "/* c = f32"), 11, 3, "unterminated comment"),
    ("layout of the wrong rank", edit("p = f32[4] parameter", "p = f32[4]{1,0} parameter"), 10, 13,
     "layout {1,0} is not a permutation"),
    ("misspelled header", edit("HloModule", "HloModul"), 1, 1, "expected 'HloModule'"),
    ("literal as operand", edit("exponential(c)", "exponential(1.5)"), 14, 31,
     "expected an operand name"),
]


@pytest.mark.parametrize("text,line,column,fragment", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_malformed_input(text, line, column, fragment):
    with pytest.raises(ParseError) as info:
        parse_module(text)
    err = info.value
    assert fragment in err.message
    assert (err.line, err.column) == (line, column), str(err)


def test_error_text_has_line_column_source_and_caret():
    with pytest.raises(ParseError) as info:
        parse_module(edit("exponential(c)", "exponentail(c)"))
    first, source, caret = str(info.value).split("\n")
    assert first.startswith("line 14, column 19: unknown opcode 'exponentail'")
    assert source == "  ROOT e = f32[4] exponentail(c)"
    assert caret == " " * 18 + "^"
    assert info.value.source_line == source


def test_long_source_lines_are_clipped_around_the_column():
    long_attr = "metadata={op_name=\"" + "x" * 500 + "\"}, dimensions={q}"
    with pytest.raises(ParseError) as info:
        parse_module(edit("dimensions={0}", long_attr))
    _, source, caret = str(info.value).split("\n")
    assert len(source) < 120
    assert source[caret.index("^"):].startswith("{q}")


def test_unknown_attributes_are_not_errors():
    module = parse_module(edit("dimensions={0}", "dimensions={0}, new_thing={a b [c]}"))
    assert module.entry.instruction("r").attrs["new_thing"].text == "{a b [c]}"


def test_parse_error_is_the_only_exception_for_random_garbage():
    # Mutations of a good file (truncations, deletions) never escape as another exception.
    for cut in range(0, len(GOOD), 7):
        for text in (GOOD[:cut], GOOD[:cut] + GOOD[cut + 3:]):
            try:
                parse_module(text)
            except ParseError:
                pass
