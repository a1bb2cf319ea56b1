"""Data-movement ops against element-by-element Python references."""
import itertools

import numpy as np
import pytest

from xlapy.hlo import PadDim, Shape, SliceDim
from tests.hlo.evaluator_util import run_op, run_text

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_broadcast_with_unsorted_dimensions():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = run_op("broadcast", x, result=Shape("s32", (3, 4, 2)), dimensions=(2, 0))
    for i, j, k in itertools.product(range(3), range(4), range(2)):
        assert out[i, j, k] == x[k, i]


def test_transpose():
    out = run_op("transpose", X, result=Shape("f32", (4, 2, 3)), dimensions=(2, 0, 1))
    for i, j, k in itertools.product(range(4), range(2), range(3)):
        assert out[i, j, k] == X[j, k, i]


def test_bitcast_reads_the_physical_layout():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # Source {0,1}: dim 0 is minor, so memory holds x[0,0], x[1,0], x[0,1], ...
    out = run_text("""
        HloModule m
        ENTRY e {
          p = f32[2,3]{0,1} parameter(0)
          ROOT b = f32[6]{0} bitcast(p)
        }""", x)[0]
    np.testing.assert_array_equal(out, [x[i % 2, i // 2] for i in range(6)])
    # Row-major source into a column-major target: target (i, j) is at memory j*3 + i.
    out = run_text("""
        HloModule m
        ENTRY e {
          p = f32[2,3]{1,0} parameter(0)
          ROOT b = f32[3,2]{0,1} bitcast(p)
        }""", x)[0]
    flat = x.ravel()
    for i, j in itertools.product(range(3), range(2)):
        assert out[i, j] == flat[j * 3 + i]


def test_copy_with_layout_change_is_a_logical_identity():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run_text("""
        HloModule m
        ENTRY e {
          p = f32[2,3]{1,0} parameter(0)
          ROOT c = f32[2,3]{0,1} copy(p)
        }""", x)[0]
    np.testing.assert_array_equal(out, x)


def test_movement_never_flushes_denormals():
    x = np.array([[1e-40, -2e-40]], dtype=np.float32)
    np.testing.assert_array_equal(run_op("bitcast", x, result=Shape("f32", (2,))), x.ravel())
    np.testing.assert_array_equal(run_op("transpose", x, result=Shape("f32", (2, 1)), dimensions=(1, 0)), x.T)


def test_strided_slice():
    x = np.arange(20 * 30, dtype=np.float32).reshape(20, 30)
    sl = (SliceDim(2, 20, 3), SliceDim(1, 30, 4))
    out = run_op("slice", x, result=Shape("f32", (6, 8)), slice=sl)
    for i, j in itertools.product(range(6), range(8)):
        assert out[i, j] == x[2 + 3 * i, 1 + 4 * j]


def _pad_reference(x, value, padding):
    dims = [lo + hi + n + max(n - 1, 0) * it for n, (lo, hi, it) in zip(x.shape, padding)]
    out = np.full(dims, value, dtype=x.dtype)
    for index in np.ndindex(*dims):
        source = []
        for o, n, (lo, _, it) in zip(index, x.shape, padding):
            k = o - lo
            if k < 0 or k % (it + 1) or k // (it + 1) >= n:
                break
            source.append(k // (it + 1))
        else:
            out[index] = x[tuple(source)]
    return out


@pytest.mark.parametrize("padding", [
    [(1, 2, 0), (0, 0, 1)], [(-1, 2, 1), (3, -2, 0)], [(0, 0, 2), (-2, -1, 2)], [(2, 2, 0), (-3, 0, 0)],
])
def test_pad_negative_and_interior(padding):
    x = np.arange(1, 31, dtype=np.float32).reshape(5, 6)
    expected = _pad_reference(x, np.float32(-7), padding)
    out = run_op("pad", x, np.float32(-7), result=Shape("f32", expected.shape),
                 padding=tuple(PadDim(*p) for p in padding))
    np.testing.assert_array_equal(out, expected)


def test_concatenate_reverse_iota():
    a, b = np.ones((2, 3), np.int32), np.zeros((2, 1), np.int32)
    out = run_op("concatenate", a, b, result=Shape("s32", (2, 4)), dimensions=(1,))
    np.testing.assert_array_equal(out, [[1, 1, 1, 0], [1, 1, 1, 0]])
    rev = run_op("reverse", X, dimensions=(0, 2))
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        assert rev[i, j, k] == X[1 - i, j, 3 - k]
    iota = run_text("""
        HloModule m
        ENTRY e {
          ROOT i = f32[2,3] iota(), iota_dimension=1
        }""")[0]
    np.testing.assert_array_equal(iota, [[0, 1, 2], [0, 1, 2]])


@pytest.mark.parametrize("starts,expected_starts", [((1, 2), (1, 2)), ((9, -4), (7, 0)), ((-1, 100), (0, 15))])
def test_dynamic_slice_clamps_starts(starts, expected_starts):
    x = np.arange(200, dtype=np.float32).reshape(10, 20)
    out = run_op("dynamic-slice", x, np.int32(starts[0]), np.int32(starts[1]),
                 result=Shape("f32", (3, 5)), dynamic_slice_sizes=(3, 5))
    r, c = expected_starts
    np.testing.assert_array_equal(out, x[r:r + 3, c:c + 5])


@pytest.mark.parametrize("starts,expected_starts", [((0, 0), (0, 0)), ((9, 30), (8, 16)), ((-5, 3), (0, 3))])
def test_dynamic_update_slice_clamps_starts(starts, expected_starts):
    x = np.zeros((10, 20), np.float32)
    update = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    out = run_op("dynamic-update-slice", x, update, np.int32(starts[0]), np.int32(starts[1]))
    expected = x.copy()
    r, c = expected_starts
    expected[r:r + 2, c:c + 4] = update
    np.testing.assert_array_equal(out, expected)
    assert not x.any()          # the operand is not modified in place
