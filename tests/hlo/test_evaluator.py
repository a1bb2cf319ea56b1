"""The evaluator's API: argument checks, results, single instructions, control flow."""
import re

import numpy as np
import pytest

from xlapy import hlo
from xlapy.hlo import OPCODES, HloComputation, HloInstruction, HloModule, Shape
from xlapy.hlo.evaluator import (EvaluationError, evaluate, evaluate_computation,
                           evaluate_instruction)
from tests.hlo.evaluator_util import binary_computation, run_text

ADD_MODULE = """
    HloModule m
    ENTRY e {
      a = f32[2,3] parameter(0)
      b = f32[2,3] parameter(1)
      s = f32[2,3] add(a, b)
      n = s32[] constant(7)
      inner = (s32[], f32[2,3]) tuple(n, a)
      ROOT t = (f32[2,3], (s32[], f32[2,3])) tuple(s, inner)
    }"""


def _add_module_args():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    return a, np.ones((2, 3), np.float32)


def test_every_opcode_has_reference_semantics():
    missing = [name for name, info in OPCODES.items() if info.ref is None]
    assert missing == []


def test_nested_tuple_results_are_flattened_in_order():
    a, b = _add_module_args()
    out = run_text(ADD_MODULE, a, b)
    assert len(out) == 3
    np.testing.assert_array_equal(out[0], a + b)
    assert out[1] == 7 and out[1].dtype == np.int32
    np.testing.assert_array_equal(out[2], a)
    out[2][0, 0] = 99          # results are owned: writing does not touch the argument
    assert a[0, 0] == 0


def test_non_tuple_root_gives_one_element_list():
    out = run_text("""
        HloModule m
        ENTRY e {
          p = s32[3] parameter(0)
          ROOT n = s32[3] negate(p)
        }""", np.array([1, 2, 3], np.int32))
    assert isinstance(out, list) and len(out) == 1
    np.testing.assert_array_equal(out[0], [-1, -2, -3])


@pytest.mark.parametrize("args,message", [
    ([np.zeros((2, 3), np.float32)], "takes 2 arguments, got 1"),
    ([np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)], "expected shape (2, 3)"),
    ([np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float64)], "expected dtype float32"),
])
def test_bad_arguments_raise_clear_errors(args, message):
    module = hlo.parse_module(ADD_MODULE)
    with pytest.raises(EvaluationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        evaluate(module, args)


def test_parameters_listed_out_of_order_bind_by_number():
    out = run_text("""
        HloModule m
        ENTRY e {
          y = f32[2] parameter(1)
          x = f32[2] parameter(0)
          ROOT d = f32[2] subtract(x, y)
        }""", np.array([5, 5], np.float32), np.array([1, 2], np.float32))
    np.testing.assert_array_equal(out[0], [4, 3])


def test_elided_constant_cannot_be_evaluated():
    with pytest.raises(EvaluationError, match="elided"):
        run_text("""
            HloModule m
            ENTRY e {
              ROOT c = f32[1000] constant({...})
            }""")


@pytest.mark.parametrize("line,message", [
    ("ROOT r = (u32[2], u32[4]) rng-bit-generator(u32[2] parameter(0)), algorithm=rng_default",
     "rng-bit-generator: the state must be a u64 vector, got uint32"),
    ('ROOT r = u32[2] custom-call(u32[2] parameter(0)), custom_call_target="foo"',
     "unsupported custom-call target 'foo'"),
])
def test_unsupported_ops_raise(line, message):
    text = "HloModule m\nENTRY e {\n  p = u32[2] parameter(0)\n  " + line.replace("u32[2] parameter(0)", "p") + "\n}"
    with pytest.raises(EvaluationError, match=re.escape(message)):
        run_text(text, np.zeros(2, np.uint32))


def test_evaluate_instruction_with_a_called_computation():
    comp = HloComputation("entry")
    x = comp.add_instruction(HloInstruction("parameter", Shape("s32", (2, 3)), name="x", parameter_number=0))
    init = comp.add_instruction(HloInstruction("constant", Shape("s32", ()), name="zero",
                                               literal=np.array(0, np.int32)))
    reduce = comp.add_instruction(HloInstruction(
        "reduce", Shape("s32", (3,)), [x, init], {"dimensions": (0,), "to_apply": binary_computation("add", "s32")},
        name="sum"))
    value = evaluate_instruction(reduce, [np.arange(6, dtype=np.int32).reshape(2, 3), np.array(10, np.int32)])
    np.testing.assert_array_equal(value, [13, 15, 17])


def test_evaluate_computation_returns_tuple_values():
    module = hlo.parse_module(ADD_MODULE)
    a, b = _add_module_args()
    value = evaluate_computation(module.entry, [a, b])
    assert isinstance(value, tuple) and isinstance(value[1], tuple)


def test_long_chains_do_not_recurse():
    # 5000 dependent instructions: the evaluator walks them in post order, not recursively.
    comp = HloComputation("entry")
    shape = Shape("s32", ())
    prev = comp.add_instruction(HloInstruction("parameter", shape, name="p", parameter_number=0))
    for i in range(5000):
        prev = comp.add_instruction(HloInstruction("negate", shape, [prev], name=f"n{i}"))
    comp.root = prev
    module = HloModule("chain")
    module.add_computation(comp, entry=True)
    assert evaluate(module, [np.array(3, np.int32)])[0] == 3


# --- control flow ------------------------------------------------------------------------

def test_while_loop_counts():
    out = run_text("""
        HloModule m
        cond {
          cs = (s32[], f32[2]) parameter(0)
          ci = s32[] get-tuple-element(cs), index=0
          n = s32[] constant(5)
          ROOT lt = pred[] compare(ci, n), direction=LT
        }
        body {
          s = (s32[], f32[2]) parameter(0)
          i = s32[] get-tuple-element(s), index=0
          v = f32[2] get-tuple-element(s), index=1
          one = s32[] constant(1)
          two = f32[] constant(2)
          b = f32[2] broadcast(two), dimensions={}
          i1 = s32[] add(i, one)
          v2 = f32[2] multiply(v, b)
          ROOT t = (s32[], f32[2]) tuple(i1, v2)
        }
        ENTRY e {
          x = f32[2] parameter(0)
          zero = s32[] constant(0)
          init = (s32[], f32[2]) tuple(zero, x)
          ROOT w = (s32[], f32[2]) while(init), condition=cond, body=body
        }""", np.array([1, -3], np.float32))
    assert out[0] == 5
    np.testing.assert_array_equal(out[1], [32, -96])


CONDITIONAL = """
    HloModule m
    neg {
      p = f32[2] parameter(0)
      ROOT r = f32[2] negate(p)
    }
    dbl {
      q = f32[2] parameter(0)
      ROOT r2 = f32[2] add(q, q)
    }
    ENTRY e {
      k = {sel} parameter(0)
      x = f32[2] parameter(1)
      ROOT c = f32[2] conditional(k, x, x), {branches}
    }"""


@pytest.mark.parametrize("sel,branches,value,expected", [
    ("pred[]", "true_computation=neg, false_computation=dbl", np.True_, [-1, -2]),
    ("pred[]", "true_computation=neg, false_computation=dbl", np.False_, [2, 4]),
    ("s32[]", "branch_computations={neg, dbl}", np.int32(0), [-1, -2]),
    ("s32[]", "branch_computations={neg, dbl}", np.int32(1), [2, 4]),
    ("s32[]", "branch_computations={neg, dbl}", np.int32(7), [2, 4]),     # out of range: last
    ("s32[]", "branch_computations={neg, dbl}", np.int32(-1), [2, 4]),
])
def test_conditional_branch_selection(sel, branches, value, expected):
    text = CONDITIONAL.replace("{sel}", sel).replace("{branches}", branches)
    out = run_text(text, np.asarray(value), np.array([1, 2], np.float32))
    np.testing.assert_array_equal(out[0], expected)


def test_call_fusion_and_opt_barrier():
    out = run_text("""
        HloModule m
        sq {
          p = f32[3] parameter(0)
          ROOT r = f32[3] multiply(p, p)
        }
        fused {
          a = f32[3] parameter(0)
          b = f32[3] parameter(1)
          ROOT s = f32[3] subtract(a, b)
        }
        ENTRY e {
          x = f32[3] parameter(0)
          c = f32[3] call(x), to_apply=sq
          f = f32[3] fusion(c, x), kind=kLoop, calls=fused
          ROOT o = f32[3] opt-barrier(f)
        }""", np.array([1, 2, 3], np.float32))
    np.testing.assert_array_equal(out[0], [0, 2, 6])


def test_tuple_constant_and_malformed_module_errors():
    out = run_text("""
        HloModule m
        ENTRY e {
          ROOT c = (s32[2], f32[]) constant(({1, 2}, 3))
        }""")
    np.testing.assert_array_equal(out[0], [1, 2])
    assert out[1] == 3
    # A shape the verifier would reject is an EvaluationError naming the instruction.
    comp = HloComputation("entry")
    p = comp.add_instruction(HloInstruction("parameter", Shape("f32", (2, 3)), name="p", parameter_number=0))
    comp.root = comp.add_instruction(HloInstruction("reshape", Shape("f32", (4,)), [p], name="bad"))
    module = HloModule("bad")
    module.add_computation(comp, entry=True)
    with pytest.raises(EvaluationError, match="bad .reshape."):
        evaluate(module, [np.zeros((2, 3), np.float32)])
