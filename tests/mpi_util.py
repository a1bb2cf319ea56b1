"""How the tests start MPI programs, and why MPI tests skip.

`mpirun_command()` is mpirun (the one next to this Python first: the mpich wheel of
the `mpi` extra installs it there) with the flags it needs here: Open MPI refuses to
run as root without --allow-run-as-root and more ranks than cores without
--oversubscribe; mpich needs neither. `needs_mpi` skips a test, saying why, where
mpi4py or mpirun is missing.
"""
from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@functools.lru_cache(maxsize=None)
def mpirun_command() -> tuple[str, ...] | None:
    """mpirun and its flags, or None where there is none."""
    beside = Path(sys.executable).with_name("mpirun")
    found = str(beside) if beside.exists() else shutil.which("mpirun")
    if found is None:
        return None
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    if "Open MPI" in version or "OpenRTE" in version:
        return (found, "--allow-run-as-root", "--oversubscribe")
    return (found,)


def skip_reason() -> str | None:
    """Why MPI tests cannot run here, or None."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install 'xlapy[mpi]')"
    if mpirun_command() is None:
        return "mpirun is not on PATH nor next to the Python interpreter (pip install 'xlapy[mpi]')"
    return None


needs_mpi = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
