"""One import root: every module of the project is `xlapy.<package>...`, never a bare
`hlo` or `runtime` (which would load a second copy of the opcode table, or collide
with PyPI's packages of those names); the layers import downward only."""
from __future__ import annotations

import ast
import os
import pkgutil
import subprocess
import sys

import pytest

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


def test_the_short_names_are_the_frontend_modules_themselves():
    """`from xlapy.distribute import Mesh` and `import xlapy.ops.math` work, and give the
    frontend's module objects (a second copy would have its own registries)."""
    code = ("import sys, xlapy.ops.math, xlapy.ops.collective\n"
            "from xlapy.distribute import Mesh, MirroredStrategy\n"
            "from xlapy.frontend import distribute, ops\n"
            "assert sys.modules['xlapy.distribute'] is distribute\n"
            "assert xlapy.ops.math is sys.modules['xlapy.frontend.ops.math']\n"
            "assert sys.modules['xlapy.ops.math'] is sys.modules['xlapy.frontend.ops.math']\n"
            "loaded = {}\n"
            "for m in list(sys.modules.values()):\n"
            "    if getattr(m, '__file__', None):\n"
            "        loaded.setdefault(m.__file__, set()).add(id(m))\n"
            "assert all(len(ids) == 1 for ids in loaded.values()), 'a module loaded twice'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# --- inside backend_cpu: its subpackages are layers too ------------------------------------

# Bottom up (backend_cpu/__init__.py and the subpackages' docstrings say what each
# holds). A module may import its own subpackage and anything of a lower rank, never
# a sibling of the same rank (conv/ and emitters/: strategies.py chooses between them).
# `target` (the compile target) is the one top-level module below everything; the
# other top-level modules (compiler, strategies, executable, thunks, ...) are the top.
BACKEND_RANKS = {"target": 0, "llvm": 1, "vecmath": 2, "elemental": 3, "gemm": 4,
                 "conv": 5, "emitters": 5}
BACKEND_TOP = 6
BACKEND = os.path.join(ROOT, "backend_cpu")
# Imports inside functions hide a dependency from the reader and from these checks:
# only real optional dependencies may be imported there.
OPTIONAL_IMPORTS = {("backend_cpu/vecmath/coeffs64.py", "mpmath")}


def _backend_files() -> list[str]:
    found = []
    for dirpath, _, filenames in os.walk(BACKEND):
        found += [os.path.join(dirpath, n) for n in filenames if n.endswith(".py")]
    return sorted(found)


def _backend_name(path: str) -> tuple[str, ...]:
    """backend_cpu/elemental/reduction.py -> ("elemental", "reduction"); a package's
    __init__.py -> its package, () for backend_cpu itself."""
    parts = os.path.relpath(path, BACKEND)[:-3].split(os.sep)
    return tuple(parts[:-1]) if parts[-1] == "__init__" else tuple(parts)


def _is_backend_package(name: tuple[str, ...]) -> bool:
    return os.path.isfile(os.path.join(BACKEND, *name, "__init__.py"))


def _backend_imports(path: str) -> list[tuple[tuple[str, ...], int]]:
    """The backend modules `path` imports (names relative to backend_cpu), with lines."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    name = _backend_name(path)
    package = name if path.endswith("__init__.py") else name[:-1]
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level):
            continue
        if node.level - 1 > len(package):
            continue                                    # above backend_cpu: another layer
        base = package[:len(package) - (node.level - 1)]
        base += tuple(node.module.split(".")) if node.module else ()
        if not node.module or _is_backend_package(base):
            for alias in node.names:                    # `from .x import module`
                if os.path.exists(os.path.join(BACKEND, *base, alias.name + ".py")) \
                        or _is_backend_package(base + (alias.name,)):
                    found.append((base + (alias.name,), node.lineno))
                elif base:
                    found.append((base, node.lineno))
        else:
            found.append((base, node.lineno))
    return found


def _backend_rank(name: tuple[str, ...]) -> int:
    if not name:
        return BACKEND_TOP
    if name[0] in BACKEND_RANKS:
        return BACKEND_RANKS[name[0]]
    return BACKEND_TOP


def test_backend_subpackages_import_downward_only():
    for package in BACKEND_RANKS:
        if package != "target":
            assert _is_backend_package((package,)), f"backend_cpu/{package}/ is gone: update"
    wrong = []
    for path in _backend_files():
        name = _backend_name(path)
        rank = _backend_rank(name)
        for target, line in _backend_imports(path):
            if target[:1] == name[:1] and (len(name) > 1 or _is_backend_package(name[:1])):
                continue                                # its own subpackage
            target_rank = _backend_rank(target)
            if target_rank < rank or rank == target_rank == BACKEND_TOP:
                continue
            wrong.append(f"{os.path.relpath(path, ROOT)}:{line} imports "
                         f"backend_cpu/{'/'.join(target)} (rank {target_rank} >= {rank})")
    assert not wrong, "\n".join(wrong)


def test_backend_modules_import_each_other_without_a_cycle():
    graph = {}
    for path in _backend_files():
        name = _backend_name(path)
        edges = set()
        for target, _ in _backend_imports(path):
            edges.add(target)
            # Importing a module of another subpackage runs that package's __init__ first.
            if len(target) > 1 and target[:1] != name[:1]:
                edges.add(target[:1])
        graph[name] = edges - {name}
    done, on_path = set(), []

    def visit(node):
        if node in on_path:
            cycle = on_path[on_path.index(node):] + [node]
            raise AssertionError("import cycle: " + " -> ".join("/".join(n) or "backend_cpu"
                                                                 for n in cycle))
        if node in done:
            return
        on_path.append(node)
        for nxt in sorted(graph.get(node, ())):
            visit(nxt)
        on_path.pop()
        done.add(node)
    for node in sorted(graph):
        visit(node)


def test_backend_imports_nothing_inside_functions():
    found = []
    for path in _backend_files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                        else [node.module or "."]
                    if all((rel, n.split(".")[0]) in OPTIONAL_IMPORTS for n in names):
                        continue
                    found.append(f"{rel}:{node.lineno} imports {', '.join(names)} inside "
                                 f"{fn.name}")
    assert not sorted(set(found)), "\n".join(sorted(set(found)))


def test_the_backend_checks_see_a_wrong_import(tmp_path, monkeypatch):
    """The rank check is not vacuous: llvm/ importing an emitter is reported."""
    fake = tmp_path / "backend_cpu"
    (fake / "llvm").mkdir(parents=True)
    (fake / "emitters").mkdir()
    for package in ("", "llvm", "emitters"):
        (fake / package / "__init__.py").write_text("")
    (fake / "llvm" / "loops.py").write_text("from ..emitters import dot\n")
    (fake / "emitters" / "dot.py").write_text("from ..llvm import loops\n")
    monkeypatch.setattr(sys.modules[__name__], "BACKEND", str(fake))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    monkeypatch.setattr(sys.modules[__name__], "BACKEND_RANKS", {"llvm": 1, "emitters": 5})
    with pytest.raises(AssertionError, match=r"llvm/loops.py:1 imports backend_cpu/emitters/dot"):
        test_backend_subpackages_import_downward_only()
    with pytest.raises(AssertionError, match="import cycle"):
        test_backend_modules_import_each_other_without_a_cycle()


def test_pyproject_lists_every_subpackage():
    """setuptools' discovery does not follow package-dir: a subpackage missing from
    [tool.setuptools] packages is simply not installed (an editable install hides it)."""
    tomllib = pytest.importorskip("tomllib")         # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    on_disk = {"xlapy"}
    for package in BARE:
        for dirpath, _, filenames in os.walk(os.path.join(ROOT, package)):
            if "__init__.py" in filenames:
                rel = os.path.relpath(dirpath, ROOT).split(os.sep)
                on_disk.add(".".join(["xlapy"] + rel))
    assert on_disk - listed == set()
