"""Row fusions take the broadcasts, iotas and scalar constants that feed them
(CpuInstructionFusion), also when several row fusions read them: two masked, scaled
softmaxes are two kernels, not four that write a full-size mask and scale first (the GPT block's step wrote a causal mask and a 0.125
broadcast to f32[8,8,256,256] every step). Nothing else joins a row fusion."""
from __future__ import annotations

import numpy as np

from xlapy import backend_cpu, hlo
from xlapy.passes import cpu_pipeline
from xlapy.passes.fusion_utils import fusion_kind
from tests.passes.helpers import assert_same_results

MASKED_SOFTMAX = """
HloModule masked_softmax

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

softmax {
  x = f32[2,4,16,16] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[2,4,16] reduce(x, ninf), dimensions={3}, to_apply=max
  mxb = f32[2,4,16,16] broadcast(mx), dimensions={0,1,2}
  e = f32[2,4,16,16] exponential(f32[2,4,16,16] subtract(x, mxb))
  zero = f32[] constant(0)
  sum = f32[2,4,16] reduce(e, zero), dimensions={3}, to_apply=add
  sumb = f32[2,4,16,16] broadcast(sum), dimensions={0,1,2}
  ROOT p = f32[2,4,16,16] divide(e, sumb)
}

ENTRY main {
  scores = f32[2,4,16,16] parameter(0)
  other = f32[2,4,16,16] parameter(1)
  causal = pred[16,16] constant({ {true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false}, {true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false}, {true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false}, {true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false}, {true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false}, {true, true, true, true, true, true, false, false, false, false, false, false, false, false, false, false}, {true, true, true, true, true, true, true, false, false, false, false, false, false, false, false, false}, {true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false}, {true, true, true, true, true, true, true, true, true, false, false, false, false, false, false, false}, {true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false}, {true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false}, {true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false}, {true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false}, {true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false}, {true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false}, {true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true} })
  mask = pred[2,4,16,16] broadcast(causal), dimensions={2,3}
  eighth = f32[] constant(0.125)
  scale = f32[2,4,16,16] broadcast(eighth), dimensions={}
  low = f32[] constant(-1e9)
  lows = f32[2,4,16,16] broadcast(low), dimensions={}
  x1 = f32[2,4,16,16] select(mask, f32[2,4,16,16] multiply(scores, scale), lows)
  x2 = f32[2,4,16,16] select(mask, f32[2,4,16,16] multiply(other, scale), lows)
  p1 = f32[2,4,16,16] call(x1), to_apply=softmax
  p2 = f32[2,4,16,16] call(x2), to_apply=softmax
  ROOT t = (f32[2,4,16,16], f32[2,4,16,16]) tuple(p1, p2)
}
"""


def kernels(module):
    return [i for i in module.entry.instructions
            if i.opcode not in ("parameter", "constant", "tuple", "get-tuple-element")]


def test_a_masked_scaled_softmax_is_one_row_kernel():
    module = hlo.parse_module(MASKED_SOFTMAX)
    cpu_pipeline().run(module)
    rows = [k for k in kernels(module) if k.opcode == "fusion" and fusion_kind(k) == "row"]
    assert len(rows) == 2, module.to_text()
    # No full-size mask or scale written by a kernel of its own: both row fusions
    # broadcast them inside.
    assert set(kernels(module)) == set(rows), [k.name for k in kernels(module)]
    for row in rows:
        assert "broadcast" in {i.opcode for i in row.fused_computation.instructions}
    assert_same_results(MASKED_SOFTMAX, module)


def test_the_compiled_kernel_matches_the_evaluator():
    module = hlo.parse_module(MASKED_SOFTMAX)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((2, 4, 16, 16)).astype(np.float32) * 4 for _ in range(2)]
    got = backend_cpu.compile(module).run(*args)
    want = hlo.evaluate(hlo.parse_module(MASKED_SOFTMAX), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-7)
