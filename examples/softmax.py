"""Softmax with jit_compile: the traced HLO, the HLO after the CPU pipeline (one row
fusion keeps max, exp, sum and divide in a single kernel), and the result checked
against numpy.

    python3 examples/softmax.py
"""
from __future__ import annotations

import numpy as np

from xlapy.frontend import jit_compile, ops


@jit_compile
def softmax(logits):
    return ops.softmax(logits, axis=-1)


def main(rows: int = 32, cols: int = 100, verbose: bool = True) -> float:
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((rows, cols)) * 5).astype(np.float32)
    lowered = softmax.lower(logits)
    compiled = lowered.compile()
    probs = softmax(logits)

    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    expected = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    error = float(np.abs(probs - expected).max())
    if verbose:
        print("=== HLO before passes ===")
        print(lowered.as_hlo_text())
        print("=== HLO after passes ===")
        print(compiled.as_hlo_text())
        print("=== result ===")
        print(f"probs[0, :5] = {probs[0, :5]}")
        print(f"row sums in [{probs.sum(-1).min():.6f}, {probs.sum(-1).max():.6f}]")
        print(f"max |error| vs numpy = {error:.2e}")
        print(f"cost analysis: {compiled.cost_analysis()}")
    return error


if __name__ == "__main__":
    main()
