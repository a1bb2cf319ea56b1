"""The ops of issue 18's list that the frontend lacked: values against numpy (or the
standard library / mpmath for special functions) on edge shapes and values, gradients
against finite differences (tests/frontend/autodiff/util.check_grads), and a compiled
run per family."""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from xlapy.frontend import ops

from .autodiff.util import check_grads
from .util import assert_close, compiled, interpret

RNG = np.random.default_rng(0)


def _x(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape)


# --- elementwise special functions ----------------------------------------------------------

_vec = np.vectorize
SPECIAL = {   # name -> (function, reference in float64, domain (lo, hi), rtol f64)
    "asin": (ops.asin, np.arcsin, (-0.99, 0.99)),
    "acos": (ops.acos, np.arccos, (-0.99, 0.99)),
    "atan": (ops.atan, np.arctan, (-5, 5)),
    "sinh": (ops.sinh, np.sinh, (-5, 5)),
    "cosh": (ops.cosh, np.cosh, (-5, 5)),
    "asinh": (ops.asinh, np.arcsinh, (-5, 5)),
    "acosh": (ops.acosh, np.arccosh, (1.01, 5)),
    "atanh": (ops.atanh, np.arctanh, (-0.99, 0.99)),
    "erfc": (ops.erfc, _vec(math.erfc), (-3, 6)),
    "erfinv": (ops.erfinv, _vec(lambda v: float(mpmath.erfinv(v))), (-0.999, 0.999)),
    "lgamma": (ops.lgamma, _vec(math.lgamma), (-4.5, 12)),
    "digamma": (ops.digamma, _vec(lambda v: float(mpmath.digamma(v))), (-4.5, 12)),
}


@pytest.mark.parametrize("name", sorted(SPECIAL))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_special_function_values(name, dtype):
    fn, ref, (lo, hi) = SPECIAL[name]
    x = np.linspace(lo, hi, 97)
    if name in ("lgamma", "digamma"):
        x = x[np.abs(x - np.round(x)) > 0.05]          # away from the poles
    got = interpret(fn, x.astype(dtype))
    want = ref(x.astype(dtype).astype(np.float64))
    rtol = 2e-13 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=name)


def test_special_function_edges():
    inf, nan = np.inf, np.nan
    f = lambda t: (ops.asin(t), ops.atanh(t), ops.erfinv(t), ops.acosh(t),  # noqa: E731
                   ops.asinh(t), ops.sinh(t), ops.cosh(t), ops.erfc(t))
    x = np.array([-1.0, 1.0, 2.0, 0.0, -0.0, 1e300, -1e300])
    asin, atanh, erfinv, acosh, asinh, sinh, cosh, erfc = interpret(f, x)
    np.testing.assert_allclose(asin[:2], [-np.pi / 2, np.pi / 2])
    assert np.isnan(asin[2]) and np.isnan(atanh[2]) and np.isnan(erfinv[2])
    assert atanh[:2].tolist() == [-inf, inf] and erfinv[:2].tolist() == [-inf, inf]
    assert np.isnan(acosh[0]) and acosh[1] == 0
    np.testing.assert_allclose(asinh[5:], [np.arcsinh(1e300), -np.arcsinh(1e300)])
    assert sinh[5:].tolist() == [inf, -inf] and cosh[5] == inf
    assert erfc[5] == 0 and erfc[6] == 2
    g = interpret(lambda t: (ops.lgamma(t), ops.digamma(t)), np.array([0.0, -2.0, inf, 1, 2]))
    assert g[0][:3].tolist() == [inf, inf, inf] and np.abs(g[0][3:]).max() < 1e-14
    assert np.isnan(g[1][:2]).all() and g[1][2] == inf
    np.testing.assert_allclose(g[1][3], -0.5772156649015329, rtol=1e-13)
    # erfc far in the tail keeps its relative accuracy (1 - erf would be 0)
    np.testing.assert_allclose(interpret(ops.erfc, np.array([10.0, 25.0])),
                               [math.erfc(10.0), math.erfc(25.0)], rtol=1e-13)


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_function_gradients(name):
    fn, _, (lo, hi) = SPECIAL[name]
    x = {"erfinv": np.linspace(-0.9, 0.9, 7), "acosh": np.linspace(1.2, 4.0, 7),
         "lgamma": np.array([-3.5, -0.7, 0.3, 1.5, 4.2, 9.9]),
         "digamma": np.array([-3.5, -0.7, 0.3, 1.5, 4.2, 9.9])}.get(
             name, np.linspace(lo * 0.9 + 0.05, hi * 0.9, 7))
    check_grads(fn, [x], rtol=1e-5, atol=1e-6)


def test_binary_special_values_and_gradients():
    x, y = np.array([0.0, 0.0, 2.0, -1.5, 3.0]), np.array([0.0, 2.0, 0.5, 3.0, -0.5])
    got = interpret(lambda a, b: (ops.xlogy(a, b), ops.xlog1py(a, b), ops.atan2(a, b),
                                  ops.divide_no_nan(b, a), ops.squared_difference(a, b),
                                  ops.reciprocal(b + 1.0)), x, y)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got[0], np.where(x == 0, 0, x * np.log(y)))
        np.testing.assert_allclose(got[1], np.where(x == 0, 0, x * np.log1p(y)))
        np.testing.assert_allclose(got[2], np.arctan2(x, y))
        np.testing.assert_allclose(got[3], np.where(x == 0, 0, y / x))
    np.testing.assert_allclose(got[4], (x - y) ** 2)
    np.testing.assert_allclose(got[5], 1 / (y + 1))
    a, b = _x(4) + 3.0, _x(4) + 3.0
    for f in (ops.xlogy, ops.xlog1py, ops.atan2, ops.divide_no_nan, ops.squared_difference):
        check_grads(f, [a, b], (0, 1))
    # TF's convention: no gradient at x == 0 (not NaN from log(0))
    g = check_grads(ops.xlogy, [np.array([0.0, 1.0]), np.array([1.0, 2.0])], (0, 1))
    assert np.isfinite(g[0]).all()


def test_predicates_and_small_activations():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -2.0, 3.0])
    got = interpret(lambda t: (ops.is_nan(t), ops.is_inf(t), ops.is_finite(t),
                               ops.log_sigmoid(t), ops.nn.softsign(t),
                               ops.logical_xor(t > 0, t < 1)), x)
    assert got[0].tolist() == [True, False, False, False, False, False]
    assert got[1].tolist() == [False, True, True, False, False, False]
    assert got[2].tolist() == [False, False, False, True, True, True]
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got[3][1:], -np.logaddexp(0, -x[1:]))
    np.testing.assert_allclose(got[4][3:], x[3:] / (1 + np.abs(x[3:])))
    assert got[5].tolist() == list(np.logical_xor(x > 0, x < 1))
    v = _x(2, 3)
    crelu = interpret(lambda t: ops.nn.crelu(t, axis=0), v)
    np.testing.assert_array_equal(crelu, np.concatenate([np.maximum(v, 0), np.maximum(-v, 0)]))
    for f in (ops.log_sigmoid, ops.nn.softsign, ops.nn.crelu):
        check_grads(f, [v + np.sign(v) * 0.1])


# --- reductions, scans, norms ----------------------------------------------------------------

@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, True), ((0, 2), False)])
def test_statistics(axis, keepdims):
    x = _x(3, 4, 2)
    got = interpret(lambda t: (ops.reduce_variance(t, axis, keepdims),
                               ops.reduce_std(t, axis, keepdims),
                               ops.reduce_euclidean_norm(t, axis, keepdims),
                               ops.count_nonzero(t > 0, axis, keepdims)), x)
    assert_close(got[0], np.var(x, axis=axis, keepdims=keepdims))
    assert_close(got[1], np.std(x, axis=axis, keepdims=keepdims))
    assert_close(got[2], np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)))
    np.testing.assert_array_equal(got[3], np.count_nonzero(x > 0, axis=axis,
                                                           keepdims=keepdims))
    assert got[3].dtype == np.int64
    for f in (ops.reduce_variance, ops.reduce_std, ops.reduce_euclidean_norm):
        check_grads(lambda t, f=f: f(t, axis, keepdims), [x])
    ints = np.array([[3, 4], [0, 0]], np.int32)
    assert interpret(lambda t: ops.reduce_euclidean_norm(t, 1), ints).tolist() == [5, 0]


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_and_cumulative_logsumexp(exclusive, reverse):
    x = _x(3, 5, lo=0.5, hi=1.5)
    kw = dict(exclusive=exclusive, reverse=reverse)

    def np_scan(v, op, start):
        v = v[:, ::-1] if reverse else v
        out = op.accumulate(v, axis=1)
        if exclusive:
            out = np.concatenate([np.full((3, 1), start), out[:, :-1]], axis=1)
        return out[:, ::-1] if reverse else out
    got = interpret(lambda t: (ops.cumprod(t, 1, **kw),
                               ops.math.cumulative_logsumexp(t * 300, 1, **kw)), x)
    assert_close(got[0], np_scan(x, np.multiply, 1.0))
    assert_close(got[1], np_scan(x * 300, np.logaddexp, -np.inf))
    check_grads(lambda t: ops.cumprod(t, 1, **kw), [x])
    def finite_lse(t):                   # exclusive puts -inf first: no difference quotient
        out = ops.math.cumulative_logsumexp(t, 1, **kw)
        return ops.where(ops.is_finite(out), out, ops.zeros_like(out))
    check_grads(finite_lse, [x])
    got = compiled(f"cumlse_{exclusive}_{reverse}",
                   lambda t: ops.math.cumulative_logsumexp(t, 1, **kw), x.astype(np.float32))
    assert_close(got, np_scan(x, np.logaddexp, -np.inf), scale=5)


def test_cumulative_logsumexp_infinities():
    x = np.array([-np.inf, -np.inf, 0.0, np.inf, 1.0])
    got = interpret(ops.math.cumulative_logsumexp, x)
    assert got.tolist() == [-np.inf, -np.inf, 0.0, np.inf, np.inf]


def test_clip_by_norm_and_global_norm():
    t = np.array([[3.0, 4.0], [0.0, 0.0]])
    got = interpret(lambda a: (ops.clip_by_norm(a, 2.5), ops.clip_by_norm(a, 1.0, axes=[1]),
                               ops.clip_by_norm(a, 10.0)), t)
    np.testing.assert_allclose(got[0], t / 2)
    np.testing.assert_allclose(got[1], [[0.6, 0.8], [0, 0]])
    np.testing.assert_allclose(got[2], t)
    a, b = _x(3), _x(2, 2)
    (ca, none, cb), norm = interpret(lambda p, q: ops.clip_by_global_norm([p, None, q], 1.0),
                                     a, b)
    total = math.sqrt((a * a).sum() + (b * b).sum())
    assert none is None
    np.testing.assert_allclose(norm, total)
    np.testing.assert_allclose(ca, a / max(total, 1.0))
    np.testing.assert_allclose(cb, b / max(total, 1.0))
    check_grads(lambda p: ops.clip_by_norm(p, 1.0, axes=[1]), [_x(2, 3) * 2])


def test_stop_gradient():
    from xlapy.frontend import grad
    g = interpret(grad(lambda t: ops.reduce_sum(t * ops.stop_gradient(t))), np.array([2.0, 3.0]))
    assert g.tolist() == [2.0, 3.0]


# --- nn: normalization and losses -------------------------------------------------------------

def test_moments_and_batch_normalization():
    x = _x(4, 3, 2)
    mean, var = interpret(lambda t: ops.nn.moments(t, [0, 1]), x)
    assert_close(mean, x.mean((0, 1)))
    assert_close(var, x.var((0, 1)))
    m, v = interpret(lambda t: ops.nn.moments(t, [0], keepdims=True), x)
    assert m.shape == (1, 3, 2)
    check_grads(lambda t: ops.nn.moments(t, [0, 1])[1], [x])
    off, scale = _x(2), _x(2)
    got = interpret(lambda t, o, s: ops.nn.batch_normalization(t, x.mean((0, 1)),
                                                               x.var((0, 1)), o, s, 1e-3),
                    x, off, scale)
    assert_close(got, (x - x.mean((0, 1))) / np.sqrt(x.var((0, 1)) + 1e-3) * scale + off)
    check_grads(lambda t, o, s: ops.nn.batch_normalization(t, 0.5, 2.0, o, s, 1e-3),
                [x, off, scale], (0, 1, 2))


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_fused_batch_norm(data_format):
    x = _x(2, 3, 4, 5)
    c = 5 if data_format == "NHWC" else 3
    axes = (0, 1, 2) if data_format == "NHWC" else (0, 2, 3)
    view = (1, 1, 1, c) if data_format == "NHWC" else (1, c, 1, 1)
    scale, offset = _x(c), _x(c)
    y, mean, var = interpret(lambda t, s, o: ops.nn.fused_batch_norm(
        t, s, o, data_format=data_format), x, scale, offset)
    n = x.size // c
    want = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-3)
    assert_close(y, want * scale.reshape(view) + offset.reshape(view))
    assert_close(mean, x.mean(axes))
    assert_close(var, x.var(axes) * n / (n - 1))
    rm, rv = _x(c), _x(c, lo=0.5, hi=1.5)
    y2, m2, v2 = interpret(lambda t: ops.nn.fused_batch_norm(
        t, scale, offset, rm, rv, data_format=data_format, is_training=False), x)
    assert_close(y2, (x - rm.reshape(view)) / np.sqrt(rv.reshape(view) + 1e-3) *
                 scale.reshape(view) + offset.reshape(view))
    _, m3, v3 = interpret(lambda t: ops.nn.fused_batch_norm(
        t, scale, offset, rm, rv, data_format=data_format, exponential_avg_factor=0.25), x)
    assert_close(m3, 0.75 * rm + 0.25 * x.mean(axes))
    assert_close(v3, 0.75 * rv + 0.25 * x.var(axes) * n / (n - 1))
    check_grads(lambda t, s, o: ops.nn.fused_batch_norm(t, s, o, data_format=data_format)[0],
                [x, scale, offset], (0, 1, 2))


def test_l2_normalize_and_cross_entropies():
    x = _x(3, 4)
    got = interpret(lambda t: (ops.nn.l2_normalize(t, axis=1), ops.nn.l2_normalize(t * 0)), x)
    assert_close(got[0], x / np.linalg.norm(x, axis=1, keepdims=True))
    assert (got[1] == 0).all()
    check_grads(lambda t: ops.nn.l2_normalize(t, 0), [x])
    z = RNG.uniform(0, 1, size=(3, 4))
    x = x * 20
    got = interpret(lambda a, b: (ops.nn.sigmoid_cross_entropy_with_logits(labels=b, logits=a),
                                  ops.nn.weighted_cross_entropy_with_logits(b, a, 3.0)), x, z)
    log_p, log_q = -np.logaddexp(0, -x), -np.logaddexp(0, x)
    assert_close(got[0], -z * log_p - (1 - z) * log_q)
    assert_close(got[1], -3.0 * z * log_p - (1 - z) * log_q)
    x = x / 20 + np.sign(x) * 0.1
    check_grads(lambda a, b: ops.nn.sigmoid_cross_entropy_with_logits(b, a), [x, z], (0, 1))
    check_grads(lambda a, b: ops.nn.weighted_cross_entropy_with_logits(b, a, 0.5), [x, z],
                (0, 1))


# --- indexing, scatter, segments ---------------------------------------------------------------

def test_gather_nd_and_scatters():
    params = _x(3, 4, 2)
    idx = np.array([[0, 1], [2, 3], [0, 1]], np.int32)
    got = interpret(lambda p: ops.gather_nd(p, idx), params)
    np.testing.assert_array_equal(got, params[idx[:, 0], idx[:, 1]])
    check_grads(lambda p: ops.gather_nd(p, idx), [params])
    bidx = np.array([[[1], [0]], [[3], [3]], [[2], [1]]], np.int32)
    got = interpret(lambda p: ops.gather_nd(p, bidx, batch_dims=1), params)
    np.testing.assert_array_equal(got, np.stack([params[b, bidx[b, :, 0]] for b in range(3)]))
    base, upd = _x(3, 4, 2), _x(3, 2)
    want_add, want_upd = base.copy(), base.copy()
    want_max, want_min = base.copy(), base.copy()
    for (i, j), u in zip(idx, upd):
        want_add[i, j] += u
        want_upd[i, j] = u
        want_max[i, j] = np.maximum(want_max[i, j], u)
        want_min[i, j] = np.minimum(want_min[i, j], u)
    got = interpret(lambda t, u: (ops.tensor_scatter_nd_add(t, idx, u),
                                  ops.tensor_scatter_nd_max(t, idx, u),
                                  ops.tensor_scatter_nd_min(t, idx, u),
                                  ops.tensor_scatter_nd_update(t, idx[1:], u[1:]),
                                  ops.scatter_nd(idx, u, [3, 4, 2])), base, upd)
    np.testing.assert_allclose(got[0], want_add)
    np.testing.assert_allclose(got[1], want_max)
    np.testing.assert_allclose(got[2], want_min)
    want_upd = base.copy()
    want_upd[2, 3], want_upd[0, 1] = upd[1], upd[2]
    np.testing.assert_allclose(got[3], want_upd)
    np.testing.assert_allclose(got[4], want_add - base)
    for f in (ops.tensor_scatter_nd_add, ops.tensor_scatter_nd_max, ops.tensor_scatter_nd_min):
        check_grads(lambda t, u, f=f: f(t, idx, u), [base, upd], (0, 1))
    check_grads(lambda t, u: ops.tensor_scatter_nd_update(t, idx[1:], u), [base, upd[1:]],
                (0, 1))
    got = compiled("scatter_gather_nd", lambda t, u: (ops.tensor_scatter_nd_add(t, idx, u),
                                                     ops.gather_nd(t, bidx, batch_dims=1)),
                   base, upd)
    np.testing.assert_allclose(got[0], want_add)


def test_segments():
    data = _x(6, 2)
    ids = np.array([0, 0, 1, 3, 3, 3], np.int32)
    got = interpret(lambda d: (ops.math.segment_sum(d, ids), ops.math.segment_mean(d, ids),
                               ops.math.segment_max(d, ids),
                               ops.math.unsorted_segment_sum(d, ids[::-1], 5),
                               ops.math.unsorted_segment_max(d, ids, 5)), data)
    sums = np.stack([data[ids == s].sum(0) for s in range(4)])
    means = np.stack([data[ids == s].mean(0) if (ids == s).any() else np.zeros(2)
                      for s in range(4)])
    maxes = np.stack([data[ids == s].max(0) if (ids == s).any() else np.zeros(2)
                      for s in range(4)])
    assert_close(got[0], sums)
    assert_close(got[1], means)
    assert_close(got[2], maxes)
    assert_close(got[3], np.stack([data[ids[::-1] == s].sum(0) for s in range(5)]))
    assert got[4][2].tolist() == [-np.inf, -np.inf] and got[4][4][0] == -np.inf
    with pytest.raises(ValueError, match="segment_ids must be known at trace time"):
        interpret(lambda d, i: ops.math.segment_sum(d, i), data, ids)
    dropped = np.array([0, -1, 1, 7, 1, 0], np.int32)
    got = interpret(lambda d: ops.math.unsorted_segment_sum(d, dropped, 2), data)
    assert_close(got, np.stack([data[dropped == s].sum(0) for s in range(2)]))
    check_grads(lambda d: ops.math.unsorted_segment_sum(d, dropped, 2), [data])
    full = np.array([0, 2, 1, 2, 0, 1], np.int32)        # no empty segment (no -inf)
    check_grads(lambda d: ops.math.unsorted_segment_max(d, full, 3), [data])
    check_grads(lambda d: ops.math.segment_max(d, ids), [data])
    check_grads(lambda d: ops.math.segment_mean(d, ids), [data])


def test_reverse_roll_repeat():
    x = np.arange(24.0).reshape(2, 3, 4)
    got = interpret(lambda t: (ops.reverse(t, [0, 2]), ops.roll(t, 1, 2),
                               ops.roll(t, [-1, 5], [1, 2]), ops.repeat(t, 2, 1),
                               ops.repeat(t, [1, 0, 2], axis=1), ops.repeat(t, 2)), x)
    np.testing.assert_array_equal(got[0], x[::-1, :, ::-1])
    np.testing.assert_array_equal(got[1], np.roll(x, 1, 2))
    np.testing.assert_array_equal(got[2], np.roll(x, (-1, 5), (1, 2)))
    np.testing.assert_array_equal(got[3], np.repeat(x, 2, 1))
    np.testing.assert_array_equal(got[4], np.repeat(x, [1, 0, 2], 1))
    np.testing.assert_array_equal(got[5], np.repeat(x, 2))
    for f in (lambda t: ops.reverse(t, [1]), lambda t: ops.roll(t, 2, 0),
              lambda t: ops.repeat(t, [1, 0, 2], axis=1)):
        check_grads(f, [_x(2, 3, 4)])


@pytest.mark.parametrize("direction", ["ASCENDING", "DESCENDING"])
def test_sort_argsort_top_k(direction):
    x = np.array([[3.0, 1.0, np.nan, 1.0, -np.inf], [0.0, 2.0, 2.0, -1.0, 5.0]])
    got = interpret(lambda t: (ops.sort(t, direction=direction),
                               ops.argsort(t, direction=direction), ops.sort(t, 0)), x)
    key = x if direction == "ASCENDING" else -x
    order = np.argsort(np.where(np.isnan(key), np.inf, key), axis=-1, kind="stable")
    if direction == "DESCENDING":                    # NaN is the largest: first
        order = np.argsort(np.where(np.isnan(x), -np.inf, -x), axis=-1, kind="stable")
    np.testing.assert_array_equal(got[1], order)
    np.testing.assert_array_equal(got[0], np.take_along_axis(x, order, -1))
    np.testing.assert_array_equal(got[2], np.sort(x, 0))
    assert got[1].dtype == np.int32
    v = _x(3, 6)
    values, indices = interpret(lambda t: ops.math.top_k(t, 3), v)
    want = np.argsort(-v, axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(indices, want)
    np.testing.assert_array_equal(values, np.take_along_axis(v, want, -1))
    check_grads(lambda t: ops.sort(t, axis=0, direction=direction), [v])
    check_grads(lambda t: ops.math.top_k(t, 2)[0], [v])
    got = compiled(f"sort_{direction}", lambda t: ops.sort(t, direction=direction), v)
    np.testing.assert_array_equal(got, np.sort(v)[:, ::(1 if direction == "ASCENDING" else -1)])


def test_in_top_k_searchsorted_bincount():
    pred = np.array([[0.1, 0.9, 0.3], [0.5, 0.5, 0.2], [np.nan, 1.0, 0.0]])
    targets = np.array([2, 1, 0], np.int32)
    got = interpret(lambda p, t: (ops.math.in_top_k(t, p, 1), ops.math.in_top_k(t, p, 2)),
                    pred, targets)
    assert got[0].tolist() == [False, True, False] and got[1].tolist() == [True, True, False]
    seq = np.array([[1.0, 3.0, 3.0, 7.0], [0.0, 1.0, 2.0, 3.0]])
    vals = np.array([[3.0, 0.0, 8.0], [2.5, 3.0, -1.0]])
    got = interpret(lambda s, v: (ops.searchsorted(s, v), ops.searchsorted(s, v, "right")),
                    seq, vals)
    for side, g in zip(("left", "right"), got):
        np.testing.assert_array_equal(g, [np.searchsorted(s, v, side) for s, v in zip(seq, vals)])
    arr = np.array([1, 1, 3, 0, 7, 3], np.int32)
    w = _x(6)
    got = interpret(lambda a: (ops.math.bincount(arr), ops.math.bincount(arr, minlength=10),
                               ops.math.bincount(a, minlength=5, maxlength=5),
                               ops.math.bincount(arr, weights=w),
                               ops.math.bincount(arr.reshape(2, 3), axis=-1, minlength=8),
                               ops.math.bincount(arr, binary_output=True)), arr)
    np.testing.assert_array_equal(got[0], np.bincount(arr))
    np.testing.assert_array_equal(got[1], np.bincount(arr, minlength=10))
    np.testing.assert_array_equal(got[2], np.bincount(arr[arr < 5], minlength=5))
    np.testing.assert_allclose(got[3], np.bincount(arr, weights=w))
    np.testing.assert_array_equal(got[4], [np.bincount(r, minlength=8) for r in
                                           arr.reshape(2, 3)])
    np.testing.assert_array_equal(got[5], np.bincount(arr) > 0)


# --- tensors from nothing, shapes, linalg --------------------------------------------------------

def test_creation_and_shape_helpers():
    got = interpret(lambda s, e: (ops.linspace(0.0, 1.0, 5), ops.linspace(s, e, 4, axis=1),
                                  ops.eye(3, 2, batch_shape=[2], dtype="int32"),
                                  ops.unstack(ops.reshape(ops.range(6), [2, 3]), axis=1),
                                  ops.meshgrid([1, 2, 3], [4, 5]),
                                  ops.meshgrid([1, 2, 3], [4, 5], indexing="ij"),
                                  ops.sequence_mask([1, 3, 0], 4),
                                  ops.sequence_mask(np.array([2, 1]), dtype="float32")),
                    np.array([0.0, 1.0]), np.array([3.0, -1.0]))
    np.testing.assert_allclose(got[0], np.linspace(0, 1, 5))
    np.testing.assert_allclose(got[1], np.linspace([0.0, 1.0], [3.0, -1.0], 4, axis=1))
    assert got[1][:, -1].tolist() == [3.0, -1.0]
    np.testing.assert_array_equal(got[2], np.broadcast_to(np.eye(3, 2, dtype=np.int32),
                                                          (2, 3, 2)))
    assert [u.tolist() for u in got[3]] == [[0, 3], [1, 4], [2, 5]]
    for g, w in zip(got[4], np.meshgrid([1, 2, 3], [4, 5])):
        np.testing.assert_array_equal(g, w)
    for g, w in zip(got[5], np.meshgrid([1, 2, 3], [4, 5], indexing="ij")):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[6], np.arange(4) < np.array([[1], [3], [0]]))
    np.testing.assert_array_equal(got[7], (np.arange(2) < np.array([[2], [1]])) * 1.0)


@pytest.mark.parametrize("lower, upper", [(0, -1), (-1, 0), (1, 1), (0, 0), (-1, -1)])
def test_band_part(lower, upper):
    x = _x(2, 4, 5)
    i, j = np.arange(4)[:, None], np.arange(5)[None, :]
    keep = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    got = interpret(lambda t: ops.linalg.band_part(t, lower, upper), x)
    np.testing.assert_array_equal(got, np.where(keep, x, 0))


@pytest.mark.parametrize("ord, axis", [("euclidean", None), (1, None), (np.inf, 1), (3, 0),
                                       ("fro", (0, 1)), (1, (0, 1)), (np.inf, (0, 1)),
                                       ("euclidean", [1])])
def test_norm(ord, axis):
    x = _x(3, 4)
    got = interpret(lambda t: ops.norm(t, ord, axis), x)
    np_ord = None if ord == "euclidean" and not isinstance(axis, tuple) else ord
    if axis is None:
        want = np.linalg.norm(x.reshape(-1), np_ord)
    else:
        want = np.linalg.norm(x, np_ord, axis=tuple(axis) if isinstance(axis, (list, tuple))
                              and len(axis) == 2 else (axis[0] if isinstance(axis, list)
                                                       else axis))
    assert_close(got, want)
    check_grads(lambda t: ops.linalg.norm(t, ord, axis), [x])


# --- convolutions, pools, embeddings, images -------------------------------------------------

def _np_conv1d(x, w, stride):
    n, width, c = x.shape
    k, _, o = w.shape
    out = (width - k) // stride + 1
    return np.stack([np.einsum("nkc,kco->no", x[:, p * stride:p * stride + k], w)
                     for p in range(out)], 1)


def test_conv1d_pools1d_separable_and_transpose():
    x, w = _x(2, 9, 3), _x(3, 3, 4)
    got = interpret(lambda a, b: ops.nn.conv1d(a, b, 2, "VALID"), x, w)
    assert_close(got, _np_conv1d(x, w, 2))
    check_grads(lambda a, b: ops.nn.conv1d(a, b, 1, "SAME"), [x[:1, :5], w[:, :, :2]], (0, 1))
    got = interpret(lambda a: (ops.nn.max_pool1d(a, 3, 2, "VALID"),
                               ops.nn.avg_pool1d(a, 2, 2, "VALID")), x)
    assert_close(got[0], np.stack([x[:, p * 2:p * 2 + 3].max(1) for p in range(4)], 1))
    assert_close(got[1], np.stack([x[:, p * 2:p * 2 + 2].mean(1) for p in range(4)], 1))
    img, dw, pw = _x(1, 5, 5, 2), _x(3, 3, 2, 2), _x(1, 1, 4, 3)
    got = interpret(lambda a, b, c: ops.nn.separable_conv2d(a, b, c, [1, 1, 1, 1], "SAME"),
                    img, dw, pw)
    want = interpret(lambda a, b, c: ops.conv2d(ops.depthwise_conv2d(a, b, 1, "SAME"), c, 1,
                                                "VALID"), img, dw, pw)
    assert_close(got, want)
    # conv2d_transpose is the adjoint of conv2d: <conv2d(u, w), v> == <u, convT(v, w)>
    u, f = _x(1, 7, 6, 2), _x(3, 3, 2, 4)
    for strides, padding in ((2, "SAME"), (1, "VALID"), (2, "VALID")):
        v_shape = interpret(lambda a, b: ops.conv2d(a, b, strides, padding), u, f).shape
        v = _x(*v_shape)
        conv = interpret(lambda a, b: ops.conv2d(a, b, strides, padding), u, f)
        convt = interpret(lambda a, b: ops.nn.conv2d_transpose(a, b, u.shape, strides,
                                                               padding), v, f)
        assert convt.shape == u.shape
        np.testing.assert_allclose((conv * v).sum(), (u * convt).sum(), rtol=1e-10)
    check_grads(lambda a, b: ops.nn.conv2d_transpose(a, b, (1, 5, 5, 2), 2, "SAME"),
                [_x(1, 3, 3, 3), _x(3, 3, 2, 3)], (0, 1))


def test_embedding_lookup():
    params, ids = _x(5, 3) * 3, np.array([[0, 4], [4, 2]], np.int32)
    got = interpret(lambda p: (ops.nn.embedding_lookup(p, ids),
                               ops.nn.embedding_lookup([p], ids, max_norm=1.0)), params)
    np.testing.assert_array_equal(got[0], params[ids])
    rows = params[ids]
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    assert_close(got[1], rows / np.maximum(norms, 1.0))
    check_grads(lambda p: ops.nn.embedding_lookup(p, ids), [params])


def _np_resize_bilinear(x, h, w):
    def taps(n_in, n_out):
        pos = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
        lo = np.floor(pos)
        return (np.clip(lo, 0, n_in - 1).astype(int),
                np.clip(np.ceil(pos), 0, n_in - 1).astype(int), pos - lo)
    lo, hi, f = taps(x.shape[1], h)
    x = x[:, lo] + (x[:, hi] - x[:, lo]) * f[None, :, None, None]
    lo, hi, f = taps(x.shape[2], w)
    return x[:, :, lo] + (x[:, :, hi] - x[:, :, lo]) * f[None, None, :, None]


@pytest.mark.parametrize("size", [(8, 6), (2, 3), (4, 4), (1, 7)])
def test_image_resize(size):
    x = _x(2, 4, 4, 3)
    got = interpret(lambda t: (ops.image.resize(t, size),
                               ops.image.resize(t, size, method="nearest")), x)
    assert_close(got[0], _np_resize_bilinear(x, *size))
    rows = np.minimum(np.floor((np.arange(size[0]) + 0.5) * 4 / size[0]).astype(int), 3)
    cols = np.minimum(np.floor((np.arange(size[1]) + 0.5) * 4 / size[1]).astype(int), 3)
    np.testing.assert_array_equal(got[1], x[:, rows][:, :, cols])
    ints = (x * 10).astype(np.int32)
    got = interpret(lambda t: (ops.image.resize(t, size), ops.image.resize(t, size, "nearest")),
                    ints)
    assert got[0].dtype == np.float32 and got[1].dtype == np.int32
    check_grads(lambda t: ops.image.resize(t, size), [x[:1, :, :, :1]])


def test_special_functions_compiled_match_the_evaluator():
    fns = [SPECIAL[name][0] for name in sorted(SPECIAL)]
    x = np.linspace(-0.95, 3.5, 64).astype(np.float32)
    got = compiled("special_f32", lambda t: tuple(f(t) for f in fns), x)
    want = interpret(lambda t: tuple(f(t) for f in fns), x)
    for name, g, w in zip(sorted(SPECIAL), got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)
