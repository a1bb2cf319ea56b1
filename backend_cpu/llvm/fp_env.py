"""The floating-point environment of a kernel, per target: flush denormals to zero
on entry, restore the caller's mode on exit, and order non-temporal stores.

Like XLA's CPU backend, float arithmetic runs with denormals flushed (DESIGN.md,
"Numbers that count"). Each architecture keeps that switch in a control register:

    x86      MXCSR bits FTZ (15, results) and DAZ (6, inputs): stmxcsr / ldmxcsr
    AArch64  FPCR bit FZ (24), which flushes both inputs and results
    other    no switch is emitted (the code is still correct IEEE arithmetic,
             only denormals are kept)

`emit_set_flush_denormals(builder)` returns a stack slot with the old mode,
which `emit_restore_fp_mode(builder, saved)` writes back. Both allocate in and
emit at the builder's position; call the first once per function, before any
loop (the entry block is best), and the second before every return.

`emit_store_fence(builder)` makes streamed (non-temporal) stores visible to other
threads: `sfence` on x86, where such stores are weakly ordered; a sequentially
consistent fence elsewhere.
"""
from __future__ import annotations

from llvmlite import ir

from .. import target as targets

# The intrinsics above, by name prefix (ir_policy tells them from real work).
INTRINSIC_PREFIXES = ("llvm.x86.sse.", "llvm.aarch64.get.fpcr", "llvm.aarch64.set.fpcr")

_MXCSR_FTZ = 1 << 15
_MXCSR_DAZ = 1 << 6
_FPCR_FZ = 1 << 24
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


def _declare(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    return fn


def _arch() -> str:
    t = targets.current()
    if t.is_x86:
        return "x86"
    return "aarch64" if t.triple.startswith(("aarch64", "arm64")) else "other"


def emit_set_flush_denormals(builder: ir.IRBuilder) -> ir.Value | None:
    """Turns on flush-to-zero; returns the saved mode (None where there is none)."""
    module, arch = builder.module, _arch()
    if arch == "x86":
        saved = builder.alloca(_I32, name="mxcsr.saved")
        flushed = builder.alloca(_I32, name="mxcsr.flush")
        builder.call(_declare(module, "llvm.x86.sse.stmxcsr", ir.VoidType(), [ir.PointerType()]),
                     [saved])
        old = builder.load(saved, name="mxcsr.old")
        builder.store(builder.or_(old, ir.Constant(_I32, _MXCSR_FTZ | _MXCSR_DAZ)), flushed)
        builder.call(_declare(module, "llvm.x86.sse.ldmxcsr", ir.VoidType(), [ir.PointerType()]),
                     [flushed])
        return saved
    if arch == "aarch64":
        old = builder.call(_declare(module, "llvm.aarch64.get.fpcr", _I64, []), [], name="fpcr")
        saved = builder.alloca(_I64, name="fpcr.saved")
        builder.store(old, saved)
        builder.call(_declare(module, "llvm.aarch64.set.fpcr", ir.VoidType(), [_I64]),
                     [builder.or_(old, ir.Constant(_I64, _FPCR_FZ))])
        return saved
    return None


def emit_restore_fp_mode(builder: ir.IRBuilder, saved: ir.Value | None) -> None:
    """Writes back the mode `emit_set_flush_denormals` saved."""
    if saved is None:
        return
    module, arch = builder.module, _arch()
    if arch == "x86":
        builder.call(_declare(module, "llvm.x86.sse.ldmxcsr", ir.VoidType(), [ir.PointerType()]),
                     [saved])
    elif arch == "aarch64":
        builder.call(_declare(module, "llvm.aarch64.set.fpcr", ir.VoidType(), [_I64]),
                     [builder.load(saved, typ=_I64)])


def emit_store_fence(builder: ir.IRBuilder) -> None:
    """Orders this thread's non-temporal stores before everything after it."""
    if _arch() == "x86":
        builder.call(_declare(builder.module, "llvm.x86.sse.sfence", ir.VoidType(), []), [])
    else:
        builder.fence("seq_cst")
