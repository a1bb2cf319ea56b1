"""Helpers for the evaluator tests: run one instruction, or a module written in HLO text."""
from __future__ import annotations

from textwrap import dedent

import numpy as np

from xlapy.hlo import HloComputation, HloInstruction, HloModule, Shape, from_numpy, parse_module
from xlapy.hlo.evaluator import evaluate


def shape_of(array: np.ndarray, element_type: str | None = None) -> Shape:
    return Shape(element_type or from_numpy(array.dtype).name, array.shape)


def single_op_module(opcode: str, args, result: Shape, **attrs) -> HloModule:
    """ENTRY { p0..pn = parameter(i); ROOT r = opcode(p0..pn), attrs } built with hlo/ir.py."""
    comp = HloComputation("entry")
    params = [comp.add_instruction(HloInstruction("parameter", shape_of(a), name=f"p{i}",
                                                  parameter_number=i))
              for i, a in enumerate(args)]
    comp.root = comp.add_instruction(HloInstruction(opcode, result, params, attrs, name="r"))
    module = HloModule("single_op")
    for callee in {id(c): c for c in _called(attrs)}.values():
        module.add_computation(callee)
    module.add_computation(comp, entry=True)
    return module


def _called(attrs):
    for value in attrs.values():
        if isinstance(value, HloComputation):
            yield value
        elif isinstance(value, tuple) and value and isinstance(value[0], HloComputation):
            yield from value


def run_op(opcode: str, *args, result: str | Shape | None = None,
           flush_denormals: bool = True, **attrs) -> np.ndarray:
    """Evaluates one `opcode` instruction on numpy arrays.

    `result` is the result element type (same dims as the first argument) or a full Shape;
    by default the first argument's shape.
    """
    args = [np.asarray(a) for a in args]
    if result is None:
        result = shape_of(args[0])
    elif isinstance(result, str):
        result = Shape(result, args[0].shape)
    module = single_op_module(opcode, args, result, **attrs)
    (out,) = evaluate(module, args, flush_denormals=flush_denormals)
    return out


def run_text(text: str, *args, flush_denormals: bool = True) -> list[np.ndarray]:
    """Parses an HLO module and evaluates it on `args`."""
    return evaluate(parse_module(dedent(text)), [np.asarray(a) for a in args],
                    flush_denormals=flush_denormals)


def binary_computation(opcode: str, element_type: str, name: str | None = None) -> HloComputation:
    """A scalar computation ROOT opcode(p0, p1), as reducers and combiners are."""
    comp = HloComputation(name or f"{opcode}_{element_type}")
    scalar = Shape(element_type, ())
    a = comp.add_instruction(HloInstruction("parameter", scalar, name="a", parameter_number=0))
    b = comp.add_instruction(HloInstruction("parameter", scalar, name="b", parameter_number=1))
    result = Shape("pred", ()) if opcode == "compare" else scalar
    attrs = {"direction": "GE"} if opcode == "compare" else {}
    comp.root = comp.add_instruction(HloInstruction(opcode, result, [a, b], attrs, name="r"))
    return comp
