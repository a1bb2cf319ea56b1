"""hlo-opt's answer to user problems: one clear line on stderr, exit status 1, never
"internal error ... please report it" (issue 14, item 7)."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import hlo_opt
from xlapy.frontend.hlo_opt import main

SMALL = """HloModule s
ENTRY e {
  p = f32[4] parameter(0)
  q = s32[2,3] parameter(1)
  n = f32[4] negate(p)
  ROOT t = (f32[4], s32[2,3]) tuple(n, q)
}
"""

ELIDED = """HloModule el
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] constant({...})
  ROOT a = f32[4] add(p, c)
}
"""

ELIDED_IN_A_CALLEE = """HloModule el
body {
  x = f32[4] parameter(0)
  big = f32[4] constant({...})
  ROOT m = f32[4] multiply(x, big)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] call(p), to_apply=body
}
"""

HUGE_PARAMETER = """HloModule big
ENTRY e {
  p = f32[1000000,1000000] parameter(0)
  ROOT a = f32[1000000,1000000] negate(p)
}
"""

HUGE_OUTPUT = """HloModule bigout
ENTRY e {
  p = f32[] parameter(0)
  ROOT a = f32[1000000,1000000] broadcast(p), dimensions={}
}
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def run_error(argv, capsys) -> str:
    """Runs hlo-opt, expects failure, returns the one stderr line."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("hlo-opt: error: ")
    assert "internal error" not in line and "please report" not in line, line
    assert "Traceback" not in err
    return line


@pytest.mark.parametrize("text", [ELIDED, ELIDED_IN_A_CALLEE])
@pytest.mark.parametrize("extra", [["--run"], ["--run", "--pipeline=O0"], ["--emit=llvm"]])
def test_elided_constant(text, extra, tmp_path, capsys):
    line = run_error([_write(tmp_path, "m.hlo", text)] + extra, capsys)
    assert "constant %" in line and "elided" in line and "{...}" in line


def test_elided_constant_still_prints(tmp_path, capsys):
    """Only code needs the values: printing and the passes work without them."""
    assert main([_write(tmp_path, "m.hlo", ELIDED)]) == 0
    assert "constant({...})" in capsys.readouterr().out


def test_parameter_larger_than_memory(tmp_path, capsys):
    line = run_error([_write(tmp_path, "m.hlo", HUGE_PARAMETER), "--run"], capsys)
    assert "parameter 0 (%p: f32[1000000,1000000]) needs 3.6 TiB" in line
    assert "memory" in line


def test_parameters_larger_than_memory_together(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(hlo_opt, "_memory_bytes", lambda: 39)
    line = run_error([_write(tmp_path, "m.hlo", SMALL), "--run"], capsys)
    assert "parameters need 40 B together" in line


def test_output_larger_than_memory(tmp_path, capsys):
    line = run_error([_write(tmp_path, "m.hlo", HUGE_OUTPUT), "--run"], capsys)
    assert "out of memory" in line


def _inputs(tmp_path, **arrays):
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    return str(path)


GOOD = dict(arg0=np.zeros(4, np.float32), arg1=np.zeros((2, 3), np.int32))


@pytest.mark.parametrize("arrays,words", [
    (dict(GOOD, arg0=np.zeros(3, np.float32)), ["arg0 is float32[3]", "parameter 0 (%p) is f32[4]"]),
    (dict(GOOD, arg1=np.zeros((3, 2), np.int32)), ["arg1 is int32[3, 2]", "s32[2,3]"]),
    (dict(GOOD, arg0=np.zeros(4, np.float64)), ["arg0 is float64[4]", "numpy float32"]),
    (dict(GOOD, arg1=np.zeros((2, 3), np.int64)), ["arg1 is int64[2, 3]", "numpy int32"]),
    (dict(arg0=GOOD["arg0"]), ["missing arg1", "2 parameters", "it has arg0"]),
    (dict(x=GOOD["arg0"]), ["missing arg0, arg1", "it has x"]),
])
def test_inputs_that_do_not_fit(arrays, words, tmp_path, capsys):
    line = run_error([_write(tmp_path, "m.hlo", SMALL), "--run", "--inputs",
                      _inputs(tmp_path, **arrays)], capsys)
    for w in words:
        assert w in line, line


def test_inputs_that_fit_run(tmp_path, capsys):
    assert main([_write(tmp_path, "m.hlo", SMALL), "--run", "--inputs",
                 _inputs(tmp_path, **GOOD)]) == 0


def test_inputs_not_an_archive(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_text("hello")
    line = run_error([_write(tmp_path, "m.hlo", SMALL), "--run", "--inputs", str(bad)], capsys)
    assert "not a .npz archive" in line
    single = tmp_path / "one.npy"
    np.save(single, np.zeros(4, np.float32))
    line = run_error([_write(tmp_path, "m.hlo", SMALL), "--run", "--inputs", str(single)], capsys)
    assert "single array" in line and "numpy.savez" in line


@pytest.mark.parametrize("argv,words", [
    (["--passes=dce,no-such-pass"], ["unknown pass 'no-such-pass'"]),
    (["--pipeline=O7"], ["unknown pipeline 'O7'"]),
    (["--emit=pdf"], ["--emit"]),
    (["--repeat", "0", "--run"], ["--repeat"]),
    (["--run", "--inputs", "/no/such/in.npz"], ["/no/such/in.npz"]),
    (["-o", "/no/such/dir/out.hlo"], ["/no/such/dir/out.hlo"]),
])
def test_bad_options(argv, words, tmp_path, capsys):
    line = run_error([_write(tmp_path, "m.hlo", SMALL)] + argv, capsys)
    for w in words:
        assert w in line


def test_bad_files(tmp_path, capsys):
    assert "No such file" in run_error([str(tmp_path / "missing.hlo")], capsys)
    assert "directory" in run_error([str(tmp_path)], capsys)
    binary = tmp_path / "bin.hlo"
    binary.write_bytes(b"HloModule m\n\xff\xfe garbage")
    line = run_error([str(binary)], capsys)
    assert "line 2, column 1" in line and "UTF-8" in line
    empty = tmp_path / "empty.hlo"
    empty.write_text("")
    assert "empty input" in run_error([str(empty)], capsys)


def test_unsupported_op_is_not_an_internal_error(tmp_path, capsys):
    text = """HloModule r
ENTRY e {
  k = u64[2] parameter(0)
  ROOT r = (u64[2], u32[4]) rng-bit-generator(k), algorithm=rng_default
}
"""
    path = _write(tmp_path, "m.hlo", text)
    if main([path, "--run"]) == 0:
        pytest.skip("the backend runs rng-bit-generator now")
    capsys.readouterr()
    assert "not supported" in run_error([path, "--run"], capsys)
