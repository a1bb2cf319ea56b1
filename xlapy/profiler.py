"""xlapy.profiler: where the time goes, as a trace to open in Perfetto or a table.

    import xlapy

    with xlapy.profiler.trace("/tmp/step.json") as t:   # Chrome trace-event JSON
        f(x)                                            # compiles and runs, recorded
    print(t.table())                                    # per kernel, slowest first

    f.lower(x).compile().profile(x)                     # runs 10 times, prints the table

Open the file at https://ui.perfetto.dev (or chrome://tracing). The host row
(pid 0) holds the compile phases: the HLO passes (each pass a span), LLVM IR
emission, LLVM optimization, code generation, the GEMM library, linking. Each
device is a row of its own (pid d + 1) with a span per step (the entry program),
inside it one per thunk: kernels (args: HLO instruction, op or fusion kind,
strategy, bytes read and written, flops, transcendentals, partitions), copies,
collectives, host ops, and while/conditional/call spans holding their
sub-programs' spans. A kernel cut over the intra-op threads shows each slice
("partition") on the thread that ran it.

`trace(path)` is like `jax.profiler.trace`; `start_trace(path)` / `stop_trace()`
do the same without a `with`; `TraceAnnotation(name)` marks a span of your own
(`jax.profiler.TraceAnnotation`). `roofline()` is this host's measured memory
bandwidth and FMA peak, which the table's roofline column divides by. When no
trace runs, an execution checks one variable and records nothing.
"""
from __future__ import annotations

import contextlib

from .backend_cpu import profiling as _profiling
from .backend_cpu.profiling import Profile, Roofline, roofline
from .runtime import profiler as _recorder


class Trace:
    """What `trace` yields: the recorded `events` (runtime.profiler.Event), and after the
    trace ends `path` (where it was written) and `table()`/`profile()` of its steps."""

    def __init__(self, recorder, path):
        self.recorder, self.path = recorder, path

    @property
    def events(self) -> list:
        return self.recorder.events

    def profile(self, warmup: int = 0) -> Profile:
        """The per-kernel Profile of the traced steps (`warmup`: leave out the first
        steps of each device: they page in fresh memory and start threads)."""
        return _profiling.summarize(self.recorder, warmup=warmup)

    def table(self, warmup: int = 0, limit: int | None = None) -> str:
        return self.profile(warmup).table(limit)


_pending_path = None


def start_trace(path) -> Trace:
    """Starts recording every compile and execution in this process; `stop_trace()`
    writes Chrome trace-event JSON to `path` (a .json or .json.gz file, or an existing
    folder: a new file in it). One trace at a time."""
    global _pending_path
    recorder = _recorder.start()
    _pending_path = path
    return Trace(recorder, path)


def stop_trace() -> Trace:
    """Stops the running trace and writes it; returns the Trace (`.path`: the file)."""
    global _pending_path
    recorder = _recorder.stop()
    path, _pending_path = _pending_path, None
    result = Trace(recorder, path)
    if path is not None:
        result.path = recorder.write(path)
    return result


@contextlib.contextmanager
def trace(path):
    """Records the `with` block (see the module docstring) and writes it to `path`."""
    started = start_trace(path)
    try:
        yield started
    finally:
        done = stop_trace()
        started.path = done.path


@contextlib.contextmanager
def TraceAnnotation(name: str, **args):      # noqa: N802 - jax.profiler's spelling
    """A span named `name` on the host row around the `with` block (when tracing)."""
    with _recorder.span(name, "annotation", args or None):
        yield


__all__ = ["trace", "start_trace", "stop_trace", "TraceAnnotation", "Trace", "Profile",
           "Roofline", "roofline"]
