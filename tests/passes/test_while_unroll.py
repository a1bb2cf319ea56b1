"""Full unrolling of small counted loops (passes/while_loop_unroll.py): the unrolled
module computes what the loop did (0, 1 and many trips, tuple states of several
dtypes and layouts); loops with an unknown count, a side effect, an rng, or more work
than the budget stay loops; and in the CPU pipeline JAX's threefry loop (dropout)
leaves no loop and one kernel."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo, passes
from xlapy.passes import WhileLoopUnroll
from xlapy.passes.hlo_utils import count_kernels

from tests.corpus_util import assert_all_close
from tests.passes.helpers import assert_same_results, parse


def state_loop(trips: int, extra_body: str = "", init: str = "0", budget_ops: int = 0,
               layout: str = "{1,0}") -> str:
    """(i: s32, x: f32[2,3] in `layout`, y: u32[4], b: pred[]) over `trips` trips."""
    pad = "\n      ".join(f"pad{k} = f32[2,3]{layout} negate(x)" for k in range(budget_ops))
    return f"""
    HloModule m
    cond {{
      p = (s32[], f32[2,3]{layout}, u32[4], pred[]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      c = s32[] constant({trips})
      ROOT lt = pred[] compare(i, c), direction=LT
    }}
    body {{
      p = (s32[], f32[2,3]{layout}, u32[4], pred[]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      x = f32[2,3]{layout} get-tuple-element(p), index=1
      fi = f32[] convert(i)
      bi = f32[2,3]{layout} broadcast(fi), dimensions={{}}
      x1 = f32[2,3]{layout} multiply(x, bi)
      x2 = f32[2,3]{layout} add(x1, x)
      y = u32[4] get-tuple-element(p), index=2
      k = u32[] constant(2654435761)
      kb = u32[4] broadcast(k), dimensions={{}}
      y1 = u32[4] multiply(y, kb)
      s = u32[] constant(13)
      sb = u32[4] broadcast(s), dimensions={{}}
      y2 = u32[4] shift-right-logical(y1, sb)
      y3 = u32[4] xor(y1, y2)
      b = pred[] get-tuple-element(p), index=3
      b1 = pred[] not(b)
      {pad}
      {extra_body}
      ROOT r = (s32[], f32[2,3]{layout}, u32[4], pred[]) tuple(i1, x2, y3, b1)
    }}
    ENTRY e {{
      x0 = f32[2,3]{{1,0}} parameter(0)
      y0 = u32[4] parameter(1)
      xl = f32[2,3]{layout} copy(x0)
      z = s32[] constant({init})
      f = pred[] constant(false)
      init = (s32[], f32[2,3]{layout}, u32[4], pred[]) tuple(z, xl, y0, f)
      ROOT w = (s32[], f32[2,3]{layout}, u32[4], pred[]) while(init), condition=cond, body=body
    }}"""


def whiles(module):
    return [i for i in module.instructions() if i.opcode == "while"]


@pytest.mark.parametrize("trips", [0, 1, 2, 5])
@pytest.mark.parametrize("layout", ["{1,0}", "{0,1}"])
def test_unrolled_loops_compute_what_the_loop_did(trips, layout):
    text = state_loop(trips, layout=layout)
    module = parse(text)
    assert WhileLoopUnroll().run(module)
    assert not whiles(module)
    assert len(module.computations) == 1          # cond and body are gone
    assert_same_results(text, module)


def test_a_loop_that_starts_past_its_limit_is_its_init():
    text = state_loop(3, init="7")
    module = parse(text)
    assert WhileLoopUnroll().run(module)
    assert not whiles(module)
    assert_same_results(text, module)


def test_budget_and_unknown_counts_keep_the_loop():
    # 5 trips of ~ 30 ops is within the default budget, but not within 100
    text = state_loop(5, budget_ops=20)
    assert not WhileLoopUnroll(budget=100).run(parse(text))
    assert WhileLoopUnroll().run(parse(text))
    # a count the analysis cannot see: the limit is a parameter of the entry
    unknown = state_loop(5).replace("c = s32[] constant(5)", "c = s32[] constant(5)\n"
                                    "      q = s32[] add(c, i)").replace(
        "ROOT lt = pred[] compare(i, c)", "ROOT lt = pred[] compare(i, q)")
    assert not WhileLoopUnroll().run(parse(unknown))


@pytest.mark.parametrize("extra", [
    # an rng draws a new number each trip: unrolling would keep that, but rng ops are
    # never cloned or moved (their state is hidden)
    """lo = f32[] constant(0)
      hi = f32[] constant(1)
      u = f32[2,3] rng(lo, hi), distribution=rng_uniform""",
    # a side effect
    """tok = token[] after-all()
      o = token[] outfeed(y3, tok)""",
    # a custom-call (side effects are the default)
    """cc = u32[4] custom-call(y3), custom_call_target="foo\"""",
])
def test_bodies_with_side_effects_or_rng_stay_loops(extra):
    module = parse(state_loop(3, extra_body=extra))
    assert not WhileLoopUnroll().run(module)
    assert len(whiles(module)) == 1


def test_dropout_s_threefry_is_one_kernel_in_the_pipeline():
    path = Path(__file__).parents[1] / "models" / "dropout.hlo"
    module = hlo.parse_module(path.read_text())
    assert len(whiles(module)) == 2
    passes.cpu_pipeline().run(module)
    assert not whiles(module)
    assert count_kernels(module) == 1
    data = np.load(path.with_suffix(".npz"))
    got = hlo.evaluate(module, [data["arg0"], data["arg1"]])[0]
    np.testing.assert_array_equal(got == 0, data["out0"] == 0)   # XLA's mask exactly
    assert_all_close([got], [data["out0"]], "dropout")


def test_a_body_around_a_dot_stays_a_loop():
    # trips x size is small, but a dot does not fuse across trips: the loop stays
    text = state_loop(3, extra_body="""xt = f32[3,2] transpose(x), dimensions={1,0}
      xd = f32[2,2] dot(x, xt), lhs_contracting_dims={1}, rhs_contracting_dims={0}""")
    assert not WhileLoopUnroll().run(parse(text))
