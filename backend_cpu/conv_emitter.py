"""Convolutions on the packed GEMM: im2col into a scratch matrix, then one product.

For the common layout (lhs `b01..f`, rhs `01..io`, out `b01..f`, no feature or
batch grouping), a convolution is a matrix product

    out[(n, o0, o1..), f] = sum over (k0, k1.., c) of
        patches[(n, o0, o1..), (k0, k1.., c)] * rhs[(k0, k1.., c), f]

where the rhs is used in place (its row-major HWIO bytes are that [K, F]
matrix) and `patches` is built in a scratch slot: each entry is the input
element under window tap (k0, k1..) of output position (o0, o1..), or 0 in
padding and between base-dilated elements (window_source gives the mapping).
`[begin, end)` are work units of whole batch images (dot_emitter.run_units): a
unit builds its own rows of `patches` and runs the GEMM on exactly those rows
with its own packing scratch, so partitions never share memory.

Other convolutions (grouped, other layouts, huge patch matrices) keep the
generic generator of contraction.py.
"""
from __future__ import annotations

from math import prod

from hlo.shape import Shape

from .contraction import parse_dim_labels
from .dot_emitter import even_cuts, run_units
from .loops import for_range, i64
from .reduction import window_source

# The patch matrix lives in the arena; past this size the generic path is used.
MAX_PATCH_BYTES = 64 << 20
GEMM_MIN_FLOPS = 32 * 1024


def try_emit_conv_gemm(kernel, conv, lhs_gen, rhs_view, out) -> int | None:
    """Emits `conv` as im2col + GEMM; the partition extent, or None to decline."""
    from . import gemm
    a = conv.attrs
    if a.get("feature_group_count", 1) != 1 or a.get("batch_group_count", 1) != 1:
        return None
    lmap, rmap, omap = parse_dim_labels(a["dim_labels"])
    rank = conv.shape.rank
    spatial = [str(i) for i in range(rank - 2)]
    if (list(lmap) != ["b", *spatial, "f"] or list(rmap) != [*spatial, "i", "o"]
            or list(omap) != ["b", *spatial, "f"]):
        return None
    if rhs_view is None or not out.shape.has_default_layout() \
            or tuple(rhs_view.strides) != tuple(_row_major(rhs_view.dims)):
        return None
    lhs_shape = conv.operands[0].shape
    etype = out.shape.element_type
    if etype != lhs_shape.element_type or etype != rhs_view.etype or etype not in ("f32", "f64"):
        return None
    window = a["window"].dims
    batch, out_spatial = conv.shape.dims[0], conv.shape.dims[1:-1]
    features = conv.shape.dims[-1]
    taps = [w.size for w in window]
    k = prod(taps) * lhs_shape.dims[-1]
    rows_per_image = prod(out_spatial)
    m = batch * rows_per_image
    esize = out.shape.nbytes // max(out.shape.numel, 1)
    if m * k * esize > MAX_PATCH_BYTES or m * k * features < GEMM_MIN_FLOPS:
        return None
    args = dict(lhs_dtype=etype, rhs_dtype=etype, out_dtype=etype, m=m, n=features, k=k,
                lhs_strides=(k, 1), rhs_strides=(features, 1))
    try:
        fn = gemm.emit_gemm(kernel.function.module, f"{kernel.name}_gemm", **args)
    except ValueError:
        return None
    patch_shape = Shape(etype, (batch, *out_spatial, *taps, lhs_shape.dims[-1]))
    patches = kernel.buffer(kernel.scratch_slot(patch_shape), patch_shape)
    b = kernel.b

    def images(lo, hi, scratch):
        _emit_im2col(kernel, lhs_gen, patches, window, lhs_shape, out_spatial, taps, lo, hi)
        first, last = b.mul(lo, i64(rows_per_image)), b.mul(hi, i64(rows_per_image))
        b.call(fn, [patches.pointer, rhs_view.pointer, out.pointer, first, last, scratch])
    return run_units(kernel, even_cuts(batch, 2 * m * features * k),
                     gemm.gemm_scratch_bytes(**args), images)


def _row_major(dims):
    strides, step = [], 1
    for d in reversed(dims):
        strides.append(step)
        step *= d
    return list(reversed(strides))


def _emit_im2col(kernel, lhs_gen, patches, window, lhs_shape, out_spatial, taps,
                 first_image, end_image) -> None:
    """patches[n, o.., k.., c] = lhs[n, o*stride + k*dilation - pad.., c] (0 outside),
    for images first_image <= n < end_image."""
    from .llvm_types import compute_type
    from .scalar_ops import const
    b = kernel.b
    spatial_dims = lhs_shape.dims[1:-1]
    channels = lhs_shape.dims[-1]
    zero = const(compute_type(patches.etype), 0)
    loops = [("n", first_image, end_image)] + \
        [(f"o{i}", i64(0), i64(s)) for i, s in enumerate(out_spatial)] + \
        [(f"k{i}", i64(0), i64(s)) for i, s in enumerate(taps)] + [("c", i64(0), i64(channels))]
    index: list = []

    def nest(level):
        if level == len(loops):
            n, rest = index[0], index[1:]
            o, kk, c = rest[:len(out_spatial)], rest[len(out_spatial):-1], rest[-1]
            with kernel.scope():
                valid, source = window_source(b, [n, *o, c], {1 + i: v for i, v in enumerate(kk)},
                                              _full_window(window), [lhs_shape.dims[0], *spatial_dims,
                                                                     channels])
                value = lhs_gen(b, source)
                patches.store(b, list(index), value if valid is None else b.select(valid, value, zero))
            return
        name, lo, hi = loops[level]
        with for_range(b, lo, hi, f"im2col.{name}") as i:
            index.append(i)
            nest(level + 1)
            index.pop()
    nest(0)


def _full_window(window):
    """The convolution's spatial window padded with unit batch/feature dimensions."""
    from hlo.ir import WindowDim
    return [WindowDim(size=1), *window, WindowDim(size=1)]
