"""Machine code: an optimized LLVM module made object code, and object code loaded into
an execution engine (`Jit`), once every symbol it needs resolves.

Code generation runs once, to an object file, which the engine then loads: the
object code is what the disk cache (disk_cache.py) stores, and loading it again
costs no LLVM optimization or code generation.

`compile_objects(texts, ...)` turns several LLVM modules (IR text) into object code
on several threads: parse, optimize and generate code, each module in an LLVMContext
and with a TargetMachine of its thread, so that no LLVM object is shared. ctypes lets
go of the GIL around a foreign call, but llvmlite wraps every call of its library in
one process-wide lock (llvmlite.binding.ffi: `_lib_fn_wrapper`), which serializes them
all again (measured: two threads optimizing and generating two copies of a 220 kB
module used 0.49 CPU-seconds per wall second, i.e. one at a time). The three heavy
calls (parse, verify, the module pass manager's run, emit to memory, disposing of
the module and its context) therefore go straight to the library's functions
(`_unlocked`), on objects only that thread can see (0.74
-> 1.15 CPU-s per wall-s with two threads on the same modules, a shared 2-core host);
everything else (creating and disposing the objects) takes llvmlite's lock as usual.
`jit_objects(objects)` loads several object files into one engine, which resolves
their calls between each other.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import os
import threading
import time

import llvmlite.binding as llvm
from llvmlite.binding import ffi

from .. import target as targets
from ... import runtime
from ...runtime import config as runtime_config
from ...runtime import profiler
from . import native_symbols, target_machine


class Jit:
    """JIT-compiled machine code: `lookup(name) -> address`; `object_code` is its bytes."""

    def __init__(self, engine, object_code: bytes | None):
        self.engine = engine
        self.object_code = object_code

    def lookup(self, name: str) -> int:
        address = self.engine.get_function_address(name)
        if not address:
            raise KeyError(f"backend_cpu: no function named {name!r} in the compiled code")
        return address


def _engine_target_machine():
    # MCJIT takes ownership of its TargetMachine and frees it with the engine: every
    # engine needs a fresh one, never target_machine.py's cached one.
    return target_machine.new_target_machine()


def object_code(module_ref, strength_reduction: bool = True) -> bytes:
    """The object code of an optimized module, for `jit_object` and the cache
    (emitting does not take ownership of the target machine: the shared one serves)."""
    return target_machine.emit_object(module_ref, strength_reduction=strength_reduction)


def jit_module(module_ref, strength_reduction: bool = True) -> Jit:
    """JIT-compiles an optimized module; keeps its object code for the cache.

    Code generation runs once, to an object file, which the engine then loads
    (llvmlite's object-cache hook cannot be used: its engine crashes on disposal).
    """
    return jit_object(object_code(module_ref, strength_reduction))


def jit_object(object_code: bytes | list) -> Jit:
    """Loads object code (one object file, or a list of them that call each other) into
    a fresh engine (no LLVM optimization or codegen), once every symbol it needs
    resolves (native_symbols.py: an unresolved one would be address zero, a crash at
    the first call)."""
    objects = list(object_code) if isinstance(object_code, (list, tuple)) else [object_code]
    provided = set()
    for code in objects:
        provided.update(native_symbols.defined_symbols(code))
    for code in objects:
        native_symbols.ensure_resolvable(code, provided)
    engine = llvm.create_mcjit_compiler(target_machine.parse_and_verify(""),
                                        _engine_target_machine())
    files = [llvm.ObjectFileRef.from_data(code) for code in objects]
    for object_file in files:
        engine.add_object_file(object_file)
    engine.finalize_object()
    jit = Jit(engine, object_code)
    jit._object_files = files           # live as long as the engine that loaded them
    return jit


# --- several modules on several threads ---------------------------------------------------

def default_threads() -> int:
    """Compile threads when not given: $XLAPY_COMPILE_THREADS, else the runtime's
    thread pool size (its intra-op threads)."""
    env = os.environ.get("XLAPY_COMPILE_THREADS", "")
    if env.strip():
        return runtime_config.parse_count(env, "XLAPY_COMPILE_THREADS")
    return max(1, runtime.get_options().intra_op_threads)


def check_threads(threads) -> int:
    """`threads` if it is a thread count, else a ValueError saying so."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"compile_threads must be an integer >= 1, got {threads!r}")
    return threads


def _unlocked(name: str):
    """The library function `name` without llvmlite's process-wide lock (same argtypes:
    llvmlite sets them on this very ctypes object)."""
    return getattr(ffi.lib._lib, name)


class _ThreadState(threading.local):
    """Per compile thread: a TargetMachine per target (fingerprint -> machine), the
    triple and data layout each machine gives a module, and the pass builders' tuning
    options (a pass builder copies them). Each llvmlite call gives up the GIL and waits
    for it again, a wait of up to the switch interval while another thread emits
    kernels in Python (kernel_cache.Batch): a module costs some 30 such calls, of which
    these save 12."""

    def __init__(self):
        self.machines: dict = {}
        self.layouts: dict = {}
        self.tuning = None


_state = _ThreadState()


def _machine(target, quick: bool = False) -> llvm.TargetMachine:
    """This thread's TargetMachine of `target`: at O3, or with `quick` at opt level 0
    (FastISel, no machine-code optimizations)."""
    key = (target.fingerprint(), quick)
    tm = _state.machines.get(key)
    if tm is None:
        target_machine.initialize()
        if quick:
            tm = llvm.Target.from_triple(target.triple).create_target_machine(
                cpu=target.cpu, features=target.features, opt=0, reloc="default",
                codemodel="jitdefault")
        else:
            tm = target.target_machine()
        _state.machines[key] = tm
    return tm


def _layout(target, quick: bool, tm) -> tuple[str, str]:
    """(triple, data layout) of this thread's machine `tm` for `target`."""
    key = (target.fingerprint(), quick)
    found = _state.layouts.get(key)
    if found is None:
        found = _state.layouts[key] = (tm.triple, str(tm.target_data))
    return found


def _tuning() -> llvm.PipelineTuningOptions:
    if _state.tuning is None:
        _state.tuning = target_machine._pipeline_options()
    return _state.tuning


def _parse(text: str, context) -> llvm.ModuleRef:
    data = text.encode("utf8")
    with ffi.OutputString() as error:
        pointer = _unlocked("LLVMPY_ParseAssembly")(context, ctypes.c_char_p(data), error)
        module = llvm.ModuleRef(pointer, context)
        if error:
            module.close()
            raise RuntimeError(f"LLVM IR parsing error\n{error}")
    return module


def _optimize(module: llvm.ModuleRef, tm, light: bool) -> None:
    """target_machine.optimize's pipeline, with the pass manager run outside the lock."""
    pass_builder = llvm.create_pass_builder(tm, _tuning())
    if light:
        pass_manager = llvm.ModulePassManager()
        for name in target_machine.LIGHT_PASSES:
            getattr(pass_manager, f"add_{name}_pass")()
    else:
        pass_manager = pass_builder.getModulePassManager()
    try:
        _unlocked("LLVMPY_RunNewModulePassManager")(pass_manager, module, pass_builder)
    finally:
        target_machine._free_pass_manager(pass_manager)
        pass_builder.close()


def _emit(module: llvm.ModuleRef, tm) -> bytes:
    with ffi.OutputString() as error:
        buffer = _unlocked("LLVMPY_TargetMachineEmitToMemory")(tm, module, 1, error)
        if not buffer:
            raise RuntimeError(str(error))
    try:
        return ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(buffer),
                                ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


def _verify(module: llvm.ModuleRef) -> None:
    with ffi.OutputString() as error:
        if _unlocked("LLVMPY_VerifyModule")(module, error):
            raise RuntimeError(str(error))


def _compile_one(text: str, light: bool, target, trace, quick: bool = False) -> bytes:
    tm = _machine(target, quick)
    context = llvm.create_context()
    try:
        start = time.perf_counter()
        module = _parse(text, context)
        try:
            _verify(module)
            module.triple, module.data_layout = _layout(target, quick, tm)
            parsed = time.perf_counter()
            if not quick:
                _optimize(module, tm, light)
            optimized = time.perf_counter()
            code = _emit(module, tm)
            if trace:
                # (`quick`: the glue module's, with the code generator at opt level 0)
                extra = {"quick": True} if quick else {}
                profiler.add_spans([("LLVM parse and verify", start, parsed - start,
                                     extra or None),
                                    ("LLVM optimize", parsed, optimized - parsed,
                                     {"pipeline": "light" if light else "O3", **extra}),
                                    ("LLVM codegen", optimized, time.perf_counter() - optimized,
                                     extra or None)])
            return code
        finally:
            _unlocked("LLVMPY_DisposeModule")(module)     # (its context is ours alone)
            module.detach()
    finally:
        _unlocked("LLVMPY_ContextDispose")(context)
        context.detach()


_pools: dict[tuple[int, int], concurrent.futures.ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(threads: int) -> concurrent.futures.ThreadPoolExecutor:
    """The compile threads (a pool per count; per process: a forked child has none of
    its parent's threads, and must not wait on them)."""
    key = (os.getpid(), threads)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = concurrent.futures.ThreadPoolExecutor(
                threads, thread_name_prefix="xlapy-llvm")
        return pool


def submit(text: str, *, light: bool, target, threads: int,
           quick: bool = False) -> concurrent.futures.Future:
    """Starts the object code of one module (IR text) on the `threads` compile threads
    and returns its future: a compile submits each kernel as soon as it is emitted
    (kernel_cache.Batch), so that LLVM works while Python emits the next ones. Only
    with loop strength reduction on (the code generator's default): turning it off is
    a process-wide switch that `compile_objects` holds across a whole batch."""
    return _pool(check_threads(threads)).submit(_compile_one, text, light, target,
                                                profiler.active is not None, quick)


def compile_objects(texts: list[str], *, light=False, strength_reduction: bool = True,
                    threads: int | None = None, target=None, quick=False) -> list[bytes]:
    """The object code of each LLVM module in `texts` (IR text), optimized (O3, or the
    light pipeline; `light` one bool for all or one per text) for `target` (default: the
    current one), on `threads` threads (None: `default_threads()`). `quick` (one bool or
    one per text): no optimizer, and the code generator at opt level 0, for modules
    whose code speed does not matter (the glue of kernel_cache.py: 0.62 -> 0.09 s for
    the 542 wrappers of the 12-layer GPT step; the light pipeline left its object code
    byte for byte as it was, and took 15 of its 75 ms). The objects do not depend on the thread count.
    Each module's phases are spans of a running trace, on the thread that ran them."""
    target = target or targets.current()
    lights = list(light) if isinstance(light, (list, tuple)) else [light] * len(texts)
    quicks = list(quick) if isinstance(quick, (list, tuple)) else [quick] * len(texts)
    threads = default_threads() if threads is None else check_threads(threads)
    trace = profiler.active is not None
    # Biggest first, so that no thread is left with a big module at the end.
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    results: list = [None] * len(texts)
    with target_machine._codegen_options(strength_reduction):
        if threads == 1 or len(texts) < 2:
            for i in order:
                results[i] = _compile_one(texts[i], lights[i], target, trace, quicks[i])
        else:
            pool = _pool(threads)
            futures = {i: pool.submit(_compile_one, texts[i], lights[i], target, trace,
                                      quicks[i])
                       for i in order}
            for i, future in futures.items():
                results[i] = future.result()
    return results
