"""The GEMM's shape-independent routines, compiled once per process.

A packed GEMM (packed_gemm.py) calls two kinds of helpers: the micro-kernel
(microkernel.py) and the packing routines (packing.py). Their code
depends only on a few parameters (accumulation type, register tile, packing
layout), all spelled out in their names, yet they are three quarters of a dot
kernel's IR. Emitting them into every module made LLVM optimize and generate
them again for every compile.

Instead, a kernel module only *declares* them (`declare`), and before the
module is JIT-compiled `ensure_compiled(routines_in(module))` makes sure each
one exists in this process: missing routines are emitted together into one
LLVM module of their own, optimized, code-generated (or loaded from the disk
cache), JIT-compiled into an engine kept alive for the life of the process,
and published with `llvm.add_symbol`, which the JIT of every later module
resolves external calls against. The calls cross modules, but both helpers
are kept out of line anyway (one call per micro-tile or per packed block).

A `Routine` is a recipe of plain data: the disk cache stores the ones a
module needs next to its object code (cache_format.py), so loading a cached
module first ensures them. Each routine's object code is a disk-cache entry of
its own (disk_cache.gemm, keyed by the recipe and the target like every entry,
and checked against the recipe on load; the compiler hands `ensure_compiled`
that folder): a process compiles a routine only if no earlier process did for
its target, whichever module needed it. Routines it does compile are one LLVM
module each, optimized and code-generated on the compile threads
(llvm/machine_code.compile_objects), and loaded into one engine.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import NamedTuple

from llvmlite import binding as llvm
from llvmlite import ir

from ..llvm import machine_code
from ..llvm.ir_toolkit import I1, I64, PTR, VOID

from .microkernel import MicroTile, emit_microkernel
from .packing import PackLayout, emit_pack
from .spec import accumulation_arith

# The routines take the light LLVM pipeline (llvm/target_machine.LIGHT_PASSES), not O3:
# their IR is written on vectors already (shuffles, broadcasts, FMAs, the k loop unrolled
# by hand), and O3 found nothing to gain in it. Measured on the quiet AVX-512 host, the
# seven routines of a GPT block's dots: 0.51 -> 0.18 s of LLVM (CPU), and the dots as
# fast (2048x512x2048 11.4-11.8 ms either way, attention's batched dots 2.1-2.5 ms).
ROUTINE_LIGHT = True

# The signatures of the kinds (see emit_microkernel and emit_pack).
_SIGNATURES = {
    "micro": ir.FunctionType(VOID, [PTR, PTR, PTR, I64, I64, I64, I64, I1]),
    "micro_strided_a": ir.FunctionType(VOID, [PTR, PTR, PTR, I64, I64, I64, I64, I1, I64, I64]),
    "pack": ir.FunctionType(VOID, [PTR, PTR] + [I64] * 6),
}
_SIGNATURES["micro_strided_a_far"] = _SIGNATURES["micro_strided_a"]   # only the body differs


@dataclass(frozen=True)
class Routine:
    """One library routine: its symbol name and how to emit it. `out_dtype` picks the
    accumulation type; `shape` is a MicroTile ("micro"; "micro_strided_a": A read in place;
    "micro_strided_a_far": the same, prefetching A's far-apart k steps) or a PackLayout
    ("pack")."""
    name: str
    kind: str
    out_dtype: str
    shape: MicroTile | PackLayout
    may_accumulate: bool = False      # micro only

    def emit(self, module: ir.Module) -> ir.Function:
        arith = accumulation_arith(self.out_dtype)
        if self.kind.startswith("micro"):
            fn = emit_microkernel(module, self.name, arith, self.shape, self.out_dtype,
                                  self.may_accumulate, strided_a=self.kind != "micro",
                                  prefetch_a=self.kind == "micro_strided_a_far")
        else:
            fn = emit_pack(module, self.name, self.shape, arith)
        fn.linkage = ""          # exported: other modules' code calls it
        return fn


_lock = threading.RLock()     # (ensure_compiled holds it across plan and finish)
_known: dict[str, Routine] = {}       # every routine declared in this process, by name
_ready: dict[str, int] = {}           # compiled ones: name -> address
_engines: list = []                   # the JITs holding their code, alive for good


def declare(module: ir.Module, routine: Routine) -> ir.Function:
    """Declares `routine` in `module` (once) and remembers its recipe."""
    _known.setdefault(routine.name, routine)
    existing = module.globals.get(routine.name)
    if existing is not None:
        return existing
    return ir.Function(module, _SIGNATURES[routine.kind], routine.name)


def routines_in(module: ir.Module) -> list[Routine]:
    """The library routines `module` declares, in a stable order."""
    return sorted((_known[f.name] for f in module.functions
                   if f.is_declaration and f.name in _known), key=lambda r: r.name)


def ensure_compiled(routines: list[Routine], cache=None) -> None:
    """Makes every routine callable by JIT'd code in this process (thread-safe).
    `cache`: where the library's object code is kept between processes (the disk cache,
    disk_cache.py: `key`, `load`, `store`), or None to compile without one."""
    with _lock:
        build = plan(routines, cache)
        if build is not None:
            finish(build, machine_code.compile_objects(build.texts, light=ROUTINE_LIGHT))


class Build(NamedTuple):
    """The routines a process still needs (`plan`): those the cache had (name -> object
    code), and the module texts of those to compile (`texts`, in `to_build` order),
    which `finish` takes the object code of -- so that a compile can generate them
    in one batch with its kernels."""
    missing: list
    loaded: dict
    to_build: list
    texts: list
    keys: dict
    cache: object


def plan(routines: list[Routine], cache=None) -> Build | None:
    """What making `routines` callable needs, or None if they all are (see Build)."""
    with _lock:
        missing = [r for r in routines if r.name not in _ready]
    if not missing:
        return None
    loaded: dict[str, bytes] = {}
    keys = {}
    if cache is not None:
        for r in missing:
            keys[r.name] = cache.key(f"{r!r};light={ROUTINE_LIGHT}", "gemm-routine")
            payload = cache.load(keys[r.name])
            if payload is not None and payload.get("routine") == repr(r) \
                    and isinstance(payload.get("object"), bytes):
                loaded[r.name] = payload["object"]
    to_build = [r for r in missing if r.name not in loaded]
    return Build(missing, loaded, to_build, [_routine_module(r) for r in to_build], keys, cache)


def finish(build: Build, codes: list[bytes]) -> None:
    """Loads the routines of `build` (`codes`: the object code of `build.texts`), stores
    the compiled ones in the cache and publishes them; any another thread published
    meanwhile are left as they are."""
    objects = dict(build.loaded)
    for r, code in zip(build.to_build, codes):
        objects[r.name] = code
        if build.cache is not None:
            build.cache.store(build.keys[r.name], {"routine": repr(r), "object": code})
    with _lock:
        _built.update(r.name for r in build.to_build)
        still = [r for r in build.missing if r.name not in _ready]
        if not still:
            return
        jit = machine_code.jit_object([objects[r.name] for r in still])
        _engines.append(jit)
        for r in still:
            address = jit.lookup(r.name)
            llvm.add_symbol(r.name, address)
            _ready[r.name] = address
            _known.setdefault(r.name, r)


def compiled_names() -> list[str]:
    """The routines compiled so far in this process (for tests and diagnostics)."""
    with _lock:
        return sorted(_ready)


def built_names() -> list[str]:
    """The routines this process optimized and code-generated itself (not loaded from
    the disk cache), for tests and diagnostics."""
    with _lock:
        return sorted(_built)


_built: set = set()


def _routine_module(routine: Routine) -> str:
    """The LLVM IR text of a module holding `routine` alone (any other exported
    definition made internal: every routine's module has its own copy, and all are
    loaded into one engine)."""
    module = ir.Module(name="xlapy_gemm_routine")
    fn = routine.emit(module)
    for value in module.global_values:
        if value is fn:
            continue
        defined = not value.is_declaration if isinstance(value, ir.Function) \
            else value.initializer is not None
        if defined and value.linkage in ("", "external"):
            value.linkage = "internal"
    return str(module)
