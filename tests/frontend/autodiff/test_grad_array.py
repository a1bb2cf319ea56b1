"""Gradients of reductions, shape ops and indexing against central finite
differences (float64, reference evaluator), over hypothesis-drawn shapes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.frontend import ops

from .util import check_grads, values

SEED = st.integers(0, 2**31)
SHAPE = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


@st.composite
def shape_and_axis(draw):
    shape = draw(SHAPE)
    axis = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1),
                          st.lists(st.integers(0, len(shape) - 1), min_size=1,
                                   unique=True).map(tuple)))
    return shape, axis, draw(st.booleans())


REDUCTIONS = {"Sum": ops.reduce_sum, "Mean": ops.reduce_mean, "Max": ops.reduce_max,
              "Min": ops.reduce_min, "Prod": ops.reduce_prod}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=6)
@given(case=shape_and_axis(), seed=SEED)
def test_reduction_gradient(name, case, seed):
    shape, axis, keepdims = case
    fn = REDUCTIONS[name]
    domain = "positive" if name == "Prod" else "any"
    check_grads(lambda x: fn(x, axis, keepdims),
                [values(np.random.default_rng(seed), shape, domain)])


def test_max_gradient_is_shared_by_ties():
    from xlapy.frontend import grad
    g = grad(lambda x: ops.reduce_max(x), backend="interpreter")(np.array([1.0, 3.0, 3.0]))
    np.testing.assert_allclose(g, [0.0, 0.5, 0.5])


def _product_of_others(x: np.ndarray, axis: int) -> np.ndarray:
    """d prod(x, axis) / dx, element by element: the product of the other elements."""
    out = np.empty_like(x)
    for i in range(x.shape[axis]):
        others = np.delete(x, i, axis)
        np.moveaxis(out, axis, 0)[i] = np.prod(others, axis)
    return out


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_prod_gradient_with_zeros(backend):
    """No zero, one zero and two zeros in a row: the product of the other elements,
    never nan (prod / x would divide 0 by 0)."""
    from xlapy.frontend import grad
    x = np.array([[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    g = grad(lambda t: ops.reduce_sum(ops.reduce_prod(t, 1)), backend=backend)(x)
    np.testing.assert_array_equal(g, _product_of_others(x, 1))
    np.testing.assert_array_equal(g[1], [0.0, 8.0, 0.0])


@settings(max_examples=6)
@given(shape=SHAPE, seed=SEED, exclusive=st.booleans(), reverse=st.booleans())
def test_cumsum_gradient(shape, seed, exclusive, reverse):
    axis = seed % len(shape)
    check_grads(lambda x: ops.cumsum(x, axis, exclusive=exclusive, reverse=reverse),
                [values(np.random.default_rng(seed), shape)])


# name -> (function, shape strategy): shapes and attributes drawn together
@st.composite
def reshape_case(draw):
    shape = draw(SHAPE)
    return shape, lambda x: ops.reshape(x, (-1,))


@st.composite
def transpose_case(draw):
    shape = draw(SHAPE)
    perm = draw(st.permutations(range(len(shape))))
    return shape, lambda x: ops.transpose(x, perm)


@st.composite
def expand_squeeze_case(draw):
    shape = draw(SHAPE)
    axis = draw(st.integers(-len(shape) - 1, len(shape)))
    return shape, lambda x: ops.squeeze(ops.expand_dims(x, axis) * 2.0)


@st.composite
def broadcast_to_case(draw):
    shape = draw(SHAPE)
    lead = draw(st.integers(1, 2))
    return shape, lambda x: ops.broadcast_to(x, (lead,) + tuple(max(n, 2) if n == 1 else n
                                                                  for n in shape))


@st.composite
def concat_split_case(draw):
    shape = draw(SHAPE)
    axis = draw(st.integers(0, len(shape) - 1))
    return shape, lambda x: ops.split(ops.concat([x, x * 3.0], axis), 2, axis)[1]


@st.composite
def slice_case(draw):
    shape = draw(SHAPE)
    begin = [draw(st.integers(0, n - 1)) for n in shape]
    size = [draw(st.integers(1, n - b)) for n, b in zip(shape, begin)]
    return shape, lambda x: ops.slice(x, begin, size)


@st.composite
def strided_case(draw):
    shape = draw(SHAPE)
    index = []
    for n in shape:
        if draw(st.booleans()):
            index.append(draw(st.integers(-n, n - 1)))
        else:
            step = draw(st.sampled_from([1, 2, -1, -2]))
            start = draw(st.one_of(st.none(), st.integers(-n, n - 1)))
            index.append(slice(start, None, step))
    if draw(st.booleans()):
        index.insert(draw(st.integers(0, len(index))), None)
    return shape, lambda x: x[tuple(index)] * 1.0


@st.composite
def pad_case(draw):
    shape = draw(SHAPE)
    paddings = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape]
    return shape, lambda x: ops.pad(x, paddings)


@st.composite
def tile_case(draw):
    shape = draw(SHAPE)
    multiples = [draw(st.integers(1, 3)) for _ in shape]
    return shape, lambda x: ops.tile(x, multiples)


@st.composite
def gather_case(draw):
    shape = draw(SHAPE)
    axis = draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    idx = np.array(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4)), np.int32)
    if draw(st.booleans()):
        idx = idx.reshape(1, -1)
    return shape, lambda x: ops.gather(x, idx, axis=axis)    # repeats add up


MOVEMENT = {"Reshape": reshape_case(), "Transpose": transpose_case(),
            "ExpandDims+Squeeze": expand_squeeze_case(), "BroadcastTo": broadcast_to_case(),
            "ConcatV2+Split": concat_split_case(), "Slice": slice_case(),
            "StridedSlice": strided_case(), "Pad": pad_case(), "Tile": tile_case(),
            "GatherV2": gather_case()}


@pytest.mark.parametrize("name", sorted(MOVEMENT))
@settings(max_examples=6)
@given(data=st.data(), seed=SEED)
def test_movement_gradient(name, data, seed):
    shape, fn = data.draw(MOVEMENT[name])
    check_grads(fn, [values(np.random.default_rng(seed), shape)])


def test_concat_of_several_inputs_and_split_sizes():
    rng = np.random.default_rng(0)
    check_grads(lambda a, b: ops.concat([a, b, a], 1),
                [values(rng, (2, 3)), values(rng, (2, 1))], (0, 1))
    check_grads(lambda x: ops.split(x, [1, -1], 1)[1] * ops.split(x, [3, 1], 1)[0],
                [values(rng, (2, 4))])


def test_gather_gradient_adds_repeated_indices():
    from xlapy.frontend import grad
    idx = np.array([0, 2, 2, -1], np.int32)
    g = grad(lambda x: ops.reduce_sum(ops.gather(x, idx)), backend="interpreter")(np.zeros(4))
    np.testing.assert_allclose(g, [1.0, 0.0, 2.0, 1.0])
