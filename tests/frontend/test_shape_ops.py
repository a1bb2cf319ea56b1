"""Shape ops and indexing against numpy: reshape, transpose, expand/squeeze, concat,
stack, split, slice, basic __getitem__, pad, tile, gather, one_hot, fill, range."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlapy.frontend import ops

from .util import assert_close, compiled, interpret, random_array, seeds, shapes


def _x(shape, dtype=np.float32, seed=0):
    return random_array(np.random.default_rng(seed), shape, dtype)


@settings(max_examples=20)
@given(shape=shapes(0, 4), data=st.data(), seed=seeds)
def test_reshape_transpose_roundtrip(shape, data, seed):
    x = _x(shape, seed=seed)
    perm = data.draw(st.permutations(range(len(shape))))
    got = interpret(lambda t: (ops.reshape(t, [-1]) if t.size else ops.reshape(t, [0]),
                               ops.transpose(t, perm), t.T), x)
    np.testing.assert_array_equal(got[0], x.reshape(-1))
    np.testing.assert_array_equal(got[1], np.transpose(x, perm))
    np.testing.assert_array_equal(got[2], x.T)


@settings(max_examples=20)
@given(shape=shapes(0, 3, max_side=3), data=st.data(), seed=seeds)
def test_expand_dims_and_squeeze(shape, data, seed):
    x = _x(shape, seed=seed)
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    got = interpret(lambda t: (ops.expand_dims(t, axis), ops.squeeze(ops.expand_dims(t, axis),
                                                                    axis), ops.squeeze(t)), x)
    np.testing.assert_array_equal(got[0], np.expand_dims(x, axis))
    np.testing.assert_array_equal(got[1], x)
    np.testing.assert_array_equal(got[2], np.squeeze(x))


@settings(max_examples=20)
@given(shape=shapes(1, 3), data=st.data(), seed=seeds)
def test_concat_stack_split(shape, data, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(0, 3))
    x, y = _x(shape, seed=seed), _x(tuple(other), np.int32, seed=seed + 1)
    got = interpret(lambda a, b: (ops.concat([a, b], axis), ops.stack([a, a], axis)), x, y)
    np.testing.assert_array_equal(got[0], np.concatenate([x, y.astype(np.float32)], axis))
    np.testing.assert_array_equal(got[1], np.stack([x, x], axis))
    sizes = [shape[axis] // 2, -1]
    pieces = interpret(lambda a: ops.split(a, sizes, axis), x)
    np.testing.assert_array_equal(pieces[0], np.split(x, [shape[axis] // 2], axis)[0])
    np.testing.assert_array_equal(pieces[1], np.split(x, [shape[axis] // 2], axis)[1])


_slice_items = st.one_of(
    st.integers(-6, 5),
    st.builds(slice, st.none() | st.integers(-6, 6), st.none() | st.integers(-6, 6),
              st.none() | st.sampled_from([1, 2, 3, -1, -2])),
    st.just(None))


@settings(max_examples=40)
@given(shape=shapes(1, 3, min_side=1, max_side=5), items=st.lists(_slice_items, max_size=4),
       ellipsis=st.booleans(), seed=seeds)
def test_getitem_basic_slicing(shape, items, ellipsis, seed):
    x = _x(shape, seed=seed)
    index = tuple(items)
    if ellipsis:
        index = index[:1] + (Ellipsis,) + index[1:]
    try:
        want = x[index]
    except IndexError:
        with pytest.raises(IndexError):
            interpret(lambda t: t[index], x)
        return
    np.testing.assert_array_equal(interpret(lambda t: t[index], x), want)


def test_strided_slice_tf_signature():
    x = _x((5, 6))
    got = interpret(lambda t: ops.strided_slice(t, [4, 0], [0, 6], [-2, 3]), x)
    np.testing.assert_array_equal(got, x[4:0:-2, 0:6:3])


def test_getitem_compiled():
    x = _x((6, 7, 3))
    index = (slice(1, None, 2), slice(None, None, -3), 1)
    np.testing.assert_array_equal(compiled("getitem", lambda t: t[index], x), x[index])
    np.testing.assert_array_equal(compiled("getitem_new", lambda t: t[None, ..., -1], x),
                                  x[None, ..., -1])


def test_slice_and_pad_and_tile():
    x = _x((3, 4))
    got = interpret(lambda t: (ops.slice(t, [1, 0], [-1, 3]),
                               ops.pad(t, [[1, 0], [2, 3]], constant_values=7.0),
                               ops.tile(t, [2, 1])), x)
    np.testing.assert_array_equal(got[0], x[1:, 0:3])
    np.testing.assert_array_equal(got[1], np.pad(x, [[1, 0], [2, 3]], constant_values=7))
    np.testing.assert_array_equal(got[2], np.tile(x, [2, 1]))
    got = compiled("slice_pad_tile", lambda t: (ops.pad(t, [[0, 1], [1, 1]]),
                                                ops.tile(t, [1, 3])), x)
    np.testing.assert_array_equal(got[0], np.pad(x, [[0, 1], [1, 1]]))
    np.testing.assert_array_equal(got[1], np.tile(x, [1, 3]))


@settings(max_examples=20)
@given(shape=shapes(1, 3, min_side=1), ishape=shapes(0, 2), data=st.data(), seed=seeds)
def test_gather(shape, ishape, data, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    x = _x(shape, seed=seed)
    n = shape[axis]
    idx = rng.integers(-n, n, size=ishape).astype(data.draw(st.sampled_from([np.int32,
                                                                             np.int64])))
    got = interpret(lambda t, i: ops.gather(t, i, axis=axis), x, idx)
    np.testing.assert_array_equal(got, np.take(x, idx, axis=axis))


def test_gather_compiled_and_tensor_index():
    x = _x((5, 3))
    idx = np.array([4, 0, -1, 2], np.int32)
    np.testing.assert_array_equal(compiled("gather", lambda t, i: t[i], x, idx), x[idx])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    idx = np.array([[0, 2], [3, 1]], np.int32)
    got = interpret(lambda i: ops.one_hot(i, 4, on_value=5.0, off_value=-1.0, axis=axis), idx)
    want = np.moveaxis(np.where(idx[..., None] == np.arange(4), 5.0, -1.0), -1, axis)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    np.testing.assert_array_equal(compiled(f"one_hot_{axis}",
                                           lambda i: ops.one_hot(i, 4, axis=axis), idx),
                                  np.moveaxis(np.eye(4, dtype=np.float32)[idx], -1, axis))


def test_fill_zeros_ones_range():
    got = interpret(lambda t: (ops.fill([2, 3], 1.5), ops.zeros_like(t), ops.ones_like(t),
                               ops.range(5), ops.range(1.0, 2.0, 0.25), ops.range(10, 1, -3),
                               ops.zeros((0, 2))), np.zeros((2,), np.int32))
    np.testing.assert_array_equal(got[0], np.full((2, 3), 1.5, np.float32))
    assert got[1].tolist() == [0, 0] and got[2].tolist() == [1, 1] and got[1].dtype == np.int32
    np.testing.assert_array_equal(got[3], np.arange(5, dtype=np.int32))
    assert_close(got[4], np.arange(1.0, 2.0, 0.25, dtype=np.float32))
    np.testing.assert_array_equal(got[5], np.arange(10, 1, -3, dtype=np.int32))
    assert got[6].shape == (0, 2)
    got = compiled("range_fill", lambda: (ops.range(6) * 2, ops.ones([2, 2], "int32")))
    np.testing.assert_array_equal(got[0], np.arange(6, dtype=np.int32) * 2)


def test_broadcast_to_and_size_zero_elementwise():
    x = _x((0, 3))
    got = interpret(lambda t: (ops.exp(t) + 1, ops.broadcast_to(ops.reshape(t, [0, 1, 3]),
                                                                 (2, 0, 4, 3))), x)
    assert got[0].shape == (0, 3) and got[1].shape == (2, 0, 4, 3)


@settings(max_examples=15)
@given(shape=shapes(1, 3, min_side=1, max_side=5), items=st.lists(_slice_items, max_size=3),
       perm_seed=seeds, dtype=st.sampled_from([np.float32, np.int8, np.float64]))
def test_movement_compiled_hypothesis(shape, items, perm_seed, dtype):
    """Compiled slicing, transposes, concatenation and tiling over drawn shapes/dtypes."""
    x = random_array(np.random.default_rng(perm_seed), shape, dtype)
    index = tuple(items)
    try:
        want = x[index]
    except IndexError:
        return
    perm = tuple(np.random.default_rng(perm_seed).permutation(len(shape)))
    got = compiled(f"move_{index}_{perm}", lambda t: (t[index], ops.transpose(t, perm),
                                                      ops.concat([t, t], -1),
                                                      ops.tile(t, [2] + [1] * (t.ndim - 1))), x)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], np.transpose(x, perm))
    np.testing.assert_array_equal(got[2], np.concatenate([x, x], -1))
    np.testing.assert_array_equal(got[3], np.tile(x, [2] + [1] * (x.ndim - 1)))
