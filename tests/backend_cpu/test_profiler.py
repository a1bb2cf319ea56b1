"""The profiler's trace (runtime/profiler.py, the spans of Program.execute and the
compiler): its structure, never its timings. Every thunk is one span per run, sub-
programs nest in their while/call spans, compile phases are there, devices are pids,
the JSON loads as Chrome trace events, and nothing is recorded when no trace runs."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from xlapy import backend_cpu, hlo, runtime
from xlapy.backend_cpu import profiling
from xlapy.runtime import profiler

FRESH = backend_cpu.CompileOptions(cache=False, disk_cache=False)
PIPELINE = backend_cpu.CompileOptions(pipeline="default", cache=False, disk_cache=False)

# An exponential, then a while loop of three iterations whose body is a dot and a tanh.
LOOP = """HloModule loop
body {
  p = (s32[], f32[64,64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[64,64] get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  d = f32[64,64] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[64,64] tanh(d)
  ROOT r = (s32[], f32[64,64]) tuple(next, t)
}
cond {
  p = (s32[], f32[64,64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[64,64] parameter(0)
  y = f32[64,64] exponential(x)
  zero = s32[] constant(0)
  init = (s32[], f32[64,64]) tuple(zero, y)
  w = (s32[], f32[64,64]) while(init), condition=cond, body=body
  ROOT o = f32[64,64] get-tuple-element(w), index=1
}"""

ALL_REDUCE = """HloModule ar, replica_count=2
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[8,16] parameter(0)
  n = f32[8,16] negate(p)
  r = f32[8,16] all-reduce(n), replica_groups={}, to_apply=sum
  ROOT m = f32[8,16] multiply(r, r)
}"""


@pytest.fixture(autouse=True)
def no_trace_left():
    """A failing test must not leave a trace running for the next one."""
    yield
    if profiler.active is not None:
        profiler.stop()


def _traced(executable, args, runs=1):
    rec = profiler.start()
    try:
        results = [executable.run(*args) for _ in range(runs)]
    finally:
        profiler.stop()
    return rec, results


def _x():
    return (np.random.default_rng(0).standard_normal((64, 64)) * 0.05).astype(np.float32)


def _contains(outer, inner) -> bool:
    return outer.pid == inner.pid and outer.tid == inner.tid \
        and outer.start <= inner.start and inner.end <= outer.end


def test_loop_trace_structure_and_numbers():
    exe = backend_cpu.compile(hlo.parse_module(LOOP), FRESH)
    x = _x()
    rec, results = _traced(exe, [x], runs=2)
    expected = hlo.evaluate(hlo.parse_module(LOOP), [x])
    expected = np.asarray(expected[0] if isinstance(expected, (list, tuple)) else expected)
    for r in results:                                   # tracing changes no number
        np.testing.assert_allclose(r[0], expected, rtol=2e-5, atol=1e-6)
    events = rec.events
    steps = [e for e in events if e.cat == "step"]
    assert [e.name for e in steps] == ["e", "e"] and {e.pid for e in steps} == {1}
    by_name = {}
    for e in events:
        if e.cat not in ("partition", "step", "program"):
            by_name.setdefault(e.name, []).append(e)
    # Entry thunks once per run; the body's kernels once per iteration (3), the
    # condition's once per test (4).
    assert len(by_name["y"]) == 2 and len(by_name["w"]) == 2
    assert len(by_name["d"]) == 6 and len(by_name["t"]) == 6
    programs = [e for e in events if e.cat == "program"]
    assert sorted({e.name for e in programs}) == ["body", "cond"]
    assert sum(e.name == "body" for e in programs) == 6
    assert sum(e.name == "cond" for e in programs) == 8
    whiles = by_name["w"]
    for e in programs + by_name["d"] + by_name["t"]:
        # A sub-program's spans lie inside exactly one while span, and inside a step.
        assert sum(_contains(w, e) for w in whiles) == 1
        assert any(_contains(s, e) for s in steps)
    for e in by_name["d"] + by_name["t"]:
        assert any(_contains(p, e) for p in programs if p.name == "body")
    # Spans on one thread nest or are disjoint (consistent for a trace viewer).
    ordered = sorted((e for e in events if e.cat != "partition"), key=lambda e: (e.start, -e.end))
    stack = []
    for e in ordered:
        while stack and not (stack[-1].tid == e.tid and _contains(stack[-1], e)):
            stack.pop()
        assert not stack or _contains(stack[-1], e)
        stack.append(e)


def test_kernel_arguments_recorded_at_compile_time():
    exe = backend_cpu.compile(hlo.parse_module(LOOP), FRESH)
    rec, _ = _traced(exe, [_x()])
    args = {e.name: e.args for e in rec.events if e.cat == "kernel"}
    dot = args["d"]
    assert dot["op"] == "dot" and dot["strategy"] == "gemm"
    assert dot["flops"] == 2 * 64 * 64 * 64 and dot["transcendentals"] == 0
    assert dot["bytes_read"] == 2 * 64 * 64 * 4 and dot["bytes_written"] == 64 * 64 * 4
    assert dot["kernel"].startswith("k") and dot["partitions"] >= 1
    assert args["t"]["transcendentals"] == 64 * 64 and args["t"]["op"] == "tanh"
    while_args = [e.args for e in rec.events if e.cat == "while"][0]
    assert while_args["op"] == "while" and "flops" not in while_args


def test_fusion_kind_and_strategy_after_the_pipeline():
    text = """HloModule f
    ENTRY e {
      x = f32[32,128] parameter(0)
      m = f32[32,128] multiply(x, x)
      ROOT a = f32[32,128] add(m, x)
    }"""
    exe = backend_cpu.compile(hlo.parse_module(text), PIPELINE)
    rec, _ = _traced(exe, [np.ones((32, 128), np.float32)])
    (kernel,) = [e for e in rec.events if e.cat == "kernel"]
    assert kernel.args["op"] == "fusion kLoop" and kernel.args["strategy"]
    assert kernel.args["flops"] == 2 * 32 * 128


def test_compile_phases_are_spans_of_the_host():
    rec = profiler.start()
    try:
        backend_cpu.compile(hlo.parse_module(LOOP), PIPELINE)
    finally:
        profiler.stop()
    host = [e for e in rec.events if e.pid == profiler.HOST_PID]
    names = {e.name for e in host}
    for phase in ("compile loop", "HLO passes", "emit LLVM IR", "LLVM optimize",
                  "LLVM codegen", "GEMM library", "link"):
        assert phase in names, phase
    assert all(e.cat == "compile" for e in host)
    (whole,) = [e for e in host if e.name == "compile loop"]
    (passes,) = [e for e in host if e.name == "HLO passes"]
    for e in host:
        # (a kernel's LLVM phases may run on a compile thread: within the compile's time)
        assert _contains(whole, e) or e.tid != whole.tid and whole.start <= e.start \
            and e.end <= whole.end, e
    pass_spans = [e for e in host if e.args and "changed" in e.args]
    assert {"dce", "cse", "instruction-fusion"} <= {e.name for e in pass_spans}
    assert all(_contains(passes, e) for e in pass_spans)


def test_devices_are_pids_and_collectives_spans():
    exe = backend_cpu.compile(hlo.parse_module(ALL_REDUCE), FRESH)
    args = [[np.full((8, 16), d + 1, np.float32)] for d in range(2)]
    rec = profiler.start()
    try:
        out = exe.run_devices(args)
    finally:
        profiler.stop()
    np.testing.assert_array_equal(out[0][0], np.full((8, 16), 9, np.float32))
    steps = [e for e in rec.events if e.cat == "step"]
    assert sorted(e.pid for e in steps) == [1, 2]
    collectives = [e for e in rec.events if e.cat == "collective"]
    assert {e.pid for e in collectives} == {1, 2}
    # (a start/done pair with nothing in between runs as the plain all-reduce)
    assert {e.name for e in collectives} <= {"r", "r.start", "r.done"}
    assert len(collectives) in (2, 4)
    for e in collectives:                 # described at compile time, whatever ran
        assert e.args["op"] == "all-reduce" and e.args["hlo"] == "r"
    rows = {r.name: r for r in profiler.summarize(rec.events, (1e10, 1e11)).rows}
    assert rows["n"].roofline is not None
    assert all(rows[name].roofline is None for name in rows if name.startswith("r"))
    for pid in (1, 2):
        assert sorted(e.name for e in rec.events if e.pid == pid and e.cat == "kernel") \
            == ["m", "n"]
    data = rec.chrome_events()
    names = {(e["pid"], e["args"]["name"]) for e in data if e["name"] == "process_name"}
    assert {(1, "device 0"), (2, "device 1")} <= names


def test_streams_record_each_thunk_once():
    text = """HloModule independent
    ENTRY e {
      x = f32[512,512] parameter(0)
      y = f32[512,512] parameter(1)
      a = f32[512,512] exponential(x)
      b = f32[512,512] exponential(y)
      ROOT s = f32[512,512] add(a, b)
    }"""
    previous = runtime.get_options()
    runtime.configure(inter_op_threads=2, intra_op_threads=1)
    try:
        exe = backend_cpu.compile(hlo.parse_module(text), FRESH)
        assert exe._program.stream_plan is not None
        x = np.zeros((512, 512), np.float32)
        rec, results = _traced(exe, [x, x], runs=2)
    finally:
        runtime.configure(inter_op_threads=previous.inter_op_threads,
                          intra_op_threads=previous.intra_op_threads)
    np.testing.assert_array_equal(results[1][0], np.full((512, 512), 2, np.float32))
    kernels = sorted(e.name for e in rec.events if e.cat == "kernel")
    assert kernels == ["a", "a", "b", "b", "s", "s"]
    steps = [e for e in rec.events if e.cat == "step"]
    assert len(steps) == 2
    for e in rec.events:
        if e.cat == "kernel":           # on a stream's thread, within its step's time
            assert any(s.start <= e.start and e.end <= s.end for s in steps)


def test_partitions_are_spans_of_the_threads_that_ran_them():
    previous = runtime.get_options()
    runtime.configure(intra_op_threads=2)
    try:
        text = """HloModule big
        ENTRY e {
          x = f32[1024,1024] parameter(0)
          ROOT a = f32[1024,1024] exponential(x)
        }"""
        exe = backend_cpu.compile(hlo.parse_module(text), FRESH)
        rec, _ = _traced(exe, [np.zeros((1024, 1024), np.float32)])
    finally:
        runtime.configure(intra_op_threads=previous.intra_op_threads)
    (kernel,) = [e for e in rec.events if e.cat == "kernel"]
    parts = [e for e in rec.events if e.cat == "partition"]
    assert len(parts) == kernel.args["partitions"] == 2
    assert all(e.name == "a" for e in parts)
    assert sorted(tuple(e.args["slice"]) for e in parts) == [(0, 512), (512, 1024)]


def test_nothing_recorded_without_a_trace_and_one_trace_at_a_time():
    exe = backend_cpu.compile(hlo.parse_module(LOOP), FRESH)
    rec, _ = _traced(exe, [_x()])
    count = len(rec.events)
    exe.run(_x())
    assert profiler.active is None and len(rec.events) == count
    profiler.start()
    with pytest.raises(RuntimeError, match="already running"):
        profiler.start()
    profiler.stop()
    with pytest.raises(RuntimeError, match="no trace is running"):
        profiler.stop()


def test_an_error_inside_a_traced_run_leaves_the_depth_balanced():
    exe = backend_cpu.compile(hlo.parse_module(LOOP), FRESH)
    rec = profiler.start()
    try:
        with pytest.raises(ValueError):
            exe.run(np.zeros((3, 3), np.float32))
        exe.run(_x())
    finally:
        profiler.stop()
    assert [e.cat for e in rec.events if e.name == "e"] == ["step"]


def test_chrome_json_loads(tmp_path):
    exe = backend_cpu.compile(hlo.parse_module(LOOP), FRESH)
    rec, _ = _traced(exe, [_x()])
    path = rec.write(tmp_path / "t.json")
    data = json.loads((tmp_path / "t.json").read_text())
    events = data["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(rec.events)
    for e in complete:
        assert {"name", "cat", "pid", "tid", "ts", "dur"} <= set(e)
        assert e["dur"] >= 0 and e["ts"] >= 0
    meta = [e for e in events if e["ph"] == "M"]
    threads = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in complete} <= threads
    gz = rec.write(tmp_path / "t.json.gz")
    with gzip.open(gz, "rt") as f:
        assert json.load(f)["traceEvents"] == events
    folder = tmp_path / "traces"
    folder.mkdir()
    written = rec.write(folder)
    assert written.startswith(str(folder)) and written.endswith(".trace.json")
    assert path == str(tmp_path / "t.json")


def test_executables_from_the_disk_cache_keep_their_kernel_records(tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    options = backend_cpu.CompileOptions(pipeline="default", cache=False)
    first = backend_cpu.compile(hlo.parse_module(LOOP), options)
    rec = profiler.start()
    try:
        again = backend_cpu.compile(hlo.parse_module(LOOP), options)
        again.run(_x())
    finally:
        profiler.stop()
    assert again is not first
    assert "disk cache load" in {e.name for e in rec.events} and \
        "LLVM optimize" not in {e.name for e in rec.events}
    dot = [e for e in rec.events if e.cat == "kernel" and e.args.get("op") == "dot"]
    assert dot and dot[0].args["flops"] == 2 * 64 ** 3 and dot[0].args["strategy"] == "gemm"


def test_summary_rows_and_columns():
    exe = backend_cpu.compile(hlo.parse_module(LOOP), FRESH)
    rec, _ = _traced(exe, [_x()], runs=3)
    summary = profiler.summarize(rec.events, (1e10, 1e11), warmup=1)
    assert summary.steps == 2 and summary.devices == 1
    names = sorted(r.name for r in summary.rows)
    leaf = {e.name for e in rec.events if e.cat not in profiler.CONTAINERS and e.pid != 0}
    assert names == sorted(leaf)
    rows = {r.name: r for r in summary.rows}
    assert rows["d"].calls == 3 and rows["y"].calls == 1
    assert rows["d"].flops == 3 * 2 * 64 ** 3
    assert all(r.roofline is not None and r.bound in ("memory", "compute")
               for r in summary.rows)
    assert [r.seconds for r in summary.rows] == sorted((r.seconds for r in summary.rows),
                                                       reverse=True)
    text = summary.table()
    lines = text.splitlines()
    assert lines[0].split() == ["name", "op", "strategy", "calls", "ms/step", "share", "GB/s",
                                "GFLOP/s", "roofline"]
    assert len(lines) == 1 + len(summary.rows) + 1 and lines[-1].startswith("step:")


def test_profile_of_an_executable():
    exe = backend_cpu.compile(hlo.parse_module(LOOP), FRESH)
    result = profiling.profile(exe, [_x()], repeat=2)
    assert result.summary.steps == 2
    assert {r.name for r in result.rows} >= {"d", "t", "y"}
    assert result.roofline.bytes_per_second > 0 and result.roofline.flops_per_second > 0
    assert result.table().splitlines()[0].startswith("host roofline:")
    with pytest.raises(ValueError, match="repeat"):
        profiling.profile(exe, [_x()], repeat=0)
