"""Fusions that hold a scatter (issue 14, item 2).

XLA's CPU pipeline wraps every scatter in a fusion of its own (`wrapped_scatter`,
kind=kLoop). Our multi-output fusion merged such a fusion into a same-shaped
consumer, so the scatter was no longer the root of its kernel and the backend said
`no emitter for scatter`. Now the passes never merge a fusion whose body is not a
per-element loop, and the backend also compiles a fusion that reads a scatter's
(or sort's, or select-and-scatter's) result inside: it computes it into scratch
memory first. Every module runs on the backend with no pipeline and the default
one and must match the evaluator.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import passes
from tests.corpus_util import assert_all_close

ADD = """HloModule m

add {
  add_x = f32[] parameter(0)
  add_y = f32[] parameter(1)
  ROOT add_s = f32[] add(add_x, add_y)
}
"""

WRAPPED = ADD + """
wrapped_scatter_computation {
  p0 = f32[{V},8] parameter(0)
  p1 = s32[6,1] parameter(1)
  p2 = f32[6,1,8] parameter(2)
  ROOT sc = f32[{V},8] scatter(p0, p1, p2), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}

wrapped_broadcast_computation {
  z = f32[] parameter(0)
  ROOT bz = f32[{V},8] broadcast(z), dimensions={}
}

fused_mu {
  m = f32[{V},8] parameter(0)
  g = f32[{V},8] parameter(1)
  c9 = f32[] constant(0.9)
  b9 = f32[{V},8] broadcast(c9), dimensions={}
  c1 = f32[] constant(0.1)
  b1 = f32[{V},8] broadcast(c1), dimensions={}
  mm = f32[{V},8] multiply(m, b9)
  gg = f32[{V},8] multiply(g, b1)
  ROOT r = f32[{V},8] add(mm, gg)
}

fused_nu {
  n = f32[{V},8] parameter(0)
  g2 = f32[{V},8] parameter(1)
  sq = f32[{V},8] multiply(g2, g2)
  ROOT r2 = f32[{V},8] add(n, sq)
}

ENTRY e {
  ids = s32[6] parameter(0)
  upd = f32[6,8] parameter(1)
  mu = f32[{V},8] parameter(2)
  nu = f32[{V},8] parameter(3)
  zero = f32[] constant(0)
  init = f32[{V},8] fusion(zero), kind=kLoop, calls=wrapped_broadcast_computation
  idx = s32[6,1] bitcast(ids)
  u3 = f32[6,1,8] bitcast(upd)
  grad = f32[{V},8] fusion(init, idx, u3), kind={KIND}, calls=wrapped_scatter_computation
  m2 = f32[{V},8] fusion(mu, grad), kind=kLoop, calls=fused_mu
  n2 = f32[{V},8] fusion(nu, grad), kind=kLoop, calls=fused_nu
  ROOT t = (f32[{V},8], f32[{V},8], f32[{V},8]) tuple(m2, n2, grad)
}
"""


def _args(module, seed=0):
    rng = np.random.default_rng(seed)
    args = []
    for p in module.entry.parameters:
        if p.shape.element_type == "s32":
            args.append(np.array([1, 3, 3, 0, p.shape.dims[0] + 9, -2][:p.shape.numel], np.int32)
                        .reshape(p.shape.dims))
        else:
            args.append(rng.standard_normal(p.shape.dims).astype(np.float32))
    return args


def check(text: str):
    module = hlo.parse_module(text)
    hlo.verify(module)
    args = _args(module)
    expected = hlo.evaluate(module, args)
    for pipeline in (None, "default"):
        executable = backend_cpu.compile(hlo.parse_module(text),
                                         backend_cpu.CompileOptions(pipeline=pipeline))
        assert_all_close(executable.run(*args), expected, f"pipeline {pipeline}")
    return module


def _scatter_stays_root(module):
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "scatter" and comp.is_fusion_computation:
                root = comp.root
                assert root is instr or (root.opcode == "tuple" and instr in root.operands), \
                    f"scatter buried in {comp.name}"


@pytest.mark.parametrize("kind", ["kLoop", "kInput"])
@pytest.mark.parametrize("rows", [16, 300])
def test_wrapped_scatter_with_loop_consumers(kind, rows):
    """Two same-shaped loop consumers of XLA's wrapped scatter (an AdamW step's moment
    updates of an embedding): multi-output fusion merged it into one of them."""
    text = WRAPPED.replace("{V}", str(rows)).replace("{KIND}", kind)
    check(text)
    module = hlo.parse_module(text)
    passes.cpu_pipeline(verify_each=True).run(module)
    _scatter_stays_root(module)


def test_wrapped_scatter_siblings_and_small_loops():
    """Small enough for horizontal fusion, and a sibling reading the same operand."""
    text = ADD + """
wrapped {
  a = f32[10] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4] parameter(2)
  ROOT s = f32[10] scatter(a, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}

ENTRY e {
  x = f32[10] parameter(0)
  ids = s32[4,1] parameter(1)
  v = f32[4] parameter(2)
  sc = f32[10] fusion(x, ids, v), kind=kLoop, calls=wrapped
  neg = f32[10] negate(x)
  ex = f32[10] exponential(x)
  y = f32[10] add(neg, sc)
  w = f32[4] multiply(v, v)
  ROOT t = (f32[10], f32[10], f32[4]) tuple(y, ex, w)
}
"""
    check(text)
    module = hlo.parse_module(text)
    passes.cpu_pipeline(verify_each=True).run(module)
    _scatter_stays_root(module)


INNER = ADD + """
body {
  a = f32[12,3] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,3] parameter(2)
  s = f32[12,3] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  n = f32[12,3] negate(s)
  t = f32[3,12] transpose(s), dimensions={1,0}
  {ROOT}
}

ENTRY e {
  x = f32[12,3] parameter(0)
  ids = s32[5,1] parameter(1)
  v = f32[5,3] parameter(2)
  ROOT f = {SHAPE} fusion(x, ids, v), kind=kLoop, calls=body
}
"""


@pytest.mark.parametrize("root,shape", [
    ("ROOT r = f32[12,3] add(n, s)", "f32[12,3]"),
    ("ROOT r = (f32[12,3], f32[3,12]) tuple(n, t)", "(f32[12,3], f32[3,12])"),
    ("ROOT r = (f32[12,3], f32[3,12]) tuple(s, t)", "(f32[12,3], f32[3,12])"),
    ("ROOT r = (f32[12,3], f32[12,3]) tuple(s, n)", "(f32[12,3], f32[12,3])"),
])
def test_scatter_read_inside_its_fusion(root, shape):
    """A fusion (not made by xlapy) that uses a scatter's result inside."""
    check(INNER.replace("{ROOT}", root).replace("{SHAPE}", shape))


def test_sort_read_inside_its_fusion():
    text = """HloModule s
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}

body {
  x = f32[4,9] parameter(0)
  s = f32[4,9] sort(x), dimensions={1}, to_apply=less
  ROOT m = f32[4,9] multiply(s, x)
}

ENTRY e {
  p = f32[4,9] parameter(0)
  ROOT f = f32[4,9] fusion(p), kind=kLoop, calls=body
}
"""
    check(text)
