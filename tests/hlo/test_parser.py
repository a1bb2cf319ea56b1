"""Focused parser tests: each attribute form, literal forms, naming styles, ordering."""
from textwrap import dedent

import ml_dtypes
import numpy as np
import pytest

from xlapy.hlo import (HloComputation, PadDim, RawAttr, Shape, SliceDim, Window, WindowDim,
                 parse_module)


def parse(body: str, *, callees: str = ""):
    """A module whose ENTRY holds `body` (instructions), after `callees` (computations)."""
    return parse_module(f"HloModule m\n{dedent(callees)}\nENTRY main {{\n{dedent(body)}\n}}\n")


def entry_instr(module, name):
    return module.entry.instruction(name)


ADD = """
add {
  add_x = f32[] parameter(0)
  add_y = f32[] parameter(1)
  ROOT add_sum = f32[] add(add_x, add_y)
}
"""


# --- naming styles and structure ---------------------------------------------------

def test_bare_names_style():
    m = parse("""
        p = f32[4]{0} parameter(0)
        ROOT n = f32[4]{0} negate(p)""")
    assert m.name == "m"
    assert m.entry.name == "main"
    n = entry_instr(m, "n")
    assert n.opcode == "negate" and n.operands == [entry_instr(m, "p")]
    assert m.entry.root is n
    assert n.shape == Shape("f32", (4,)) and n.shape.layout == (0,)


def test_percent_names_and_signatures_style():
    m = parse_module(dedent("""
        HloModule m, is_scheduled=true, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

        %neg (a: f32[4]) -> f32[4] {
          %a = f32[4]{0} parameter(0)
          ROOT %n = f32[4]{0} negate(%a)
        }

        ENTRY %main (p: f32[4]) -> f32[4] {
          %p = f32[4]{0} parameter(0)
          ROOT %c = f32[4]{0} call(%p), to_apply=%neg
        }
        """))
    assert [c.name for c in m.computations] == ["neg", "main"]
    call = entry_instr(m, "c")
    assert call.attrs["to_apply"] is m.computation("neg")
    assert call.operands[0].name == "p"        # stored without '%'
    assert m.config == {"is_scheduled": "true",
                        "entry_computation_layout": "{(f32[4]{0})->f32[4]{0}}"}


def test_module_config_keeps_text_and_order():
    m = parse_module(dedent("""
        HloModule m, is_scheduled=true, entry_computation_layout={(f32[])->f32[]}, allow_spmd_sharding_propagation_to_parameters={true,false}, other="x y"
        ENTRY e {
          ROOT p = f32[] parameter(0)
        }"""))
    assert list(m.config.items()) == [
        ("is_scheduled", "true"), ("entry_computation_layout", "{(f32[])->f32[]}"),
        ("allow_spmd_sharding_propagation_to_parameters", "{true,false}"), ("other", '"x y"')]


def test_sections_are_parsed_and_ignored():
    m = parse_module(dedent("""
        HloModule m

        FileNames
        1 "a.py"

        FunctionNames
        1 "<module>"

        FileLocations
        1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}

        StackFrames
        1 {file_location_id=1 parent_frame_id=1}

        ENTRY e {
          ROOT p = f32[] parameter(0), metadata={op_name="x" stack_frame_id=1}
        }"""))
    assert m.entry.root.attrs["metadata"] == RawAttr('{op_name="x" stack_frame_id=1}')


def test_entry_parameters_out_of_order():
    m = parse("""
        b = f32[2] parameter(1)
        a = f32[3] parameter(0)
        ROOT t = (f32[3], f32[2]) tuple(a, b)""")
    assert [p.name for p in m.entry.parameters] == ["a", "b"]
    assert [p.parameter_number for p in m.entry.parameters] == [0, 1]


def test_operands_may_be_used_before_definition():
    m = parse("""
        ROOT n = f32[] negate(p)
        p = f32[] parameter(0)""")
    assert m.entry.root.operands[0].opcode == "parameter"


def test_root_defaults_to_last_instruction():
    m = parse("""
        p = f32[] parameter(0)
        n = f32[] negate(p)""")
    assert m.entry.root.name == "n"


def test_callee_may_follow_caller():
    m = parse_module(dedent("""
        HloModule m
        ENTRY e {
          p = f32[4] parameter(0)
          z = f32[] constant(0)
          ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
        }
        """) + ADD)
    assert m.entry.root.attrs["to_apply"] is m.computation("add")


def test_tuple_shape_with_index_comments_and_operand_comments():
    m = parse("""
        p = f32[] parameter(0)
        ROOT t = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) tuple(p, p, p, p, p, /*index=5*/p)""")
    root = m.entry.root
    assert root.shape.is_tuple and len(root.shape.tuple_shapes) == 6
    assert len(root.operands) == 6


def test_control_predecessors():
    m = parse("""
        p = f32[] parameter(0)
        a = f32[] copy(p)
        b = f32[] copy(p), control-predecessors={a}
        ROOT t = (f32[], f32[]) tuple(a, b)""")
    b = entry_instr(m, "b")
    assert b.control_predecessors == [entry_instr(m, "a")]
    assert "control-predecessors" not in b.attrs


def test_fusion_computation_is_marked():
    m = parse("""
        p = f32[4] parameter(0)
        ROOT f = f32[4] fusion(p), kind=kLoop, calls=fused""", callees="""
        fused {
          x = f32[4] parameter(0)
          ROOT n = f32[4] negate(x)
        }""")
    assert m.computation("fused").is_fusion_computation
    assert not m.entry.is_fusion_computation
    assert m.entry.root.attrs["kind"] == "kLoop"


# --- attributes --------------------------------------------------------------------

def test_int_list_int_bool_and_enum_attributes():
    m = parse("""
        p = f32[2,3] parameter(0)
        q = f32[3,2] parameter(1)
        t = f32[3,2] transpose(p), dimensions={1,0}
        d = f32[2,2] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_batch_dims={}, rhs_batch_dims={}
        i = s32[4] iota(), iota_dimension=0
        c = pred[3,2] compare(t, q), direction=LT, type=TOTALORDER
        ROOT s = (f32[3,2]) sort(t), dimensions={0}, is_stable=true, to_apply=lt""", callees="""
        lt {
          a = f32[] parameter(0)
          b = f32[] parameter(1)
          ROOT l = pred[] compare(a, b), direction=LT
        }""")
    assert entry_instr(m, "t").attrs["dimensions"] == (1, 0)
    d = entry_instr(m, "d").attrs
    assert d["lhs_contracting_dims"] == (1,) and d["lhs_batch_dims"] == ()
    assert entry_instr(m, "i").attrs["iota_dimension"] == 0
    assert entry_instr(m, "c").attrs["direction"] == "LT"
    assert entry_instr(m, "c").attrs["type"] == "TOTALORDER"
    assert entry_instr(m, "s").attrs["is_stable"] is True


def test_attributes_keep_their_order():
    m = parse("""
        p = f32[4] parameter(0)
        ROOT b = f32[2,4] broadcast(p), zzz=1, dimensions={1}, aaa={x}""")
    assert list(m.entry.root.attrs) == ["zzz", "dimensions", "aaa"]


def test_slice_padding_and_window():
    m = parse("""
        p = f32[20,30] parameter(0)
        z = f32[] constant(0)
        s = f32[6,8] slice(p), slice={[2:20:3], [0:8]}
        q = f32[30,33] pad(p, z), padding=1_-2_1x0_3
        ROOT w = f32[10,15] reduce-window(p, z), window={size=3x2 stride=2x2 pad=0_1x1_0 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}, to_apply=add""",
              callees=ADD)
    assert entry_instr(m, "s").attrs["slice"] == (SliceDim(2, 20, 3), SliceDim(0, 8, 1))
    assert entry_instr(m, "q").attrs["padding"] == (PadDim(1, -2, 1), PadDim(0, 3, 0))
    assert m.entry.root.attrs["window"] == Window((
        WindowDim(size=3, stride=2, pad_low=0, pad_high=1, window_dilation=2, base_dilation=1,
                  reversal=False),
        WindowDim(size=2, stride=2, pad_low=1, pad_high=0, window_dilation=1, base_dilation=2,
                  reversal=True)))


def test_convolution_attributes():
    m = parse("""
        x = f32[1,8,8,4] parameter(0)
        w = f32[3,3,1,4] parameter(1)
        ROOT c = f32[1,8,8,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4""")
    attrs = m.entry.root.attrs
    assert attrs["dim_labels"] == "b01f_01io->b01f"
    assert attrs["feature_group_count"] == 4
    assert [d.size for d in attrs["window"].dims] == [3, 3]


def test_conditional_branch_computations():
    m = parse("""
        i = s32[] parameter(0)
        x = f32[] parameter(1)
        ROOT c = f32[] conditional(i, x, x), branch_computations={%b0, b1}""", callees="""
        b0 {
          ROOT a = f32[] parameter(0)
        }
        b1 {
          y = f32[] parameter(0)
          ROOT n = f32[] negate(y)
        }""")
    branches = m.entry.root.attrs["branch_computations"]
    assert all(isinstance(b, HloComputation) for b in branches)
    assert [b.name for b in branches] == ["b0", "b1"]


def test_raw_attributes_are_kept_verbatim():
    m = parse("""
        p = f32[4] parameter(0)
        ROOT c = f32[4] copy(p), metadata={op_name="jit(f)/copy" source_file="a.py"}, backend_config={"outer_dimension_partitions":["2"],"x":{"y":[]}}, frontend_attributes={xla_cpu_small_call="true"}, sharding={replicated}, backend_config_str="a,b", operand_precision={highest,highest}""")
    attrs = m.entry.root.attrs
    assert attrs["metadata"] == RawAttr('{op_name="jit(f)/copy" source_file="a.py"}')
    assert attrs["backend_config"] == RawAttr('{"outer_dimension_partitions":["2"],"x":{"y":[]}}')
    assert attrs["frontend_attributes"] == RawAttr('{xla_cpu_small_call="true"}')
    assert attrs["sharding"].to_text() == "{replicated}"    # structured: hlo/sharding.py
    assert attrs["backend_config_str"] == RawAttr('"a,b"')
    assert attrs["operand_precision"] == RawAttr("{highest,highest}")


# --- literals ---------------------------------------------------------------------

def const(shape: str, literal: str):
    m = parse(f"ROOT c = {shape} constant({literal})")
    return m.entry.root.literal


def test_scalar_literals_of_every_kind():
    assert const("f32[]", "1.5").dtype == np.float32 and const("f32[]", "1.5") == 1.5
    assert const("f64[]", "0.1") == 0.1
    assert const("f16[]", "65504") == np.float16(65504)
    assert const("s32[]", "-2147483648") == -2 ** 31
    assert const("u64[]", "18446744073709551615") == 2 ** 64 - 1
    assert const("s8[]", "-0") == 0
    assert const("pred[]", "true") and not const("pred[]", "false")
    assert const("pred[]", "1") and not const("pred[]", "0")


def test_special_float_literals():
    v = const("f32[6]", "{inf, -inf, nan, -nan, -0, 1e-30}")
    assert np.isposinf(v[0]) and np.isneginf(v[1]) and np.isnan(v[2]) and np.isnan(v[3])
    assert np.signbit(v[3]) and not np.signbit(v[2])
    assert v[4] == 0 and np.signbit(v[4])
    assert v[5] == np.float32(1e-30)


def test_nested_literal_with_index_comments():
    v = const("s32[2,2,2]", "{ { /*i0=0*/ {1, 2}, {3, 4} }, { /*i0=1*/ {5, 6}, {7, 8} } }")
    np.testing.assert_array_equal(v, np.arange(1, 9, dtype=np.int32).reshape(2, 2, 2))


def test_zero_size_literals():
    assert const("f32[2,0]", "{ {}, {} }").shape == (2, 0)
    assert const("f32[0,3]", "{}").shape == (0, 3)
    assert const("s32[0]", "{}").dtype == np.int32


def test_elided_literal_is_none():
    assert const("f32[1000,1000]", "{...}") is None


def test_pred_array_literal_as_ints():
    np.testing.assert_array_equal(const("pred[4]", "{1, 0, 1, 1}"), [True, False, True, True])


def test_complex_and_tuple_literals():
    v = const("c64[2]", "{(1, 2), (-0.5, inf)}")
    assert v.dtype == np.complex64 and v[0] == 1 + 2j and np.isposinf(v[1].imag)
    t = const("(f32[2], s32[])", "({1, 2}, 7)")
    assert isinstance(t, tuple) and t[1] == 7 and t[0].dtype == np.float32


def test_parameter_number():
    m = parse("ROOT p = f32[] parameter(3)")
    assert m.entry.root.parameter_number == 3


def test_huge_shape_is_not_allocated():
    m = parse("ROOT p = f32[99999999999999,99999999999999] parameter(0)")
    assert m.entry.root.shape.dims == (99999999999999, 99999999999999)


def test_bytes_input_is_decoded():
    m = parse_module(b"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    assert m.entry.root.opcode == "parameter"


@pytest.mark.parametrize("opcode", ["rng-bit-generator", "after-all", "custom-call"])
def test_unusual_opcodes_parse(opcode):
    m = parse(f"""
        p = u64[2] parameter(0)
        ROOT r = (u64[2], u32[4]) {opcode}(p), algorithm=rng_default, custom_call_target="f\\"x" """)
    assert m.entry.root.opcode == opcode
    assert m.entry.root.attrs["custom_call_target"] == 'f"x'


def test_bf16_literals_are_rounded_to_bf16():
    v = const("bf16[2]", "{0.1, 1}")
    assert v.dtype == ml_dtypes.bfloat16     # held natively (ml_dtypes)
    assert v[0].astype(np.float32) == np.float32(0.10009765625) and v[1] == 1


def test_operands_with_shapes_as_xla_prints_by_default():
    m = parse("""
        p = f32[4]{0} parameter(0)
        t = (f32[4], f32[4]) tuple(f32[4]{0} %p, f32[4] p)
        ROOT g = f32[4] get-tuple-element((f32[4], f32[4]) t), index=1""")
    assert m.entry.root.operands[0].name == "t"
    assert [o.name for o in m.entry.instruction("t").operands] == ["p", "p"]
    assert m.entry.root.attrs["index"] == 1
