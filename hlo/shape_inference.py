"""Shape inference: the result shape of an opcode applied to operand shapes.

    infer_shape(opcode, operand_shapes, attrs, result_hint=None) -> Shape

Attributes are in the Python form documented in `hlo/ir.py`; called
computations are `HloComputation`s, whose parameters and root give the
signature (a reduce's result type is its reducer's, a while's is its state).

`result_hint` is the caller's idea of the result (the verifier passes the
instruction's own shape, the builder what its caller asked for). Most ops
ignore it and infer everything from the operands. Ops whose result is not
implied by the operands take it from the hint and check that it fits:

    parameter, constant, custom-call      the hint, as is
    broadcast, reshape, bitcast, iota     dims from the hint (checked against operands)
    convert, bitcast-convert              element type from the hint
    dot, convolution                      element type from the hint if given
                                          (mixed precision: s8 x s8 -> s32)
    rng, rng-bit-generator                the hint

Without a needed hint they raise ShapeError. Every error is a ShapeError (a
ValueError) whose message starts with the opcode and names the mismatch:
`add: operand shapes f32[4] and f32[5] differ`.

The rules live in `shape_rules_*.py`, one file per family of ops, and register
themselves in `OPCODES[name].shape_rule` when imported (below).
"""
from __future__ import annotations

from typing import Sequence

from .opcodes import OPCODES
from .shape import Shape
from .shape_rules_common import ShapeError
# Imported for their side effect: each registers the shape rules of its ops.
from . import (shape_rules_collective, shape_rules_control, shape_rules_dot,  # noqa: F401
               shape_rules_elementwise, shape_rules_gather, shape_rules_movement,
               shape_rules_library, shape_rules_reduce)

__all__ = ["ShapeError", "infer_shape"]


def infer_shape(opcode: str, operand_shapes: Sequence[Shape], attrs: dict | None = None,
                result_hint: Shape | None = None) -> Shape:
    """The result shape of `opcode` on `operand_shapes` (see the module docstring)."""
    info = OPCODES.get(opcode)
    if info is None:
        raise ShapeError(f"unknown opcode {opcode!r}")
    operand_shapes = list(operand_shapes)
    if info.arity is not None and len(operand_shapes) != info.arity:
        raise ShapeError(f"{opcode}: expects {info.arity} operand{'s' * (info.arity != 1)}, "
                         f"got {len(operand_shapes)}")
    if info.shape_rule is None:
        raise ShapeError(f"{opcode}: no shape rule registered")
    return info.shape_rule(operand_shapes, attrs or {}, result_hint)
