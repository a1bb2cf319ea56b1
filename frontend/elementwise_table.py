"""The elementwise frontend ops that are one HLO opcode each: one row per op.

A row is what JAX writes as `standard_unop`/`standard_binop` plus `defjvp`: the
op's TensorFlow name, its `frontend.ops` function, the opcode it lowers to, the
inputs it takes and its derivative. Three layers read the rows and generate
their part, so an op is never written out anywhere else:

    kernels/elementwise.py   the kernel: `opcode(x)` or `opcode(x, y)` after checking
                             the input types (binary: one type, broadcast by numpy's rules)
    ops/math.py              the user function (`ops.exp`, `ops.add`), exported by `ops`
    autodiff/grads_math.py   the gradient; an op without one is non-differentiable
                             (autodiff/registry.py)

Unary inputs (UNARY_ROWS):
    FLOAT     floating point; the ops function turns integers into float32 first;
              `complex=True`: complex64/complex128 too (the holomorphic functions, as
              TF; their gradients conjugate, autodiff/backprop.py)
    NUMBER    any number but bool, kept as it is (integers wrap as in HLO)
    ROUNDING  floating point in the kernel; the ops function returns integers
              unchanged (they are already whole)

`derivative(ops, x, y)` gives dy/dx from the input `x` and the output `y`
(Tensors), built with `ops` (the `frontend.ops` module, passed in because it
imports this table); the gradient is `g * derivative`.

Binary inputs (BINARY_ROWS; the ops function promotes the two to one dtype, Python
scalars weakly, see ops/core.promote):
    NUMBER      kept as promoted (integers wrap as in HLO)
    FLOAT       integers become float32 after promotion (atan2)
    TRUEDIV     TF's truediv: integers divide as float32 (8/16 bit) or float64
    COMPARISON  `compare` with the row's direction; a bool result
    BOOL        logical: each input becomes `x != 0` (no promotion); the kernel
                takes bools only

`partials = (dx, dy)`, each `(ops, g, x, y, out) -> cotangent` of one input at the
broadcast shape (JAX's defjvp rules take `g` too): the generator sums each back to
its input's shape once, for every row. They take `g` rather than returning dout/dx
because the cotangent is not always `g * something`: Add passes `g` itself (no
multiply by ones), Maximum routes `g` with a select (`g * 0` would turn an inf
cotangent into NaN). `partials=None`: zero gradient (comparisons, logic).

Kept out, as kernels of their own (kernels/elementwise.py, kernels/special.py):
ops of more than one opcode (FloorDiv, FloorMod, TruncateDiv, DivNoNan, Xlogy,
Xlog1py: selects around a divide or remainder), Square (`multiply(x, x)`: one
opcode but not of the row's `opcode(x)` shape), LogicalNot (`not` has no number
inputs), Select and ClipByValue (three inputs), and activations (Relu, Gelu, ...,
kernels/activations.py). logical_xor is TF's composite `not_equal` of two bools,
not an op. The frontend has no bitwise ops; one would be a NUMBER row
(`and`/`or`/`xor` on integers) with partials=None.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

FLOAT, NUMBER, ROUNDING = "float", "number", "rounding"
TRUEDIV, COMPARISON, BOOL = "truediv", "comparison", "bool"


@dataclass(frozen=True)
class UnaryOp:
    name: str                          # TensorFlow op name: the kernel's and the gradient's key
    function: str                      # the frontend.ops function
    opcode: str                        # the HLO opcode the kernel emits
    inputs: str                        # FLOAT, NUMBER or ROUNDING
    derivative: Callable | None = None  # (ops, x, y) -> dy/dx; None: zero gradient
    complex: bool = False              # FLOAT rows: complex inputs too (holomorphic)


UNARY_ROWS: tuple[UnaryOp, ...] = (
    UnaryOp("Neg", "negative", "negate", NUMBER, lambda ops, x, y: -ops.ones_like(x)),
    UnaryOp("Abs", "abs", "abs", NUMBER, lambda ops, x, y: ops.sign(x)),
    UnaryOp("Sign", "sign", "sign", NUMBER),
    UnaryOp("Exp", "exp", "exponential", FLOAT, lambda ops, x, y: y, complex=True),
    UnaryOp("Log", "log", "log", FLOAT, lambda ops, x, y: 1.0 / x, complex=True),
    UnaryOp("Log1p", "log1p", "log-plus-one", FLOAT, lambda ops, x, y: 1.0 / (x + 1.0),
            complex=True),
    UnaryOp("Expm1", "expm1", "exponential-minus-one", FLOAT, lambda ops, x, y: y + 1.0,
            complex=True),
    UnaryOp("Sqrt", "sqrt", "sqrt", FLOAT, lambda ops, x, y: 0.5 / y, complex=True),
    UnaryOp("Rsqrt", "rsqrt", "rsqrt", FLOAT, lambda ops, x, y: -0.5 * y * y * y, complex=True),
    UnaryOp("Tanh", "tanh", "tanh", FLOAT, lambda ops, x, y: 1.0 - y * y, complex=True),
    UnaryOp("Sigmoid", "sigmoid", "logistic", FLOAT, lambda ops, x, y: y * (1.0 - y),
            complex=True),
    UnaryOp("Erf", "erf", "erf", FLOAT,                # 2/sqrt(pi) e^(-x^2)
            lambda ops, x, y: (2 / math.sqrt(math.pi)) * ops.exp(-x * x)),
    UnaryOp("Sin", "sin", "sine", FLOAT, lambda ops, x, y: ops.cos(x), complex=True),
    UnaryOp("Cos", "cos", "cosine", FLOAT, lambda ops, x, y: -ops.sin(x), complex=True),
    UnaryOp("Tan", "tan", "tan", FLOAT, lambda ops, x, y: 1.0 + y * y, complex=True),
    UnaryOp("IsFinite", "is_finite", "is-finite", FLOAT),    # a bool result
    UnaryOp("Floor", "floor", "floor", ROUNDING),
    UnaryOp("Ceil", "ceil", "ceil", ROUNDING),
    UnaryOp("Round", "round", "round-nearest-even", ROUNDING),  # half to even, as numpy and TF
)


@dataclass(frozen=True)
class BinaryOp:
    name: str                          # TensorFlow op name: the kernel's and the gradient's key
    function: str                      # the frontend.ops function
    opcode: str                        # the HLO opcode the kernel emits
    inputs: str                        # NUMBER, FLOAT, TRUEDIV, COMPARISON or BOOL
    partials: tuple[Callable, Callable] | None = None  # (dx, dy); None: zero gradient
    direction: str | None = None       # COMPARISON: the compare direction
    args: tuple[str, str] = ("x", "y")  # the ops function's parameter names (TF's)
    doc: str = ""                      # the ops function's docstring, before the generic part


def _pow_dy(ops, g, x, y, out):
    """d(x^y)/dy = x^y log x, taken as 0 where x <= 0 (complex x: where x == 0, as TF)."""
    positive = ops.not_equal(x, 0) if x.dtype.kind == "c" else x > 0
    log_x = ops.where(positive, ops.log(ops.where(positive, x, ops.ones_like(x))), 0.0)
    return g * out * log_x


def _routed(wins):
    """Maximum/minimum: g goes to the input that won (x on ties, as TF), 0 to the other."""
    return (lambda ops, g, x, y, out: ops.where(wins(x, y), g, ops.zeros_like(g)),
            lambda ops, g, x, y, out: ops.where(wins(x, y), ops.zeros_like(g), g))


def _compare(name: str, function: str, direction: str) -> BinaryOp:
    return BinaryOp(name, function, "compare", COMPARISON, direction=direction)


BINARY_ROWS: tuple[BinaryOp, ...] = (
    BinaryOp("Add", "add", "add", NUMBER,
             (lambda ops, g, x, y, out: g, lambda ops, g, x, y, out: g)),
    BinaryOp("Sub", "subtract", "subtract", NUMBER,
             (lambda ops, g, x, y, out: g, lambda ops, g, x, y, out: -g)),
    BinaryOp("Mul", "multiply", "multiply", NUMBER,
             (lambda ops, g, x, y, out: g * y, lambda ops, g, x, y, out: g * x)),
    BinaryOp("Div", "divide", "divide", TRUEDIV,        # d(x/y)/dy = -x/y^2 = -out/y
             (lambda ops, g, x, y, out: g / y, lambda ops, g, x, y, out: -g * out / y),
             doc="True division (`/`): integers divide as floats, as TF's truediv does "
                 "(float32 for 8- and 16-bit integers, float64 for 32- and 64-bit ones)."),
    BinaryOp("Pow", "pow", "power", NUMBER,             # d(x^y)/dx = y x^(y-1)
             (lambda ops, g, x, y, out: g * y * ops.pow(x, y - 1), _pow_dy),
             doc="x ** y; integer powers stay integers (negative integer exponents are "
                 "undefined)."),
    BinaryOp("Maximum", "maximum", "maximum", NUMBER, _routed(lambda x, y: x >= y)),
    BinaryOp("Minimum", "minimum", "minimum", NUMBER, _routed(lambda x, y: x <= y)),
    BinaryOp("Atan2", "atan2", "atan2", FLOAT,          # d atan2(y, x) = (x dy - y dx) / r^2
             (lambda ops, g, y, x, out: g * x / (x * x + y * y),
              lambda ops, g, y, x, out: -g * y / (x * x + y * y)),
             args=("y", "x"), doc="The angle of the point (x, y): arctan(y / x) in the right "
                                  "quadrant."),
    BinaryOp("TruncateMod", "truncatemod", "remainder", NUMBER,  # x - trunc(x / y) * y
             (lambda ops, g, x, y, out: g,
              lambda ops, g, x, y, out: -g * ops.truncatediv(x, y)),
             doc="The remainder of truncatediv: the sign of x (C's % and fmod)."),
    _compare("Equal", "equal", "EQ"),
    _compare("NotEqual", "not_equal", "NE"),
    _compare("Less", "less", "LT"),
    _compare("LessEqual", "less_equal", "LE"),
    _compare("Greater", "greater", "GT"),
    _compare("GreaterEqual", "greater_equal", "GE"),
    BinaryOp("LogicalAnd", "logical_and", "and", BOOL),
    BinaryOp("LogicalOr", "logical_or", "or", BOOL),
)
