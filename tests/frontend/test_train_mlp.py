"""examples/train_mlp.py: SGD on a synthetic data set lowers the loss, beats chance,
and the whole training step is one traced, compiled HLO module."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_mlp.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("example_train_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_lowers_the_loss_and_beats_chance(example):
    losses, accuracy = example.main(steps=150, verbose=False)
    final = float(np.mean(losses[-10:]))
    assert final < 0.5, f"loss after 150 steps {final:.3f}"
    assert final < losses[0] / 3
    assert accuracy > 0.75, f"accuracy {accuracy:.3f} (chance 0.25)"
    assert example.train_step.trace_count == 1       # one trace, reused by every step


def test_training_step_is_one_module_with_forward_and_backward(example):
    rng = np.random.default_rng(0)
    x, labels = example.make_dataset(rng, n=32, dim=8, classes=3)
    params = example.init_params(rng, [8, 16, 3])
    lowered = example.train_step.lower(params, x, labels, np.float32(0.1))
    text = lowered.as_hlo_text()
    # 2 forward matmuls, and 3 in the backward pass (no input gradient for layer 0).
    assert text.count(" dot(") >= 5
    new_params, loss = lowered.compile()(params, x, labels, np.float32(0.1))
    assert sorted(new_params) == sorted(params)
    assert all(new_params[k].shape == params[k].shape for k in params)
    assert np.isfinite(loss) and loss > 0


def test_main_prints_the_loss(example, capsys):
    example.main(steps=30, print_every=10)
    out = capsys.readouterr().out
    assert out.count("loss") >= 3 and "accuracy" in out
