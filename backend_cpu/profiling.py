"""Profiles of executions: the host's roofline, and a per-kernel table of a run.

`roofline()` measures this host once per process (cached): memory bandwidth as
a numpy copy of 64 MiB split over the intra-op threads (bytes read + written per
second), and the f32 FMA peak as a small kernel compiled here -- a dozen
independent chains of vector FMAs (multiply and add where the target has no
FMA) per intra-op thread, counted as two flops per lane. Both are the best of a
few tries, so a busy machine lowers them less than it lowers a single sample.

`profile(executable, args)` runs an executable under a trace (runtime/profiler.py:
each thunk a span with the bytes and flops the compiler recorded for it) and
returns a `Profile`: per kernel, its time per step, share of the step, GB/s,
GFLOP/s and the fraction of the roofline it reaches -- the larger of its memory
time (bytes / bandwidth) and compute time (flops / peak), divided by the time
measured (100%: as fast as the host allows; a kernel whose bytes stay in cache
may pass it). Transcendentals are not counted as flops, as in XLA's cost analysis.
"""
from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass

import numpy as np

from .. import runtime
from ..runtime import profiler

from . import target as targets
from .llvm import target_machine


@dataclass(frozen=True)
class Roofline:
    bytes_per_second: float       # memory: bytes read + written per second
    flops_per_second: float       # f32 FMA peak, 2 flops per lane
    threads: int                  # intra-op threads both were measured with
    isa: str

    def describe(self) -> str:
        return (f"host roofline: {self.bytes_per_second / 1e9:.1f} GB/s memory (numpy copy), "
                f"{self.flops_per_second / 1e9:.1f} GFLOP/s f32 FMA ({self.isa}), "
                f"{self.threads} thread{'s' * (self.threads != 1)}")


_roofline: dict[int, Roofline] = {}
_roofline_lock = threading.Lock()


def roofline() -> Roofline:
    """This host's measured memory bandwidth and FMA peak over the runtime's intra-op
    threads (measured at the first call per thread count, then cached)."""
    threads = runtime.get_options().intra_op_threads
    with _roofline_lock:
        if threads not in _roofline:
            target = targets.host()
            _roofline[threads] = Roofline(_memory_bandwidth(threads),
                                          _fma_peak(threads, target), threads, target.isa)
        return _roofline[threads]


def _best(tries: int, run) -> float:
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _memory_bandwidth(threads: int, nbytes: int = 64 << 20) -> float:
    src = np.ones(nbytes // 8, np.float64)
    dst = np.empty_like(src)
    bounds = [len(src) * i // threads for i in range(threads + 1)]
    pool = runtime.default_thread_pool()

    def copy(i: int) -> None:          # numpy releases the GIL while it copies
        np.copyto(dst[bounds[i]:bounds[i + 1]], src[bounds[i]:bounds[i + 1]])
    run = lambda: pool.parallel_for(threads, copy)      # noqa: E731
    run()                                               # pages in the destination
    return 2 * nbytes / _best(5, run)


_CHAINS = 12          # independent accumulators: enough to cover the FMA latency


def _fma_ir(lanes: int, fma: bool) -> str:
    vec = f"<{lanes} x float>"

    def splat(value: float) -> str:      # (values exact in f32: LLVM demands it)
        return "<" + ", ".join([f"float {value!r}"] * lanes) + ">"
    scale, shift = splat(0.9990234375), splat(0.0009765625)   # exact in f32; x -> 1
    lines = [f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})",
             "define void @fma_peak(i64 %n, ptr %out) {",
             "entry:", "  br label %loop", "loop:",
             "  %i = phi i64 [0, %entry], [%i.next, %loop]"]
    for k in range(_CHAINS):       # distinct starts: LLVM cannot merge the chains
        lines.append(f"  %a{k} = phi {vec} [{splat(0.5 + k / 64)}, %entry], [%b{k}, %loop]")
    for k in range(_CHAINS):
        if fma:
            lines.append(f"  %b{k} = call {vec} @llvm.fma.v{lanes}f32({vec} %a{k}, "
                         f"{vec} {scale}, {vec} {shift})")
        else:
            lines.append(f"  %m{k} = fmul {vec} %a{k}, {scale}")
            lines.append(f"  %b{k} = fadd {vec} %m{k}, {shift}")
    lines += ["  %i.next = add i64 %i, 1", "  %done = icmp eq i64 %i.next, %n",
              "  br i1 %done, label %exit, label %loop", "exit:"]
    total = "%b0"
    for k in range(1, _CHAINS):
        lines.append(f"  %s{k} = fadd {vec} {total}, %b{k}")
        total = f"%s{k}"
    lines += [f"  store {vec} {total}, ptr %out, align 4", "  ret void", "}"]
    return "\n".join(lines) + "\n"


def _fma_peak(threads: int, target, iterations: int = 1 << 18) -> float:
    lanes = target.lanes(4)
    fma = target.has("fma") or not target.is_x86
    with targets.using(target):
        engine, lookup = target_machine.jit_compile(_fma_ir(lanes, fma), target=target)
    kernel = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(lookup("fma_peak"))
    out = np.zeros((threads, lanes), np.float32)
    pool = runtime.default_thread_pool()
    run = lambda: pool.parallel_for(threads, lambda i: kernel(iterations,   # noqa: E731
                                                              out[i].ctypes.data))
    run()
    seconds = _best(5, run)
    del engine
    return threads * iterations * _CHAINS * lanes * 2 / seconds


@dataclass
class Profile:
    """A profiled run: `summary` (runtime.profiler.Summary: rows slowest first),
    the host's `roofline`, and the `recorder` holding the trace."""
    summary: profiler.Summary
    roofline: Roofline
    recorder: profiler.Recorder

    @property
    def rows(self) -> list:
        return self.summary.rows

    def table(self, limit: int | None = None) -> str:
        return self.roofline.describe() + "\n" + self.summary.table(limit)

    def write_trace(self, path) -> str:
        return self.recorder.write(path)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return (f"<Profile: {len(self.rows)} kernels, step "
                f"{self.summary.step_seconds * 1e3:.3f} ms>")


def summarize(recorder: profiler.Recorder, events=None, warmup: int = 0) -> Profile:
    """The Profile of a trace's steps (`events`: these instead of all of them; `warmup`:
    leave out the first steps of each device)."""
    peaks = roofline()
    events = recorder.events if events is None else events
    summary = profiler.summarize(events, (peaks.bytes_per_second, peaks.flops_per_second),
                                 warmup)
    return Profile(summary, peaks, recorder)


def profile(executable, args, repeat: int = 10, warmup: int = 1, trace=None) -> Profile:
    """Runs `executable` on `args` (a multi-device executable: one argument list per
    device, through run_devices) `warmup` times untraced, then `repeat` times traced.
    `trace`: a path to write the Chrome trace to. Inside a running trace, the runs are
    recorded into it."""
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"profile: repeat must be an integer >= 1, got {repeat!r}")
    if executable.num_devices > 1 and executable.distributed is None:
        run = lambda: executable.run_devices(args)      # noqa: E731
    else:
        run = lambda: executable.run(*args)             # noqa: E731
    for _ in range(warmup):
        run()
    roofline()                          # measured before the trace, not inside it
    own = profiler.active is None
    recorder = profiler.start() if own else profiler.active
    first = len(recorder.events)
    try:
        for _ in range(repeat):
            run()
    finally:
        if own:
            profiler.stop()
    result = summarize(recorder, recorder.events[first:])
    if trace is not None:
        recorder.write(trace)
    return result
