"""Writes transformer_block_grad.hlo and transformer_block_grad.npz, with JAX.

Run with a Python that has jax (never a dependency of xlapy), from the repository root:

    /work/jaxvenv/bin/python tests/regressions/from_jax/make_transformer_block_grad.py

The module is JAX's unoptimized HLO of `jax.jit(jax.grad(loss, (0, 1)))` in f32 for a
pre-layernorm transformer block (causal two-head attention, a GELU MLP, residuals),
loss = sum(block(params, x) * r), on the inputs of transformer_block_inputs.py
(B, T = 16, 256: parameter gradients sum 4096 rows). The .npz holds, for the 16
parameter gradients in JAX's tree order, XLA's f32 result `xla{i}` (JAX's CPU
backend) and the f64 reference `ref{i}` (the same program with jax_enable_x64, on
the same inputs); the x gradient (output 16) is not stored (2 MB).
"""
from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from transformer_block_inputs import B, D, HEADS, MLP, NAMES, T, leaves  # noqa: E402


def layernorm(x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def block(p, x):
    dh = D // HEADS
    h = layernorm(x, p["ln1_g"], p["ln1_b"])
    heads = lambda t: t.reshape(B, T, HEADS, dh).transpose(0, 2, 1, 3)
    q, k, v = (heads(h @ p[f"w{n}"] + p[f"b{n}"]) for n in "qkv")
    s = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(jnp.asarray(dh, x.dtype))
    s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9)
    o = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    x = x + o @ p["wo"] + p["bo"]
    m = jax.nn.gelu(layernorm(x, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"])
    return x + m @ p["w2"] + p["b2"]


def loss(params, x, r):
    return jnp.sum(block(dict(zip(NAMES, params)), x) * r)


def main() -> None:
    *params, x, r = leaves()
    grad = jax.jit(jax.grad(loss, (0, 1)), keep_unused=True)
    (HERE / "transformer_block_grad.hlo").write_text(grad.lower(params, x, r).as_text(dialect="hlo"))
    g32 = grad(params, x, r)[0]
    jax.config.update("jax_enable_x64", True)
    wide = [jnp.asarray(a, jnp.float64) for a in params + [x, r]]
    g64 = jax.jit(jax.grad(loss, (0, 1)))(wide[:-2], wide[-2], wide[-1])[0]
    np.savez(HERE / "transformer_block_grad.npz",
             **{f"xla{i}": np.asarray(g) for i, g in enumerate(g32)},
             **{f"ref{i}": np.asarray(g) for i, g in enumerate(g64)})


if __name__ == "__main__":
    main()
