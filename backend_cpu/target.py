"""The machine the CPU backend compiles for: one `Target` object.

Every choice that depends on the processor reads it from here: the LLVM triple,
CPU name and feature string; the vector register width and count (lanes of a
vector generator, the GEMM's register tile, the block of a register-block
transpose); whether AVX-512's `vscalef` exists; and whether non-temporal
stores and the x86 floating-point control register are available. No emitter
asks the host about its features.

    Target                  frozen: triple, cpu, features, isa, vector_bits, ...
    host()                  the host, every feature it has
    resolve(max_isa=, cpu=, triple=)
                            a target below the host (XLA's --xla_cpu_max_isa),
                            a named x86 CPU, or another architecture
    default()               host() capped by $XLAPY_CPU_MAX_ISA
    current()               the target of the compile in progress (`using`), else default()
    using(target)           a context in which `current()` is `target`

ISA levels, low to high: "sse4.2", "avx2", "avx512" (x86-64-v2, -v3, -v4 of the
psABI). A level at or below the host's keeps the host's CPU name (its
scheduling model) and turns off every feature above the level; a level above
the host's compiles for the generic CPU of that level (`x86-64-v4`), which
this host cannot run: `runs_on_host` is False, and the backend then compiles
and prints code but refuses to execute it. Another triple (`aarch64-linux-gnu`)
is compile-only too.

On AVX-512 hosts LLVM's scheduling models of several CPUs (Ice Lake, Rocket
Lake, Sapphire Rapids) prefer 256-bit vectors in the loop vectorizer; the
target states its width once and tells LLVM (`-prefer-256-bit`), so that the
code written by hand and the code LLVM vectorizes agree, on every host.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import os
from dataclasses import dataclass

import llvmlite.binding as llvm

from ..passes.target_facts import TargetFacts

ISA_LEVELS = ("sse4.2", "avx2", "avx512")
ENV_MAX_ISA = "XLAPY_CPU_MAX_ISA"
# For testing only: the host reports at most this level (read once per process), so
# an AVX-512 machine can run the suite as an AVX2-only host would: levels above it
# are compile-only. Unlike XLAPY_CPU_MAX_ISA it changes what "runs on the host" means.
ENV_TEST_HOST_ISA = "XLAPY_TEST_HOST_ISA"

# The features each x86 level requires (LLVM spelling), cumulative; from the
# x86-64 psABI's micro-architecture levels v2, v3 and v4.
_LEVEL_FEATURES = {
    "sse4.2": ("cx16", "sahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3"),
    "avx2": ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"),
    "avx512": ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}
# Features that need a level's register file: a target capped below the level
# turns off every host feature that starts with one of these prefixes.
_ABOVE_AVX2 = ("avx512", "avx10", "amx", "evex512")
_ABOVE_SSE42 = _ABOVE_AVX2 + ("avx", "fma", "f16c", "vaes", "vpclmulqdq", "xop", "gfni", "sha512",
                              "sm3", "sm4")
# The generic CPU of each level, for levels the host does not have.
_LEVEL_CPU = {"sse4.2": "x86-64-v2", "avx2": "x86-64-v3", "avx512": "x86-64-v4"}
# CPU names a user may give, by the level their features reach (for `cpu=`).
_CPU_LEVEL = {
    **{name: "avx512" for name in ("x86-64-v4", "skylake-avx512", "cascadelake", "cooperlake",
                                   "icelake-client", "icelake-server", "tigerlake", "rocketlake",
                                   "sapphirerapids", "emeraldrapids", "graniterapids", "znver4",
                                   "znver5")},
    **{name: "avx2" for name in ("x86-64-v3", "haswell", "broadwell", "skylake", "alderlake",
                                 "raptorlake", "meteorlake", "arrowlake", "znver1", "znver2",
                                 "znver3")},
    **{name: "sse4.2" for name in ("x86-64-v2", "nehalem", "westmere", "sandybridge",
                                   "ivybridge", "silvermont", "goldmont", "btver2", "bdver1")},
}


# An L2 per core when the machine's is not known: the smallest of current x86 server
# cores (Zen 4 and 5: 1 MiB; Ice Lake: 1.25 MiB, Sapphire Rapids: 2 MiB).
DEFAULT_L2_BYTES = 1 << 20
# Below this an L2 size read from sysfs is not believed (and the default used).
_MIN_L2_BYTES = 128 * 1024


class TargetError(ValueError):
    """A target that cannot be built: an unknown ISA level, CPU or triple."""


@dataclass(frozen=True, kw_only=True)
class Target(TargetFacts):
    """What the backend compiles for. `features` is the exact LLVM feature string
    given to the target machine; the other fields are read off it once.

    A Target is the `TargetFacts` the pass pipeline reads (passes/target_facts.py:
    the parallel-work and large-transpose thresholds, `vector_bits`, `vector_bytes`),
    so the pipeline and the emitters read one object."""
    triple: str
    cpu: str
    features: str
    isa: str                  # "avx512", "avx2", "sse4.2", or the architecture ("aarch64")
    vector_bits: int          # the widest vector register the emitters use
    vector_registers: int     # architectural vector registers (16 or 32)
    runs_on_host: bool        # False: compile and print only
    # The L2 cache of one core, in bytes: the GEMM's packed A block is sized from it
    # (gemm/packed_gemm.py). The host's own (from sysfs) on the host and for ISA caps
    # of it; DEFAULT_L2_BYTES for a named CPU or another architecture.
    l2_bytes: int = 0

    @property
    def is_x86(self) -> bool:
        return self.triple.startswith(("x86_64", "i386", "i686"))

    @property
    def streaming_stores(self) -> bool:
        """Non-temporal stores of whole vectors pay off for outputs too large for the
        cache (x86's `movnt*`; elsewhere LLVM's hint is not a sure win, so no)."""
        return self.is_x86

    def has(self, feature: str) -> bool:
        """True if the target has the LLVM feature `feature` ("avx512f", "fma")."""
        return _feature_set(self.features).get(feature, False)

    def lanes(self, element_bytes: int) -> int:
        """Elements of `element_bytes` in one vector register."""
        return max(1, self.vector_bytes // element_bytes)

    def fingerprint(self) -> str:
        """Everything that changes the machine code: part of both cache keys."""
        return (f"{self.triple}|{self.cpu}|{self.features}|{self.vector_bits}|"
                f"{self.parallel_min_bytes}|{self.large_transpose_bytes}|{self.l2}")

    @property
    def l2(self) -> int:
        """`l2_bytes`, or DEFAULT_L2_BYTES when it is not known (0)."""
        return self.l2_bytes or DEFAULT_L2_BYTES

    @property
    def tag(self) -> str:
        """A short name unique to the target, for symbols of process-wide code that
        several targets may compile (the GEMM library): "avx2_1a2b3c4d"."""
        digest = hashlib.sha256(self.fingerprint().encode()).hexdigest()[:8]
        return f"{self.isa.replace('.', '')}_{digest}"

    def describe(self) -> str:
        """One line for headers and messages: "avx2 (rocketlake, 256-bit vectors)"."""
        return f"{self.isa} ({self.cpu}, {self.vector_bits}-bit vectors)"

    def target_machine(self) -> llvm.TargetMachine:
        """A fresh LLVM TargetMachine for this target (O3, JIT code model). Callers
        that only optimize or print share `llvm/target_machine.target_machine(target)`."""
        _initialize()
        try:
            llvm_target = llvm.Target.from_triple(self.triple)
        except RuntimeError as error:
            raise TargetError(f"backend_cpu: LLVM has no target for triple {self.triple!r}: "
                              f"{str(error).strip()}") from None
        return llvm_target.create_target_machine(cpu=self.cpu, features=self.features, opt=3,
                                                 reloc="default", codemodel="jitdefault")


@functools.lru_cache(maxsize=None)
def _feature_set(features: str) -> dict[str, bool]:
    result = {}
    for item in filter(None, features.split(",")):
        result[item[1:]] = item[0] == "+"
    return result


_initialized = False


def _initialize() -> None:
    """Every LLVM target LLVM was built with (a target for another architecture is
    compile-only, but its code generator must exist)."""
    global _initialized
    if not _initialized:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _initialized = True


@functools.lru_cache(maxsize=None)
def _host_features() -> dict[str, bool]:
    _initialize()
    return dict(llvm.get_host_cpu_features())


def _level_of(features: dict[str, bool]) -> str | None:
    """The highest ISA level whose features are all present, or None (below SSE4.2)."""
    best = None
    for level in ISA_LEVELS:
        if not all(features.get(f, False) for f in _LEVEL_FEATURES[level]):
            break
        best = level
    return best


@functools.lru_cache(maxsize=None)
def _host_l2_bytes() -> int:
    """The host's L2 per core, from Linux's sysfs (cpu0's level-2 data or unified
    cache), or 0 when it cannot be read (another OS, a container hiding sysfs)."""
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return 0
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(root, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(root, entry, "size")) as f:
                size = f.read().strip()
        except OSError:
            continue
        if level != "2" or kind not in ("Data", "Unified"):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:].upper(), 1)
        try:
            value = int(size.rstrip("KkMm")) * scale
        except ValueError:
            return 0
        return value if value >= _MIN_L2_BYTES else 0
    return 0


def _x86_target(cpu: str, features: dict[str, bool], level: str, runs: bool,
                l2_bytes: int = 0) -> Target:
    """An x86 target from a full feature map, capped at `level`."""
    blocked = {"avx512": (), "avx2": _ABOVE_AVX2, "sse4.2": _ABOVE_SSE42}[level]
    capped = {name: on and not name.startswith(blocked) for name, on in features.items()}
    if capped.get("avx512f"):
        bits, registers = 512, 32
    elif capped.get("avx"):
        bits, registers = 256, 16
    else:
        bits, registers = 128, 16
    items = [("+" if on else "-") + name for name, on in sorted(capped.items())]
    # The loop vectorizer's width follows ours (see the module docstring).
    if bits == 512:
        items.append("-prefer-256-bit")
    return Target(triple=_host_triple(), cpu=cpu, features=",".join(items), isa=level,
                  vector_bits=bits, vector_registers=registers, runs_on_host=runs,
                  l2_bytes=l2_bytes)


@functools.lru_cache(maxsize=None)
def _host_triple() -> str:
    _initialize()
    return llvm.get_process_triple()


@functools.lru_cache(maxsize=None)
def host() -> Target:
    """The host: its CPU name and every feature it has."""
    _initialize()
    features = _host_features()
    triple = _host_triple()
    if not triple.startswith(("x86_64", "i386", "i686")):
        return _other_target(triple, llvm.get_host_cpu_name(), runs=True,
                             features=llvm.get_host_cpu_features().flatten(),
                             l2_bytes=_host_l2_bytes())
    level = _level_of(features) or "sse4.2"
    pretend = os.environ.get(ENV_TEST_HOST_ISA, "").strip()
    if pretend:     # a test run that plays an older host (see ENV_TEST_HOST_ISA)
        level = min(level, _check_level(pretend, ENV_TEST_HOST_ISA), key=ISA_LEVELS.index)
    return _x86_target(llvm.get_host_cpu_name(), features, level, runs=True,
                       l2_bytes=_host_l2_bytes())


def _other_target(triple: str, cpu: str, runs: bool, features: str = "",
                  l2_bytes: int = 0) -> Target:
    """A non-x86 target: 128-bit vectors (NEON, SVE's minimum), 32 registers on AArch64."""
    arch = triple.split("-")[0]
    registers = 32 if arch in ("aarch64", "arm64") else 16
    return Target(triple=triple, cpu=cpu, features=features, isa=arch, vector_bits=128,
                  vector_registers=registers, runs_on_host=runs, l2_bytes=l2_bytes)


def _check_level(max_isa: str, where: str) -> str:
    level = max_isa.strip().lower().replace("_", ".")
    level = {"sse42": "sse4.2", "sse4": "sse4.2", "avx512f": "avx512", "avx-512": "avx512"}.get(
        level, level)
    if level not in ISA_LEVELS:
        raise TargetError(f"{where}: unknown ISA level {max_isa!r}; expected one of "
                          f"{', '.join(ISA_LEVELS)}")
    return level


@functools.lru_cache(maxsize=None)
def resolve(max_isa: str | None = None, cpu: str | None = None,
            triple: str | None = None) -> Target:
    """The target for an ISA cap, a CPU name and/or a triple (None: the host's).

    `max_isa` caps the host (or the named CPU) at a level; `cpu` names an x86 CPU
    LLVM knows (see _CPU_LEVEL); `triple` another architecture (compile only).
    """
    base = host()
    if triple is not None and triple != base.triple:
        arch = triple.split("-")[0]
        if arch in ("x86_64", "i386", "i686"):
            if cpu is None and max_isa is None:
                max_isa = "avx2"
        else:
            if max_isa is not None:
                raise TargetError(f"backend_cpu: max_isa={max_isa!r} applies to x86 targets, "
                                  f"not {triple!r}")
            target = _other_target(triple, cpu or "generic", runs=False)
            target.target_machine()     # fails now, clearly, for a triple LLVM lacks
            return target
    if max_isa is None and cpu is None:
        return base
    if not base.is_x86 and triple is None:
        raise TargetError("backend_cpu: max_isa and cpu choose x86 targets; this host is "
                          f"{base.triple}")
    host_level = base.isa
    if cpu is not None and cpu != llvm.get_host_cpu_name():
        if cpu not in _CPU_LEVEL:
            raise TargetError(f"backend_cpu: unknown CPU {cpu!r}; known: "
                              f"{', '.join(sorted(_CPU_LEVEL))}")
        level = _CPU_LEVEL[cpu]
        if max_isa is not None:
            level = min(level, _check_level(max_isa, "backend_cpu"), key=ISA_LEVELS.index)
        features = {f: True for lvl in ISA_LEVELS[:ISA_LEVELS.index(level) + 1]
                    for f in _LEVEL_FEATURES[lvl]}
        runs = ISA_LEVELS.index(level) <= ISA_LEVELS.index(host_level) and triple in (
            None, base.triple)
        return _x86_target(cpu, features, level, runs=runs)
    level = _check_level(max_isa, "backend_cpu")
    if ISA_LEVELS.index(level) <= ISA_LEVELS.index(host_level) and triple in (None, base.triple):
        return _x86_target(llvm.get_host_cpu_name(), _host_features(), level, runs=True,
                           l2_bytes=base.l2_bytes)
    features = {f: True for lvl in ISA_LEVELS[:ISA_LEVELS.index(level) + 1]
                for f in _LEVEL_FEATURES[lvl]}
    return _x86_target(_LEVEL_CPU[level], features, level, runs=False)


def default() -> Target:
    """The host, capped by $XLAPY_CPU_MAX_ISA when it is set."""
    cap = os.environ.get(ENV_MAX_ISA, "").strip()
    if not cap:
        return host()
    try:
        return resolve(max_isa=cap)
    except TargetError as error:
        raise TargetError(f"{ENV_MAX_ISA}={cap!r}: {error}".replace("backend_cpu: ", "")) from None


def levels_on_host() -> tuple[str, ...]:
    """The ISA levels this host can execute (tests compile and run these)."""
    base = host()
    if not base.is_x86:
        return ()
    return ISA_LEVELS[:ISA_LEVELS.index(base.isa) + 1]


_current: contextvars.ContextVar[Target | None] = contextvars.ContextVar("xlapy_target",
                                                                         default=None)


def current() -> Target:
    """The target of the compile in progress; outside a compile, `default()`."""
    return _current.get() or default()


@contextlib.contextmanager
def using(target: Target):
    """Makes `target` the current one for the emitters called inside the block."""
    token = _current.set(target)
    try:
        yield target
    finally:
        _current.reset(token)
