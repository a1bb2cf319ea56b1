"""After the CPU pipeline every computation lists operands before their readers (the
fusion passes keep the order step by step instead of re-sorting after each step), and
the pipeline's result on each corpus module is the one pinned in
pipeline_fingerprints.json (issue 19: the passes were made linear in module size --
sorting only the part of a computation a rewrite left out of order, skipping scans for
control edges where there are none -- without changing a single printed line).

A pass that changes its output on purpose regenerates the pins, and says why in its
commit: `python -m tests.passes.test_pipeline_keeps_order --update`."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from xlapy import hlo, passes

CORPUS = sorted(p for p in (Path(__file__).parents[1] / "corpus").glob("*.hlo")
                if not p.name.endswith(".opt.hlo"))
PINS = Path(__file__).with_name("pipeline_fingerprints.json")


def is_sorted(comp) -> bool:
    seen = set()
    for instr in comp.instructions:
        if any(id(o) not in seen for o in instr.operands + instr.control_predecessors):
            return False
        seen.add(id(instr))
    return True


def fingerprint(module) -> str:
    return hashlib.sha256(module.to_text().encode()).hexdigest()[:20]


def optimized(path: Path):
    module = hlo.parse_module(path.read_text())
    passes.cpu_pipeline().run(module)
    return module


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_every_computation_stays_in_topological_order(path):
    module = optimized(path)
    unsorted = [c.name for c in module.computations if not is_sorted(c)]
    assert not unsorted, unsorted
    pinned = json.loads(PINS.read_text()).get(path.stem)
    assert pinned is not None, f"no pin for {path.stem}: run this file with --update"
    assert fingerprint(module) == pinned, \
        f"the pipeline's result on {path.name} changed (see the module docstring)"


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.passes.test_pipeline_keeps_order --update")
    PINS.write_text(json.dumps({p.stem: fingerprint(optimized(p)) for p in CORPUS},
                               indent=1, sort_keys=True) + "\n")
