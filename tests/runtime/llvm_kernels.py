"""Tiny kernels with the runtime's ABI, JIT-compiled with llvmlite for tests and benchmarks.

The runtime itself never imports llvmlite; these kernels stand in for what the CPU
backend emits: `void k(void** buffers, i64 begin, i64 end)` working on `[begin, end)`.

    add_one        out[i] = in[i] + 1            buffers: in f32*, out f32*
    iterate_fma    out[i] = 64 steps of y*a+b    compute-bound, for overlap measurements
"""
from __future__ import annotations

import functools

import llvmlite.binding as llvm
import numpy as np

from xlapy.runtime import Kernel

# Loads buffers[0] (input) and buffers[1] (output), then loops i over [begin, end).
_PROLOGUE = """
define void @{name}(ptr noalias nocapture readonly %buffers, i64 %begin, i64 %end) {{
entry:
  %in = load ptr, ptr %buffers, align 8
  %out.slot = getelementptr ptr, ptr %buffers, i64 1
  %out = load ptr, ptr %out.slot, align 8
  %empty = icmp sge i64 %begin, %end
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [ %begin, %entry ], [ %next, %{latch} ]
  %src = getelementptr float, ptr %in, i64 %i
  %x = load float, ptr %src, align 4
"""

_EPILOGUE = """
  %dst = getelementptr float, ptr %out, i64 %i
  store float %y, ptr %dst, align 4
  %next = add nsw i64 %i, 1
  %done = icmp eq i64 %next, %end
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}
"""

ADD_ONE_IR = (_PROLOGUE + "  %y = fadd float %x, 1.0\n" + _EPILOGUE).format(
    name="add_one", latch="loop")

# 64 dependent multiply-adds per element: enough arithmetic that two streams
# running it side by side are limited by the cores, not by memory bandwidth.
ITERATE_FMA_IR = (_PROLOGUE + """  br label %steps
steps:
  %k = phi i64 [ 0, %loop ], [ %k.next, %steps ]
  %acc = phi float [ %x, %loop ], [ %acc.next, %steps ]
  %acc.next = call float @llvm.fma.f32(float %acc, float 0x3FEFF7CEE0000000, float 0x3F50624DE0000000)
  %k.next = add i64 %k, 1
  %k.done = icmp eq i64 %k.next, 64
  br i1 %k.done, label %store, label %steps
store:
  %y = fadd float %acc.next, 0.0
""" + _EPILOGUE).format(name="iterate_fma", latch="store") \
    + "declare float @llvm.fma.f32(float, float, float)\n"


@functools.lru_cache(maxsize=None)
def _target_machine():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, codemodel="jitdefault")


@functools.lru_cache(maxsize=None)
def compile_kernel(ir_text: str, name: str) -> Kernel:
    """JIT-compiles `ir_text` at O3 for the host and wraps function `name` as a Kernel.

    Cached, and the engine is kept on the kernel object so the code stays mapped.
    """
    machine = _target_machine()
    module = llvm.parse_assembly(ir_text)
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    module.verify()
    tuning = llvm.PipelineTuningOptions(speed_level=3)
    tuning.loop_vectorization = tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    kernel = Kernel(engine.get_function_address(name), name)
    _ENGINES[name] = engine        # Kernel has __slots__; keep the engine alive here
    return kernel


_ENGINES: dict = {}


def add_one_kernel() -> Kernel:
    return compile_kernel(ADD_ONE_IR, "add_one")


def iterate_fma_kernel() -> Kernel:
    return compile_kernel(ITERATE_FMA_IR, "iterate_fma")


def iterate_fma_reference(x):
    """What iterate_fma computes, in numpy float32 (fma rounding differs by a few ulp)."""
    a, b = np.float32(0.999), np.float32(0.001)   # the IR's hex constants, as floats
    y = x.astype(np.float32)
    for _ in range(64):
        y = y * a + b
    return y
