"""The MPI communicator under `mpirun -n 2` and `-n 3`: every collective against numpy, and
failures that end every rank quickly with a message naming the rank (a rank that raises,
one killed mid-run, one that stays away, ranks running different programs).

Each test launches tests/runtime/mpi_worker.py under mpirun with a timeout. The tests skip,
saying why, only where mpirun or mpi4py is missing (`pip install 'xlapy[mpi]'` brings both).
mpich's mpirun runs as root with no flags; Open MPI's needs --allow-run-as-root and
--oversubscribe (more ranks than cores), added when its mpirun is the one found.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mpi_util import mpirun_command, needs_mpi

WORKER = Path(__file__).with_name("mpi_worker.py")
LAUNCH_LIMIT = 120      # seconds for a whole mpirun; a hang fails the test, never the run
FAIL_FAST = 30          # a failing run must end well within this


pytestmark = needs_mpi


def launch(n: int, mode: str, timeout_s: float | None = None):
    env = dict(os.environ)
    if timeout_s is not None:
        env["XLAPY_COLLECTIVE_TIMEOUT"] = str(timeout_s)
    command = [*mpirun_command(), "-n", str(n), sys.executable, str(WORKER), mode]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=LAUNCH_LIMIT)
    return done, time.monotonic() - start


@pytest.mark.parametrize("n", [2, 3])
def test_every_collective_matches_numpy(n):
    done, _ = launch(n, "ops")
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = sorted(int(r) for r in re.findall(r"rank (\d+) ok: \d+ checks", done.stdout))
    assert ranks == list(range(n)), done.stdout + done.stderr


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_that_raises_ends_every_rank_naming_it(n):
    done, seconds = launch(n, "raise", timeout_s=FAIL_FAST)
    assert done.returncode != 0
    assert seconds < FAIL_FAST      # the abort ends the run, not the others' timeout
    assert "xlapy: rank 1 (device 1) failed: ValueError: boom on rank 1" in done.stderr


def test_a_killed_rank_does_not_hang_the_others():
    done, seconds = launch(3, "kill", timeout_s=10)
    assert done.returncode != 0
    assert seconds < FAIL_FAST


def test_an_absent_rank_times_out_the_others():
    done, seconds = launch(3, "stall", timeout_s=2)
    assert done.returncode != 0
    assert seconds < FAIL_FAST
    assert re.search(r"xlapy: rank [01] waited 2 s in all_reduce over ranks \(0, 1, 2\)",
                     done.stderr), done.stderr


def test_ranks_running_different_programs_are_told_which():
    done, seconds = launch(3, "fingerprint", timeout_s=FAIL_FAST)
    assert done.returncode != 0
    assert seconds < FAIL_FAST
    assert ("ranks run different programs (fingerprints differ): ranks 0, 2: 'module-a'; "
            "rank 1: 'module-b'") in done.stderr

