"""Conv2D, DepthwiseConv2dNative, MaxPool and AvgPool (NHWC) against direct numpy
references: strides, dilations, SAME/VALID/explicit padding, groups."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlapy.frontend import ops

from .util import assert_close, compiled, interpret, random_array, seeds


def tf_same_padding(size, k, s, d=1):
    """TensorFlow's SAME: ceil(size / s) outputs, the odd pixel of padding after."""
    extent = (k - 1) * d + 1
    total = max((math.ceil(size / s) - 1) * s + extent - size, 0)
    return total // 2, total - total // 2


def pads_for(padding, x_shape, k, s, d):
    if padding == "VALID":
        return [(0, 0), (0, 0)]
    if padding == "SAME":
        return [tf_same_padding(x_shape[1 + i], k[i], s[i], d[i]) for i in range(2)]
    return padding


def windows(x, k, s, d, pads, fill=0.0):
    """Yields (i, j, patch[n, oh, ow, c]) for every kernel tap."""
    xp = np.pad(x, [(0, 0), pads[0], pads[1], (0, 0)], constant_values=fill)
    oh = (xp.shape[1] - ((k[0] - 1) * d[0] + 1)) // s[0] + 1
    ow = (xp.shape[2] - ((k[1] - 1) * d[1] + 1)) // s[1] + 1
    for i in range(k[0]):
        for j in range(k[1]):
            yield i, j, xp[:, i * d[0]: i * d[0] + (oh - 1) * s[0] + 1: s[0],
                           j * d[1]: j * d[1] + (ow - 1) * s[1] + 1: s[1], :]


def np_conv2d(x, w, s, padding, d, groups=1):
    kh, kw, ci, co = w.shape
    pads = pads_for(padding, x.shape, (kh, kw), s, d)
    out = 0
    for i, j, patch in windows(x.astype(np.float64), (kh, kw), s, d, pads):
        n, oh, ow, _ = patch.shape
        p = patch.reshape(n, oh, ow, groups, ci)
        wk = w[i, j].astype(np.float64).reshape(ci, groups, co // groups)
        out = out + np.einsum("nhwgc,cgo->nhwgo", p, wk).reshape(n, oh, ow, co)
    return out


@st.composite
def conv_cases(draw):
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = draw(st.sampled_from(["SAME", "VALID", [(1, 0), (0, 2)]]))
    if padding == "VALID" or not isinstance(padding, str):
        pads = pads_for(padding, (n, h, w, c), k, s, d)
        for i, size in enumerate((h, w)):
            if size + sum(pads[i]) < (k[i] - 1) * d[i] + 1:
                padding = "SAME"            # the window would not fit at all
    return (n, h, w, c), k, s, d, padding


@settings(max_examples=20)
@given(case=conv_cases(), out=st.integers(1, 3), groups=st.sampled_from([1, 2]), seed=seeds)
def test_conv2d(case, out, groups, seed):
    (n, h, w, c), k, s, d, padding = case
    rng = np.random.default_rng(seed)
    x = random_array(rng, (n, h, w, c * groups), np.float32)
    f = random_array(rng, (*k, c, out * groups), np.float32)
    got = interpret(lambda a, b: ops.conv2d(a, b, strides=s, padding=padding, dilations=d), x, f)
    assert_close(got, np_conv2d(x, f, s, padding, d, groups), scale=20)


@settings(max_examples=15)
@given(case=conv_cases(), mult=st.integers(1, 2), seed=seeds)
def test_depthwise_conv2d(case, mult, seed):
    (n, h, w, c), k, s, d, padding = case
    rng = np.random.default_rng(seed)
    x = random_array(rng, (n, h, w, c), np.float32)
    f = random_array(rng, (*k, c, mult), np.float32)
    got = interpret(lambda a, b: ops.depthwise_conv2d(a, b, s, padding, dilations=d), x, f)
    pads = pads_for(padding, x.shape, k, s, d)
    want = 0
    for i, j, patch in windows(x.astype(np.float64), k, s, d, pads):
        want = want + np.einsum("nhwc,cm->nhwcm", patch, f[i, j]).reshape(
            patch.shape[:3] + (c * mult,))
    assert_close(got, want, scale=20)


@settings(max_examples=20)
@given(case=conv_cases(), seed=seeds)
def test_pools(case, seed):
    (n, h, w, c), k, s, _, padding = case
    padding = padding if isinstance(padding, str) else "SAME"
    if padding == "VALID" and (h < k[0] or w < k[1]):
        padding = "SAME"
    x = random_array(np.random.default_rng(seed), (n, h, w, c), np.float32)
    got = interpret(lambda a: (ops.max_pool2d(a, k, s, padding),
                               ops.avg_pool2d(a, k, s, padding)), x)
    pads = pads_for(padding, x.shape, k, s, (1, 1))
    taps = list(windows(x.astype(np.float64), k, s, (1, 1), pads, fill=np.nan))
    stack = np.stack([p for _, _, p in taps])
    assert_close(got[0], np.nanmax(stack, axis=0))
    assert_close(got[1], np.nanmean(stack, axis=0), scale=10)


def test_conv_pool_compiled():
    rng = np.random.default_rng(7)
    x = random_array(rng, (2, 9, 9, 3), np.float32)
    f = random_array(rng, (3, 3, 3, 4), np.float32)
    got = compiled("conv_same_s2", lambda a, b: ops.conv2d(a, b, [1, 2, 2, 1], "SAME"), x, f)
    assert_close(got, np_conv2d(x, f, (2, 2), "SAME", (1, 1)), scale=20)
    got = compiled("pools", lambda a: (ops.max_pool2d(a, 2, 2, "VALID"), ops.avg_pool2d(a, 3, 2, "SAME")),
                   x)
    taps = np.stack([p for _, _, p in windows(x.astype(np.float64), (2, 2), (2, 2), (1, 1),
                                              [(0, 0), (0, 0)])])
    assert_close(got[0], taps.max(0))
    pads = pads_for("SAME", x.shape, (3, 3), (2, 2), (1, 1))
    taps = np.stack([p for _, _, p in windows(x.astype(np.float64), (3, 3), (2, 2), (1, 1),
                                              pads, fill=np.nan)])
    assert_close(got[1], np.nanmean(taps, 0), scale=10)


def test_conv_errors_name_op_and_shapes():
    x, f = np.zeros((1, 5, 5, 3), np.float32), np.zeros((3, 3, 2, 4), np.float32)
    with pytest.raises(ValueError, match=r"Conv2D: input channels 3 .*float32\[1,5,5,3\]"):
        interpret(lambda a, b: ops.conv2d(a, b, 1, "VALID"), x, f)
    with pytest.raises(ValueError, match="padding must be"):
        interpret(lambda a: ops.max_pool2d(a, 2, 2, "FULL"), x)


@settings(max_examples=10)
@given(case=conv_cases(), seed=seeds)
def test_conv_compiled_hypothesis(case, seed):
    """Compiled convolution and max pooling over drawn windows, strides, paddings."""
    (n, h, w, c), k, s, d, padding = case
    rng = np.random.default_rng(seed)
    x = random_array(rng, (n, h, w, c), np.float32)
    f = random_array(rng, (*k, c, 2), np.float32)
    got = compiled(f"conv_h_{k}_{s}_{d}_{padding}",
                   lambda a, b: ops.conv2d(a, b, strides=s, padding=padding, dilations=d), x, f)
    assert_close(got, np_conv2d(x, f, s, padding, d), scale=20)
