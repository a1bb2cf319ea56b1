"""examples/train_transformer.py in a CI-sized configuration: a few Adam steps of a
tiny decoder-only transformer lower the loss, parameters survive np.savez and
restore, and sampling draws valid characters."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, str(EXAMPLES))     # train_transformer imports transformer_model
    try:
        spec = importlib.util.spec_from_file_location("example_train_transformer",
                                                      EXAMPLES / "train_transformer.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(EXAMPLES))


def tiny(example, vocab_size):
    # one layer: compiling the step dominates the test's time and grows with the depth
    # (2 layers: twice the ~10 s); the 2-layer model is the example's default
    return example.Config(vocab_size=vocab_size, seq_len=16, d_model=16, num_heads=2,
                          num_layers=1, d_ff=32, dropout=0.1)


def test_loss_falls_and_parameters_round_trip(example, tmp_path):
    vocab = example.Vocab(example.make_corpus(np.random.default_rng(0)))
    config = tiny(example, len(vocab))
    path = tmp_path / "params.npz"
    losses, (before, after), params = example.main(steps=12, batch=8, config=config,
                                                   learning_rate=1e-2, save=str(path),
                                                   verbose=False)
    assert np.isfinite(losses).all()
    assert np.mean(losses[-3:]) < losses[0] - 0.3, losses
    assert after < before - 0.3
    restored = example.load_params(str(path), config)
    flat_a = dict(example.flat_params(params))
    flat_b = dict(example.flat_params(restored))
    assert flat_a.keys() == flat_b.keys()
    for k in flat_a:
        np.testing.assert_array_equal(flat_a[k], flat_b[k], err_msg=k)
    # restoring continues from the saved model: its held-out loss is the saved one's
    _, (before2, _), _ = example.main(steps=0, config=config, restore=str(path), verbose=False)
    assert before2 == pytest.approx(after, rel=1e-6)
    text = example.sample(params, config, vocab, "the ", 6, seed=1)
    assert text.startswith("the ") and len(text) == 10 and set(text) <= set(vocab.chars)


def test_restore_rejects_another_model(example, tmp_path):
    vocab = example.Vocab(example.make_corpus(np.random.default_rng(0)))
    config = tiny(example, len(vocab))
    path = tmp_path / "p.npz"
    example.save_params(str(path), example.init_params(config), config)
    other = example.Config(vocab_size=len(vocab), seq_len=16, d_model=16, num_heads=2,
                           num_layers=2, d_ff=32)
    with pytest.raises(ValueError, match="do not match"):
        example.load_params(str(path), other)
