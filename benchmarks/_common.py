"""Helpers shared by the hand-run benchmarks: timing, error checks, optional JAX.

Nothing here imports xlapy, so a script can set environment variables (thread
counts) from its command line before the first xlapy import.
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass

import numpy as np

# Hardware limits of this 2-core Zen 5 machine, as issue 9 states them.
PEAK_GFLOPS_2_CORES = 500.0      # 2 cores x 2 FMA pipes x 16 f32 lanes x 2 flops x ~4 GHz
DRAM_GBS = 100.0                 # with non-temporal stores, both cores streaming


def median_ms(fn, repeat: int, inner: int = 1, warmup: int = 1) -> float:
    """Median wall time of one fn() call in ms over `repeat` timings of `inner`
    back-to-back calls, after `warmup` untimed calls (page faults, thread start-up)."""
    return timed_ms(fn, repeat, inner, warmup).wall


@dataclass(frozen=True)
class Timing:
    """Medians per fn() call, in ms (see timed_ms)."""
    wall: float
    cpu: float          # all threads of this process
    busiest: float      # the thread that ran longest (the caller only, without /proc)


def other_threads_cpu_ns() -> dict[str, int]:
    """CPU time (ns) of every other thread of this process, native ones included.

    From /proc (Linux; empty elsewhere): exact for a thread that is not running
    at that moment. The calling thread's entry there lags by up to a scheduler
    tick and reading costs it time, so callers time themselves with their own
    CPU clock, outside the reads."""
    times = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return times
    own = str(threading.get_native_id())
    for tid in tids:
        if tid == own:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                times[tid] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass                         # the thread ended meanwhile
    return times


def timed_ms(fn, repeat: int, inner: int = 1, warmup: int = 1) -> Timing:
    """Medians of wall time, process CPU time and busiest-thread CPU time per fn().

    On a machine shared with other jobs the wall time includes waiting for a core
    and the CPU times do not. The busiest thread's CPU time is what a call would
    take on an idle machine if its threads ran in parallel (the slowest partition
    bounds a parallel kernel), so it compares code on a busy machine. The process
    total is charged for threads that spin while they wait, as XLA's pool may."""
    for _ in range(warmup):
        fn()
    walls, cpus, busiest = [], [], []
    for _ in range(repeat):
        before = other_threads_cpu_ns()
        cpu, own = time.process_time(), time.thread_time_ns()
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        walls.append((time.perf_counter() - start) / inner)
        own = time.thread_time_ns() - own
        cpus.append((time.process_time() - cpu) / inner)
        after = other_threads_cpu_ns()
        deltas = [t - before.get(tid, 0) for tid, t in after.items()] + [own]
        busiest.append(max(deltas) / 1e9 / inner)
    return Timing(statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3,
                  statistics.median(busiest) * 1e3)


def host_line() -> str:
    """The machine and the target xlapy compiles for: "host: Intel(R) Xeon(R) ...
    (rocketlake, avx512); xlapy target: avx2 (rocketlake, 256-bit vectors)"."""
    from xlapy.backend_cpu import target as targets
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), model)
    except OSError:
        pass
    host = targets.host()
    return (f"host: {model} ({host.cpu}, {host.isa}); xlapy target: "
            f"{targets.default().describe()}")


def load_average() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "load average unknown"


def openblas_note() -> str:
    """Says whether the OpenBLAS overrides that slow numpy on this machine are set."""
    set_vars = [f"{v}={os.environ[v]}" for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
                if v in os.environ]
    if not set_vars:
        return "OpenBLAS: no CORETYPE/L2_SIZE override (numpy runs its native kernels)"
    return ("OpenBLAS: " + " ".join(set_vars) + " is set; numpy's matmul may be slower than it "
            "can be (run with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` for a fair row)")


class CheckError(AssertionError):
    """A benchmark computed a wrong result."""


def max_errors(got, ref, scale=None) -> tuple[float, float]:
    """(max |got - ref|, max |got - ref| / (|ref| + 1e-3 * max|ref|)) in float64.

    `scale`, when given, replaces the denominator: for sums and dot products,
    the same computation on |inputs| bounds the rounding error, where |ref| alone
    can be ~0 by cancellation."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        raise CheckError(f"shape {got.shape}, expected {ref.shape}")
    if not np.all(np.isfinite(got)):
        raise CheckError("result has non-finite values")
    diff = np.abs(got - ref)
    if scale is None:
        floor = 1e-3 * float(np.max(np.abs(ref))) if ref.size else 0.0
        scale = np.abs(ref) + floor
    relative = diff / (np.asarray(scale, np.float64) + 1e-30)
    return float(diff.max(initial=0.0)), float(relative.max(initial=0.0))


def check(label: str, got, ref, rtol: float, scale=None) -> float:
    """Max abs error of `got` against the float64 reference; raises CheckError when
    some element is off by more than rtol relative to |ref| (floored at 1e-3 of
    max|ref|) or to `scale` (see max_errors)."""
    abs_err, rel_err = max_errors(got, ref, scale)
    if rel_err > rtol:
        raise CheckError(f"{label}: max error {abs_err:.3g} (relative {rel_err:.3g} > {rtol:g})")
    return abs_err


def import_jax():
    """(jax, jax.numpy) or (None, None): JAX is a benchmark-only dependency."""
    try:
        import jax
        import jax.numpy as jnp
    except Exception:                    # not installed, or broken: no XLA column
        return None, None
    return jax, jnp


def fmt_ms(ms: float | None) -> str:
    if ms is None or ms != ms:
        return "-"
    if ms < 0.1:
        return f"{ms * 1e3:.1f}us"
    return f"{ms:.2f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or a != a or b != b or b == 0:
        return "-"
    return f"{a / b:.2f}"
