"""Depthwise convolutions as a direct loop vectorized over the groups.

A convolution whose every group has one output feature and — with
feature_group_count — one input channel is no matrix product: per group it is a
short dot product (a 3x3 window: 9 multiply-adds), or, for the kernel gradient of
a depthwise conv (batch_group_count = channels), one long one per window tap.
When the group index is the contiguous dimension of the lhs, the kernel and the
output (NHWC-like layouts: channels innermost), the group loop is innermost and
LLVM vectorizes it:

    for each output position (b, o..):                   rows, split over threads
      for g in groups:                                   vectorized
        out[b, o.., g] = sum over (c, k..) of lhs[.., o*s + k*d - p.., g] * w[k.., c, g]

With a short contraction (up to MAX_UNROLLED_TAPS terms) the sum is unrolled
inside the group loop and lives in a register; a long one (a weight gradient's
56x56 window) runs outside the group loop and accumulates into the output row,
which stays in L1.
"""
from __future__ import annotations

import itertools
from math import prod

from ..elemental.contraction import parse_dim_labels
from ..elemental.reduction import window_source
from ..gemm.partition import even_cuts, run_units
from ..llvm.kernel_ir import strides as layout_strides
from ..llvm.loops import for_range, i64
from ..llvm.types import constant, storage_type

from .patches import element

# A contraction of up to this many terms is unrolled inside the vectorized group loop.
MAX_UNROLLED_TAPS = 32
_FAST = ("reassoc", "contract")


class _Depthwise:
    """The index mapping of one depthwise convolution (see the module docstring)."""

    def __init__(self, kernel, conv, rhs_view, out):
        a = conv.attrs
        self.lmap, self.rmap, self.omap = parse_dim_labels(a["dim_labels"])
        self.by_batch = a.get("batch_group_count", 1) > 1
        self.groups = out.shape.dims[self.omap["f"]]
        self.lhs_dims = conv.operands[0].shape.dims
        self.window = a["window"].dims
        self.channels = rhs_view.dims[self.rmap["i"]]
        self.rhs, self.out = rhs_view, out
        self.rhs_buffer = _operand_buffer(kernel, rhs_view)
        self.out_strides = layout_strides(out.shape)
        rows = [d for c, d in self.omap.items() if c != "f"]
        self.rows = sorted(rows, key=lambda d: -self.out_strides[d])
        self.taps = [w.size for w in self.window]
        self.ty = storage_type(out.shape.element_type)
        self.zero = constant(out.shape.element_type, 0)

    @property
    def terms(self) -> int:
        return self.channels * prod(self.taps)

    def lhs_index(self, b, row: dict, g, c, taps, skip: int | None = None):
        """(valid or None, lhs index) of group g, channel c, window taps, output row;
        spatial dimension `skip` is left None (the caller walks it itself)."""
        index = [None] * len(self.lhs_dims)
        index[self.lmap["b"]] = g if self.by_batch else row[self.omap["b"]]
        index[self.lmap["f"]] = c if self.by_batch else g
        valid = None
        for i, (w, k) in enumerate(zip(self.window, taps)):
            if i == skip:
                continue
            if w.reversal:
                k = b.sub(i64(w.size - 1), k)
            ok, (pos,) = window_source(b, [row[self.omap[str(i)]]], {0: k}, [w],
                                       [self.lhs_dims[self.lmap[str(i)]]])
            index[self.lmap[str(i)]] = pos
            if ok is not None:
                valid = ok if valid is None else b.and_(valid, ok)
        return valid, index

    def rhs_offset(self, b, c, taps):
        """The kernel's element offset of (c, taps) for group 0 (groups are contiguous)."""
        s = self.rhs.strides
        at = b.mul(c, i64(s[self.rmap["i"]]))
        for i, k in enumerate(taps):
            at = b.add(at, b.mul(k, i64(s[self.rmap[str(i)]])))
        return at

    def product(self, kernel, lhs_gen, row, g, c, taps):
        """lhs * rhs of one term for group g (0 where the lhs is padding)."""
        b = kernel.b
        valid, index = self.lhs_index(b, row, g, c, taps)
        with kernel.scope():
            x = lhs_gen(b, index)
        if valid is not None:
            x = b.select(valid, x, self.zero)
        return b.fmul(x, self.weight(b, c, taps, g), flags=_FAST)

    def weight(self, b, c, taps, g):
        """The kernel's element for channel c, window taps and group g."""
        if self.rhs_buffer is not None:       # through the Buffer: alias metadata
            rhs_index = [None] * len(self.rhs.dims)
            rhs_index[self.rmap["i"]], rhs_index[self.rmap["o"]] = c, g
            for i, k in enumerate(taps):
                rhs_index[self.rmap[str(i)]] = k
            return self.rhs_buffer.load(b, rhs_index)
        at = b.add(self.rhs_offset(b, c, taps), b.mul(g, i64(self.rhs.strides[self.rmap["o"]])))
        return b.load(element(b, self.rhs.pointer, at, self.ty), typ=self.ty)

    def for_each_term(self, b, body, name: str) -> None:
        """Loops over the input channel c and the window taps: body(c, taps)."""
        index: list = []

        def nest(level):
            if level < 1 + len(self.taps):
                size = self.channels if level == 0 else self.taps[level - 1]
                with for_range(b, 0, size, f"{name}.k{level}") as i:
                    index.append(i)
                    nest(level + 1)
                    index.pop()
                return
            body(index[0], index[1:])
        nest(0)

    def out_cell(self, row: dict, g) -> list:
        """The output's logical index of a row and group."""
        index = [None] * len(self.out.shape.dims)
        for d, i in row.items():
            index[d] = i
        index[self.omap["f"]] = g
        return index


def _operand_buffer(kernel, view):
    """The kernel operand Buffer that `view` reads as it is (so loads through it carry
    the kernel's alias metadata), or None."""
    for buffer in kernel.operands:
        if buffer.pointer is view.pointer and tuple(buffer.shape.dims) == tuple(view.dims) \
                and tuple(layout_strides(buffer.shape)) == tuple(view.strides):
            return buffer
    return None


def why_not_grouped(conv, rhs_view, out) -> str | None:
    """What the depthwise loops (this one and stencil.py's) both need: f32 or
    f64 throughout, and either feature or batch grouping."""
    a = conv.attrs
    etype = out.shape.element_type
    fgc, bgc = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    if rhs_view is None:
        return "the kernel is not an array in memory"
    if etype not in ("f32", "f64") or rhs_view.etype != etype \
            or conv.operands[0].shape.element_type != etype:
        return f"{conv.operands[0].shape.element_type} input, {rhs_view.etype} kernel, " \
               f"{etype} output (f32 or f64 throughout only)"
    if (fgc > 1) == (bgc > 1):
        return "no feature or batch grouping" if fgc == 1 else "both feature and batch grouping"
    return None


def why_not_depthwise(kernel, conv, rhs_view, out) -> str | None:
    """Why `conv` is not a depthwise convolution with the groups innermost everywhere
    (try_emit_depthwise), or None."""
    reason = why_not_grouped(conv, rhs_view, out)
    if reason is not None:
        return reason
    a = conv.attrs
    fgc, bgc = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    dw = _Depthwise(kernel, conv, rhs_view, out)
    lhs_strides = layout_strides(conv.operands[0].shape)
    group_dim = dw.lmap["b"] if dw.by_batch else dw.lmap["f"]
    if dw.groups != fgc * bgc:
        return f"{dw.groups} output features in {fgc * bgc} groups (one per group only)"
    if lhs_strides[group_dim] != 1 or rhs_view.strides[dw.rmap["o"]] != 1 \
            or dw.out_strides[dw.omap["f"]] != 1:
        return "the groups are not the innermost dimension of the input, kernel and output"
    if not dw.by_batch and dw.channels != 1:
        return f"{dw.channels} input channels per group (one only)"
    if dw.by_batch and out.shape.dims[dw.omap["b"]] != 1:
        return "batch grouping with an output batch of more than one"
    return None


def try_emit_depthwise(kernel, conv, lhs_gen, rhs_view, out) -> int | None:
    """Emits a depthwise `conv` as the direct loop; the extent, or None to decline
    (why_not_depthwise says why)."""
    if why_not_depthwise(kernel, conv, rhs_view, out) is not None:
        return None
    dw = _Depthwise(kernel, conv, rhs_view, out)
    b = kernel.b
    sizes = [out.shape.dims[d] for d in dw.rows]
    m = prod(sizes)

    def unit(lo, hi, _scratch):
        with for_range(b, lo, hi, "dw.row") as r:
            row, flat = {}, r
            for d, size in zip(reversed(dw.rows), reversed(sizes)):
                row[d] = b.urem(flat, i64(size))
                flat = b.udiv(flat, i64(size))
            if dw.terms <= MAX_UNROLLED_TAPS:
                _emit_unrolled(kernel, dw, lhs_gen, row)
            else:
                _emit_accumulating(kernel, dw, lhs_gen, row)
    return run_units(kernel, even_cuts(m, 2 * m * dw.groups * dw.terms), 0, unit)


def _emit_unrolled(kernel, dw: _Depthwise, lhs_gen, row) -> None:
    """Per group: the whole (short) sum in a register, then one store."""
    b = kernel.b
    with for_range(b, 0, dw.groups, "dw.g") as g:
        acc = dw.zero
        for c, *taps in itertools.product(range(dw.channels), *map(range, dw.taps)):
            c, taps = i64(c), [i64(k) for k in taps]
            term = dw.product(kernel, lhs_gen, row, g, c, taps)
            acc = b.fadd(acc, term, flags=_FAST)
        dw.out.store(b, dw.out_cell(row, g), acc)


def _emit_accumulating(kernel, dw: _Depthwise, lhs_gen, row) -> None:
    """A long sum: the term loops outside, the group loop inside, accumulating into
    the output row."""
    b = kernel.b
    with for_range(b, 0, dw.groups, "dw.zero") as g:
        dw.out.store(b, dw.out_cell(row, g), dw.zero)

    def term(c, taps):
        with for_range(b, 0, dw.groups, "dw.g") as g:
            cell = dw.out_cell(row, g)
            value = dw.product(kernel, lhs_gen, row, g, c, taps)
            dw.out.store(b, cell, b.fadd(dw.out.load(b, cell), value, flags=_FAST))
    dw.for_each_term(b, term, "dw")
