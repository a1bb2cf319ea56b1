"""Standalone elementwise kernels over numpy arrays, for testing and benchmarking vecmath.

`math_kernel(opcode, dtype)` JIT-compiles (once per process) a loop

    void kernel(T* a, T* b, T* out, i64 n)      out[i] = opcode(a[i] [, b[i]])

with the vector math emitted either on explicit vectors of `lanes` elements
(plus a scalar remainder loop) or on scalars only (lanes=None), leaving
vectorization to LLVM's loop vectorizer as the compiler's fused loops do.
The kernel sets FTZ/DAZ on entry and restores MXCSR on exit, like the CPU
backend's kernels. This is a test fixture, not the compiler's loop emitter.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np
from llvmlite import ir

from ...hlo.opcodes import OPCODES

from ..llvm import target_machine
from ..llvm.fp_env import emit_restore_fp_mode, emit_set_flush_denormals

from .routines import emit_math

_I64 = ir.IntType(64)
_ELEMENT = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}


def _emit_loop(builder, name, start, stop, step, body):
    """for (i = start; i + step <= stop; i += step) body(i); returns the final i."""
    fn = builder.function
    head = fn.append_basic_block(f"{name}.head")
    loop = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    pre = builder.block
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(_I64, name=f"{name}.i")
    i.add_incoming(start, pre)
    step_c = ir.Constant(_I64, step)
    more = builder.icmp_signed("<=", builder.add(i, step_c), stop)
    builder.cbranch(more, loop, done)
    builder.position_at_end(loop)
    body(i)
    i.add_incoming(builder.add(i, step_c), builder.block)
    builder.branch(head)
    builder.position_at_end(done)
    return i


def build_module(opcode: str, dtype, lanes: int | None, ftz: bool = True,
                 emit=emit_math) -> str:
    """LLVM IR text of the kernel `vecmath_<op>` described in the module docstring.

    `emit(builder, opcode, args)` emits one element's math (benchmarks pass a
    libm-calling emitter to compare against)."""
    element = _ELEMENT[np.dtype(dtype)]
    arity = OPCODES[opcode].arity
    module = ir.Module(name=f"vecmath_{opcode}")
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, _I64]),
                     name="kernel")
    a_ptr, b_ptr, out_ptr, n = fn.args
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = emit_set_flush_denormals(builder) if ftz else None

    align = np.dtype(dtype).itemsize     # arrays are only element-aligned

    def body_for(ty):
        def body(i):
            args = []
            for p in (a_ptr, b_ptr)[:arity]:
                addr = builder.gep(p, [i], source_etype=element)
                args.append(builder.load(addr, typ=ty, align=align))
            result = emit(builder, opcode, args)
            builder.store(result, builder.gep(out_ptr, [i], source_etype=element), align=align)
        return body

    zero = ir.Constant(_I64, 0)
    i = zero
    if lanes:
        i = _emit_loop(builder, "vec", zero, n, lanes,
                       body_for(ir.VectorType(element, lanes)))
    _emit_loop(builder, "rem", i, n, 1, body_for(element))
    if ftz:
        emit_restore_fp_mode(builder, saved)
    builder.ret_void()
    return str(module)


class MathKernel:
    """A compiled elementwise kernel; call it with numpy arrays of its dtype."""

    def __init__(self, opcode: str, dtype, lanes: int | None, ftz: bool = True,
                 emit=emit_math):
        self.opcode, self.dtype = opcode, np.dtype(dtype)
        self.arity = OPCODES[opcode].arity
        self.ir_text = build_module(opcode, dtype, lanes, ftz, emit)
        self._jit = target_machine.jit_compile(self.ir_text)
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_int64)(self._jit.lookup("kernel"))

    def __call__(self, *arrays: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if len(arrays) != self.arity:
            raise ValueError(f"{self.opcode} takes {self.arity} array(s), got {len(arrays)}")
        arrays = [np.ascontiguousarray(a, dtype=self.dtype) for a in arrays]
        if any(a.shape != arrays[0].shape for a in arrays):
            raise ValueError(f"{self.opcode}: argument shapes differ")
        if out is None:
            out = np.empty_like(arrays[0])
        second = arrays[1] if self.arity == 2 else arrays[0]
        self._fn(arrays[0].ctypes.data, second.ctypes.data, out.ctypes.data, out.size)
        return out


@functools.lru_cache(maxsize=None)
def math_kernel(opcode: str, dtype, lanes: int | None = 16, ftz: bool = True) -> MathKernel:
    """The compiled kernel for (opcode, dtype, lanes, ftz), cached per process."""
    return MathKernel(opcode, np.dtype(dtype), lanes, ftz)


def assembly(opcode: str, dtype, lanes: int | None = None) -> str:
    """Optimized host assembly of the kernel (for checks on the emitted code)."""
    module = target_machine.parse_and_verify(build_module(opcode, dtype, lanes))
    target_machine.optimize(module)
    return target_machine.assembly(module)
