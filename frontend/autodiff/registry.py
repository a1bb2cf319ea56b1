"""The gradient registry: one function per differentiable op, TensorFlow style.

A gradient function receives the forward `Node` (its op, input and output
Tensors, attributes) and one cotangent per output, and returns one cotangent
per input (None where the input gets no gradient). It builds the gradient
with `frontend.ops`, so the backward pass is ordinary traced ops that lower
and fuse together with the forward pass:

    @register_gradient("Exp")
    def _exp_grad(node, grads):
        return [grads[0] * node.outputs[0]]

Ops not registered fall in one of two explicit lists:
  NON_DIFFERENTIABLE  the gradient is zero (or the op has no float inputs):
                      comparisons, argmax, rounding, casts to int, ...
  NO_GRADIENT         reaching one in a backward pass is a clear error
                      (gradient-only kernels, which would need second order).
A coverage test checks that every registered op is in exactly one place.
"""
from __future__ import annotations

import difflib
from typing import Callable

from ..elementwise_table import BINARY_ROWS, UNARY_ROWS

_GRADIENTS: dict[str, Callable] = {}

# Piecewise constant, boolean or integer-valued, or without inputs: zero gradient.
# With the rows of the elementwise table that have no derivative (Sign, Floor,
# comparisons, logic, ...).
NON_DIFFERENTIABLE = frozenset({
    "LogicalNot", "All", "Any", "ArgMax", "ArgMin",
    "FloorDiv", "OneHot", "Range", "Fill", "ZerosLike", "OnesLike", "Const",
    "TruncateDiv", "StopGradient",
    # random numbers: functions of an integer key only (kernels/random.py)
    "StatelessRandomBits", "StatelessRandomUniform", "StatelessRandomNormal",
    "StatelessTruncatedNormal", "StatelessRandomUniformInt", "StatelessRandomSplit",
} | {row.name for row in UNARY_ROWS if row.derivative is None}
  | {row.name for row in BINARY_ROWS if row.partials is None})

# Gradients of these are an error naming the op (see NoGradientError).
NO_GRADIENT: dict[str, str] = {}


class NoGradientError(LookupError):
    """A backward pass reached an op without a gradient; prints plainly."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def register_gradient(op: str):
    """Decorator: `fn(node, output_grads) -> input_grads` is the gradient of `op`."""
    def register(fn):
        if op in _GRADIENTS:
            raise ValueError(f"a gradient for {op!r} is already registered "
                             f"({_GRADIENTS[op].__name__})")
        _GRADIENTS[op] = fn
        return fn
    return register


def register_no_gradient(op: str, reason: str) -> None:
    """Marks `op` (a gradient-only kernel, say) as having no gradient, with the reason."""
    NO_GRADIENT[op] = reason


def gradient_function(op: str, source: str = "") -> Callable | None:
    """The gradient of `op`; None when it is non-differentiable (zero gradient)."""
    fn = _GRADIENTS.get(op)
    if fn is not None:
        return fn
    if op in NON_DIFFERENTIABLE:
        return None
    where = f"\n  at {source}" if source else ""
    if op in NO_GRADIENT:
        raise NoGradientError(f"no gradient for op {op!r}: {NO_GRADIENT[op]}{where}")
    close = difflib.get_close_matches(op, _GRADIENTS, n=3, cutoff=0.6)
    hint = f" (registered nearby: {', '.join(close)})" if close else ""
    raise NoGradientError(f"no gradient registered for op {op!r}{hint}{where}")


def registered_gradients() -> list[str]:
    return sorted(_GRADIENTS)
