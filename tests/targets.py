"""Targets for tests that inspect the generated code.

A test that looks at LLVM IR or assembly never assumes the host's features: it
takes the `isa` fixture (tests/conftest.py), which runs it once per ISA level
("sse4.2", "avx2", "avx512"). For a level the host can execute the test
compiles, inspects and runs; for a level above the host's it compiles and
inspects only (`isa.runs` is False, and `run` is refused by the executable).
"""
from __future__ import annotations

import re

from xlapy import backend_cpu
from xlapy.backend_cpu import target as targets

ISA_LEVELS = targets.ISA_LEVELS

_REGISTER = {512: "zmm", 256: "ymm", 128: "xmm"}


class IsaCase:
    """One ISA level as the tests see it."""

    def __init__(self, level: str):
        self.level = level
        self.target = targets.resolve(max_isa=level)
        self.runs = self.target.runs_on_host
        self.register = _REGISTER[self.target.vector_bits]

    def __repr__(self) -> str:
        return f"IsaCase({self.level})"

    def options(self, **kwargs) -> backend_cpu.CompileOptions:
        return backend_cpu.CompileOptions(max_isa=self.level, **kwargs)

    def lanes(self, element_bytes: int) -> int:
        """Elements of this size in one full vector register."""
        return self.target.lanes(element_bytes)

    def vector_type(self, etype: str) -> str:
        """The LLVM type of one full register of `etype` ("<16 x float>" on AVX-512)."""
        llvm, size = {"f32": ("float", 4), "f64": ("double", 8), "s32": ("i32", 4),
                      "u32": ("i32", 4), "s64": ("i64", 8)}[etype]
        return f"<{self.lanes(size)} x {llvm}>"

    def uses_full_vectors(self, asm: str) -> bool:
        """True if the assembly computes on full-width vector registers: a VEX/EVEX
        instruction on zmm or ymm, or on SSE a packed (not scalar) xmm instruction."""
        if self.register != "xmm":
            return any(self.register in line and line.lstrip().startswith("v")
                       for line in asm.splitlines())
        packed = re.compile(r"^\s*(\w+p[sd]|p\w+)\s.*%xmm")
        return any(packed.match(line) for line in asm.splitlines())

    def compile(self, module, **kwargs):
        return backend_cpu.compile(module, self.options(**kwargs))
