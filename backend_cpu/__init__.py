"""backend_cpu: HLO -> vectorized, partitioned LLVM IR -> JIT -> CpuExecutable.

    compile(module, options=None) -> CpuExecutable
    CompileOptions(pipeline=None | "default" | callable, cache=True, disk_cache=True)
    CpuExecutable.run(*arrays) -> list[np.ndarray]   (tuple results flattened in order)
    CpuExecutable.as_llvm_ir(), .as_asm(), .as_hlo_text(), .memory_stats(),
        .kernel_strategies(), .compile_seconds

Layers, bottom up (each may import only those below it; tests/test_imports.py):

    target.py        the compile target, read by every layer
    llvm/            element types, loops, the kernel frame, fp environment, target
                     machines, machine code
    vecmath/         vector math for the transcendental opcodes
    elemental/       element generators: how a fusion becomes one loop nest
    gemm/            the packed GEMM, its routine library, operand views, work units
    conv/, emitters/ kernel emitters (siblings: neither imports the other)
    top level        compiler.py (the stages), strategies.py (which emitter takes
                     each kernel, every refusal with its reason), buffer_assignment.py
                     (slots, the temp arena), executable.py / thunks.py (running),
                     inter_op.py (independent kernels on runtime streams),
                     sort_thunk.py (sorts numpy does on the host), disk_cache.py
                     (the persistent cache: $XLAPY_CACHE_DIR, disabled by
                     XLAPY_DISABLE_DISK_CACHE=1; its entries are plain data,
                     cache_format.py)

Where to read next: compiler.py, strategies.py, elemental/generators.py,
emitters/loop_nest.py, elemental/hoisting.py, emitters/row_normalize.py.
"""
from .compiler import CompileOptions, compile
from .executable import CpuExecutable

__all__ = ["CompileOptions", "CpuExecutable", "compile"]
