"""Writes flax_lstm_grad.hlo and flax_lstm_grad.npz (issue 14), with JAX and Flax.

Run with a Python that has jax and flax (never a dependency of xlapy):

    /work/jaxvenv/bin/python tests/regressions/from_jax/make_flax_lstm_grad.py

The module is JAX's unoptimized HLO of `jax.jit(jax.grad(loss))` for
`nn.RNN(nn.LSTMCell(4))` over 16 steps (batch 2, 3 features). The .npz holds
the arguments `arg0, arg1, ...` (parameter leaves, then the input) and JAX's
outputs `out0, out1, ...` (the gradient leaves) computed by XLA's CPU backend.
"""
from __future__ import annotations

from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

STEPS, BATCH, FEATURES, HIDDEN = 16, 2, 3, 4
HERE = Path(__file__).parent


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.RNN(nn.LSTMCell(features=HIDDEN))(x)


def main() -> None:
    model = Model()
    x = np.random.default_rng(0).standard_normal((BATCH, STEPS, FEATURES)).astype(np.float32)
    leaves, treedef = jax.tree_util.tree_flatten(model.init(jax.random.PRNGKey(0), x))

    def loss(leaves, x):
        y = model.apply(jax.tree_util.tree_unflatten(treedef, leaves), x)
        return jnp.sum(y * y)

    grad = jax.jit(jax.grad(loss))
    (HERE / "flax_lstm_grad.hlo").write_text(grad.lower(leaves, x).as_text(dialect="hlo"))
    args = [np.asarray(leaf) for leaf in leaves] + [x]
    outs = [np.asarray(g) for g in grad(leaves, x)]
    np.savez(HERE / "flax_lstm_grad.npz", **{f"arg{i}": a for i, a in enumerate(args)},
             **{f"out{i}": o for i, o in enumerate(outs)})


if __name__ == "__main__":
    main()
