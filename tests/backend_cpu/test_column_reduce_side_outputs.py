"""A column reduce and a loop over the shape it walks, both computed from the same
inputs (a bias gradient and the gradient it sums), are one kernel: multi-output
fusion merges the siblings (passes/multi_output_fusion.py, `_side_partner`) and the
column reduce's walk stores the loop's values as it visits each element
(backend_cpu/emitters/column_reduce.py, side outputs)."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from tests.corpus_util import assert_all_close

COLUMN_STRATEGIES = {"column_reduces", "column_reduce_epilogue"}


def module(shape, dims, update: bool, side: str = "exponential(m)") -> str:
    """m = x * v (v a vector along the minor dimension) over `shape`; r = sum of m over
    `dims`; outputs: the side value (a function of m, or m itself) and r, or
    w - 0.01 * r when `update`. m reads one large array, so instruction fusion copies
    it into both consumers, which then read x as siblings."""
    t = f"f32[{','.join(map(str, shape))}]"
    kept = [n for d, n in enumerate(shape) if d not in dims]
    rt = f"f32[{','.join(map(str, kept))}]"
    side_value = f"e = {t} {side}" if side != "m" else f"e = {t} copy(m)"
    epilogue = f"""
  c = f32[] constant(0.01)
  cb = {rt} broadcast(c), dimensions={{}}
  s = {rt} multiply(cb, r)
  out = {rt} subtract(w, s)""" if update else f"\n  out = {rt} copy(r)"
    return f"""HloModule m
add {{ a = f32[] parameter(0) b = f32[] parameter(1) ROOT r = f32[] add(a, b) }}
ENTRY e {{
  x = {t} parameter(0)
  v = f32[{shape[-1]}] parameter(1)
  w = {rt} parameter(2)
  vb = {t} broadcast(v), dimensions={{{len(shape) - 1}}}
  m = {t} multiply(x, vb)
  z = f32[] constant(0)
  r = {rt} reduce(m, z), dimensions={{{','.join(map(str, dims))}}}, to_apply=add
  {side_value}{epilogue}
  ROOT t = ({t}, {rt}) tuple(e, out)
}}
"""


def compile_and_check(text: str):
    exe = backend_cpu.compile(hlo.parse_module(text),
                              backend_cpu.CompileOptions(pipeline="default", cache=False,
                                                         disk_cache=False))
    reference = hlo.parse_module(text)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.shape.dims).astype(np.float32)
            for p in reference.entry.parameters]
    assert_all_close(exe.run(*args), hlo.evaluate(reference, args), "compiled vs evaluator")
    return exe


@pytest.mark.parametrize("shape,dims", [
    ((300, 70), (0,)), ((2048, 48), (0,)), ((5, 130), (0,)), ((4, 6, 40), (0, 1)),
    ((3, 50, 17), (1,)), ((2, 9, 1030), (0, 1)),
])
@pytest.mark.parametrize("update", [False, True])
def test_a_loop_over_the_walked_shape_rides_along(shape, dims, update):
    exe = compile_and_check(module(shape, dims, update))
    choices = exe.kernel_strategies()
    assert len(choices) == 1, [c.kernel for c in choices]      # one kernel for both
    assert choices[0].chosen in COLUMN_STRATEGIES, choices[0]


def test_the_side_value_may_be_the_summed_value_itself():
    exe = compile_and_check(module((256, 64), (0,), True, side="m"))
    assert [c.chosen for c in exe.kernel_strategies()] in (["column_reduces"],
                                                          ["column_reduce_epilogue"])


@pytest.mark.parametrize("case", ["row reduce", "another shape"])
def test_other_siblings_stay_apart(case):
    if case == "row reduce":           # reduces the minor dimension: not a column walk
        text = module((64, 48), (1,), False)
    else:                              # the loop's shape is not the walked one
        text = module((64, 48), (0,), False).replace(
            "e = f32[64,48] exponential(m)",
            "m2 = f32[48,64] transpose(m), dimensions={1,0}\n  e = f32[48,64] exponential(m2)"
        ).replace("ROOT t = (f32[64,48], f32[48])", "ROOT t = (f32[48,64], f32[48])")
    exe = compile_and_check(text)
    assert len(exe.kernel_strategies()) == 2
    assert "per_output_loops" not in {c.chosen for c in exe.kernel_strategies()}


@pytest.mark.parametrize("dtype,reducer,init", [
    ("f16", "add", "0"), ("s32", "add", "0"), ("f32", "maximum", "-inf"), ("f64", "add", "0"),
])
def test_side_outputs_of_other_types_and_reducers(dtype, reducer, init):
    # f16 sums accumulate in an f32 scratch row; a max has no pairwise blocks; s32 wraps.
    text = module((1100, 40), (0,), True).replace("f32", dtype) \
        .replace("ROOT r = f32[] add(a, b)", "ROOT r = f32[] add(a, b)") \
        .replace(f"add {{ a = {dtype}[] parameter(0) b = {dtype}[] parameter(1) "
                 f"ROOT r = {dtype}[] add(a, b) }}",
                 f"add {{ a = {dtype}[] parameter(0) b = {dtype}[] parameter(1) "
                 f"ROOT r = {dtype}[] {reducer}(a, b) }}") \
        .replace(f"z = {dtype}[] constant(0)", f"z = {dtype}[] constant({init})")
    if dtype == "s32":
        text = text.replace("exponential(m)", "negate(m)").replace("constant(0.01)", "constant(3)")
    exe = backend_cpu.compile(hlo.parse_module(text),
                              backend_cpu.CompileOptions(pipeline="default", cache=False,
                                                         disk_cache=False))
    reference = hlo.parse_module(text)
    rng = np.random.default_rng(1)
    np_type = {"f16": np.float16, "s32": np.int32, "f64": np.float64}.get(dtype, np.float32)
    args = [(rng.standard_normal(p.shape.dims) * (50 if dtype == "s32" else 1)).astype(np_type)
            for p in reference.entry.parameters]
    assert_all_close(exe.run(*args), hlo.evaluate(reference, args), "compiled vs evaluator")
    choices = exe.kernel_strategies()
    assert len(choices) == 1 and choices[0].chosen in COLUMN_STRATEGIES, choices
