"""Algebraic simplifier rule: an elementwise op that reads a dot through a transpose
into another layout reads the dot with its operands swapped instead.

JAX's gradient of a dense layer's kernel comes out of autodiff as

    d  = f32[256,64]{1,0} dot(dy, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
    t  = f32[64,256]{0,1} transpose(d), dimensions={1,0}     (the bytes of d)
    g' = f32[64,256]{1,0} add(g, t)                          (a scan's running sum)

The transpose is free (its layout keeps d's bytes), but the add then reads t down its
columns, a strided loop at a fraction of memory speed: the LSTM's backward scan spent
most of its time in four such kernels, one per gate. dot(x, dy) computes the same
products and sums with the free dimensions the other way round, row-major, so the
add reads both operands in order. (simplify_movement's transpose-of-dot rule does
this for a transpose into the default layout; this one is for the transpose into the
dot's own layout that an elementwise consumer reads.)

Exact: the same products summed over the same contraction (the order of summation is
the GEMM's either way, as for any dot).
"""
from __future__ import annotations

from ..hlo import OPCODES, Shape

from .algebraic_simplifier import make, rule
from .hlo_utils import new_instruction
from .simplify_movement import swapped_dot_attrs


def _swapped_dot(transpose):
    """dot(b, a) in the default layout with the transpose's dimensions, placed before
    the transpose's reader, when `transpose` reads dot(a, b) (read by nothing else)
    and moves b's free dimensions before a's; else None."""
    dot = transpose.operands[0]
    if dot.opcode != "dot" or len(dot.users) != 1 or dot.is_root \
            or not dot.shape.has_default_layout():
        return None
    attrs = swapped_dot_attrs(dot, transpose.dims())
    if attrs is None:
        return None
    lhs, rhs = dot.operands
    reader = transpose.users[0]
    shape = transpose.shape
    row_major = Shape(shape.element_type, shape.dims, tuple(range(shape.rank - 1, -1, -1)))
    return new_instruction(reader.parent, "dot", row_major, [rhs, lhs], before=reader,
                           attrs=attrs)


def _read_transposed_dot(instr):
    # f(..., transpose{other layout}(dot(a, b)), ...) -> f(..., dot(b, a), ...)
    if not instr.info.is_elementwise or instr.opcode == "bitcast-convert" \
            or not instr.shape.is_array or not instr.shape.has_default_layout():
        return None
    for i, op in enumerate(instr.operands):
        if op.opcode == "transpose" and len(op.users) == 1 and not op.is_root \
                and not op.shape.has_default_layout() and op.control_predecessors == [] \
                and instr.operands.count(op) == 1:
            swapped = _swapped_dot(op)
            if swapped is not None:
                operands = list(instr.operands)
                operands[i] = swapped
                return make(instr, instr.opcode, operands, **instr.attrs)
    return None


for _opcode, _info in OPCODES.items():
    if _info.is_elementwise:
        rule(_opcode)(_read_transposed_dot)
