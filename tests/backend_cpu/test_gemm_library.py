"""The process-wide GEMM library (backend_cpu/gemm/library.py): kernels declare the
micro-kernel and packing routines, which are compiled once per process (and kept in
the disk cache, one entry per routine and target), and a module loaded from the disk
cache brings its routines back."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from xlapy.backend_cpu.gemm import library
from tests.backend_cpu.helpers import compiled

ROOT = Path(__file__).resolve().parents[2]

DOT = """HloModule {name}
ENTRY e {{
  a = f32[{m},96] parameter(0)
  b = f32[96,80] parameter(1)
  ROOT d = f32[{m},80] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""


def test_kernels_declare_the_routines_and_share_them():
    _, first = compiled(DOT.format(name="lib_first", m=40))
    _, second = compiled(DOT.format(name="lib_second", m=50))
    for exe in (first, second):
        text = exe.as_llvm_ir()
        assert re.search(r'declare void @"?xlapy\.gemm\.\w+\.micro\.', text)   # declared only
        assert not re.search(r'define[^\n]*@"?xlapy\.gemm\.', text)
    names = library.compiled_names()
    tag = first.target.tag          # routines are named for the target they run on
    assert any(n.startswith(f"xlapy.gemm.{tag}.micro.") for n in names)
    assert any(n.startswith(f"xlapy.gemm.{tag}.pack.") for n in names)
    rng = np.random.default_rng(0)
    for exe, m in ((first, 40), (second, 50)):
        a = rng.uniform(-1, 1, (m, 96)).astype(np.float32)
        b = rng.uniform(-1, 1, (96, 80)).astype(np.float32)
        np.testing.assert_allclose(exe.run(a, b)[0], a.astype(np.float64) @ b, rtol=1e-4,
                                   atol=1e-4)


def test_ensure_compiled_is_idempotent_and_thread_safe():
    _, exe = compiled(DOT.format(name="lib_threads", m=40))
    routines = [library.Routine(name, "micro", "f32", None)      # never emitted:
                for name in library.compiled_names()]           # all are compiled
    before = library.compiled_names()
    threads = [threading.Thread(target=library.ensure_compiled, args=(routines,))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert library.compiled_names() == before     # nothing compiled twice


_CHILD = """
import sys
sys.path.insert(0, {root!r})
import numpy as np
from xlapy import backend_cpu, hlo
from xlapy.backend_cpu.gemm import library
module = hlo.parse_module({text!r})
exe = backend_cpu.compile(module)
a = np.full((module.entry.parameters[0].shape.dims[0], 96), 0.5, np.float32)
b = np.full((96, 80), 0.25, np.float32)
out = exe.run(a, b)[0]
print(float(np.abs(out - 96 * 0.125).max()), len(library.compiled_names()),
      len(library.built_names()))
"""


def test_a_module_from_the_disk_cache_brings_its_routines(tmp_path):
    """Two fresh processes: the second loads the dot and its library routines from disk."""
    code = _CHILD.format(root=str(ROOT), text=DOT.format(name="lib_disk", m=40))
    env = {"XLAPY_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        error, routines, _ = done.stdout.split()
        assert float(error) == 0.0 and int(routines) >= 2
    assert len(list(tmp_path.glob("*.xlc"))) == 1       # the module
    assert len(list((tmp_path / "gemm").glob("*.xlc"))) == int(routines)   # one per routine


def test_a_second_process_builds_no_routine_another_module_needs(tmp_path):
    """The routines are cached one by one, by recipe and target: a second process
    compiling another dot (its module not cached) loads them all and builds none."""
    env = {"XLAPY_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    built = []
    for m in (40, 56):
        code = _CHILD.format(root=str(ROOT), text=DOT.format(name=f"lib_other{m}", m=m))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        error, routines, n_built = done.stdout.split()
        assert float(error) == 0.0
        built.append((int(routines), int(n_built)))
    assert built[0][1] == built[0][0] >= 2          # the first process built its routines
    assert built[1] == (built[0][0], 0)              # the second loaded the same, built none
