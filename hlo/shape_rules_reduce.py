"""Shape rules of reductions and friends: reduce, reduce-window, select-and-scatter, sort.

These ops call a scalar computation (the reducer, comparator, select or scatter
function); the rules check its signature too, so a verifier error says which
called computation does not fit.

Variadic forms take N inputs and N init values and give a tuple of N results
(argmax is a reduce over (values, iota) with inits (-inf, 0)).
"""
from __future__ import annotations

from .shape_rules_common import (array, check_dims_attr, check_reducer, check_scalar_function,
                                 fail, rule, scalar, tuple_or_single, window_output_dims)


def _inputs_and_inits(shapes):
    """Splits 2N operands into N arrays of equal dims and N scalar init values."""
    if not shapes or len(shapes) % 2:
        fail(f"needs N inputs and N init values, got {len(shapes)} operands")
    n = len(shapes) // 2
    inputs, inits = shapes[:n], shapes[n:]
    for s in inputs:
        if array(s, "input").dims != inputs[0].dims:
            fail(f"inputs {inputs[0]} and {s} differ in dims")
    for i, s in enumerate(inits):
        scalar(s, f"init value {i}")
    return inputs, inits


def _types(shapes):
    return [s.element_type for s in shapes]


@rule("reduce")
def reduce_shape(opcode, shapes, attrs, hint):
    """The inputs' dims without `dimensions`, in the init values' types."""
    inputs, inits = _inputs_and_inits(shapes)
    dims = check_dims_attr(attrs.get("dimensions", ()), inputs[0].rank, "dimensions")
    check_reducer(attrs.get("to_apply"), "to_apply", _types(inits), _types(inputs))
    kept = tuple(n for d, n in enumerate(inputs[0].dims) if d not in dims)
    return tuple_or_single(init.with_dims(kept) for init in inits)


@rule("reduce-window")
def reduce_window_shape(opcode, shapes, attrs, hint):
    """One result element per window position (see window_output_size)."""
    inputs, inits = _inputs_and_inits(shapes)
    out = window_output_dims(inputs[0].dims, attrs.get("window"))
    check_reducer(attrs.get("to_apply"), "to_apply", _types(inits), _types(inputs))
    return tuple_or_single(init.with_dims(out) for init in inits)


@rule("select-and-scatter")
def select_and_scatter_shape(opcode, shapes, attrs, hint):
    """select-and-scatter(operand, source, init): source has one element per window."""
    operand, source, init = array(shapes[0]), array(shapes[1], "source"), shapes[2]
    scalar(init, "init value")
    out = window_output_dims(operand.dims, attrs.get("window"))
    if source.dims != out:
        fail(f"source {source} must have the window positions {list(out)} of {operand}")
    if source.element_type != init.element_type or operand.element_type != init.element_type:
        fail(f"operand {operand}, source {source} and init {init} must share an element type")
    t = operand.element_type
    check_scalar_function(attrs.get("select"), "select", [t, t], ["pred"])
    check_scalar_function(attrs.get("scatter"), "scatter", [t, t], [t])
    return operand


@rule("sort")
def sort_shape(opcode, shapes, attrs, hint):
    """Sorts N arrays of equal dims along `dimensions={d}` by a comparator of 2N scalars."""
    if not shapes:
        fail("needs at least one operand")
    for s in shapes:
        if array(s).dims != shapes[0].dims:
            fail(f"operands {shapes[0]} and {s} differ in dims")
    dims = check_dims_attr(attrs.get("dimensions", ()), max(shapes[0].rank, 1), "dimensions")
    if len(dims) != 1 or shapes[0].rank == 0:
        fail(f"needs exactly one sort dimension of an array, got {list(dims)} for {shapes[0]}")
    # The comparator sees (lhs_0, rhs_0, lhs_1, rhs_1, ...).
    params = [t for s in shapes for t in (s.element_type, s.element_type)]
    check_scalar_function(attrs.get("to_apply"), "comparator", params, ["pred"])
    return tuple_or_single(shapes)
