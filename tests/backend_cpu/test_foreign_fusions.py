"""Fusions made by XLA that read a contraction inside (issue 14, item 3).

XLA's optimized module of a small Flax ResNet holds YNNPACK fusions (`kind=kCustom`)
that chain convolutions, batch norm and a mean in one body. Our element generators
computed every convolution anew for each element that read it (a convolution of a
convolution): 6 s against 6 ms for the unoptimized module. Now the pipeline inlines
such fusions (passes/fusion_inliner.py) so each contraction is a GEMM kernel, and a
module compiled without the pipeline computes each inner contraction once into
scratch memory (emitters/loop_nest.py). Tests check structure and numbers, never time.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import passes
from xlapy.backend_cpu.emitters import loop_nest
from xlapy.passes.fusion_inliner import reads_a_contraction
from tests.corpus_util import assert_all_close

YNN_LIKE = """HloModule ynn

add {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT as = f32[] add(ax, ay)
}

chain {
  x = f32[2,12,12,4] parameter(0)
  w1 = f32[3,3,4,8] parameter(1)
  w2 = f32[3,3,8,8] parameter(2)
  scale = f32[8] parameter(3)
  zero = f32[] parameter(4)
  c1 = f32[2,6,6,8] convolution(x, w1), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f
  s = f32[2,6,6,8] broadcast(scale), dimensions={3}
  m = f32[2,6,6,8] multiply(c1, s)
  z = f32[2,6,6,8] broadcast(zero), dimensions={}
  r = f32[2,6,6,8] maximum(m, z)
  c2 = f32[2,6,6,8] convolution(r, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  short = f32[2,6,6,8] convolution(x, w1), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f
  sum = f32[2,6,6,8] add(c2, short)
  ROOT mean = f32[2,8] reduce(sum, zero), dimensions={1,2}, to_apply=add
}

ENTRY e {
  p_x = f32[2,12,12,4] parameter(0)
  p_w1 = f32[3,3,4,8] parameter(1)
  p_w2 = f32[3,3,8,8] parameter(2)
  p_scale = f32[8] parameter(3)
  p_zero = f32[] constant(0)
  ROOT f = f32[2,8] fusion(p_x, p_w1, p_w2, p_scale, p_zero), kind=kCustom, calls=chain, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
}
"""

DOT_EPILOGUE = """HloModule out

body {
  a = f32[16,32] parameter(0)
  b = f32[32,24] parameter(1)
  bias = f32[24] parameter(2)
  d = f32[16,24] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[16,24] broadcast(bias), dimensions={1}
  ROOT s = f32[16,24] add(d, bb)
}

ENTRY e {
  p_a = f32[16,32] parameter(0)
  p_b = f32[32,24] parameter(1)
  p_bias = f32[24] parameter(2)
  ROOT f = f32[16,24] fusion(p_a, p_b, p_bias), kind=kOutput, calls=body
}
"""

DOT_AT_ROOT = """HloModule root

body {
  a = f32[16,32] parameter(0)
  b = f32[32,24] parameter(1)
  n = f32[16,32] negate(a)
  ROOT d = f32[16,24] dot(n, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY e {
  p_a = f32[16,32] parameter(0)
  p_b = f32[32,24] parameter(1)
  ROOT f = f32[16,24] fusion(p_a, p_b), kind=kOutput, calls=body
}
"""

DOT_AS_OUTPUT_AND_READ = """HloModule both

body {
  a = f32[8,16] parameter(0)
  b = f32[16,8] parameter(1)
  d = f32[8,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[8,8] exponential(d)
  ROOT t = (f32[8,8], f32[8,8]) tuple(d, e)
}

ENTRY e {
  p_a = f32[8,16] parameter(0)
  p_b = f32[16,8] parameter(1)
  ROOT f = (f32[8,8], f32[8,8]) fusion(p_a, p_b), kind=kLoop, calls=body
}
"""

MODULES = {"ynn_like": YNN_LIKE, "dot_epilogue": DOT_EPILOGUE, "dot_at_root": DOT_AT_ROOT,
           "dot_as_output_and_read": DOT_AS_OUTPUT_AND_READ}


def _args(module):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(p.shape.dims) * 0.5).astype(np.float32)
            for p in module.entry.parameters]


@pytest.mark.parametrize("pipeline", [None, "default"])
@pytest.mark.parametrize("name", sorted(MODULES))
def test_numbers(name, pipeline):
    module = hlo.parse_module(MODULES[name])
    hlo.verify(module)
    args = _args(module)
    expected = hlo.evaluate(module, args)
    executable = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=pipeline))
    assert_all_close(executable.run(*args), expected, f"{name} pipeline {pipeline}")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_pipeline_leaves_no_fusion_reading_a_contraction(name):
    module = hlo.parse_module(MODULES[name])
    passes.cpu_pipeline(verify_each=True).run(module)
    for instr in module.entry.instructions:
        if instr.opcode == "fusion":
            assert not reads_a_contraction(instr), instr.name
    convs = [i for i in module.entry.instructions if i.opcode in ("convolution", "dot")]
    expected = {"ynn_like": 2, "dot_epilogue": 1, "dot_at_root": 0,
                "dot_as_output_and_read": 1}[name]
    assert len(convs) == expected    # each a kernel of its own (CSE merges c1 and short)


def test_inliner_keeps_a_fusion_whose_contraction_is_its_root():
    module = hlo.parse_module(DOT_AT_ROOT)
    assert not passes.make_pass("fusion-inliner").run(module)


def test_inliner_keeps_names_and_removes_the_body():
    module = hlo.parse_module(YNN_LIKE)
    assert passes.make_pass("fusion-inliner").run(module)
    hlo.verify(module)
    names = {i.name for i in module.entry.instructions}
    assert {"c1", "c2", "short", "mean"} <= names
    assert [c.name for c in module.computations] == ["add", "e"]


def test_backend_computes_inner_contractions_once():
    """Without the pipeline: the kernel materializes the contractions it reads."""
    module = hlo.parse_module(YNN_LIKE)
    body = next(i for i in module.entry.instructions if i.opcode == "fusion").fused_computation
    assert sorted(i.name for i in loop_nest._read_inside(body)) == ["c1", "c2", "short"]
    module = hlo.parse_module(DOT_AS_OUTPUT_AND_READ)
    body = next(i for i in module.entry.instructions if i.opcode == "fusion").fused_computation
    assert [i.name for i in loop_nest._read_inside(body)] == ["d"]
    module = hlo.parse_module(DOT_AT_ROOT)
    body = next(i for i in module.entry.instructions if i.opcode == "fusion").fused_computation
    assert loop_nest._read_inside(body) == []
