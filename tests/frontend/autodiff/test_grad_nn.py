"""Gradients of contractions, softmax and losses, normalization, convolution and
pooling: against central finite differences (float64, reference evaluator) over
hypothesis-drawn shapes, and against the analytic gradients of the ML losses."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.frontend import grad, ops

from .util import check_grads, values

SEED = st.integers(0, 2**31)
DIM = st.integers(1, 3)


@settings(max_examples=8)
@given(m=DIM, k=DIM, n=DIM, ta=st.booleans(), tb=st.booleans(), seed=SEED)
def test_matmul_gradient(m, k, n, ta, tb, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (k, m) if ta else (m, k))
    b = values(rng, (n, k) if tb else (k, n))
    check_grads(lambda a, b: ops.matmul(a, b, transpose_a=ta, transpose_b=tb), [a, b], (0, 1))


@settings(max_examples=8)
@given(m=DIM, k=DIM, n=DIM, adj=st.tuples(st.booleans(), st.booleans()),
       batch=st.sampled_from([((2,), (2,)), ((2,), (1,)), ((1, 2), (3, 1)), ((), (2,))]),
       seed=SEED)
def test_batch_matmul_gradient_with_broadcast_batch(m, k, n, adj, batch, seed):
    rng = np.random.default_rng(seed)
    bx, by = batch
    x = values(rng, bx + ((k, m) if adj[0] else (m, k)))
    y = values(rng, by + ((n, k) if adj[1] else (k, n)))
    if len(bx) == 0:
        x = x[None]
    check_grads(lambda x, y: ops.batch_matmul(x, y, adj_x=adj[0], adj_y=adj[1]), [x, y], (0, 1))


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 2)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 1)]),
    ("ij,kj->ki", [(2, 3), (2, 3)]), ("ijk,jl->li", [(2, 3, 2), (3, 2)]),
    ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ij,j->i", [(2, 3), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]), ("...ij,...j->...i", [(2, 2, 3), (2, 3)]),
])
def test_einsum_gradient(equation, shapes):
    rng = np.random.default_rng(0)
    args = [values(rng, s) for s in shapes]
    check_grads(lambda *a: ops.einsum(equation, *a), args, tuple(range(len(args))))


@settings(max_examples=6)
@given(shape=st.lists(DIM, min_size=2, max_size=3).map(tuple), seed=SEED,
       nchw=st.booleans())
def test_bias_add_gradient(shape, seed, nchw):
    rng = np.random.default_rng(seed)
    channels = shape[1] if nchw else shape[-1]
    fmt = "NCHW" if nchw else "NHWC"
    check_grads(lambda x, b: ops.bias_add(x, b, data_format=fmt),
                [values(rng, shape), values(rng, (channels,))], (0, 1))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@settings(max_examples=6)
@given(shape=st.lists(DIM, min_size=1, max_size=3).map(tuple), seed=SEED)
def test_softmax_gradients(op, shape, seed):
    axis = seed % len(shape) - len(shape)
    fn = getattr(ops, op)
    check_grads(lambda x: fn(x, axis=axis), [values(np.random.default_rng(seed), shape) * 3])


def _numpy_log_softmax(x):
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


@settings(max_examples=6)
@given(batch=DIM, classes=st.integers(2, 4), seed=SEED)
def test_cross_entropy_gradients_match_analytic_and_numeric(batch, classes, seed):
    rng = np.random.default_rng(seed)
    logits = values(rng, (batch, classes)) * 3
    labels = rng.dirichlet(np.ones(classes), size=batch)
    loss = lambda lg, lb: ops.reduce_mean(            # noqa: E731
        ops.softmax_cross_entropy_with_logits(lb, lg))
    g_logits, g_labels = grad(loss, (0, 1), backend="interpreter")(logits, labels)
    logp = _numpy_log_softmax(logits)
    np.testing.assert_allclose(g_logits, (np.exp(logp) - labels) / batch, rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(g_labels, -logp / batch, rtol=1e-12, atol=1e-14)
    check_grads(lambda lg, lb: ops.softmax_cross_entropy_with_logits(lb, lg),
                [logits, labels], (0, 1))


@settings(max_examples=6)
@given(batch=DIM, classes=st.integers(2, 4), seed=SEED)
def test_sparse_cross_entropy_gradient_is_softmax_minus_one_hot(batch, classes, seed):
    rng = np.random.default_rng(seed)
    logits = values(rng, (batch, classes)) * 3
    labels = rng.integers(0, classes, size=batch).astype(np.int32)
    loss = lambda lg: ops.reduce_sum(                # noqa: E731
        ops.sparse_softmax_cross_entropy_with_logits(labels, lg))
    got = grad(loss, backend="interpreter")(logits)
    np.testing.assert_allclose(got, np.exp(_numpy_log_softmax(logits)) -
                               np.eye(classes)[labels], rtol=1e-12, atol=1e-14)
    check_grads(lambda lg: ops.sparse_softmax_cross_entropy_with_logits(labels, lg), [logits])


def test_cross_entropy_gradient_is_stable_for_huge_logits():
    logits = np.array([[1000.0, -1000.0, 0.0]])
    g = grad(lambda lg: ops.reduce_sum(ops.sparse_softmax_cross_entropy_with_logits(
        np.array([1], np.int32), lg)), backend="interpreter")(logits)
    np.testing.assert_allclose(g, [[1.0, -1.0, 0.0]], atol=1e-12)


@settings(max_examples=6)
@given(shape=st.lists(st.integers(2, 3), min_size=2, max_size=3).map(tuple), seed=SEED,
       two_axes=st.booleans())
def test_layer_norm_gradient(shape, seed, two_axes):
    rng = np.random.default_rng(seed)
    axis = (0, len(shape) - 1) if two_axes else -1
    pshape = (shape[0], shape[-1]) if two_axes else (shape[-1],)
    check_grads(lambda x, g, b: ops.layer_norm(x, g, b, axis=axis),
                [values(rng, shape), values(rng, pshape), values(rng, pshape)], (0, 1, 2),
                rtol=1e-4, atol=1e-5)


@settings(max_examples=6)
@given(shape=st.lists(st.integers(2, 3), min_size=1, max_size=3).map(tuple), seed=SEED)
def test_rms_norm_gradient(shape, seed):
    rng = np.random.default_rng(seed)
    check_grads(lambda x, g: ops.rms_norm(x, g), [values(rng, shape),
                                                  values(rng, shape[-1:])], (0, 1))


@st.composite
def conv_case(draw):
    n, c, o = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    strides = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilations = (1, 1) if max(strides) > 1 else (draw(st.integers(1, 2)),) * 2
    padding = draw(st.sampled_from(["SAME", "VALID", ((1, 0), (0, 2))]))
    h = draw(st.integers((kh - 1) * dilations[0] + 1, 5))
    w = draw(st.integers((kw - 1) * dilations[1] + 1, 5))
    return (n, h, w, c), (kh, kw, c, o), strides, dilations, padding


@settings(max_examples=10)
@given(case=conv_case(), seed=SEED)
def test_conv2d_gradient(case, seed):
    xs, ws, strides, dilations, padding = case
    rng = np.random.default_rng(seed)
    check_grads(lambda x, w: ops.conv2d(x, w, strides, padding, dilations=dilations),
                [values(rng, xs), values(rng, ws)], (0, 1))


@settings(max_examples=6)
@given(case=conv_case(), multiplier=st.integers(1, 2), seed=SEED)
def test_depthwise_conv2d_gradient(case, multiplier, seed):
    xs, (kh, kw, c, _), strides, dilations, padding = case
    rng = np.random.default_rng(seed)
    check_grads(lambda x, w: ops.depthwise_conv2d(x, w, strides, padding,
                                                  dilations=dilations),
                [values(rng, xs), values(rng, (kh, kw, c, multiplier))], (0, 1))


@st.composite
def pool_case(draw):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    shape = (draw(st.integers(1, 2)), draw(st.integers(k[0], 5)), draw(st.integers(k[1], 5)),
             draw(st.integers(1, 2)))
    return shape, k, s, padding


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@settings(max_examples=8)
@given(case=pool_case(), seed=SEED)
def test_pool_gradient(op, case, seed):
    shape, k, s, padding = case
    x = values(np.random.default_rng(seed), shape)
    check_grads(lambda x: getattr(ops, op)(x, k, s, padding), [x])
