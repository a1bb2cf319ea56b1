"""Every case of tests/corpus_devices on the CPU backend, all devices in this process:
NAME.hlo (XLA's per-device program, through our default pipeline) and NAME.opt.hlo (after
XLA's CPU pipeline, compiled as given) give XLA's per-device outputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from tests.corpus_util import assert_close

CORPUS = Path(__file__).resolve().parents[1] / "corpus_devices"
NAMES = sorted(p.name[:-4] for p in CORPUS.glob("*.npz"))


@pytest.mark.parametrize("suffix,pipeline", [(".hlo", "default"), (".opt.hlo", None)])
@pytest.mark.parametrize("name", NAMES)
def test_corpus_case(name, suffix, pipeline):
    module = hlo.parse_module((CORPUS / f"{name}{suffix}").read_text())
    data = np.load(CORPUS / f"{name}.npz")
    n = module.replica_count * module.num_partitions
    args = [[data[f"d{d}_arg{i}"] for i in range(len(module.entry.parameters))]
            for d in range(n)]
    executable = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=pipeline))
    assert executable.num_devices == n
    outputs = executable.run_devices(args, timeout=30)
    for d in range(n):
        expected = sorted((k for k in data.files if k.startswith(f"d{d}_out")),
                          key=lambda k: int(k.split("out")[1]))
        assert len(outputs[d]) == len(expected)
        for j, key in enumerate(expected):
            assert_close(outputs[d][j], data[key], f"{name}{suffix} {key}")
