"""Parser fuzzing: broken HLO text gives a clean error, never a crash, traceback or hang.

From the library, `parse_module` + `verify` of a mutated corpus file (see
mutations.py) either succeed (some mutations are harmless) or raise
`ParseError` or `VerifyError` — nothing else. From `hlo-opt`, in process
(`frontend.hlo_opt.main(argv)`) and in a couple of real subprocesses, the same
inputs give exit status 0 or a non-zero status with exactly one line on
stderr, `hlo-opt: error: ...`.

Every example runs under an alarm (`WATCHDOG_SECONDS`): a parser that loops
or backtracks forever fails the test instead of hanging the suite.
"""
from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from xlapy import hlo
from xlapy.frontend import hlo_opt
from tests.robustness.mutations import mutated_corpus_texts, small_corpus_texts

WATCHDOG_SECONDS = 20
REPO = Path(__file__).resolve().parents[2]
TEXTS = small_corpus_texts()
# The pipeline on a mutated file costs more than a parse: smaller files for the CLI.
CLI_TEXTS = small_corpus_texts(max_chars=2500)


@contextlib.contextmanager
def watchdog(seconds: int = WATCHDOG_SECONDS):
    """Raises TimeoutError in the main thread if the block runs longer than `seconds`."""
    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a hang")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def parse_and_verify(text: str) -> None:
    with watchdog():
        try:
            module = hlo.parse_module(text)
            hlo.verify(module)
        except (hlo.ParseError, hlo.VerifyError) as e:
            assert str(e).strip(), "an error must say what is wrong"


# --- the library ----------------------------------------------------------------------------

@settings(max_examples=max(20, settings().max_examples * 5))
@given(mutated_corpus_texts(TEXTS))
def test_mutated_corpus_gives_parse_or_verify_errors(text):
    parse_and_verify(text)


@pytest.mark.parametrize("text", [
    "", " ", "\n\n", "HloModule", "HloModule m", "HloModule m\nENTRY e {\n}",
    "ENTRY e {\n  ROOT p = f32[] parameter(0)\n}",
    "HloModule m\nENTRY e {\n  ROOT p = f32[" + "9" * 40 + "] parameter(0)\n}",
    "HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({1, 2})\n}",
    "HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, 2, 3})\n}",
    "HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, nanx})\n}",
    "HloModule m\nENTRY e {\n  ROOT c = s8[] constant(1000)\n}",
    "HloModule m\nENTRY e {\n  ROOT c = f32[] constant(" + "(" * 5000 + ")\n}",
    "HloModule m\nENTRY e {\n  ROOT c = " + "(" * 5000 + "f32[]" + ")" * 5000 + " parameter(0)\n}",
    "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, q)\n}",
    "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT p = f32[2] negate(p)\n}",
    "HloModule m\nENTRY e {\n  ROOT a = f32[2] add(a, a)\n}",
    "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] reduce(p, p), "
    "dimensions={0}, to_apply=nowhere\n}",
    "HloModule m\n\xff\xfe ENTRY".encode("latin-1").decode("utf-8", errors="surrogateescape"),
    "HloModule m\nENTRY e {\n  ROOT p = f32[2]{5,9} parameter(0)\n}",
])
def test_hand_written_bad_inputs(text):
    parse_and_verify(text)


# --- hlo-opt in process ---------------------------------------------------------------------

def run_cli(argv: list[str], stdin: str | None = None) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    try:
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        with watchdog(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = hlo_opt.main(argv)
    finally:
        sys.stdin = old_stdin
    return status, err.getvalue()


def assert_clean_failure(status: int, stderr: str) -> None:
    if status == 0:
        return
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("hlo-opt: error: "), stderr


@settings(max_examples=max(10, settings().max_examples))
@given(text=mutated_corpus_texts(CLI_TEXTS), raw=st.booleans())
def test_hlo_opt_on_mutated_files(tmp_path_factory, text, raw):
    path = tmp_path_factory.mktemp("fuzz") / "bad.hlo"
    # Write surrogate escapes back as the invalid bytes they stand for.
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    status, stderr = run_cli([str(path)] + (["--passes=dce,cse"] if raw else []))
    assert_clean_failure(status, stderr)


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage", b"HloModule m\nENTRY e {"])
def test_hlo_opt_in_process_bad_files(tmp_path, content):
    path = tmp_path / "bad.hlo"
    path.write_bytes(content)
    status, stderr = run_cli([str(path)])
    assert status != 0
    assert_clean_failure(status, stderr)


def test_hlo_opt_missing_file_and_stdin():
    status, stderr = run_cli(["/nonexistent/x.hlo"])
    assert status != 0 and "x.hlo" in stderr
    assert_clean_failure(status, stderr)
    status, stderr = run_cli(["-"], stdin="HloModule m\nENTRY e {\n  ROOT x = f32[] frob()\n}")
    assert status != 0 and "frob" in stderr
    assert_clean_failure(status, stderr)


# --- hlo-opt as a real process ----------------------------------------------------------------

@pytest.mark.parametrize("content", [b"\xff\xfe\xfd not utf-8", b"HloModule m\nENTRY e {\n  "
                                     b"ROOT p = f32[" + b"9" * 30 + b"] parameter(0)\n}\n"])
def test_hlo_opt_subprocess(tmp_path, content):
    path = tmp_path / "bad.hlo"
    path.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "xlapy.frontend.hlo_opt", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert_clean_failure(proc.returncode, proc.stderr)
    assert proc.stdout == ""


@pytest.mark.parametrize("root", [
    "ROOT n = f32[1000000000000] negate(p)",                       # a 4 TB random input
    "ROOT n = f32[1000000000000] broadcast(s), dimensions={}",     # a 4 TB result
])
def test_hlo_opt_run_too_large_to_allocate(tmp_path, root):
    dims = "[1000000000000]" if "negate" in root else "[]"
    path = tmp_path / "huge.hlo"
    name = "p" if "negate" in root else "s"
    path.write_text(f"HloModule m\nENTRY e {{\n  {name} = f32{dims} parameter(0)\n  {root}\n}}\n")
    status, stderr = run_cli([str(path), "--run"])
    assert status != 0 and "allocate" in stderr
    assert_clean_failure(status, stderr)


@pytest.mark.parametrize("content", [b"", b"\xff\xfe HloModule m"])
def test_hlo_opt_subprocess_stdin(content):
    proc = subprocess.run([sys.executable, "-m", "xlapy.frontend.hlo_opt", "-"], cwd=REPO,
                          input=content, capture_output=True, timeout=120)
    stderr = proc.stderr.decode("utf-8", errors="replace")
    assert proc.returncode != 0
    assert_clean_failure(proc.returncode, stderr)
    assert proc.stdout == b""
