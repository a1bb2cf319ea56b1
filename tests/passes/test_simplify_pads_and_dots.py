"""Two simplifier rules that reach past pure data movement (passes/simplify_movement.py):
a sum of zero-padded pieces along one dimension becomes their concatenation, and a
transposed dot becomes the dot with its operands swapped."""
import numpy as np
import pytest

from xlapy import hlo
from xlapy.passes import DCE, AlgebraicSimplifier
from tests.passes.helpers import assert_same_results, opcodes, parse
from tests.passes.test_algebraic_simplifier import bits

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5], dtype=np.float32)


def simplified(text: str) -> hlo.HloModule:
    module = parse(text)
    AlgebraicSimplifier().run(module)
    DCE().run(module)
    hlo.verify(module)
    return module


def split_gradient(zero: str, order=("v", "k", "q"), dtype="f32") -> str:
    """The gradient of slicing x[3,N] into three rows, summed as autodiff emits it."""
    pads = {"q": "0_2x0_0", "k": "1_1x0_0", "v": "2_0x0_0"}
    lines = [f"  {n} = {dtype}[1,8] parameter({i})" for i, n in enumerate("qkv")]
    lines.append(f"  z = {dtype}[] constant({zero})")
    lines += [f"  p{n} = {dtype}[3,8] pad({n}, z), padding={pads[n]}" for n in "qkv"]
    a, b, c = order
    lines.append(f"  s = {dtype}[3,8] add(p{a}, p{b})")
    lines.append(f"  ROOT r = {dtype}[3,8] add(s, p{c})")
    return "HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


@pytest.mark.parametrize("zero", ["0", "-0"])
@pytest.mark.parametrize("order", [("v", "k", "q"), ("q", "k", "v"), ("k", "q", "v")])
def test_pieces_that_tile_a_dimension_become_a_concatenation(zero, order):
    text = split_gradient(zero, order)
    module = simplified(text)
    ops = opcodes(module.entry)
    assert "concatenate" in ops and "pad" not in ops
    # Bit for bit, signed zeros included: +0 padding turns a -0 into +0, -0 padding does not.
    args = [np.resize(np.roll(SPECIALS, i), (1, 8)) for i in range(3)]
    want = hlo.evaluate(parse(text), args)[0]
    got = hlo.evaluate(module, args)[0]
    np.testing.assert_array_equal(bits(got), bits(want))
    assert ("add" in ops) == (zero == "0")


def test_integer_pieces_concatenate_without_an_add():
    module = simplified(split_gradient("0", dtype="s32"))
    assert opcodes(module.entry).count("add") == 0
    assert_same_results(split_gradient("0", dtype="s32"), module)


def test_gaps_between_pieces_are_zeros():
    text = """
    HloModule m
    ENTRY e {
      a = f32[2,4] parameter(0)
      b = f32[1,4] parameter(1)
      z = f32[] constant(-0)
      pa = f32[7,4] pad(a, z), padding=1_4x0_0
      pb = f32[7,4] pad(b, z), padding=4_2x0_0
      ROOT r = f32[7,4] add(pa, pb)
    }
    """
    module = simplified(text)
    root = module.entry.root
    assert root.opcode == "concatenate" and len(root.operands) == 5
    assert_same_results(text, module)


@pytest.mark.parametrize("case,body", [
    ("overlapping pieces", """
      pa = f32[3,4] pad(a, z), padding=0_1x0_0
      pb = f32[3,4] pad(b, z), padding=1_0x0_0"""),
    ("pieces padded along different dimensions", """
      pa = f32[3,4] pad(a, z), padding=0_1x0_0
      pb = f32[3,4] pad(b, z), padding=0_0x0_2"""),
    ("interior padding", """
      pa = f32[3,4] pad(a, z), padding=0_0_1x0_0
      pb = f32[3,4] pad(b, z), padding=0_1x0_0"""),
    ("zeros of both signs", """
      pa = f32[3,4] pad(a, z), padding=0_1x0_0
      pb = f32[3,4] pad(b, m), padding=2_0x0_0"""),
    ("a padding value that is not zero", """
      pa = f32[3,4] pad(a, o), padding=0_1x0_0
      pb = f32[3,4] pad(b, o), padding=2_0x0_0"""),
])
def test_sums_that_are_not_a_concatenation_stay(case, body):
    shapes = {"overlapping pieces": ("f32[2,4]", "f32[2,4]"),
              "pieces padded along different dimensions": ("f32[2,4]", "f32[3,2]"),
              "interior padding": ("f32[2,4]", "f32[2,4]"),
              "zeros of both signs": ("f32[2,4]", "f32[1,4]"),
              "a padding value that is not zero": ("f32[2,4]", "f32[1,4]")}[case]
    text = f"""
    HloModule m
    ENTRY e {{
      a = {shapes[0]} parameter(0)
      b = {shapes[1]} parameter(1)
      z = f32[] constant(0)
      m = f32[] constant(-0)
      o = f32[] constant(1)
      {body.strip()}
      ROOT r = f32[3,4] add(pa, pb)
    }}
    """
    module = simplified(text)
    assert "concatenate" not in opcodes(module.entry), case
    assert_same_results(text, module)


def test_an_inner_sum_read_elsewhere_is_kept():
    # s is read by the root and by another user: the root's sum is pieces of s + pc.
    text = """
    HloModule m
    ENTRY e {
      a = f32[1,4] parameter(0)
      b = f32[1,4] parameter(1)
      c = f32[1,4] parameter(2)
      z = f32[] constant(-0)
      pa = f32[3,4] pad(a, z), padding=0_2x0_0
      pb = f32[3,4] pad(b, z), padding=1_1x0_0
      pc = f32[3,4] pad(c, z), padding=2_0x0_0
      s = f32[3,4] add(pa, pb)
      r = f32[3,4] add(s, pc)
      ROOT t = (f32[3,4], f32[3,4]) tuple(r, s)
    }
    """
    module = simplified(text)
    assert_same_results(text, module)


DOT = """
HloModule m
ENTRY e {{
  q = f32[2,3,5,4] parameter(0)
  k = f32[2,3,5,6] parameter(1)
  d = f32[2,3,4,6] dot(q, k), lhs_batch_dims={{0,1}}, rhs_batch_dims={{0,1}}, lhs_contracting_dims={{2}}, rhs_contracting_dims={{2}}{precision}
  ROOT t = f32[2,3,6,4] transpose(d), dimensions={perm}
}}
"""


def test_a_transposed_dot_swaps_its_operands():
    text = DOT.format(perm="{0,1,3,2}", precision=", operand_precision={highest,default}")
    module = simplified(text)
    root = module.entry.root
    assert root.opcode == "dot" and [o.name for o in root.operands] == ["k", "q"]
    assert root.attrs["operand_precision"].text == "{default,highest}"
    assert_same_results(text, module)


def test_other_transposes_of_a_dot_stay():
    # batch dimensions swapped too: not the product with its operands swapped
    text = DOT.format(perm="{1,0,3,2}", precision="").replace("f32[2,3,6,4] transpose",
                                                               "f32[3,2,6,4] transpose")
    module = simplified(text)
    assert module.entry.root.opcode == "transpose"
    assert_same_results(text, module)


def test_a_dot_read_elsewhere_is_not_computed_twice():
    text = """
    HloModule m
    ENTRY e {
      a = f32[5,4] parameter(0)
      b = f32[4,6] parameter(1)
      d = f32[5,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      t = f32[6,5] transpose(d), dimensions={1,0}
      ROOT r = (f32[6,5], f32[5,6]) tuple(t, d)
    }
    """
    module = simplified(text)
    assert opcodes(module.entry).count("dot") == 1
    assert_same_results(text, module)
