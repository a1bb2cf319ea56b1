"""The evaluator's convolution never builds the dilated or padded input (issue 14, item 6).

It used to base-dilate and pad the lhs into a new array and correlate sliding
windows of it: a module with a large lhs dilation (a strided convolution's input
gradient at scale) asked for 101 GiB. It now walks the kernel taps and reads strided
slices of the operands. These tests compare it with the materializing method (kept
here as the reference) on small cases of every window attribute, and run cases whose
dilated input would not fit in memory.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st
from numpy.lib.stride_tricks import sliding_window_view

from xlapy.hlo import Shape, Window, WindowDim
from tests.hlo.evaluator_util import run_op


# --- the old, materializing method (canonical layouts, f64 or the integer type) -------

def _dilate_pad_spatial(x, window_dims):
    for i, w in enumerate(window_dims):
        axis = 2 + i
        n = x.shape[axis]
        if w.base_dilation > 1 and n:
            shape = list(x.shape)
            shape[axis] = (n - 1) * w.base_dilation + 1
            dilated = np.zeros(shape, x.dtype)
            index = [slice(None)] * x.ndim
            index[axis] = slice(None, None, w.base_dilation)
            dilated[tuple(index)] = x
            x = dilated
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(w.pad_low, 0), max(w.pad_high, 0))
        x = np.pad(x, widths)
        index = [slice(None)] * x.ndim
        index[axis] = slice(max(-w.pad_low, 0), x.shape[axis] - max(-w.pad_high, 0))
        x = x[tuple(index)]
    return x


def _patches(lhs, kernel_extents, window_dims):
    spatial_axes = tuple(range(2, 2 + len(window_dims)))
    spans = [(k - 1) * w.window_dilation + 1 if k else 0
             for k, w in zip(kernel_extents, window_dims)]
    outs = [max(0, n - s + 1) for n, s in zip(lhs.shape[2:], spans)]
    if 0 in outs or 0 in spans:
        return np.zeros(lhs.shape[:2] + tuple(-(-o // w.stride) for o, w in zip(outs, window_dims))
                        + tuple(kernel_extents), lhs.dtype)
    patches = sliding_window_view(lhs, spans, axis=spatial_axes)
    index = ((slice(None), slice(None))
             + tuple(slice(None, None, w.stride) for w in window_dims)
             + tuple(slice(None, None, w.window_dilation) for w in window_dims))
    return patches[index]


def materializing_convolution(lhs, rhs, window, groups=1, batch_groups=1):
    """lhs (N, C, S...), rhs (O, I, K...) -> (N / batch_groups, O, P...)."""
    dims = list(window.dims)
    acc = np.float64 if lhs.dtype.kind == "f" else lhs.dtype
    lhs, rhs = lhs.astype(acc), rhs.astype(acc)
    for i, w in enumerate(dims):
        if w.reversal:
            rhs = np.flip(rhs, axis=2 + i)
    patches = _patches(_dilate_pad_spatial(lhs, dims), rhs.shape[2:], dims)
    nsp = len(dims)
    sp, ks = "pqrstu"[:nsp], "klmnvw"[:nsp]
    batch, features = patches.shape[:2]
    out_features = rhs.shape[0]
    with np.errstate(all="ignore"):
        if groups > 1:
            p = patches.reshape((batch, groups, features // groups) + patches.shape[2:])
            r = rhs.reshape((groups, out_features // groups) + rhs.shape[1:])
            out = np.einsum(f"bgi{sp}{ks},goi{ks}->bgo{sp}", p, r)
            return out.reshape((batch, out_features) + out.shape[3:])
        if batch_groups > 1:
            p = patches.reshape((batch_groups, batch // batch_groups) + patches.shape[1:])
            r = rhs.reshape((batch_groups, out_features // batch_groups) + rhs.shape[1:])
            out = np.einsum(f"gbi{sp}{ks},goi{ks}->bgo{sp}", p, r)
            return out.reshape((batch // batch_groups, out_features) + out.shape[3:])
        return np.einsum(f"bi{sp}{ks},oi{ks}->bo{sp}", patches, rhs)


# --- helpers -----------------------------------------------------------------------------

def _window(dims):
    """dims: (size, stride, pad_low, pad_high, rhs_dilation, lhs_dilation, reversal) each."""
    return Window(tuple(WindowDim(*d) for d in dims))


def _out_dims(lhs_shape, rhs_shape, window, batch_groups):
    spatial = []
    for n, k, w in zip(lhs_shape[2:], rhs_shape[2:], window.dims):
        dilated = (n - 1) * w.base_dilation + 1 if n else 0
        padded = dilated + w.pad_low + w.pad_high
        span = (k - 1) * w.window_dilation + 1 if k else 0
        spatial.append(max(0, (padded - span) // w.stride + 1) if padded >= span else 0)
    return (lhs_shape[0] // batch_groups, rhs_shape[0]) + tuple(spatial)


def _labels(nsp):
    s = "".join(str(i) for i in range(nsp))
    return f"bf{s}_oi{s}->bf{s}"


def evaluate_conv(lhs, rhs, window, groups=1, batch_groups=1, etype=None):
    etype = etype or {np.float32: "f32", np.int32: "s32", np.float64: "f64"}[lhs.dtype.type]
    out = _out_dims(lhs.shape, rhs.shape, window, batch_groups)
    return run_op("convolution", lhs, rhs, result=Shape(etype, out), window=window,
                  dim_labels=_labels(lhs.ndim - 2), feature_group_count=groups,
                  batch_group_count=batch_groups)


def check_against_materializing(lhs, rhs, window, groups=1, batch_groups=1):
    got = evaluate_conv(lhs, rhs, window, groups, batch_groups)
    want = materializing_convolution(lhs, rhs, window, groups, batch_groups).astype(lhs.dtype)
    assert got.shape == want.shape
    if lhs.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


# --- small cases of each attribute --------------------------------------------------------

CASES = {
    # name: (lhs canonical shape, rhs canonical shape, window dims, groups, batch groups)
    "lhs_dilation": ((2, 3, 5, 4), (2, 3, 3, 2),
                     [(3, 1, 2, 2, 1, 3, False), (2, 1, 1, 1, 1, 2, False)], 1, 1),
    "lhs_dilation_strided": ((1, 2, 6), (3, 2, 4), [(4, 3, 3, 2, 1, 4, False)], 1, 1),
    "rhs_dilation": ((2, 2, 9, 8), (3, 2, 3, 2),
                     [(3, 1, 0, 0, 3, 1, False), (2, 2, 1, 0, 4, 1, False)], 1, 1),
    "both_dilations": ((1, 2, 5, 5), (2, 2, 2, 3),
                       [(2, 2, 1, 3, 2, 3, False), (3, 1, 2, 2, 2, 2, True)], 1, 1),
    "negative_padding": ((2, 2, 9, 7), (2, 2, 3, 2),
                         [(3, 1, -2, 1, 1, 2, False), (2, 2, -1, -3, 2, 1, False)], 1, 1),
    "all_negative": ((1, 1, 10), (1, 1, 2), [(2, 3, -3, -2, 1, 1, False)], 1, 1),
    "strides": ((2, 3, 11, 10), (4, 3, 3, 3),
                [(3, 4, 1, 1, 1, 1, False), (3, 3, 0, 2, 1, 1, False)], 1, 1),
    "feature_groups": ((2, 6, 7, 6), (9, 2, 3, 2),
                       [(3, 2, 1, 1, 1, 2, False), (2, 1, 0, 1, 2, 1, True)], 3, 1),
    "depthwise": ((1, 4, 6, 6), (4, 1, 3, 3),
                  [(3, 1, 1, 1, 1, 2, False), (3, 1, 1, 1, 1, 2, False)], 4, 1),
    "batch_groups": ((4, 3, 6, 5), (6, 3, 2, 2),
                     [(2, 1, 0, 1, 1, 2, False), (2, 2, 1, 0, 2, 1, False)], 1, 2),
    "batch_groups_all": ((6, 2, 5), (3, 2, 3), [(3, 2, 2, 2, 1, 3, True)], 1, 3),
    "1d_reversed": ((2, 2, 9), (3, 2, 4), [(4, 1, 3, 3, 1, 1, True)], 1, 1),
    "3d": ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2),
           [(2, 1, 1, 0, 1, 2, False), (2, 2, 0, 1, 2, 1, False), (2, 1, 1, 1, 1, 1, True)], 1, 1),
    "no_spatial": ((3, 4), (5, 4), [], 1, 1),
    "window_bigger_than_input": ((1, 1, 3), (1, 1, 4), [(4, 1, 0, 0, 1, 1, False)], 1, 1),
    "empty_input_padded": ((1, 2, 0), (2, 2, 2), [(2, 1, 2, 1, 1, 1, False)], 1, 1),
    "empty_kernel": ((1, 2, 4), (2, 2, 0), [(0, 1, 0, 0, 1, 1, False)], 1, 1),
}


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_materializing(name, dtype):
    lhs_shape, rhs_shape, dims, groups, batch_groups = CASES[name]
    rng = np.random.default_rng(len(name))
    if dtype == np.float32:
        lhs = rng.standard_normal(lhs_shape).astype(dtype)
        rhs = rng.standard_normal(rhs_shape).astype(dtype)
    else:
        lhs = rng.integers(-50, 50, lhs_shape).astype(dtype)
        rhs = rng.integers(-50, 50, rhs_shape).astype(dtype)
    check_against_materializing(lhs, rhs, _window(dims), groups, batch_groups)


@pytest.mark.parametrize("name", ["lhs_dilation", "negative_padding", "feature_groups",
                                  "batch_groups", "empty_input_padded"])
def test_non_finite_kernel_meets_padding_and_holes(name):
    """A zero of padding or dilation times an infinite tap is NaN, as on XLA's CPU
    backend (and the old method); an input NaN between taps is never read."""
    lhs_shape, rhs_shape, dims, groups, batch_groups = CASES[name]
    rng = np.random.default_rng(7)
    lhs = rng.standard_normal(lhs_shape).astype(np.float32)
    rhs = rng.standard_normal(rhs_shape).astype(np.float32)
    rhs.reshape(-1)[::5] = np.inf
    rhs.reshape(-1)[3::7] = np.nan
    if lhs.size:
        lhs.reshape(-1)[1::4] = np.nan
    check_against_materializing(lhs, rhs, _window(dims), groups, batch_groups)


@st.composite
def conv_cases(draw):
    nsp = draw(st.integers(0, 2))
    groups = draw(st.sampled_from([1, 1, 2]))
    batch_groups = 1 if groups > 1 else draw(st.sampled_from([1, 1, 2]))
    batch = batch_groups * draw(st.integers(1, 2))
    in_features = groups * draw(st.integers(1, 2))
    out_features = groups * batch_groups * draw(st.integers(1, 2))
    lhs_sp, rhs_sp, dims = [], [], []
    for _ in range(nsp):
        n, k = draw(st.integers(0, 6)), draw(st.integers(1, 3))
        w = (k, draw(st.integers(1, 3)), draw(st.integers(-2, 3)), draw(st.integers(-2, 3)),
             draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.booleans()))
        dilated = (n - 1) * w[5] + 1 if n else 0
        if dilated + w[2] + w[3] < 0:
            w = w[:2] + (0, 0) + w[4:]
        lhs_sp.append(n)
        rhs_sp.append(k)
        dims.append(w)
    return ((batch, in_features) + tuple(lhs_sp), (out_features, in_features // groups)
            + tuple(rhs_sp), dims, groups, batch_groups)


@given(case=conv_cases(), seed=st.integers(0, 2**16))
def test_random_windows_same_as_materializing(case, seed):
    lhs_shape, rhs_shape, dims, groups, batch_groups = case
    rng = np.random.default_rng(seed)
    lhs = rng.standard_normal(lhs_shape).astype(np.float32)
    rhs = rng.standard_normal(rhs_shape).astype(np.float32)
    check_against_materializing(lhs, rhs, _window(dims), groups, batch_groups)


# --- inputs whose dilated form would not fit in memory -----------------------------------

def _loops(lhs, rhs, window):
    """out[b, o, p...] by the definition, one output element at a time (small outputs)."""
    out = np.zeros(_out_dims(lhs.shape, rhs.shape, window, 1))
    for b, o in itertools.product(range(out.shape[0]), range(out.shape[1])):
        for p in np.ndindex(*out.shape[2:]):
            for i in range(lhs.shape[1]):
                for k in np.ndindex(*rhs.shape[2:]):
                    src = []
                    for pd, kd, w, n in zip(p, k, window.dims, lhs.shape[2:]):
                        pos = pd * w.stride + kd * w.window_dilation - w.pad_low
                        if pos < 0 or pos % w.base_dilation or pos // w.base_dilation >= n:
                            break
                        src.append(pos // w.base_dilation)
                    else:
                        out[(b, o) + p] += float(lhs[(b, i) + tuple(src)]) * float(rhs[(o, i) + k])
    return out


def test_huge_lhs_dilation_small_output():
    """Dilated, this f32[1,2,4,4] input is 300001 x 300001 per feature (1.4 TiB in f64);
    the output is 5 x 3."""
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    rhs = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    d = 100_000
    window = _window([(3, d, d, d, d // 2, d, False), (3, d, 0, 0, d // 2, d, False)])
    got = evaluate_conv(lhs, rhs, window)
    assert got.shape == (1, 3, 5, 3)
    expected = _loops(lhs, rhs, window)
    assert np.count_nonzero(expected) > 10
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_huge_padding_small_output():
    rng = np.random.default_rng(4)
    lhs = rng.standard_normal((2, 3, 5)).astype(np.float32)
    rhs = rng.standard_normal((2, 3, 2)).astype(np.float32)
    big = 10**12
    window = _window([(2, big, big, big, 1, 3, False)])
    got = evaluate_conv(lhs, rhs, window)
    assert got.shape == (2, 2, 3)
    expected = _loops(lhs, rhs, window)
    assert np.count_nonzero(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
