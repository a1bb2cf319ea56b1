"""The default pipeline on real multi-device modules (tests/corpus_devices): it verifies
after every pass, leaves each collective a collective, and every device still computes
XLA's outputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo
from xlapy.passes.pipeline import cpu_pipeline
from tests.corpus_util import assert_all_close

CORPUS = Path(__file__).parent.parent / "corpus_devices"
RUNNABLE = [p for p in sorted(CORPUS.glob("*.hlo")) if not p.name.endswith(".global.hlo")]


def _collectives(module: hlo.HloModule) -> list[str]:
    return sorted(i.opcode for i in module.instructions() if i.info.collective)


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
def test_pipeline_keeps_collectives_and_numbers(path):
    module = hlo.parse_module(path.read_text())
    before = _collectives(module)
    cpu_pipeline(verify_each=True).run(module)
    assert _collectives(module) == before
    n = module.num_devices
    with np.load(CORPUS / f"{path.name.split('.')[0]}.npz") as data:
        args = [[data[f"d{d}_arg{i}"] for i in range(len(module.entry.parameters))]
                for d in range(n)]
        expected = [[data[f"d{d}_out{j}"] for j in range(sum(k.startswith(f"d{d}_out")
                                                              for k in data.files))]
                    for d in range(n)]
    outputs = hlo.evaluate_devices(module, args)
    for d in range(n):
        assert_all_close(outputs[d], expected[d], f"{path.name} device {d}")
