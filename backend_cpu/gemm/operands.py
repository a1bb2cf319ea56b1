"""Operands of the GEMM-based emitters (dots, convolutions) as strided views of arrays in
memory: `View` (pointer, dims, element strides), and `resolve_view`, which sees through
parameters, bitcasts and transposes, so a transposed operand costs nothing: its
strides go to the GEMM, which folds them into packing.
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from ..llvm.kernel_ir import strides as layout_strides


@dataclass
class View:
    """A strided array in memory: element (i0, i1, ...) is at pointer + sum(i * stride)."""
    pointer: ir.Value
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    etype: str


def resolve_view(instr, param_views: dict) -> View | None:
    """The strided view of `instr` if it is a parameter, or a bitcast, row-major reshape
    or transpose of one."""
    if instr.opcode == "parameter":
        return param_views.get(instr.parameter_number)
    if instr.opcode == "bitcast" and instr.shape.element_type == instr.operands[0].shape.element_type:
        inner = resolve_view(instr.operands[0], param_views)
        # A bitcast reinterprets the bytes of its operand as the operand declares them:
        # the memory must be in exactly that layout. A fused parameter bound to an
        # operand of another layout, or a transpose that is not itself a bitcast, holds
        # other bytes (the generators then do it element by element).
        if inner is None or not _has_layout(inner, instr.operands[0].shape):
            return None
        return View(inner.pointer, instr.shape.dims, tuple(layout_strides(instr.shape)), inner.etype)
    if instr.opcode == "reshape" and instr.shape.has_default_layout() \
            and instr.operands[0].shape.has_default_layout():
        # Between row-major arrays a reshape keeps the elements' order: a bitcast of a
        # contiguous operand (attention's head split reads [B*S, H*D] as [B, S, H, D]).
        inner = resolve_view(instr.operands[0], param_views)
        if inner is None or not _has_layout(inner, instr.operands[0].shape):
            return None
        return View(inner.pointer, instr.shape.dims, tuple(layout_strides(instr.shape)), inner.etype)
    if instr.opcode == "transpose":
        inner = resolve_view(instr.operands[0], param_views)
        if inner is None:
            return None
        perm = instr.dims()
        return View(inner.pointer, tuple(inner.dims[p] for p in perm),
                    tuple(inner.strides[p] for p in perm), inner.etype)
    return None


def _has_layout(view: View, shape) -> bool:
    """True when the view is `shape`'s array stored in `shape`'s layout (the strides of
    size-1 dimensions do not matter)."""
    return tuple(view.dims) == tuple(shape.dims) and all(
        size == 1 or stride == expected
        for size, stride, expected in zip(view.dims, view.strides, layout_strides(shape)))
