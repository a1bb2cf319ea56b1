"""The TF-named ops whose semantics follow TensorFlow's documentation (issue 18, first
part): reduce_logsumexp, truncatediv/mod, einsum diagonals and `...` broadcasting,
gather(batch_dims=), pad REFLECT/SYMMETRIC, argmax's default axis, while_loop's
maximum_iterations (and its gradient), TF's parameter names, strided_slice masks, matmul
adjoint/output_type, where(condition), silu(beta), split(num=). Against numpy, and
gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import grad, ops, while_loop

from .autodiff.util import check_grads
from .util import assert_close, compiled, interpret


def _np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), (0, True),
                                            ((0, 1), False), (-1, True)])
def test_reduce_logsumexp(axis, keepdims):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4)) * 50          # exp would overflow without the shift
    got = interpret(lambda t: ops.reduce_logsumexp(t, axis, keepdims), x)
    assert_close(got, _np_logsumexp(x, axis, keepdims))
    assert_close(compiled(f"lse_{axis}_{keepdims}",
                          lambda t: ops.reduce_logsumexp(t, axis, keepdims),
                          x.astype(np.float32)),
                 _np_logsumexp(x, axis, keepdims), scale=10)


def test_reduce_logsumexp_infinities_and_gradient():
    x = np.array([[1.0, 2.0, -np.inf], [-np.inf, -np.inf, -np.inf], [0.0, np.inf, 1.0]],
                 np.float32)
    got = interpret(lambda t: ops.reduce_logsumexp(input_tensor=t, axis=1), x)
    np.testing.assert_allclose(got, [np.log(np.e + np.e ** 2), -np.inf, np.inf], rtol=1e-6)
    check_grads(lambda t: ops.reduce_logsumexp(t, axis=0),
                [np.random.default_rng(1).normal(size=(4, 3))])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.float32, np.float64])
def test_truncatediv_and_truncatemod(dtype):
    x = np.array([7, -7, 7, -7, 6, 0], dtype)
    y = np.array([2, 2, -2, -2, 4, 3], dtype)
    q, r = interpret(lambda a, b: (ops.truncatediv(a, b), ops.truncatemod(a, b)), x, y)
    assert q.dtype == dtype and r.dtype == dtype
    np.testing.assert_array_equal(q, np.trunc(x.astype(np.float64) / y).astype(dtype))
    np.testing.assert_array_equal(r, np.fmod(x, y))
    if np.dtype(dtype).kind == "f":
        q = interpret(ops.truncatediv, np.array([7.5, -7.5, np.inf, np.nan], dtype),
                      np.array([2.0, 2.0, 1.0, 1.0], dtype))
        np.testing.assert_array_equal(q, np.array([3, -3, np.inf, np.nan], dtype))
    got = compiled(f"trunc_{np.dtype(dtype).name}",
                   lambda a, b: (ops.truncatediv(a, b), ops.truncatemod(a, b)), x, y)
    np.testing.assert_array_equal(got[0], np.trunc(x.astype(np.float64) / y).astype(dtype))
    np.testing.assert_array_equal(got[1], np.fmod(x, y))


@pytest.mark.parametrize("equation, shapes", [
    ("ii->i", [(4, 4)]), ("ii->", [(3, 3)]), ("ii", [(3, 3)]), ("iij->j", [(3, 3, 2)]),
    ("bii->bi", [(2, 3, 3)]), ("iji->j", [(2, 5, 2)]), ("ii,i->i", [(3, 3), (3,)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(3, 1, 4, 5), (2, 5, 6)]),
    ("...ij,...jk->...ik", [(1, 4, 5), (2, 5, 6)]),
    ("...i,...i->...", [(2, 1, 3), (1, 4, 3)]),
    ("b...,b...->b...", [(2, 1, 3), (2, 4, 1)]),
])
def test_einsum_diagonals_and_ellipsis_broadcasting(equation, shapes):
    rng = np.random.default_rng(0)
    args = [rng.normal(size=s) for s in shapes]
    got = interpret(lambda *t: ops.einsum(equation, *t), *args)
    assert_close(got, np.einsum(equation, *args))
    check_grads(lambda *t: ops.einsum(equation, *t), args, tuple(range(len(args))))


def test_einsum_diagonal_ignores_infinities_off_the_diagonal():
    x = np.array([[1.0, np.inf], [-np.inf, 2.0]])
    np.testing.assert_array_equal(interpret(lambda t: ops.einsum("ii->i", t), x), [1.0, 2.0])
    assert interpret(lambda t: ops.einsum("ii->", t), x) == 3.0


def _np_gather(params, indices, axis, batch_dims):
    if batch_dims == 0:
        return np.take(params, indices, axis=axis)
    return np.stack([_np_gather(p, i, axis - 1, batch_dims - 1)
                     for p, i in zip(params, indices)])


@pytest.mark.parametrize("pshape, ishape, axis, batch_dims", [
    ((2, 5), (2, 3), 1, 1), ((2, 5, 3), (2, 4), 1, 1), ((2, 3, 5, 4), (2, 2), 2, 1),
    ((2, 3, 5), (2, 3, 4), 2, 2), ((2, 3, 5, 2), (2, 3), 3, 2), ((2, 5), (2,), 1, 1),
    ((3, 6, 2), (3, 2, 2), None, 1), ((2, 5, 3), (2, 4), -2, -1),
])
def test_gather_batch_dims(pshape, ishape, axis, batch_dims):
    rng = np.random.default_rng(0)
    params = rng.normal(size=pshape)
    bd = batch_dims % len(ishape) if batch_dims < 0 else batch_dims
    ax = bd if axis is None else axis % len(pshape)
    indices = rng.integers(0, pshape[ax], size=ishape).astype(np.int32)
    got = interpret(lambda p, i: ops.gather(p, i, axis=axis, batch_dims=batch_dims),
                    params, indices)
    want = _np_gather(params, indices, ax, bd)
    np.testing.assert_array_equal(got, want)
    check_grads(lambda p: ops.gather(p, indices, axis=axis, batch_dims=batch_dims), [params])
    got = compiled(f"gather_b{pshape}{ishape}{axis}{batch_dims}",
                   lambda p, i: ops.gather(p, i, axis=axis, batch_dims=batch_dims),
                   params, indices)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC", "reflect"])
@pytest.mark.parametrize("paddings", [[(1, 2), (2, 0)], [(0, 0), (3, 3)], [(2, 2), (0, 1)]])
def test_pad_reflect_and_symmetric(mode, paddings):
    x = np.arange(12.0).reshape(3, 4)
    got = interpret(lambda t: ops.pad(t, paddings, mode), x)
    np.testing.assert_array_equal(got, np.pad(x, paddings, mode.lower()))
    check_grads(lambda t: ops.pad(t, paddings, mode=mode), [x])


def test_pad_mode_errors():
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match="REFLECT padding .* must be at most 2"):
        interpret(lambda t: ops.pad(t, [(3, 0), (0, 0)], "REFLECT"), x)
    interpret(lambda t: ops.pad(t, [(3, 0), (0, 0)], "SYMMETRIC"), x)
    with pytest.raises(ValueError, match="mode must be"):
        interpret(lambda t: ops.pad(t, [(1, 0), (0, 0)], "EDGE"), x)


def test_argmax_and_argmin_default_to_axis_0():
    x = np.array([[1, 9, 3], [7, 2, 8]], np.float32)
    got = interpret(lambda t: (ops.argmax(t), ops.argmin(t), ops.argmax(input=t, axis=1)), x)
    assert got[0].tolist() == [1, 0, 1] and got[1].tolist() == [0, 1, 0]
    assert got[2].tolist() == [1, 2] and got[0].dtype == np.int64


def test_while_loop_maximum_iterations_values_and_gradient():
    def run(limit):
        def f(x):
            _, y = while_loop(lambda i, y: ops.reduce_sum(y) < 50.0,
                              lambda i, y: (i + 1, y * x + 1.0), (0, x),
                              maximum_iterations=limit)
            return y
        return f

    x = np.array([1.5, 1.2])
    for limit, steps in [(0, 0), (1, 1), (2, 2), (100, None)]:
        y, n = x.copy(), 0
        while y.sum() < 50 and (steps is None or n < steps):
            y, n = y * x + 1.0, n + 1
        np.testing.assert_allclose(interpret(run(limit), x), y)
        check_grads(run(limit), [x])
    # the loop may also stop by the limit alone, and takes one variable directly
    f = lambda t: while_loop(lambda y: True, lambda y: y * t, t,   # noqa: E731
                             maximum_iterations=3)
    np.testing.assert_allclose(interpret(f, x), x ** 4)
    check_grads(f, [x])
    np.testing.assert_allclose(compiled("while_max", grad(lambda t: ops.reduce_sum(f(t))), x),
                               4 * x ** 3)


def test_while_loop_without_a_bound_has_no_gradient():
    from xlapy.frontend.autodiff import NoGradientError
    f = lambda t: ops.reduce_sum(while_loop(lambda y: ops.reduce_sum(y) < 9.0,  # noqa: E731
                                            lambda y: y * 2.0, t))
    with pytest.raises(NoGradientError, match="maximum_iterations"):
        interpret(grad(f), np.ones(2))
    with pytest.raises(TypeError, match="maximum_iterations must be a Python int"):
        interpret(lambda t: while_loop(lambda y: True, lambda y: y, t,
                                       maximum_iterations=1.5), np.ones(2))


def test_tf_first_parameter_names_work_as_keywords():
    x = np.arange(6.0).reshape(2, 3)
    got = interpret(lambda t: (ops.reduce_sum(input_tensor=t, axis=1),
                               ops.reshape(tensor=t, shape=[3, 2]),
                               ops.transpose(a=t, perm=[1, 0], conjugate=True),
                               ops.expand_dims(input=t, axis=0),
                               ops.squeeze(input=ops.expand_dims(t, 0)),
                               ops.tile(input=t, multiples=[1, 2]),
                               ops.identity(input=t),
                               ops.softmax(logits=t),
                               ops.relu(features=t)), x)
    np.testing.assert_array_equal(got[0], x.sum(1))
    np.testing.assert_array_equal(got[1], x.reshape(3, 2))
    np.testing.assert_array_equal(got[2], x.T)
    assert got[3].shape == (1, 2, 3) and got[4].shape == (2, 3) and got[5].shape == (2, 6)
    np.testing.assert_allclose(got[7], np.exp(x) / np.exp(x).sum(-1, keepdims=True))


T = np.array([[[1, 1, 1], [2, 2, 2]], [[3, 3, 3], [4, 4, 4]], [[5, 5, 5], [6, 6, 6]]],
             np.int32)


@pytest.mark.parametrize("args, kwargs, want", [
    (([1, 0, 0], [2, 1, 3], [1, 1, 1]), {}, T[1:2, 0:1, 0:3]),
    (([1, 0, 0], [2, 2, 3], [1, 1, 1]), {}, T[1:2, 0:2, 0:3]),
    (([1, -1, 0], [2, -3, 3], [1, -1, 1]), {}, T[1:2, -1:-3:-1, 0:3]),
    (([1, 0, 0], [0, 2, 3], None), {"begin_mask": 2, "end_mask": 1}, T[1:, :2, 0:3]),
    (([1, 0, 2], [2, 2, 3], None), {"shrink_axis_mask": 5}, T[1, 0:2, 2]),
    (([0, 0, 1], [0, 0, 2], None), {"ellipsis_mask": 1, "new_axis_mask": 2},
     T[..., None, 1:2]),
    (([0, 1], [0, 0], [1, -1]), {"begin_mask": 1, "end_mask": 3}, T[:, 1::-1]),
    (([2], [0], [-1]), {"end_mask": 1}, T[2::-1]),
])
def test_strided_slice_masks(args, kwargs, want):
    got = interpret(lambda t: ops.strided_slice(t, *args, **kwargs), T)
    np.testing.assert_array_equal(got, want)


def test_matmul_adjoint_and_output_type():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 2)), rng.normal(size=(4, 3))
    got = interpret(lambda p, q: ops.matmul(p, q, adjoint_a=True, adjoint_b=True), a, b)
    assert_close(got, a.T @ b.T)
    a3, b3 = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    got = interpret(lambda p, q: ops.linalg.matmul(p, q, adjoint_b=True), a3, b3)
    assert_close(got, a3 @ np.swapaxes(b3, 1, 2))
    got = interpret(lambda p, q: ops.linalg.batch_matmul(p, q, adj_y=True), a3, b3)
    assert_close(got, a3 @ np.swapaxes(b3, 1, 2))
    i8 = np.full((2, 40), 100, np.int8)
    got = interpret(lambda p, q: ops.matmul(p, q, transpose_b=True, output_type="int32"),
                    i8, i8)
    assert got.dtype == np.int32 and got.tolist() == [[400000] * 2] * 2
    with pytest.raises(ValueError, match="cannot both be True"):
        interpret(lambda p: ops.matmul(p, p, transpose_a=True, adjoint_a=True), a)


def test_where_with_one_argument_needs_a_static_condition():
    cond = np.array([[True, False], [False, True], [True, True]])
    got = interpret(lambda t: ops.where(cond) + t, np.int64(0))
    np.testing.assert_array_equal(got, np.argwhere(cond))
    got = interpret(lambda t: ops.where(ops.constant([0, 3, 0, 1])), np.int64(0))
    np.testing.assert_array_equal(got, [[1], [3]])
    with pytest.raises(ValueError, match="known at trace time"):
        interpret(lambda t: ops.where(t > 0), np.ones(3))
    with pytest.raises(ValueError, match="both x and y"):
        interpret(lambda t: ops.where(t > 0, t), np.ones(3))


def test_silu_beta_and_swish():
    x = np.linspace(-4, 4, 9)
    for beta in (1.0, 0.5, 2.0):
        got = interpret(lambda t: ops.silu(t, beta), x)
        assert_close(got, x / (1 + np.exp(-beta * x)))
        check_grads(lambda t: ops.nn.swish(t, beta=beta), [x])


def test_split_num_and_errors():
    x = np.arange(12.0).reshape(2, 6)
    got = interpret(lambda t: ops.split(t, 3, axis=1, num=3), x)
    assert [g.tolist() for g in got] == [p.tolist() for p in np.split(x, 3, axis=1)]
    got = interpret(lambda t: ops.split(t, [1, -1], 1, num=2), x)
    assert got[1].shape == (2, 5)
    with pytest.raises(ValueError, match="num=3 but the split gives 2"):
        interpret(lambda t: ops.split(t, [1, 5], 1, num=3), x)


def test_keyword_only_extras_and_tf_defaults():
    got = interpret(lambda t: (ops.one_hot(t, 3), ops.one_hot(t, 3, on_value=5),
                               ops.fill([2], 3.0), ops.fill([2], 1, dtype="int8")),
                    np.array([0, 2], np.int32))
    assert got[0].dtype == np.float32 and got[1].dtype == np.int32
    assert got[1].tolist() == [[5, 0, 0], [0, 0, 5]] and got[3].dtype == np.int8
