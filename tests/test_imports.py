"""One import root: every module of the project is `xlapy.<package>...`, never a bare
`hlo` or `runtime` (which would load a second copy of the opcode table, or collide
with PyPI's packages of those names); the layers import downward only."""
from __future__ import annotations

import ast
import os
import pkgutil
import subprocess
import sys

import xlapy

BARE = ("hlo", "passes", "backend_cpu", "frontend", "runtime")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What each layer may import of ours (DESIGN.md, "Layers and the direction of imports").
ALLOWED = {"hlo": set(), "runtime": set(), "passes": {"hlo"},
           "backend_cpu": {"hlo", "passes", "runtime"},
           "frontend": {"hlo", "passes", "backend_cpu", "runtime"}}


def _bare_modules() -> list[str]:
    return sorted(name for name in sys.modules if name.split(".")[0] in BARE)


def test_nothing_in_this_session_was_imported_under_a_bare_name():
    """By now every test module has been collected, with everything it imports."""
    assert _bare_modules() == []


def test_every_module_imports_under_the_root_in_a_fresh_process():
    script = (
        "import importlib, pkgutil, sys, xlapy\n"
        "names = []\n"
        "for package in %r:\n"
        "    root = importlib.import_module('xlapy.' + package)\n"
        "    names += [m.name for m in pkgutil.walk_packages(root.__path__, root.__name__ + '.')]\n"
        "for name in names:\n"
        "    __import__(name)\n"
        "bare = sorted(n for n in sys.modules if n.split('.')[0] in %r)\n"
        "print(len(names), bare)\n" % (BARE, BARE))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=os.path.dirname(ROOT))
    assert done.returncode == 0, done.stderr
    count, bare = done.stdout.split(" ", 1)
    assert int(count) > 100 and bare.strip() == "[]"


def _imports_of(path: str, package: str) -> set[str]:
    """Our top-level packages a module imports (relative imports resolved)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    here = os.path.relpath(os.path.dirname(path), ROOT).split(os.sep)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            up = here[:max(len(here) - (node.level - 1), 0)]
            parts = up + (node.module.split(".") if node.module else [])
            if not parts:      # `from .. import hlo`: the names are the packages
                found.update(a.name for a in node.names if a.name in BARE)
            else:
                found.add(parts[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xlapy"):
            parts = node.module.split(".")
            found.update([parts[1]] if len(parts) > 1 else
                         [a.name for a in node.names if a.name in BARE])
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for name in names:
                assert name.split(".")[0] not in BARE, f"{path}: bare import of {name}"
    return found - {package}


def test_layers_import_downward_only():
    for package, allowed in ALLOWED.items():
        for dirpath, _, filenames in os.walk(os.path.join(ROOT, package)):
            for name in filenames:
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    wrong = _imports_of(path, package) - allowed
                    assert not wrong, f"{os.path.relpath(path, ROOT)} imports {sorted(wrong)}"


def test_the_root_gives_the_user_api():
    for name in ("jit_compile", "ops", "grad", "value_and_grad", "cond", "while_loop",
                 "fori_loop", "hlo", "passes", "backend_cpu", "frontend", "runtime"):
        assert hasattr(xlapy, name), name
    assert xlapy.hlo.__name__ == "xlapy.hlo"
