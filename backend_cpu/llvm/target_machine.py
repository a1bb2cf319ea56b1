"""LLVM for a target: initialization, target machines, O3 optimization, JIT.

Every part of the CPU backend that turns LLVM IR text into machine code goes
through this module, so that the target machine (the CPU name and features of
a `target.Target`), the optimization pipeline (new pass manager, O3, loop and
SLP vectorization) and the JIT engine are configured in one place. Each
function takes the target to use and defaults to `target.current()`: the
target of the compile in progress, else the host capped by $XLAPY_CPU_MAX_ISA.

    initialize()                 idempotent LLVM setup (every target LLVM has)
    target_machine(target)       cached TargetMachine of the target, O3, JIT code model
    host_target_machine()        the same for the current target (old name)
    parse_and_verify(ir_text)    llvm.ModuleRef for the target, verified
    optimize(module_ref)         runs the O3 module pipeline in place
    emit_object(module_ref)      machine code as an object file (loop strength reduction optional)
    assembly(module_ref)         the machine assembly as text (for checks and --emit=asm)
    jit_compile(ir_text)         (engine, lookup) with lookup(name) -> function address
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import threading
from typing import Callable, NamedTuple

import llvmlite.binding as llvm

from .. import target as targets
from ..target import Target

_initialized = False


def initialize() -> None:
    """Initializes LLVM's native target and asm printer once per process.

    llvmlite 0.45+ initializes the core itself; `llvm.initialize()` raises there,
    so only the native target parts are set up here.
    """
    global _initialized
    if _initialized:
        return
    targets._initialize()
    _bind_libm_symbols()
    _initialized = True


# Scalar libm functions JIT code may call (f64 slow paths, fmod for remainder, ...).
_LIBM_FUNCTIONS = ("acos", "asin", "atan", "atan2", "cbrt", "cos", "cosh", "erf", "erfc",
                   "exp", "exp2", "expm1", "fmod", "hypot", "log", "log10", "log1p",
                   "log2", "nextafter", "pow", "remainder", "sin", "sinh", "tan", "tanh")


def _bind_libm_symbols() -> None:
    """Points the JIT's libm symbols at the C library's libm explicitly.

    Left to the dynamic search, MCJIT resolves `cbrt` or `sin` to whichever
    loaded library exports the name first, which changes with the import order
    of the process (and their results differ in the last bit).
    """
    libm = _open_libm()
    if libm is None:
        return
    for name in _LIBM_FUNCTIONS:
        for variant in (name, name + "f"):
            fn = getattr(libm, variant, None)
            if fn is not None:
                llvm.add_symbol(variant, ctypes.cast(fn, ctypes.c_void_p).value)


def _open_libm():
    """The C library's libm: glibc's soname first, since `find_library` runs ldconfig
    in a subprocess (about 11 ms of every process's first compile); None if absent."""
    for name in ("libm.so.6", None):
        path = name or ctypes.util.find_library("m")
        if path is None:
            continue
        try:
            return ctypes.CDLL(path)
        except OSError:      # another C library (musl, macOS): ask the system
            continue
    return None


@functools.lru_cache(maxsize=None)
def target_machine(target: Target | None = None) -> llvm.TargetMachine:
    """The TargetMachine of `target` (default: the current one), at O3.

    Shared and cached: use it for optimizing and printing assembly, never hand
    it to an execution engine (see `jit_compile`).
    """
    initialize()
    return (target or targets.current()).target_machine()


def host_target_machine() -> llvm.TargetMachine:
    """The shared TargetMachine of the current target."""
    return target_machine(targets.current())


def new_target_machine(target: Target | None = None) -> llvm.TargetMachine:
    """A TargetMachine of its own, for an execution engine (MCJIT frees the machine it
    is given with the engine). Only a target the host can run may be JIT-compiled."""
    initialize()
    target = target or targets.current()
    if not target.runs_on_host:
        raise targets.TargetError(f"backend_cpu: code compiled for {target.describe()} cannot "
                                  f"run on this host ({targets.host().describe()})")
    return target.target_machine()


def parse_and_verify(ir_text: str, target: Target | None = None) -> llvm.ModuleRef:
    """Parses textual LLVM IR into a module for the target and verifies it."""
    initialize()
    module = llvm.parse_assembly(ir_text)
    module.verify()
    tm = target_machine(target or targets.current())
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    return module


def _pipeline_options() -> llvm.PipelineTuningOptions:
    pto = llvm.PipelineTuningOptions(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pto.loop_interleaving = True
    return pto


# The light pipeline: what IR written on vectors still needs. SROA turns the
# emitters' allocas (accumulators, staged chunks) into SSA values, InstCombine folds
# the address arithmetic and splats, SimplifyCFG merges the blocks. Loop-invariant
# code is left where it is: the code generator's machine LICM hoists it.
LIGHT_PASSES = ("sroa", "instruction_combine", "simplify_cfg")


def optimize(module: llvm.ModuleRef, light: bool = False,
             target: Target | None = None) -> llvm.ModuleRef:
    """Runs LLVM's O3 module pipeline (new pass manager) on `module` in place; with
    `light`, only LIGHT_PASSES (for modules whose loops are all written on vectors
    or meant to stay scalar: O3 costs ~10 ms on a softmax kernel, these ~1 ms).

    A fresh pass builder per call: llvmlite's `run` registers instrumentation
    callbacks into the builder that point at its own stack frame, so a builder
    must not run a second time. Each builder leaves about 1.5 KiB behind (its
    instrumentation callbacks object is never deleted by llvmlite).
    """
    tm = target_machine(target or targets.current())
    pass_builder = llvm.create_pass_builder(tm, _pipeline_options())
    if light:
        pass_manager = llvm.ModulePassManager()
        for name in LIGHT_PASSES:
            getattr(pass_manager, f"add_{name}_pass")()
    else:
        pass_manager = pass_builder.getModulePassManager()
    try:
        pass_manager.run(module, pass_builder)
    finally:
        _free_pass_manager(pass_manager)
        pass_builder.close()
    return module


def _free_pass_manager(pass_manager: llvm.ModulePassManager) -> None:
    """Deletes an O3 module pass manager (about 30 KiB of pass objects, and more
    once it has run).

    In llvmlite 0.50 `ModulePassManager` lists `ObjectRef` before
    `NewPassManager` among its bases, so `close()` and garbage collection find
    ObjectRef's empty `_dispose` and never delete the C++ object: every
    `optimize` leaked about 68 KiB. When the method resolution order finds a real
    `_dispose`, `close()` is enough.
    """
    if type(pass_manager)._dispose is llvm.ffi.ObjectRef._dispose:
        llvm.ffi.lib.LLVMPY_DisposeNewModulePassManger(pass_manager)
        pass_manager.detach()
    else:
        pass_manager.close()


_codegen_options_lock = threading.Lock()


def emit_object(module: llvm.ModuleRef, *, strength_reduction: bool = True,
                target: Target | None = None) -> bytes:
    """Machine code for an (already optimized) module, as an ELF object file.

    `strength_reduction=False` skips the code generator's loop strength reduction.
    """
    with _codegen_options(strength_reduction):
        return bytes(target_machine(target or targets.current()).emit_object(module))


def assembly(module: llvm.ModuleRef, *, strength_reduction: bool = True,
             target: Target | None = None) -> str:
    """The target's machine assembly for an (already optimized) module."""
    with _codegen_options(strength_reduction):
        return target_machine(target or targets.current()).emit_assembly(module)


@contextlib.contextmanager
def _codegen_options(strength_reduction: bool):
    """LLVM reads the strength-reduction switch from a process-wide option: it is
    turned off and back on around one emission, under a lock so that two
    compiles in two threads agree on it."""
    if strength_reduction:
        yield
        return
    with _codegen_options_lock:
        llvm.set_option("", "-disable-lsr=true")
        try:
            yield
        finally:
            llvm.set_option("", "-disable-lsr=false")


class JitModule(NamedTuple):
    """A JIT-compiled module. Unpacks as `(engine, lookup)`.

    `lookup(name)` returns the address of a defined function; holding this object
    (or the `lookup` closure) keeps the MCJIT engine, and so the code, alive.
    """
    engine: llvm.ExecutionEngine
    lookup: Callable[[str], int]


def jit_compile(ir_text: str, *, optimize_ir: bool = True,
                target: Target | None = None) -> JitModule:
    """Parses, verifies, optimizes (unless told not to) and JIT-compiles IR text."""
    target = target or targets.current()
    module = parse_and_verify(ir_text, target)
    if optimize_ir:
        optimize(module, target=target)
    # MCJIT takes ownership of the TargetMachine it is given and frees it with the
    # engine, so every engine gets a fresh one (not the shared cached machine).
    engine = llvm.create_mcjit_compiler(module, new_target_machine(target))
    engine.finalize_object()
    engine.run_static_constructors()

    def lookup(name: str) -> int:
        address = engine.get_function_address(name)
        if not address:
            raise KeyError(f"jit_compile: no function named {name!r} in the module")
        return address

    return JitModule(engine, lookup)
