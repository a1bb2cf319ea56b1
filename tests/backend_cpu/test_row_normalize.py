"""Row normalization in place (emitters/row_normalize.py): softmax rows compute exp once and
scale by the reciprocal of the sum; results stay within DESIGN.md's tolerances."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo
from xlapy.backend_cpu.emitters import row_normalize
from xlapy.backend_cpu.elemental.hoisting import plan_hoisting
from tests.backend_cpu.helpers import check_against_evaluator, uniquify


def softmax_fusion(etype: str, rows: int = 12, cols: int = 70, reshapes: bool = True) -> str:
    """A fused softmax as XLA writes it (the sum goes through size-1 reshapes)."""
    sum_path = (f"r1 = {etype}[{rows},1] reshape(sm)\n  r2 = {etype}[{rows}] reshape(r1)\n"
                f"  sb = {etype}[{rows},{cols}] broadcast(r2), dimensions={{0}}" if reshapes else
                f"sb = {etype}[{rows},{cols}] broadcast(sm), dimensions={{0}}")
    return f"""HloModule softmax_{etype}
max {{
  a = {etype}[] parameter(0)
  b = {etype}[] parameter(1)
  ROOT m = {etype}[] maximum(a, b)
}}
add {{
  a = {etype}[] parameter(0)
  b = {etype}[] parameter(1)
  ROOT s = {etype}[] add(a, b)
}}
fused {{
  x = {etype}[{rows},{cols}] parameter(0)
  ninf = {etype}[] constant(-inf)
  mx = {etype}[{rows}] reduce(x, ninf), dimensions={{1}}, to_apply=max
  mb = {etype}[{rows},{cols}] broadcast(mx), dimensions={{0}}
  d = {etype}[{rows},{cols}] subtract(x, mb)
  ex = {etype}[{rows},{cols}] exponential(d)
  z = {etype}[] constant(0)
  sm = {etype}[{rows}] reduce(ex, z), dimensions={{1}}, to_apply=add
  {sum_path}
  ROOT r = {etype}[{rows},{cols}] divide(ex, sb)
}}
ENTRY e {{
  x = {etype}[{rows},{cols}] parameter(0)
  ROOT f = {etype}[{rows},{cols}] fusion(x), kind=kLoop, calls=fused
}}"""


def _root(text):
    module = hlo.parse_module(uniquify(text))
    return module.entry.root.fused_computation.root


@pytest.mark.parametrize("etype", ["f32", "f64"])
@pytest.mark.parametrize("reshapes", [True, False])
def test_the_softmax_pattern_is_recognized(etype, reshapes):
    root = _root(softmax_fusion(etype, reshapes=reshapes))
    reduce = row_normalize.match(root, plan_hoisting(root))
    assert reduce is not None and reduce.opcode == "reduce"


def test_narrow_types_keep_the_generic_emission():
    root = _root(softmax_fusion("f16"))
    assert row_normalize.match(root, plan_hoisting(root)) is None


def test_a_divide_by_another_rows_sum_is_not_matched():
    text = softmax_fusion("f32").replace("divide(ex, sb)", "divide(d, sb)")
    root = _root(text)
    assert row_normalize.match(root, plan_hoisting(root)) is None


@pytest.mark.parametrize("etype,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_results_match_the_evaluator(etype, dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((12, 70)) * 8).astype(dtype)
    x[2, :] = -np.inf
    x[2, 5] = 0.0                 # one finite element: that row is one-hot
    x[4, 9] = np.inf              # an inf: the evaluator's nan row
    x[7, 1] = np.nan
    out = check_against_evaluator(softmax_fusion(etype), [x], f"softmax {etype}")[0]
    assert out[2, 5] == 1.0
    np.testing.assert_allclose(out[0].sum(), 1.0, rtol=1e-5)


def test_odd_row_lengths_and_partitions():
    x = np.random.default_rng(4).standard_normal((33, 1029)).astype(np.float32)
    check_against_evaluator(softmax_fusion("f32", 33, 1029), [x], "softmax 33x1029")
