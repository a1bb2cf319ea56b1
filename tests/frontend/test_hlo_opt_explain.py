"""`hlo-opt FILE --explain`: every fusion decision of the passes, then every kernel's
strategy with the reasons the rows before it declined."""
import subprocess
import sys
from pathlib import Path

from xlapy.frontend.hlo_opt import main
from tests.corpus_util import CORPUS

SOFTMAX = str(CORPUS / "softmax_f32.hlo")
ROOT_DIR = Path(__file__).resolve().parents[2]

COLUMN_SOFTMAX = """HloModule column_softmax
add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT plus = f32[] add(lhs, rhs)
}
fused {
  p = f32[64,32] parameter(0)
  e = f32[64,32] exponential(p)
  zero = f32[] constant(0)
  sum = f32[32] reduce(e, zero), dimensions={0}, to_apply=add
  sums = f32[64,32] broadcast(sum), dimensions={1}
  ROOT d = f32[64,32] divide(e, sums)
}
ENTRY main {
  x = f32[64,32] parameter(0)
  ROOT f = f32[64,32] fusion(x), kind=kLoop, calls=fused
}
"""

KERNELS = """HloModule kernels
add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT plus = f32[] add(lhs, rhs)
}
ENTRY main {
  x = f32[512,256] parameter(0)
  w = f32[256,128] parameter(1)
  t = f32[256,512] transpose(x), dimensions={1,0}
  d = f32[512,128] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  c = f32[256] reduce(x, zero), dimensions={0}, to_apply=add
  ROOT r = (f32[256,512], f32[512,128], f32[256]) tuple(t, d, c)
}
"""


def explain(argv, capsys) -> list[str]:
    code = main(argv + ["--explain"])
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    return out.splitlines()


def kernel_lines(lines: list[str]) -> list[str]:
    return lines[next(i for i, line in enumerate(lines) if line.startswith("== kernel")) + 1:]


def test_softmax_explained(capsys):
    lines = explain([SOFTMAX], capsys)
    assert lines[0] == "== fusion decisions, per pass =="
    assert "row-fusion: div.7: fused 9 instructions into row_fusion" in lines
    kernels = kernel_lines(lines)
    assert kernels[0] == "k1_row_fusion: row_normalize"
    assert "  gemm declined: not a dot" in kernels
    assert "  block_transpose declined: not a transpose" in kernels


def test_a_column_softmax_says_why_it_is_no_row_normalization(capsys, tmp_path):
    # In f32 it is a column normalization (issue 19); in f16 both normalizations
    # decline, each with its reason.
    path = tmp_path / "column_softmax.hlo"
    path.write_text(COLUMN_SOFTMAX)
    kernels = kernel_lines(explain([str(path), "--pipeline=O0"], capsys))
    assert kernels[0] == "k1_f: column_normalize"
    path.write_text(COLUMN_SOFTMAX.replace("f32", "f16"))
    kernels = kernel_lines(explain([str(path), "--pipeline=O0"], capsys))
    assert kernels[0] == "k1_f: loop_nest"
    assert any(line.startswith("  column_normalize declined: ") and
               line.endswith(" reduces f16 (f32 and f64 only)") for line in kernels), kernels
    assert "  row_normalize declined: f16 output (f32 and f64 only)" in kernels


def test_transpose_dot_and_column_reduce(capsys, tmp_path):
    path = tmp_path / "kernels.hlo"
    path.write_text(KERNELS)
    kernels = kernel_lines(explain([str(path)], capsys))
    chosen = {line.split(": ")[1] for line in kernels if not line.startswith(" ")}
    assert {"block_transpose", "gemm", "column_reduce"} <= chosen, kernels
    assert "  row_shuffle declined: the minor dimension moves" in kernels


def test_without_passes_only_kernels(capsys):
    lines = explain([SOFTMAX, "--pipeline=O0"], capsys)
    assert lines[1] == "(no fusion pass ran)"
    assert len([line for line in kernel_lines(lines) if not line.startswith(" ")]) > 1


def test_explain_does_not_combine_with_run_or_emit(capsys):
    for extra in (["--run"], ["--emit=llvm"]):
        code = main([SOFTMAX, "--explain", *extra])
        _, err = capsys.readouterr()
        assert code == 1
        assert err.startswith("hlo-opt: error: --explain prints the decisions") and \
            err.count("\n") == 1


def test_explain_as_a_command():
    result = subprocess.run([sys.executable, "-m", "xlapy.frontend.hlo_opt", SOFTMAX, "--explain"],
                            capture_output=True, text=True, cwd=ROOT_DIR, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "k1_row_fusion: row_normalize" in result.stdout.splitlines()
    assert "  gemm declined: not a dot" in result.stdout.splitlines()
