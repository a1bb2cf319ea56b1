"""bfloat16 in the frontend: spellings and promotion, elementwise ops, matmul and
convolution, reductions, casts and gradients, against numpy computed in f32 from the
same bf16 inputs and rounded to bf16 once, with the bf16 tolerance (rtol = atol = 1e-2,
tests/corpus_util.py). Sums of bf16 (and f16) accumulate in f32 (as TF's XLA kernels do):
a sum of 1000 ones is 1000, not the 256 a bf16 accumulator stalls at. Both the
reference evaluator and the compiled CPU code are checked.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy.frontend import dtypes, grad, ops
from xlapy.frontend.elementwise_table import UNARY_ROWS

from .test_conv3d import np_conv3d
from .test_conv_pool import np_conv2d
from .util import compiled, interpret

BF16 = np.dtype(ml_dtypes.bfloat16)
RTOL = ATOL = 1e-2
BACKENDS = ["interpreter", "cpu"]


def run(backend, name, fn, *args):
    if backend == "cpu":
        return compiled(f"bf16_{name}", fn, *args)
    return interpret(fn, *args)


def bf16(rng, shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(BF16)


def f32(x):
    return np.asarray(x).astype(np.float32)


def rounded(x):
    """A float32 result rounded to bf16 once: what TF/XLA give for one bf16 op."""
    return np.asarray(x, np.float32).astype(BF16)


def check(got, want, scale=1.0):
    got = np.asarray(got)
    assert got.dtype == BF16, got.dtype
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want).astype(np.float64),
                               rtol=RTOL * scale, atol=ATOL * scale, equal_nan=True)


# --- spellings and promotion ----------------------------------------------------------------

def test_spellings_and_kind():
    for spelling in (ops.bfloat16, dtypes.bfloat16, "bfloat16", "bf16", ml_dtypes.bfloat16):
        assert dtypes.canonical(spelling) == BF16
    assert dtypes.hlo_name(BF16) == "bf16"
    assert dtypes.kind(BF16) == "float" and dtypes.is_float(BF16)
    assert ops.float32 == np.float32 and ops.bool == np.bool_ and ops.complex64 == np.complex64


@pytest.mark.parametrize("other, want", [
    (np.float16, np.float32), (np.float32, np.float32), (np.float64, np.float64),
    (np.int32, BF16), (np.int8, BF16), (np.bool_, BF16), (np.complex64, np.complex64)])
def test_promotion(other, want):
    assert dtypes.result_type(BF16, other) == want
    assert dtypes.result_type(other, BF16) == want
    x = np.ones(3, BF16)
    out = interpret(lambda a, b: a + b, x, np.ones(3, other))
    assert out.dtype == want


def test_weak_scalars_keep_bf16():
    x = np.array([1.5, -2.0, 3.0], BF16)
    out = interpret(lambda a: (a * 2.0, a + 1, ops.cast(a > 0, ops.bfloat16)), x)
    assert [o.dtype for o in out] == [BF16, BF16, BF16]
    check(out[0], f32(x) * 2)
    check(out[2], [1, 0, 1])


# --- elementwise ------------------------------------------------------------------------------

NUMPY_UNARY = {"negative": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log,
               "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
               "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "log1p": np.log1p,
               "expm1": np.expm1, "rsqrt": lambda x: 1 / np.sqrt(x), "floor": np.floor,
               "round": np.round, "square": np.square, "reciprocal": np.reciprocal}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", sorted(NUMPY_UNARY))
def test_unary_vs_numpy(backend, fn):
    x = bf16(np.random.default_rng(len(fn)), (3, 17), 0.2, 3.0)
    got = run(backend, f"u_{fn}", getattr(ops, fn), x)
    with np.errstate(all="ignore"):
        check(got, rounded(NUMPY_UNARY[fn](f32(x))))


@pytest.mark.parametrize("row", [r for r in UNARY_ROWS if r.function != "is_finite"],
                         ids=lambda r: r.function)
def test_every_unary_row_takes_bf16(row):
    """Each row computes in bf16 what it computes in f32, rounded (evaluator)."""
    x = bf16(np.random.default_rng(1), (2, 9), 0.2, 0.9)
    fn = getattr(ops, row.function)
    got = interpret(fn, x)
    check(got, rounded(interpret(fn, f32(x))))


NUMPY_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum,
                "pow": np.power, "atan2": np.arctan2, "squared_difference":
                lambda x, y: (x - y) ** 2}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", sorted(NUMPY_BINARY))
def test_binary_vs_numpy_with_broadcast(backend, fn):
    rng = np.random.default_rng(len(fn))
    x, y = bf16(rng, (4, 1, 5), 0.3, 2.0), bf16(rng, (3, 1), 0.3, 2.0)
    got = run(backend, f"b_{fn}", getattr(ops, fn), x, y)
    check(got, rounded(NUMPY_BINARY[fn](f32(x), f32(y))))


def test_comparisons_of_bf16():
    x = np.array([1.0, 2.0, np.nan, -np.inf], BF16)
    y = np.array([1.0, 1.0, 0.0, 0.0], BF16)
    got = interpret(lambda a, b: (a < b, a == b, a >= b), x, y)
    fx, fy = f32(x), f32(y)
    for g, w in zip(got, (fx < fy, fx == fy, fx >= fy)):
        np.testing.assert_array_equal(g, w)


# --- contractions and convolutions (f32 accumulation, one rounding) -------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_and_batch_matmul(backend):
    rng = np.random.default_rng(2)
    a, b = bf16(rng, (5, 64)), bf16(rng, (64, 3))
    got = run(backend, "matmul", lambda p, q: ops.matmul(p, q), a, b)
    check(got, rounded(f32(a) @ f32(b)))
    a3, b3 = bf16(rng, (2, 4, 16)), bf16(rng, (2, 16, 3))
    got = run(backend, "bmm", lambda p, q: ops.matmul(p, q, transpose_a=False), a3, b3)
    check(got, rounded(f32(a3) @ f32(b3)))
    got = run(backend, "einsum", lambda p, q: ops.einsum("bij,bjk->bk", p, q), a3, b3)
    check(got, rounded(np.einsum("bij,bjk->bk", f32(a3), f32(b3))), scale=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv2d_and_conv3d(backend):
    rng = np.random.default_rng(3)
    x, w = bf16(rng, (2, 6, 5, 3)), bf16(rng, (3, 3, 3, 4))
    got = run(backend, "conv2d", lambda p, q: ops.conv2d(p, q, 2, "SAME"), x, w)
    check(got, rounded(np_conv2d(f32(x), f32(w), (2, 2), "SAME", (1, 1))), scale=2)
    x, w = bf16(rng, (1, 4, 3, 4, 2)), bf16(rng, (2, 2, 2, 2, 3))
    got = run(backend, "conv3d", lambda p, q: ops.nn.conv3d(p, q, 1, "VALID"), x, w)
    check(got, rounded(np_conv3d(f32(x), f32(w), (1, 1, 1), "VALID", (1, 1, 1))), scale=2)


# --- reductions -------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions(backend):
    x = bf16(np.random.default_rng(4), (6, 40))
    got = run(backend, "reductions", lambda a: (
        ops.reduce_sum(a, 1), ops.reduce_mean(a), ops.reduce_max(a, 0), ops.reduce_min(a, 1),
        ops.reduce_logsumexp(a, 1), ops.softmax(a), ops.log_softmax(a), ops.cumsum(a, 1),
        ops.layer_norm(a), ops.reduce_prod(a[:, :3], 1)), x)
    fx = f32(x)
    e = np.exp(fx - fx.max(1, keepdims=True))
    lse = np.log(e.sum(1)) + fx.max(1)
    mean = fx.mean(1, keepdims=True)
    ln = (fx - mean) / np.sqrt(((fx - mean) ** 2).mean(1, keepdims=True) + 1e-3)
    wants = [fx.sum(1), fx.mean(), fx.max(0), fx.min(1), lse, e / e.sum(1, keepdims=True),
             fx - lse[:, None], np.cumsum(fx, 1), ln, fx[:, :3].prod(1)]
    scales = [4, 1, 1, 1, 1, 1, 1, 4, 2, 1]        # sums of 40 round near |sum| ~ 10
    for g, w, s in zip(got, wants, scales):
        check(g, rounded(w), scale=s)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sums_accumulate_in_f32(backend):
    """1000 ones: a bf16 accumulator stops at 256 (256 + 1 rounds to 256)."""
    ones = np.ones((2, 1000), BF16)
    got = run(backend, "accumulate", lambda a: (
        ops.reduce_sum(a, 1), ops.reduce_mean(a, 1) * 1000.0, ops.cumsum(a, 1)[:, -1],
        1.0 / ops.softmax(a * 0.0)[:, 0], ops.matmul(a, ops.transpose(a)),
        ops.avg_pool2d(ops.reshape(a, [1, 2, 1000, 1]), [1, 1000], 1, "VALID") * 1000.0,
        ops.einsum("ij->i", a), ops.exp(ops.reduce_logsumexp(a * 0.0, 1))), ones)
    for g in got:
        np.testing.assert_array_equal(np.asarray(g).astype(np.float32), 1000.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_f16_sums_accumulate_in_f32(backend):
    """The same for f16 (4000 ones; f16 steps by 2 above 2048): cumsum and avg_pool
    compiled gave 3998 while they summed in f16."""
    ones = np.ones((2, 4000), np.float16)
    got = run(backend, "accumulate_f16", lambda a: (
        ops.reduce_sum(a, 1), ops.cumsum(a, 1)[:, -1], ops.einsum("ij->i", a),
        ops.avg_pool2d(ops.reshape(a, [1, 2, 4000, 1]), [1, 4000], 1, "VALID") * 4000.0,
        ops.matmul(a, ops.transpose(a))), ones)
    for g in got:
        assert np.asarray(g).dtype == np.float16
        np.testing.assert_array_equal(np.asarray(g).astype(np.float32), 4000.0)


def test_avg_pools_and_max_pools():
    x = bf16(np.random.default_rng(5), (1, 5, 5, 2))
    got = interpret(lambda a: (ops.avg_pool2d(a, 3, 2, "SAME"), ops.max_pool2d(a, 3, 2, "SAME")),
                    x)
    want = interpret(lambda a: (ops.avg_pool2d(a, 3, 2, "SAME"), ops.max_pool2d(a, 3, 2, "SAME")),
                     f32(x))
    check(got[0], rounded(want[0]))
    check(got[1], rounded(want[1]))


# --- casts ------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_casts(backend):
    values = np.array([0.0, 1.0, -1.5, 3.1415927, 1e-3, 65504.0, 1e30, -np.inf, 257.0,
                       np.nan], np.float32)
    got = run(backend, "casts", lambda a: (ops.cast(a, ops.bfloat16),
                                           ops.cast(ops.cast(a, "bfloat16"), "float32"),
                                           ops.cast(ops.cast(a, "bf16"), "int32")), values)
    np.testing.assert_array_equal(got[0].view(np.uint16), values.astype(BF16).view(np.uint16))
    np.testing.assert_array_equal(got[1], values.astype(BF16).astype(np.float32))
    assert got[2].dtype == np.int32
    np.testing.assert_array_equal(got[2][:5], [0, 1, -1, 3, 0])


# --- gradients --------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_match_f32_rounded(backend):
    """bf16 gradients are the f32 gradients of the same inputs, rounded (within the
    tolerance: the backward pass rounds each intermediate to bf16)."""
    rng = np.random.default_rng(6)
    a, b = bf16(rng, (4, 16)), bf16(rng, (16, 3))
    x, w = bf16(rng, (1, 5, 5, 2)), bf16(rng, (3, 3, 2, 2))

    def loss(p, q, img, filt):
        h = ops.tanh(ops.matmul(p, q))
        return ops.reduce_sum(ops.softmax(h) * h) + \
            ops.reduce_mean(ops.conv2d(img, filt, 1, "SAME") ** 2)
    g = grad(loss, (0, 1, 2, 3))
    got = run(backend, "grads", g, a, b, x, w)
    want = interpret(g, f32(a), f32(b), f32(x), f32(w))
    for gb, gf in zip(got, want):
        assert np.asarray(gb).dtype == BF16
        check(gb, rounded(gf), scale=2)


def test_matmul_gradient_vs_numpy():
    rng = np.random.default_rng(7)
    a, b = bf16(rng, (3, 8)), bf16(rng, (8, 2))
    ga, gb = interpret(grad(lambda p, q: ops.reduce_sum(ops.matmul(p, q)), (0, 1)), a, b)
    check(ga, rounded(np.ones((3, 2), np.float32) @ f32(b).T))
    check(gb, rounded(f32(a).T @ np.ones((3, 2), np.float32)))



@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_precision_gradient_through_casts(backend):
    """f32 master weights cast to bf16 for the forward pass: the gradient flows back
    through both casts (it was cut at the bf16 cast: numpy does not count bfloat16
    as np.floating)."""
    rng = np.random.default_rng(8)
    w = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
    x = bf16(rng, (3, 8))

    def loss(w32, xb):
        y = ops.matmul(xb, ops.cast(w32, ops.bfloat16))
        return ops.reduce_sum(ops.cast(y, ops.float32) ** 2)
    g = run(backend, "mixed", grad(loss), w, x)
    assert g.dtype == np.float32
    y = f32(x) @ f32(w.astype(BF16))
    np.testing.assert_allclose(g, f32(x).T @ (2 * y), rtol=2e-2, atol=2e-2)


def test_random_draws_in_bf16():
    u, n, c = interpret(lambda l: (
        ops.random.stateless_uniform([4000], seed=[1, 2], dtype=ops.bfloat16),
        ops.random.stateless_normal([4000], seed=[3, 4], dtype="bfloat16"),
        ops.random.stateless_categorical(l, 5, seed=[5, 6])), np.zeros((2, 3), BF16))
    assert u.dtype == BF16 and n.dtype == BF16 and c.shape == (2, 5)
    u, n = f32(u), f32(n)
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.03
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1.0) < 0.1
