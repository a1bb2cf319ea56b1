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


def resnet_forward():
    """A small Flax ResNet (two residual blocks, BatchNorm in eval mode) on a 32x32
    batch: XLA fuses convolutions, batch norm and the mean into YNNPACK fusions
    (`kind=kCustom`), whose chained convolutions our generators recomputed."""
    import flax.linen as nn

    class Block(nn.Module):
        features: int
        stride: int = 1

        @nn.compact
        def __call__(self, x):
            s = (self.stride, self.stride)
            y = nn.Conv(self.features, (3, 3), s, use_bias=False)(x)
            y = nn.relu(nn.BatchNorm(use_running_average=True)(y))
            y = nn.Conv(self.features, (3, 3), use_bias=False)(y)
            y = nn.BatchNorm(use_running_average=True)(y)
            if x.shape != y.shape:
                x = nn.Conv(self.features, (1, 1), s, use_bias=False)(x)
                x = nn.BatchNorm(use_running_average=True)(x)
            return nn.relu(x + y)

    class ResNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.BatchNorm(use_running_average=True)(
                nn.Conv(16, (3, 3), use_bias=False)(x)))
            x = Block(32, 2)(Block(16)(x))
            return nn.Dense(10)(jnp.mean(x, axis=(1, 2)))

    model = ResNet()
    x = jax.random.normal(jax.random.PRNGKey(1), (2, 32, 32, 3))
    variables = model.init(jax.random.PRNGKey(0), x)
    # Batch statistics away from (0, 1), so that batch norm does something.
    noise = jax.random.PRNGKey(2)
    variables = jax.tree_util.tree_map(
        lambda v: v + 0.1 * jax.random.normal(noise, v.shape), variables)
    return model.apply, (variables, x)


CASES = {"adamw_step": adamw_step, "resnet_forward": resnet_forward}


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
