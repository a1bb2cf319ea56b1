"""Softmax family, normalization, losses, bias_add, matmul/batch-matmul/einsum
against numpy references (evaluator over hypothesis shapes; compiled checks)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlapy.frontend import ops

from .util import assert_close, compiled, interpret, random_array, seeds, shapes

F32_F64 = st.sampled_from([np.float32, np.float64])


def _x(shape, dtype=np.float32, seed=0, domain="any"):
    return random_array(np.random.default_rng(seed), shape, dtype, domain)


def np_log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def np_layer_norm(x, g, b, axis=-1, eps=1e-3):   # Keras's default epsilon
    m = x.mean(axis=axis, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axis, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


@settings(max_examples=20)
@given(shape=shapes(1, 3, min_side=1), data=st.data(), seed=seeds)
def test_softmax_and_log_softmax(shape, data, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    dtype = data.draw(F32_F64)
    x = _x(shape, dtype, seed) * 10          # large logits: the max shift matters
    got = interpret(lambda t: (ops.softmax(t, axis), ops.log_softmax(t, axis)), x)
    want = np_log_softmax(x.astype(np.float64), axis)
    assert_close(got[0], np.exp(want), scale=10)
    assert_close(got[1], want, scale=10)


def test_softmax_compiled_and_extreme_logits():
    x = np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]], np.float32)
    want = np.exp(np_log_softmax(x.astype(np.float64)))
    assert_close(interpret(ops.softmax, x), want)
    assert_close(compiled("softmax", ops.softmax, x), want, scale=10)
    y = _x((8, 40))
    assert_close(compiled("log_softmax", lambda t: ops.log_softmax(t, 0), y),
                 np_log_softmax(y.astype(np.float64), 0), scale=10)


@settings(max_examples=15)
@given(shape=shapes(2, 4, min_side=1), seed=seeds, data=st.data())
def test_bias_add(shape, seed, data):
    fmt = data.draw(st.sampled_from(["NHWC", "NCHW"]))
    x = _x(shape, seed=seed)
    c = shape[1] if fmt == "NCHW" else shape[-1]
    b = _x((c,), seed=seed + 1)
    got = interpret(lambda t, u: ops.bias_add(t, u, data_format=fmt), x, b)
    want = x + (b.reshape([-1] + [1] * (len(shape) - 2)) if fmt == "NCHW" else b)
    assert_close(got, want)


@settings(max_examples=15)
@given(shape=shapes(1, 3, min_side=1), seed=seeds, dtype=F32_F64)
def test_layer_norm_and_rms_norm(shape, seed, dtype):
    x, g, b = _x(shape, dtype, seed), _x(shape[-1:], dtype, seed + 1), _x(shape[-1:], dtype, 3)
    got = interpret(lambda t, u, v: (ops.layer_norm(t, u, v), ops.rms_norm(t, u),
                                     ops.layer_norm(t)), x, g, b)
    x64 = x.astype(np.float64)
    assert_close(got[0], np_layer_norm(x64, g, b), scale=50)
    rms = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * g
    assert_close(got[1], rms, scale=50)
    assert_close(got[2], np_layer_norm(x64, 1.0, 0.0), scale=50)


def test_layer_norm_compiled_and_multi_axis():
    x, g, b = _x((4, 3, 16)), _x((3, 16), seed=1), _x((3, 16), seed=2)
    got = compiled("layer_norm", lambda t, u, v: ops.layer_norm(t, u, v, axis=(-2, -1)), x, g, b)
    assert_close(got, np_layer_norm(x.astype(np.float64), g, b, axis=(1, 2)), scale=50)


@settings(max_examples=15)
@given(batch=shapes(0, 2, min_side=1), classes=st.integers(1, 6), seed=seeds)
def test_cross_entropy_losses(batch, classes, seed):
    rng = np.random.default_rng(seed)
    logits = _x(batch + (classes,), seed=seed) * 4
    labels = rng.integers(0, classes, size=batch).astype(np.int32)
    dense = rng.dirichlet(np.ones(classes), size=batch).astype(np.float32)
    got = interpret(lambda lo, la, d: (ops.sparse_softmax_cross_entropy_with_logits(la, lo),
                                       ops.softmax_cross_entropy_with_logits(d, lo)),
                    logits, labels, dense)
    logp = np_log_softmax(logits.astype(np.float64))
    sparse = -np.take_along_axis(logp, labels[..., None].astype(np.int64), -1)[..., 0]
    assert_close(got[0], sparse, scale=20)
    assert_close(got[1], -(dense * logp).sum(-1), scale=20)


def test_cross_entropy_compiled():
    logits, labels = _x((8, 10)) * 3, np.arange(8, dtype=np.int32) % 10
    got = compiled("sparse_ce", lambda lo, la: ops.reduce_mean(
        ops.sparse_softmax_cross_entropy_with_logits(la, lo)), logits, labels)
    logp = np_log_softmax(logits.astype(np.float64))
    assert_close(got, -logp[np.arange(8), labels].mean(), scale=20)


# --- matmul, batch matmul, einsum ------------------------------------------------------------

@settings(max_examples=20)
@given(m=st.integers(0, 5), k=st.integers(0, 5), n=st.integers(0, 5), ta=st.booleans(),
       tb=st.booleans(), dtype=st.sampled_from([np.float32, np.float64, np.int32]), seed=seeds)
def test_matmul(m, k, n, ta, tb, dtype, seed):
    a = _x((k, m) if ta else (m, k), dtype, seed)
    b = _x((n, k) if tb else (k, n), dtype, seed + 1)
    got = interpret(lambda x, y: ops.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b)
    assert_close(got, (a.T if ta else a).astype(np.float64) @ (b.T if tb else b), scale=10)


@settings(max_examples=20)
@given(pair=st.sampled_from([((2, 3, 4), (2, 4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                             ((4,), (2, 4, 3)), ((3, 4), (4,)), ((4,), (4,))]), seed=seeds)
def test_matmul_operator_numpy_semantics(pair, seed):
    a, b = _x(pair[0], seed=seed), _x(pair[1], seed=seed + 1)
    assert_close(interpret(lambda x, y: x @ y, a, b), a.astype(np.float64) @ b, scale=10)


def test_matmul_compiled():
    a, b = _x((16, 24)), _x((32, 24), seed=1)
    assert_close(compiled("matmul_tb", lambda x, y: ops.matmul(x, y, transpose_b=True), a, b),
                 a.astype(np.float64) @ b.T.astype(np.float64), scale=10)
    c, d = _x((3, 4, 5)), _x((5, 6), seed=2)
    assert_close(compiled("batch_matmul", lambda x, y: x @ y, c, d),
                 c.astype(np.float64) @ d, scale=10)


EINSUMS = [("ij,jk->ik", (3, 4), (4, 5)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
           ("ij,ij->i", (3, 4), (3, 4)), ("i,j->ij", (3,), (4,)),
           ("bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4)), ("ij,jk", (3, 4), (4, 2)),
           ("ijk,k->ji", (2, 3, 4), (4,)), ("ab,cd->", (2, 3), (3, 2)),
           ("ij->ji", (3, 4), None), ("ij->", (3, 4), None), ("ijk->ki", (2, 3, 4), None)]


@pytest.mark.parametrize("eq, sa, sb", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(eq, sa, sb):
    args = [_x(sa, seed=1)] + ([_x(sb, seed=2)] if sb else [])
    got = interpret(lambda *t: ops.einsum(eq, *t), *args)
    assert_close(got, np.einsum(eq, *[a.astype(np.float64) for a in args]), scale=10)


EINSUMS_BEYOND_TWO = [("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
                      ("ab,bc,cd,de", [(2, 3), (3, 4), (4, 2), (2, 3)]),
                      ("i,i,i->", [(4,), (4,), (4,)]),
                      ("bi,bj,bk->bijk", [(2, 3), (2, 4), (2, 5)]),
                      ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)]),
                      ("...ij,jk", [(7, 2, 3), (3, 4)]),
                      ("i...->...", [(2, 3, 4)])]


@pytest.mark.parametrize("eq, shapes", EINSUMS_BEYOND_TWO, ids=[e[0] for e in EINSUMS_BEYOND_TWO])
def test_einsum_many_operands_and_ellipsis(eq, shapes):
    args = [_x(s, seed=k) for k, s in enumerate(shapes)]
    got = interpret(lambda *t: ops.einsum(eq, *t), *args)
    assert_close(got, np.einsum(eq, *[a.astype(np.float64) for a in args]), scale=10)


def test_einsum_compiled_and_errors():
    a, b = _x((2, 3, 4)), _x((2, 4, 5), seed=1)
    assert_close(compiled("einsum", lambda x, y: ops.einsum("bij,bjk->bik", x, y), a, b),
                 np.einsum("bij,bjk->bik", a.astype(np.float64), b), scale=10)
    with pytest.raises(ValueError, match="letter 'i' has sizes 3 and 2"):
        interpret(lambda x: ops.einsum("ii->i", x), np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="Einsum.*letter 'j'"):
        interpret(lambda x, y: ops.einsum("ij,jk->ik", x, y), a[0], b[0, :3])
    with pytest.raises(ValueError, match="rank 1"):
        interpret(lambda x: ops.einsum("...ij->...", x), np.zeros(3, np.float32))
    x, y, z = _x((2, 3)), _x((3, 4), seed=1), _x((4, 2), seed=2)
    assert_close(compiled("einsum3", lambda *t: ops.einsum("ij,jk,kl->il", *t), x, y, z),
                 np.einsum("ij,jk,kl->il", x.astype(np.float64), y, z), scale=10)


@settings(max_examples=12)
@given(shape=shapes(2, 3, min_side=1, max_side=6), seed=seeds, dtype=F32_F64)
def test_nn_compiled_hypothesis(shape, seed, dtype):
    """Compiled softmax, layer norm and a matmul over drawn shapes and dtypes."""
    x = _x(shape, dtype, seed) * 5
    w = _x(shape[-1:] + (3,), dtype, seed + 1)
    got = compiled("nn_h", lambda t, u: (ops.softmax(t), ops.layer_norm(t), t @ u), x, w)
    x64 = x.astype(np.float64)
    assert_close(got[0], np.exp(np_log_softmax(x64)), scale=10)
    assert_close(got[1], np_layer_norm(x64, 1.0, 0.0), scale=50)
    assert_close(got[2], x64 @ w, scale=10)
