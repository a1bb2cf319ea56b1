"""Elementwise ops against numpy: hypothesis over shapes (size 0 and 1 included),
broadcasting and dtypes on the evaluator; one compiled check per op."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlapy.frontend import ops

from .util import (F32_F64, FLOATS, INTS, NUMBERS, assert_close, broadcastable_pair,
                   compiled, interpret, random_array, seeds, shapes, upcast)

_erf = np.vectorize(math.erf, otypes=[np.float64])


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable
    ref: Callable
    dtypes: tuple = FLOATS
    domains: tuple = ("any", "any")
    result: str = "same"          # "same" as the input dtype, or "bool"
    scale: float = 1.0            # tolerance multiplier

    def __repr__(self):
        return self.name


def _sigmoid(x): return 1 / (1 + np.exp(-x))
def _gelu(x): return 0.5 * x * (1 + _erf(x / np.sqrt(2)))
def _gelu_tanh(x): return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
def _elu(x, a=1.0): return np.where(x > 0, x, a * np.expm1(x))


BINARY = [
    Case("add", ops.add, np.add, NUMBERS),
    Case("subtract", ops.subtract, np.subtract, NUMBERS),
    Case("multiply", ops.multiply, np.multiply, NUMBERS),
    Case("divide", ops.divide, np.divide, FLOATS, ("any", "nonzero")),
    Case("floordiv", ops.floordiv, np.floor_divide, NUMBERS, ("any", "nonzero"), scale=10),
    Case("floormod", ops.floormod, np.mod, NUMBERS, ("any", "nonzero"), scale=10),
    Case("truncatemod", ops.truncatemod, np.fmod, NUMBERS, ("any", "nonzero"), scale=10),
    Case("atan2", ops.atan2, np.arctan2, FLOATS),
    Case("pow", ops.pow, np.power, F32_F64 + INTS, ("small", "small"), scale=10),
    Case("maximum", ops.maximum, np.maximum, NUMBERS),
    Case("minimum", ops.minimum, np.minimum, NUMBERS),
    Case("equal", ops.equal, np.equal, NUMBERS, result="bool"),
    Case("not_equal", ops.not_equal, np.not_equal, NUMBERS, result="bool"),
    Case("less", ops.less, np.less, NUMBERS, result="bool"),
    Case("less_equal", ops.less_equal, np.less_equal, NUMBERS, result="bool"),
    Case("greater", ops.greater, np.greater, NUMBERS, result="bool"),
    Case("greater_equal", ops.greater_equal, np.greater_equal, NUMBERS, result="bool"),
    Case("logical_and", ops.logical_and, np.logical_and, (np.bool_,)),
    Case("logical_or", ops.logical_or, np.logical_or, (np.bool_,)),
]

UNARY = [
    Case("negative", ops.negative, np.negative, NUMBERS),
    Case("abs", ops.abs, np.abs, NUMBERS),
    Case("sign", ops.sign, np.sign, NUMBERS),
    Case("square", ops.square, np.square, NUMBERS),
    Case("logical_not", ops.logical_not, np.logical_not, (np.bool_,)),
    Case("exp", ops.exp, np.exp),
    Case("log", ops.log, np.log, domains=("positive",)),
    Case("log1p", ops.log1p, np.log1p, domains=("positive",)),
    Case("expm1", ops.expm1, np.expm1),
    Case("sqrt", ops.sqrt, np.sqrt, domains=("positive",)),
    Case("rsqrt", ops.rsqrt, lambda x: 1 / np.sqrt(x), domains=("positive",)),
    Case("tanh", ops.tanh, np.tanh),
    Case("sigmoid", ops.sigmoid, _sigmoid),
    Case("erf", ops.erf, _erf),
    Case("sin", ops.sin, np.sin),
    Case("cos", ops.cos, np.cos),
    Case("tan", ops.tan, np.tan, domains=("unit",)),
    Case("is_finite", ops.is_finite, np.isfinite, result="bool"),
    Case("floor", ops.floor, np.floor),
    Case("ceil", ops.ceil, np.ceil),
    Case("round", ops.round, np.round),
    Case("relu", ops.relu, lambda x: np.maximum(x, 0)),
    Case("relu6", ops.relu6, lambda x: np.clip(x, 0, 6), domains=("wide",)),
    Case("leaky_relu", lambda x: ops.leaky_relu(x, alpha=0.1),
         lambda x: np.where(x > 0, x, 0.1 * x)),
    Case("elu", ops.elu, _elu),
    Case("selu", ops.selu, lambda x: 1.0507009873554805 * _elu(x, 1.6732632423543772)),
    Case("gelu", ops.gelu, _gelu, scale=2),
    Case("gelu_tanh", lambda x: ops.gelu(x, approximate=True), _gelu_tanh, scale=2),
    Case("silu", ops.silu, lambda x: x * _sigmoid(x), scale=2),
    Case("softplus", ops.softplus, lambda x: np.log1p(np.exp(x)), domains=("wide",), scale=2),
]


def _inputs(rng, case, shapes_, dtype):
    out = []
    for shape, domain in zip(shapes_, case.domains):
        if domain == "wide":
            out.append((random_array(rng, shape, dtype) * 3).astype(dtype))
        else:
            out.append(random_array(rng, shape, dtype, domain))
    return out


def _check(case, got, args):
    want = case.ref(*[upcast(a) for a in args])
    expected_dtype = np.bool_ if case.result == "bool" else args[0].dtype
    assert got.dtype == expected_dtype, f"{case.name}: dtype {got.dtype}"
    assert_close(got, np.asarray(want), scale=case.scale, what=case.name)


@pytest.mark.parametrize("case", BINARY, ids=repr)
@settings(max_examples=12)
@given(pair=broadcastable_pair(), data=st.data(), seed=seeds)
def test_binary_evaluator(case, pair, data, seed):
    dtype = data.draw(st.sampled_from(case.dtypes))
    args = _inputs(np.random.default_rng(seed), case, pair, dtype)
    _check(case, interpret(case.fn, *args), args)


@pytest.mark.parametrize("case", UNARY, ids=repr)
@settings(max_examples=10)
@given(shape=shapes(), data=st.data(), seed=seeds)
def test_unary_evaluator(case, shape, data, seed):
    dtype = data.draw(st.sampled_from(case.dtypes))
    args = _inputs(np.random.default_rng(seed), case, [shape], dtype)
    _check(case, interpret(case.fn, *args), args)


@pytest.mark.parametrize("case", BINARY + UNARY, ids=repr)
def test_compiled(case):
    """One compiled run per op: f32 (bool for logic) with a broadcast operand."""
    dtype = case.dtypes[0]
    shape_list = [(3, 17), (17,)][:len(case.domains) if case in BINARY else 1]
    args = _inputs(np.random.default_rng(0), case, shape_list, dtype)
    _check(case, compiled(f"ew_{case.name}", case.fn, *args), args)


@settings(max_examples=40)
@given(case=st.sampled_from(BINARY + UNARY), pair=broadcastable_pair(max_rank=2),
       data=st.data(), seed=seeds)
def test_compiled_hypothesis(case, pair, data, seed):
    """Compiled runs over drawn ops, shapes (size 0 and 1 too) and every dtype of the op."""
    dtype = data.draw(st.sampled_from(case.dtypes))
    args = _inputs(np.random.default_rng(seed), case, pair if case in BINARY else pair[:1],
                   dtype)
    _check(case, compiled(f"ew_{case.name}", case.fn, *args), args)


@pytest.mark.parametrize("case", [c for c in BINARY if np.int32 in c.dtypes], ids=repr)
def test_compiled_int32(case):
    args = _inputs(np.random.default_rng(1), case, [(4, 9), (4, 1)], np.int32)
    _check(case, compiled(f"ew_i32_{case.name}", case.fn, *args), args)


@pytest.mark.parametrize("dtype, result", [(np.int8, np.float32), (np.uint8, np.float32),
                                           (np.int16, np.float32), (np.uint16, np.float32),
                                           (np.int32, np.float64), (np.int64, np.float64),
                                           (np.uint32, np.float64)])
def test_integer_true_division_is_tf_truediv(dtype, result):
    """TF's truediv: 8- and 16-bit integers divide in float32, 32- and 64-bit in float64."""
    x = np.array([7, 100, 3], dtype)
    y = np.array([2, 3, 4], dtype)
    got = interpret(ops.divide, x, y)
    assert got.dtype == result
    assert_close(got, x.astype(np.float64) / y)
    assert interpret(lambda a, b: a / b, x, y).dtype == result


def test_floor_division_and_modulo_follow_python_signs():
    x = np.array([7, -7, 7, -7, 6], np.int32)
    y = np.array([2, 2, -2, -2, 3], np.int32)
    assert interpret(lambda a, b: a // b, x, y).tolist() == [7 // 2, -7 // 2, 7 // -2, -7 // -2, 2]
    assert interpret(lambda a, b: a % b, x, y).tolist() == [1, 1, -1, -1, 0]


def test_select_where_broadcasts_three_ways():
    rng = np.random.default_rng(2)
    c = rng.random((3, 1)) < 0.5
    x = rng.standard_normal((1, 4)).astype(np.float32)
    y = rng.standard_normal((4,)).astype(np.float32)
    assert_close(interpret(ops.where, c, x, y), np.where(c, x, y))
    assert_close(compiled("where", ops.where, c, x, y), np.where(c, x, y))


@given(shape=shapes(), seed=seeds, dtype=st.sampled_from((np.float32, np.int32)))
@settings(max_examples=15)
def test_clip_by_value(shape, seed, dtype):
    x = random_array(np.random.default_rng(seed), shape, dtype)
    assert_close(interpret(lambda t: ops.clip_by_value(t, -1, 2), x), np.clip(x, -1, 2))


@pytest.mark.parametrize("src, dst", [(np.float32, np.int32), (np.int32, np.float32),
                                      (np.float32, np.bool_), (np.bool_, np.float32),
                                      (np.float64, np.float16), (np.int8, np.int64)])
def test_cast(src, dst):
    x = random_array(np.random.default_rng(3), (2, 5), src)
    got = interpret(lambda t: ops.cast(t, dst), x)
    assert got.dtype == dst
    # float -> int truncates toward zero, like numpy's astype (in range).
    assert_close(got, x.astype(dst))
    assert_close(compiled(f"cast_{np.dtype(src).name}_{np.dtype(dst).name}",
                          lambda t: t.astype(dst), x), x.astype(dst))


def test_nan_propagates_through_maximum_like_numpy():
    x = np.array([np.nan, 1.0, -np.inf], np.float32)
    y = np.array([0.0, np.nan, 2.0], np.float32)
    assert_close(interpret(ops.maximum, x, y), np.maximum(x, y))
    assert_close(interpret(ops.relu, x), np.maximum(x, 0))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_relu_and_relu6_keep_integer_types(dtype):
    """As in TensorFlow: relu of an integer tensor is an integer tensor."""
    x = np.array([0, 1, 5, 6, 7, 100], dtype) if dtype == np.uint8 else \
        np.array([-100, -1, 0, 1, 5, 6, 7, 100], dtype)
    for fn, expected in ((ops.relu, np.maximum(x, 0)), (ops.relu6, np.clip(x, 0, 6))):
        got = interpret(fn, x)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected.astype(dtype))
        got = compiled(f"{fn.__name__}_{np.dtype(dtype).name}", fn, x)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected.astype(dtype))
