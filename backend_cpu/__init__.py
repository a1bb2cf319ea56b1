"""backend_cpu: HLO -> vectorized, partitioned LLVM IR -> JIT -> CpuExecutable.

    compile(module, options=None) -> CpuExecutable
    CompileOptions(pipeline=None | "default" | callable, cache=True)
    CpuExecutable.run(*arrays) -> list[np.ndarray]; .as_llvm_ir(), .as_asm(),
        .as_hlo_text(), .memory_stats()

See compiler.py for the stages, elemental.py for how fusions become one loop nest.
"""
from .compiler import CompileOptions, compile
from .executable import CpuExecutable

__all__ = ["CompileOptions", "CpuExecutable", "compile"]
