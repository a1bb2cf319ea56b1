"""The profiler's user doors: `xlapy.profiler.trace`, `Compiled.profile(*args)` and
`hlo-opt --run --profile / --trace`. Structure only (columns, rows, spans), never
timings."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

import xlapy
from xlapy import ops
from xlapy.frontend.hlo_opt import main
from xlapy.runtime import profiler

COLUMNS = ["name", "op", "strategy", "calls", "ms/step", "share", "GB/s", "GFLOP/s",
           "roofline"]

MODULE = """HloModule two_kernels
ENTRY e {
  x = f32[64,128] parameter(0)
  w = f32[128,32] parameter(1)
  d = f32[64,32] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[64,32] tanh(d)
}"""


@pytest.fixture(autouse=True)
def no_trace_left():
    yield
    if profiler.active is not None:
        profiler.stop()


def _layer(x, w, b):
    return ops.softmax(ops.relu(x @ w + b), axis=-1)


def _args(k: int = 32, n: int = 8):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((16, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))


def _table_rows(text: str) -> tuple[list[str], list[str]]:
    """(the header's columns, the row lines) of a printed table."""
    lines = text.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["name"])
    end = next(i for i, line in enumerate(lines) if line.startswith("step:"))
    return lines[start].split(), lines[start + 1:end]


def test_trace_records_compile_and_steps(tmp_path):
    f = xlapy.jit_compile(_layer)
    args = _args(31, 9)          # shapes of this test alone: no cache holds the module
    path = tmp_path / "layer.json"
    with xlapy.profiler.trace(path) as t:
        with xlapy.profiler.TraceAnnotation("my step", step=1):
            first = f(*args)
        second = f(*args)
    np.testing.assert_array_equal(first, second)
    assert t.path == str(path)
    data = json.loads(path.read_text())
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    names = {e["name"] for e in events}
    assert {"HLO passes", "emit LLVM IR", "LLVM optimize", "LLVM codegen"} <= names
    assert any(e["name"] == "my step" and e["cat"] == "annotation" and e["args"] == {"step": 1}
               for e in events)
    steps = [e for e in events if e["cat"] == "step"]
    assert len(steps) == 2 and {e["pid"] for e in steps} == {1}
    header, rows = _table_rows(t.table())
    assert header == COLUMNS
    kernels = {e["name"] for e in events if e["cat"] == "kernel"}
    assert len(rows) == len(kernels) >= 2
    assert profiler.active is None


def test_compiled_profile_prints_the_table():
    f = xlapy.jit_compile(_layer)
    args = _args()
    compiled = f.lower(*args).compile()
    out = io.StringIO()
    result = compiled.profile(*args, repeat=3, file=out)
    header, rows = _table_rows(out.getvalue())
    assert header == COLUMNS
    assert out.getvalue().startswith("host roofline:")
    assert len(rows) == len(result.rows) == compiled._executable.memory_stats()["num_kernels"]
    assert result.summary.steps == 3
    assert sorted(r.share for r in result.rows) == sorted(r.share for r in result.rows)
    assert [r.seconds for r in result.rows] == sorted((r.seconds for r in result.rows),
                                                      reverse=True)
    assert repr(result).startswith("<Profile: ")
    silent = compiled.profile(*args, repeat=1, file=False)
    assert silent.summary.steps == 1


def test_compiled_profile_inside_a_trace_records_into_it(tmp_path):
    f = xlapy.jit_compile(_layer)
    args = _args()
    compiled = f.lower(*args).compile()
    with xlapy.profiler.trace(tmp_path / "t.json") as t:
        result = compiled.profile(*args, repeat=2, warmup=0, file=False)
    assert result.summary.steps == 2
    assert sum(e.cat == "step" for e in t.events) == 2


def test_compiled_profile_errors():
    f = xlapy.jit_compile(_layer, backend="interpreter")
    args = _args()
    with pytest.raises(NotImplementedError, match="profile"):
        f.lower(*args).compile().profile(*args)
    compiled = xlapy.jit_compile(_layer).lower(*args).compile()
    with pytest.raises(ValueError, match="repeat"):
        compiled.profile(*args, repeat=0, file=False)
    with pytest.raises((TypeError, ValueError)):
        compiled.profile(args[0], file=False)


def test_hlo_opt_profile_and_trace(tmp_path, capsys):
    source = tmp_path / "m.hlo"
    source.write_text(MODULE)
    trace = tmp_path / "m.json"
    code = main([str(source), "--run", "--profile", "--repeat", "3", "--trace", str(trace)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith("profile of 3 runs (the first left out as warm-up)")
    header, rows = _table_rows(captured.out)
    assert header == COLUMNS
    assert sorted(line.split()[0] for line in rows) == ["d", "t"]
    assert "step:" in captured.out and "mean of 2 steps" in captured.out
    data = json.loads(trace.read_text())
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert sum(e["cat"] == "step" for e in events) == 3
    assert "HLO passes" in {e["name"] for e in events}
    assert f"trace: {trace}" in captured.err


def test_hlo_opt_trace_alone_and_devices(tmp_path, capsys):
    source = tmp_path / "m.hlo"
    source.write_text(MODULE)
    trace = tmp_path / "d.json"
    assert main([str(source), "--run", "--devices", "2", "--trace", str(trace)]) == 0
    captured = capsys.readouterr()
    assert "name" not in captured.out          # no table without --profile
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in events if e["cat"] == "step"} == {1, 2}


def test_hlo_opt_profile_needs_run(tmp_path, capsys):
    source = tmp_path / "m.hlo"
    source.write_text(MODULE)
    assert main([str(source), "--profile"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hlo-opt: error: --profile and --trace go with --run"]
