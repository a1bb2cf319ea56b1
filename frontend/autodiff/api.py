"""grad and value_and_grad: the user API of reverse-mode differentiation.

    def loss(w, x):
        return ops.reduce_mean(ops.square(x @ w))

    grad(loss)(w, x)                        # d loss / d w, numpy in and out
    value_and_grad(loss, argnums=(0, 1))    # (loss, (dw, dx))

    @jit_compile                            # inside jit: one HLO module computes
    def step(w, x):                         # the loss, its gradient and the update
        l, g = value_and_grad(loss)(w, x)
        return w - 0.1 * g, l

Differentiated arguments may be pytrees (tuples, lists, dicts) of float
arrays; the gradient has the same structure. Called on numpy arrays, the
function is traced and compiled once per signature with `jit_compile`
(backend "cpu", or "interpreter" for the reference evaluator); called inside
a trace (jit_compile, cond, while_loop, another grad), its forward and
backward ops go into that trace.
"""
from __future__ import annotations

import functools
import numbers

from .. import ops, pytree
from ..tensor import Tensor
from ..trace import current_graph, user_source_line
from .backprop import is_differentiable, vjp


def grad(fn, argnums=0, *, has_aux: bool = False, backend: str = "cpu"):
    """The gradient of scalar-valued `fn` with respect to the arguments `argnums`."""
    vg = value_and_grad(fn, argnums, has_aux=has_aux, backend=backend)

    @functools.wraps(fn)
    def gradient(*args, **kwargs):
        value, grads = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return gradient


def value_and_grad(fn, argnums=0, *, has_aux: bool = False, backend: str = "cpu"):
    """fn's value and its gradient; with has_aux, fn returns (value, aux) and the
    result is ((value, aux), grads)."""
    if not callable(fn):
        raise TypeError(f"value_and_grad: expected a function, got {fn!r}")
    single = isinstance(argnums, numbers.Integral)
    positions = (int(argnums),) if single else tuple(int(a) for a in argnums)
    if not positions:
        raise ValueError("value_and_grad: argnums must name at least one argument")
    compiled = {}

    def traced(*args, **kwargs):
        return _value_and_grad_traced(fn, positions, single, has_aux, args, kwargs)

    @functools.wraps(fn)
    def value_and_gradient(*args, **kwargs):
        if current_graph() is not None or _has_tensor((args, kwargs)):
            return traced(*args, **kwargs)
        if "jit" not in compiled:           # numpy in: compile the whole thing once
            from ..jit import jit_compile
            name = f"value_and_grad_{getattr(fn, '__name__', 'fn')}"
            compiled["jit"] = jit_compile(traced, backend=backend, name=name)
        return compiled["jit"](*args, **kwargs)
    return value_and_gradient


def _has_tensor(tree) -> bool:
    leaves, _ = pytree.flatten(tree)
    return any(isinstance(leaf, Tensor) for leaf in leaves)


def _value_and_grad_traced(fn, positions, single, has_aux, args, kwargs, combine=None):
    """value_and_grad inside a trace. `combine`, if given, sees the flat gradients:
    `combine.ready(i, g)` as soon as gradient i is complete in the backward pass (see
    backprop.vjp), then `combine.finish(grads) -> grads` (frontend/bucketing.py
    all-reduces them across replicas)."""
    args = list(args)
    for p in positions:
        if not -len(args) <= p < len(args):
            raise ValueError(f"value_and_grad: argnums {p} is out of range for a call with "
                             f"{len(args)} positional arguments")
    wrt, trees = [], {}
    for p in positions:
        leaves, tree = pytree.flatten(args[p])
        fresh = [_fresh_leaf(leaf, p) for leaf in leaves]
        wrt.extend(fresh)
        trees[p] = (tree, len(fresh))
        args[p] = pytree.unflatten(tree, fresh)
    result = fn(*args, **kwargs)
    value, aux = result if has_aux else (result, None)
    value = _check_scalar(value)
    grads = vjp(current_graph(), [value], [ops.ones_like(value)], wrt,
                on_ready=None if combine is None else combine.ready)
    if combine is not None:
        grads = combine.finish(grads)
    out, start = [], 0
    for p in positions:
        tree, n = trees[p]
        out.append(pytree.unflatten(tree, grads[start:start + n]))
        start += n
    grads_tree = out[0] if single else tuple(out)
    return ((value, aux) if has_aux else value), grads_tree


def _fresh_leaf(leaf, position: int) -> Tensor:
    """The argument as a new Identity tensor: distinct arguments get distinct
    cotangents even when the caller passes one tensor twice."""
    t = ops.to_tensor(leaf)
    if not is_differentiable(t):
        raise TypeError(f"grad: argument {position} has a leaf of dtype {t.dtype.name}; "
                        f"only floating-point arguments can be differentiated"
                        f"\n  at {user_source_line()}")
    return ops.identity(t)


def _check_scalar(value) -> Tensor:
    value = ops.to_tensor(value)
    if value.shape != () or not is_differentiable(value):
        raise TypeError(f"grad: the function must return a float scalar, got "
                        f"{value.aval_text()} (reduce it, e.g. with ops.reduce_sum)"
                        f"\n  at {user_source_line()}")
    return value
