"""The trip-count analysis of counted while loops (passes/while_loop_analysis.py): the
count it gives is the number of trips the evaluator runs, for every compare direction,
both operand orders, add and subtract; loops not of the counted form, or whose counter
would wrap around its type, are unknown (None). The annotator prints XLA's form."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo
from xlapy.passes import WhileTripCountAnnotator, trip_count

from tests.passes.helpers import parse


def counted(ty="s32", init="0", limit="5", direction="LT", update="add(i, s)", step="1",
            compare="compare(i, c)", init_op=None):
    """A loop over (counter i, trips done t): t counts the trips, whatever i does."""
    init_op = init_op or f"{ty}[] constant({init})"
    return f"""
    HloModule m
    cond {{
      p = ({ty}[], s32[]) parameter(0)
      i = {ty}[] get-tuple-element(p), index=0
      c = {ty}[] constant({limit})
      ROOT lt = pred[] {compare}, direction={direction}
    }}
    body {{
      p = ({ty}[], s32[]) parameter(0)
      i = {ty}[] get-tuple-element(p), index=0
      s = {ty}[] constant({step})
      n = {ty}[] {update}
      t = s32[] get-tuple-element(p), index=1
      one = s32[] constant(1)
      t1 = s32[] add(t, one)
      ROOT r = ({ty}[], s32[]) tuple(n, t1)
    }}
    ENTRY e {{
      a = s32[] parameter(0)
      i0 = {init_op}
      z = s32[] constant(0)
      init = ({ty}[], s32[]) tuple(i0, z)
      w = ({ty}[], s32[]) while(init), condition=cond, body=body
      ROOT t = s32[] get-tuple-element(w), index=1
    }}"""


def loop_of(module):
    return next(i for i in module.entry.instructions if i.opcode == "while")


def evaluated_trips(module) -> int:
    return int(hlo.evaluate(module, [np.int32(0)])[0])


CASES = [
    dict(),                                                   # i < 5, i += 1: 5
    dict(init="5"),                                           # never runs
    dict(init="4"),                                           # once
    dict(limit="0", init="0"),                                # 0
    dict(direction="LE", limit="7", step="3"),                # 0,3,6: 3
    dict(direction="GT", init="10", limit="0", update="subtract(i, s)", step="3"),
    dict(direction="GE", init="10", limit="-2", update="add(i, s)", step="-4"),
    dict(direction="NE", init="2", limit="14", step="4"),     # 2,6,10: 3
    dict(direction="EQ", init="3", limit="3"),                # once
    dict(compare="compare(c, i)", direction="GT", limit="6"),  # 6 > i
    dict(update="add(s, i)", step="2", limit="9"),            # 0,2,4,6,8: 5
    dict(ty="u8", init="250", limit="255"),                   # 250..254: 5
    dict(ty="s64", init="-3", limit="3", step="2"),           # -3,-1,1: 3
    dict(ty="u32", init="0", limit="17", step="4"),           # 0,4,8,12,16: 5
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "fori")
def test_the_count_is_what_the_evaluator_runs(case):
    module = parse(counted(**case))
    assert trip_count(loop_of(module)) == evaluated_trips(module)


@pytest.mark.parametrize("case", [
    dict(ty="s8", init="0", limit="127", step="2"),           # 126 + 2 wraps to -128
    dict(ty="u8", init="0", limit="255", direction="LE"),     # 255 + 1 wraps to 0: forever
    dict(direction="NE", init="0", limit="5", step="2"),      # steps over 5
    dict(direction="LT", step="-1"),                           # moves away from the limit
    dict(step="0"),                                            # does not move
    dict(update="multiply(i, s)", step="2", init="1"),        # not an add
    dict(init_op="s32[] add(a, a)"),                          # init not a constant
    dict(ty="f32", init="0", limit="5", step="1"),            # not an integer
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_other_loops_are_unknown(case):
    assert trip_count(loop_of(parse(counted(**case)))) is None


def test_a_compare_against_another_leaf_is_unknown():
    module = parse("""
    HloModule m
    cond {
      p = (s32[], s32[]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      n = s32[] get-tuple-element(p), index=1
      ROOT lt = pred[] compare(i, n), direction=LT
    }
    body {
      p = (s32[], s32[]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      n = s32[] get-tuple-element(p), index=1
      ROOT r = (s32[], s32[]) tuple(i1, n)
    }
    ENTRY e {
      z = s32[] constant(0)
      k = s32[] constant(4)
      init = (s32[], s32[]) tuple(z, k)
      ROOT w = (s32[], s32[]) while(init), condition=cond, body=body
    }""")
    assert trip_count(module.entry.root) is None


def test_a_scalar_state_is_its_own_counter():
    module = parse("""
    HloModule m
    cond {
      p = s32[] parameter(0)
      c = s32[] constant(7)
      ROOT lt = pred[] compare(p, c), direction=LT
    }
    body {
      p = s32[] parameter(0)
      two = s32[] constant(2)
      ROOT n = s32[] add(p, two)
    }
    ENTRY e {
      z = s32[] constant(0)
      ROOT w = s32[] while(z), condition=cond, body=body
    }""")
    assert trip_count(module.entry.root) == 4
    assert hlo.evaluate(module, [])[0] == 8


def test_the_annotator_writes_xla_s_backend_config():
    module = parse(counted(limit="3"))
    assert WhileTripCountAnnotator().run(module)
    text = module.to_text()
    assert 'backend_config={"known_trip_count":{"n":"3"},' \
           '"known_induction_variable":{"tuple_index":"0"}}' in text
    assert hlo.parse_module(text).to_text() == text          # prints back the same
    assert not WhileTripCountAnnotator().run(module)         # a config of its own is kept
    unknown = parse(counted(init_op="s32[] add(a, a)"))
    assert not WhileTripCountAnnotator().run(unknown)
