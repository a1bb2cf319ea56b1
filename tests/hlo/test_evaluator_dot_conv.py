"""dot and convolution against loop references written from XLA's specification."""
import itertools

import numpy as np
import pytest

from xlapy.hlo import Shape, Window, WindowDim
from tests.hlo.evaluator_util import run_op


def test_dot_general_batch_and_contracting_dims_anywhere():
    rng = np.random.default_rng(1)
    lhs = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)      # contract 0 and 3, batch 1
    rhs = rng.standard_normal((5, 6, 2, 3)).astype(np.float32)      # contract 3 and 0, batch 2
    out = run_op("dot", lhs, rhs, result=Shape("f32", (2, 4, 6)), lhs_batch_dims=(1,),
                 rhs_batch_dims=(2,), lhs_contracting_dims=(0, 3), rhs_contracting_dims=(3, 0))
    expected = np.zeros((2, 4, 6))
    for b, m, n, i, k in itertools.product(range(2), range(4), range(6), range(3), range(5)):
        expected[b, m, n] += float(lhs[i, b, m, k]) * float(rhs[k, n, b, i])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_dot_s8_accumulates_in_s32():
    lhs = np.full((2, 64), 127, np.int8)
    rhs = np.full((64, 3), -128, np.int8)
    out = run_op("dot", lhs, rhs, result=Shape("s32", (2, 3)), lhs_contracting_dims=(1,),
                 rhs_contracting_dims=(0,))
    assert out.dtype == np.int32 and (out == 127 * -128 * 64).all()


def test_dot_s32_wraps():
    lhs = np.array([[2**30, 2**30, 2**30, 2**30]], np.int32)
    out = run_op("dot", lhs, np.ones((4, 1), np.int32), result=Shape("s32", (1, 1)),
                 lhs_contracting_dims=(1,), rhs_contracting_dims=(0,))
    assert out[0, 0] == 0          # 2**32 wraps


def test_dot_f16_is_computed_wide_and_rounded_once():
    lhs = np.full((1, 4096), 1, np.float16)
    rhs = np.full((4096, 1), 1, np.float16)
    out = run_op("dot", lhs, rhs, result=Shape("f16", (1, 1)), lhs_contracting_dims=(1,),
                 rhs_contracting_dims=(0,))
    assert out[0, 0] == 4096       # an f16 accumulator would stop at 2048


# --- convolution -----------------------------------------------------------------------

def _window(sizes, strides=None, pads=None, lhs_dil=None, rhs_dil=None, rev=None):
    n = len(sizes)
    strides, pads = strides or [1] * n, pads or [(0, 0)] * n
    lhs_dil, rhs_dil, rev = lhs_dil or [1] * n, rhs_dil or [1] * n, rev or [False] * n
    return Window(tuple(WindowDim(s, st, lo, hi, rd, ld, r)
                        for s, st, (lo, hi), rd, ld, r in zip(sizes, strides, pads, rhs_dil, lhs_dil, rev)))


def conv_reference(lhs, rhs, window, feature_groups=1, batch_groups=1):
    """Canonical layouts: lhs (N, C, S...), rhs (O, I, K...) -> (N / batch_groups, O, P...)."""
    n, c = lhs.shape[:2]
    o_count, i_count = rhs.shape[:2]
    dims = window.dims
    dilated = [(s - 1) * w.base_dilation + 1 for s, w in zip(lhs.shape[2:], dims)]
    kernel = [(k - 1) * w.window_dilation + 1 for k, w in zip(rhs.shape[2:], dims)]
    out_sp = [(d + w.pad_low + w.pad_high - k) // w.stride + 1 for d, k, w in zip(dilated, kernel, dims)]
    out_n = n // batch_groups
    out = np.zeros([out_n, o_count] + out_sp)
    for b, o in itertools.product(range(out_n), range(o_count)):
        fg = o // (o_count // feature_groups)
        bg = o // (o_count // batch_groups)
        src_b = bg * out_n + b
        for p in np.ndindex(*out_sp):
            total = 0.0
            for i in range(i_count):
                ch = fg * i_count + i
                for k in np.ndindex(*rhs.shape[2:]):
                    src = []
                    for pd, kd, w, size in zip(p, k, dims, lhs.shape[2:]):
                        pos = pd * w.stride + kd * w.window_dilation - w.pad_low
                        if pos < 0 or pos % w.base_dilation or pos // w.base_dilation >= size:
                            break
                        src.append(pos // w.base_dilation)
                    else:
                        kk = tuple(ks - 1 - kd if w.reversal else kd
                                   for kd, ks, w in zip(k, rhs.shape[2:], dims))
                        total += float(lhs[(src_b, ch) + tuple(src)]) * float(rhs[(o, i) + kk])
            out[(b, o) + p] = total
    return out


def _to_labels(x, labels, canonical):
    """Transposes an array in canonical order into the order named by `labels`."""
    return np.transpose(x, [canonical.index(c) for c in labels])


CONV_CASES = [
    # name, dim_labels, lhs canonical shape, rhs canonical shape, window, feature groups, batch groups
    ("nhwc_stride2_same", "b01f_01io->b01f", (2, 3, 6, 6), (4, 3, 3, 3),
     _window([3, 3], [2, 2], [(1, 1), (1, 1)]), 1, 1),
    ("nchw_dilated_negative_pad", "bf01_oi01->bf01", (1, 2, 7, 6), (3, 2, 2, 3),
     _window([2, 3], [1, 2], [(-1, 2), (0, -1)], lhs_dil=[2, 1], rhs_dil=[1, 2]), 1, 1),
    ("1d_reversed", "b0f_0io->b0f", (2, 2, 9), (3, 2, 4), _window([4], [1], [(3, 3)], rev=[True]), 1, 1),
    ("grouped", "b01f_01io->b01f", (1, 4, 5, 5), (6, 2, 3, 3), _window([3, 3]), 2, 1),
    ("batch_grouped", "f01b_i01o->01bf", (4, 3, 4, 4), (6, 3, 2, 2), _window([2, 2], pads=[(0, 1), (1, 0)]), 1, 2),
    ("3d", "b012f_012io->b012f", (1, 2, 3, 4, 3), (2, 2, 2, 2, 2), _window([2, 2, 2]), 1, 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_convolution_matches_reference(case):
    _, labels, lhs_shape, rhs_shape, window, fg, bg = case
    rng = np.random.default_rng(2)
    lhs = rng.standard_normal(lhs_shape).astype(np.float32)
    rhs = rng.standard_normal(rhs_shape).astype(np.float32)
    expected = conv_reference(lhs, rhs, window, fg, bg)
    lhs_l, rest = labels.split("_")
    rhs_l, out_l = rest.split("->")
    spatial = [str(i) for i in range(len(lhs_shape) - 2)]
    expected = _to_labels(expected, out_l, ["b", "f"] + spatial)
    out = run_op("convolution", _to_labels(lhs, lhs_l, ["b", "f"] + spatial),
                 _to_labels(rhs, rhs_l, ["o", "i"] + spatial), result=Shape("f32", expected.shape),
                 window=window, dim_labels=labels, feature_group_count=fg, batch_group_count=bg)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
