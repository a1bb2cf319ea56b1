"""A user's install: xlapy in a fresh virtual environment next to PyPI's packages
named `frontend` and `runtime` (which the old top-level names collided with); the
README's main job runs and both of PyPI's packages still import as themselves."""
from __future__ import annotations

import os
import subprocess
import sys
import venv

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_installs_beside_pypis_frontend_and_runtime(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")

    def run(*args, cwd=tmp_path):
        done = subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, timeout=600)
        assert done.returncode == 0, f"{args}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        return done.stdout

    run(python, "-m", "pip", "install", "--quiet", "frontend==0.0.3", "runtime==0.1.4")
    run(python, "-m", "pip", "install", "--quiet", ROOT)
    out = run(python, os.path.join(ROOT, "examples", "softmax.py"))
    assert "max |error| vs numpy" in out
    # Neither of PyPI's packages imports on its own here (one wants a static/ folder, the
    # other Python 2's `thread`): where each name resolves is the question, so find_spec.
    out = run(python, "-c",
              "import importlib.util, xlapy, xlapy.runtime, xlapy.frontend\n"
              "print(importlib.util.find_spec('frontend').origin)\n"
              "print(importlib.util.find_spec('runtime').origin)\n"
              "print(xlapy.runtime.__file__)")
    pypi_frontend, pypi_runtime, ours = out.split()
    assert "site-packages" in pypi_frontend and not pypi_frontend.startswith(ROOT)
    assert pypi_runtime.endswith("runtime.py")
    assert os.path.join("xlapy", "runtime") in ours and not ours.startswith(ROOT)
    hlo_opt = str(env_dir / "bin" / "hlo-opt")
    assert "fusion" in run(hlo_opt, os.path.join(ROOT, "tests", "corpus", "softmax_f32.hlo"))
