"""A small convnet forward pass with jit_compile (NHWC): conv 3x3 SAME + relu,
max-pool 2x2, depthwise conv, conv stride 2, global average pool, dense layer,
log-softmax. Prints the HLO before and after passes and checks the result
against the interpreter (the numpy reference evaluator).

    python3 examples/convnet.py
"""
from __future__ import annotations

import numpy as np

from xlapy.frontend import jit_compile, ops


def init_params(rng, channels: int = 3, classes: int = 10):
    def normal(*shape):
        fan_in = int(np.prod(shape[:-1]))
        return (rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)
    return {"conv1": normal(3, 3, channels, 8), "bias1": np.zeros(8, np.float32),
            "depthwise": normal(3, 3, 8, 1), "conv2": normal(3, 3, 8, 16),
            "dense": normal(16, classes), "dense_bias": np.zeros(classes, np.float32)}


def convnet(p, images):
    h = ops.relu(ops.bias_add(ops.conv2d(images, p["conv1"], 1, "SAME"), p["bias1"]))
    h = ops.max_pool2d(h, ksize=2, strides=2, padding="VALID")
    h = ops.relu(ops.depthwise_conv2d(h, p["depthwise"], 1, "SAME"))
    h = ops.relu(ops.conv2d(h, p["conv2"], strides=2, padding="SAME"))
    features = ops.reduce_mean(h, axis=(1, 2))            # global average pool
    logits = ops.bias_add(features @ p["dense"], p["dense_bias"])
    return ops.log_softmax(logits)


compiled_convnet = jit_compile(convnet)
reference_convnet = jit_compile(convnet, backend="interpreter", pipeline=None)


def main(batch: int = 4, size: int = 16, verbose: bool = True) -> float:
    rng = np.random.default_rng(0)
    params = init_params(rng)
    images = rng.standard_normal((batch, size, size, 3)).astype(np.float32)
    out = compiled_convnet(params, images)
    expected = reference_convnet(params, images)
    error = float(np.abs(out - expected).max())
    if verbose:
        lowered = compiled_convnet.lower(params, images)
        print("=== HLO before passes ===")
        print(lowered.as_hlo_text())
        print("=== HLO after passes ===")
        print(lowered.compile().as_hlo_text())
        print("=== result ===")
        print(f"log-probabilities[0] = {np.round(out[0], 4)}")
        print(f"predicted classes = {out.argmax(-1)}")
        print(f"max |error| vs the reference evaluator = {error:.2e}")
        print(f"cost analysis: {lowered.compile().cost_analysis()}")
    return error


if __name__ == "__main__":
    main()
