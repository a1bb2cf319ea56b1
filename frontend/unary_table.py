"""The elementwise unary frontend ops that are one HLO opcode each: one row per op.

A row is what JAX writes as `standard_unop` plus `defjvp`: the op's TensorFlow
name, its `frontend.ops` function, the opcode it lowers to, the inputs it takes
and its derivative. Three layers read the rows and generate their part, so an
op is never written out anywhere else:

    kernels/elementwise.py   the kernel: `opcode(x)`, after checking the input type
    ops/math.py              the user function (`ops.exp`), exported by `ops`
    autodiff/grads_math.py   the gradient `g * derivative(x, y)`; an op without a
                             derivative is non-differentiable (autodiff/registry.py)

Inputs:
    FLOAT     floating point; the ops function turns integers into float32 first
    NUMBER    any number but bool, kept as it is (integers wrap as in HLO)
    ROUNDING  floating point in the kernel; the ops function returns integers
              unchanged (they are already whole)

`derivative(ops, x, y)` gives dy/dx from the input `x` and the output `y`
(Tensors), built with `ops` (the `frontend.ops` module, passed in because it
imports this table). Activations that need more than one opcode (Relu, Gelu,
...) are kernels of their own (kernels/activations.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

FLOAT, NUMBER, ROUNDING = "float", "number", "rounding"


@dataclass(frozen=True)
class UnaryOp:
    name: str                          # TensorFlow op name: the kernel's and the gradient's key
    function: str                      # the frontend.ops function
    opcode: str                        # the HLO opcode the kernel emits
    inputs: str                        # FLOAT, NUMBER or ROUNDING
    derivative: Callable | None = None  # (ops, x, y) -> dy/dx; None: zero gradient


ROWS: tuple[UnaryOp, ...] = (
    UnaryOp("Neg", "negative", "negate", NUMBER, lambda ops, x, y: -ops.ones_like(x)),
    UnaryOp("Abs", "abs", "abs", NUMBER, lambda ops, x, y: ops.sign(x)),
    UnaryOp("Sign", "sign", "sign", NUMBER),
    UnaryOp("Exp", "exp", "exponential", FLOAT, lambda ops, x, y: y),
    UnaryOp("Log", "log", "log", FLOAT, lambda ops, x, y: 1.0 / x),
    UnaryOp("Log1p", "log1p", "log-plus-one", FLOAT, lambda ops, x, y: 1.0 / (x + 1.0)),
    UnaryOp("Expm1", "expm1", "exponential-minus-one", FLOAT, lambda ops, x, y: y + 1.0),
    UnaryOp("Sqrt", "sqrt", "sqrt", FLOAT, lambda ops, x, y: 0.5 / y),
    UnaryOp("Rsqrt", "rsqrt", "rsqrt", FLOAT, lambda ops, x, y: -0.5 * y * y * y),
    UnaryOp("Tanh", "tanh", "tanh", FLOAT, lambda ops, x, y: 1.0 - y * y),
    UnaryOp("Sigmoid", "sigmoid", "logistic", FLOAT, lambda ops, x, y: y * (1.0 - y)),
    UnaryOp("Erf", "erf", "erf", FLOAT,                # 2/sqrt(pi) e^(-x^2)
            lambda ops, x, y: (2 / math.sqrt(math.pi)) * ops.exp(-x * x)),
    UnaryOp("Sin", "sin", "sine", FLOAT, lambda ops, x, y: ops.cos(x)),
    UnaryOp("Cos", "cos", "cosine", FLOAT, lambda ops, x, y: -ops.sin(x)),
    UnaryOp("Tan", "tan", "tan", FLOAT, lambda ops, x, y: 1.0 + y * y),
    UnaryOp("IsFinite", "is_finite", "is-finite", FLOAT),    # a bool result
    UnaryOp("Floor", "floor", "floor", ROUNDING),
    UnaryOp("Ceil", "ceil", "ceil", ROUNDING),
    UnaryOp("Round", "round", "round-nearest-even", ROUNDING),  # half to even, as numpy and TF
)
