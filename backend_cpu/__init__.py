"""backend_cpu: HLO -> vectorized, partitioned LLVM IR -> JIT -> CpuExecutable.

    compile(module, options=None) -> CpuExecutable
    CompileOptions(pipeline=None | "default" | callable, cache=True, disk_cache=True)
    CpuExecutable.run(*arrays) -> list[np.ndarray]   (tuple results flattened in order)
    CpuExecutable.as_llvm_ir(), .as_asm(), .as_hlo_text(), .memory_stats(),
        .kernel_strategies(), .compile_seconds

Several devices (collective_thunks.py; docs/backend.md "Devices"):
    CompileOptions(num_devices=N)        N = the module's replica_count * num_partitions
                                         (default); a one-device module runs as N replicas
    executable.run_devices(args_per_device, timeout=None) -> outputs per device
                                         (a thread per device, intra-op threads shared)
    CompileOptions(num_devices=N, distributed="mpi")   compiled on every rank;
        executable.run(*args) runs device executable.device (= the MPI rank);
        executable.communicator, .num_devices, .replica_count, .num_partitions

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
                     collective_thunks.py (collectives through the runtime's
                     Communicator, async starts early and dones late),
                     collective_fold.py (the one-pass native folds the runtime's
                     in-process all-reduce runs),
                     sort_thunk.py (sorts numpy does on the host), disk_cache.py
                     (the persistent cache: $XLAPY_CACHE_DIR, disabled by
                     XLAPY_DISABLE_DISK_CACHE=1; its entries are plain data,
                     cache_format.py)

Where to read next: compiler.py, strategies.py, elemental/generators.py,
emitters/loop_nest.py, elemental/hoisting.py, emitters/row_normalize.py.
"""
from .. import runtime
from . import collective_fold
from .compiler import CompileOptions, compile
from .executable import CpuExecutable

# The runtime's in-process all-reduce folds in one native pass (collective_fold.py).
runtime.set_native_folds(collective_fold.provide)

__all__ = ["CompileOptions", "CpuExecutable", "compile"]
