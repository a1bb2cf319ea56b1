"""Inputs of the transformer-block gradient case (make_transformer_block_grad.py), made
with integer hashing and exact float arithmetic only, so that JAX's side and the test
build the same arrays bit for bit on any numpy (no random-number streams, no libm).

`leaves()` gives the block's parameters in JAX's tree order (sorted names), then
`x` and the loss weights `r`; the loss is sum(block(params, x) * r).
"""
from __future__ import annotations

import numpy as np

B, T, D, HEADS, MLP = 16, 256, 64, 2, 128      # 4096 rows: sums of 4096 terms
NAMES = ("b1", "b2", "bk", "bo", "bq", "bv", "ln1_b", "ln1_g", "ln2_b", "ln2_g",
         "w1", "w2", "wk", "wo", "wq", "wv")


def _hash(n: int, salt: int) -> np.ndarray:
    """splitmix64 of 0..n-1 (+ salt): uint64, wrapping arithmetic."""
    with np.errstate(over="ignore"):
        z = np.arange(n, dtype=np.uint64) + np.uint64(salt) * np.uint64(0x9E3779B97F4A7C15)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def normalish(shape, salt: int, scale: float = 1.0) -> np.ndarray:
    """Mean 0, variance scale^2: the sum of four uniforms on 24 bits, in exact f64 steps,
    rounded once to f32."""
    n = int(np.prod(shape))
    total = np.zeros(n)
    for k in range(4):
        total += (_hash(n, 4 * salt + k) >> np.uint64(40)).astype(np.float64) / 2.0 ** 24
    # Four uniforms on [0, 1): mean 2, variance 4/12.
    return ((total - 2.0) * (np.sqrt(3.0) * scale)).astype(np.float32).reshape(shape)


def leaves() -> list[np.ndarray]:
    shapes = {"b1": (MLP,), "b2": (D,), "bk": (D,), "bo": (D,), "bq": (D,), "bv": (D,),
              "ln1_b": (D,), "ln1_g": (D,), "ln2_b": (D,), "ln2_g": (D,), "w1": (D, MLP),
              "w2": (MLP, D), "wk": (D, D), "wo": (D, D), "wq": (D, D), "wv": (D, D)}
    out = []
    for salt, name in enumerate(NAMES):
        shape = shapes[name]
        if name.startswith("w"):
            value = normalish(shape, salt, 1.0 / np.sqrt(shape[0]))
        else:
            value = normalish(shape, salt, 0.1)
            if name.endswith("_g"):
                value = (value + np.float32(1.0)).astype(np.float32)
        out.append(value)
    return out + [normalish((B, T, D), 100), normalish((B, T, D), 101)]
