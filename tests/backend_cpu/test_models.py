"""The Flax/optax models of tests/models (a transformer LM's AdamW step, an LSTM's
forward + gradient, threefry dropout), JAX's unoptimized HLO compiled through the
default pipeline, reproduce XLA's outputs (DESIGN.md tolerances). The files come from
tools/make_model_corpus.py; benchmarks/bench_models.py times the larger versions."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from tests.corpus_util import assert_all_close

MODELS = Path(__file__).parents[1] / "models"


def load(name: str):
    module = hlo.parse_module((MODELS / f"{name}.hlo").read_text())
    with np.load(MODELS / f"{name}.npz") as data:
        args = [data[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in data.files))]
        outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    return module, args, outs


@pytest.mark.parametrize("name", ["lm", "lstm", "dropout"])
def test_model_matches_xla(name):
    module, args, expected = load(name)
    executable = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline="default"))
    assert_all_close(executable.run(*args), expected, name)
    # A second run on the same executable (arena reuse) gives the same results.
    assert_all_close(executable.run(*args), expected, f"{name}, second run")
