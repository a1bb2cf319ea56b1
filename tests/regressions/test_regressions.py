"""Every shrunk failing example of the fuzzers, run through every property forever after.

Each `NAME.hlo` here is a module that once broke a layer (README.md says
which, and how); `NAME.npz`, when present, holds its arguments `arg0, arg1,
...` (else arguments are drawn deterministically from the special values of
tests/hlo_strategies.py). Each module must: print back to the identical
text, keep its numbers exactly through `passes.cpu_pipeline()`, and compile
and run on `backend_cpu` to exactly the evaluator's numbers (with and without
the pipeline). A future case with approximate math would need a tolerance.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import passes
from tests.hlo_strategies import special_values
from tests.robustness.compare import assert_same_numbers, output_types

HERE = Path(__file__).parent
CASES = sorted(p.stem for p in HERE.glob("*.hlo"))


def load(name: str) -> tuple[str, hlo.HloModule, list[np.ndarray]]:
    text = (HERE / f"{name}.hlo").read_text()
    module = hlo.parse_module(text)
    hlo.verify(module)
    npz = HERE / f"{name}.npz"
    if npz.exists():
        with np.load(npz) as data:
            args = [data[f"arg{i}"] for i in range(len(module.entry.parameters))]
    else:
        args = [default_argument(p.shape, i) for i, p in enumerate(module.entry.parameters)]
    return text, module, args


def default_argument(shape: hlo.Shape, seed: int) -> np.ndarray:
    """Special values of the type, cycled to fill the shape (deterministic)."""
    values = special_values(shape.element_type)
    flat = [values[(seed + i) % len(values)] for i in range(shape.numel)]
    return np.array(flat, hlo.numpy_dtype(shape.element_type)).reshape(shape.dims)


@pytest.mark.parametrize("name", CASES)
def test_round_trip(name):
    text, module, _ = load(name)
    assert hlo.print_module(module) == text


@pytest.mark.parametrize("name", CASES)
def test_cpu_pipeline_keeps_numbers(name):
    text, module, args = load(name)
    expected = hlo.evaluate(module, args)
    optimized = hlo.parse_module(text)
    passes.cpu_pipeline().run(optimized)
    hlo.verify(optimized)
    assert_same_numbers(hlo.evaluate(optimized, args), expected, output_types(module), name,
                        exact=True)


@pytest.mark.parametrize("pipeline", [None, "default"])
@pytest.mark.parametrize("name", CASES)
def test_backend_matches_evaluator(name, pipeline):
    _, module, args = load(name)
    expected = hlo.evaluate(module, args)
    executable = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=pipeline))
    # Only correctly rounded ops on exact values here: the same bits, denormals included.
    assert_same_numbers(executable.run(*args), expected, output_types(module), name,
                        exact=True)
