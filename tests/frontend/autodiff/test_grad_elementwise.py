"""Gradients of elementwise ops and activations against central finite differences
(float64, reference evaluator), over hypothesis-drawn shapes with broadcasting."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.frontend import ops

from .util import broadcast_partner, check_grads, values

SHAPE = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)
SEED = st.integers(0, 2**31)

# name -> (function of two tensors, domain of x, domain of y)
BINARY = {
    "Add": (lambda x, y: x + y, "any", "any"),
    "Sub": (lambda x, y: x - y, "any", "any"),
    "Mul": (lambda x, y: x * y, "any", "any"),
    "Div": (lambda x, y: x / y, "any", "away0"),
    "Pow": (lambda x, y: x ** y, "positive", "any"),
    "Maximum": (ops.maximum, "any", "any"),
    "Minimum": (ops.minimum, "any", "any"),
    "FloorMod": (ops.floormod, "any", "positive"),
    "TruncateMod": (ops.truncatemod, "any", "positive"),
    "Atan2": (ops.atan2, "any", "away0"),
    "Select": (lambda x, y: ops.where(x > y, x * 2.0, y), "any", "any"),
}

# name -> (function of one tensor, domain)
UNARY = {
    "Neg": (ops.negative, "any"), "Abs": (ops.abs, "away0"), "Square": (ops.square, "any"),
    "Exp": (ops.exp, "any"), "Expm1": (ops.expm1, "any"), "Log": (ops.log, "positive"),
    "Log1p": (ops.log1p, "positive"), "Sqrt": (ops.sqrt, "positive"),
    "Rsqrt": (ops.rsqrt, "positive"), "Tanh": (ops.tanh, "any"),
    "Sigmoid": (ops.sigmoid, "any"), "Erf": (ops.erf, "any"), "Sin": (ops.sin, "any"),
    "Cos": (ops.cos, "any"), "Tan": (lambda x: ops.tan(x * 0.5), "any"), "Identity": (ops.identity, "any"),
    "Relu": (ops.relu, "away0"), "Relu6": (lambda x: ops.relu6(x * 4.0), "away0"),
    "LeakyRelu": (lambda x: ops.leaky_relu(x, alpha=0.3), "away0"),
    "Elu": (ops.elu, "away0"), "Selu": (ops.selu, "away0"), "Gelu": (ops.gelu, "any"),
    "GeluTanh": (lambda x: ops.gelu(x, approximate=True), "any"),
    "Silu": (ops.silu, "any"), "Softplus": (ops.softplus, "any"),
    "ClipByValue": (lambda x: ops.clip_by_value(x, -1.0, 1.0), "any"),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=6)
@given(data=st.data(), shape=SHAPE, seed=SEED)
def test_binary_gradient(name, data, shape, seed):
    fn, dx, dy = BINARY[name]
    y_shape = broadcast_partner(data.draw, shape)
    if data.draw(st.booleans()):
        shape, y_shape = y_shape, shape              # either side may broadcast
    rng = np.random.default_rng(seed)
    check_grads(fn, [values(rng, shape, dx), values(rng, y_shape, dy)], (0, 1))


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=5)
@given(shape=SHAPE, seed=SEED)
def test_unary_gradient(name, shape, seed):
    fn, domain = UNARY[name]
    check_grads(fn, [values(np.random.default_rng(seed), shape, domain)])


def test_clip_gradient_reaches_the_bounds():
    x = np.array([-3.0, 0.5, 3.0])
    lo, hi = np.array([-1.0]), np.array([1.0, 2.0, 2.5])
    check_grads(ops.clip_by_value, [x, lo, hi], (0, 1, 2))


def test_cast_between_floats_passes_the_gradient_back():
    from xlapy.frontend import grad
    g = grad(lambda x: ops.reduce_sum(ops.cast(x, "float32") * 3.0),
             backend="interpreter")(np.ones(3))
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, 3.0)


def test_cast_to_int_and_comparisons_give_zero_gradient():
    from xlapy.frontend import grad
    g = grad(lambda x: ops.reduce_sum(ops.cast(ops.cast(x, "int32"), "float64") * x
                                      + ops.cast(x > 0, "float64")),
             backend="interpreter")(np.array([1.5, -2.5]))
    np.testing.assert_allclose(g, [1.0, -2.0])   # only the x factor contributes
