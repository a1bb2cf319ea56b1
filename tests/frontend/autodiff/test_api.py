"""grad and value_and_grad: argnums, pytrees, has_aux, calls on numpy (compiled once)
and inside jit_compile (one module with forward and backward), and their errors."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import grad, jit_compile, ops, value_and_grad


def loss(w, x):
    return ops.reduce_sum(ops.square(ops.matmul(x, w)))


W = np.arange(6.0).reshape(3, 2) / 10
X = np.arange(12.0).reshape(4, 3) / 10


def test_grad_of_argnums_int_and_tuple():
    gw = grad(loss, backend="interpreter")(W, X)
    np.testing.assert_allclose(gw, 2 * X.T @ (X @ W), rtol=1e-12)
    gw2, gx = grad(loss, argnums=(0, 1), backend="interpreter")(W, X)
    np.testing.assert_allclose(gw2, gw, rtol=1e-12)
    np.testing.assert_allclose(gx, 2 * (X @ W) @ W.T, rtol=1e-12)


def test_value_and_grad_with_pytree_parameters_and_aux():
    params = {"w": W, "b": np.ones(2)}

    def f(p, x):
        y = ops.matmul(x, p["w"]) + p["b"]
        return ops.reduce_sum(y * y), ops.reduce_max(y)
    (value, aux), g = value_and_grad(f, has_aux=True, backend="interpreter")(params, X)
    y = X @ W + 1
    assert np.isclose(value, (y * y).sum()) and np.isclose(aux, y.max())
    assert sorted(g) == ["b", "w"]
    np.testing.assert_allclose(g["w"], 2 * X.T @ y, rtol=1e-12)
    np.testing.assert_allclose(g["b"], 2 * y.sum(0), rtol=1e-12)


def test_called_on_numpy_compiles_once_per_signature():
    f = value_and_grad(loss)                     # the CPU backend
    v1, g1 = f(W.astype(np.float32), X.astype(np.float32))
    v2, g2 = f(W.astype(np.float32) * 2, X.astype(np.float32))
    assert g1.dtype == np.float32
    np.testing.assert_allclose(g2, 2 * g1, rtol=1e-5)
    np.testing.assert_allclose(v1, (X @ W).__pow__(2).sum(), rtol=1e-5)


def test_inside_jit_forward_and_backward_are_one_module():
    @jit_compile
    def step(w, x):
        value, g = value_and_grad(loss)(w, x)
        return w - 0.1 * g, value
    lowered = step.lower(W, X)
    assert lowered.as_hlo_text().count(" dot(") >= 2
    new_w, value = step(W, X)
    np.testing.assert_allclose(new_w, W - 0.2 * X.T @ (X @ W), rtol=1e-10)


def test_same_tensor_passed_twice_gets_two_gradients():
    @jit_compile
    def f(x):
        return grad(lambda a, b: ops.reduce_sum(a * b * b), argnums=(0, 1))(x, x)
    ga, gb = f(np.array([1.0, 2.0]))
    np.testing.assert_allclose(ga, [1.0, 4.0])
    np.testing.assert_allclose(gb, [2.0, 8.0])


def test_unused_argument_gets_zeros_and_nested_grad_works():
    g = grad(lambda x, y: ops.reduce_sum(x * 2.0), argnums=1, backend="interpreter")
    np.testing.assert_array_equal(g(np.ones(2), np.ones(3)), np.zeros(3))
    # d/dx of (d/dx x^3) = 6x: grad of a grad
    second = grad(lambda x: ops.reduce_sum(grad(lambda y: ops.reduce_sum(y * y * y))(x)),
                  backend="interpreter")
    np.testing.assert_allclose(second(np.array([1.0, 2.0])), [6.0, 12.0])


def test_errors_are_clear():
    with pytest.raises(TypeError, match="float scalar"):
        grad(lambda x: x * 2.0, backend="interpreter")(np.ones(3))
    with pytest.raises(TypeError, match="only floating-point"):
        grad(lambda x: ops.reduce_sum(x), backend="interpreter")(np.ones(3, np.int32))
    with pytest.raises(ValueError, match="argnums 2 is out of range"):
        grad(loss, argnums=2, backend="interpreter")(W, X)
    with pytest.raises(TypeError, match="expected a function"):
        grad(3)
