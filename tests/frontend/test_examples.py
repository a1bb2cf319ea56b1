"""The examples run, print the HLO before and after passes, and match their references."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, tolerance", [("softmax", 1e-6), ("mlp", 1e-5),
                                             ("convnet", 1e-5)])
def test_example_runs_and_prints_hlo(name, tolerance, capsys):
    error = load(name).main()
    out = capsys.readouterr().out
    before = out.index("=== HLO before passes ===")
    after = out.index("=== HLO after passes ===")
    assert before < after < out.index("=== result ===")
    assert "fusion" not in out[before:after] and "fusion(" in out[after:]
    assert "cost analysis" in out
    assert error < tolerance
