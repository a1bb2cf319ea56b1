"""Communication volume of xlapy's SPMD partitions next to XLA's, on the same programs.

Run by hand from the repository root (not part of the test suite; no timing, so the
machine's load does not matter):

    python3 benchmarks/bench_partition_volume.py

For every automatically partitioned case of tests/corpus_devices/ (JAX's jit with
NamedSharding inputs, no shard_map): NAME.global.hlo is the annotated module JAX hands
XLA; xlapy partitions it (sharding-propagation, spmd-partitioner) and the result is
checked against XLA's per-device outputs in NAME.npz; NAME.hlo is XLA's own partition.
Columns: bytes each device sends through collectives in one run of the program
(passes.spmd_reshard.collective_bytes: the operand bytes of every collective, as the
device's share of the exchange), and the collectives of each program by opcode.
"""
from __future__ import annotations

import collections
import glob
import os
import sys

import numpy as np

from xlapy import hlo, passes
from xlapy.passes.spmd_reshard import collective_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "corpus_devices")


def collectives(module) -> str:
    counts = collections.Counter(i.opcode for i in module.instructions() if i.info.collective)
    return " ".join(f"{op} x{n}" for op, n in sorted(counts.items())) or "-"


def main() -> int:
    print(f"{'case':28} {'xlapy B':>8} {'XLA B':>8}  xlapy collectives | XLA collectives")
    bad = 0
    for path in sorted(glob.glob(os.path.join(CORPUS, "auto_*.global.hlo"))):
        name = os.path.basename(path)[:-len(".global.hlo")]
        ours = hlo.parse_module(open(path).read())
        passes.make_pass("sharding-propagation").run(ours)
        passes.make_pass("spmd-partitioner").run(ours)
        passes.make_pass("dce").run(ours)
        hlo.verify(ours)
        xla = hlo.parse_module(open(os.path.join(CORPUS, f"{name}.hlo")).read())
        data = np.load(os.path.join(CORPUS, f"{name}.npz"))
        n = ours.num_partitions
        args = [[data[f"d{d}_arg{i}"] for i in range(len(ours.entry.parameters))]
                for d in range(n)]
        ok = all(np.allclose(o, data[f"d{d}_out{j}"], rtol=1e-5, atol=1e-5)
                 for d, outs in enumerate(hlo.evaluate_devices(ours, args))
                 for j, o in enumerate(outs))
        bad += not ok
        print(f"{name:28} {collective_bytes(ours):8d} {collective_bytes(xla):8d}  "
              f"{collectives(ours)} | {collectives(xla)}{'' if ok else '  !! wrong numbers'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
