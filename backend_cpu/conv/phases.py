"""Convolutions with lhs (base) dilation split into dense sub-convolutions by output
phase: the input gradient of a strided convolution, transposed convolutions.

Along a spatial dimension with base dilation D, stride 1 and no window dilation,

    out[o] = sum over k of lhs_dilated[o + k' - pad_low] * w[k]

(k' is the tap the lhs sees: k, or size - 1 - k with window reversal) meets a real
input element only where o + k' - pad_low is a multiple of D. The rows of one
*phase* r, o = r + D j, all use the taps k' = q + D t with q = (pad_low - r) mod D,
and read the undilated input at c + j + t, c = (r + q - pad_low) / D:

    out[r + D j] = sum over t < T of lhs[c + j + t] * w[q + D t]     (T = ceil((size - q) / D))

a dense convolution of the same input with T taps, stride 1 and padding -c, on a
strided subset of the kernel, writing a strided subset of the output. Computing
the D^n phases apart skips the zeros between dilated elements: D^n times fewer
multiply-adds than im2col over the dilated input.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from math import ceil

from ...hlo.ir import Window, WindowDim
from ...hlo.shape import Shape

from ..elemental.contraction import parse_dim_labels
from ..gemm.operands import View
from ..llvm.loops import i64


@dataclass(frozen=True)
class SubConv:
    """One phase, shaped like an HLO convolution for plan.py and patches.py."""
    attrs: dict
    operands: tuple
    shape: Shape


@dataclass(frozen=True)
class _Operand:
    shape: Shape


class PhaseOutput:
    """The output rows of one phase: index j of a split dimension d is r + D j of the
    convolution's output (a Buffer-like store through the real output)."""

    def __init__(self, out, shape: Shape, maps: dict[int, tuple[int, int]]):
        self.out, self.shape, self.maps = out, shape, maps
        self.pointer = out.pointer

    def _real(self, b, index: list) -> list:
        real = list(index)
        for d, (r, step) in self.maps.items():
            real[d] = b.add(i64(r), b.mul(index[d], i64(step)))
        return real

    def store(self, b, index: list, value) -> None:
        self.out.store(b, self._real(b, index), value)

    def address(self, b, index: list):
        return self.out.address(b, self._real(b, index))


@dataclass(frozen=True)
class Phase:
    conv: SubConv | None      # None: no tap meets an input element; the rows are 0
    rhs_offset: int           # elements from the kernel's pointer to the phase's first tap
    rhs: View                 # dims and strides of the phase's kernel (pointer: the kernel's)
    out: PhaseOutput


def split_phases(conv, rhs_view: View, out) -> list[Phase] | None:
    """The phases of `conv` (see the module docstring), or None when it has no base
    dilation or a dilated dimension also has a stride or window dilation. A window
    narrower than the dilation (the input gradient of a 1x1 stride-2 conv) leaves
    phases without taps: their `conv` is None, their outputs zero."""
    window = conv.attrs["window"].dims
    split = [i for i, w in enumerate(window) if w.base_dilation > 1]
    if not split or any(window[i].stride != 1 or window[i].window_dilation != 1 for i in split):
        return None
    lmap, rmap, omap = parse_dim_labels(conv.attrs["dim_labels"])
    lhs_dims = conv.operands[0].shape.dims
    phases = []
    for phase in itertools.product(*(range(window[i].base_dilation) for i in split)):
        out_dims, dims = list(conv.shape.dims), list(window)
        rhs_dims, rhs_strides = list(rhs_view.dims), list(rhs_view.strides)
        maps, offset, empty = {}, 0, False
        for i, r in zip(split, phase):
            w, step, o_dim, k_dim = window[i], window[i].base_dilation, omap[str(i)], rmap[str(i)]
            rows = ceil((conv.shape.dims[o_dim] - r) / step)
            q = (w.pad_low - r) % step
            taps = ceil((w.size - q) / step)
            empty |= taps <= 0
            c = (r + q - w.pad_low) // step
            pad_high = rows - 1 + taps - lhs_dims[lmap[str(i)]] + c
            # Reversed, the phase's taps t = 0.. meet kernel indices size-1-q-D t: walked
            # upwards from the last of them, the sub-convolution is reversed too.
            first = w.size - 1 - q - step * (taps - 1) if w.reversal else q
            offset += first * rhs_view.strides[k_dim]
            rhs_dims[k_dim], rhs_strides[k_dim] = taps, rhs_view.strides[k_dim] * step
            dims[i] = WindowDim(taps, 1, -c, pad_high, 1, 1, w.reversal)
            out_dims[o_dim], maps[o_dim] = rows, (r, step)
        if min(out_dims) <= 0:
            continue                 # an output narrower than the dilation: no such rows
        shape = Shape(conv.shape.element_type, tuple(out_dims), layout=conv.shape.layout)
        sub = None if empty else SubConv(
            {**conv.attrs, "window": Window(tuple(dims))},
            (conv.operands[0], _Operand(Shape(rhs_view.etype, tuple(rhs_dims)))), shape)
        phases.append(Phase(sub, offset, replace(rhs_view, dims=tuple(rhs_dims),
                                                 strides=tuple(rhs_strides)),
                            PhaseOutput(out, shape, maps)))
    return phases
