"""A trace recorder: named spans of time on threads and devices, written as Chrome
trace-event JSON (Perfetto, chrome://tracing), and a per-name summary table.

Knows nothing of HLO: the backend hands it spans with a name, a category and
arguments (what kernel, how many bytes and flops), the compiler its phases.

    rec = profiler.start()              # one trace at a time (process-wide)
    ...                                 # executions and compiles record into it
    profiler.stop()                     # -> the Recorder, no longer recording
    rec.write("trace.json")             # Chrome trace-event JSON
    summarize(rec.events, peaks)        # rows: time, share, GB/s, GFLOP/s, roofline

Cost when nothing is traced: whoever records reads `profiler.active` (None) once
per execution -- never per kernel -- and runs its usual code. While tracing, a
kernel pays two clock reads and one list append.

Processes and threads in the trace: pid 0 is the host (compiles, annotations);
device d runs as pid d + 1 (`device_pid`), so a run of several devices shows one
row group per device. Thread ids are the OS's (`threading.get_native_id`), named
after the Python threads (the caller, "xlapy-intra-op-1", "xlapy-device-0", ...).

Events are "X" (complete) events: `ts` and `dur` in microseconds from the start
of the trace, `args` as given; "M" events name the processes and threads.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import os
import threading
import time
from dataclasses import dataclass

now = time.perf_counter_ns

HOST_PID = 0

# The recorder while a trace runs, else None: read it once per execution.
active: "Recorder | None" = None
_lock = threading.Lock()


def device_pid(device: int) -> int:
    """The trace's pid of device `device` (pid 0 is the host)."""
    return device + 1


class Event:
    """One complete span: [start, end) in perf_counter nanoseconds."""
    __slots__ = ("name", "cat", "pid", "tid", "start", "end", "args")

    def __init__(self, name, cat, pid, tid, start, end, args):
        self.name, self.cat, self.pid, self.tid = name, cat, pid, tid
        self.start, self.end, self.args = start, end, args

    @property
    def seconds(self) -> float:
        return (self.end - self.start) * 1e-9

    def __repr__(self):
        return f"Event({self.name!r}, {self.cat!r}, pid={self.pid}, {self.seconds * 1e3:.3f} ms)"


class Recorder:
    """The events of one trace. `add` may be called from any thread (list.append is
    atomic); `depth()` counts, per thread, the programs being executed, so that an
    execution knows whether it is a step or a sub-program of one."""

    def __init__(self):
        self.origin = now()
        self.events: list[Event] = []
        self.process_names: dict[int, str] = {HOST_PID: "host"}
        self._thread_names: dict[int, str] = {}
        self._local = threading.local()

    def add(self, name: str, cat: str, start: int, end: int, pid: int = HOST_PID,
            args: dict | None = None) -> None:
        tid = threading.get_native_id()
        if tid not in self._thread_names:
            self._thread_names[tid] = threading.current_thread().name
        if pid not in self.process_names:
            self.process_names[pid] = f"device {pid - 1}"
        self.events.append(Event(name, cat, pid, tid, start, end, args))

    def enter(self) -> int:
        """Begins a program on this thread; returns how many were running (0: a step)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        return depth

    def leave(self) -> None:
        self._local.depth -= 1

    # --- Chrome trace-event JSON --------------------------------------------------------
    def chrome_events(self) -> list[dict]:
        out = []
        for pid, name in sorted(self.process_names.items()):
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                        "args": {"name": name}})
            out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                        "args": {"sort_index": pid}})
        for pid, tid in sorted({(e.pid, e.tid) for e in self.events}):
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                        "args": {"name": self._thread_names.get(tid, str(tid))}})
        for e in sorted(self.events, key=lambda e: (e.start, -e.end)):
            event = {"ph": "X", "name": e.name, "cat": e.cat, "pid": e.pid, "tid": e.tid,
                     "ts": (e.start - self.origin) / 1e3, "dur": (e.end - e.start) / 1e3}
            if e.args:
                event["args"] = e.args
            out.append(event)
        return out

    def write(self, path) -> str:
        """Writes the trace to `path` (a .json file, .json.gz compressed; an existing
        folder gets a new file named after the process and time); returns the path."""
        path = os.fspath(path)
        if os.path.isdir(path):
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = os.path.join(path, f"xlapy-{os.getpid()}-{stamp}.trace.json")
        data = json.dumps({"traceEvents": self.chrome_events(), "displayTimeUnit": "ms",
                           "otherData": {"producer": "xlapy"}})
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8") as f:
            f.write(data)
        return path


def start() -> Recorder:
    """Starts recording (process-wide); a second trace while one runs is an error."""
    global active
    with _lock:
        if active is not None:
            raise RuntimeError("profiler: a trace is already running; stop it first")
        active = Recorder()
        return active


def stop() -> Recorder:
    """Stops recording; returns the recorder of the trace that ran."""
    global active
    with _lock:
        if active is None:
            raise RuntimeError("profiler: no trace is running")
        rec, active = active, None
        return rec


@contextlib.contextmanager
def span(name: str, cat: str = "compile", args: dict | None = None, pid: int = HOST_PID):
    """Records the time of the `with` block as a span, when a trace runs."""
    rec = active
    if rec is None:
        yield
        return
    start_ns = now()
    try:
        yield
    finally:
        rec.add(name, cat, start_ns, now(), pid, args)


def add_spans(items, cat: str = "compile", pid: int = HOST_PID) -> None:
    """Spans measured elsewhere, when a trace runs: (name, start seconds of
    time.perf_counter, seconds, args) each."""
    rec = active
    if rec is None:
        return
    for name, start_s, seconds, args in items:
        start_ns = int(start_s * 1e9)
        rec.add(name, cat, start_ns, start_ns + int(seconds * 1e9), pid, args)


def launch(rec: Recorder, pid: int, kernel, dims, buffers: int, name: str | None = None,
           pool=None) -> None:
    """kernel.launch while tracing: each slice of a multi-slice launch is a span
    ("partition", named `name` or the kernel's) on the thread that ran it."""
    name = name or kernel.name
    from .thread_pool import default_thread_pool
    slices = dims.slices
    call = kernel._call

    def one(i: int) -> None:
        begin, end = slices[i]
        start_ns = now()
        call(buffers, begin, end)
        rec.add(name, "partition", start_ns, now(), pid, {"slice": [begin, end]})
    if len(slices) == 1:
        one(0)
    elif slices:
        (pool or default_thread_pool()).parallel_for(len(slices), one)


# --- the summary table ------------------------------------------------------------------

# Spans that hold others (a while loop holds its body's kernels): not rows of the table.
CONTAINERS = frozenset({"step", "program", "while", "conditional", "call", "partition"})


# Spans of compiled code (or plain memory copies), whose speed the roofline bounds.
ROOFLINE_CATEGORIES = frozenset({"kernel", "copy"})


@dataclass
class Row:
    """One name's time per step and what it moved and computed."""
    name: str
    op: str
    strategy: str
    calls: float                 # per step
    seconds: float               # per step
    share: float                 # of the step's time
    bytes: float                 # per step (read + written)
    flops: float                 # per step
    roofline: float | None       # the roofline's time bound / measured time
    bound: str                   # "memory" or "compute": which bound is the larger

    @property
    def gbps(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else 0.0


@dataclass
class Summary:
    rows: list[Row]
    steps: int                   # steps summarized (per device)
    step_seconds: float          # mean time of a step
    devices: int

    COLUMNS = ("name", "op", "strategy", "calls", "ms/step", "share", "GB/s", "GFLOP/s",
               "roofline")

    def table(self, limit: int | None = None) -> str:
        """The rows as text, slowest first (`limit`: that many rows, and a total of the
        rest)."""
        rows = self.rows if limit is None else self.rows[:limit]
        cells = [self.COLUMNS]
        for r in rows:
            roof = "-" if r.roofline is None else f"{r.roofline * 100:.0f}% {r.bound}"
            cells.append((r.name, r.op, r.strategy, f"{r.calls:g}", f"{r.seconds * 1e3:.3f}",
                          f"{r.share * 100:.1f}%", f"{r.gbps:.2f}", f"{r.gflops:.2f}", roof))
        widths = [min(48, max(len(str(c[i])) for c in cells)) for i in range(len(self.COLUMNS))]
        lines = []
        for c in cells:
            parts = [str(v)[:w].ljust(w) if i < 3 else str(v).rjust(w)
                     for i, (v, w) in enumerate(zip(c, widths))]
            lines.append("  ".join(parts).rstrip())
        if limit is not None and len(self.rows) > limit:
            rest = self.rows[limit:]
            lines.append(f"... {len(rest)} more, {sum(r.seconds for r in rest) * 1e3:.3f} ms/step")
        covered = sum(r.seconds for r in self.rows)
        lines.append(f"step: {self.step_seconds * 1e3:.3f} ms (mean of {self.steps} step"
                     f"{'s' * (self.steps != 1)}{f' on {self.devices} devices' if self.devices > 1 else ''}); "
                     f"rows cover {covered / self.step_seconds * 100 if self.step_seconds else 0:.1f}%, "
                     f"the rest is host work between them")
        return "\n".join(lines)


def summarize(events, peaks: tuple[float, float] | None = None, warmup: int = 0) -> Summary:
    """Per name, the time per step of the spans that are not containers, sorted slowest
    first. Steps are the "step" spans; `warmup`: that many first steps of each device
    (and everything before their end) are left out. `peaks`: (bytes per second, flops
    per second) of the host, for the roofline column: the time the larger of the two
    bounds allows, divided by the time measured (1.0: at the roofline)."""
    steps: dict[int, list[Event]] = {}
    for e in events:
        if e.cat == "step":
            steps.setdefault(e.pid, []).append(e)
    cutoff = {}
    for pid, ss in steps.items():
        ss.sort(key=lambda e: e.start)
        skip = min(warmup, len(ss) - 1)
        cutoff[pid] = ss[skip - 1].end if skip > 0 else None
        steps[pid] = ss[skip:]
    n_steps = max((len(ss) for ss in steps.values()), default=0)
    total_steps = sum(len(ss) for ss in steps.values())
    step_time = sum(e.seconds for ss in steps.values() for e in ss)
    groups: dict[str, list] = {}
    for e in events:
        if e.cat in CONTAINERS or e.pid == HOST_PID:
            continue
        if cutoff.get(e.pid) is not None and e.start < cutoff[e.pid]:
            continue
        args = e.args or {}
        g = groups.setdefault(e.name, [args, 0, 0.0, 0.0, 0.0, e.cat])
        g[1] += 1
        g[2] += e.seconds
        g[3] += args.get("bytes_read", 0) + args.get("bytes_written", 0)
        g[4] += args.get("flops", 0)     # transcendentals apart, as XLA counts them
    per = max(total_steps, 1)
    rows = []
    for name, (args, count, seconds, nbytes, flops, cat) in groups.items():
        roofline, bound = None, ""
        # Collectives wait for their peers, host ops run numpy: no roofline of theirs.
        if peaks is not None and seconds > 0 and cat in ROOFLINE_CATEGORIES \
                and (nbytes or flops):
            memory, compute = nbytes / peaks[0], flops / peaks[1]
            roofline = max(memory, compute) / seconds
            bound = "compute" if compute > memory else "memory"
        rows.append(Row(name, str(args.get("op", "")), str(args.get("strategy", "")),
                        count / per, seconds / per, seconds / step_time if step_time else 0.0,
                        nbytes / per, flops / per, roofline, bound))
    rows.sort(key=lambda r: -r.seconds)
    return Summary(rows, n_steps, step_time / per, len(steps))
