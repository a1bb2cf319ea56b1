"""hlo-opt --run on several devices: --devices N in-process, and under mpirun with
--distributed mpi (rank 0 writes every device's outputs); errors are one line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy.frontend import hlo_opt
from tests.corpus_util import assert_close
from tests.mpi_util import mpirun_command, needs_mpi

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "tests" / "corpus_devices" / "mesh2x2_psum_all_gather"


def check(path: Path) -> None:
    want = np.load(f"{CASE}.npz")
    got = np.load(path)
    outs = sorted(k for k in want.files if "_out" in k)
    assert sorted(got.files) == outs
    for key in outs:
        assert_close(got[key], want[key], key)


def test_devices_in_process(tmp_path, capsys):
    out = tmp_path / "out.npz"
    assert hlo_opt.main([f"{CASE}.hlo", "--run", "--devices", "4", "--inputs", f"{CASE}.npz",
                         "--outputs", str(out)]) == 0
    check(out)
    # The device count defaults to the module's; random inputs without --inputs.
    assert hlo_opt.main([f"{CASE}.opt.hlo", "--run", "--outputs", str(out)]) == 0
    assert sorted(np.load(out).files)[0] == "d0_out0"


@pytest.mark.parametrize("argv,message", [
    (["--devices", "3"], "num_devices=3, but module"),
    (["--inputs", "ARGS"], "missing d0_arg0"),
    (["--devices", "0"], "--devices must be at least 1"),
])
def test_device_errors_are_one_line(tmp_path, capsys, argv, message):
    args = tmp_path / "args.npz"
    np.savez(args, arg0=np.zeros((2, 3), np.float32))
    argv = [str(args) if a == "ARGS" else a for a in argv]
    assert hlo_opt.main([f"{CASE}.hlo", "--run", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@needs_mpi
def test_distributed_mpi(tmp_path):
    out = tmp_path / "out.npz"
    env = dict(os.environ, XLAPY_COLLECTIVE_TIMEOUT="20", XLAPY_INTRA_OP_THREADS="1")
    cmd = [*mpirun_command(), "-n", "4", sys.executable, "-m", "xlapy.frontend.hlo_opt",
           f"{CASE}.hlo", "--run", "--distributed", "mpi", "--inputs", f"{CASE}.npz",
           "--outputs", str(out)]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    check(out)
    # Too few ranks: every rank says so in one line and exits non-zero.
    cmd[2] = "3"
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0, result.stderr[-2000:]
    assert "MPI runs 3 ranks (start it with mpirun -n 4)" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]


def test_explain_a_multi_device_module(capsys):
    # The kernels are emitted again with the module's device count (replica groups name
    # devices 1..3; emitting them for one device failed).
    assert hlo_opt.main([f"{CASE}.hlo", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "== kernel strategies, per kernel" in out
