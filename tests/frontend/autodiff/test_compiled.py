"""A representative subset of gradients through the CPU backend (default pipeline),
compared with the same gradient on the reference evaluator. An opcode the backend
lacks makes the case an xfail with the backend's message."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import cond, fori_loop, ops

from .util import compiled_grads, values

rng = np.random.default_rng(0)
CASES = {
    "elementwise": (lambda x, y: ops.tanh(x) * ops.exp(y) / (1.0 + x * x) + ops.maximum(x, y),
                    [values(rng, (3, 4)), values(rng, (4,))], (0, 1)),
    "activations": (lambda x: ops.gelu(x) + ops.relu(x) + ops.softplus(x) + ops.silu(x),
                    [values(rng, (2, 5), "away0")], (0,)),
    "reductions": (lambda x: ops.reduce_max(x, 1) + ops.reduce_mean(x, 0)[:2] +
                   ops.reduce_prod(x, 1), [values(rng, (2, 3), "positive")], (0,)),
    "matmul": (lambda a, b: ops.matmul(a, b, transpose_b=True),
               [values(rng, (4, 3)), values(rng, (5, 3))], (0, 1)),
    "batch_matmul": (lambda a, b: ops.batch_matmul(a, b),
                     [values(rng, (2, 3, 4)), values(rng, (1, 4, 2))], (0, 1)),
    "softmax_xent": (lambda lg: ops.sparse_softmax_cross_entropy_with_logits(
        np.array([0, 2, 1], np.int32), lg) + ops.softmax(lg)[:, 0],
        [values(rng, (3, 4))], (0,)),
    "layer_norm": (lambda x, g, b: ops.layer_norm(x, g, b),
                   [values(rng, (3, 4)), values(rng, (4,)), values(rng, (4,))], (0, 1, 2)),
    "conv2d": (lambda x, w: ops.conv2d(x, w, 2, "SAME"),
               [values(rng, (1, 5, 5, 2)), values(rng, (3, 3, 2, 3))], (0, 1)),
    "depthwise_conv2d": (lambda x, w: ops.depthwise_conv2d(x, w, 1, "SAME"),
                         [values(rng, (1, 4, 4, 2)), values(rng, (2, 2, 2, 2))], (0, 1)),
    "max_pool": (lambda x: ops.max_pool2d(x, 2, 2, "VALID"), [values(rng, (1, 4, 4, 2))], (0,)),
    "avg_pool": (lambda x: ops.avg_pool2d(x, 3, 2, "SAME"), [values(rng, (1, 5, 5, 1))], (0,)),
    "gather": (lambda x: ops.gather(x, np.array([2, 0, 2], np.int32), axis=1),
               [values(rng, (2, 3))], (0,)),
    "strided_slice": (lambda x: x[::2, ::-1] * 2.0, [values(rng, (5, 3))], (0,)),
    "concat_pad": (lambda x: ops.pad(ops.concat([x, x * x], 1), [(1, 0), (0, 2)]),
                   [values(rng, (2, 3))], (0,)),
    "cond": (lambda x, w: cond(ops.reduce_sum(x) > 0, lambda x: x * w, lambda x: ops.sin(x),
                               (x,)), [values(rng, (3,)), values(rng, (3,))], (0, 1)),
    "fori_loop": (lambda x, w: fori_loop(0, 3, lambda i, v: ops.tanh(v * w), x),
                  [values(rng, (3,)), values(rng, (3,))], (0, 1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_gradient_matches_the_evaluator(name):
    fn, args, argnums = CASES[name]
    compiled_grads(name, fn, args, argnums)
