"""Run under mpirun by test_collectives_mpi.py: each rank runs its device of the corpus
modules named on the command line (NAME.hlo with the default pipeline, NAME.opt.hlo as
given) and compares with XLA's outputs; rank 0 prints one line per case.

    mpirun -n N python -m tests.backend_cpu.mpi_collectives_worker NAME ...
    ... --fail-rank R      rank R raises inside its first collective run
    ... --kill-rank R      rank R kills itself (SIGKILL) before its first run
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np

from xlapy import backend_cpu, hlo
from tests.corpus_util import assert_close

CORPUS = Path(__file__).resolve().parent.parent / "corpus_devices"


def main(argv: list[str]) -> int:
    fail = kill = None
    names = []
    it = iter(argv)
    for a in it:
        if a == "--fail-rank":
            fail = int(next(it))
        elif a == "--kill-rank":
            kill = int(next(it))
        else:
            names.append(a)
    for name in names:
        data = np.load(CORPUS / f"{name}.npz")
        for suffix, pipeline in ((".hlo", "default"), (".opt.hlo", None)):
            module = hlo.parse_module((CORPUS / f"{name}{suffix}").read_text())
            executable = backend_cpu.compile(module, backend_cpu.CompileOptions(
                pipeline=pipeline, distributed="mpi"))
            d = executable.device
            if kill == d:
                os.kill(os.getpid(), signal.SIGKILL)
            args = [data[f"d{d}_arg{i}"] for i in range(len(module.entry.parameters))]
            if fail == d:
                args = args[:-1]          # a bad call: raises before it meets the others
                try:
                    executable.run(*args)
                except TypeError as e:
                    executable.communicator.abort(d, e)
            outputs = executable.run(*args)
            for j, out in enumerate(outputs):
                assert_close(out, data[f"d{d}_out{j}"], f"{name}{suffix} device {d} out {j}")
            if d == 0:
                print(f"ok {name}{suffix}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
