"""reduce-window on the CPU backend: padding and base-dilation holes are skipped.

XLA (and the evaluator) fold only the real, in-bounds elements of each window into
an accumulator that starts at the init value: the init enters once per output
element. With an identity init (0 for a sum, -inf for a max) any other reading
gives the same numbers, so these tests use inits that are not identities (an
add-reduce of ones with init 10 over a padded window of 3: 12 at the edges, not
22), other reducers (max with a finite init, min, multiply, a reducer computation
that is not one op), every kind of window attribute, ranks 1 to 4, f32/f64/s32,
and the window fused behind an elementwise producer.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo
from xlapy.frontend import jit_compile, ops
from tests.backend_cpu.helpers import check_against_evaluator

REDUCERS = {
    "add": "ROOT r = {t}[] add(a, b)",
    "max": "ROOT r = {t}[] maximum(a, b)",
    "min": "ROOT r = {t}[] minimum(a, b)",
    "mul": "ROOT r = {t}[] multiply(a, b)",
    # Not one op: the generic path applies the computation per window element.
    "absmax": "n = {t}[] abs(b)\n  ROOT r = {t}[] maximum(a, n)",
}

# Inits that are not the reducer's identity, per (reducer, kind of type).
INITS = {("add", "f"): "10", ("add", "s"): "10", ("max", "f"): "0.5", ("max", "s"): "1",
         ("min", "f"): "-0.25", ("min", "s"): "-1", ("mul", "f"): "2", ("mul", "s"): "3",
         ("absmax", "f"): "0.75", ("absmax", "s"): "2"}


def _out_dims(dims, window) -> list[int]:
    out = []
    for n, (size, stride, (lo, hi), base, wdil) in zip(dims, window):
        extent = (n - 1) * base + 1 + lo + hi if n else lo + hi
        span = (size - 1) * wdil + 1
        out.append(max(0, (extent - span) // stride + 1))
    return out


def _window_text(window) -> str:
    parts = [("size", [w[0] for w in window]), ("stride", [w[1] for w in window])]
    text = [f"{k}={'x'.join(map(str, v))}" for k, v in parts]
    text.append("pad=" + "x".join(f"{lo}_{hi}" for _, _, (lo, hi), _, _ in window))
    text.append("lhs_dilate=" + "x".join(str(w[3]) for w in window))
    text.append("rhs_dilate=" + "x".join(str(w[4]) for w in window))
    return "{" + " ".join(text) + "}"


def module_text(etype: str, dims, window, reducer: str, init: str, fused: bool) -> str:
    """reduce-window of a parameter (or, fused, of negate(p) * p) with init `init`."""
    shape = f"{etype}[{','.join(map(str, dims))}]"
    out = f"{etype}[{','.join(map(str, _out_dims(dims, window)))}]"
    body = REDUCERS[reducer].format(t=etype)
    win = _window_text(window)
    head = f"""HloModule rw
red {{
  a = {etype}[] parameter(0)
  b = {etype}[] parameter(1)
  {body}
}}
"""
    if not fused:
        return head + f"""ENTRY e {{
  p = {shape} parameter(0)
  i = {etype}[] constant({init})
  ROOT w = {out} reduce-window(p, i), window={win}, to_apply=red
}}
"""
    return head + f"""fused {{
  p = {shape} parameter(0)
  i = {etype}[] parameter(1)
  n = {shape} negate(p)
  m = {shape} multiply(n, p)
  ROOT w = {out} reduce-window(m, i), window={win}, to_apply=red
}}
ENTRY e {{
  p = {shape} parameter(0)
  i = {etype}[] constant({init})
  ROOT f = {out} fusion(p, i), kind=kLoop, calls=fused
}}
"""


def _inputs(etype: str, dims, reducer: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = hlo.numpy_dtype(etype)
    if reducer == "mul":      # near 1 (floats) or small (ints): no overflow in a window
        if etype[0] == "s":
            return rng.integers(-2, 3, dims).astype(dt)
        return rng.uniform(0.5, 1.5, dims).astype(dt)
    if etype[0] == "s":
        return rng.integers(-9, 10, dims).astype(dt)
    return rng.uniform(-2, 2, dims).astype(dt)


def W(size, stride=1, pad=(0, 0), base=1, wdil=1):
    return (size, stride, pad, base, wdil)


# (name, input dims, window per dimension)
WINDOWS = [
    ("1d_pad", [4], [W(3, pad=(1, 1))]),
    ("1d_stride_pad", [11], [W(4, 2, (2, 3))]),
    ("1d_low_only", [9], [W(3, pad=(2, 0))]),
    ("1d_high_only", [9], [W(3, 2, (0, 2))]),
    ("1d_base_dilation", [6], [W(3, pad=(1, 1), base=2)]),
    ("1d_window_dilation", [8], [W(3, pad=(2, 2), wdil=2)]),
    ("1d_all_padding_windows", [3], [W(2, pad=(3, 3))]),
    ("1d_cumsum_like", [17], [W(17, pad=(16, 0))]),
    ("2d_pool", [7, 9], [W(3, 2, (1, 1)), W(3, 2, (1, 1))]),
    ("2d_mixed", [5, 6], [W(2, 1, (0, 1), base=2), W(3, 2, (2, 0), wdil=2)]),
    ("3d", [3, 5, 4], [W(2, 1, (1, 0)), W(2, 2, (0, 1)), W(2, 1, (1, 1))]),
    ("4d_nhwc_pool", [2, 6, 5, 3], [W(1), W(3, 2, (1, 1)), W(3, 2, (1, 1)), W(1)]),
    ("4d_dilated", [1, 5, 5, 2], [W(1), W(2, 1, (1, 1), base=2, wdil=2), W(3, 1, (1, 1)),
                                  W(2, 1, (0, 1))]),
]


def _check(etype, dims, window, reducer, fused, seed=0, what=""):
    init = INITS[(reducer, etype[0])]
    text = module_text(etype, dims, window, reducer, init, fused)
    x = _inputs(etype, dims, reducer, seed)
    return check_against_evaluator(text, [x], what or text)


def test_add_of_ones_with_init_ten():
    """The report: each output is 10 + (the number of real elements in its window)."""
    text = module_text("f32", [4], [W(3, pad=(1, 1))], "add", "10", False)
    out = check_against_evaluator(text, [np.ones(4, np.float32)])[0]
    np.testing.assert_array_equal(out, [12, 13, 13, 12])


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("name,dims,window", WINDOWS, ids=[w[0] for w in WINDOWS])
def test_windows_add_f32(name, dims, window, fused):
    _check("f32", dims, window, "add", fused, what=name)


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("etype", ["f32", "f64", "s32"])
@pytest.mark.parametrize("reducer", ["max", "min", "mul", "absmax", "add"])
@pytest.mark.parametrize("case", [1, 4, 9, 12], ids=lambda i: WINDOWS[i][0])
def test_reducers_and_types(case, reducer, etype, fused):
    name, dims, window = WINDOWS[case]
    _check(etype, dims, window, reducer, fused, seed=case, what=f"{name} {reducer} {etype}")


def test_max_with_finite_init_skips_padding():
    """Padding is not init: a window of all -5 beside padding gives max(init, -5)."""
    text = module_text("f32", [5], [W(3, pad=(1, 1))], "max", "-7", False)
    out = check_against_evaluator(text, [np.full(5, -5, np.float32)])[0]
    np.testing.assert_array_equal(out, np.full(5, -5, np.float32))


def test_windows_wholly_in_padding_give_init():
    text = module_text("s32", [3], [W(2, pad=(3, 3))], "add", "10", False)
    out = check_against_evaluator(text, [np.array([1, 2, 4], np.int32)])[0]
    np.testing.assert_array_equal(out, [10, 10, 11, 13, 16, 14, 10, 10])


def _same_pads(size: int, k: int, s: int) -> tuple[int, int]:
    total = max((-(-size // s) - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def test_frontend_pooling_and_cumsum():
    """The frontend's pools (SAME padding) and cumsum, compiled, against numpy."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (2, 7, 6, 3)).astype(np.float32)
    fn = jit_compile(lambda a: (ops.max_pool2d(a, 3, 2, "SAME"), ops.avg_pool2d(a, 3, 2, "SAME"),
                                ops.cumsum(a, axis=1)), name="rw_pools")
    mx, avg, cs = fn(x)
    (h0, h1), (w0, w1) = _same_pads(7, 3, 2), _same_pads(6, 3, 2)
    pad = np.pad(x.astype(np.float64), [(0, 0), (h0, h1), (w0, w1), (0, 0)],
                 constant_values=np.nan)
    oh, ow = mx.shape[1:3]
    win = np.stack([pad[:, i:i + 2 * oh - 1:2, j:j + 2 * ow - 1:2, :]
                    for i in range(3) for j in range(3)])
    np.testing.assert_array_equal(mx, np.nanmax(win, axis=0).astype(np.float32))
    np.testing.assert_allclose(avg, np.nanmean(win, axis=0), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(cs, np.cumsum(x.astype(np.float64), axis=1), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("etype,reducer,init", [
    ("u8", "max", "3"), ("u8", "min", "250"), ("u32", "min", "4000000000"), ("s8", "max", "-100"),
    ("s8", "min", "100"), ("pred", "and", "true"), ("pred", "or", "false"),
    ("s32", "and", "-1"), ("s32", "or", "0"), ("f16", "add", "1"), ("f16", "max", "-2"),
])
def test_padding_is_the_identity_for_every_type(etype, reducer, init):
    """A one-op reducer reads its identity in padding: unsigned extremes, all-ones
    masks, booleans and f16 included."""
    body = {"max": "maximum", "min": "minimum"}.get(reducer, reducer)
    text = f"""HloModule rw_types
red {{
  a = {etype}[] parameter(0)
  b = {etype}[] parameter(1)
  ROOT r = {etype}[] {body}(a, b)
}}
ENTRY e {{
  p = {etype}[9] parameter(0)
  i = {etype}[] constant({init})
  ROOT w = {etype}[6] reduce-window(p, i), window={{size=4 stride=2 pad=2_3}}, to_apply=red
}}
"""
    rng = np.random.default_rng(5)
    if etype == "pred":
        x = rng.integers(0, 2, 9).astype(bool)
    elif etype == "f16":
        x = rng.uniform(-3, 3, 9).astype(np.float16)
    else:
        info = np.iinfo(hlo.numpy_dtype(etype))
        x = rng.integers(info.min, info.max, 9, endpoint=True).astype(hlo.numpy_dtype(etype))
    check_against_evaluator(text, [x], f"{etype} {reducer}")
