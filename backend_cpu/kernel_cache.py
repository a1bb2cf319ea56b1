"""Kernels compiled one LLVM module each, named by their content, and cached by it.

Every kernel the compiler emits (a fusion, an unfused op, a relayout copy) gets an
LLVM module of its own, and is compiled -- optimized and code-generated -- apart
from the others: on several threads at once (llvm/machine_code.compile_objects),
and only once per distinct kernel. Identical kernels are common: the N layers of a
transformer compute the same fusions on the same shapes, and only the slots they
read and write differ.

So that the slots do not make them differ, a kernel's body (`LocalSlotsKernelIR`)
reads its buffers from a table of its own, numbered in the order it first asks for
them, and a small wrapper of the usual ABI (`void name(ptr buffers, i64 begin, i64
end)`, in the compile's "glue" module) copies the slots' pointers into such a table
on its stack and calls the body. The body's text then depends only on what it
computes, and its symbol is a hash of that text (`xk_<hash>`): two kernels with the
same body are one function, compiled once, which both wrappers call. (The compiler
goes one step further within a compile: a kernel whose HLO is that of one emitted
before is not even emitted again, compiler._replay.)

Object code of a body is cached under its symbol, the target and the LLVM pipeline
(the light one or O3, loop strength reduction): in memory, an LRU of MEMORY_BYTES,
when the compile uses the in-memory cache (CompileOptions.cache), and in the disk
cache (disk_cache.py's kernels/ folder, keyed with the compiler's sources like every
entry) when it uses that one. A compile loads the bodies it finds there and compiles
the others, together with the glue and the GEMM library routines the process still
lacks (`Batch`: each body starts on the compile threads as soon as it is emitted, so
that LLVM works while Python emits the next kernels); every executable loads its own
copies of the objects into its own engine.

`compile_counts()` says how often each body was compiled in this process (tests).
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import Counter, OrderedDict

import llvmlite.ir as ir

from . import target as targets
from .llvm import machine_code
from .llvm.kernel_ir import Buffer, KernelIR

# The body's name while it is emitted; replaced by `xk_<hash of the text>` after.
PLACEHOLDER = "xlapy_kernel_body"
MEMORY_BYTES = 256 << 20       # object code kept in memory (the least recently used goes)


class LocalSlotsKernelIR(KernelIR):
    """A KernelIR whose buffer table is the kernel's own: slot `slots[j]` is entry j
    (see the module docstring). The alias metadata names the local entries too."""

    def __init__(self, module: ir.Module, constant_slot, scratch_slot=None):
        super().__init__(module, PLACEHOLDER, constant_slot, scratch_slot)
        self.slots: list[int] = []
        self._local: dict[int, int] = {}

    def local(self, slot: int) -> int:
        j = self._local.get(slot)
        if j is None:
            j = self._local[slot] = len(self.slots)
            self.slots.append(slot)
        return j

    def slot_pointer(self, slot: int) -> ir.Value:
        return KernelIR.slot_pointer(self, self.local(slot))

    def buffer(self, slot: int, shape) -> Buffer:
        j = self.local(slot)
        return Buffer(KernelIR.slot_pointer(self, j), shape,
                      lambda inst: self._accesses.append((j, inst)))


def seal(module: ir.Module, body: ir.Function) -> tuple[str, str]:
    """(symbol, text) of a kernel's module once emitted, the body renamed after a hash
    of its text. Helpers named after the kernel (a GEMM driver `<kernel>_gemm0`) are
    renamed with it, so keep their linkage (and the code LLVM makes of them); any other
    exported definition is made internal: each body's module has its own copy, and
    the objects of one engine must not define a name twice."""
    for value in module.global_values:
        if value is body or PLACEHOLDER in value.name:
            continue
        defined = not value.is_declaration if isinstance(value, ir.Function) \
            else value.initializer is not None
        if defined and value.linkage in ("", "external"):
            value.linkage = "internal"
    text = str(module)
    symbol = "xk_" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return symbol, text.replace(PLACEHOLDER, symbol)


class Glue:
    """The compile's glue module: one wrapper per kernel thunk, written as IR text.

    `add(name, symbol, slots)` adds `name` with the kernel ABI, which fills a table of
    `slots`' pointers on its stack and calls the body `symbol` on it; `text()` is the
    module. The wrappers are all alike, so they are formatted here rather than built
    with llvmlite's IR builder (the 12-layer GPT step has 542 of them: ~0.3 s of
    building and printing IR objects, against a few milliseconds of string joins)."""

    def __init__(self, name: str):
        self.name = name
        self._parts: list[str] = []
        self._declared: set[str] = set()

    def add(self, name: str, symbol: str, slots: list[int]) -> None:
        table = f"[{max(1, len(slots))} x ptr]"
        lines = [f'define void @"{name}"(ptr %buffers, i64 %begin, i64 %end) {{',
                 "entry:", f"  %slots = alloca {table}, align 8"]
        for j, slot in enumerate(slots):
            lines.append(f"  %a{j} = getelementptr inbounds ptr, ptr %buffers, i64 {slot}\n"
                         f"  %p{j} = load ptr, ptr %a{j}, align 8\n"
                         f"  %e{j} = getelementptr inbounds {table}, ptr %slots, i64 0, i64 {j}\n"
                         f"  store ptr %p{j}, ptr %e{j}, align 8")
        lines.append(f'  call void @"{symbol}"(ptr %slots, i64 %begin, i64 %end)\n'
                     "  ret void\n}\n")
        if symbol not in self._declared:
            self._declared.add(symbol)
            lines.append(f'declare void @"{symbol}"(ptr, i64, i64)\n')
        self._parts.append("\n".join(lines))

    def text(self) -> str:
        return f'; ModuleID = "{self.name}"\n\n' + "\n".join(self._parts)


_lock = threading.Lock()
_memory: "OrderedDict[str, bytes]" = OrderedDict()
_memory_bytes = 0
_compiled: Counter = Counter()        # symbol -> times its body was compiled


def compile_counts() -> dict[str, int]:
    """How many times each kernel body was optimized and code-generated in this process."""
    with _lock:
        return dict(_compiled)


def clear_memory() -> None:
    """Forgets the in-memory object code (tests)."""
    global _memory_bytes
    with _lock:
        _memory.clear()
        _memory_bytes = 0


def _remember(key: str, code: bytes) -> None:
    global _memory_bytes
    with _lock:
        if key in _memory:
            return
        _memory[key] = code
        _memory_bytes += len(code)
        while _memory_bytes > MEMORY_BYTES and len(_memory) > 1:
            _, old = _memory.popitem(last=False)
            _memory_bytes -= len(old)


def overlaps(threads: int) -> bool:
    """Whether a compile on `threads` compile threads starts LLVM while it still emits
    kernels: only with a core to spare for the emitting thread (fewer compile threads
    than the host has cores). Without one, the compile threads take that core from the
    emission, and their ~20 returns per module into Python wait for the GIL it holds:
    the GPT step's first compile on a 2-core host with 2 compile threads took 5% more
    CPU and no less time (interleaved, shared and near-quiet host)."""
    return threads < host_cores()


def host_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Batch:
    """One compile's distinct bodies (and the GEMM library routines it needs), compiled
    while the compile is still emitting the next kernels.

    `add(symbol, text, light)` hands over a body as soon as it is sealed; `extra(texts)`
    modules to compile with the bodies but never cache here (the GEMM routines). Until
    the compiler knows the module keeps loop strength reduction on (`strength_reduction
    _on()`: some kernel does not stream, compiler._Context), the modules wait: LLVM's
    switch for it is process-wide, and a module whose kernels all stream turns it off
    for its whole batch. From then on each body is looked up in the caches (memory,
    then `disk`) and, if missing, submitted to the compile threads at once
    (machine_code.submit), as are the routines. `finish(glue, strength_reduction)`
    compiles the glue and whatever still waits (the whole batch, if the switch was
    never known to be on), and returns what `objects` returns. Without a core to spare
    for the emitting thread (`overlaps`), nothing starts early: everything compiles in
    `finish`, as before. The object code is the same either way (same modules,
    pipelines and options)."""

    def __init__(self, *, threads: int | None = None, memory: bool = True, disk=None):
        self.target = targets.current()
        self.threads = machine_code.default_threads() if threads is None \
            else machine_code.check_threads(threads)
        self.overlaps = overlaps(self.threads)
        self.memory, self.disk = memory, disk
        self.kernels: dict[str, str] = {}     # symbol -> text, in the order they came
        self.light: dict[str, bool] = {}
        self._found: dict[str, bytes] = {}    # from a cache
        self._looked_up: set[str] = set()
        self._futures: dict = {}              # symbol -> its compile, submitted early
        self._extra: list[list] = []          # [text, light, future or None]
        self._disk_keys: dict[str, str] = {}
        self._on = False                      # strength reduction known to stay on
        self.counts = {"kernels": 0, "compiled": 0, "memory": 0, "disk": 0}

    def add(self, symbol: str, text: str, light: bool) -> None:
        if symbol in self.kernels:
            return
        self.kernels[symbol], self.light[symbol] = text, light
        if self._on:
            self._start(symbol)

    def extra(self, texts, light: bool) -> None:
        for text in texts:
            self._extra.append([text, light, None])
            if self._on:
                self._start_extra(self._extra[-1])

    def strength_reduction_on(self) -> None:
        """The module keeps loop strength reduction on: start what waits."""
        if self._on:
            return
        self._on = True
        for symbol in self.kernels:
            self._start(symbol)
        for item in self._extra:
            self._start_extra(item)

    def _flags(self, symbol: str, strength_reduction: bool) -> str:
        return f"light={self.light[symbol]};lsr={strength_reduction}"

    def _memory_key(self, symbol: str, strength_reduction: bool) -> str:
        return f"{symbol};{self._flags(symbol, strength_reduction)};{self.target.fingerprint()}"

    def _lookup(self, symbol: str, strength_reduction: bool) -> None:
        """Looks `symbol` up in the memory cache, then the disk cache (once)."""
        if symbol in self._looked_up:
            return
        self._looked_up.add(symbol)
        if self.memory:
            key = self._memory_key(symbol, strength_reduction)
            with _lock:
                code = _memory.get(key)
                if code is not None:
                    _memory.move_to_end(key)
            if code is not None:
                self._found[symbol] = code
                self.counts["memory"] += 1
                return
        if self.disk is not None:
            key = self._disk_keys[symbol] = self.disk.key(
                self.kernels[symbol], f"kernel;{self._flags(symbol, strength_reduction)}")
            payload = self.disk.load(key)
            if payload is not None and payload.get("symbol") == symbol \
                    and isinstance(payload.get("object"), bytes):
                self._found[symbol] = payload["object"]
                self.counts["disk"] += 1
                if self.memory:
                    _remember(self._memory_key(symbol, strength_reduction), payload["object"])

    def _start(self, symbol: str) -> None:
        self._lookup(symbol, True)
        if symbol not in self._found and symbol not in self._futures and self.overlaps:
            self._futures[symbol] = machine_code.submit(
                self.kernels[symbol], light=self.light[symbol], target=self.target,
                threads=self.threads)

    def _start_extra(self, item: list) -> None:
        if item[2] is None and self.overlaps:
            item[2] = machine_code.submit(item[0], light=item[1], target=self.target,
                                          threads=self.threads)

    def finish(self, glue: str, strength_reduction: bool
               ) -> tuple[list[bytes], dict, list[bytes]]:
        """(object code of the glue and of every body, in the order they came; counts
        {"kernels", "compiled", "memory", "disk"}; object code of the extra modules)."""
        if self._on and not strength_reduction:
            raise AssertionError("kernel_cache.Batch: strength reduction was on, now off")
        for symbol in self.kernels:
            self._lookup(symbol, strength_reduction)
        late = [s for s in self.kernels if s not in self._found and s not in self._futures]
        late_extra = [item for item in self._extra if item[2] is None]
        # The glue is loads, stores and calls: no optimizer, and the code generator at
        # opt level 0 (its O3 passes took a millisecond per wrapper).
        texts = [glue] + [self.kernels[s] for s in late] + [item[0] for item in late_extra]
        lights = [True] + [self.light[s] for s in late] + [item[1] for item in late_extra]
        quick = [True] + [False] * (len(late) + len(late_extra))
        if self._on and self.overlaps:     # on the same threads as the bodies so far
            futures = [machine_code.submit(text, light=light, target=self.target,
                                           threads=self.threads, quick=q)
                       for text, light, q in zip(texts, lights, quick)]
            codes = [future.result() for future in futures]
        else:
            codes = machine_code.compile_objects(
                texts, light=lights, quick=quick, strength_reduction=strength_reduction,
                threads=self.threads, target=self.target)
        made = dict(zip(late, codes[1:1 + len(late)]))
        for item, code in zip(late_extra, codes[1 + len(late):]):
            item[2] = code
        for symbol, future in self._futures.items():
            made[symbol] = future.result()
        extra_codes = [item[2] if isinstance(item[2], bytes) else item[2].result()
                       for item in self._extra]
        compiled = [s for s in self.kernels if s in made]      # (in order)
        with _lock:
            _compiled.update(compiled)
        for symbol in compiled:
            code = self._found[symbol] = made[symbol]
            if self.memory:
                _remember(self._memory_key(symbol, strength_reduction), code)
            if self.disk is not None:
                self.disk.store(self._disk_keys[symbol], {"symbol": symbol, "object": code})
        self.counts.update(kernels=len(self.kernels), compiled=len(compiled))
        return [codes[0]] + [self._found[s] for s in self.kernels], dict(self.counts), extra_codes


def objects(glue: str, kernels: dict[str, str], *, light, strength_reduction: bool,
            threads: int | None = None, memory: bool = True, disk=None,
            extra: list[str] = (), extra_light: bool = False
            ) -> tuple[list[bytes], dict, list[bytes]]:
    """The object code of the glue module and of every body in `kernels` (symbol ->
    text), in that order, counts {"kernels", "compiled", "memory", "disk"}, and the
    object code of the `extra` modules (never cached here: the GEMM library's
    routines, compiled in the same batch; the light pipeline if `extra_light`, else O3).
    `light`: whether the bodies take the light pipeline (one bool, or symbol -> bool).
    Bodies come from the memory cache (if `memory`), then `disk` (disk_cache, or None),
    else are compiled, with the glue and `extra`, on `threads` threads: a Batch handed
    everything at once."""
    batch = Batch(threads=threads, memory=memory, disk=disk)
    for symbol, text in kernels.items():
        batch.add(symbol, text, light[symbol] if isinstance(light, dict) else light)
    batch.extra(extra, extra_light)
    return batch.finish(glue, strength_reduction)
