"""HloModule.clone: a copy a pass pipeline rewrites apart from the original (the CPU
backend's compile clones the module it is given instead of parsing its text)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo, passes

CORPUS = sorted(p for p in (Path(__file__).parents[1] / "corpus").glob("*.hlo")
                if not p.name.endswith(".opt.hlo"))
SOME = [p for p in CORPUS if p.stem in ("scan_rnn", "train_step_sgd", "gelu_erf_f32",
                                         "dropout_threefry", "grad_mlp_loss")]


@pytest.mark.parametrize("path", SOME, ids=lambda p: p.stem)
def test_a_clone_prints_alike_and_optimizes_alike(path):
    original = hlo.parse_module(path.read_text())
    text = original.to_text()
    clone = original.clone()
    assert clone.to_text() == text
    hlo.verify(clone)
    for a, b in zip(original.computations, clone.computations):
        for x, y in zip(a.instructions, b.instructions):
            assert [u.name for u in x.users] == [u.name for u in y.users]
            assert y.parent is b and all(o.parent is b for o in y.operands)
    passes.cpu_pipeline().run(clone)
    assert original.to_text() == text          # the original is untouched
    again = hlo.parse_module(text)
    passes.cpu_pipeline().run(again)
    assert clone.to_text() == again.to_text()  # what the passes make of a parse


def test_a_clone_owns_its_computations_literals_and_names():
    module = hlo.parse_module("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  y = f32[4] add(x, c)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(y, z), dimensions={0}, to_apply=add
}""")
    clone = module.clone()
    r = clone.entry.root
    assert r.attrs["to_apply"] in clone.computations
    assert r.attrs["to_apply"] not in module.computations
    c = next(i for i in clone.entry.instructions if i.name == "c")
    c.literal[0] = 9.0
    original_c = next(i for i in module.entry.instructions if i.name == "c")
    assert original_c.literal[0] == 1.0
    # new names continue from the same counters
    assert clone.uniquify("y") == module.clone().uniquify("y")
    np.testing.assert_array_equal(hlo.evaluate(module, [np.ones(4, np.float32)]), 14.0)
