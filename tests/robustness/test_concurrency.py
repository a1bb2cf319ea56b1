"""Concurrency and resources: threads compiling and running at once; nothing leaks.

- Many threads compile and run distinct and identical modules at the same
  time: every result is right, nothing deadlocks (joins have a deadline), and
  afterwards the compile cache answers one module with one executable.
- One executable run from many threads at once with different inputs.
- Bounded resources: live JIT engines (llvmlite `ExecutionEngine` objects)
  go away with their executables when the cache is off; resident memory stays
  flat over many calls and nearly flat over uncached compiles (about 2 KiB
  per compile stays behind inside llvmlite's pass builder; see
  `backend_cpu.llvm.target_machine.optimize`); and the in-memory compile cache is a
  bounded LRU (`backend_cpu.compiler.CACHE_CAPACITY`).

The heavy variants (thousands of compiles and calls) are `@pytest.mark.slow`.
"""
from __future__ import annotations

import gc
import threading

import llvmlite.binding as llvm
import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.backend_cpu import compiler

JOIN_SECONDS = 120
WIDTH = 64


def module_with_constant(k: int, name: str = "m") -> hlo.HloModule:
    """r = x * k + k: one compile per distinct k (the text differs)."""
    return hlo.parse_module(f"""
HloModule {name}{k}
ENTRY e {{
  x = f32[{WIDTH}] parameter(0)
  c = f32[] constant({k})
  b = f32[{WIDTH}] broadcast(c), dimensions={{}}
  m = f32[{WIDTH}] multiply(x, b)
  ROOT r = f32[{WIDTH}] add(m, b)
}}""")


def expected(x: np.ndarray, k: int) -> np.ndarray:
    return x * np.float32(k) + np.float32(k)


def run_threads(target, count: int) -> list:
    """Runs target(i) on `count` threads; returns their errors; fails on a deadlock."""
    errors: list = []

    def guarded(i):
        try:
            target(i)
        except BaseException as e:           # reported to the main thread below
            errors.append(e)
    threads = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_SECONDS)
    assert not any(t.is_alive() for t in threads), f"threads still running after {JOIN_SECONDS} s"
    return errors


def live_engines() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, llvm.ExecutionEngine))


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


# --- threads --------------------------------------------------------------------------------

def test_threads_compile_and_run_distinct_and_identical_modules():
    base = 1000 + np.random.default_rng().integers(1 << 20)   # fresh keys: not cached yet
    shared = int(base)            # every thread also compiles this one module

    def work(i):
        rng = np.random.default_rng(i)
        for k in (int(base) + 1 + i, shared):
            executable = backend_cpu.compile(module_with_constant(k, "conc"))
            for _ in range(20):
                x = rng.standard_normal(WIDTH).astype(np.float32)
                np.testing.assert_array_equal(executable.run(x)[0], expected(x, k))
    errors = run_threads(work, 8)
    assert not errors, errors[0]
    # The cache is consistent: one module text, one executable, from now on.
    first = backend_cpu.compile(module_with_constant(shared, "conc"))
    assert backend_cpu.compile(module_with_constant(shared, "conc")) is first
    for i in range(8):
        k = int(base) + 1 + i
        assert backend_cpu.compile(module_with_constant(k, "conc")) is \
            backend_cpu.compile(module_with_constant(k, "conc"))


def test_one_executable_many_threads():
    executable = backend_cpu.compile(module_with_constant(3))

    def work(i):
        x = np.full(WIDTH, i, np.float32)
        for _ in range(200):
            np.testing.assert_array_equal(executable.run(x)[0], expected(x, 3))
    errors = run_threads(work, 16)
    assert not errors, errors[0]


def test_threads_run_a_parallel_reduction_module():
    """A bigger kernel (split over the runtime's thread pool) called from several threads."""
    text = """
HloModule rowsum
ENTRY e {
  x = f32[256,512] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[256] reduce(x, z), dimensions={1}, to_apply=add
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}"""
    executable = backend_cpu.compile(hlo.parse_module(text))

    def work(i):
        x = np.full((256, 512), float(i % 4), np.float32)     # exact sums in any order
        for _ in range(20):
            np.testing.assert_array_equal(executable.run(x)[0], x.sum(axis=1))
    errors = run_threads(work, 6)
    assert not errors, errors[0]


# --- resources ----------------------------------------------------------------------------------

def compile_uncached(k: int):
    """A real compile every time: neither the in-memory nor the disk cache."""
    return backend_cpu.compile(module_with_constant(k, "nocache"),
                               backend_cpu.CompileOptions(cache=False, disk_cache=False))


def check_engines_freed(count: int) -> None:
    before = live_engines()
    executables = [compile_uncached(k) for k in range(count)]
    assert live_engines() >= before + count           # each executable holds its engine
    x = np.ones(WIDTH, np.float32)
    for k, ex in enumerate(executables):
        np.testing.assert_array_equal(ex.run(x)[0], expected(x, k))
    del executables, ex
    assert live_engines() <= before, "JIT engines outlive their executables"


def test_uncached_executables_free_their_engines():
    check_engines_freed(12)


def check_flat_memory_over_compiles(count: int, slack_mb: int) -> None:
    for k in range(5):                                  # warm up LLVM's own caches
        compile_uncached(k)
    gc.collect()
    start = resident_bytes()
    for k in range(count):
        compile_uncached(100 + k).run(np.ones(WIDTH, np.float32))
    gc.collect()
    grown = (resident_bytes() - start) / 2**20
    assert grown < slack_mb, f"resident memory grew {grown:.1f} MiB over {count} compiles"


def test_memory_flat_over_uncached_compiles():
    check_flat_memory_over_compiles(60, slack_mb=6)


def check_flat_memory_over_calls(calls: int, slack_mb: int) -> None:
    executable = backend_cpu.compile(module_with_constant(5))
    x = np.ones(WIDTH, np.float32)
    for _ in range(500):
        executable.run(x)
    gc.collect()
    start = resident_bytes()
    for _ in range(calls):
        executable.run(x)
    gc.collect()
    grown = (resident_bytes() - start) / 2**20
    assert grown < slack_mb, f"resident memory grew {grown:.1f} MiB over {calls} calls"


def test_memory_flat_over_calls():
    check_flat_memory_over_calls(10_000, slack_mb=8)


def test_memory_flat_over_disk_cache_loads(monkeypatch, tmp_path):
    """Executables loaded from the disk cache (no LLVM optimization) leak nothing."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    options = backend_cpu.CompileOptions(cache=False, disk_cache=True)
    x = np.ones(WIDTH, np.float32)
    for k in range(10):                          # compile and store
        backend_cpu.compile(module_with_constant(k, "disk"), options)
    assert len(list(tmp_path.rglob("*"))) >= 10, "nothing was written to the disk cache"
    gc.collect()
    start = resident_bytes()
    for round_ in range(20):
        for k in range(10):
            np.testing.assert_array_equal(
                backend_cpu.compile(module_with_constant(k, "disk"), options).run(x)[0],
                expected(x, k))
    gc.collect()
    grown = (resident_bytes() - start) / 2**20
    assert grown < 4, f"resident memory grew {grown:.1f} MiB over 200 disk-cache loads"


def test_compile_cache_is_a_bounded_lru(monkeypatch):
    """The in-memory cache keeps the CACHE_CAPACITY most recently used executables;
    evicted ones (and their JIT engines) are freed once nobody holds them."""
    assert compiler.CACHE_CAPACITY >= 1
    monkeypatch.setattr(compiler, "CACHE_CAPACITY", 4)
    options = backend_cpu.CompileOptions(disk_cache=False)
    base = 20_000 + int(np.random.default_rng().integers(1 << 20))
    engines = live_engines()
    first = [backend_cpu.compile(module_with_constant(base + k, "lru"), options) for k in range(4)]
    assert backend_cpu.compile(module_with_constant(base, "lru"), options) is first[0]  # now recent
    for k in range(4, 8):
        backend_cpu.compile(module_with_constant(base + k, "lru"), options)
    assert len(compiler._cache) <= 4
    kept = first[0]
    del first
    assert live_engines() <= engines + 4 + 1      # the cache's four, and `kept`
    assert backend_cpu.compile(module_with_constant(base, "lru"), options) is not kept


# --- heavy variants ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_engines_freed_over_many_compiles():
    check_engines_freed(200)


@pytest.mark.slow
def test_memory_flat_over_a_thousand_compiles():
    check_flat_memory_over_compiles(1000, slack_mb=8)       # 8 KiB a compile at most


@pytest.mark.slow
def test_memory_flat_over_fifty_thousand_calls():
    check_flat_memory_over_calls(50_000, slack_mb=8)


def test_threads_trace_jit_functions_at_the_same_time():
    """jit_compile traces in each calling thread; traces must not see each other."""
    from xlapy.frontend import jit_compile

    def make(k):
        @jit_compile
        def f(x):
            y = x
            for _ in range(30):           # a long trace: threads interleave inside it
                y = y * 1.0 + float(k)
                y = y - float(k)
            return y + float(k)
        return f
    functions = [make(k) for k in range(8)]
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait(JOIN_SECONDS)
        for n in range(3):               # a new shape each time: a new trace
            x = np.full((4, 5 + n), i, np.float32)
            np.testing.assert_array_equal(functions[i](x), x + i)
    errors = run_threads(work, 8)
    assert not errors, errors[0]
