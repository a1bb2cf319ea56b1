"""Makes the JAX/XLA regression cases of this folder (run with a Python that has jax,
flax and optax; xlapy never imports them):

    python tests/regressions/jax/make_cases.py [NAME ...]

Each case writes NAME.hlo (as JAX lowers it), NAME.opt.hlo (after XLA's CPU
pipeline) and NAME.npz (`arg0..` the flattened arguments in ENTRY parameter order,
`out0..` XLA's results, flattened in order), like tests/corpus.
"""
from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).parent


def adamw_step():
    """An optax AdamW step of an embedding + dense model: the gather's gradient and an
    explicit `.at[].add` are scatters, which XLA wraps in fusions (`wrapped_scatter`)."""
    import optax
    vocab, width, batch, out = 16, 8, 6, 4
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"emb": jax.random.normal(k1, (vocab, width)) * 0.1,
              "w": jax.random.normal(k2, (width, out)) * 0.1, "b": jnp.zeros((out,))}
    opt = optax.adamw(1e-2, weight_decay=1e-2)

    def loss(p, ids, y):
        logits = p["emb"][ids] @ p["w"] + p["b"]
        return jnp.mean((logits - y) ** 2)

    def step(p, state, ids, y):
        value, grads = jax.value_and_grad(loss)(p, ids, y)
        updates, state = opt.update(grads, state, p)
        counts = jnp.zeros((vocab,), jnp.float32).at[ids].add(1.0)
        return optax.apply_updates(p, updates), state, value, counts

    ids = jnp.array([1, 3, 3, 0, 15, 7], jnp.int32)
    y = jax.random.normal(k3, (batch, out))
    return step, (params, opt.init(params), ids, y)


CASES = {"adamw_step": adamw_step}


def save(name: str) -> None:
    fn, args = CASES[name]()
    lowered = jax.jit(fn).lower(*args)
    (HERE / f"{name}.hlo").write_text(lowered.as_text(dialect="hlo"))
    compiled = lowered.compile()
    (HERE / f"{name}.opt.hlo").write_text(compiled.as_text())
    outs = jax.tree_util.tree_leaves(compiled(*args))
    ins = jax.tree_util.tree_leaves(args)
    np.savez(HERE / f"{name}.npz", **{f"arg{i}": np.asarray(a) for i, a in enumerate(ins)},
             **{f"out{i}": np.asarray(a) for i, a in enumerate(outs)})


if __name__ == "__main__":
    for case in sys.argv[1:] or list(CASES):
        save(case)
