"""After the CPU pipeline every computation lists operands before their readers (the
fusion passes keep the order step by step instead of re-sorting after each step)."""
from __future__ import annotations

from pathlib import Path

import pytest

from xlapy import hlo, passes

CORPUS = sorted(p for p in (Path(__file__).parents[1] / "corpus").glob("*.hlo")
                if not p.name.endswith(".opt.hlo"))


def is_sorted(comp) -> bool:
    seen = set()
    for instr in comp.instructions:
        if any(id(o) not in seen for o in instr.operands + instr.control_predecessors):
            return False
        seen.add(id(instr))
    return True


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_every_computation_stays_in_topological_order(path):
    module = hlo.parse_module(path.read_text())
    passes.cpu_pipeline().run(module)
    unsorted = [c.name for c in module.computations if not is_sorted(c)]
    assert not unsorted, unsorted
