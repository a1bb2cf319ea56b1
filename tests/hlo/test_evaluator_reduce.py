"""reduce, reduce-window, select-and-scatter and sort against Python loops."""
import itertools
import math

import numpy as np
import pytest

from xlapy.hlo import Shape, Window, WindowDim
from tests.hlo.evaluator_util import binary_computation, run_op, run_text

nan, inf = float("nan"), float("inf")


# --- reduce ----------------------------------------------------------------------------

def test_sum_combines_the_init_value_once():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = run_op("reduce", x, np.float32(10), result=Shape("f32", (3,)), dimensions=(0, 2),
                 to_apply=binary_computation("add", "f32"))
    expected = [10 + sum(x[i, j, k] for i in range(2) for k in range(4)) for j in range(3)]
    np.testing.assert_array_equal(out, expected)


def test_integer_sum_wraps_in_the_element_type():
    x = np.array([100, 100, 7], np.int8)
    out = run_op("reduce", x, np.int8(0), result=Shape("s8", ()), dimensions=(0,),
                 to_apply=binary_computation("add", "s8"))
    assert out == np.int8(207 - 256)


def test_max_reduce_propagates_nan_and_min_keeps_init():
    x = np.array([[1, nan, 3], [-inf, -1, 2]], np.float32)
    mx = run_op("reduce", x, np.float32(-inf), result=Shape("f32", (2,)), dimensions=(1,),
                to_apply=binary_computation("maximum", "f32"))
    assert np.isnan(mx[0]) and mx[1] == 2
    mn = run_op("reduce", np.array([5, 6], np.int32), np.int32(4), result=Shape("s32", ()),
                dimensions=(0,), to_apply=binary_computation("minimum", "s32"))
    assert mn == 4


def test_and_or_reductions_on_pred():
    x = np.array([[True, True], [True, False]])
    all_ = run_op("reduce", x, np.True_, result=Shape("pred", (2,)), dimensions=(1,),
                  to_apply=binary_computation("and", "pred"))
    any_ = run_op("reduce", x, np.False_, result=Shape("pred", (2,)), dimensions=(0,),
                  to_apply=binary_computation("or", "pred"))
    np.testing.assert_array_equal(all_, [True, False])
    np.testing.assert_array_equal(any_, [True, True])


def test_reducing_an_empty_dimension_gives_the_init():
    out = run_op("reduce", np.zeros((3, 0), np.float32), np.float32(2.5), result=Shape("f32", (3,)),
                 dimensions=(1,), to_apply=binary_computation("add", "f32"))
    np.testing.assert_array_equal(out, [2.5, 2.5, 2.5])


ARGMAX = """
    HloModule m
    argmax {
      v0 = f32[] parameter(0)
      i0 = s32[] parameter(1)
      v1 = f32[] parameter(2)
      i1 = s32[] parameter(3)
      gt = pred[] compare(v0, v1), direction=GT
      nan0 = pred[] compare(v0, v0), direction=NE
      eq = pred[] compare(v0, v1), direction=EQ
      lt_i = pred[] compare(i0, i1), direction=LT
      tie = pred[] and(eq, lt_i)
      g = pred[] or(gt, nan0)
      keep = pred[] or(g, tie)
      v = f32[] select(keep, v0, v1)
      i = s32[] select(keep, i0, i1)
      ROOT t = (f32[], s32[]) tuple(v, i)
    }
    ENTRY e {
      x = f32[4,7] parameter(0)
      idx = s32[4,7] iota(), iota_dimension=1
      ninf = f32[] constant(-inf)
      zero = s32[] constant(0)
      ROOT r = (f32[4], s32[4]) reduce(x, idx, ninf, zero), dimensions={1}, to_apply=argmax
    }"""


def _argmax_reference(row):
    best, best_i = -inf, 0
    for i, v in enumerate(row):
        if math.isnan(best):
            continue
        if v > best or math.isnan(v) or (v == best and i < best_i):
            best, best_i = v, i
    return best, best_i


def test_variadic_argmax_reducer_ties_and_nan():
    x = np.array([[1, 5, 5, 2, 5, 0, 1],          # ties: the first 5
                  [0, nan, 3, nan, 9, 1, 2],       # the first NaN wins
                  [-inf] * 7,
                  [3, 2, 1, 0, -1, -2, 7]], np.float32)
    values, indices = run_text(ARGMAX, x)
    for r in range(4):
        v, i = _argmax_reference([float(a) for a in x[r]])
        assert indices[r] == i
        assert (math.isnan(v) and np.isnan(values[r])) or values[r] == v


def _abs_max_computation():
    return """
    absmax {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      aa = f32[] abs(a)
      ab = f32[] abs(b)
      ROOT m = f32[] maximum(aa, ab)
    }"""


def test_generic_reducer_over_many_elements():
    x = np.linspace(-50, 40, 1001, dtype=np.float32).reshape(7, 143)
    out = run_text("HloModule m" + _abs_max_computation() + """
    ENTRY e {
      x = f32[7,143] parameter(0)
      z = f32[] constant(0)
      ROOT r = f32[7] reduce(x, z), dimensions={1}, to_apply=absmax
    }""", x)[0]
    np.testing.assert_array_equal(out, [max(abs(float(v)) for v in row) for row in x])


# --- reduce-window -----------------------------------------------------------------------

def _window(sizes, strides, pads, base=None, wdil=None):
    base = base or [1] * len(sizes)
    wdil = wdil or [1] * len(sizes)
    return Window(tuple(WindowDim(s, st, lo, hi, wd, bd)
                        for s, st, (lo, hi), wd, bd in zip(sizes, strides, pads, wdil, base)))


def _reduce_window_reference(x, window, init, fn):
    """Combines the in-bounds operand elements of every window with fn, starting at init."""
    dims = window.dims
    dilated = [(n - 1) * w.base_dilation + 1 for n, w in zip(x.shape, dims)]
    padded = [d + w.pad_low + w.pad_high for d, w in zip(dilated, dims)]
    extent = [(w.size - 1) * w.window_dilation + 1 for w in dims]
    out_dims = [(p - e) // w.stride + 1 for p, e, w in zip(padded, extent, dims)]
    out = np.empty(out_dims, x.dtype)
    for o in np.ndindex(*out_dims):
        acc = init
        for k in np.ndindex(*[w.size for w in dims]):
            src = []
            for oi, ki, w, n in zip(o, k, dims, x.shape):
                pos = oi * w.stride + ki * w.window_dilation - w.pad_low
                if pos < 0 or pos % w.base_dilation or pos // w.base_dilation >= n:
                    break
                src.append(pos // w.base_dilation)
            else:
                acc = fn(acc, x[tuple(src)])
        out[o] = acc
    return out


@pytest.mark.parametrize("window", [
    _window([2, 2], [2, 2], [(0, 0), (0, 0)]),
    _window([3, 3], [1, 1], [(1, 1), (1, 1)]),                         # SAME padding
    _window([2, 3], [1, 2], [(1, 0), (0, 2)], base=[2, 1]),           # base dilation
    _window([2, 2], [1, 1], [(0, 0), (-1, 1)], wdil=[2, 1]),          # window dilation, cropping
])
@pytest.mark.parametrize("op,init", [("add", 5.0), ("maximum", -inf)])
def test_reduce_window_skips_padding(window, op, init):
    x = np.arange(1, 31, dtype=np.float32).reshape(5, 6) * np.float32(0.5)
    fn = (lambda a, b: a + b) if op == "add" else max
    expected = _reduce_window_reference(x, window, np.float32(init), fn)
    out = run_op("reduce-window", x, np.float32(init), result=Shape("f32", expected.shape),
                 window=window, to_apply=binary_computation(op, "f32"))
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_reduce_window_generic_reducer_and_cumsum_window():
    x = np.array([[-3, 1, 2, -7, 4]], np.float32)
    text = "HloModule m" + _abs_max_computation() + """
    ENTRY e {
      x = f32[1,5] parameter(0)
      z = f32[] constant(0)
      ROOT r = f32[1,5] reduce-window(x, z), window={size=1x3 pad=0_0x2_0}, to_apply=absmax
    }"""
    out = run_text(text, x)[0]
    window = _window([1, 3], [1, 1], [(0, 0), (2, 0)])
    expected = _reduce_window_reference(x, window, np.float32(0), lambda a, b: max(abs(a), abs(b)))
    np.testing.assert_array_equal(out, expected)


# --- select-and-scatter --------------------------------------------------------------------

def test_select_and_scatter_picks_the_first_maximum_of_overlapping_windows():
    x = np.array([[1, 3, 3, 0, 2],
                  [3, 3, 1, 2, 2],
                  [0, 1, 4, 4, 1],
                  [2, 2, 0, 4, 1]], np.float32)
    source = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    text = """
    HloModule m
    ge {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT c = pred[] compare(a, b), direction=GE
    }
    add {
      p = f32[] parameter(0)
      q = f32[] parameter(1)
      ROOT s = f32[] add(p, q)
    }
    ENTRY e {
      x = f32[4,5] parameter(0)
      src = f32[2,3] parameter(1)
      z = f32[] constant(0)
      ROOT r = f32[4,5] select-and-scatter(x, src, z), window={size=3x3 stride=1x2 pad=0_0x1_1}, select=ge, scatter=add
    }"""
    out = run_text(text, x, source)[0]
    expected = np.zeros_like(x)
    for i, j in itertools.product(range(2), range(3)):
        best = None
        for a, b in itertools.product(range(3), range(3)):
            r, c = i + a, 2 * j + b - 1
            if 0 <= c < 5 and (best is None or not x[best] >= x[r, c]):
                best = (r, c)
        expected[best] += source[i, j]
    np.testing.assert_array_equal(out, expected)


# --- sort -------------------------------------------------------------------------------

def _comparator(dtypes, direction="LT", type_=None, key=0):
    params = "\n".join(f"  p{i} = {dtypes[i // 2]}[] parameter({i})" for i in range(2 * len(dtypes)))
    type_attr = f", type={type_}" if type_ else ""
    return (f"cmp {{\n{params}\n  ROOT c = pred[] compare(p{2 * key}, p{2 * key + 1}), "
            f"direction={direction}{type_attr}\n}}\n")


def test_sort_total_order_puts_nans_last():
    x = np.array([3, nan, -0.0, -inf, 0.0, 1, -nan, inf, -2], np.float32)
    text = "HloModule m\n" + _comparator(["f32"], "LT", "TOTALORDER") + """
    ENTRY e {
      x = f32[9] parameter(0)
      ROOT s = f32[9] sort(x), dimensions={0}, is_stable=true, to_apply=cmp
    }"""
    out = run_text(text, x)[0]
    bits = out.view(np.int32)
    assert np.isnan(out[0]) and bits[0] < 0           # -NaN first
    np.testing.assert_array_equal(out[1:7], np.array([-inf, -2, -0.0, 0.0, 1, 3], np.float32))
    assert np.signbit(out[3]) and not np.signbit(out[4])
    assert out[7] == inf and np.isnan(out[8])


def test_stable_argsort_with_ties_along_a_middle_axis():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 4, size=(3, 10, 2)).astype(np.int32)
    idx = np.broadcast_to(np.arange(10, dtype=np.int32)[None, :, None], keys.shape).copy()
    text = "HloModule m\n" + _comparator(["s32", "s32"], "LT") + """
    ENTRY e {
      k = s32[3,10,2] parameter(0)
      i = s32[3,10,2] parameter(1)
      ROOT s = (s32[3,10,2], s32[3,10,2]) sort(k, i), dimensions={1}, is_stable=true, to_apply=cmp
    }"""
    sorted_keys, perm = run_text(text, keys, idx)
    for a, c in itertools.product(range(3), range(2)):
        expected = sorted(range(10), key=lambda j: keys[a, j, c])       # Python's sort is stable
        np.testing.assert_array_equal(perm[a, :, c], expected)
        np.testing.assert_array_equal(sorted_keys[a, :, c], keys[a, expected, c])


def test_descending_sort_and_non_strict_comparator():
    x = np.array([5, -1, 7, 7, 0, 3], np.int32)
    for direction in ("GT", "GE"):          # GE is not a strict order: sorted one by one
        text = "HloModule m\n" + _comparator(["s32"], direction) + """
        ENTRY e {
          x = s32[6] parameter(0)
          ROOT s = s32[6] sort(x), dimensions={0}, to_apply=cmp
        }"""
        np.testing.assert_array_equal(run_text(text, x)[0], sorted(x.tolist(), reverse=True))


def test_long_rows_sort_stably_with_nans_last():
    # 3000 elements: the vectorized merge sort, checked against numpy's stable argsort.
    rng = np.random.default_rng(5)
    x = rng.integers(0, 40, size=(2, 3000)).astype(np.float32)
    x[x == 3] = nan
    idx = np.broadcast_to(np.arange(3000, dtype=np.int32), x.shape).copy()
    text = "HloModule m\n" + _comparator(["f32", "s32"], "LT", "TOTALORDER") + """
    ENTRY e {
      x = f32[2,3000] parameter(0)
      i = s32[2,3000] parameter(1)
      ROOT s = (f32[2,3000], s32[2,3000]) sort(x, i), dimensions={1}, is_stable=true, to_apply=cmp
    }"""
    _, perm = run_text(text, x, idx)
    np.testing.assert_array_equal(perm, np.argsort(x, axis=1, kind="stable"))


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 0)])
def test_zero_size_sort_reduce_and_reduce_window(shape):
    x = np.zeros(shape, np.float32)
    text = "HloModule m\n" + _comparator(["f32"], "LT") + _abs_max_computation() + f"""
    ENTRY e {{
      x = f32[{shape[0]},{shape[1]}] parameter(0)
      z = f32[] constant(1)
      s = f32[{shape[0]},{shape[1]}] sort(x), dimensions={{1}}, to_apply=cmp
      r = f32[{shape[0]}] reduce(x, z), dimensions={{1}}, to_apply=absmax
      ROOT t = (f32[{shape[0]},{shape[1]}], f32[{shape[0]}]) tuple(s, r)
    }}"""
    s, r = run_text(text, x)
    assert s.shape == shape and r.shape == (shape[0],)
    assert (r == 1).all()
