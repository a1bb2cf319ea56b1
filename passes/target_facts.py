"""What the pass pipeline knows of the machine it optimizes for: one frozen object.

The pipeline's choices that depend on the backend (how much work a kernel needs
before the backend splits it over threads, from what size a lone transpose is
faster than a fused one) read a `TargetFacts`, never a constant of their own:

    cpu_pipeline(facts=TargetFacts())             host-independent defaults
    cpu_pipeline(facts=backend_cpu.target.current())

The CPU backend's compile target (`backend_cpu.target.Target`) is a TargetFacts
with the machine's own fields added, and the backend compiles with it: its
emitters and thunks read the same fields the passes read, so each fact is written
once. The defaults below are what every CPU target has today; `vector_bits` is
the target's own (128, the narrowest x86-64 and AArch64 vector, without one).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class TargetFacts:
    # The widest vector register the emitters use.
    vector_bits: int = 128
    # Below this many bytes read and written a kernel runs as one partition on the
    # calling thread (backend_cpu/thunks.py); horizontal fusion merges only kernels of
    # at most this many output bytes (a larger one would be split over threads alone).
    parallel_min_bytes: int = 128 * 1024
    # A matrix transpose of at least this many bytes is a kernel of its own: the CPU
    # backend moves a lone transpose by register blocks (instruction fusion, where the
    # measurements are).
    large_transpose_bytes: int = 1 << 20

    @property
    def vector_bytes(self) -> int:
        return self.vector_bits // 8


DEFAULT = TargetFacts()
