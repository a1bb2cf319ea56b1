"""The corpus of multi-device modules under MPI (one device per rank, the CPU backend),
a rank that raises and a rank killed mid-run: few mpirun calls, each with a timeout.
Skipped, saying why, where mpirun or mpi4py is missing."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mpi_util import mpirun_command, needs_mpi

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus_devices"
pytestmark = needs_mpi


def devices_of(name: str) -> int:
    header = (CORPUS / f"{name}.hlo").read_text().split("\n", 1)[0]
    r = re.search(r"replica_count=(\d+)", header)
    p = re.search(r"num_partitions=(\d+)", header)
    return (int(r.group(1)) if r else 1) * (int(p.group(1)) if p else 1)


NAMES = sorted(p.name[:-4] for p in CORPUS.glob("*.npz"))


def mpirun(n: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, XLAPY_COLLECTIVE_TIMEOUT="20", XLAPY_INTRA_OP_THREADS="1",
               PYTHONPATH=str(ROOT))
    return subprocess.run([*mpirun_command(), "-n", str(n), sys.executable, "-m",
                           "tests.backend_cpu.mpi_collectives_worker", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_corpus_under_mpi(n):
    """Every case of tests/corpus_devices on its device count (NAME.hlo through the
    default pipeline and NAME.opt.hlo) gives XLA's per-device outputs on every rank."""
    names = [name for name in NAMES if devices_of(name) == n]
    if not names:
        pytest.skip(f"no {n}-device case in the corpus")
    result = mpirun(n, *names, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    done = set(re.findall(r"^ok (\S+)$", result.stdout, re.M))
    assert done == {f"{name}{s}" for name in names for s in (".hlo", ".opt.hlo")}


def test_a_rank_that_raises_ends_every_rank():
    result = mpirun(3, "mixed_3dev", "--fail-rank", "1", timeout=60)
    assert result.returncode != 0
    assert "rank 1 (device 1) failed: TypeError: run: expected" in result.stderr


def test_a_killed_rank_ends_every_rank():
    result = mpirun(2, "mixed_2dev", "--kill-rank", "1", timeout=90)
    assert result.returncode != 0
