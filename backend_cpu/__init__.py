"""backend_cpu: HLO -> vectorized, partitioned LLVM IR -> JIT -> CpuExecutable.

    compile(module, options=None) -> CpuExecutable
    CompileOptions(pipeline=None | "default" | callable, cache=True, disk_cache=True)
    CpuExecutable.run(*arrays) -> list[np.ndarray]   (tuple results flattened in order)
    CpuExecutable.as_llvm_ir(), .as_asm(), .as_hlo_text(), .memory_stats(),
        .kernel_strategies(), .compile_seconds

Where to read next: compiler.py (the stages), strategies.py (which emitter takes
each kernel, every refusal with its reason), elemental/generators.py (how a fusion becomes
one loop nest of composed element generators), emitters/loop_nest.py (the kernel shapes),
elemental/hoisting.py (row fusions), emitters/row_normalize.py (softmax rows: exp once, scale in
place), buffer_assignment.py (slots and the temp arena), executable.py /
thunks.py (running), inter_op.py (independent kernels on runtime streams),
disk_cache.py (the persistent cache:
$XLAPY_CACHE_DIR, disabled by XLAPY_DISABLE_DISK_CACHE=1; its entries are plain
data, cache_format.py).
"""
from .compiler import CompileOptions, compile
from .executable import CpuExecutable

__all__ = ["CompileOptions", "CpuExecutable", "compile"]
