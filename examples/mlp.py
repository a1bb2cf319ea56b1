"""An MLP forward pass with jit_compile: parameters as a pytree (a list of layer
dicts), relu hidden layers, softmax output, and the mean cross-entropy of a batch.
Prints the HLO before and after passes and checks the result against numpy.

    python3 examples/mlp.py
"""
from __future__ import annotations

import numpy as np

from xlapy.frontend import jit_compile, ops


def init_params(rng, sizes):
    """He-initialized weights and zero biases, one dict per layer."""
    return [{"w": (rng.standard_normal((m, n)) * np.sqrt(2 / m)).astype(np.float32),
             "b": np.zeros(n, np.float32)} for m, n in zip(sizes[:-1], sizes[1:])]


@jit_compile
def forward(params, x, labels):
    h = x
    for layer in params[:-1]:
        h = ops.relu(ops.bias_add(ops.matmul(h, layer["w"]), layer["b"]))
    logits = ops.bias_add(h @ params[-1]["w"], params[-1]["b"])
    loss = ops.reduce_mean(ops.sparse_softmax_cross_entropy_with_logits(labels, logits))
    return {"probs": ops.softmax(logits), "loss": loss,
            "predictions": ops.argmax(logits, axis=-1, output_type="int32")}


def numpy_forward(params, x, labels):
    h = x.astype(np.float64)
    for layer in params[:-1]:
        h = np.maximum(h @ layer["w"] + layer["b"], 0)
    logits = h @ params[-1]["w"] + params[-1]["b"]
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return np.exp(logp), -logp[np.arange(len(labels)), labels].mean()


def main(batch: int = 64, sizes=(32, 64, 64, 10), verbose: bool = True) -> float:
    rng = np.random.default_rng(0)
    params = init_params(rng, list(sizes))
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    labels = rng.integers(0, sizes[-1], size=batch).astype(np.int32)
    out = forward(params, x, labels)
    probs, loss = numpy_forward(params, x, labels)
    error = max(float(np.abs(out["probs"] - probs).max()), abs(float(out["loss"]) - loss))
    if verbose:
        lowered = forward.lower(params, x, labels)
        print("=== HLO before passes ===")
        print(lowered.as_hlo_text())
        print("=== HLO after passes ===")
        print(lowered.compile().as_hlo_text())
        print("=== result ===")
        print(f"loss = {float(out['loss']):.6f} (numpy {loss:.6f})")
        print(f"predictions[:10] = {out['predictions'][:10]}")
        print(f"max |error| vs numpy = {error:.2e}")
        print(f"cost analysis: {lowered.compile().cost_analysis()}")
    return error


if __name__ == "__main__":
    main()
