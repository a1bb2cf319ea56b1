"""LLVM for the CPU backend: the layer every emitter stands on.

    types            how HLO element types live in LLVM (storage and compute types, lanes)
    loops            counted loops, loop nests, loop hints, i64 index arithmetic
    kernel_ir        the frame of one kernel function and typed views of its buffers
    fp_env           the floating-point environment (flush-to-zero on entry, restore on exit)
    ir_toolkit       general llvmlite helpers (intrinsics, splats, conversions, allocas)
    ir_policy        decisions on the emitted IR before LLVM sees it
    target_machine   LLVM initialization, target machines, O3 optimization, assembly, JIT
    machine_code     object code, loaded into an engine once its symbols resolve
    native_symbols   the symbols machine code needs from the process, checked before loading
    half_runtime     the f16 conversion routines LLVM calls without F16C

Imports: nothing of the backend but the compile target (`backend_cpu/target.py`); of
the project, `hlo` (element types) only. Knows nothing of HLO instructions or fusions.
"""
