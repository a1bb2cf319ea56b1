"""The algebraic simplifier never changes a result bit, special values included."""
import itertools

import numpy as np
import pytest

from xlapy import hlo
from xlapy import passes
from xlapy.passes import DCE, AlgebraicSimplifier
from xlapy.passes.algebraic_simplifier import is_splat, splat_value
from tests.passes.helpers import parse

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3e38, 1e-30],
                    dtype=np.float32)
CONSTANTS = ["0", "-0", "1", "-1", "inf", "-inf", "nan", "2", "0.5"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power"]


def module_text(op: str, constant: str, constant_first: bool) -> str:
    operands = "(c, x)" if constant_first else "(x, c)"
    return f"""
    HloModule m
    ENTRY e {{
      x = f32[10] parameter(0)
      k = f32[] constant({constant})
      c = f32[10] broadcast(k), dimensions={{}}
      ROOT r = f32[10] {op}{operands}
    }}
    """


def bits(a: np.ndarray) -> np.ndarray:
    """Bit patterns with every NaN made the same NaN (payloads are not compared)."""
    a = np.where(np.isnan(a), np.float32(np.nan), a).astype(np.float32)
    return a.view(np.uint32)


@pytest.mark.parametrize("op,constant,constant_first",
                         list(itertools.product(BINARY, CONSTANTS, [False, True])))
def test_binary_rules_are_bit_exact(op, constant, constant_first):
    text = module_text(op, constant, constant_first)
    module = parse(text)
    AlgebraicSimplifier().run(module)
    DCE().run(module)
    hlo.verify(module)
    expected = hlo.evaluate(parse(text), [SPECIALS])[0]
    actual = hlo.evaluate(module, [SPECIALS])[0]
    np.testing.assert_array_equal(bits(actual), bits(expected))


@pytest.mark.parametrize("op,constant,simplified", [
    ("multiply", "1", True), ("multiply", "0", False),       # NaN * 0 is NaN
    ("add", "-0", True), ("add", "0", False),                 # -0 + +0 is +0
    ("subtract", "0", True), ("subtract", "-0", False),
    ("divide", "1", True), ("divide", "-1", False),
    ("maximum", "-inf", True), ("minimum", "inf", True), ("maximum", "inf", False),
    ("power", "1", True), ("power", "2", True), ("power", "0", True), ("power", "-1", True),
    ("power", "3", False), ("power", "0.5", False),          # sqrt(-0) is -0, pow(-0, .5) +0
])
def test_which_identities_fire(op, constant, simplified):
    module = parse(module_text(op, constant, constant_first=False))
    assert AlgebraicSimplifier().run(module) is simplified
    if simplified and op != "power":
        assert module.entry.root.opcode == "parameter"


def test_splat_values_tell_signed_zeros_apart():
    module = parse("""
    HloModule m
    ENTRY e {
      a = f32[3] constant({-0, -0, -0})
      b = f32[] constant(0)
      c = f32[2] broadcast(b), dimensions={}
      d = f32[2] constant({1, 2})
      ROOT t = (f32[3], f32[2], f32[2]) tuple(a, c, d)
    }
    """)
    a, c, d = module.entry.root.operands
    assert is_splat(a, -0.0) and not is_splat(a, 0.0)
    assert is_splat(c, 0.0) and not is_splat(c, -0.0)
    assert splat_value(d) is None


def test_reduce_over_size_one_dims_keeps_other_dims():
    text = """
    HloModule m
    sum {
      sx = f32[] parameter(0)
      sy = f32[] parameter(1)
      ROOT sr = f32[] add(sx, sy)
    }
    ENTRY e {
      x = f32[3,1,5] parameter(0)
      z = f32[] constant(0)
      ROOT r = f32[3] reduce(x, z), dimensions={1,2}, to_apply=sum
    }
    """
    module = parse(text)
    assert AlgebraicSimplifier().run(module)
    root = module.entry.root
    assert root.opcode == "reduce" and root.dims() == (1,)
    assert root.operands[0].opcode == "reshape" and root.operands[0].shape.dims == (3, 5)
    x = np.arange(15, dtype=np.float32).reshape(3, 1, 5)
    np.testing.assert_array_equal(hlo.evaluate(module, [x])[0], x.sum(axis=(1, 2)))


def test_non_default_layouts_block_reinterpreting_rules():
    module = parse("""
    HloModule m
    ENTRY e {
      x = f32[2,3]{0,1} parameter(0)
      r = f32[6] reshape(x)
      ROOT r2 = f32[3,2] reshape(r)
    }
    """)
    assert AlgebraicSimplifier().run(module) is False


def test_outer_product_dot_becomes_an_exact_multiply():
    text = """
    HloModule m
    ENTRY e {
      a = f32[5,1] parameter(0)
      b = f32[1,3] parameter(1)
      ROOT d = f32[3,5] dot(b, a), lhs_contracting_dims={0}, rhs_contracting_dims={1}
    }
    """
    module = parse(text)
    assert AlgebraicSimplifier().run(module)
    DCE().run(module)
    assert "dot" not in [i.opcode for i in module.entry.instructions]
    a = np.array([[-0.0], [np.nan], [np.inf], [1.0], [-2.0]], np.float32)
    b = np.array([[1.0, -np.inf, 0.0]], np.float32)
    expected = hlo.evaluate(parse(text), [a, b])[0]
    np.testing.assert_array_equal(bits(hlo.evaluate(module, [a, b])[0]), bits(expected))


def test_mixed_type_dot_is_left_alone():
    module = parse("""
    HloModule m
    ENTRY e {
      a = s8[4,1] parameter(0)
      b = s8[1,2] parameter(1)
      ROOT d = s32[4,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }
    """)
    assert AlgebraicSimplifier().run(module) is False


def test_splats_stay_symbolic_and_fold():
    text = """
    HloModule m
    ENTRY e {
      two = f32[] constant(2)
      three = f32[] constant(3)
      a = f32[4,6] broadcast(two), dimensions={}
      b = f32[4,6] broadcast(three), dimensions={}
      s = f32[4,6] multiply(a, b)
      r = f32[24] reshape(s)
      ROOT t = f32[6,4] transpose(s), dimensions={1,0}
    }
    """
    module = parse(text)
    passes.HloPassFix(passes.pipeline_from_text(
        "algebraic-simplifier,constant-folding,dce")).run(module)
    root = module.entry.root
    assert root.opcode == "broadcast" and root.operands[0].literal == 6
    assert [i.opcode for i in module.entry.instructions] == ["constant", "broadcast"]
