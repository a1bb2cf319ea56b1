"""HLO text that XLA's parser reads, written the way XLA's hlo_parser_test.cc writes it:
a table of modules that must parse, verify and print back (printing is stable: the
canonical text parses to a module that prints the same), a table of canonical texts
that print back exactly, and a table of texts that must fail with a given message.
"""
import numpy as np
import pytest

from xlapy.hlo import ParseError, parse_module, print_module, verify
from xlapy.hlo.attributes import (OriginalValue, OriginTuple, ResultAccuracy,
                                  result_accuracy_opcodes)

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

# The in-place collective-permute's frame: input x, output buffer out, offsets lo, hi.
IN_PLACE = """HloModule m, replica_count=2
ENTRY e {
  x = f32[4,6] parameter(0)
  out = f32[16,8] parameter(1)
  zero = s32[] constant(0)
  two = s32[] constant(2)
  lo = (s32[], s32[]) tuple(zero, zero)
  hi = (s32[], s32[]) tuple(two, zero)
  %s
}"""

# ragged-all-to-all on 4 devices: the offsets' and sizes' shapes, the groups.
RAGGED = """HloModule m, replica_count=4
ENTRY e {
  x = bf16[64,8] parameter(0)
  out = bf16[96,8] parameter(1)
  io = %s parameter(2)
  ss = %s parameter(3)
  oo = s32[4] parameter(4)
  rs = s32[4] parameter(5)
  ROOT r = bf16[96,8] ragged-all-to-all(x, out, io, ss, oo, rs), replica_groups=%s
}"""

# scan over the columns of x (dimension 1), from the last: per step the running
# maximum of the column (an output) and a count of steps (a second carry).
SCAN = """HloModule m
step {
  col = f32[2] parameter(0)
  best = f32[2] parameter(1)
  n = s32[] parameter(2)
  m = f32[2] maximum(col, best)
  one = s32[] constant(1)
  k = s32[] add(n, one)
  ROOT t = (f32[2], f32[2], s32[]) tuple(m, m, k)
}
ENTRY e {
  x = f32[2,5] parameter(0)
  lo = f32[2] parameter(1)
  zero = s32[] constant(0)
  ROOT r = (f32[2,5], f32[2], s32[]) scan(x, lo, zero), dimensions={1}, num_carries=2, is_reverse=true, is_associative=false, to_apply=step
}"""

# A sparse dot: 2 of every 4 lhs elements along dimension 1 are stored (16 of 32).
SPARSE = """HloModule m
ENTRY e {
  a = %s parameter(0)
  b = f32[32,20] parameter(1)
  meta = %s parameter(2)
  ROOT d = f32[10,20] dot(a, b, meta), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sparsity=%s
}"""

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
    ("operand_layout_constraints_declared_operands", """HloModule m
ENTRY e {
  a = f32[42,2,3]{0,1,2} parameter(0)
  b = f32[123,4]{0,1} parameter(1)
  ROOT o = f32[1,2,3]{0,1,2} custom-call(f32[42,2,3]{0,1,2} a, f32[123,4]{0,1} b), custom_call_target="baz", operand_layout_constraints={f32[42,2,3]{0,1,2}, f32[123,4]{1,0}}
}"""),
    ("result_accuracy_mode", """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  a = f32[4] exponential(x), result_accuracy={mode=highest}
  ROOT b = f32[4] tanh(a), result_accuracy={mode=DEFAULT}
}"""),
    ("result_accuracy_tolerance", """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  a = f32[4] log(x), result_accuracy={tolerance={atol=1e-5,rtol=0.5,ulps=2}}
  ROOT b = f32[4] sqrt(a), result_accuracy={tolerance={ulps=1}}
}"""),
    ("origin", """HloModule m
ENTRY e {
  v1 = f32[] parameter(0), origin={{"v1"}}
  v2 = f32[3] parameter(1), origin={{"v2"}}
  t = (f32[], f32[3]) tuple(v1, v2), origin={({"v1"}, {"v2"})}
  v3 = f32[2,3] parameter(2), origin={{"v3"}}
  n = ((f32[], f32[3]), f32[2,3]) tuple(t, v3), origin={(({"v1"}, {"v2"}), {"v3"})}
  ROOT g = f32[3] get-tuple-element(t), index=1, origin={{"t" {1}}}
}"""),
    ("origin_with_comma_empty_leaf_and_synthetic", """HloModule m
ENTRY e {
  v1 = f32[] parameter(0), origin={[synthetic_call]}
  t = (f32[], f32[]) tuple(v1, v1), origin={({"t", {0}}, {})}
  ROOT a = f32[] add(v1, v1), origin={{"a"}}
}"""),
    ("mixed_precision_where_xla_allows_it", """HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = bf16[] parameter(2)
  d = bf16[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[4,4] parameter(0)
  y = bf16[4,4] parameter(1)
  d = f32[4,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = (f32[4,4], bf16[4,4]) sort(x, y), dimensions={1}, to_apply=less
  c = f32[4,4] convert(y)
  r = f32[4,4] reduce-precision(c), exponent_bits=8, mantissa_bits=7
  ROOT t = (f32[4,4], (f32[4,4], bf16[4,4]), f32[4,4], bf16[4,4]) tuple(d, s, r, y)
}"""),
    ("variadic_reduce_one_float_type", """HloModule m
argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  v = f32[] select(gt, a, b)
  k = s32[] select(gt, i, j)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
ENTRY e {
  x = f32[8] parameter(0)
  n = s32[8] iota(), iota_dimension=0
  z = f32[] constant(-inf)
  o = s32[] constant(0)
  ROOT r = (f32[], s32[]) reduce(x, n, z, o), dimensions={0}, to_apply=argmax
}"""),
    ("scalar_word_literals_in_attributes", """HloModule m
ENTRY e {
  p = f32[] parameter(0)
  a = f32[] custom-call(p), custom_call_target="foo", literal=pred[] true
  b = f32[] custom-call(p), custom_call_target="foo", literal=f32[] inf
  c = f32[] custom-call(p), custom_call_target="foo", literal=f32[] nan
  d = f32[] custom-call(p), custom_call_target="foo", literal=pred[] false
  ROOT t = (f32[], f32[], f32[], f32[]) tuple(a, b, c, d)
}"""),
    ("literal_attribute_of_rank_2", """HloModule m
ENTRY e {
  p = f32[] parameter(0)
  a = f32[] custom-call(p), custom_call_target="foo", literal=s32[3,1]{1,0} { {2}, {0}, {1} }
  b = f32[] custom-call(p), custom_call_target="foo", literal=f32[2,2] { {1, 2}, {3, 4} }
  ROOT t = (f32[], f32[]) tuple(a, b)
}"""),
    ("sinh", """HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  b = bf16[4] parameter(1)
  c = c64[3] parameter(2)
  sa = f32[4] sinh(a)
  sb = bf16[4] sinh(b)
  sc = c64[3] sinh(c)
  ROOT t = (f32[4], bf16[4], c64[3]) tuple(sa, sb, sc)
}"""),
    ("shuffle_rotate", """HloModule m
ENTRY e {
  x = f32[3,4] parameter(0)
  ROOT r = f32[3,4] shuffle(x), dimensions={1,0}, mode=rotate, shifts={-1,4}
}"""),
    ("shuffle_permute_rows", """HloModule m
ENTRY e {
  x = s32[4,2] parameter(0)
  ROOT r = s32[4,2] shuffle(x), dimensions={0}, mode=permute, indices=s64[4,1]{1,0} { {3}, {3}, {0}, {9} }
}"""),
    ("shuffle_permute_both", """HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  ROOT r = f32[2,3] shuffle(x), dimensions={1,0}, mode=permute, indices=u8[2,3,2]{2,1,0} { { {2,1}, {0,0}, {1,1} }, { {0,1}, {2,0}, {1,0} } }
}"""),
    ("call_start_and_done", """HloModule m
double {
  x = f32[4] parameter(0)
  ROOT y = f32[4] add(x, x)
}
ENTRY e {
  p = f32[4] parameter(0)
  s = ((f32[4]), f32[4], s32[]) call-start(p), to_apply=double
  ROOT d = f32[4] call-done(s)
}"""),
    ("dim_labels_with_unknowns", """HloModule m
ENTRY e {
  ROOT r = f32[100]{0} custom-call(), window={size=2x2}, dim_labels=?b01f_0?1io->b01?f, custom_call_target="target"
}"""),
    ("convolution_of_pred", """HloModule m
ENTRY e {
  x = pred[10,10]{1,0} parameter(0)
  k = pred[10,10]{1,0} parameter(1)
  ROOT c = pred[10,10]{1,0} convolution(x, k), dim_labels=bf_io->bf
}"""),
    ("scalar_value_for_an_array_constant", """HloModule m
ENTRY e {
  bias = f32[10] constant(15)
  grid = s32[2,3]{0,1} constant(-4)
  ROOT t = (f32[10], s32[2,3]) tuple(bias, grid)
}"""),
    ("in_place_collective_permute", IN_PLACE % (
        "ROOT r = f32[16,8] collective-permute(x, out, lo, hi), "
        "source_target_pairs={{0,1},{1,0}}, slice_sizes={{4,6}}")),
    ("in_place_collective_permute_two_slices", IN_PLACE % (
        "lo2 = ((s32[], s32[]), (s32[], s32[])) tuple(lo, hi)\n"
        "  ROOT r = f32[16,8] collective-permute(x, out, lo2, lo2), "
        "source_target_pairs={{0,1},{1,0},{0,0},{1,1}}, slice_sizes={{2,6},{4,6}}")),
    ("in_place_collective_permute_tuples", IN_PLACE % (
        "xs = (f32[4,6], f32[4,6]) tuple(x, x)\n"
        "  outs = (f32[16,8], f32[16,8]) tuple(out, out)\n"
        "  lo2 = ((s32[], s32[]), (s32[], s32[])) tuple(lo, hi)\n"
        "  ROOT r = (f32[16,8], f32[16,8]) collective-permute(xs, outs, lo2, lo2), "
        "source_target_pairs={{0,1}}, slice_sizes={{4,6},{3,3}}")),
    ("in_place_collective_permute_start", IN_PLACE % (
        "s = (f32[4,6], f32[16,8], u32[], u32[]) collective-permute-start(x, out, lo, hi), "
        "source_target_pairs={{0,1},{1,0}}, slice_sizes={{4,6}}\n"
        "  ROOT r = f32[16,8] collective-permute-done(s)")),
    ("ragged_all_to_all", RAGGED % ("s64[4]", "s64[4]", "{{0,1},{2,3}}")),
    ("ragged_all_to_all_all_devices", RAGGED % ("s32[4]", "s32[4]", "{}")),
    ("scan_running_max_and_count", SCAN),
    ("scan_one_output_no_carry", """HloModule m
sq {
  x = s32[] parameter(0)
  ROOT y = s32[] multiply(x, x)
}
ENTRY e {
  p = s32[6] parameter(0)
  ROOT r = s32[6] scan(p), dimensions={0}, num_carries=0, to_apply=sq
}"""),
    ("sparse_dot", SPARSE % ("f32[10,16]", "u16[10,2]", "L.1@2:4")),
    ("sparse_dot_both_sides", SPARSE.replace("meta)", "meta, meta2)").replace(
        "b = f32[32,20] parameter(1)", "b = f32[16,20] parameter(1)\n  meta2 = u16[2,20] parameter(3)")
     % ("f32[10,16]", "u16[10,2]", "L.1@2:4_R.0@2:4")),
    ("dynamic_slice_index_vector", """HloModule m
ENTRY e {
  x = s32[2,2,258] parameter(0)
  i = s32[3] parameter(1)
  ROOT d = s32[2,2,4] dynamic-slice(x, i), dynamic_slice_sizes={2,2,4}
}"""),
    ("dynamic_update_slice_index_vector", """HloModule m
ENTRY e {
  x = f32[1,1,25,1] parameter(0)
  u = f32[1,1,2,1] parameter(1)
  i = u32[4] parameter(2)
  ROOT d = f32[1,1,25,1] dynamic-update-slice(x, u, i)
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


def test_literal_attribute_words_are_values_not_names():
    attrs = [i.attrs["literal"] for i in parse_module(
        dict(ACCEPTED)["scalar_word_literals_in_attributes"]).entry.instructions
        if "literal" in i.attrs]
    assert [a.shape.element_type for a in attrs] == ["pred", "f32", "f32", "pred"]
    assert attrs[0].value == np.True_ and np.isposinf(attrs[1].value)
    assert np.isnan(attrs[2].value) and attrs[3].value == np.False_


def test_scalar_value_for_an_array_constant_sets_the_first_element():
    """XLA's parser reads `f32[10] constant(15)` (its oneDNN tests write it) as 15 in
    element 0 and zeros elsewhere; the layout does not move the first element."""
    bias, grid = [i.literal for i in parse_module(
        dict(ACCEPTED)["scalar_value_for_an_array_constant"]).entry.instructions[:2]]
    np.testing.assert_array_equal(bias, [15] + [0] * 9)
    np.testing.assert_array_equal(grid, [[-4, 0, 0], [0, 0, 0]])


def test_index_vector_becomes_one_scalar_per_dimension():
    from xlapy.hlo import evaluate
    module = parse_module(dict(ACCEPTED)["dynamic_slice_index_vector"])
    root = module.entry.root
    assert [o.shape.rank for o in root.operands] == [3, 0, 0, 0]
    x = np.arange(2 * 2 * 258, dtype=np.int32).reshape(2, 2, 258)
    # Start indices are clamped as for scalar indices: 300 -> 254.
    for start in (0, 7, 300, -3):
        (got,) = evaluate(module, [x, np.array([1, 0, start], np.int32)])
        s = min(max(start, 0), 254)
        np.testing.assert_array_equal(got, x[:, :, s:s + 4])
    module = parse_module(dict(ACCEPTED)["dynamic_update_slice_index_vector"])
    x = np.zeros((1, 1, 25, 1), np.float32)
    u = np.array([1.5, -2], np.float32).reshape(1, 1, 2, 1)
    (got,) = evaluate(module, [x, u, np.array([0, 0, 30, 0], np.uint32)])
    np.testing.assert_array_equal(got[0, 0, :, 0], [0] * 23 + [1.5, -2])


def test_shuffle_values():
    """rotate: result[i] = x[(i + shift) mod n] per dimension; permute: coordinates from
    indices (the k-th for the k-th listed dimension), clamped as XLA's gather clamps."""
    from xlapy.hlo import evaluate
    texts = dict(ACCEPTED)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    (r,) = evaluate(parse_module(texts["shuffle_rotate"]), [x])
    np.testing.assert_array_equal(r, np.roll(np.roll(x, 1, axis=1), -1, axis=0))
    y = np.arange(8, dtype=np.int32).reshape(4, 2)
    (p,) = evaluate(parse_module(texts["shuffle_permute_rows"]), [y])
    np.testing.assert_array_equal(p, y[[3, 3, 0, 3]])      # 9 clamps to 3
    z = np.arange(6, dtype=np.float32).reshape(2, 3)
    (q,) = evaluate(parse_module(texts["shuffle_permute_both"]), [z])
    np.testing.assert_array_equal(q, [[z[1, 2], z[0, 0], z[1, 1]], [z[1, 0], z[0, 2], z[0, 1]]])


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


def entry(body: str, computations: str = "") -> str:
    return "HloModule m\n" + computations + "ENTRY e {\n" + body + "\n}"


CUSTOM_CALL = """  a = f32[42,2,3] parameter(0)
  b = f32[123,4] parameter(1)
  ROOT o = f32[1,2,3] custom-call(a, b), custom_call_target="baz", %s"""
UNARY = """  x = f32[4] parameter(0)
  ROOT y = f32[4] %s(x), %s"""
TUPLE = """  v = f32[] parameter(0)
  ROOT t = (f32[], f32[]) tuple(v, v), origin=%s"""
ADD_BF16 = """add_bf16 {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
"""
PAIR_ADD = """pair_add {
  a = f32[] parameter(0)
  b = bf16[] parameter(1)
  c = f32[] parameter(2)
  d = bf16[] parameter(3)
  s = f32[] add(a, c)
  t = bf16[] add(b, d)
  ROOT r = (f32[], bf16[]) tuple(s, t)
}
"""
MIXED = """  x = f32[4] parameter(0)
  y = bf16[4] parameter(1)
  p = pred[4] parameter(2)
  z = f32[] parameter(3)
  w = bf16[] parameter(4)
  %s"""

REJECTED += [
    # custom-call operand_layout_constraints (XLA's parser: one per operand, compatible).
    ("layout_constraints_too_few", entry(CUSTOM_CALL % "operand_layout_constraints={f32[42,2,3]{0,1,2}}"),
     "expected 2 operand layout constraints (one per operand), 1 given"),
    ("layout_constraints_too_many", entry(CUSTOM_CALL % (
        "operand_layout_constraints={f32[42,2,3]{0,1,2}, f32[123,4]{0,1}, f32[1]{0}}")),
     "expected 2 operand layout constraints (one per operand), 3 given"),
    ("layout_constraints_incompatible", entry(CUSTOM_CALL % (
        "operand_layout_constraints={f32[42,2,3]{0,1,2}, f32[555,5]{1,0}}")),
     "operand layout constraint shape f32[555,5]{1,0} for operand 1 is not compatible with "
     "operand shape f32[123,4]"),
    ("layout_constraints_other_type", entry(CUSTOM_CALL % (
        "operand_layout_constraints={f32[42,2,3]{0,1,2}, s32[123,4]{1,0}}")),
     "for operand 1 is not compatible"),
    ("layout_constraints_not_custom_call", entry("""  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x), operand_layout_constraints={f32[4]{0}}"""),
     "operand_layout_constraints is an attribute of custom-call, not of negate"),
    # result_accuracy (xla_data.proto ResultAccuracy: a mode, or a tolerance >= 0).
    ("result_accuracy_bad_mode", entry(UNARY % ("exponential", "result_accuracy={mode=fast}")),
     "result_accuracy mode must be default or highest, got 'fast'"),
    ("result_accuracy_unknown_field", entry(UNARY % ("exponential", "result_accuracy={speed=1}")),
     "unknown field 'speed'"),
    ("result_accuracy_empty", entry(UNARY % ("exponential", "result_accuracy={}")),
     "result_accuracy must be {mode=default|highest} or {tolerance="),
    ("result_accuracy_unknown_tolerance", entry(UNARY % (
        "log", "result_accuracy={tolerance={atol=1,eps=2}}")),
     "result_accuracy tolerance has a bad field 'eps=2'"),
    ("result_accuracy_tolerance_twice", entry(UNARY % (
        "log", "result_accuracy={tolerance={atol=1,atol=2}}")), "each at most once"),
    ("result_accuracy_negative", entry(UNARY % (
        "log", "result_accuracy={tolerance={rtol=-0.5}}")),
     "result_accuracy tolerance rtol must be finite and not negative, got -0.5"),
    ("result_accuracy_fractional_ulps", entry(UNARY % (
        "log", "result_accuracy={tolerance={ulps=1.5}}")),
     "result_accuracy tolerance ulps must be an integer, got '1.5'"),
    ("result_accuracy_not_a_number", entry(UNARY % (
        "log", "result_accuracy={tolerance={atol=x}}")),
     "result_accuracy tolerance atol must be a number, got 'x'"),
    ("result_accuracy_on_negate", entry(UNARY % ("negate", "result_accuracy={mode=highest}")),
     "result_accuracy is not an attribute of negate"),
    # origin (XLA's original value: a tree of {"instruction" {index}} leaves).
    ("origin_unquoted_name", entry(UNARY % ("negate", "origin={{x}}")),
     "origin: unexpected 'x'"),
    ("origin_two_names_in_a_leaf", entry(UNARY % ("negate", 'origin={{"x" "y"}}')),
     "expected '}', got 'y'"),
    ("origin_leaf_without_braces", entry(UNARY % ("negate", 'origin={"x"}')),
     "expected '{', got 'x'"),
    ("origin_bad_shape_index", entry(UNARY % ("negate", 'origin={{"x" {a}}}')),
     "origin: unexpected 'a'"),
    ("origin_tuple_for_an_array", entry(UNARY % ("negate", 'origin={({"a"}, {"b"})}')),
     "origin has a tuple at {} but the shape there is f32[4]"),
    ("origin_longer_than_the_tuple", entry(TUPLE % '{({"a"}, {"b"}, {"c"})}'),
     "origin has 3 elements at {} but the shape there has 2"),
    ("origin_nested_too_deep", entry(TUPLE % '{({"a"}, ({"b"}))}'),
     "origin has a tuple at {1} but the shape there is f32[]"),
    # Mixed floating-point precision: only where XLA's verifier allows it.
    ("in_place_slice_too_large", IN_PLACE % (
        "ROOT r = f32[16,8] collective-permute(x, out, lo, hi), "
        "source_target_pairs={{0,1}}, slice_sizes={{5,6}}"),
     "slice_sizes [5, 6] must give one size per dimension that fits"),
    ("in_place_offsets_count", IN_PLACE % (
        "ROOT r = f32[16,8] collective-permute(x, out, lo, hi), "
        "source_target_pairs={{0,1}}, slice_sizes={{4,6},{4,6}}"),
     "2 slice_sizes lists need as many offset tuples, got 1 input and 1 output"),
    ("in_place_offset_rank", IN_PLACE % (
        "one = (s32[]) tuple(zero)\n"
        "  ROOT r = f32[16,8] collective-permute(x, out, one, hi), "
        "source_target_pairs={{0,1}}, slice_sizes={{4,6}}"),
     "input offsets 0 give 1 indices for rank 2"),
    ("in_place_float_offsets", IN_PLACE % (
        "f = f32[] constant(0)\n  fo = (f32[], f32[]) tuple(f, f)\n"
        "  ROOT r = f32[16,8] collective-permute(x, out, fo, hi), "
        "source_target_pairs={{0,1}}, slice_sizes={{4,6}}"),
     "must hold integer scalars"),
    ("in_place_three_operands", IN_PLACE % (
        "ROOT r = f32[16,8] collective-permute(x, out, lo), "
        "source_target_pairs={{0,1}}, slice_sizes={{4,6}}"),
     "takes 4 operands"),
    ("in_place_slice_sizes_text", IN_PLACE % (
        "ROOT r = f32[16,8] collective-permute(x, out, lo, hi), "
        "source_target_pairs={{0,1}}, slice_sizes={4,6}"),
     "slice_sizes must be a list of integer lists"),
    ("in_place_source_too_often", IN_PLACE % (
        "ROOT r = f32[16,8] collective-permute(x, out, lo, hi), "
        "source_target_pairs={{0,1},{0,0},{0,1}}, slice_sizes={{4,6}}"),
     "source 0 too often"),
    ("ragged_index_lengths", RAGGED % ("s64[4]", "s32[8]", "{{0,1},{2,3}}"),
     "send_sizes s32[8] must have as many elements as input_offsets s64[4]"),
    ("ragged_float_offsets", RAGGED % ("f32[4]", "f32[4]", "{{0,1},{2,3}}"),
     "input_offsets must be a rank-1 s32 or s64 array"),
    ("ragged_uneven_split", RAGGED.replace("s32[4]", "s32[3]") % ("s32[3]", "s32[3]", "{}"),
     "ragged-all-to-all's 3 offsets must split evenly over groups of 4"),
    ("ragged_rows_differ", RAGGED.replace("out = bf16[96,8]", "out = bf16[96,4]")
     .replace("ROOT r = bf16[96,8]", "ROOT r = bf16[96,4]") % ("s32[4]", "s32[4]", "{}"),
     "must have one rank (at least 1) and the same dimensions after the first"),
    ("ragged_five_operands", RAGGED.replace(", rs)", ")") % ("s32[4]", "s32[4]", "{}"),
     "takes 6 operands"),
    ("shuffle_mode", dict(ACCEPTED)["shuffle_rotate"].replace("mode=rotate", "mode=spin"),
     "mode must be one of rotate, permute"),
    ("shuffle_shift_count", dict(ACCEPTED)["shuffle_rotate"].replace("shifts={-1,4}", "shifts={1}"),
     "mode=rotate needs one shift per dimension"),
    ("shuffle_indices_shape", dict(ACCEPTED)["shuffle_permute_rows"].replace("s64[4,1]{1,0}", "s64[4]{0}")
     .replace("{ {3}, {3}, {0}, {9} }", "{3, 3, 0, 9}"),
     "indices s64[4]{0} must have the operand's dims (or 1 where shared)"),
    ("shuffle_float_indices", dict(ACCEPTED)["shuffle_permute_rows"].replace("s64[4,1]", "f32[4,1]"),
     "indices must be integers"),
    ("shuffle_no_indices", dict(ACCEPTED)["shuffle_permute_rows"].split(", indices=")[0] + "\n}",
     "mode=permute needs indices="),
    ("sinh_of_integers", entry("x = s32[4] parameter(0)\n  ROOT s = s32[4] sinh(x)"),
     "operand type s32 not allowed"),
    ("pred_convolution_of_floats", entry(
        "x = f32[10,10] parameter(0)\n  k = f32[10,10] parameter(1)\n"
        "  ROOT c = pred[10,10] convolution(x, k), dim_labels=bf_io->bf"),
     "must be a numeric array (or pred, of pred operands)"),
    ("scan_steps_differ", SCAN.replace("scan(x, lo, zero)", "scan(x, y, lo, zero)")
     .replace("x = f32[2,5] parameter(0)", "x = f32[2,5] parameter(0)\n  y = f32[2,4] parameter(2)"),
     "input 1 f32[2,4] has 4 steps along dimension 1, input 0 has 5"),
    ("scan_carry_shape", SCAN.replace("lo = f32[2] parameter(1)", "lo = f32[3] parameter(1)"),
     "to_apply"),
    ("scan_no_dimension", SCAN.replace("dimensions={1}, ", ""),
     "needs dimensions={d} with the one scanned dimension"),
    ("sparse_dot_logical_size", SPARSE % ("f32[10,12]", "u16[10,2]", "L.1@2:4"),
     "contracting dims lhs 1 (size 24) and rhs 0 (size 32) differ"),
    ("sparse_dot_metadata_type", SPARSE % ("f32[10,16]", "f32[10,2]", "L.1@2:4"),
     "sparsity metadata 0 must be unsigned integers"),
    ("sparse_dot_descriptor", SPARSE % ("f32[10,16]", "u16[10,2]", "L.1@4:2"),
     "sparsity L.1@4:2 does not fit f32[10,16]"),
    ("sparse_dot_text", SPARSE % ("f32[10,16]", "u16[10,2]", "left"),
     "sparsity must look like L.1@2:4"),
    ("sparse_dot_metadata_missing", SPARSE.replace("dot(a, b, meta)", "dot(a, b)")
     % ("f32[10,16]", "u16[10,2]", "L.1@2:4"),
     "takes 3 operands (lhs, rhs, metadata), got 2"),
    ("dot_three_operands", SPARSE.replace(", sparsity=%s", "") % ("f32[10,32]", "u16[10,2]"),
     "takes 2 operands (lhs, rhs), got 3"),
    ("scalar_for_zero_size_constant", entry("ROOT c = f32[0] constant(15)"),
     "value 15 cannot be set in a literal of shape f32[0]"),
    ("complex_pair_for_array_constant", entry("ROOT c = c64[2] constant((1, 2))"),
     "expected a {...} list of 2 elements for dimension 0"),
    ("index_vector_too_short", entry(
        "x = s32[4,4] parameter(0)\n  i = s32[1] parameter(1)\n"
        "  ROOT d = s32[2,2] dynamic-slice(x, i), dynamic_slice_sizes={2,2}"),
     "dynamic-slice"),
    ("mixed_add", entry(MIXED % "ROOT r = f32[4] add(x, y)"), "differ in element type"),
    ("mixed_compare", entry(MIXED % "ROOT r = pred[4] compare(x, y), direction=LT"),
     "operand element types f32 and bf16 differ"),
    ("mixed_select", entry(MIXED % "ROOT r = f32[4] select(p, x, y)"),
     "operand element types f32 and bf16 differ"),
    ("mixed_clamp", entry(MIXED % "ROOT r = f32[4] clamp(w, x, w)"), "element types bf16 and f32"),
    ("mixed_result", entry(MIXED % "ROOT r = bf16[4] add(x, x)"),
     "shape bf16[4] does not match the inferred f32[4]"),
    ("mixed_pad_value", entry(MIXED % "ROOT r = f32[6] pad(x, w), padding=1_1"),
     "operand element types f32 and bf16 differ"),
    ("mixed_reduce_init", entry(MIXED % "ROOT r = bf16[] reduce(y, z), dimensions={0}, to_apply=add_bf16",
                                ADD_BF16), "add_bf16 takes (bf16[], bf16[]), expected (f32[], bf16[])"),
    ("mixed_variadic_reduce", entry(
        MIXED % "ROOT r = (f32[], bf16[]) reduce(x, y, z, w), dimensions={0}, to_apply=pair_add",
        PAIR_ADD),
     "floating-point operands of different precisions (f32 and bf16): mixed precision is not "
     "allowed in reduce"),
]


@pytest.mark.parametrize("text,fragment", [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_rejected_texts(text, fragment):
    """Parse errors (XLA's parser rejects the text) and verifier errors (XLA's verifier
    rejects the module) alike."""
    from xlapy.hlo import VerifyError
    with pytest.raises((ParseError, VerifyError)) as info:
        verify(parse_module(text))
    assert fragment in getattr(info.value, "message", str(info.value))


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
    whose instructions may carry result_accuracy= and origin=, whose reducers may be
    spelled inline and whose text carries comments."""
    from xlapy.hlo.shape import Shape
    module = draw(hlo_modules())
    for instr in module.instructions():
        _maybe_accuracy_and_origin(instr, draw)
        shape = instr.shape
        if shape.is_tuple or not shape.dims or not draw(st.booleans()):
            continue
        dynamic = tuple(draw(st.booleans()) for _ in shape.dims)
        instr.shape = Shape(shape.element_type, shape.dims, shape.minor_to_major(),
                            dynamic=dynamic, layout_extra=draw(st.sampled_from(LAYOUT_EXTRAS)))
    if draw(st.booleans()):
        module.entry.attrs["execution_thread"] = "main"
    root = module.entry.root
    if draw(st.booleans()):
        root.attrs["literal"] = draw(_literal_attrs())
    return module


@st.composite
def _literal_attrs(draw):
    """A literal= value: a scalar word (true, inf, nan), or an array of rank 1-2 (its
    shape's commas inside the attribute), or a tuple of them."""
    from xlapy.hlo.ir import LiteralAttr
    from xlapy.hlo.shape import Shape

    def one():
        kind = draw(st.sampled_from(["pred0", "f32word", "s32array", "f32array"]))
        if kind == "pred0":
            return LiteralAttr(Shape.scalar("pred"), np.bool_(draw(st.booleans())))
        if kind == "f32word":
            return LiteralAttr(Shape.scalar("f32"),
                               np.float32(draw(st.sampled_from([np.inf, -np.inf, np.nan, 0.5]))))
        dims = tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=2)))
        dtype = np.int32 if kind == "s32array" else np.float32
        values = draw(st.lists(st.sampled_from([0, 1, -7, 2.5, np.inf, np.nan]),
                               min_size=int(np.prod(dims)), max_size=int(np.prod(dims))))
        if dtype == np.int32:
            values = [v if np.isfinite(v) and v == int(v) else 3 for v in values]
        return LiteralAttr(Shape("s32" if kind == "s32array" else "f32", dims),
                           np.array(values, dtype).reshape(dims))
    if draw(st.booleans()):
        return one()
    parts = [one(), one()]
    return LiteralAttr(Shape.tuple_of([p.shape for p in parts]), tuple(p.value for p in parts))


def _maybe_accuracy_and_origin(instr, draw) -> None:
    """Gives some instructions a result_accuracy (the ops that take one) and an origin
    tree that fits their shape."""
    if instr.opcode in result_accuracy_opcodes() and draw(st.booleans()):
        instr.attrs["result_accuracy"] = draw(st.one_of(
            st.sampled_from([ResultAccuracy("default"), ResultAccuracy("highest")]),
            st.builds(ResultAccuracy, st.none(),
                      st.floats(0, 1e3, allow_nan=False, allow_infinity=False),
                      st.floats(0, 1e3, allow_nan=False, allow_infinity=False),
                      st.integers(0, 2 ** 40))))
    if not draw(st.booleans()):
        return

    def tree(shape, index):
        if shape.is_tuple and draw(st.booleans()):
            return OriginTuple(tree(s, index + (i,)) for i, s in enumerate(shape.tuple_shapes))
        if draw(st.integers(0, 5)) == 0:
            return None
        return (draw(st.sampled_from(["x", "p.1", 'q"uote', "dot_general"])), index)
    instr.attrs["origin"] = OriginalValue(tree(instr.shape, ()))


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


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(result_accuracy_opcodes()),
       st.one_of(st.sampled_from(["{mode=default}", "{mode=Highest}"]),
                 st.builds("{{tolerance={{atol={},rtol={},ulps={}}}}}".format,
                           st.floats(0, 1e300), st.floats(0, 1e-300), st.integers(0, 2 ** 62))))
def test_result_accuracy_prints_back(opcode, accuracy):
    text = entry(f"  x = f32[4] parameter(0)\n  ROOT y = f32[4] {opcode}(x), "
                 f"result_accuracy={accuracy}")
    module = parse_module(text)
    verify(module)
    printed = print_module(module)
    again = parse_module(printed)
    assert again.entry.root.attrs["result_accuracy"] == module.entry.root.attrs["result_accuracy"]
    assert print_module(again) == printed
