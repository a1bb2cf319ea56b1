"""Depthwise convolutions with a spatial dimension innermost (NCHW-like layouts), as
stencils vectorized along that dimension.

When the channels are not contiguous (depthwise.py wants them innermost),
the contiguous dimension of the output is a spatial one, and so is the input's.
Then each output run along it (one image, one channel, one position of the other
spatial dimensions) is a sum of shifted, scaled input runs, one per window tap:

    out[b, g, o0, :] = 0
    for each tap (c, k0, k1):                         the kernel value w is a scalar
        for o1 in the tap's valid range:              vectorized, no bounds checks
            out[b, g, o0, o1] += lhs[b, g, o0*s + k0 - p, o1*s + k1 - p] * w

The run stays in L1 between taps. The valid range of o1 (where the input position
is inside the input) is computed once per tap (patches.valid_range), so the
inner loop is a plain affine multiply-add that LLVM vectorizes.
"""
from __future__ import annotations

from math import prod

from ..gemm.partition import even_cuts, run_units
from ..llvm.kernel_ir import strides as layout_strides
from ..llvm.loops import for_range, i64

from .depthwise import _Depthwise, _FAST, why_not_grouped
from .patches import valid_range


def why_not_depthwise_spatial(kernel, conv, rhs_view, out) -> str | None:
    """Why `conv` is not a depthwise convolution whose innermost output dimension is
    spatial (try_emit_depthwise_spatial), or None."""
    reason = why_not_grouped(conv, rhs_view, out)
    if reason is not None:
        return reason
    a = conv.attrs
    fgc, bgc = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    dw = _Depthwise(kernel, conv, rhs_view, out)
    if dw.groups != fgc * bgc:
        return f"{dw.groups} output features in {fgc * bgc} groups (one per group only)"
    if not dw.by_batch and dw.channels != 1:
        return f"{dw.channels} input channels per group (one only)"
    if dw.by_batch and out.shape.dims[dw.omap["b"]] != 1:
        return "batch grouping with an output batch of more than one"
    label = next(c for c, d in dw.omap.items() if d == out.shape.minor_to_major()[0])
    if not label.isdigit():
        return "the output's innermost dimension is not spatial"
    if layout_strides(conv.operands[0].shape)[dw.lmap[label]] != 1:
        return "the input's innermost dimension is not the output's"
    if dw.window[int(label)].base_dilation != 1:
        return "the innermost spatial dimension has base dilation"
    return None


def try_emit_depthwise_spatial(kernel, conv, lhs_gen, rhs_view, out) -> int | None:
    """Emits a depthwise `conv` whose innermost output dimension is spatial (and
    unit-stride in the input too) as stencil runs; the extent, or None to decline
    (why_not_depthwise_spatial says why)."""
    if why_not_depthwise_spatial(kernel, conv, rhs_view, out) is not None:
        return None
    dw = _Depthwise(kernel, conv, rhs_view, out)
    label = next(c for c, d in dw.omap.items() if d == out.shape.minor_to_major()[0])
    inner = dw.omap[label]
    rows = sorted((d for d in dw.omap.values() if d != inner), key=lambda d: -dw.out_strides[d])
    sizes = [out.shape.dims[d] for d in rows]
    m, width = prod(sizes), out.shape.dims[inner]
    b = kernel.b

    def unit(lo, hi, _scratch):
        with for_range(b, lo, hi, "dws.row") as r:
            row, flat = {}, r
            for d, size in zip(reversed(rows), reversed(sizes)):
                row[d] = b.urem(flat, i64(size))
                flat = b.udiv(flat, i64(size))
            _emit_run(kernel, dw, lhs_gen, row, inner, int(label), width)
    return run_units(kernel, even_cuts(m, 2 * m * width * dw.terms), 0, unit)


def _emit_run(kernel, dw: _Depthwise, lhs_gen, row: dict, inner: int, spatial: int,
              width: int) -> None:
    """One output run: zero it, then add one shifted input run per tap."""
    b = kernel.b
    g = row[dw.omap["f"]]

    def cell(o):
        return [o if d == inner else row[d] for d in range(len(dw.out.shape.dims))]
    with for_range(b, 0, width, "dws.zero") as o:
        dw.out.store(b, cell(o), dw.zero)
    dw.for_each_term(
        b, lambda c, taps: _emit_tap(kernel, dw, lhs_gen, row, g, c, taps, cell, spatial, width),
        "dws")


def _emit_tap(kernel, dw, lhs_gen, row, g, c, taps, cell, spatial, width) -> None:
    """out[.., o] += lhs[.., o * stride + shift] * w over the tap's valid range of o."""
    b = kernel.b
    valid, index = dw.lhs_index(b, row, g, c, taps, skip=spatial)
    lhs_size = dw.lhs_dims[dw.lmap[str(spatial)]]
    v_lo, v_hi, position = valid_range(b, dw.window[spatial], taps[spatial], lhs_size,
                                       i64(0), i64(width))
    if valid is not None:       # another spatial dimension is in padding: nothing to add
        v_hi = b.select(valid, v_hi, v_lo)
    weight = dw.weight(b, c, taps, g)
    with for_range(b, v_lo, v_hi, "dws.o") as o:
        index[dw.lmap[str(spatial)]] = position(o)
        with kernel.scope():
            x = lhs_gen(b, list(index))
        target = cell(o)
        dw.out.store(b, target, b.fadd(dw.out.load(b, target), b.fmul(x, weight, flags=_FAST),
                                       flags=_FAST))
