"""Reference semantics of dot (dot_general) and convolution.

Both accumulate floats in f64 and round once to the result type: XLA's f32
accumulation is within a few ulps of the exact sum, so the exact sum is the
best reference. Integer products accumulate in the result type, wrapping
(s8 x s8 -> s32 converts the operands to s32 first). Precision attributes are
ignored.

convolution brings every operand into a canonical order first:
lhs (batch, feature, spatial...), rhs (out feature, in feature, spatial...),
as named by `dim_labels` (`b01f_01io->b01f`). The lhs is base-dilated
(lhs_dilate) and padded (negative padding crops), the kernel reversed, and the
result is a strided correlation whose taps are `rhs_dilate` apart (input elements
between taps are never read, so a NaN there stays out), split into
`feature_group_count` groups of input features or `batch_group_count` groups
of batch elements.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .eval_common import EvaluationError, flush, np_dtype_of, to_result
from .opcodes import reference


def _accumulation_dtype(result: np.dtype) -> np.dtype:
    if result.kind == "f":
        return np.dtype(np.float64)
    return result


def _prepare(x: np.ndarray, result: np.dtype, ctx) -> np.ndarray:
    if x.dtype.kind == "f":
        x = flush(x, ctx)
    return x.astype(_accumulation_dtype(result), copy=False)


def _finish(value: np.ndarray, instr, ctx) -> np.ndarray:
    target = np_dtype_of(instr)
    if target == np.float16:        # XLA computes f16 dots in f32 before rounding
        value = value.astype(np.float32)
    return flush(to_result(value, instr), ctx)


@reference("dot")
def dot(instr, operands, ctx):
    lhs, rhs = operands
    result = np_dtype_of(instr)
    lb, lc = instr.dims("lhs_batch_dims"), instr.dims("lhs_contracting_dims")
    rb, rc = instr.dims("rhs_batch_dims"), instr.dims("rhs_contracting_dims")
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    batch = [lhs.shape[d] for d in lb]
    m = int(np.prod([lhs.shape[d] for d in lf]))
    n = int(np.prod([rhs.shape[d] for d in rf]))
    k = int(np.prod([lhs.shape[d] for d in lc]))
    a = np.transpose(_prepare(lhs, result, ctx), list(lb) + lf + list(lc)).reshape(batch + [m, k])
    b = np.transpose(_prepare(rhs, result, ctx), list(rb) + list(rc) + rf).reshape(batch + [k, n])
    with np.errstate(all="ignore"):
        out = np.matmul(a, b)
    out = out.reshape(batch + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf])
    return _finish(out, instr, ctx)


# --- convolution -------------------------------------------------------------------

def parse_dim_labels(labels: str):
    """'b01f_01io->b01f' -> (lhs, rhs, out) permutations to/from canonical order."""
    try:
        lhs, rest = labels.split("_")
        rhs, out = rest.split("->")
    except ValueError:
        raise EvaluationError(f"bad dim_labels {labels!r}") from None
    spatial = [str(i) for i in range(len(lhs) - 2)]
    lhs_perm = [lhs.index(c) for c in ["b", "f"] + spatial]
    rhs_perm = [rhs.index(c) for c in ["o", "i"] + spatial]
    canonical = ["b", "f"] + spatial
    out_perm = [canonical.index(c) for c in out]
    return lhs_perm, rhs_perm, out_perm


def _dilate_pad_spatial(x: np.ndarray, window_dims) -> np.ndarray:
    """Base-dilates and pads (or crops) the spatial axes 2.. of a canonical lhs with zeros."""
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


def _prepare_kernel(k: np.ndarray, window_dims) -> np.ndarray:
    """Reverses the spatial axes 2.. of a canonical kernel where the window says so.

    Window dilation is applied to the input patches instead (`_patches`): a dilated
    kernel padded with zero taps would turn a NaN between two taps into NaN * 0.
    """
    for i, w in enumerate(window_dims):
        if w.reversal:
            k = np.flip(k, axis=2 + i)
    return k


def _patches(lhs: np.ndarray, kernel_extents, window_dims) -> np.ndarray:
    """patches[b, i, p..., k...] = lhs[b, i, p*stride + k*dilation ...] (zero-size when
    the dilated window does not fit)."""
    nsp = len(window_dims)
    spatial_axes = tuple(range(2, 2 + nsp))
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


@reference("convolution")
def convolution(instr, operands, ctx):
    result = np_dtype_of(instr)
    lhs_perm, rhs_perm, out_perm = parse_dim_labels(instr.attrs["dim_labels"])
    lhs = np.transpose(_prepare(operands[0], result, ctx), lhs_perm)
    rhs = np.transpose(_prepare(operands[1], result, ctx), rhs_perm)
    nsp = lhs.ndim - 2
    window = instr.attrs.get("window")
    window_dims = list(window.dims) if window is not None else []
    if len(window_dims) != nsp:
        raise EvaluationError(f"{instr.name}: window of rank {len(window_dims)} for "
                              f"{nsp} spatial dimensions")
    lhs = _dilate_pad_spatial(lhs, window_dims)
    rhs = _prepare_kernel(rhs, window_dims)
    patches = _patches(lhs, rhs.shape[2:], window_dims)
    out = _grouped_correlation(instr, patches, rhs, nsp)
    return _finish(np.transpose(out, out_perm), instr, ctx)


def _grouped_correlation(instr, patches, rhs, nsp) -> np.ndarray:
    """out[b, o, p...] = sum over (i, k...) of patches[b, i, p..., k...] * rhs[o, i, k...]."""
    groups = instr.attrs.get("feature_group_count", 1)
    batch_groups = instr.attrs.get("batch_group_count", 1)
    sp = "pqrstu"[:nsp]
    ks = "klmnvw"[:nsp]
    batch, features = patches.shape[:2]
    out_features = rhs.shape[0]
    if groups > 1 and batch_groups > 1:
        raise EvaluationError(f"{instr.name}: feature_group_count and batch_group_count "
                              f"cannot both exceed 1")
    if groups > 1:
        # Input features and output features split into `groups` matching groups.
        p = patches.reshape((batch, groups, features // groups) + patches.shape[2:])
        r = rhs.reshape((groups, out_features // groups) + rhs.shape[1:])
        out = np.einsum(f"bgi{sp}{ks},goi{ks}->bgo{sp}", p, r, optimize=True)
        return out.reshape((batch, out_features) + out.shape[3:])
    if batch_groups > 1:
        # Batch elements split into groups; output feature group g reads batch group g.
        p = patches.reshape((batch_groups, batch // batch_groups) + patches.shape[1:])
        r = rhs.reshape((batch_groups, out_features // batch_groups) + rhs.shape[1:])
        out = np.einsum(f"gbi{sp}{ks},goi{ks}->bgo{sp}", p, r, optimize=True)
        return out.reshape((batch // batch_groups, out_features) + out.shape[3:])
    return np.einsum(f"bi{sp}{ks},oi{ks}->bo{sp}", patches, rhs, optimize=True)
