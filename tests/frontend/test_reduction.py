"""Reductions, arg-reductions and cumsum against numpy: axes (None, int, tuple,
negative), keepdims, size-0 and size-1 dims, dtypes; compiled checks."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlapy.frontend import ops

from .util import (FLOATS, assert_close, compiled, interpret, random_array, seeds, shapes,
                   upcast)

REDUCTIONS = {
    "sum": (ops.reduce_sum, np.sum, (np.float32, np.float64, np.int32, np.int64)),
    "mean": (ops.reduce_mean, np.mean, FLOATS),
    "max": (ops.reduce_max, np.max, (np.float32, np.float64, np.int32, np.int8)),
    "min": (ops.reduce_min, np.min, (np.float32, np.float64, np.int32, np.int8)),
    "prod": (ops.reduce_prod, np.prod, (np.float32, np.float64, np.int32)),
    "all": (ops.reduce_all, np.all, (np.bool_,)),
    "any": (ops.reduce_any, np.any, (np.bool_,)),
}


@st.composite
def shape_and_axis(draw, min_side=0):
    shape = draw(shapes(0, 3, min_side=min_side))
    rank = len(shape)
    kind = draw(st.sampled_from(["none", "int", "tuple"])) if rank else "none"
    if kind == "none":
        return shape, None
    if kind == "int":
        return shape, draw(st.integers(-rank, rank - 1))
    axes = draw(st.lists(st.integers(0, rank - 1), unique=True, min_size=1))
    return shape, tuple(a - rank if draw(st.booleans()) else a for a in axes)


@pytest.mark.parametrize("name", REDUCTIONS)
@settings(max_examples=15)
@given(sa=shape_and_axis(), keepdims=st.booleans(), data=st.data(), seed=seeds)
def test_reduction_evaluator(name, sa, keepdims, data, seed):
    fn, ref, types = REDUCTIONS[name]
    shape, axis = sa
    dtype = data.draw(st.sampled_from(types))
    if name in ("max", "min", "mean") and 0 in shape:
        # numpy refuses empty max/min (XLA gives the identity); mean of nothing is NaN.
        reduced = range(len(shape)) if axis is None else np.atleast_1d(axis)
        if any(shape[a] == 0 for a in reduced):
            return
    x = random_array(np.random.default_rng(seed), shape, dtype,
                     "small" if name == "prod" else "any")
    got = interpret(lambda t: fn(t, axis=axis, keepdims=keepdims), x)
    want = ref(upcast(x), axis=axis, keepdims=keepdims)
    assert got.dtype == dtype
    assert_close(got, np.asarray(want).astype(dtype), scale=10)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_compiled(name):
    fn, ref, types = REDUCTIONS[name]
    x = random_array(np.random.default_rng(0), (5, 33), types[0])
    got = compiled(f"red_{name}", lambda t: (fn(t, axis=1), fn(t, axis=0, keepdims=True)), x)
    assert_close(got[0], ref(upcast(x), axis=1).astype(types[0]), scale=10)
    assert_close(got[1], ref(upcast(x), axis=0, keepdims=True).astype(types[0]), scale=10)


def test_empty_max_is_the_identity_and_empty_sum_zero():
    x = np.zeros((3, 0), np.float32)
    got = interpret(lambda t: (ops.reduce_max(t, axis=1), ops.reduce_sum(t, axis=1)), x)
    assert got[0].tolist() == [-np.inf] * 3 and got[1].tolist() == [0, 0, 0]


def test_f16_sum_accumulates_in_f32():
    x = np.full((4096,), 1.0, np.float16)      # 4096 ones: exact in f32, not in f16 steps
    assert interpret(ops.reduce_sum, x) == 4096


def test_bool_sum_counts():
    x = np.array([[True, False, True], [True, True, True]])
    got = interpret(lambda t: t.sum(axis=1), x)
    assert got.tolist() == [2, 3] and got.dtype == np.int32


@pytest.mark.parametrize("name, fn, ref", [("argmax", ops.argmax, np.argmax),
                                           ("argmin", ops.argmin, np.argmin)])
@settings(max_examples=15)
@given(shape=shapes(1, 3, min_side=1), data=st.data(), seed=seeds)
def test_arg_reductions(name, fn, ref, shape, data, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    dtype = data.draw(st.sampled_from([np.float32, np.int32, np.int8]))
    rng = np.random.default_rng(seed)
    x = random_array(rng, shape, dtype)
    if dtype == np.float32 and x.size and data.draw(st.booleans()):
        x.flat[rng.integers(x.size)] = np.nan          # NaN wins, as in numpy
    got = interpret(lambda t: fn(t, axis=axis), x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref(x, axis=axis))


def test_argmax_ties_pick_the_first_and_compiled():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, -5, -1, -5]], np.float32)
    np.testing.assert_array_equal(interpret(lambda t: ops.argmax(t, 1), x), [1, 0, 0])
    got = compiled("argmax", lambda t: (ops.argmax(t, 1, output_type="int32"),
                                        ops.argmin(t, 0)), x)
    np.testing.assert_array_equal(got[0], [1, 0, 0])
    np.testing.assert_array_equal(got[1], np.argmin(x, 0))


@settings(max_examples=15)
@given(shape=shapes(1, 3), data=st.data(), seed=seeds)
def test_cumsum(shape, data, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    exclusive, reverse = data.draw(st.booleans()), data.draw(st.booleans())
    dtype = data.draw(st.sampled_from([np.float32, np.int32]))
    x = random_array(np.random.default_rng(seed), shape, dtype)
    want = np.flip(x, axis) if reverse else x
    want = np.cumsum(want, axis=axis, dtype=dtype)
    if exclusive:
        want = want - (np.flip(x, axis) if reverse else x)
    if reverse:
        want = np.flip(want, axis)
    got = interpret(lambda t: ops.cumsum(t, axis, exclusive=exclusive, reverse=reverse), x)
    assert_close(got, want, scale=10)


def test_cumsum_compiled():
    x = random_array(np.random.default_rng(4), (4, 6), np.float32)
    assert_close(compiled("cumsum", lambda t: ops.cumsum(t, axis=1), x), np.cumsum(x, 1))


def test_tensor_methods():
    x = random_array(np.random.default_rng(5), (3, 4), np.float32)
    got = interpret(lambda t: (t.sum(), t.mean(0), t.max(axis=-1, keepdims=True), t.min(),
                               t.argmax(1)), x)
    assert_close(got[0], x.sum(), scale=10)
    assert_close(got[1], x.mean(0), scale=10)
    assert_close(got[2], x.max(-1, keepdims=True))
    assert_close(got[3], x.min())
    np.testing.assert_array_equal(got[4], x.argmax(1))


@settings(max_examples=15)
@given(name=st.sampled_from(sorted(REDUCTIONS)), sa=shape_and_axis(min_side=1),
       keepdims=st.booleans(), data=st.data(), seed=seeds)
def test_reduction_compiled_hypothesis(name, sa, keepdims, data, seed):
    """Compiled reductions over drawn shapes, axes and dtypes."""
    fn, ref, types = REDUCTIONS[name]
    shape, axis = sa
    dtype = data.draw(st.sampled_from(types))
    x = random_array(np.random.default_rng(seed), shape, dtype,
                     "small" if name == "prod" else "any")
    got = compiled(f"red_h_{name}_{axis}_{keepdims}",
                   lambda t: fn(t, axis=axis, keepdims=keepdims), x)
    assert got.dtype == dtype
    assert_close(got, np.asarray(ref(upcast(x), axis=axis, keepdims=keepdims)).astype(dtype),
                 scale=10)
