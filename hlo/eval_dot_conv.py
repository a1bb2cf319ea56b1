"""Reference semantics of dot (dot_general) and convolution.

Both accumulate floats in f64 and round once to the result type: XLA's f32
accumulation is within a few ulps of the exact sum, so the exact sum is the
best reference. Integer products accumulate in the result type, wrapping
(s8 x s8 -> s32 converts the operands to s32 first). Precision attributes are
ignored.

convolution brings every operand into a canonical order first:
lhs (batch, feature, spatial...), rhs (out feature, in feature, spatial...),
as named by `dim_labels` (`b01f_01io->b01f`). The result is the strided
correlation of the base-dilated (lhs_dilate), padded (negative padding crops) lhs
with the (possibly reversed) kernel, whose taps are `rhs_dilate` apart (input
elements between taps are never read, so a NaN there stays out), split into
`feature_group_count` groups of input features or `batch_group_count` groups
of batch elements. It is computed one kernel tap at a time on strided slices of
the operands: the dilated and padded input is never built.
"""
from __future__ import annotations

import numpy as np

from .eval_common import EvaluationError, flush, np_dtype_of, to_result
from .opcodes import reference
from .shape_rules_dot import ragged_dot_mode, ragged_group_prefix


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


def algorithm_refusal(instr) -> str | None:
    """Why a dot's `algorithm=` is not computed, else None. We compute a dot in its own
    types; an algorithm that names exactly those (dot_f32_f32_f32 on f32 operands and
    result, dot_bf16_bf16_f32 on bf16 operands into f32, ...) or `unset` is that, any
    other (tf32, split x3/x6/x9 products, f8 fast accumulation) would round differently."""
    if "sparsity" in instr.attrs:
        from .attributes import encode_sparsity
        return (f"a sparse dot (sparsity={encode_sparsity(instr.attrs['sparsity'])}) is read "
                f"and verified but not computed")
    algorithm = instr.attrs.get("algorithm")
    if algorithm is None or algorithm == "unset":
        return None
    # The instruction's own types, also when the evaluator sees it widened (a bf16 dot
    # computed in f32: widening is exact, so bf16 x bf16 -> f32 is what it computes).
    instr = getattr(instr, "_instr", instr)
    types = [o.shape.element_type for o in instr.operands] + [instr.shape.element_type]
    if algorithm == "dot_" + "_".join(types):
        return None
    return (f"dot algorithm {algorithm} is not supported on {'/'.join(types[:2])} -> "
            f"{types[2]} (only the dot's own types or unset)")


@reference("dot")
def dot(instr, operands, ctx):
    refusal = algorithm_refusal(instr)
    if refusal is not None:
        raise EvaluationError(f"{instr.name}: {refusal}")
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


def _dot_general(a: np.ndarray, b: np.ndarray, lb, lc, rb, rc) -> np.ndarray:
    """dot_general of already prepared (accumulation-type) arrays: batch, lhs free, rhs free."""
    lf = [d for d in range(a.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(b.ndim) if d not in rb and d not in rc]
    batch = [a.shape[d] for d in lb]
    m = int(np.prod([a.shape[d] for d in lf]))
    n = int(np.prod([b.shape[d] for d in rf]))
    k = int(np.prod([a.shape[d] for d in lc]))
    x = np.transpose(a, list(lb) + lf + list(lc)).reshape(batch + [m, k])
    y = np.transpose(b, list(rb) + list(rc) + rf).reshape(batch + [k, n])
    with np.errstate(all="ignore"):
        out = np.matmul(x, y)
    return out.reshape(batch + [a.shape[d] for d in lf] + [b.shape[d] for d in rf])


def _ragged_groups(instr, lhs_shape, sizes: np.ndarray, mode: str, ragged: int) -> np.ndarray:
    """The group of every lhs element's position along the ragged dimension (-1 past the
    last group), as an array broadcastable to the lhs: group j holds positions
    [sum(sizes[..:j]), sum(sizes[..:j+1])) of the group_sizes row the element's
    batch (and outer) coordinates select."""
    prefix = ragged_group_prefix(instr.attrs, mode, ragged)
    sizes = np.maximum(sizes.astype(np.int64), 0)
    if sizes.ndim == 1:
        sizes = np.broadcast_to(sizes, tuple(lhs_shape[d] for d in prefix) + sizes.shape)
    ends = np.cumsum(sizes, axis=-1)
    starts = ends - sizes
    # Axes: the prefix dims (in group_sizes' order), the ragged dim, the groups.
    order = prefix + [ragged]
    pos = np.arange(lhs_shape[ragged]).reshape((1,) * len(prefix) + (-1, 1))
    inside = (starts[..., None, :] <= pos) & (pos < ends[..., None, :])
    group = np.where(inside.any(-1), inside.argmax(-1), -1)       # prefix..., ragged
    by_dim = sorted(range(len(order)), key=lambda i: order[i])
    full = [1] * len(lhs_shape)
    for d in order:
        full[d] = lhs_shape[d]
    return np.transpose(group, by_dim).reshape(full)


@reference("ragged-dot")
def ragged_dot(instr, operands, ctx):
    """XLA's ragged dot by modes (shape_rules_dot.ragged_dot_shape): non-contracting,
    each row of the ragged dimension takes the rhs of its group, rows past the last
    group are zero; contracting, result j contracts group j's positions only (both
    operands masked); batch, the plain dot."""
    lhs, rhs, sizes = operands
    result = np_dtype_of(instr)
    lb, lc = list(instr.dims("lhs_batch_dims")), list(instr.dims("lhs_contracting_dims"))
    rb, rc = list(instr.dims("rhs_batch_dims")), list(instr.dims("rhs_contracting_dims"))
    mode, ragged = ragged_dot_mode(instr.attrs, lhs.ndim)
    a, b = _prepare(lhs, result, ctx), _prepare(rhs, result, ctx)
    if mode == "batch":
        return _finish(_dot_general(a, b, lb, lc, rb, rc), instr, ctx)
    group = _ragged_groups(instr, lhs.shape, sizes, mode, ragged)
    g = sizes.shape[-1]
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    if mode == "non-contracting":
        (gd,) = instr.dims("rhs_group_dims")
        rb2, rc2 = [d - (d > gd) for d in rb], [d - (d > gd) for d in rc]
        # The group of each output row, laid out as the result: batch, lhs free, rhs free.
        rows = np.squeeze(group, axis=tuple(lc))
        kept = sorted(lb + lf)
        rows = np.transpose(rows, [kept.index(d) for d in lb + lf])
        rows = rows.reshape(rows.shape + (1,) * (rhs.ndim - 1 - len(rb) - len(rc)))
        out = np.zeros(instr.shape.dims, a.dtype)
        for j in range(g):
            part = _dot_general(a, np.take(b, j, axis=gd), lb, lc, rb2, rc2)
            out = np.where(rows == j, part, out)
        return _finish(out, instr, ctx)
    # Contracting: result j masks the positions outside group j in both operands.
    on_rhs = _groups_on_rhs(np.squeeze(group, axis=tuple(lf)), lb, lc, rb, rc, rhs.ndim)
    zero = np.zeros((), a.dtype)
    out = np.zeros(instr.shape.dims, a.dtype)
    for j in range(g):
        out[j] = _dot_general(np.where(group == j, a, zero), np.where(on_rhs == j, b, zero),
                              lb, lc, rb, rc)
    return _finish(out, instr, ctx)


def _groups_on_rhs(group: np.ndarray, lb, lc, rb, rc, rhs_rank: int) -> np.ndarray:
    """A group array over the lhs's batch and contracting dims (in lhs order), moved
    onto the rhs's matching dims (size 1 on the rhs's free dims)."""
    to_rhs = dict(zip(lb, rb)) | dict(zip(lc, rc))
    kept = sorted(lb + lc)
    order = sorted(range(len(kept)), key=lambda i: to_rhs[kept[i]])
    full = [1] * rhs_rank
    for i, d in enumerate(kept):
        full[to_rhs[d]] = group.shape[i]
    return np.transpose(group, order).reshape(full)


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


def _prepare_kernel(k: np.ndarray, window_dims) -> np.ndarray:
    """Reverses the spatial axes 2.. of a canonical kernel where the window says so."""
    for i, w in enumerate(window_dims):
        if w.reversal:
            k = np.flip(k, axis=2 + i)
    return k


def tap_positions(w, in_size: int, out_size: int, tap: int):
    """Which output positions kernel tap `tap` of one spatial dimension reads a real
    input element for, and which element: (output slice, input slice, valid mask).

    Output position p reads position p*stride + tap*window_dilation - pad_low of the
    base-dilated input (negative padding crops: the same formula); that is input
    element (that position) / base_dilation when it is a multiple of base_dilation
    inside [0, in_size). The valid p form an arithmetic progression, so both sides are
    slices. Positions not valid fall on padding or between dilated elements.
    """
    p = np.arange(out_size, dtype=np.int64)
    pos = p * w.stride + tap * w.window_dilation - w.pad_low
    valid = (pos >= 0) & (pos % w.base_dilation == 0) & (pos < in_size * w.base_dilation)
    ps = p[valid]
    if not len(ps):
        return None, None, valid
    qs = pos[valid] // w.base_dilation
    p_step = int(ps[1] - ps[0]) if len(ps) > 1 else 1
    q_step = int(qs[1] - qs[0]) if len(qs) > 1 else 1
    p_slice = slice(int(ps[0]), int(ps[-1]) + 1, p_step)
    q_slice = slice(int(qs[0]), int(qs[-1]) + 1, q_step)
    return p_slice, q_slice, valid


@reference("convolution")
def convolution(instr, operands, ctx):
    """Tap by tap: for every kernel position, the output positions it reaches and the
    input elements they read are strided slices (`tap_positions`), so neither the
    base-dilated nor the padded input is ever built (an lhs-dilated gradient once asked
    for 101 GiB here), and memory stays the size of the operands and the result."""
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
    groups = instr.attrs.get("feature_group_count", 1)
    batch_groups = instr.attrs.get("batch_group_count", 1)
    if groups > 1 and batch_groups > 1:
        raise EvaluationError(f"{instr.name}: feature_group_count and batch_group_count "
                              f"cannot both exceed 1")
    rhs = _prepare_kernel(rhs, window_dims)
    canonical = [0] * len(out_perm)
    for j, c in enumerate(out_perm):
        canonical[c] = instr.shape.dims[j]
    out = np.zeros(canonical, lhs.dtype)
    out_spatial = canonical[2:]
    # Padding and the holes of base dilation hold zeros that XLA's CPU convolution
    # multiplies like any input: 0 * inf or 0 * NaN in the kernel makes a NaN there.
    bad_taps = ~np.isfinite(rhs) if rhs.dtype.kind == "f" and not np.isfinite(rhs).all() else None
    per_dim = [[tap_positions(w, n, o, k) for k in range(extent)]
               for w, n, o, extent in zip(window_dims, lhs.shape[2:], out_spatial, rhs.shape[2:])]
    with np.errstate(all="ignore"):
        for tap in np.ndindex(*rhs.shape[2:]):
            maps = [per_dim[d][k] for d, k in enumerate(tap)]
            weights = rhs[(slice(None), slice(None)) + tap]
            if all(m[0] is not None for m in maps):
                x = lhs[(slice(None), slice(None)) + tuple(m[1] for m in maps)]
                out[(slice(None), slice(None)) + tuple(m[0] for m in maps)] += \
                    _tap_product(x, weights, groups, batch_groups)
            if bad_taps is not None:
                _poison_holes(out, bad_taps[(slice(None), slice(None)) + tap].any(axis=1),
                              [m[2] for m in maps])
    return _finish(np.transpose(out, out_perm), instr, ctx)


def _tap_product(x: np.ndarray, weights: np.ndarray, groups: int, batch_groups: int):
    """out[b, o, p...] = sum over i of x[b, i, p...] * weights[o, i], in groups."""
    batch, features = x.shape[:2]
    out_features = weights.shape[0]
    if groups > 1:
        # Input features and output features split into `groups` matching groups.
        xg = x.reshape((batch, groups, features // groups) + x.shape[2:])
        wg = weights.reshape(groups, out_features // groups, weights.shape[1])
        out = np.einsum("bgi...,goi->bgo...", xg, wg)
        return out.reshape((batch, out_features) + x.shape[2:])
    if batch_groups > 1:
        # Batch elements split into groups; output feature group g reads batch group g.
        xg = x.reshape((batch_groups, batch // batch_groups) + x.shape[1:])
        wg = weights.reshape(batch_groups, out_features // batch_groups, weights.shape[1])
        out = np.einsum("gbi...,goi->bgo...", xg, wg)
        return out.reshape((batch // batch_groups, out_features) + x.shape[2:])
    return np.moveaxis(np.tensordot(x, weights, axes=([1], [1])), -1, 1)


def _poison_holes(out: np.ndarray, bad_features: np.ndarray, valid: list) -> None:
    """NaN where a non-finite kernel tap meets a zero of padding or dilation."""
    if not bad_features.any():
        return
    hole = np.zeros(out.shape[2:], bool)
    for d, v in enumerate(valid):
        shape = [1] * len(valid)
        shape[d] = len(v)
        hole |= ~v.reshape(shape)
    if hole.any():
        view = out[:, bad_features]
        view[..., hole] = np.nan
        out[:, bad_features] = view
