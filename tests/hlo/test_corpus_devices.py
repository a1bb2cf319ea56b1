"""The multi-device corpus (tests/corpus_devices, real JAX/XLA output on 4 host CPU
devices): every file parses, verifies and prints back; `hlo.evaluate_devices` gives
XLA's per-device outputs for the partitioned `.hlo` and the optimized `.opt.hlo`,
within DESIGN.md's tolerances."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo
from tests.corpus_util import assert_all_close

CORPUS = Path(__file__).parent.parent / "corpus_devices"
ALL_FILES = sorted(CORPUS.glob("*.hlo"))
RUNNABLE = [p for p in ALL_FILES if not p.name.endswith(".global.hlo")]


def load(path: Path, n: int, num_params: int):
    """Per-device arguments and XLA's per-device outputs of the case of `path`."""
    with np.load(CORPUS / f"{path.name.split('.')[0]}.npz") as data:
        args = [[data[f"d{d}_arg{i}"] for i in range(num_params)] for d in range(n)]
        outs = [[data[k] for k in sorted((k for k in data.files if k.startswith(f"d{d}_out")),
                                          key=lambda k: int(k.split("out")[1]))]
                for d in range(n)]
    return args, outs


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_parses_verifies_and_prints_back(path):
    module = hlo.parse_module(path.read_text())
    hlo.verify(module)
    printed = hlo.print_module(module)
    assert hlo.print_module(hlo.parse_module(printed)) == printed


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
def test_evaluate_devices_reproduces_xla(path):
    module = hlo.parse_module(path.read_text())
    n = module.num_devices
    assert n > 1
    args, expected = load(path, n, len(module.entry.parameters))
    outputs = hlo.evaluate_devices(module, args)
    for d in range(n):
        assert_all_close(outputs[d], expected[d], f"{path.name} device {d}")


def test_corpus_is_there():
    assert len(RUNNABLE) >= 46 and any("opt" in p.name for p in RUNNABLE)
