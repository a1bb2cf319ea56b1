"""The docs stay true: their runnable snippets run, their links resolve.

Convention (see docs/index.md): a fenced ```python block is runnable when the
line just before its opening fence is the HTML comment `<!-- run -->` (invisible
when the Markdown is rendered). Other python blocks are illustrations only.

The runnable blocks of one page run in order in ONE fresh Python process, in a
shared namespace (a page reads like a notebook: later blocks use earlier names),
with the repository root as working directory and on `sys.path`. A fresh process
per page keeps pages independent: a page may register a demo opcode or op kernel
without leaking it into the test session. Blocks make their point with `assert`;
a failure reports the page and the line of the failing block.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
RUN_MARK = "<!-- run -->"

# Runs a list of (label, source) blocks in one namespace; prints the failing label.
_DRIVER = r"""
import json, sys, traceback
blocks = json.load(sys.stdin)
namespace = {"__name__": "__docs__"}
for label, source in blocks:
    try:
        exec(compile(source, label, "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED in {label}", file=sys.stderr)
        sys.exit(1)
"""


def runnable_blocks(path: Path) -> list[tuple[str, str]]:
    """The (label, source) of every block marked runnable, in page order."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == RUN_MARK:
            fence = i + 1
            if fence >= len(lines) or lines[fence].strip() != "```python":
                raise AssertionError(f"{path.name}:{i + 1}: {RUN_MARK} must be followed "
                                     f"by a ```python fence")
            end = fence + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if end == len(lines):
                raise AssertionError(f"{path.name}:{fence + 1}: unclosed ```python block")
            # Pad with blank lines so tracebacks show the line number in the page.
            source = "\n" * (fence + 1) + "\n".join(lines[fence + 1:end]) + "\n"
            blocks.append((f"docs/{path.name}", source))
            i = end
        i += 1
    return blocks


def run_page(path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", _DRIVER], input=json.dumps(runnable_blocks(path)),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_docs_exist_and_have_runnable_snippets():
    names = {p.name for p in PAGES}
    expected = {"index.md", "walkthrough.md", "hlo.md", "passes.md", "backend.md",
                "runtime.md", "adding_an_op.md"}
    assert expected <= names, f"missing pages: {sorted(expected - names)}"
    assert sum(len(runnable_blocks(p)) for p in PAGES) >= 10


@pytest.mark.parametrize("path", [p for p in PAGES if runnable_blocks(p)], ids=lambda p: p.name)
def test_runnable_snippets(path: Path):
    result = run_page(path)
    assert result.returncode == 0, f"{path.name}: a snippet failed\n{result.stderr[-4000:]}"


LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(path: Path):
    """Every relative link of a page names a file or folder of the repository."""
    broken = []
    for target, _ in LINK.findall(path.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (path.parent / target).exists():
            broken.append(target)
    assert not broken, f"{path.name}: broken links {broken}"


def test_runnable_marker_is_checked(tmp_path: Path):
    """A marker without a python fence is an error naming the line, not a silent skip."""
    page = tmp_path / "bad.md"
    page.write_text("text\n<!-- run -->\n```sh\nls\n```\n")
    with pytest.raises(AssertionError, match="bad.md:2"):
        runnable_blocks(page)
    page.write_text("<!-- run -->\n```python\nx = 1\n```\n\n```python\nnot run\n```\n")
    assert [src.strip() for _, src in runnable_blocks(page)] == ["x = 1"]
