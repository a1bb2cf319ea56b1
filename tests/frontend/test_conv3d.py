"""nn.conv3d, nn.max_pool3d and nn.avg_pool3d (NDHWC) against direct numpy references
(strides, dilations, SAME/VALID, windows larger than the input under SAME, size-1 dims),
their gradients against finite differences, and the compiled kernels against the same
references."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlapy.frontend import ops

from .autodiff.util import check_grads, compiled_grads, values
from .util import assert_close, compiled, interpret, random_array, seeds


def same_pads(sizes, ks, ss, ds):
    """TensorFlow's SAME: ceil(size / s) outputs, the odd element of padding after."""
    pads = []
    for n, k, s, d in zip(sizes, ks, ss, ds):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def taps(x, ks, ss, ds, padding, fill=0.0):
    """Yields (tap index, x's values under that tap for every output position)."""
    pads = same_pads(x.shape[1:4], ks, ss, ds) if padding == "SAME" else [(0, 0)] * 3
    xp = np.pad(x, [(0, 0), *pads, (0, 0)], constant_values=fill)
    outs = [(xp.shape[1 + i] - ((ks[i] - 1) * ds[i] + 1)) // ss[i] + 1 for i in range(3)]
    for tap in itertools.product(*(range(k) for k in ks)):
        index = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                      for t, d, s, o in zip(tap, ds, ss, outs))
        yield tap, xp[(slice(None), *index, slice(None))]


def np_conv3d(x, w, ss, padding, ds):
    out = 0
    for tap, patch in taps(x.astype(np.float64), w.shape[:3], ss, ds, padding):
        out = out + np.einsum("ndhwc,co->ndhwo", patch, w[tap].astype(np.float64))
    return out


def np_pools(x, ks, ss, padding):
    stack = np.stack([p for _, p in taps(x.astype(np.float64), ks, ss, (1, 1, 1), padding,
                                         fill=np.nan)])
    return np.nanmax(stack, 0), np.nanmean(stack, 0)


def _fits(sizes, ks, ds):
    return all(n >= (k - 1) * d + 1 for n, k, d in zip(sizes, ks, ds))


@st.composite
def cases(draw, dilate=True):
    sizes = tuple(draw(st.integers(1, 5)) for _ in range(3))
    ks = tuple(draw(st.integers(1, 3)) for _ in range(3))
    ss = tuple(draw(st.integers(1, 2)) for _ in range(3))
    ds = tuple(draw(st.integers(1, 2)) for _ in range(3)) if dilate else (1, 1, 1)
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    if not _fits(sizes, ks, ds):
        padding = "SAME"                 # VALID would leave no output position
    return sizes, ks, ss, ds, padding


@settings(max_examples=20, deadline=None)
@given(case=cases(), n=st.integers(1, 2), c=st.integers(1, 3), o=st.integers(1, 3),
       form=st.sampled_from(["five", "three", "int"]), seed=seeds)
def test_conv3d(case, n, c, o, form, seed):
    sizes, ks, ss, ds, padding = case
    rng = np.random.default_rng(seed)
    x = random_array(rng, (n, *sizes, c), np.float32)
    w = random_array(rng, (*ks, c, o), np.float32)
    strides = {"five": [1, *ss, 1], "three": list(ss), "int": ss[0]}[form]
    dilations = {"five": [1, *ds, 1], "three": list(ds), "int": ds[0]}[form]
    if form == "int":
        ss, ds = (ss[0],) * 3, (ds[0],) * 3
        if padding == "VALID" and not _fits(sizes, ks, ds):
            padding = "SAME"
    got = interpret(lambda a, b: ops.nn.conv3d(a, b, strides, padding, dilations=dilations),
                    x, w)
    assert_close(got, np_conv3d(x, w, ss, padding, ds), scale=20)


@settings(max_examples=20, deadline=None)
@given(case=cases(dilate=False), c=st.integers(1, 2), seed=seeds)
def test_pools3d(case, c, seed):
    sizes, ks, ss, _, padding = case
    x = random_array(np.random.default_rng(seed), (2, *sizes, c), np.float32)
    got = interpret(lambda a: (ops.nn.max_pool3d(a, ks, [1, *ss, 1], padding),
                               ops.nn.avg_pool3d(a, [1, *ks, 1], ss, padding)), x)
    want_max, want_avg = np_pools(x, ks, ss, padding)
    assert_close(got[0], want_max)
    assert_close(got[1], want_avg, scale=10)


def test_pool3d_single_value_ksize_and_integers():
    """ksize/strides [k] mean k along every spatial dim; max_pool3d keeps int types,
    avg_pool3d computes in float32 (its input is cast, as to_float does elsewhere)."""
    x = np.arange(2 * 4 * 4 * 4 * 1, dtype=np.int32).reshape(2, 4, 4, 4, 1) % 7
    got = interpret(lambda a: (ops.nn.max_pool3d(a, [2], [2], "VALID"),
                               ops.nn.avg_pool3d(a, 2, 2, "VALID")), x)
    want_max, want_avg = np_pools(x, (2, 2, 2), (2, 2, 2), "VALID")
    assert got[0].dtype == np.int32
    np.testing.assert_array_equal(got[0], want_max.astype(np.int32))
    assert_close(got[1], want_avg)


def test_conv3d_float64_and_f16():
    rng = np.random.default_rng(3)
    for dtype in (np.float64, np.float16):
        x = random_array(rng, (1, 3, 4, 2, 2), dtype)
        w = random_array(rng, (2, 2, 2, 2, 3), dtype)
        got = interpret(lambda a, b: ops.nn.conv3d(a, b, [1, 1, 1, 1, 1], "SAME"), x, w)
        assert got.dtype == dtype
        assert_close(got, np_conv3d(x, w, (1, 1, 1), "SAME", (1, 1, 1)), scale=20)


def test_conv3d_errors_are_clear():
    x = np.zeros((1, 4, 4, 4, 3), np.float32)
    with pytest.raises(ValueError, match=r"Conv3D: input channels 3 do not fit"):
        interpret(lambda a, b: ops.nn.conv3d(a, b, 1, "VALID"), x,
                  np.zeros((2, 2, 2, 2, 4), np.float32))
    with pytest.raises(ValueError, match=r"must be NDHWC \(rank 5\)"):
        interpret(lambda a, b: ops.nn.conv3d(a, b, 1, "VALID"), x[0],
                  np.zeros((2, 2, 2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="data_format='NDHWC'"):
        interpret(lambda a, b: ops.nn.conv3d(a, b, 1, "VALID", data_format="NCDHW"), x,
                  np.zeros((2, 2, 2, 3, 4), np.float32))
    with pytest.raises(ValueError, match=r"strides must be an int, \(d, h, w\)"):
        interpret(lambda a, b: ops.nn.conv3d(a, b, [1, 2, 1, 1], "VALID"), x,
                  np.zeros((2, 2, 2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="padding must be"):
        interpret(lambda a: ops.nn.max_pool3d(a, 2, 2, "FULL"), x)


# --- gradients -----------------------------------------------------------------------------

GRAD_CASES = [
    # x shape, filter shape, strides, dilations, padding
    ((1, 3, 3, 3, 2), (2, 2, 2, 2, 2), (1, 1, 1), (1, 1, 1), "VALID"),
    ((2, 3, 4, 2, 1), (2, 3, 1, 1, 2), (2, 1, 2), (1, 1, 1), "SAME"),
    ((1, 4, 3, 3, 1), (2, 2, 2, 1, 1), (1, 1, 1), (2, 1, 2), "SAME"),
    ((1, 1, 3, 2, 2), (3, 1, 2, 2, 1), (1, 2, 1), (1, 1, 1), "SAME"),   # kernel > depth
]


@pytest.mark.parametrize("xs, ws, ss, ds, padding", GRAD_CASES)
def test_conv3d_gradient(xs, ws, ss, ds, padding):
    rng = np.random.default_rng(sum(xs) + sum(ws))
    check_grads(lambda x, w: ops.nn.conv3d(x, w, [1, *ss, 1], padding, dilations=[1, *ds, 1]),
                [values(rng, xs), values(rng, ws)], (0, 1))


POOL_CASES = [
    ((1, 3, 3, 3, 1), (2, 2, 2), (1, 1, 1), "VALID"),
    ((2, 4, 3, 2, 2), (2, 3, 1), (2, 1, 2), "SAME"),
    ((1, 2, 5, 3, 1), (3, 2, 2), (1, 2, 2), "SAME"),       # window deeper than the input
]


@pytest.mark.parametrize("op", ["max_pool3d", "avg_pool3d"])
@pytest.mark.parametrize("shape, ks, ss, padding", POOL_CASES)
def test_pool3d_gradient(op, shape, ks, ss, padding):
    x = values(np.random.default_rng(sum(shape)), shape)
    check_grads(lambda x: getattr(ops.nn, op)(x, ks, ss, padding), [x])


# --- compiled ------------------------------------------------------------------------------

def test_conv3d_and_pools_compiled():
    rng = np.random.default_rng(11)
    x = random_array(rng, (2, 5, 6, 4, 3), np.float32)
    w = random_array(rng, (3, 2, 3, 3, 4), np.float32)
    got = compiled("conv3d_same_s2", lambda a, b: ops.nn.conv3d(a, b, [1, 2, 1, 2, 1], "SAME"),
                   x, w)
    assert_close(got, np_conv3d(x, w, (2, 1, 2), "SAME", (1, 1, 1)), scale=20)
    got = compiled("conv3d_valid_d2", lambda a, b: ops.nn.conv3d(
        a, b, 1, "VALID", dilations=[1, 2, 1, 1, 1]), x, w)
    assert_close(got, np_conv3d(x, w, (1, 1, 1), "VALID", (2, 1, 1)), scale=20)
    got = compiled("pools3d", lambda a: (ops.nn.max_pool3d(a, 2, 2, "VALID"),
                                         ops.nn.avg_pool3d(a, [3, 2, 2], [2, 2, 1], "SAME")), x)
    assert_close(got[0], np_pools(x, (2, 2, 2), (2, 2, 2), "VALID")[0])
    assert_close(got[1], np_pools(x, (3, 2, 2), (2, 2, 1), "SAME")[1], scale=10)


def test_conv3d_gradients_compiled():
    rng = np.random.default_rng(5)
    compiled_grads("conv3d_grad", lambda x, w: ops.nn.conv3d(x, w, [1, 2, 1, 1, 1], "SAME"),
                   [values(rng, (1, 4, 3, 3, 2)), values(rng, (2, 2, 2, 2, 3))], (0, 1))
    compiled_grads("pools3d_grad", lambda x: ops.nn.max_pool3d(x, 2, 1, "SAME") +
                   ops.nn.avg_pool3d(x, 2, 1, "SAME"), [values(rng, (1, 3, 3, 3, 2))])
