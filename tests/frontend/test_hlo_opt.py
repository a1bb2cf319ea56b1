"""The hlo-opt command, called through `main(argv)` (fast) and once as a subprocess."""
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo
from xlapy.frontend.hlo_opt import main
from tests.corpus_util import CORPUS

SOFTMAX = str(CORPUS / "softmax_f32.hlo")
ROOT_DIR = Path(__file__).resolve().parents[2]


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_default_pipeline_prints_optimized_hlo(capsys):
    code, out, err = run([SOFTMAX], capsys)
    assert code == 0 and err == ""
    module = hlo.parse_module(out)
    assert module.entry.root.opcode == "fusion"
    assert 'backend_config={"fusion_kind":"row"}' in out


def test_passes_flag_runs_only_those(capsys):
    code, out, _ = run([SOFTMAX, "--passes=algebraic-simplifier,dce"], capsys)
    assert code == 0
    assert "fusion(" not in out and "reduce(" in out


def test_o0_pipeline_keeps_the_module(capsys):
    code, out, _ = run([SOFTMAX, "--pipeline=O0"], capsys)
    assert code == 0
    assert out == hlo.print_module(hlo.parse_module(Path(SOFTMAX).read_text()))


def test_stdin_and_output_file(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.StringIO(Path(SOFTMAX).read_text()))
    target = tmp_path / "out.hlo"
    code, out, _ = run(["-", "-o", str(target)], capsys)
    assert code == 0 and out == ""
    assert "fusion(" in target.read_text()


def test_dump_dir_and_stats(capsys, tmp_path):
    code, _, err = run([SOFTMAX, "--dump-dir", str(tmp_path), "--stats"], capsys)
    assert code == 0
    dumps = sorted(p.name for p in tmp_path.iterdir())
    assert dumps[0] == "000-input.hlo" and dumps[1] == "001-call-inliner.hlo"
    assert any(name.endswith("row-fusion.hlo") for name in dumps)
    kernels = [line.split() for line in err.splitlines() if line.startswith("kernels")]
    assert kernels and int(kernels[0][2]) == 1 and int(kernels[0][1]) > 1
    assert any(line.split()[:2] == ["row-fusion", "yes"] for line in err.splitlines())


def test_emit_dot_draws_fusions_as_clusters(capsys):
    code, out, _ = run([SOFTMAX, "--emit=dot"], capsys)
    assert code == 0
    assert out.startswith('digraph "jit_softmax_f32"') and "subgraph cluster_0" in out
    assert "(row)" in out


def test_list_passes(capsys):
    code, out, _ = run(["--list-passes"], capsys)
    assert code == 0 and "row-fusion" in out.split()


@pytest.mark.parametrize("argv,message", [
    (["missing.hlo"], "missing.hlo: No such file"),
    ([SOFTMAX, "--passes=dc"], "unknown pass 'dc'; did you mean dce?"),
    ([SOFTMAX, "--pipeline=O3"], "unknown pipeline 'O3'"),
    ([SOFTMAX, "--bogus"], "unrecognized arguments: --bogus"),
    ([], "no input file"),
])
def test_errors_are_one_line(argv, message, capsys):
    code, out, err = run(argv, capsys)
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_parse_and_verify_errors_name_the_problem(capsys, tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negat(p)\n}\n")
    code, _, err = run([str(bad)], capsys)
    assert code == 1 and "line 4, column" in err and "negate" in err and err.count("\n") == 1
    bad.write_text("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[5] negate(p)\n}\n")
    code, _, err = run([str(bad)], capsys)
    assert code == 1 and "verify error" in err and err.count("\n") == 1


def test_run_writes_outputs(capsys, tmp_path):
    outputs = tmp_path / "out.npz"
    code, _, err = run([SOFTMAX, "--run", "--inputs", str(CORPUS / "softmax_f32.npz"),
                        "--outputs", str(outputs), "--repeat", "2"], capsys)
    if code != 0 and "not available" in err:
        pytest.skip("CPU backend not available")
    assert code == 0 and "median time" in err
    with np.load(CORPUS / "softmax_f32.npz") as expected, np.load(outputs) as got:
        np.testing.assert_allclose(got["out0"], expected["out0"], rtol=2e-5, atol=1e-6)


def test_console_script_runs_as_a_process():
    result = subprocess.run([sys.executable, "-m", "xlapy.frontend.hlo_opt", "--list-passes"],
                            capture_output=True, text=True, cwd=ROOT_DIR, timeout=60)
    assert result.returncode == 0 and "dce" in result.stdout.split()
    result = subprocess.run([sys.executable, "-m", "xlapy.frontend.hlo_opt", "nope.hlo"],
                            capture_output=True, text=True, cwd=ROOT_DIR, timeout=60)
    assert result.returncode == 1 and result.stderr.startswith("hlo-opt: error:")


def test_emit_llvm_and_asm(capsys, tmp_path):
    small = tmp_path / "small.hlo"
    small.write_text("HloModule small\nENTRY e {\n  p = f32[64] parameter(0)\n"
                     "  a = f32[64] abs(p)\n  ROOT n = f32[64] negate(a)\n}\n")
    code, out, err = run([str(small), "--emit=llvm"], capsys)
    if code != 0 and "not available" in err:
        pytest.skip("CPU backend not available")
    assert code == 0 and "define" in out
    code, out, _ = run([str(small), "--emit=asm"], capsys)
    assert code == 0 and ("ret" in out or ".text" in out)
