"""Tuple-shaped constants through every pass (issue 14, item 5).

CSE once keyed constants by `literal.dtype` and failed on a tuple literal
(`AttributeError: 'tuple' object has no attribute 'dtype'`); the call inliner's
clone made an object array of one. Every pass must keep the module's numbers, the
printer and parser must round-trip the constants, and the CPU pipeline must leave
only array constants for the backend.
"""
from __future__ import annotations

from textwrap import dedent

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import passes
from tests.passes.helpers import assert_same_results, opcodes, parse, random_args

TWO_EQUAL = """
HloModule tc
ENTRY e {
  p = f32[2] parameter(0)
  c1 = (f32[2], s32[]) constant(({1, 2}, 3))
  c2 = (f32[2], s32[]) constant(({1, 2}, 3))
  g1 = f32[2] get-tuple-element(c1), index=0
  g2 = f32[2] get-tuple-element(c2), index=0
  a = f32[2] add(g1, g2)
  ROOT r = f32[2] add(a, p)
}
"""

SIGNED_ZEROS = """
HloModule tc
ENTRY e {
  c1 = (f32[2], s32[]) constant(({0, 2}, 3))
  c2 = (f32[2], s32[]) constant(({-0, 2}, 3))
  ROOT t = ((f32[2], s32[]), (f32[2], s32[])) tuple(c1, c2)
}
"""

NESTED = """
HloModule tc
ENTRY e {
  p = s8[2,2] parameter(0)
  c = ((f32[2], pred[]), s8[2,2]) constant((({1.5, -0}, true), { {1, 2}, {3, -4} }))
  d = ((f32[2], pred[]), s8[2,2]) copy(c)
  inner = (f32[2], pred[]) get-tuple-element(d), index=0
  m = s8[2,2] get-tuple-element(c), index=1
  s = s8[2,2] add(m, p)
  ROOT t = ((f32[2], pred[]), s8[2,2], ((f32[2], pred[]), s8[2,2])) tuple(inner, s, c)
}
"""

IN_A_CALLEE = """
HloModule tc
callee {
  x = f16[3] parameter(0)
  c = (f16[3], u64[]) constant(({0.5, -2, inf}, 18446744073709551615))
  g = f16[3] get-tuple-element(c), index=0
  m = f16[3] multiply(x, g)
  k = u64[] get-tuple-element(c), index=1
  ROOT r = (f16[3], u64[]) tuple(m, k)
}
ENTRY e {
  q = f16[3] parameter(0)
  ROOT out = (f16[3], u64[]) call(q), to_apply=callee
}
"""

IN_A_LOOP = """
HloModule tc
cond {
  cs = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  step = (s32[], f32[4]) constant((1, {0.5, 1, 2, 4}))
  one = s32[] get-tuple-element(step), index=0
  w = f32[4] get-tuple-element(step), index=1
  j = s32[] add(i, one)
  y = f32[4] multiply(x, w)
  ROOT t = (s32[], f32[4]) tuple(j, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  init = (s32[], f32[4]) constant((0, {1, 1, 1, 1}))
  i0 = s32[] get-tuple-element(init), index=0
  x0 = f32[4] get-tuple-element(init), index=1
  x1 = f32[4] add(x0, p)
  s0 = (s32[], f32[4]) tuple(i0, x1)
  ROOT loop = (s32[], f32[4]) while(s0), condition=cond, body=body
}
"""

MODULES = {"two_equal": TWO_EQUAL, "signed_zeros": SIGNED_ZEROS, "nested": NESTED,
           "in_a_callee": IN_A_CALLEE, "in_a_loop": IN_A_LOOP}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_round_trip(name):
    module = parse(MODULES[name])
    text = hlo.print_module(module)
    assert hlo.print_module(hlo.parse_module(text)) == text


@pytest.mark.parametrize("pass_name", passes.pass_names())
@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_pass_keeps_the_numbers(name, pass_name):
    module = parse(MODULES[name])
    passes.make_pass(pass_name).run(module)
    text = hlo.print_module(module)
    assert hlo.print_module(hlo.parse_module(text)) == text
    assert_same_results(MODULES[name], module)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_cpu_pipeline_leaves_array_constants(name):
    module = parse(MODULES[name])
    passes.cpu_pipeline().run(module)
    assert_same_results(MODULES[name], module)
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "constant":
                assert instr.shape.is_array, instr
    # and it runs
    args = random_args(module)
    expected = hlo.evaluate(parse(MODULES[name]), args)
    actual = backend_cpu.compile(module).run(*args)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a, e)


def test_cse_merges_equal_tuple_constants():
    module = parse(TWO_EQUAL)
    assert passes.make_pass("cse").run(module)
    assert opcodes(module.entry).count("constant") == 1
    assert_same_results(TWO_EQUAL, module)


def test_cse_keeps_tuple_constants_that_differ_in_bits():
    module = parse(SIGNED_ZEROS)
    assert not passes.make_pass("cse").run(module)      # +0 and -0 stay apart


def test_tuple_simplifier_spells_tuple_constants_as_tuples():
    module = parse(TWO_EQUAL)
    assert passes.make_pass("tuple-simplifier").run(module)
    passes.make_pass("dce").run(module)
    assert hlo.print_module(module).strip() == dedent("""
        HloModule tc

        ENTRY %e (p: f32[2]) -> f32[2] {
          %p = f32[2] parameter(0)
          %constant = f32[2] constant({1, 2})
          %constant.2 = f32[2] constant({1, 2})
          %a = f32[2] add(%constant, %constant.2)
          ROOT %r = f32[2] add(%a, %p)
        }""").strip()


def test_inliner_copies_tuple_literals():
    module = parse(IN_A_CALLEE)
    assert passes.make_pass("call-inliner").run(module)
    (constant,) = [i for i in module.entry.instructions if i.opcode == "constant"]
    assert isinstance(constant.literal, tuple)
    assert constant.literal[0].dtype == np.float16 and constant.literal[1].dtype == np.uint64
    assert_same_results(IN_A_CALLEE, module)
