"""The memory side of convolutions on the GEMM, in IR (notation of plan.py):
building a chunk of the patch matrix P, copying a GEMM result tile into the
output, and copying the kernel into a [K, F] matrix when it cannot be used in place.

All three walk a range of rows [r0, r1) the same way (`for_rows`): as *runs* of
the innermost row axis, so the index arithmetic of the outer row axes happens
once per run and the inner loop is affine — LLVM vectorizes it.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..elemental.reduction import window_source
from ..llvm.kernel_ir import strides as layout_strides
from ..llvm.loops import for_range, i64
from ..llvm.types import constant, storage_type

from .plan import ConvPlan


# An innermost k loop shorter than this leaves the loop around it to LLVM's unroller.
SHORT_INNER_LOOP = 8


def element(b, pointer, index, ty):
    """The address of element `index` of an array of `ty` at `pointer`."""
    return b.gep(pointer, [index], inbounds=True, source_etype=ty)


def _imin(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _imax(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _delinearize(b, flat, sizes: list[int]) -> list:
    """The mixed-radix digits of `flat` over `sizes` (outer first)."""
    digits = []
    for size in reversed(sizes):
        digits.append(b.urem(flat, i64(size)) if size > 1 else i64(0))
        flat = b.udiv(flat, i64(size)) if size > 1 else flat
    return digits[::-1]


def for_rows(b, plan: ConvPlan, r0, r1, body) -> None:
    """body(outer, base, lo, hi) for every run of the inner row axis that meets rows
    [r0, r1): `outer` holds the other row axes' indices, and rows base + lo ..
    base + hi - 1 (inner index lo .. hi - 1) are the run's rows in the range."""
    width = plan.rows[-1].size
    first = b.udiv(r0, i64(width))
    last = b.add(b.udiv(b.sub(r1, i64(1)), i64(width)), i64(1))
    with for_range(b, first, last, "conv.run", unroll=False) as run:
        base = b.mul(run, i64(width))
        lo = _imax(b, b.sub(r0, base), i64(0))
        hi = _imin(b, b.sub(r1, base), i64(width))
        body(_delinearize(b, run, [r.size for r in plan.rows[:-1]]), base, lo, hi)


def for_k(b, plan: ConvPlan, body, name: str, scalar: bool = False,
          depth: int | None = None) -> None:
    """body(taps, kk): a loop nest over the k axes (the first `depth` of them); `taps`
    their indices, kk their linear index (`scalar`: loops LLVM should not vectorize)."""
    index: list = []
    depth = len(plan.k_axes) if depth is None else depth + len(plan.k_axes) * (depth < 0)
    # Only the innermost loop may be unrolled: LLVM fully unrolls the short tap loops
    # around it and then vectorizes (and unswitches) every copy of it (a stride-2
    # input gradient: 228 ms of O3). An innermost loop shorter than a vector (3 input
    # channels) lets the loop around it unroll too: the stem's patches are built from
    # those straight-line copies (f32[8,224,224,3] 7x7: 7.7 ms, 8.9 ms as loops).
    last = len(plan.k_axes) - 1
    unrolled = last - (last > 0 and plan.k_axes[last].size < SHORT_INNER_LOOP)

    def nest(level, kk):
        if level == depth:
            body(list(index), kk)
            return
        axis = plan.k_axes[level]
        with for_range(b, 0, axis.size, f"{name}{level}", scalar=scalar,
                       unroll=level >= unrolled) as i:
            index.append(i)
            nest(level + 1, b.add(b.mul(kk, i64(axis.size)), i))
            index.pop()
    nest(0, i64(0))


class PatchBuilder:
    """Emits the build of P for group `g`, rows [r0, r1), into a chunk buffer."""

    def __init__(self, kernel, plan: ConvPlan, conv, lhs_gen):
        self.kernel, self.plan, self.lhs_gen = kernel, plan, lhs_gen
        self.window = conv.attrs["window"].dims
        self.lhs_dims = conv.operands[0].shape.dims
        self.zero = constant(plan.etype, 0)

    def emit(self, g, r0, r1, work, base) -> None:
        """P for group g, rows [r0, r1), into `work` (a 1-d Buffer) from element `base`."""
        b, plan = self.kernel.b, self.plan
        patches = (work, base)
        if plan.columns_major:      # P[kk, row]: rows innermost, chunk_rows apart
            def per_k(taps, kk):
                start = b.mul(kk, i64(plan.chunk_rows))
                for_rows(b, plan, r0, r1, lambda outer, base, lo, hi: self._run(
                    g, taps, outer, b.sub(base, r0), lo, hi, patches, start))
            for_k(b, plan, per_k, "im2col.k")
            return

        def per_run(outer, base, lo, hi):    # P[row, kk]: k innermost
            with for_range(b, lo, hi, "im2col.r", unroll=False) as inner:
                start = b.mul(b.add(b.sub(base, r0), inner), i64(plan.k))
                if self._split_taps():
                    for_k(b, plan, lambda taps, kk: self._taps(
                        g, taps, [*outer, inner], patches, b.add(start, b.mul(
                            kk, i64(plan.k_axes[-1].size)))), "im2col.k", depth=-1)
                    return
                for_k(b, plan, lambda taps, kk: self._store(
                    patches, b.add(start, kk), self._value(g, taps, [*outer, inner])), "im2col.k")
        for_rows(b, plan, r0, r1, per_run)

    def _split_taps(self) -> bool:
        """Whether the innermost k axis is a padded spatial tap whose valid range is
        worth computing (rows-major P over an input with a spatial dimension innermost,
        like an NCHW weight gradient)."""
        axis = self.plan.k_axes[-1]
        if axis.spatial is None:
            return False
        w = self.window[axis.spatial]
        return w.base_dilation == 1 and not w.reversal and (w.pad_low > 0 or w.pad_high > 0)

    def _taps(self, g, taps, rows, patches, start) -> None:
        """All taps of the innermost k axis for one row: zeros, a copy, zeros."""
        b, axis = self.kernel.b, self.plan.k_axes[-1]
        w = self.window[axis.spatial]
        o = rows[[r.spatial for r in self.plan.rows].index(axis.spatial)]
        shift = b.sub(b.mul(o, i64(w.stride)), i64(w.pad_low))     # pos = k * dilation + shift
        k_lo, k_hi = affine_range(b, w.window_dilation, shift, self.lhs_dims[axis.lhs_dim],
                                  i64(0), i64(axis.size))
        for first, stop, valid in ((i64(0), k_lo, False), (k_lo, k_hi, True),
                                   (k_hi, i64(axis.size), False)):
            with for_range(b, first, stop, "im2col.t") as k:
                if not valid:
                    value = self.zero
                else:
                    pos = b.add(b.mul(k, i64(w.window_dilation)), shift)
                    value = self._value(g, [*taps, k], rows, {axis.spatial: pos})
                self._store(patches, b.add(start, k), value)

    def _store(self, patches, offset, value) -> None:
        work, base = patches
        work.store(self.kernel.b, [self.kernel.b.add(base, offset)], value)

    def _value(self, g, taps: list, rows: list, known: dict | None = None):
        """The lhs element under k index `taps` of row `rows` (0 in padding); `known`
        maps a spatial axis to an input position already known to be valid."""
        b, plan = self.kernel.b, self.plan
        index = [None] * len(self.lhs_dims)
        tap_of = {}
        for axis, i in zip(plan.k_axes, taps):
            if axis.spatial is None:
                offset = 0 if plan.by_batch else plan.channels
                index[axis.lhs_dim] = b.add(b.mul(g, i64(offset)), i) if offset else i
            else:
                tap_of[axis.spatial] = i
        valid = None
        for axis, i in zip(plan.rows, rows):
            if axis.spatial is None:
                offset = plan.batch if plan.by_batch else 0
                index[axis.lhs_dim] = b.add(b.mul(g, i64(offset)), i) if offset else i
                continue
            if known and axis.spatial in known:
                index[axis.lhs_dim] = known[axis.spatial]
                continue
            w = self.window[axis.spatial]
            tap = tap_of[axis.spatial]
            if w.reversal:
                tap = b.sub(i64(w.size - 1), tap)
            ok, (pos,) = window_source(b, [i], {0: tap}, [w], [self.lhs_dims[axis.lhs_dim]])
            index[axis.lhs_dim] = pos
            if ok is not None:
                valid = ok if valid is None else b.and_(valid, ok)
        with self.kernel.scope():
            value = self.lhs_gen(b, index)
        return value if valid is None else b.select(valid, value, self.zero)

    def _run(self, g, taps, outer, row0, lo, hi, patches, start) -> None:
        """One run of a columns-major build: P[start + row0 + inner] for lo <= inner < hi.
        A padded inner spatial axis is split into zeros, an unchecked copy, zeros."""
        b, axis = self.kernel.b, self.plan.rows[-1]

        def fill(first, stop, known_valid):
            with for_range(b, first, stop, "im2col.i") as inner:
                offset = b.add(start, b.add(row0, inner))
                if known_valid is None:
                    value = self._value(g, taps, [*outer, inner])
                elif known_valid is False:
                    value = self.zero
                else:
                    value = self._value(g, taps, [*outer, inner], {axis.spatial: known_valid(inner)})
                self._store(patches, offset, value)
        w = self.window[axis.spatial] if axis.spatial is not None else None
        if w is None or w.base_dilation != 1 or (w.pad_low == 0 and w.pad_high == 0):
            fill(lo, hi, None)
            return
        v_lo, v_hi, position = self._valid_range(w, taps, lo, hi)
        fill(lo, v_lo, False)
        fill(v_lo, v_hi, position)
        fill(v_hi, hi, False)

    def _valid_range(self, w, taps, lo, hi):
        """valid_range for the inner row axis under k index `taps`."""
        axis = self.plan.rows[-1]
        tap = taps[[x.spatial for x in self.plan.k_axes].index(axis.spatial)]
        return valid_range(self.kernel.b, w, tap, self.lhs_dims[axis.lhs_dim], lo, hi)


def valid_range(b, w, tap, size: int, lo, hi):
    """(v_lo, v_hi, position): the output indices lo <= v_lo <= o < v_hi <= hi whose
    input position o * stride + tap' * dilation - pad_low lies in [0, size) (tap' is
    the tap the input sees: reversed with the window), and position(o) computing it.
    Only for a dimension without base dilation."""
    if w.reversal:
        tap = b.sub(i64(w.size - 1), tap)
    shift = b.sub(b.mul(tap, i64(w.window_dilation)), i64(w.pad_low))   # pos = o*s + shift
    v_lo, v_hi = affine_range(b, w.stride, shift, size, lo, hi)
    return v_lo, v_hi, lambda o: b.add(b.mul(o, i64(w.stride)), shift)


def affine_range(b, step: int, shift, size: int, lo, hi):
    """[v_lo, v_hi) within [lo, hi): the i with 0 <= i * step + shift < size (step > 0)."""
    # first: ceil(-shift / step) when shift < 0, else 0
    neg = _imax(b, b.sub(i64(0), shift), i64(0))
    first = b.udiv(b.add(neg, i64(step - 1)), i64(step))
    # one past the last: floor((size - 1 - shift) / step) + 1, or 0 if that is negative
    top = b.sub(i64(size - 1), shift)
    stop = b.select(b.icmp_signed("<", top, i64(0)), i64(0),
                    b.add(b.sdiv(top, i64(step)), i64(1)))
    v_lo = _imin(b, _imax(b, first, lo), hi)
    return v_lo, _imax(b, _imin(b, stop, hi), v_lo)


def copy_tile(kernel, plan: ConvPlan, out, g, r0, r1, work, base) -> None:
    """out[row.., g * Fg + f] = the tile's [row - r0, f] (in `work` from element
    `base`) for rows [r0, r1)."""
    b = kernel.b
    f_contiguous = layout_strides(out.shape)[plan.out_feature_dim] == 1
    first_f = b.mul(g, i64(plan.features))

    def per_run(outer, row_base, lo, hi):
        row0 = b.sub(row_base, r0)

        def out_index(inner, f):
            index = [None] * len(out.shape.dims)
            for axis, i in zip(plan.rows, [*outer, inner]):
                index[axis.other_dim] = i
            index[plan.out_feature_dim] = b.add(first_f, f)
            return index

        def tile_at(inner, f):
            return b.add(base, b.add(b.mul(b.add(row0, inner), i64(plan.features)), f))
        if f_contiguous:       # one row of the tile is one run of the output: a memcpy
            nbytes = i64(plan.features * (8 if plan.etype == "f64" else 4))
            # Not unrolled: LLVM copies the memcpy once per row of a run (8 for a
            # stride-2 phase) in every phase for no speed.
            with for_range(b, lo, hi, "tile.r", unroll=False) as inner:
                b.call(_memcpy(b.module), [out.address(b, out_index(inner, i64(0))),
                                           work.address(b, [tile_at(inner, i64(0))]), nbytes,
                                           ir.Constant(ir.IntType(1), 0)])
            return
        with for_range(b, 0, plan.features, "tile.f", unroll=False) as f:
            with for_range(b, lo, hi, "tile.r") as inner:
                out.store(b, out_index(inner, f), work.load(b, [tile_at(inner, f)]))
    for_rows(b, plan, r0, r1, per_run)


def _memcpy(module: ir.Module) -> ir.Function:
    name = "llvm.memcpy.p0.p0.i64"
    if name not in module.globals:
        ptr = ir.PointerType()
        ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ir.IntType(64),
                                                            ir.IntType(1)]), name)
    return module.globals[name]


def copy_rhs(kernel, plan: ConvPlan, view, work, base) -> None:
    """work[base + kk * F + f] = the kernel's element at k index kk and output feature
    f, for all groups' features (a row-major [K, groups * Fg] matrix)."""
    b, ty = kernel.b, storage_type(plan.etype)
    features = plan.features * plan.groups

    def per_k(taps, kk):
        at = i64(0)
        for axis, i in zip(plan.k_axes, taps):
            at = b.add(at, b.mul(i, i64(view.strides[axis.other_dim])))
        row = b.add(base, b.mul(kk, i64(features)))
        # A small one-off copy: not worth LLVM's vectorizing (compile time) of gathers.
        with for_range(b, 0, features, "wcopy.f", scalar=True) as f:
            src = b.add(at, b.mul(f, i64(view.strides[plan.rhs_feature_dim])))
            work.store(b, [b.add(row, f)], b.load(element(b, view.pointer, src, ty), typ=ty))
    for_k(b, plan, per_k, "wcopy.k", scalar=True)
