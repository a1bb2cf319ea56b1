"""Loop-invariant code motion (passes/while_loop_invariant_code_motion.py): invariant
work of a body (a transpose and an exp of the weights a recurrent body reads every
trip) is computed once before the loop and read from a new state leaf; cheap ops
(broadcasts of scalars) and values larger than what they read stay; rng, side effects
and what reads them are never moved; the numbers are the evaluator's for 0, 1 and many
trips."""
from __future__ import annotations

import pytest

from xlapy.passes import WhileLoopInvariantCodeMotion

from tests.passes.helpers import assert_same_results, parse


def rnn(trips: int = 4, extra: str = "", h_next: str = "t") -> str:
    """h <- tanh(h @ transpose(w) + exp(b)), w and b passed through."""
    return f"""
    HloModule m
    cond {{
      p = (s32[], f32[2,4], f32[4,4], f32[4], f32[]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      c = s32[] constant({trips})
      ROOT lt = pred[] compare(i, c), direction=LT
    }}
    body {{
      p = (s32[], f32[2,4], f32[4,4], f32[4], f32[]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      h = f32[2,4] get-tuple-element(p), index=1
      w = f32[4,4] get-tuple-element(p), index=2
      b = f32[4] get-tuple-element(p), index=3
      s = f32[] get-tuple-element(p), index=4
      wt = f32[4,4] transpose(w), dimensions={{1,0}}
      d = f32[2,4] dot(h, wt), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
      e = f32[4] exponential(b)
      eb = f32[2,4] broadcast(e), dimensions={{1}}
      sb = f32[2,4] broadcast(s), dimensions={{}}
      a = f32[2,4] add(d, eb)
      a2 = f32[2,4] multiply(a, sb)
      t = f32[2,4] tanh(a2)
      {extra}
      ROOT r = (s32[], f32[2,4], f32[4,4], f32[4], f32[]) tuple(i1, {h_next}, w, b, s)
    }}
    ENTRY e {{
      h0 = f32[2,4] parameter(0)
      w0 = f32[4,4] parameter(1)
      b0 = f32[4] parameter(2)
      s0 = f32[] parameter(3)
      z = s32[] constant(0)
      init = (s32[], f32[2,4], f32[4,4], f32[4], f32[]) tuple(z, h0, w0, b0, s0)
      w = (s32[], f32[2,4], f32[4,4], f32[4], f32[]) while(init), condition=cond, body=body
      ROOT h = f32[2,4] get-tuple-element(w), index=1
    }}"""


def body_opcodes(module) -> list[str]:
    return [i.opcode for i in module.computation("body").instructions]


def entry_opcodes(module) -> list[str]:
    return [i.opcode for i in module.entry.instructions]


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_the_transpose_and_exp_of_the_weights_run_once(trips):
    text = rnn(trips)
    module = parse(text)
    assert WhileLoopInvariantCodeMotion().run(module)
    body = body_opcodes(module)
    assert "transpose" not in body and "exponential" not in body
    assert {"transpose", "exponential"} <= set(entry_opcodes(module))
    # the broadcast of the scalar leaf and the per-trip work stay
    assert body.count("broadcast") == 2 and "dot" in body and "tanh" in body
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    assert len(loop.shape.tuple_shapes) == 7          # two new leaves
    assert_same_results(text, module)
    assert not WhileLoopInvariantCodeMotion().run(module)   # a second run finds nothing


def test_cheap_and_growing_values_stay():
    # outer product of two invariant vectors: [64,64] from 2x64 floats -- grows memory
    text = """
    HloModule m
    cond {
      p = (s32[], f32[64,64], f32[64]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      c = s32[] constant(3)
      ROOT lt = pred[] compare(i, c), direction=LT
    }
    body {
      p = (s32[], f32[64,64], f32[64]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      x = f32[64,64] get-tuple-element(p), index=1
      v = f32[64] get-tuple-element(p), index=2
      r = f32[64,64] broadcast(v), dimensions={0}
      q = f32[64,64] broadcast(v), dimensions={1}
      o = f32[64,64] multiply(r, q)
      x1 = f32[64,64] add(x, o)
      ROOT t = (s32[], f32[64,64], f32[64]) tuple(i1, x1, v)
    }
    ENTRY e {
      x0 = f32[64,64] parameter(0)
      v0 = f32[64] parameter(1)
      z = s32[] constant(0)
      init = (s32[], f32[64,64], f32[64]) tuple(z, x0, v0)
      w = (s32[], f32[64,64], f32[64]) while(init), condition=cond, body=body
      ROOT x = f32[64,64] get-tuple-element(w), index=1
    }"""
    module = parse(text)
    assert not WhileLoopInvariantCodeMotion().run(module)


@pytest.mark.parametrize("extra,h_next", [
    # an rng over invariant bounds: a new draw every trip, never hoisted
    ("""lo = f32[] constant(0)
      u = f32[2,4] rng(lo, s), distribution=rng_uniform
      t2 = f32[2,4] add(t, u)""", "t2"),
    # a custom-call (a side effect by default) reading only invariant leaves, and an
    # exp of its result: neither moves
    ("""cc = f32[4,4] custom-call(w), custom_call_target="foo"
      ce = f32[4,4] exponential(cc)
      cd = f32[2,4] dot(t, ce), lhs_contracting_dims={1}, rhs_contracting_dims={0}""", "cd"),
])
def test_side_effects_rng_and_their_readers_stay(extra, h_next):
    module = parse(rnn(3, extra, h_next))
    assert WhileLoopInvariantCodeMotion().run(module)     # the transpose and exp still go
    body = body_opcodes(module)
    for opcode in ("rng", "custom-call"):
        assert body.count(opcode) == extra.count(f" {opcode}(")
    if "custom-call" in extra:
        assert body.count("exponential") == 1             # exp(cc) stays, exp(b) went
    assert "rng" not in entry_opcodes(module) and "custom-call" not in entry_opcodes(module)


def test_a_shared_body_is_left_alone():
    text = rnn(2).replace(
        "ROOT h = f32[2,4] get-tuple-element(w), index=1",
        "w2 = (s32[], f32[2,4], f32[4,4], f32[4], f32[]) while(init), condition=cond, "
        "body=body\n      ROOT h = f32[2,4] get-tuple-element(w2), index=1")
    module = parse(text)
    assert not WhileLoopInvariantCodeMotion().run(module)


def test_a_hoisted_value_reads_the_init_in_the_leaf_s_layout():
    # w arrives column-major, the leaf is row-major, and the hoisted exp reads it through
    # a bitcast (which reinterprets bytes): outside the loop it must read the leaf's bytes
    text = """
    HloModule m
    cond {
      p = (s32[], f32[3,2], f32[2,3]{1,0}) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      c = s32[] constant(2)
      ROOT lt = pred[] compare(i, c), direction=LT
    }
    body {
      p = (s32[], f32[3,2], f32[2,3]{1,0}) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      x = f32[3,2] get-tuple-element(p), index=1
      w = f32[2,3]{1,0} get-tuple-element(p), index=2
      wb = f32[3,2]{1,0} bitcast(w)
      e = f32[3,2] exponential(wb)
      x1 = f32[3,2] multiply(x, e)
      ROOT r = (s32[], f32[3,2], f32[2,3]{1,0}) tuple(i1, x1, w)
    }
    ENTRY e {
      x0 = f32[3,2] parameter(0)
      w0 = f32[2,3]{1,0} parameter(1)
      wc = f32[2,3]{0,1} copy(w0)
      z = s32[] constant(0)
      init = (s32[], f32[3,2], f32[2,3]{1,0}) tuple(z, x0, wc)
      l = (s32[], f32[3,2], f32[2,3]{1,0}) while(init), condition=cond, body=body
      ROOT x = f32[3,2] get-tuple-element(l), index=1
    }"""
    module = parse(text)
    assert WhileLoopInvariantCodeMotion().run(module)
    assert "exponential" not in body_opcodes(module)
    assert_same_results(text, module)
