"""Training an MLP with SGD: forward, backward and update in ONE jit_compile'd step.

The data set is made here (no downloads): points of a few Gaussian blobs in
16 dimensions, each blob one class, pushed through a fixed random nonlinear
map so that a linear model does not separate them. The step

    loss, grads = value_and_grad(loss_fn)(params, x, labels)
    params = params - learning_rate * grads

is traced once into a single HLO module (forward + backward + update, fused
by the CPU pipeline) and run for every batch. It prints the loss every few
steps and the final accuracy.

    python3 examples/train_mlp.py
"""
from __future__ import annotations

import numpy as np

from xlapy.frontend import jit_compile, ops, value_and_grad


def make_dataset(rng, n: int = 1024, dim: int = 16, classes: int = 4):
    """(x float32 [n, dim], labels int32 [n]): noisy blobs behind a nonlinear map."""
    centers = rng.standard_normal((classes, dim)) * 2.0
    labels = rng.integers(0, classes, size=n)
    points = centers[labels] + 2.0 * rng.standard_normal((n, dim))
    mix = rng.standard_normal((dim, dim)) / np.sqrt(dim)
    x = np.tanh(points @ mix) + 0.1 * np.sin(3 * points)
    return x.astype(np.float32), labels.astype(np.int32)


def init_params(rng, sizes):
    """He-initialized weights, zero biases: {"w0", "b0", "w1", "b1", ...}."""
    params = {}
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = (rng.standard_normal((m, n)) * np.sqrt(2 / m)).astype(np.float32)
        params[f"b{i}"] = np.zeros(n, np.float32)
    return params


def logits_of(params, x):
    layers = len(params) // 2
    h = x
    for i in range(layers):
        h = ops.bias_add(ops.matmul(h, params[f"w{i}"]), params[f"b{i}"])
        if i < layers - 1:
            h = ops.relu(h)
    return h


def loss_fn(params, x, labels):
    """Mean softmax cross-entropy of the batch."""
    return ops.reduce_mean(ops.sparse_softmax_cross_entropy_with_logits(labels,
                                                                        logits_of(params, x)))


@jit_compile
def train_step(params, x, labels, learning_rate):
    """One SGD step: (new params, loss before the step) — one HLO module."""
    loss, grads = value_and_grad(loss_fn)(params, x, labels)
    new_params = {k: params[k] - learning_rate * grads[k] for k in params}
    return new_params, loss


@jit_compile
def accuracy(params, x, labels):
    predictions = ops.argmax(logits_of(params, x), axis=-1, output_type="int32")
    return ops.reduce_mean(ops.cast(ops.equal(predictions, labels), "float32"))


def main(steps: int = 300, batch: int = 128, learning_rate: float = 0.1,
         sizes=(16, 32, 32, 4), print_every: int = 25, verbose: bool = True, seed: int = 0):
    """Trains and returns (losses per step, final training-set accuracy)."""
    rng = np.random.default_rng(seed)
    x, labels = make_dataset(rng, dim=sizes[0], classes=sizes[-1])
    params = init_params(rng, list(sizes))
    lr = np.float32(learning_rate)
    losses = []
    for step in range(steps):
        at = (step * batch) % len(x)
        xb, yb = x[at:at + batch], labels[at:at + batch]
        params, loss = train_step(params, xb, yb, lr)
        losses.append(float(loss))
        if verbose and (step % print_every == 0 or step == steps - 1):
            print(f"step {step:4d}  loss {float(loss):.4f}")
    acc = float(accuracy(params, x, labels))
    if verbose:
        print(f"training accuracy {acc:.3f} (chance {1 / sizes[-1]:.3f}); "
              f"train_step traced {train_step.trace_count} time(s)")
    return losses, acc


if __name__ == "__main__":
    main()
