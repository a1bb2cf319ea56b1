"""Gradients of grouped convolutions (input channels a multiple of the filter's):
finite differences on the evaluator, the compiled gradient against the evaluator's."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import ops

from .autodiff.util import check_grads, compiled_grads, values

CASES_2D = [
    # x shape (NHWC), filter shape (KH, KW, C/G, O), strides, dilations, padding
    ((1, 4, 4, 4), (2, 2, 2, 4), (1, 1), (1, 1), "VALID"),     # 2 groups
    ((2, 5, 4, 6), (3, 2, 2, 3), (2, 1), (1, 1), "SAME"),      # 3 groups, 1 output each
    ((1, 5, 5, 4), (2, 2, 1, 8), (1, 2), (2, 1), "SAME"),      # depthwise-like, 2 per group
]


@pytest.mark.parametrize("xs, ws, ss, ds, padding", CASES_2D)
def test_grouped_conv2d_gradient(xs, ws, ss, ds, padding):
    rng = np.random.default_rng(sum(xs) + sum(ws))
    check_grads(lambda x, w: ops.nn.conv2d(x, w, [1, *ss, 1], padding, dilations=[1, *ds, 1]),
                [values(rng, xs), values(rng, ws)], (0, 1))


def test_grouped_conv3d_gradient():
    rng = np.random.default_rng(3)
    check_grads(lambda x, w: ops.nn.conv3d(x, w, [1, 1, 2, 1, 1], "SAME"),
                [values(rng, (1, 3, 4, 3, 4)), values(rng, (2, 2, 2, 2, 4))], (0, 1))


def test_grouped_conv_gradients_compiled():
    rng = np.random.default_rng(8)
    compiled_grads("grouped_conv2d_grad",
                   lambda x, w: ops.nn.conv2d(x, w, [1, 2, 1, 1], "SAME"),
                   [values(rng, (2, 5, 4, 6)), values(rng, (3, 2, 3, 4))], (0, 1))
