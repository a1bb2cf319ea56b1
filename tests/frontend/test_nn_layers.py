"""frontend.nn: Keras-style layers (init -> numpy params, apply inside a trace) against
numpy written here; Keras's defaults and initializer laws; gradients by finite
differences where attention composes several ops."""
from __future__ import annotations

import math

import numpy as np
import pytest

from xlapy.frontend import jit_compile, nn, value_and_grad


def interp(fn, *args):
    return jit_compile(fn, backend="interpreter", pipeline=None)(*args)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_dense_any_rank_and_activation():
    layer = nn.Dense(7, activation="relu")
    params = layer.init(0, (None, 5))
    assert params["kernel"].shape == (5, 7) and not params["bias"].any()
    params["bias"] = np.linspace(-1, 1, 7).astype(np.float32)
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    y = interp(layer.apply, params, x)
    np.testing.assert_allclose(y, np.maximum(x @ params["kernel"] + params["bias"], 0),
                               rtol=1e-5, atol=1e-6)
    y2 = jit_compile(nn.Dense(7, use_bias=False).apply)({"kernel": params["kernel"]}, x[0])
    np.testing.assert_allclose(y2, x[0] @ params["kernel"], rtol=1e-5, atol=1e-6)


def test_glorot_uniform_law_and_seeds():
    w = nn.glorot_uniform(1, (200, 300))
    limit = math.sqrt(6 / 500)
    assert w.dtype == np.float32 and np.abs(w).max() <= limit
    assert abs(w.std() - limit / math.sqrt(3)) < 0.02 * limit
    np.testing.assert_array_equal(w, nn.glorot_uniform(1, (200, 300)))
    assert not np.array_equal(w, nn.glorot_uniform(2, (200, 300)))
    assert nn.compute_fans((3, 3, 4, 8)) == (36.0, 72.0)
    e = nn.Embedding(50, 4).init(3)["embeddings"]
    assert e.shape == (50, 4) and np.abs(e).max() <= 0.05


def test_embedding():
    layer = nn.Embedding(10, 3)
    params = layer.init(0)
    ids = np.array([[1, 9, 0], [4, 4, 2]], np.int32)
    np.testing.assert_array_equal(interp(layer.apply, params, ids), params["embeddings"][ids])


def test_layer_normalization_keras_epsilon():
    layer = nn.LayerNormalization()
    assert layer.epsilon == 1e-3
    x = np.random.default_rng(1).standard_normal((4, 6)) * 3 + 1
    params = layer.init(0, x.shape, "float64")
    params["gamma"] = np.arange(1, 7, dtype=np.float64)
    params["beta"] = np.full(6, 0.5)
    y = interp(layer.apply, params, x)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3) * params["gamma"] + 0.5,
                               rtol=1e-12)
    two = nn.LayerNormalization(axis=(1, 2), epsilon=1e-5)
    x3 = np.random.default_rng(2).standard_normal((2, 3, 4))
    p3 = two.init(0, x3.shape, "float64")
    assert p3["gamma"].shape == (3, 4)
    m3, v3 = x3.mean((1, 2), keepdims=True), x3.var((1, 2), keepdims=True)
    np.testing.assert_allclose(interp(two.apply, p3, x3), (x3 - m3) / np.sqrt(v3 + 1e-5),
                               rtol=1e-12)


def mha_reference(params, q_in, v_in, mask=None):
    def proj(p, x):
        return np.einsum("btd,dhk->bthk", x, p["kernel"]) + p["bias"]
    q = proj(params["query"], q_in) / math.sqrt(params["query"]["kernel"].shape[-1])
    k = proj(params["key"], v_in)
    v = proj(params["value"], v_in)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    heads = np.einsum("bhqk,bkhd->bqhd", softmax(scores), v)
    return np.einsum("bqhd,hdo->bqo", heads, params["output"]["kernel"]) + \
        params["output"]["bias"]


def _mha_params(layer, rng, d, dtype=np.float64):
    params = layer.init(0, (None, None, d), dtype=dtype)
    for p in params.values():          # non-zero biases so they are checked too
        p["bias"] = rng.standard_normal(p["bias"].shape).astype(dtype)
    return params


def test_multi_head_attention_causal_and_masks():
    rng = np.random.default_rng(3)
    layer = nn.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4)
    params = _mha_params(layer, rng, 5)
    assert params["query"]["kernel"].shape == (5, 2, 3)
    assert params["output"]["kernel"].shape == (2, 4, 5)
    x = rng.standard_normal((2, 6, 5))
    plain = interp(lambda p, x: layer.apply(p, x, x), params, x)
    np.testing.assert_allclose(plain, mha_reference(params, x, x), rtol=1e-10, atol=1e-12)
    causal = interp(lambda p, x: layer.apply(p, x, x, use_causal_mask=True), params, x)
    tril = np.tril(np.ones((6, 6), bool))
    np.testing.assert_allclose(causal, mha_reference(params, x, x, tril), rtol=1e-10,
                               atol=1e-12)
    # the first position sees only itself: changing later positions does not move it
    x2 = x.copy()
    x2[:, 3:] += 1.0
    causal2 = interp(lambda p, x: layer.apply(p, x, x, use_causal_mask=True), params, x2)
    np.testing.assert_allclose(causal2[:, :3], causal[:, :3], rtol=1e-12)
    # cross attention, Tq != Tk, with an explicit [B, Tq, Tk] mask and the causal one
    v = rng.standard_normal((2, 8, 5))
    keep = rng.random((2, 6, 8)) > 0.3
    both = keep & (np.arange(6)[:, None] + 2 >= np.arange(8)[None, :])
    got = interp(lambda p, q, v, m: layer.apply(p, q, v, attention_mask=m,
                                                use_causal_mask=True), params, x, v, keep)
    np.testing.assert_allclose(got, mha_reference(params, x, v, both[:, None]), rtol=1e-10,
                               atol=1e-12)


def test_attention_gradient_by_finite_differences():
    rng = np.random.default_rng(4)
    layer = nn.MultiHeadAttention(num_heads=2, key_dim=2)
    params = _mha_params(layer, rng, 4)
    x = rng.standard_normal((1, 3, 4))
    w = rng.standard_normal((1, 3, 4))

    def loss(params, x, w):
        from xlapy.frontend import ops
        return ops.reduce_sum(layer.apply(params, x, x, use_causal_mask=True) * w)
    f = jit_compile(lambda p, x, w: value_and_grad(loss, argnums=(0, 1))(p, x, w),
                    backend="interpreter")
    _, (gp, gx) = f(params, x, w)
    eps = 1e-6
    for path in [("query", "kernel", (1, 0, 1)), ("key", "bias", (1, 1)),
                 ("value", "kernel", (3, 1, 0)), ("output", "kernel", (0, 1, 2))]:
        name, leaf, idx = path
        plus = {k: {kk: vv.copy() for kk, vv in v.items()} for k, v in params.items()}
        minus = {k: {kk: vv.copy() for kk, vv in v.items()} for k, v in params.items()}
        plus[name][leaf][idx] += eps
        minus[name][leaf][idx] -= eps
        fd = (f(plus, x, w)[0] - f(minus, x, w)[0]) / (2 * eps)
        assert abs(gp[name][leaf][idx] - fd) < 1e-6 * max(1, abs(fd)), path
    xp, xm = x.copy(), x.copy()
    xp[0, 1, 2] += eps
    xm[0, 1, 2] -= eps
    assert abs(gx[0, 1, 2] - (f(params, xp, w)[0] - f(params, xm, w)[0]) / (2 * eps)) < 1e-6


def conv_reference(x, k, stride, padding):
    kh, kw = k.shape[:2]
    if padding == "same":
        n, h, w_, c = x.shape
        oh, ow = -(-h // stride), -(-w_ // stride)
        ph = max((oh - 1) * stride + kh - h, 0)
        pw = max((ow - 1) * stride + kw - w_, 0)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    n, h, w_, c = x.shape
    oh, ow = (h - kh) // stride + 1, (w_ - kw) // stride + 1
    out = np.zeros((n, oh, ow, k.shape[-1]))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j] = np.einsum("nhwc,hwco->no", patch, k)
    return out


@pytest.mark.parametrize("padding,stride", [("valid", 1), ("same", 2)])
def test_conv2d(padding, stride):
    layer = nn.Conv2D(4, 3, strides=stride, padding=padding, activation="relu")
    x = np.random.default_rng(5).standard_normal((2, 7, 6, 3))
    params = layer.init(1, x.shape, "float64")
    assert params["kernel"].shape == (3, 3, 3, 4)
    params["bias"] = np.array([0.1, -0.2, 0.3, 0.0])
    y = interp(layer.apply, params, x)
    ref = np.maximum(conv_reference(x, params["kernel"], stride, padding) + params["bias"], 0)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)


def test_batch_normalization_training_and_inference():
    layer = nn.BatchNormalization()
    assert (layer.momentum, layer.epsilon) == (0.99, 1e-3)
    x = np.random.default_rng(6).standard_normal((8, 5, 3)) * 2 + 1
    params, state = layer.init(0, x.shape, "float64")
    params["gamma"] = np.array([1.0, 2.0, 0.5])
    y, new_state = interp(lambda p, s, x: layer.apply(p, s, x, training=True),
                          params, state, x)
    mean, var = x.mean((0, 1)), x.var((0, 1))
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3) * params["gamma"],
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(new_state["moving_mean"], 0.01 * mean, rtol=1e-12)
    np.testing.assert_allclose(new_state["moving_variance"], 0.99 + 0.01 * var, rtol=1e-12)
    y_inf, same = interp(lambda p, s, x: layer.apply(p, s, x), params, new_state, x)
    np.testing.assert_allclose(
        y_inf, (x - new_state["moving_mean"]) / np.sqrt(new_state["moving_variance"] + 1e-3)
        * params["gamma"], rtol=1e-12)
    np.testing.assert_array_equal(same["moving_mean"], new_state["moving_mean"])


def test_user_errors():
    with pytest.raises(ValueError, match="units"):
        nn.Dense(0)
    with pytest.raises(ValueError, match="activation"):
        nn.Dense(3, activation="nope")
    with pytest.raises(ValueError, match="padding"):
        nn.Conv2D(2, 3, padding="full")
    with pytest.raises(ValueError, match="initializer"):
        nn.Dense(3, kernel_initializer="he_magic")
    layer = nn.MultiHeadAttention(2, 4, dropout=0.5)
    params = layer.init(0, (1, 3, 8))
    x = np.ones((1, 3, 8), np.float32)
    with pytest.raises(ValueError, match="seed="):
        interp(lambda p, x: layer.apply(p, x, x, training=True), params, x)
