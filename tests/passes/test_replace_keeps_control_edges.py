"""Replacing an instruction (CSE, the simplifier: `HloComputation.replace_instruction`)
moves its control edges to the replacement instead of dropping them, unless the
edge would close a cycle."""
from __future__ import annotations

import numpy as np

from xlapy import hlo
from xlapy import passes

CSE_CASE = """HloModule edges
ENTRY e {
  x = f32[4] parameter(0)
  s = f32[4] sine(x)
  a = f32[4] negate(x)
  b = f32[4] negate(x), control-predecessors={s}
  c = f32[4] exponential(x), control-predecessors={b}
  d = f32[4] add(a, b)
  ROOT r = f32[4] add(d, c)
}"""


def _edges(module):
    return {i.name: sorted(p.name for p in i.control_predecessors)
            for i in module.entry.instructions if i.control_predecessors}


def test_cse_moves_the_control_edges_of_what_it_removes():
    module = hlo.parse_module(CSE_CASE)
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    before = hlo.evaluate(module, [x])
    passes.pipeline_from_text("cse").run(module)
    names = {i.name for i in module.entry.instructions}
    assert "b" not in names and "a" in names
    assert _edges(module) == {"a": ["s"], "c": ["a"]}
    hlo.verify(module)
    np.testing.assert_array_equal(hlo.evaluate(module, [x])[0], before[0])


def test_an_edge_that_would_close_a_cycle_is_dropped():
    """b waits for s, but s reads a, the instruction b is replaced by: the data flow
    already orders a before s, so the edge cannot move."""
    module = hlo.parse_module("""HloModule cycle
ENTRY e {
  x = f32[4] parameter(0)
  a = f32[4] negate(x)
  s = f32[4] sine(a)
  b = f32[4] negate(x), control-predecessors={s}
  ROOT r = f32[4] add(s, b)
}""")
    passes.pipeline_from_text("cse").run(module)
    assert "b" not in {i.name for i in module.entry.instructions}
    assert _edges(module) == {}
    hlo.verify(module)
    assert len(module.entry.post_order()) == len(module.entry.instructions)
