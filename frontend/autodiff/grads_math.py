"""Gradients of elementwise ops: arithmetic, math functions, activations, select,
clip and cast.

Binary ops broadcast their inputs, so each input's cotangent is summed back
to that input's shape (`unbroadcast`). The one-opcode ops' gradients are
generated from the rows of frontend/elementwise_table.py. Where a derivative has a removable
singularity or a kink, the choice is TensorFlow's (relu'(0) = 0, the larger
input of maximum wins ties).
"""
from __future__ import annotations

import math

from .. import dtypes, ops
from ..kernels.activations import SELU_ALPHA, SELU_SCALE
from ..elementwise_table import BINARY_ROWS, UNARY_ROWS, BinaryOp, UnaryOp
from .registry import register_gradient
from .util import unbroadcast


def _binary(node, gx, gy):
    x, y = node.inputs
    return [unbroadcast(gx, x.shape), unbroadcast(gy, y.shape)]


def binary_gradient(row: BinaryOp) -> None:
    """Registers the gradient of a binary row: each partial's cotangent (at the
    broadcast shape) summed back to its input's shape."""
    dx, dy = row.partials

    def gradient(node, grads):
        (g,), (x, y), out = grads, node.inputs, node.outputs[0]
        return _binary(node, dx(ops, g, x, y, out), dy(ops, g, x, y, out))
    gradient.__name__ = f"_{row.name.lower()}_grad"
    register_gradient(row.name)(gradient)


for _row in BINARY_ROWS:
    if _row.partials is not None:        # None: non-differentiable (registry.py)
        binary_gradient(_row)


@register_gradient("FloorMod")
def _floormod_grad(node, grads):
    # x mod y = x - floor(x / y) * y
    (g,), (x, y) = grads, node.inputs
    return _binary(node, g, -g * ops.floor(x / y))


@register_gradient("DivNoNan")
def _div_no_nan_grad(node, grads):
    # d/dx = 1/y, d/dy = -x/y^2, both 0 where y = 0 (TF's choice)
    (g,), (x, y) = grads, node.inputs
    return _binary(node, ops.divide_no_nan(g, y), ops.divide_no_nan(-g * x, y * y))


@register_gradient("ClipByValue")
def _clip_grad(node, grads):
    (g,), (x, lo, hi) = grads, node.inputs
    zero = ops.zeros_like(g)
    below, above = x < lo, x > hi
    inside = ops.logical_not(ops.logical_or(below, above))
    return [unbroadcast(ops.where(inside, g, zero), x.shape),
            unbroadcast(ops.where(below, g, zero), lo.shape),
            unbroadcast(ops.where(above, g, zero), hi.shape)]


@register_gradient("Select")
def _select_grad(node, grads):
    (g,), (cond, x, y) = grads, node.inputs
    zero = ops.zeros_like(g)
    return [None, unbroadcast(ops.where(cond, g, zero), x.shape),
            unbroadcast(ops.where(cond, zero, g), y.shape)]


@register_gradient("Cast")
def _cast_grad(node, grads):
    # TF's rule: floats (bfloat16 included) and complex numbers pass the gradient, cast
    # back to the input's type; through integers or bools there is none.
    x = node.inputs[0]
    if not (dtypes.kind(x.dtype) in ("float", "complex") and
            dtypes.kind(node.outputs[0].dtype) in ("float", "complex")):
        return [None]
    return [ops.cast(grads[0], x.dtype)]


@register_gradient("Identity")
def _identity_grad(node, grads):
    return [grads[0]]


# --- unary math: grad = g * f'(x), with f' written from x and/or out -----------------

def _unary(op: str, derivative):
    def gradient(node, grads):
        return [grads[0] * derivative(node.inputs[0], node.outputs[0], node.attrs)]
    gradient.__name__ = f"_{op.lower()}_grad"
    register_gradient(op)(gradient)


def unary_gradient(row: UnaryOp) -> None:
    """Registers the gradient of a row of the unary table: g * row.derivative(x, y)."""
    derivative = row.derivative
    _unary(row.name, lambda x, out, a: derivative(ops, x, out))


for _row in UNARY_ROWS:
    if _row.derivative is not None:      # None: non-differentiable (registry.py)
        unary_gradient(_row)
_unary("Square", lambda x, out, a: 2.0 * x)

# --- activations --------------------------------------------------------------------

_unary("Relu", lambda x, out, a: ops.cast(x > 0, x.dtype))
_unary("Relu6", lambda x, out, a: ops.cast(ops.logical_and(x > 0, x < 6), x.dtype))
_unary("LeakyRelu", lambda x, out, a: ops.where(x > 0, 1.0, a.get("alpha", 0.2) *
                                               ops.ones_like(x)))
_unary("Elu", lambda x, out, a: ops.where(x > 0, ops.ones_like(x), out + 1.0))
# selu = scale * alpha * expm1(x) for x <= 0, so its derivative is out + scale * alpha
_unary("Selu", lambda x, out, a: ops.where(x > 0, SELU_SCALE * ops.ones_like(x),
                                          out + SELU_SCALE * SELU_ALPHA))
_unary("Softplus", lambda x, out, a: ops.sigmoid(x))


@register_gradient("Silu")
def _silu_grad(node, grads):
    # (x s(bx))' = s + b x s (1 - s)
    x = node.inputs[0]
    beta = float(node.attrs.get("beta", 1.0))
    s = ops.sigmoid(x * beta if beta != 1.0 else x)
    return [grads[0] * s * (1.0 + beta * x * (1.0 - s))]


@register_gradient("Gelu")
def _gelu_grad(node, grads):
    x = node.inputs[0]
    if node.attrs.get("approximate", False):
        # 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3k x^2), t = tanh(c (x + k x^3))
        c, k = math.sqrt(2 / math.pi), 0.044715
        t = ops.tanh(c * (x + k * x * x * x))
        d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * k * x * x)
    else:
        # Phi(x) + x phi(x)
        cdf = 0.5 * (1.0 + ops.erf(x * (1 / math.sqrt(2))))
        pdf = ops.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
        d = cdf + x * pdf
    return [grads[0] * d]


# --- special functions (kernels/special.py) ---------------------------------------------------

_SPECIAL = {
    "Asin": lambda x, y: ops.rsqrt((1.0 - x) * (1.0 + x)),
    "Acos": lambda x, y: -ops.rsqrt((1.0 - x) * (1.0 + x)),
    "Atan": lambda x, y: 1.0 / (1.0 + x * x),
    "Sinh": lambda x, y: ops.cosh(x),
    "Cosh": lambda x, y: ops.sinh(x),
    "Asinh": lambda x, y: ops.rsqrt(x * x + 1.0),
    "Acosh": lambda x, y: ops.rsqrt((x - 1.0) * (x + 1.0)),
    "Atanh": lambda x, y: 1.0 / ((1.0 - x) * (1.0 + x)),
    "Erfc": lambda x, y: (-2 / math.sqrt(math.pi)) * ops.exp(-x * x),
    "Erfinv": lambda x, y: (math.sqrt(math.pi) / 2) * ops.exp(y * y),
    "Lgamma": lambda x, y: ops.digamma(x),
    "Digamma": lambda x, y: ops.apply("Trigamma", [x]),
}
for _op, _d in _SPECIAL.items():
    _unary(_op, lambda x, out, a, _d=_d: _d(x, out))


@register_gradient("Xlogy")
def _xlogy_grad(node, grads):
    # d/dx = log(y), d/dy = x / y; both 0 where x == 0 (TF's choice)
    (g,), (x, y) = grads, node.inputs
    nonzero = ops.not_equal(x, 0.0)
    zero = ops.zeros_like(g)
    return _binary(node, ops.where(nonzero, g * ops.log(y), zero),
                   ops.where(nonzero, g * ops.divide_no_nan(x, y), zero))


@register_gradient("Xlog1py")
def _xlog1py_grad(node, grads):
    (g,), (x, y) = grads, node.inputs
    nonzero = ops.not_equal(x, 0.0)
    zero = ops.zeros_like(g)
    return _binary(node, ops.where(nonzero, g * ops.log1p(y), zero),
                   ops.where(nonzero, g * ops.divide_no_nan(x, y + 1.0), zero))
