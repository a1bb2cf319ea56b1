"""`compile(module, options) -> CpuExecutable`: the CPU backend's driver.

1. Optionally run an HLO pass pipeline on a copy of the module.
2. Turn every computation that runs on the host (the entry, while bodies and
   conditions, branches, calls) into a `Program`: walk it in post order,
   give each value a slot (buffer_assignment.py), and emit one kernel per
   instruction that computes something (fusions included) — aliases
   (tuple, get-tuple-element, bitcast, copy, row-major reshape) cost nothing
   when the layouts agree (below).
3. Each kernel is an LLVM module of its own, its body named after its content
   (kernel_cache.py): identical kernels (the layers of a model) are one body, and a
   kernel whose instruction (called computations printed with names by order, operand
   layouts, operands sharing slots, constants' bytes: `_emission_key`) was emitted
   before in this compile is not emitted again but put on its own slots (`_replay`). The
   distinct bodies not in the kernel cache (memory, disk) are verified, optimized
   (O3, vectorizers) and code-generated on the compile threads
   (`CompileOptions.compile_threads`) -- each as soon as it is emitted when a core
   is left for the emitting thread (kernel_cache.Batch) -- then the glue module of
   wrappers that pass each kernel's slots to its body; the objects are loaded into
   one engine.
4. Place temporaries in the arena and link the thunks to their machine code.

Layouts at boundaries: every value is stored in the layout its own instruction's
shape declares, and each side of a boundary reads it in the layout *it* declares.
Where a value crosses into a declaration of another layout -- an element of a
tuple, a get-tuple-element, a copy or opt-barrier, the operands and results of a
conditional branch or call, the state of a while loop (kept in the body
parameter's layouts: the init, the body's root and the final state convert) --
`ProgramBuilder._conform` puts a relayout kernel (a layout-changing copy) in
between, once per slot and layout. Layouts that order the dimensions of size > 1
alike store the same bytes and share the slot. A bitcast reinterprets bytes: it
always aliases, and its value is in its own layout. Inside a fusion, generators
index operands logically, so fused parameters and roots need no copy (the memory
views of gemm/operands.resolve_view check the layout). The entry's results keep the
root's layouts; CpuExecutable converts them to numpy's.

While loops own their state (the init is copied in), so a body's root leaf that is a
dynamic-update-slice of its own state leaf, which nothing else reads (a scan's stacked
outputs), is computed in place: a kernel stores only the update into the state
(`in_place_updates`, emitters/in_place_update.py). A while whose cond and body are only
kernels and copies runs as one native call (native_loop.py).

Compile time is part of the first call, so the driver avoids work that does
not change the machine code: Python's cyclic garbage collector is paused
while a module compiles (`paused_gc`), the passes rewrite a clone of the module
(or the copy a caller hands over, `copy=`), not a parse of its text, the
optimized LLVM IR and the compiled HLO module are printed only when someone asks
for them, and llvm/ir_policy.py
keeps LLVM from runtime-unrolling loops and from optimizing kernels that only
call the (unoptimized) GEMM driver. A module whose kernels all stream large
outputs (memory-bound) is generated without loop strength reduction. A module
whose kernels leave no loop to LLVM's vectorizer (their minor loops are written
on vectors, elemental/vector_gen.py) takes a light pipeline of three passes instead of O3
(decided per kernel: each is a module of its own).

While a trace runs (runtime/profiler.py, xlapy.profiler), each phase above is a
span of the host, and every thunk carries `profile`: its HLO instruction, op,
strategy, bytes read and written and flops, which its spans report at run time.

Compiled executables are cached in memory (an LRU of CACHE_CAPACITY) by a
fingerprint of the module text and the options: compiling the same module
twice returns the same executable. disk_cache.py adds a cache shared between
processes.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import re
import sys
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, NamedTuple

import llvmlite.ir as ir
import numpy as np

from .. import passes, runtime
from ..hlo import HloInstruction, collectives, parse_module
from ..hlo.ir import callees_first
from ..hlo.printer import print_instruction
from ..hlo.dtypes import numpy_dtype
from ..passes.cost_analysis import instruction_cost
from ..passes import narrow_types
from ..runtime import profiler
from ..hlo.eval_dot_conv import algorithm_refusal
from ..hlo.verifier import VerifyError, check_static_shapes

from . import collective_thunks as ct, disk_cache, inter_op, kernel_cache, library_ops, sort_thunk
from . import strategies
from . import target as targets
from . import schedule
from .buffer_assignment import Slot, assign_arena
from .emitters import in_place_update, loop_nest
from .executable import CpuExecutable, Program, physical_dims, to_physical
from .gemm import library as gemm_library
from .llvm import ir_policy, machine_code
from .llvm.loops import loops_left_to_llvm
from .target import Target
from .thunks import CallThunk, ConditionalThunk, CopyThunk, KernelThunk, WhileThunk

SMALL_KERNEL_ELEMENTS = 1024


@dataclass(frozen=True)
class CompileOptions:
    """`pipeline`: None (compile as given), "default" (passes.cpu_pipeline()) or a
    callable taking and mutating an HloModule. `cache`: use the in-memory cache.
    `disk_cache`: use the persistent cache of disk_cache.py (None and "default"
    pipelines only).

    The target (target.py): `max_isa` ("sse4.2", "avx2", "avx512") caps the host
    like XLA's --xla_cpu_max_isa, `cpu` names an x86 CPU, `triple` another
    architecture; all None: the host, capped by $XLAPY_CPU_MAX_ISA. Code for a
    target the host cannot execute is compiled and printed, not run.

    Devices (see `devices()`): `num_devices` N, default the module's
    replica_count * num_partitions; `distributed` None (all N devices in this process:
    `run_devices`) or "mpi" (one device per MPI rank: every rank compiles, `run` runs
    the rank's device).

    `compile_threads`: how many threads optimize and generate code for the kernels
    (kernel_cache.py), default $XLAPY_COMPILE_THREADS, else the runtime's thread pool
    size. The machine code does not depend on it (nor does the cache key)."""
    pipeline: object = None
    cache: bool = True
    disk_cache: bool = True
    max_isa: str | None = None
    cpu: str | None = None
    triple: str | None = None
    num_devices: int | None = None
    distributed: str | None = None
    compile_threads: int | None = None

    def target(self) -> Target:
        if self.max_isa is None and self.cpu is None and self.triple is None:
            return targets.default()
        return targets.resolve(self.max_isa, self.cpu, self.triple)

    def devices(self, module) -> tuple[int, int]:
        """(replica_count, num_partitions) the module runs with, like XLA's build options:
        N = num_devices must equal the module's R * P; a module of one device (R = P = 1,
        the default) given N > 1 runs as N replicas (cross-replica collectives, replica-id
        = device). A bad count or `distributed` is a ValueError."""
        R, P = module.replica_count, module.num_partitions
        n = self.num_devices
        if self.distributed not in (None, "mpi"):
            raise ValueError(f"compile: distributed must be None or 'mpi', got "
                             f"{self.distributed!r}")
        if n is None:
            return R, P
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"compile: num_devices must be an integer >= 1, got {n!r}")
        if n == R * P:
            return R, P
        if R * P == 1:
            return n, 1
        raise ValueError(f"compile: num_devices={n}, but module {module.name} runs on "
                         f"{R * P} devices (replica_count={R}, num_partitions={P}); "
                         f"give num_devices={R * P} or leave it out")

    def fingerprint(self) -> str:
        p = self.pipeline
        key = p if p is None or isinstance(p, str) else f"{getattr(p, '__module__', '')}." \
                                                         f"{getattr(p, '__qualname__', repr(p))}"
        return (f"pipeline={key};target={self.target().fingerprint()};"
                f"devices={self.num_devices};distributed={self.distributed}")


# The in-memory cache is an LRU of this many executables (each holds JIT'd code).
CACHE_CAPACITY = 128
_cache: "OrderedDict[str, CpuExecutable]" = OrderedDict()
_cache_lock = threading.Lock()


def compile(module, options: CompileOptions | None = None, *,
            copy: Callable[[], object] | None = None) -> CpuExecutable:
    """Compiles an HLO module for the host CPU (see the module docstring).

    `copy`: a function returning a private copy of `module` for the pass pipeline
    to rewrite, called only if a pipeline runs; by default the pipeline rewrites a
    clone (HloModule.clone: 10 ms for the 12-layer GPT step, where parsing the text
    took seconds and the frontend's lowering again 170 ms).
    """
    options = options or CompileOptions()
    options.devices(module)               # a bad device count fails before any work
    if options.compile_threads is not None:
        machine_code.check_threads(options.compile_threads)
    _refuse_dynamic_shapes(module)
    text = module.to_text()
    # The kernels depend on the intra-op thread count too: GEMMs and convolutions cut
    # their work units for it (a module compiled for one thread ran one unit on two).
    fingerprint = f"{options.fingerprint()};threads={runtime.get_options().intra_op_threads}"
    key = hashlib.sha256((text + "\0" + fingerprint).encode()).hexdigest()
    if options.cache:
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
        if hit is not None:
            if profiler.active is not None:
                profiler.active.add(f"compile {module.name}", "compile", profiler.now(),
                                    profiler.now(), args={"cache": "memory"})
            return hit
    with paused_gc(), targets.using(options.target()), \
            profiler.span(f"compile {module.name}", args={"cache": "none"}):
        executable = _compile_uncached(module, text, fingerprint, options, copy)
    if options.cache:
        with _cache_lock:
            _cache[key] = executable
            while len(_cache) > CACHE_CAPACITY:
                _cache.popitem(last=False)      # the least recently used
    return executable


def _refuse_dynamic_shapes(module) -> None:
    """Dynamic dimensions (`f32[<=8]`, `f32[?,4]`) are refused here as the evaluator
    refuses them (docs/hlo.md): computing with the bound would be right only while
    the runtime size equals it, and a wrong number is worse than no number. So is a
    dot whose `algorithm=` asks for other rounding than its own types', and an entry
    that returns a token (a run returns arrays only)."""
    try:
        check_static_shapes(module, "the CPU backend compiles")
    except VerifyError as e:
        raise NotImplementedError(f"backend_cpu: {e}") from None
    for instr in module.instructions():
        refusal = algorithm_refusal(instr) if instr.opcode == "dot" else None
        if refusal is not None:
            raise NotImplementedError(f"backend_cpu: {instr.name}: {refusal}")
        if any(leaf.element_type == "f4e2m1fn" for leaf in instr.shape.leaves()):
            # A nibble whose sign is bit 3: narrow_convert.py reads 8-bit floats only.
            raise NotImplementedError(f"backend_cpu: {instr.name}: f4e2m1fn is parsed and "
                                      f"evaluated but not compiled")
    if module.entry is not None and any(leaf.element_type == "token"
                                        for leaf in module.entry.root.shape.leaves()):
        raise NotImplementedError(f"backend_cpu: the entry's result "
                                  f"{module.entry.root.shape} holds a token; a run returns "
                                  f"arrays only")


def _compile_uncached(module, text: str, fingerprint: str, options: CompileOptions,
                      copy) -> CpuExecutable:
    start = time.perf_counter()
    # Programs of several devices hold collective thunks, which the disk cache does not
    # store: they compile each time a process first asks.
    # (Nor when XLAPY_DISABLE_DISK_CACHE turns it off: no keys to hash, no text to
    # print for a store that would do nothing.)
    on_disk = options.disk_cache and options.pipeline in (None, "default") \
        and options.devices(module) == (1, 1) and not _has_per_device_ops(module) \
        and disk_cache.cache_dir() is not None
    disk_key = disk_cache.key(text, fingerprint) if on_disk else None
    executable = None
    if on_disk:
        with profiler.span("disk cache load"):
            executable = _load_from_disk(disk_key, start)
    if executable is None:
        given = module
        with profiler.span("HLO passes"):
            module = _run_pipeline(module, options.pipeline, copy)
        # The caller's module (no pipeline ran): its text is `text`, and holding the
        # module to print it later would show whatever the caller makes of it after.
        executable, payload = _compile_module(module, start, use_disk_cache=on_disk,
                                              options=options,
                                              hlo_text=text if module is given else None)
        if on_disk and payload["object"] is not None:
            with profiler.span("disk cache store"):
                payload["hlo_text"] = executable.as_hlo_text()
                disk_cache.store(disk_key, payload)
    return executable


# Nested and concurrent compiles share one pause: the collector is switched back on
# when the last of them ends, and only if it was on when the first one began.
_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def paused_gc():
    """Pauses Python's cyclic garbage collector for the duration of a compile.

    A compile allocates some 10^5 short-lived objects (HLO and llvmlite IR):
    enough to trigger dozens of collections, which rescan everything still
    alive (about 2 ms of a 20 ms compile). Almost all of it is freed by
    reference counting anyway; what remains is collected after the compile.
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _load_from_disk(disk_key: str, start: float) -> CpuExecutable | None:
    payload = disk_cache.load(disk_key)
    if payload is None:
        return None
    try:
        # The GEMM routines the module calls live in the process-wide library.
        gemm_library.ensure_compiled(payload.get("gemm_routines", []), disk_cache.gemm)
        jit = machine_code.jit_object(payload["object"])
        program = payload["program"]
        program.link(jit.lookup)
        target, hlo_text = targets.current(), payload["hlo_text"]
        return CpuExecutable(program, payload["params"], jit=jit,
                             llvm_source=payload["llvm_source"], target=target,
                             # The entry keeps no strategy records: emit the kernels again
                             # when someone asks for them (holding the text, not the
                             # payload's object code).
                             kernel_strategies=lambda: emitted_strategies(hlo_text, target),
                             hlo_text=payload["hlo_text"],
                             compile_seconds=time.perf_counter() - start,
                             strength_reduction=payload.get("strength_reduction", True),
                             light_pipeline=payload.get("light_pipeline", False))
    except Exception as error:
        # An intact entry of ours always links: say so, since this hides a bug.
        warnings.warn(f"xlapy disk cache: a cached executable did not link "
                      f"({type(error).__name__}: {error}); compiling it again",
                      RuntimeWarning, stacklevel=2)
        return None


def _run_pipeline(module, pipeline, copy=None):
    if pipeline is None:
        if not narrow_types.needs_normalization(module):
            return module
        module = copy() if copy is not None else module.clone()
        narrow_types.NarrowTypeNormalization().run(module)
        return module
    # Passes mutate: they work on a copy, the caller's or a clone.
    module = copy() if copy is not None else module.clone()
    # First, so that fusion takes the converts in; again after (a no-op unless a pass
    # made new arithmetic on a narrow type).
    narrow_types.NarrowTypeNormalization().run(module)
    if pipeline == "default":
        pipeline = passes.cpu_pipeline(facts=targets.current())   # the compile target's facts
        pipeline.run(module)
        trace_passes(pipeline.records)
    elif callable(pipeline):
        pipeline(module)
    elif hasattr(pipeline, "run"):
        pipeline.run(module)
    else:
        raise TypeError(f"compile: pipeline must be None, 'default' or a callable, got {pipeline!r}")
    # Lowering, not optimization: the kernels compute only in the wide types.
    narrow_types.NarrowTypeNormalization().run(module)
    return module


def trace_passes(records) -> None:
    """Each pass of a pipeline that ran as a span of the trace, if one runs."""
    profiler.add_spans((r.name, r.start, r.seconds, {"changed": r.changed})
                       for r in records if r.start)


def _has_per_device_ops(module) -> bool:
    return any(i.info.per_device for c in module.computations for i in c.instructions)


def _compile_module(module, start: float, use_disk_cache: bool = False,
                    options: CompileOptions | None = None,
                    hlo_text: str | None = None) -> tuple[CpuExecutable, dict]:
    """(executable, the payload the disk cache stores for it, but for "hlo_text": the
    executable's as_hlo_text()). `hlo_text`: the module's text if known; else the
    executable prints the module when first asked (the module is the compile's own:
    nothing changes it after)."""
    if module.entry is None:
        raise ValueError("compile: the module has no ENTRY computation")
    options = options or CompileOptions()
    replicas, partitions = options.devices(module)
    _ensure_recursion_limit(module)
    target = targets.current()
    gemm_cache = disk_cache.gemm if use_disk_cache else None
    # With a core to spare (kernel_cache.overlaps), each distinct body goes to the
    # compile threads as soon as it is emitted (with the GEMM routines it calls that
    # this process still needs), so that LLVM works while Python emits the rest
    # (kernel_cache.Batch, _Context.does_not_stream).
    batch = kernel_cache.Batch(threads=options.compile_threads, memory=options.cache,
                               disk=disk_cache.kernels if use_disk_cache else None)
    context = _Context(_symbol(module.name), replicas, partitions, batch=batch,
                       gemm_cache=gemm_cache if target.runs_on_host else _NO_ROUTINES)
    with profiler.span("emit LLVM IR"):
        program = ProgramBuilder(context, module.entry).build()
        glue = context.glue.text()
    # The glue module (the wrappers, see kernel_cache.py) first, then each distinct body.
    llvm_source = [glue, *context.bodies.values()]
    # Per module: the glue always takes the light pipeline, each body its own.
    lights = [True] + [context.light[symbol] for symbol in context.bodies]
    light = context.all_loops_written_on_vectors()
    routines = sorted(context.routines.values(), key=lambda r: r.name)
    # Loop strength reduction tunes address arithmetic, which cannot matter in a
    # kernel bound by memory bandwidth, and is a third of the code generator's time
    # on one (softmax f32[4096,4096]: ~9 -> ~5.5 ms): kernels that all stream skip it.
    strength_reduction = not context.only_streaming_kernels
    info = {"light": sum(lights) - 1}     # the span's args (bodies on the light pipeline), and below
    # The GEMM routines this process still needs join the batch of the kernels (not when
    # the module turns loop strength reduction off: that process-wide switch would
    # change the routines, which every later module shares). Most were planned (their
    # IR emitted) and started during the emission, as their kernels came.
    if target.runs_on_host and strength_reduction:
        with profiler.span("GEMM library", args={"routines": len(routines)}):
            context.plan_routines()
    build = context.gemm_build()
    with profiler.span("LLVM compile", args=info):
        objects, counts, routine_codes = batch.finish(glue, strength_reduction)
        info.update(counts, kernel_thunks=context.kernel_count, emitted=context.emissions,
                    gemm_routines=len(build.texts) if build is not None else 0)
    jit = None
    if target.runs_on_host:     # otherwise compile and print only: nothing is JIT'd
        with profiler.span("GEMM library", args={"routines": len(routines)}):
            if build is not None:
                gemm_library.finish(build, routine_codes)
            gemm_library.ensure_compiled(routines, gemm_cache)     # (a no-op if finished)
        with profiler.span("link"):
            jit = machine_code.jit_object(objects)
            program.link(jit.lookup, _device_threads(replicas * partitions,
                                                     options.distributed))
    params = [(p.name, p.shape) for p in module.entry.parameters]
    if hlo_text is None:
        hlo_text = module.to_text
    # The optimized IR is printed on demand (CpuExecutable.as_llvm_ir): it is the
    # same text every time, and printing it costs more than a cache lookup.
    executable = CpuExecutable(program, params, jit=jit, llvm_source=llvm_source,
                               hlo_text=hlo_text, compile_seconds=time.perf_counter() - start,
                               strength_reduction=strength_reduction, light_pipeline=lights,
                               target=target, kernel_strategies=context.choices,
                               devices=(replicas, partitions), distributed=options.distributed)
    payload = {"program": program, "params": params, "llvm_source": llvm_source,
               "object": objects if jit else None, "gemm_routines": routines,
               "strength_reduction": strength_reduction, "light_pipeline": lights}
    return executable, payload


def _device_threads(num_devices: int, distributed) -> int | None:
    """Intra-op threads per device: the runtime's threads shared between the devices of
    this process (None: all of them)."""
    if num_devices == 1 or distributed is not None:
        return None
    return max(1, runtime.get_options().intra_op_threads // num_devices)


def emitted_strategies(hlo_text: str, target: Target,
                       options: CompileOptions | None = None) -> list:
    """The kernel strategies (strategies.Choice per kernel) of the module `hlo_text`
    compiled for `target` (and the device count of `options`), found by emitting its
    kernels again: LLVM IR only, no optimization, no JIT (for an executable that came
    from the disk cache, and for hlo-opt --explain)."""
    module = parse_module(hlo_text)
    _ensure_recursion_limit(module)
    replicas, partitions = (options or CompileOptions()).devices(module)
    with targets.using(target):
        context = _Context(_symbol(module.name), replicas, partitions)
        ProgramBuilder(context, module.entry).build()
    return context.choices()


def _ensure_recursion_limit(module) -> None:
    """Element generators call their operands' generators: a fused chain of n ops nests
    about 4n Python calls. Python 3.11 runs Python-to-Python calls without growing the
    C stack, so raising the limit is safe; it is only ever raised (other threads may be
    compiling too)."""
    needed = 1000 + 8 * sum(len(c.instructions) for c in module.computations)
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)


def _symbol(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


_NO_ROUTINES = object()      # _Context(gemm_cache=): plan no GEMM routines (not for the host)


class _Context:
    """Module-wide state: the glue module (the kernels' wrappers), the distinct kernel
    bodies (kernel_cache.py), unique kernel names.

    `batch` (a kernel_cache.Batch, or None: emit only) takes each distinct body as it
    is sealed. Once a kernel that does not stream is emitted, the module keeps loop
    strength reduction on (`_compile_module`), and the batch starts compiling: the
    bodies so far and each later one, and the GEMM library routines they call
    (`gemm_library.plan` with `gemm_cache`, as each first appears when the batch
    overlaps the emission, else after it; `_NO_ROUTINES`: the target is not the host,
    no routines)."""

    def __init__(self, name: str, replicas: int = 1, partitions: int = 1, batch=None,
                 gemm_cache=_NO_ROUTINES):
        self.glue = kernel_cache.Glue(name)
        self.batch, self._gemm_cache = batch, gemm_cache
        self._builds: list = []            # gemm_library.Build of the routines planned
        self._planned: set[str] = set()    # routines planned in this compile
        self.replicas, self.partitions = replicas, partitions   # the module's devices
        self._count = 0
        self.kernels_not_streaming = 0     # kernels without non-temporal output stores
        self.bodies: dict[str, str] = {}   # body symbol -> its module's text, once each
        self.routines: dict = {}           # GEMM library routines the bodies call, by name
        self.light: dict[str, bool] = {}   # body symbol -> it takes the light pipeline
        self.emitted: dict = {}            # _emission_key -> _Emitted, this compile's kernels
        self.emissions = 0                 # kernels emitted (the others were replayed)
        self._only_vector_loops = True     # every body is alone in its module, loops on vectors
        # How each kernel (and host sort) was emitted, in order (strategies.Choice, or
        # a _Replayed record of one, renamed when asked: `choices`).
        self.kernel_choices: list = []

    @property
    def kernel_count(self) -> int:
        return self._count

    def all_loops_written_on_vectors(self) -> bool:
        """True if the kernels' modules define only kernels, none of which leaves an
        innermost loop for LLVM's vectorizer (loops.loops_left_to_llvm)."""
        return bool(self.bodies) and self._only_vector_loops

    @property
    def only_streaming_kernels(self) -> bool:
        """True if every kernel of the module streams a large output (memory-bound)."""
        return self._count > 0 and self.kernels_not_streaming == 0

    def kernel_name(self, instr_name: str) -> str:
        self._count += 1
        return f"k{self._count}_{_symbol(instr_name)}"

    def add_kernel(self, name: str, kernel: "kernel_cache.LocalSlotsKernelIR") -> None:
        """Seals a kernel's own module: its body joins the distinct ones, and the glue
        gets `name`, which calls it on the kernel's slots."""
        module, fn = kernel.function.module, kernel.function
        self.emissions += 1
        ir_policy.no_runtime_unrolling(module)
        defined = [f for f in module.functions if not f.is_declaration]
        light = defined == [fn] and loops_left_to_llvm(fn) == 0
        self._only_vector_loops &= light
        for routine in gemm_library.routines_in(module):
            self.routines.setdefault(routine.name, routine)
        symbol, text = kernel_cache.seal(module, fn)
        self.bodies.setdefault(symbol, text)
        self.light.setdefault(symbol, light)
        self.glue.add(name, symbol, kernel.slots)
        if self.batch is not None:
            self.batch.add(symbol, text, light)
            if self.kernels_not_streaming and self.batch.overlaps:
                self.plan_routines()
        return symbol

    def choices(self) -> list:
        """How each kernel was emitted (strategies.Choice), replayed ones renamed."""
        return [c.choice() if isinstance(c, _Replayed) else c for c in self.kernel_choices]

    def replay_kernel(self, name: str, symbol: str, slots: list[int], streams: bool) -> None:
        """A kernel `name` whose body `symbol` was emitted before in this compile."""
        if not streams:
            self.does_not_stream()
        self.glue.add(name, symbol, slots)

    def does_not_stream(self) -> None:
        """Counts a kernel without non-temporal output stores: the module then keeps
        loop strength reduction on, and the batch may start."""
        self.kernels_not_streaming += 1
        if self.kernels_not_streaming == 1 and self.batch is not None:
            self.batch.strength_reduction_on()
            if self.batch.overlaps:
                self.plan_routines()

    def plan_routines(self) -> None:
        """Hands the GEMM routines found so far that this process still needs to the
        batch (each once per compile)."""
        if self._gemm_cache is _NO_ROUTINES or self.batch is None:
            return
        new = sorted((r for r in self.routines.values() if r.name not in self._planned),
                     key=lambda r: r.name)
        if not new:
            return
        self._planned.update(r.name for r in new)
        build = gemm_library.plan(new, self._gemm_cache)
        if build is not None:
            self._builds.append(build)
            self.batch.extra(build.texts, gemm_library.ROUTINE_LIGHT)

    def gemm_build(self):
        """The routines planned in this compile as one gemm_library.Build (its texts in
        the order the batch took them), or None."""
        if not self._builds:
            return None
        if len(self._builds) == 1:
            return self._builds[0]
        b = self._builds
        return gemm_library.Build([r for x in b for r in x.missing],
                                  {k: v for x in b for k, v in x.loaded.items()},
                                  [r for x in b for r in x.to_build],
                                  [t for x in b for t in x.texts],
                                  {k: v for x in b for k, v in x.keys.items()}, b[0].cache)


class _Replayed(NamedTuple):
    """The strategy record of a replayed kernel `name` of instruction `instr_name`: the
    record of the kernel it repeats (`done`), renamed when asked (most never are)."""
    done: "_Emitted"
    name: str
    instr_name: str

    def choice(self):
        return _renamed(_renamed(self.done.choice, self.done.name, self.name),
                        self.done.instr_name, self.instr_name)


class _Emitted(NamedTuple):
    """What emitting a kernel made, to make an identical one again without emitting
    it (ProgramBuilder._replay): its body, each entry of its slot table as a role
    (("read", operand), ("write", output), ("scratch", i), ("constant", position in
    `_called_instructions`)), its scratch shapes, launch extent and partitions, whether
    it streams, its strategy record, the kernel and instruction it was emitted for, and
    the instruction's (flops, transcendentals)."""
    symbol: str
    roles: tuple
    scratch_shapes: tuple
    extent: int
    max_partitions: int | None
    streams: bool
    choice: object
    name: str
    instr_name: str
    cost: tuple


def _renamed(choice, old: str, new: str):
    """A strategies.Choice with the name `old` (of a kernel or an instruction, where it
    stands as a whole name) replaced by `new`."""
    pattern = None

    def sub(text: str) -> str:
        nonlocal pattern
        if old not in text:       # (most reasons do not name the kernel: no regex then)
            return text
        if pattern is None:
            pattern = re.compile(rf"(?<![\w.\-]){re.escape(old)}(?![\w.\-])")
        return pattern.sub(lambda _: new, text)
    return strategies.Choice(sub(choice.kernel), choice.chosen,
                             tuple((row, sub(reason)) for row, reason in choice.declined))


def _called_instructions(instr) -> list:
    """The instructions of the computations `instr` calls (callees first), in order."""
    return [i for comp in callees_first(instr.called_computations()) for i in comp.instructions]


def _emission_key(instr, reads: list[int]) -> str | None:
    """What a kernel's emission depends on, besides the compile's options and target
    (fixed within a compile): the instruction and the computations it calls, printed
    with every name replaced by its order of first appearance; the layouts of its
    operands; which operands share a slot (one entry of the body's table); and the
    bytes of every constant (a printed literal may be elided)."""
    comps = callees_first(instr.called_computations())
    parts = []
    for comp in comps:              # (the header's parameter names would not be renamed)
        parts.append(f"%{comp.name} {{")
        parts += [("ROOT " if i is comp.root else "") + print_instruction(i, print_metadata=False)
                  for i in comp.instructions]
        parts.append("}" + "".join(f", {key}={value!r}" for key, value in comp.attrs.items()))
    parts.append(print_instruction(instr, print_metadata=False))
    parts += [o.shape.to_text() for o in instr.operands]
    parts.append(repr([reads.index(s) for s in reads]))
    digest = hashlib.sha256()
    for i in [i for c in comps for i in c.instructions]:
        if i.opcode == "constant":
            literal = i.literal
            digest.update(repr(literal).encode() if i.shape.is_tuple or literal is None
                          else np.ascontiguousarray(literal).tobytes())
    names: dict[str, str] = {}

    def canonical(match) -> str:
        return names.setdefault(match.group(0), f"%v{len(names)}")
    text = _NAME.sub(canonical, "\n".join(parts))
    return f"{text}\n{digest.hexdigest()}"


_NAME = re.compile(r"%[\w.\-]+")


def _slot_roles(table: list[int], reads, writes, scratch, constants, instr) -> tuple | None:
    """The role of each entry of a kernel's slot table (see _Emitted), or None if one
    has none (the kernel is then emitted each time)."""
    inner = {id(i): n for n, i in enumerate(_called_instructions(instr))}
    roles = []
    for slot in table:
        if slot in reads:
            roles.append(("read", reads.index(slot)))
        elif slot in writes:
            roles.append(("write", writes.index(slot)))
        elif slot in scratch:
            roles.append(("scratch", scratch.index(slot)))
        elif slot in constants and id(constants[slot]) in inner:
            roles.append(("constant", inner[id(constants[slot])]))
        else:
            return None
    return tuple(roles)


def _leaf_count(shape) -> int:
    return len(shape.leaves())


class ProgramBuilder:
    """Builds the Program of one computation (see the module docstring)."""

    def __init__(self, context: _Context, comp, arg_shapes: list | None = None,
                 result_shapes: list | None = None, in_place: bool = False):
        """`arg_shapes`: per parameter leaf, the layout the caller binds it in (None: the
        parameters' own); `result_shapes`: per root leaf, the layout the caller reads
        (None: the root's own). `in_place` (a while body, whose state the loop owns): a
        root leaf that is a dynamic-update-slice of its own state leaf, read by nothing
        else, is written into the state in place (`_update_in_place`)."""
        self.context, self.comp = context, comp
        self.slots: list[Slot] = []
        self.thunks: list = []
        self.value: dict = {}            # instruction -> its leaf slots
        self._constants: dict[int, int] = {}
        self.arg_shapes, self.result_shapes = arg_shapes, result_shapes
        self._relayouts: dict = {}       # (slot, its shape, target order) -> the copy's slot
        self._starts: dict = {}          # a -start instruction -> (its thunk, result slots)
        self._in_place = in_place_updates(comp) if in_place else {}
        self._updated: dict[int, int] = {}   # param slot -> state leaf updated in place

    # --- slots ------------------------------------------------------------------------------
    def _new_slot(self, kind: str, shape, **extra) -> int:
        nbytes = shape.numel * numpy_dtype(shape.element_type).itemsize
        self.slots.append(Slot(kind, nbytes, shape, **extra))
        return len(self.slots) - 1

    def constant_slot(self, instr) -> int:
        """The slot holding a constant's literal in physical layout (one per constant)."""
        if id(instr) not in self._constants:
            if instr.literal is None:
                raise NotImplementedError(f"backend_cpu: constant {instr.name} has no literal")
            shape = instr.shape
            literal = np.asarray(instr.literal, numpy_dtype(shape.element_type)).reshape(shape.dims)
            array = np.ascontiguousarray(to_physical(literal, shape))
            self._constants[id(instr)] = self._new_slot("constant", shape, array=array)
        return self._constants[id(instr)]

    def _tuple_constant(self, instr) -> list[int]:
        """A tuple-shaped constant: one constant slot per leaf, in the leaves' order."""
        if instr.literal is None:
            raise NotImplementedError(f"backend_cpu: constant {instr.name} has no literal")

        def flat(value):
            if isinstance(value, (tuple, list)) and not isinstance(value, np.ndarray):
                return [leaf for item in value for leaf in flat(item)]
            return [value]
        slots = []
        for value, shape in zip(flat(instr.literal), instr.shape.leaves()):
            literal = np.asarray(value, numpy_dtype(shape.element_type)).reshape(shape.dims)
            slots.append(self._new_slot("constant", shape,
                                        array=np.ascontiguousarray(to_physical(literal, shape))))
        return slots

    # --- the walk ------------------------------------------------------------------------------
    def build(self) -> Program:
        declared = [leaf for p in self.comp.parameters for leaf in p.shape.leaves()]
        bound = declared if self.arg_shapes is None else list(self.arg_shapes)
        if len(bound) != len(declared):
            raise ValueError(f"backend_cpu: {self.comp.name} takes {len(declared)} array "
                             f"leaves, called with {len(bound)}")
        param_slots: list[int] = []
        for p in self.comp.parameters:
            first = len(param_slots)
            for leaf in bound[first:first + _leaf_count(p.shape)]:
                param_slots.append(self._new_slot("param", leaf, param_index=len(param_slots)))
            self.value[p] = self._conform(param_slots[first:], bound[first:len(param_slots)],
                                          p.shape.leaves(), p.name)
        for instr in schedule.memory_order(self.comp):
            if instr.opcode != "parameter":
                made = len(self.thunks)
                self.value[instr] = self._visit(instr)
                for thunk in self.thunks[made:]:
                    # (a start/done pair that the schedule leaves adjacent runs as its
                    # collective: that one is described too)
                    for t in (thunk, getattr(thunk, "collective", None)):
                        if t is not None and getattr(t, "profile", None) is None:
                            t.profile = self._profile(instr, t)
        outputs = self._outputs()
        # Async collectives: starts early, dones late (collective_thunks.schedule).
        self.thunks = ct.schedule(self.thunks, inter_op.slot_dependencies)
        arena = assign_arena(self.slots, [(t.reads, t.writes) for t in self.thunks],
                             inter_op.overlap_ancestors(self.thunks))
        return Program(self.comp.name, self.slots, self.thunks, param_slots, outputs, arena,
                       in_place=sorted(self._updated.values()))

    def _visit(self, instr) -> list[int]:
        op = instr.opcode
        operands = [self.value[o] for o in instr.operands]
        if op == "constant":
            if instr.shape.is_tuple:
                return self._tuple_constant(instr)
            return [self.constant_slot(instr)]
        if op == "tuple":
            have = [leaf for o in instr.operands for leaf in o.shape.leaves()]
            return self._conform([s for leaves in operands for s in leaves], have,
                                 instr.shape.leaves(), instr.name)
        if op == "get-tuple-element":
            shapes = instr.operands[0].shape.tuple_shapes
            index = instr.attrs["index"]
            start = sum(_leaf_count(s) for s in shapes[:index])
            return self._conform(operands[0][start:start + _leaf_count(shapes[index])],
                                 shapes[index].leaves(), instr.shape.leaves(), instr.name)
        if op == "bitcast":          # the same bytes, read in the bitcast's own layout
            return operands[0]
        if op == "opt-barrier" or op == "copy" and (
                not instr.shape.is_array or same_bytes(instr.operands[0].shape, instr.shape)):
            # An array copy that changes the layout is a kernel of its own (below).
            return self._conform(operands[0], instr.operands[0].shape.leaves(),
                                 instr.shape.leaves(), instr.name)
        if op == "reshape" and instr.shape.has_default_layout() \
                and instr.operands[0].shape.has_default_layout():
            return operands[0]
        if id(instr) in self._in_place:
            return self._update_in_place(instr, operands)
        host = library_ops.lower(self, instr, operands)     # host routines, complex, no-ops
        if host is not None:
            return host
        if op == "while":
            return self._while(instr, operands)
        if op == "conditional":
            return self._conditional(instr, operands)
        if op == "call":
            return self._call(instr, operands)
        if op == "sort":
            return self._sort(instr, operands)
        if instr.info.per_device:
            return self._collective(instr, operands)
        if op == "fusion" or op in loop_nest.KERNEL_OPCODES or instr.info.is_elementwise:
            return self._kernel(instr, operands)
        raise NotImplementedError(f"backend_cpu: no emitter for {op}")

    # --- layouts at boundaries -----------------------------------------------------------------
    def _conform(self, slots: list[int], have: list, want: list, name: str) -> list[int]:
        """`slots`, stored in the layouts of the leaf shapes `have`, in the layouts of
        `want`: each slot as it is when the bytes agree, else a relayout copy of it."""
        if len(have) != len(want):
            raise ValueError(f"backend_cpu: {name}: {len(have)} array leaves where "
                             f"{len(want)} are declared")
        result = []
        for slot, h, w in zip(slots, have, want):
            if h.dims != w.dims or h.element_type != w.element_type:
                raise ValueError(f"backend_cpu: {name}: a {h} value where {w} is declared")
            result.append(slot if same_bytes(h, w) else self._relayout(slot, h, w, name))
        return result

    def _relayout(self, slot: int, have, want, name: str) -> int:
        """A slot holding `slot`'s array (layout of `have`) in the layout of `want`: one
        copy kernel per slot and layout, however many boundaries ask for it (the key
        has the source's shape too: a bitcast or reshape reads the slot as another)."""
        key = (slot, have.element_type, have.dims, physical_order(have), physical_order(want))
        if key not in self._relayouts:
            source = HloInstruction("parameter", have, name=f"{name}.source", parameter_number=0)
            copy = HloInstruction("copy", want, [source], name=f"{name}.relayout")
            self._relayouts[key] = self._kernel(copy, [[slot]])[0]
        return self._relayouts[key]

    def _dynamic_slots(self, shape) -> list[int]:
        return [self._new_slot("dynamic", leaf) for leaf in shape.leaves()]

    def _sub_program(self, comp, arg_shapes=None, result_shapes=None,
                     in_place: bool = False) -> Program:
        return ProgramBuilder(self.context, comp, arg_shapes, result_shapes, in_place).build()

    def _while(self, instr, operands) -> list[int]:
        """The loop state lives in the body parameter's layouts: the init is converted
        once, the body's results (if its root differs) every iteration, the final
        state once, to the while's own layouts. The loop owns its state (the init is
        copied), so the body may update a leaf in place (`in_place_updates`)."""
        body_comp = instr.attrs["body"]
        state = body_comp.parameters[0].shape.leaves()
        init = self._conform(operands[0], instr.operands[0].shape.leaves(), state, instr.name)
        cond = self._sub_program(instr.attrs["condition"], state)
        body = self._sub_program(body_comp, None, state, in_place=True)
        donated = self._donated_inits(instr, operands, init, body.in_place)
        writes = [init[i] if donated[i] else self._new_slot("dynamic", leaf)
                  for i, leaf in enumerate(state)]
        leaves = [(physical_dims(s), numpy_dtype(s.element_type)) for s in state]
        # Which leaves of the final state anything reads: the loop need not copy out
        # the others (a scan's weights and inputs, passed through).
        used = None
        if instr is not self.comp.root and instr.shape.is_tuple \
                and all(u.opcode == "get-tuple-element" for u in instr.users):
            read = {u.attrs["index"] for u in instr.users}
            used = [k in read for k, element in enumerate(instr.shape.tuple_shapes)
                    for _ in range(_leaf_count(element))]
        self.thunks.append(WhileThunk(cond, body, init, writes, leaves, used,
                                      donated if any(donated) else None))
        if used is None:
            return self._conform(writes, state, instr.shape.leaves(), instr.name)
        # (a leaf nobody reads needs no relayout either)
        return [self._conform([slot], [have], [want], instr.name)[0] if read else slot
                for slot, have, want, read in zip(writes, state, instr.shape.leaves(), used)]

    def _donated_inits(self, instr, operands, init: list[int], in_place) -> list[bool]:
        """Per state leaf: does the loop take over its init's buffer? A leaf the body
        updates in place whose init is an arena temp that a kernel made for this loop
        alone (its instruction read only by the while's init tuple, read only by the
        while) is updated right there: no copy in, and the while's result for it is
        that slot (the arena keeps it alive while later thunks read it)."""
        donated = [False] * len(init)
        tup = instr.operands[0]
        if not in_place or tup.opcode != "tuple" or any(u is not instr for u in tup.users) \
                or tup is self.comp.root:
            return donated
        for leaf in in_place:
            x = tup.operands[leaf]
            slot = init[leaf]
            if self.slots[slot].kind != "temp" or init.count(slot) != 1 \
                    or operands[0][leaf] != slot or self.value.get(x) != [slot] \
                    or x is self.comp.root or any(u is not tup for u in x.users) \
                    or sum(o is x for o in tup.operands) != 1:
                continue
            made = any(isinstance(t, KernelThunk) and slot in t.writes
                       and (t.profile or {}).get("hlo") == x.name for t in self.thunks)
            donated[leaf] = made
        return donated

    def _conditional(self, instr, operands) -> list[int]:
        """Branch i takes operand i+1 in that operand's layouts and returns the
        conditional's (each branch converts what differs: only the taken one pays)."""
        a = instr.attrs
        comps = list(a["branch_computations"]) if "branch_computations" in a \
            else [a["true_computation"], a["false_computation"]]
        branches = [self._sub_program(c, instr.operands[i + 1].shape.leaves(), instr.shape.leaves())
                    for i, c in enumerate(comps)]
        writes = self._dynamic_slots(instr.shape)
        index = instr.operands[0]
        self.thunks.append(ConditionalThunk(branches, operands[0][0],
                                            numpy_dtype(index.shape.element_type),
                                            operands[1:], writes))
        return writes

    def _call(self, instr, operands) -> list[int]:
        program = self._sub_program(instr.to_apply,
                                    [leaf for o in instr.operands for leaf in o.shape.leaves()],
                                    instr.shape.leaves())
        writes = self._dynamic_slots(instr.shape)
        self.thunks.append(CallThunk(program, [s for leaves in operands for s in leaves], writes))
        return writes

    def _sort(self, instr, operands) -> list[int]:
        """A numpy sort on the host when the comparator is a plain key compare
        (sort_thunk.py; the strategy table's host_sort), else the merge-sort kernel."""
        host = strategies.choose_on_host(instr)
        if host is None:
            return self._kernel(instr, operands)
        choice, key = host
        self.context.kernel_choices.append(choice)
        writes = [self._new_slot("temp", leaf) for leaf in instr.shape.leaves()]
        thunk = sort_thunk.SortThunk(
            key, instr.dims()[0], instr.to_apply, [leaves[0] for leaves in operands], writes,
            [o.shape for o in instr.operands], instr.shape.leaves())
        thunk.profile = self._profile(instr, thunk, choice.chosen)
        self.thunks.append(thunk)
        return writes

    def _collective(self, instr, operands) -> list[int]:
        """A collective, replica-id or partition-id: thunks that call the execution's
        communicator (collective_thunks.py). A plain all-reduce becomes a start/done pair
        that the schedule keeps apart when kernels fit in between."""
        op = instr.opcode
        R, P = self.context.replicas, self.context.partitions
        info = instr.info
        if op in ("replica-id", "partition-id"):
            (slot,) = self._dynamic_temp(instr.shape)
            self.thunks.append(ct.DeviceIdThunk(instr, ct.Buffer(slot, instr.shape)))
            return [slot]
        if info.async_role == "done":
            start = self._starts[collectives.async_start_of(instr)]
            thunk, value = start
            self.thunks.append(ct.DoneThunk(thunk))
            return value
        if collectives.is_in_place_permute(instr):
            raise NotImplementedError(f"backend_cpu: {instr.name}: "
                                      f"{collectives.IN_PLACE_PERMUTE_REFUSAL}")
        sync = info.sync_op or op
        in_leaves = [leaf for o in instr.operands for leaf in o.shape.leaves()]
        in_slots = [s for leaves in operands for s in leaves]
        sources = ct._leaves(in_slots, in_leaves)
        shapes = instr.shape.leaves()
        extra: list = []
        alias: list[int] = []
        if op == "all-gather-start" or op == "collective-permute-start":
            # (the operands, the results[, u32 contexts]): the first element aliases.
            n = len(in_leaves)
            alias = self._conform(in_slots, in_leaves, shapes[:n], instr.name)
            results_shapes = instr.shape.tuple_shapes[1].leaves()
            extra_shapes = shapes[n + len(results_shapes):]
        else:
            results_shapes, extra_shapes = shapes, []
        result_slots = self._dynamic_temp_leaves(results_shapes)
        results = ct._leaves(result_slots, results_shapes)
        extra = ct._leaves(self._dynamic_temp_leaves(extra_shapes), extra_shapes)
        kinds = {"all-reduce": ct.AllReduceThunk, "all-gather": ct.AllGatherThunk,
                 "reduce-scatter": ct.ReduceScatterThunk, "all-to-all": ct.AllToAllThunk,
                 "collective-broadcast": ct.BroadcastThunk,
                 "ragged-all-to-all": ct.RaggedAllToAllThunk}
        if sync == "collective-permute":
            thunk = ct.PermuteThunk(instr, sources, results, R, P, extra)
        elif sync in kinds:
            thunk = kinds[sync](instr, sources, results, R, P)
        else:
            raise NotImplementedError(f"backend_cpu: no thunk for {op}")
        value = alias + result_slots + [b.slot for b in extra]
        if info.async_role == "start" or op == "all-reduce":
            start = ct.StartThunk(thunk)
            self.thunks.append(start)
            self._starts[instr] = (start, result_slots)
            if op == "all-reduce":
                self.thunks.append(ct.DoneThunk(start))
            return value
        self.thunks.append(thunk)
        return value

    def _update_in_place(self, instr, operands) -> list[int]:
        """A dynamic-update-slice of state leaf `leaf` (in_place_updates): a kernel that
        stores only the update into the leaf's parameter slot, which is then the body's
        result for that leaf. Where the slot is not the parameter itself (a relayout
        between), an ordinary kernel."""
        leaf = self._in_place[id(instr)]
        target = operands[0][0]
        slot = self.slots[target]
        want = self.result_shapes[leaf] if self.result_shapes is not None \
            else self.comp.root.shape.leaves()[leaf]
        if slot.kind != "param" or slot.param_index != leaf or target in self._updated \
                or not same_bytes(slot.shape, instr.shape) or not same_bytes(instr.shape, want):
            return self._kernel(instr, operands)
        name = self.context.kernel_name(instr.name)
        kernel = kernel_cache.LocalSlotsKernelIR(ir.Module(name="xlapy_kernel"),
                                                 self.constant_slot)
        reads = [leaves[0] for leaves in operands[1:]]
        inputs = [kernel.buffer(s, o.shape) for s, o in zip(reads, instr.operands[1:])]
        extent = in_place_update.emit(kernel, instr, inputs, kernel.buffer(target, slot.shape))
        kernel.finish()
        self.context.does_not_stream()
        self.context.kernel_choices.append(strategies.Choice(name, "in_place_update", ()))
        self.context.add_kernel(name, kernel)
        self._updated[target] = leaf
        update_bytes = self.slots[reads[0]].nbytes
        thunk = KernelThunk(name, extent, 2 * update_bytes, reads, [target], 1)
        thunk.profile = self._profile(instr, thunk, "in_place_update", [])
        thunk.profile["bytes_read"] = sum(self.slots[s].nbytes for s in reads)
        thunk.profile["bytes_written"] = update_bytes
        self.thunks.append(thunk)
        return [target]

    def _dynamic_temp(self, shape) -> list[int]:
        return self._dynamic_temp_leaves(shape.leaves())

    def _dynamic_temp_leaves(self, leaves) -> list[int]:
        return [self._new_slot("temp", leaf) for leaf in leaves]

    def _kernel(self, instr, operands) -> list[int]:
        for o in instr.operands:
            if not o.shape.is_array:
                raise NotImplementedError(f"backend_cpu: {instr.opcode} {instr.name} has a "
                                          f"tuple operand")
        name = self.context.kernel_name(instr.name)
        reads = [leaves[0] for leaves in operands]
        key = _emission_key(instr, reads)
        emitted = self.context.emitted.get(key)
        if emitted is not None:
            return self._replay(instr, name, reads, emitted)
        scratch: list[int] = []
        scratch_shapes: list = []
        constants: dict[int, object] = {}       # slot -> the constant instruction it holds

        def scratch_slot(shape) -> int:
            scratch.append(self._new_slot("temp", shape))
            scratch_shapes.append(shape)
            return scratch[-1]

        def constant_slot(constant) -> int:
            slot = self.constant_slot(constant)
            constants[slot] = constant
            return slot
        kernel = kernel_cache.LocalSlotsKernelIR(ir.Module(name="xlapy_kernel"),
                                                 constant_slot, scratch_slot)
        inputs = [kernel.buffer(s, o.shape) for s, o in zip(reads, instr.operands)]
        writes = [self._new_slot("temp", leaf) for leaf in instr.shape.leaves()]
        outputs = [kernel.buffer(s, self.slots[s].shape) for s in writes]
        extent, choice = strategies.emit_kernel(kernel, instr, inputs, outputs)
        # (the record names the kernel: its wrapper, not the body's placeholder)
        choice = _renamed(choice, kernel_cache.PLACEHOLDER, name)
        self.context.kernel_choices.append(choice)
        kernel.finish()
        if not kernel.streams:
            self.context.does_not_stream()
        if ir_policy.only_drives_unoptimized_routines(kernel.function):
            # A loop over calls of the packed GEMM driver (itself optnone: the work is
            # in the GEMM library). LLVM's pipeline costs a function ~5 ms however
            # small it is, and there is nothing here to optimize.
            kernel.function.attributes.add("noinline")
            kernel.function.attributes.add("optnone")
        elif sum(leaf.numel for leaf in instr.shape.leaves()) <= SMALL_KERNEL_ELEMENTS:
            # Tiny outputs gain nothing from wide vectors and unrolling, but pay for
            # them in compile time: optimize such kernels for size. (A full reduction
            # is one of them: its float sums are blocked for this, elemental/reduction.py.)
            kernel.function.attributes.add("optsize")
        symbol = self.context.add_kernel(name, kernel)
        roles = _slot_roles(kernel.slots, reads, writes, scratch, constants, instr)
        cost = instruction_cost(instr)
        if key is not None and roles is not None:
            self.context.emitted[key] = _Emitted(symbol, roles, tuple(scratch_shapes), extent,
                                                 kernel.max_partitions, kernel.streams, choice,
                                                 name, instr.name, cost)
        return self._kernel_thunk(instr, name, extent, reads, writes, scratch,
                                  kernel.max_partitions, choice.chosen, cost)

    def _kernel_thunk(self, instr, name, extent, reads, writes, scratch, partitions,
                      strategy, cost=None) -> list[int]:
        # Memory traffic is the cost model: a reduction has a small output but reads a lot.
        work_bytes = sum(self.slots[s].nbytes for s in writes + reads)
        thunk = KernelThunk(name, extent, work_bytes, reads, writes + scratch, partitions)
        thunk.profile = self._profile(instr, thunk, strategy, writes, cost)
        self.thunks.append(thunk)
        return writes

    def _replay(self, instr, name: str, reads: list[int], done: "_Emitted") -> list[int]:
        """A kernel identical to one emitted before in this compile (same `_emission_key`):
        its body again, on this instruction's slots -- no emission."""
        writes = [self._new_slot("temp", leaf) for leaf in instr.shape.leaves()]
        scratch = [self._new_slot("temp", shape) for shape in done.scratch_shapes]
        inner = _called_instructions(instr)
        slots = []
        for kind, i in done.roles:
            slots.append(reads[i] if kind == "read" else writes[i] if kind == "write"
                         else scratch[i] if kind == "scratch" else self.constant_slot(inner[i]))
        self.context.replay_kernel(name, done.symbol, slots, done.streams)
        self.context.kernel_choices.append(_Replayed(done, name, instr.name))
        return self._kernel_thunk(instr, name, done.extent, reads, writes, scratch,
                                  done.max_partitions, done.choice.chosen, done.cost)

    def _profile(self, instr, thunk, strategy: str = "", writes=None, cost=None) -> dict:
        """What the profiler's spans of `thunk` tell (runtime/profiler.py): the HLO
        instruction, its op (a fusion's kind), the strategy, the bytes it reads and
        writes, its flops and transcendentals (passes/cost_analysis.py). Containers
        (while, conditional, call) count nothing: their sub-programs' thunks do.
        `cost`: the instruction's (flops, transcendentals) if known (a replayed kernel's
        are those of the kernel it repeats)."""
        op = instr.opcode if instr.opcode != "fusion" else f"fusion {instr.attrs.get('kind', '')}"
        info = {"hlo": instr.name, "op": op.strip()}
        if isinstance(thunk, KernelThunk) or not hasattr(thunk, "name"):
            info["name"] = instr.name  # (collectives keep their own: x.start, x.done)
        if strategy:
            info["strategy"] = strategy
        if isinstance(thunk, (WhileThunk, ConditionalThunk, CallThunk)):
            return info
        if isinstance(thunk, CopyThunk):
            info["bytes_read"] = info["bytes_written"] = thunk.nbytes
            return info
        writes = getattr(thunk, "writes", ()) if writes is None else writes
        info["bytes_read"] = sum(self.slots[s].nbytes for s in getattr(thunk, "reads", ()))
        info["bytes_written"] = sum(self.slots[s].nbytes for s in writes)
        flops, transcendentals = instruction_cost(instr) if cost is None else cost
        info["flops"], info["transcendentals"] = flops, transcendentals
        return info

    # --- results ---------------------------------------------------------------------------------
    def _outputs(self) -> list[tuple[int, object]]:
        """(slot, shape) per root leaf, in the layouts the caller asked for (else the
        root's own); parameters, constants and repeats are copied."""
        root = self.comp.root
        want = root.shape.leaves() if self.result_shapes is None else list(self.result_shapes)
        slots = self._conform(self.value[root], root.shape.leaves(), want, root.name)
        outputs, seen = [], set()
        for slot, shape in zip(slots, want):
            kind = self.slots[slot].kind
            if slot in self._updated and slot not in seen:
                pass                  # a state leaf updated in place: its own result
            elif slot in seen or kind in ("param", "constant"):
                copy = self._new_slot("output", shape)
                self.thunks.append(CopyThunk(slot, copy, self.slots[copy].nbytes))
                slot = copy
            elif kind == "temp":
                self.slots[slot].kind = "output"
            seen.add(slot)
            outputs.append((slot, shape))
        return outputs


def in_place_updates(body) -> dict[int, int]:
    """The root leaves of a while body that may be computed in place: id of a
    dynamic-update-slice -> its state leaf i, where the body's one parameter is a tuple
    of arrays read only through get-tuple-elements, the root is a tuple whose element i
    is the dynamic-update-slice (and only there, read by nothing else), and its operand
    0 is the parameter's element i, read by nothing else. The old value of the leaf is
    then dead once the update runs, so the update may overwrite it."""
    if len(body.parameters) != 1:
        return {}
    param, root = body.parameters[0], body.root
    if not param.shape.is_tuple or root.opcode != "tuple" \
            or any(not s.is_array for s in param.shape.tuple_shapes) \
            or any(u.opcode != "get-tuple-element" for u in param.users):
        return {}
    readers: dict[int, list] = {}
    for g in param.users:
        readers.setdefault(g.attrs["index"], []).append(g)
    found = {}
    for i, d in enumerate(root.operands):
        if d.opcode != "dynamic-update-slice" or len(readers.get(i, ())) != 1:
            continue
        g = readers[i][0]
        if d.operands[0] is not g or sum(o is g for o in d.operands) != 1 \
                or any(u is not d for u in g.users) \
                or any(u is not root for u in d.users) \
                or sum(o is d for o in root.operands) != 1:
            continue
        found[id(d)] = i
    return found


def physical_order(shape) -> tuple[int, ...]:
    """The dimensions of size > 1, minor-most first: the order the bytes follow."""
    return tuple(d for d in shape.minor_to_major() if shape.dims[d] != 1)


def same_bytes(a, b) -> bool:
    """True when arrays of shapes `a` and `b` (equal but for layout) are stored alike:
    their layouts order the dimensions of size > 1 the same way, or they are empty."""
    return a.numel == 0 or physical_order(a) == physical_order(b)
