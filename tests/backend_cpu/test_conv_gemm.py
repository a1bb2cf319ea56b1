"""Convolutions on im2col + GEMM (conv/plan.py, conv/patches.py, conv/on_gemm.py)
against the reference evaluator: any dim_labels, window, grouping; chunk edges."""
from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.backend_cpu.conv import plan as conv_plan
from xlapy.hlo import Shape, Window, WindowDim
from xlapy.hlo.builder import HloBuilder
from tests.corpus_util import assert_close


@contextlib.contextmanager
def tiny_thresholds(chunk_bytes: int = 256, max_patch_bytes: int | None = None):
    """Sends even tiny convolutions to the GEMM path, in chunks of a few rows (so chunk
    edges fall inside runs of the inner row axis)."""
    with contextlib.ExitStack() as stack:
        for name, value in (("GEMM_MIN_FLOPS", 0), ("MIN_GROUP_WORK", 0),
                            ("ROWS_PER_FEATURE", 0), ("CHUNK_BYTES", chunk_bytes),
                            ("MAX_PATCH_BYTES", max_patch_bytes or conv_plan.MAX_PATCH_BYTES)):
            stack.enter_context(mock.patch.object(conv_plan, name, value))
        yield


def conv_module(lhs_labels, rhs_labels, out_labels, sizes, window, fgc=1, bgc=1,
                etype="f32", out_layout=None):
    """A module computing one convolution; `sizes` gives b, f (input channels), o
    (output features) and each spatial input size ('0', '1', ...)."""
    lhs_dims = tuple(sizes[c] for c in lhs_labels)
    rhs_sizes = {"i": sizes["f"] // fgc, "o": sizes["o"],
                 **{str(i): w.size for i, w in enumerate(window.dims)}}
    rhs_dims = tuple(rhs_sizes[c] for c in rhs_labels)
    b = HloBuilder("conv")
    x = b.parameter(Shape(etype, lhs_dims), "x")
    w = b.parameter(Shape(etype, rhs_dims), "w")
    conv = b.convolution(x, w, window, f"{lhs_labels}_{rhs_labels}->{out_labels}",
                         feature_group_count=fgc, batch_group_count=bgc)
    if out_layout is not None:
        conv.shape = Shape(etype, conv.shape.dims, layout=out_layout)
    return b.build_module(conv)


def run_and_compare(module, seed=0, expect="gemm"):
    """Compiles (no passes), runs on random inputs, compares with the evaluator, and
    checks which path computed it: "gemm", "depthwise", "stencil" or "generic" (or
    one of a tuple of them)."""
    rng = np.random.default_rng(seed)
    dt = hlo.numpy_dtype(module.entry.parameters[0].shape.element_type)
    args = [rng.standard_normal(p.shape.dims).astype(dt) for p in module.entry.parameters]
    exe = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=None))
    got = exe.run(*args)[0]
    expected = np.asarray(hlo.evaluate(module, args)[0])
    if dt == np.float32:
        # A sum of products rounds by up to a few ulps of the sum of their magnitudes
        # (with or without FMA, in any order): where terms cancel, that bound is the
        # honest tolerance, not one relative to the small result.
        magnitude = np.asarray(hlo.evaluate(module, [np.abs(a) for a in args])[0])
        slack = 1e-6 + 2e-5 * np.abs(expected) + 3e-7 * magnitude
        assert (np.abs(got - expected) <= slack).all(), \
            f"convolution: max excess {np.max(np.abs(got - expected) - slack)}"
    else:
        assert_close(got, expected, "convolution")
    text = exe.as_llvm_ir()
    path = "gemm" if "_gemm" in text else "depthwise" if "dw.row" in text \
        else "stencil" if "dws.row" in text else "generic"
    assert path in (expect if isinstance(expect, tuple) else (expect,))
    return got


def window_of(sizes, strides=None, pads=None, lhs_dil=None, rhs_dil=None, rev=None):
    n = len(sizes)
    strides, pads = strides or [1] * n, pads or [(0, 0)] * n
    lhs_dil, rhs_dil, rev = lhs_dil or [1] * n, rhs_dil or [1] * n, rev or [False] * n
    return Window(tuple(WindowDim(s, st, lo, hi, rd, ld, r) for s, st, (lo, hi), rd, ld, r
                        in zip(sizes, strides, pads, rhs_dil, lhs_dil, rev)))


SAME3 = window_of([3, 3], pads=[(1, 1), (1, 1)])
SIZES = {"b": 2, "f": 4, "o": 8, "0": 6, "1": 5}


@pytest.mark.parametrize("labels", [
    "b01f_01io->b01f",     # NHWC / HWIO: direct output, rows-major patches
    "bf01_oi01->bf01",     # NCHW / OIHW: columns-major patches, tile copy
    "f01b_i01o->01bf",     # the weight gradient's form
    "b01f_01oi->b01f",     # the input gradient's form: the kernel is copied
    "1b0f_o10i->f01b",     # anything else
])
def test_labels(labels):
    lhs, rest = labels.split("_")
    rhs, out = rest.split("->")
    with tiny_thresholds():
        run_and_compare(conv_module(lhs, rhs, out, SIZES, SAME3))


@pytest.mark.parametrize("fgc, bgc", [(2, 1), (4, 1), (1, 2)])
def test_groups(fgc, bgc):
    sizes = dict(SIZES, b=2 * bgc, f=4, o=8)
    with tiny_thresholds():
        run_and_compare(conv_module("b01f", "01io", "b01f", sizes, SAME3, fgc, bgc))
        run_and_compare(conv_module("bf01", "oi01", "bf01", sizes, SAME3, fgc, bgc))


def test_window_features_and_f64():
    window = window_of([3, 2], strides=[2, 1], pads=[(2, 1), (-1, 1)], lhs_dil=[2, 1],
                       rhs_dil=[1, 2], rev=[True, False])
    with tiny_thresholds():
        run_and_compare(conv_module("bf01", "oi01", "bf01", SIZES, window, etype="f64"))
        run_and_compare(conv_module("b01f", "01io", "b01f", SIZES, window))


def test_non_default_output_layout():
    with tiny_thresholds():
        run_and_compare(conv_module("b01f", "01io", "b01f", SIZES, SAME3,
                                    out_layout=(1, 2, 3, 0)))


def test_patch_budget_splits_rows():
    """A budget of a few rows of patches: more, smaller chunks, same result."""
    with tiny_thresholds(max_patch_bytes=2 * 3 * 36 * 4):
        module = conv_module("b01f", "01io", "b01f", SIZES, SAME3)
        conv = module.entry.root
        plan = conv_plan.plan_conv(conv, conv.operands[1].shape.dims, (96, 32, 8, 1), 2)
        assert plan is not None and plan.chunk_rows <= 3
        run_and_compare(module)


@pytest.mark.parametrize("window", [SAME3, window_of([3, 2], strides=[2, 1], pads=[(0, 2), (1, 0)],
                                                  lhs_dil=[1, 2], rhs_dil=[2, 1], rev=[False, True])])
def test_depthwise_direct_loop(window):
    sizes = dict(SIZES, f=8, o=8)
    run_and_compare(conv_module("b01f", "01io", "b01f", sizes, window, fgc=8), expect="depthwise")
    # a spatial dimension innermost: stencil runs along it (unless it is lhs-dilated)
    for lhs, out in (("bf01", "bf01"), ("b1f0", "bf10")):
        along = window.dims[int(out[-1])]
        run_and_compare(conv_module(lhs, "oi01", out, sizes, window, fgc=8),
                        expect="stencil" if along.base_dilation == 1 else "generic")
    # the output's innermost dimension is not the input's: the generic generator
    run_and_compare(conv_module("bf10", "oi01", "bf01", sizes, window, fgc=8), expect="generic")


@pytest.mark.parametrize("size", [2, 6])
def test_depthwise_kernel_gradient(size):
    """batch_group_count = channels: a short (unrolled) or long (accumulated) sum per tap."""
    sizes = {"b": 8, "f": 3, "o": 8, "0": 7, "1": 6}
    window = window_of([size, size], pads=[(1, 1), (1, 1)])
    run_and_compare(conv_module("f01b", "i01o", "01bf", sizes, window, bgc=8), expect="depthwise")
    run_and_compare(conv_module("bf01", "oi01", "fb01", sizes, window, bgc=8), expect="stencil")


def _plan(labels, sizes, window=SAME3, fgc=1, bgc=1):
    lhs, rest = labels.split("_")
    rhs, out = rest.split("->")
    conv = conv_module(lhs, rhs, out, sizes, window, fgc, bgc).entry.root
    dims = conv.operands[1].shape.dims
    row_major = [int(np.prod(dims[i + 1:])) for i in range(len(dims))]
    return conv_plan.plan_conv(conv, dims, tuple(row_major), 2)


def test_plans_of_real_cnn_layouts():
    big = {"b": 8, "f": 64, "o": 64, "0": 56, "1": 56}
    nhwc = _plan("b01f_01io->b01f", big)
    assert nhwc.direct and not nhwc.columns_major and nhwc.rhs_strides == (64, 1)
    nchw = _plan("bf01_oi01->bf01", big)
    assert not nchw.direct and nchw.columns_major and nchw.rhs_strides == (1, 576)
    wgrad = _plan("f01b_i01o->01bf", dict(big, b=64, f=8, **{"0": 58, "1": 58}),
                  window_of([56, 56]))
    assert wgrad.direct and wgrad.columns_major and wgrad.rhs_strides == (64, 1)
    assert _plan("b01f_01oi->b01f", big).rhs_strides is None       # kernel copied
    assert _plan("b01f_01io->b01f", dict(big, f=128, o=128), fgc=128) is None   # depthwise
    for plan in (nhwc, nchw, wgrad):
        esize = 4
        assert plan.units * plan.chunk_rows * plan.k * esize <= conv_plan.MAX_PATCH_BYTES
        assert plan.items >= plan.units == 2


@st.composite
def conv_cases(draw):
    rank = draw(st.integers(1, 2))
    digits = [str(i) for i in range(rank)]
    lhs = "".join(draw(st.permutations(["b", "f", *digits])))
    rhs = "".join(draw(st.permutations(["i", "o", *digits])))
    out = "".join(draw(st.permutations(["b", "f", *digits])))
    kind = draw(st.sampled_from(["none", "feature", "batch"]))
    groups = 1 if kind == "none" else draw(st.integers(2, 3))
    sizes = {"b": draw(st.integers(1, 2)) * (groups if kind == "batch" else 1),
             "f": draw(st.integers(1, 3)) * (groups if kind == "feature" else 1),
             "o": draw(st.integers(1, 4)) * groups}
    dims = []
    for d in digits:
        sizes[d] = draw(st.integers(2, 7))
        dims.append(WindowDim(draw(st.integers(1, 3)), draw(st.integers(1, 2)),
                              draw(st.integers(-1, 2)), draw(st.integers(-1, 2)),
                              draw(st.integers(1, 2)), draw(st.integers(1, 2)),
                              draw(st.booleans())))
        dilated = (sizes[d] - 1) * dims[-1].base_dilation + 1 + dims[-1].pad_low + dims[-1].pad_high
        assume(dilated >= (dims[-1].size - 1) * dims[-1].window_dilation + 1)
    fgc, bgc = (groups, 1) if kind == "feature" else (1, groups) if kind == "batch" else (1, 1)
    return conv_module(lhs, rhs, out, sizes, Window(tuple(dims)), fgc, bgc,
                       draw(st.sampled_from(["f32", "f32", "f64"])))


@settings(max_examples=30, deadline=None)
@given(module=conv_cases(), chunk_bytes=st.sampled_from([64, 256, 1 << 20]))
def test_random_convolutions(module, chunk_bytes):
    with tiny_thresholds(chunk_bytes):      # depthwise ones may take a direct loop
        run_and_compare(module, expect=("gemm", "depthwise", "stencil"))


@st.composite
def transposed_convs(draw):
    """lhs-dilated convolutions with stride 1 (input gradients of strided convs):
    split into phases by conv/phases.py."""
    rank = draw(st.integers(1, 2))
    digits = [str(i) for i in range(rank)]
    sizes = {"b": draw(st.integers(1, 2)), "f": draw(st.integers(1, 3)),
             "o": draw(st.integers(1, 4))}
    dims = []
    for d in digits:
        sizes[d] = draw(st.integers(1, 6))
        dims.append(WindowDim(draw(st.integers(1, 4)), 1, draw(st.integers(-1, 3)),
                              draw(st.integers(-1, 3)), 1, draw(st.integers(1, 3)),
                              draw(st.booleans())))
        dilated = (sizes[d] - 1) * dims[-1].base_dilation + 1 + dims[-1].pad_low + dims[-1].pad_high
        assume(dilated >= dims[-1].size)
    spatial = "".join(digits)
    lhs, rhs, out = draw(st.sampled_from([(f"b{spatial}f", f"{spatial}oi", f"b{spatial}f"),
                                          (f"bf{spatial}", f"oi{spatial}", f"bf{spatial}")]))
    return conv_module(lhs, rhs, out, sizes, Window(tuple(dims)))


@settings(max_examples=25, deadline=None)
@given(module=transposed_convs(), chunk_bytes=st.sampled_from([64, 1 << 20]))
def test_transposed_convolutions_by_phase(module, chunk_bytes):
    with tiny_thresholds(chunk_bytes):
        run_and_compare(module)


def test_stride2_input_gradient_splits_into_phases():
    from xlapy.backend_cpu.conv.phases import split_phases
    from xlapy.backend_cpu.gemm.operands import View
    window = window_of([3, 3], pads=[(1, 2), (1, 2)], lhs_dil=[2, 2], rev=[True, True])
    module = conv_module("b01f", "01oi", "b01f", dict(SIZES, **{"0": 4, "1": 3}), window)
    conv = module.entry.root
    rhs = conv.operands[1].shape
    view = View(None, rhs.dims, (96, 32, 4, 1), "f32")
    phases = split_phases(conv, view, type("Out", (), {"pointer": None})())
    assert len(phases) == 4
    assert sorted(p.rhs.dims[0] * p.rhs.dims[1] for p in phases) == [1, 2, 2, 4]   # 9 taps
    with tiny_thresholds():
        run_and_compare(module)


def test_nchw_weight_gradient_walks_taps():
    """fb01_io01->fb01 (JAX's NCHW kernel gradient): the window is longer than the
    output, so P is rows-major and each row's taps split into zeros/copy/zeros."""
    sizes = {"b": 3, "f": 2, "o": 4, "0": 6, "1": 5}
    window = window_of([5, 5], pads=[(1, 1), (1, 1)])
    module = conv_module("fb01", "io01", "fb01", sizes, window)
    conv = module.entry.root
    plan = conv_plan.plan_conv(conv, conv.operands[1].shape.dims, (100, 25, 5, 1), 2)
    assert plan is None or not plan.columns_major
    with tiny_thresholds():
        plan = conv_plan.plan_conv(conv, conv.operands[1].shape.dims, (100, 25, 5, 1), 2)
        assert not plan.columns_major and plan.k_axes[-1].spatial == 1
        run_and_compare(module)


@pytest.mark.parametrize("labels", [("b01f", "01oi", "b01f"), ("bf01", "oi01", "bf01")])
def test_input_gradient_of_strided_1x1(labels):
    """lhs_dilate=2 with a 1x1 window: 3 of 4 phases see no tap and are zero-filled."""
    window = window_of([1, 1], pads=[(0, 1), (0, 1)], lhs_dil=[2, 2])
    with tiny_thresholds():
        got = run_and_compare(conv_module(*labels, dict(SIZES, **{"0": 4, "1": 3}), window))
    spatial = got[:, 1::2] if labels[2] == "b01f" else got[:, :, 1::2]
    assert not spatial.any()
