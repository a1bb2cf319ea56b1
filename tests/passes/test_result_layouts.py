"""The entry's results come out of the CPU pipeline in the default layout
(passes/result_layouts.py, issue 19): JAX's AdamW moments of a transposed gradient are
{0,1} in its HLO text, and the executable transposed each on the host after every run.
The copy to row-major is fused into the kernel that computes the value (no extra
kernel), a root that is not a tuple is covered too, and the numbers are unchanged."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo, passes
from tests.corpus_util import assert_close

TUPLE_ROOT = """HloModule adam
ENTRY e {
  g = f32[64,48]{1,0} parameter(0)
  m = f32[48,64]{1,0} parameter(1)
  gt = f32[48,64]{0,1} transpose(g), dimensions={1,0}
  c = f32[] constant(0.1)
  cb = f32[48,64]{0,1} broadcast(c), dimensions={}
  gm = f32[48,64]{0,1} multiply(gt, cb)
  m2 = f32[48,64]{0,1} add(gm, m)
  v2 = f32[48,64]{0,1} multiply(gt, gt)
  ROOT t = (f32[48,64]{0,1}, f32[48,64]{0,1}, f32[64,48]{1,0}) tuple(m2, v2, g)
}
"""

ARRAY_ROOT = """HloModule one
ENTRY e {
  g = f32[64,48]{1,0} parameter(0)
  gt = f32[48,64]{0,1} transpose(g), dimensions={1,0}
  ROOT n = f32[48,64]{0,1} negate(gt)
}
"""


def results(module) -> list:
    root = module.entry.root
    return [o.shape for o in root.operands] if root.opcode == "tuple" else [root.shape]


@pytest.mark.parametrize("text", [TUPLE_ROOT, ARRAY_ROOT], ids=["tuple_root", "array_root"])
def test_results_are_row_major_and_right(text):
    module = hlo.parse_module(text)
    kernels_before = passes.count_kernels(hlo.parse_module(text))
    passes.cpu_pipeline().run(module)
    assert all(s.has_default_layout() for s in results(module)), \
        [s.to_text() for s in results(module)]
    # The copies live inside the kernels that compute the values.
    assert passes.count_kernels(module) <= kernels_before
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(p.shape.dims).astype(np.float32)
            for p in hlo.parse_module(text).entry.parameters]
    executable = backend_cpu.compile(hlo.parse_module(text),
                                     backend_cpu.CompileOptions(pipeline="default"))
    expected = hlo.evaluate(hlo.parse_module(text), args)
    for i, (a, e) in enumerate(zip(executable.run(*args), expected)):
        assert_close(a, np.asarray(e), f"out{i}")


def test_default_layouts_are_left_alone():
    text = TUPLE_ROOT.replace("{0,1}", "{1,0}")
    module = hlo.parse_module(text)
    assert not passes.make_pass("default-result-layouts").run(module)
