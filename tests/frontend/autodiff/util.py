"""Gradient checking: reverse-mode gradients against central finite differences.

Everything runs in float64 on the reference evaluator without passes (fast to
"compile"): `check_grads(f, args)` projects f's output on a fixed random
cotangent (so every output element matters), differentiates the resulting
scalar with `frontend.grad`, and compares each argument's gradient with
(f(x + h e_i) - f(x - h e_i)) / 2h. `compiled_grads` runs the same gradient
through the CPU backend (an opcode it lacks makes the test an xfail).
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import grad, jit_compile, ops

STEP = 1e-6
RTOL, ATOL = 1e-5, 1e-6


def projected(f, out_shape, seed: int = 0):
    """x -> sum(f(x) * c) for a fixed random c: a scalar that sees every output."""
    c = np.random.default_rng(seed).uniform(0.5, 1.5, size=out_shape)

    def scalar(*args):
        return ops.reduce_sum(ops.multiply(f(*args), c))
    return scalar


def output_shape(f, args) -> tuple:
    return tuple(np.shape(jit_compile(f, backend="interpreter", pipeline=None)(*args)))


def reverse_grads(scalar_f, args, argnums, backend="interpreter", pipeline=None):
    g = jit_compile(lambda *a: grad(scalar_f, argnums)(*a), backend=backend,
                    pipeline=pipeline)
    return g(*args)


def numeric_grads(scalar_f, args, argnums):
    value = jit_compile(scalar_f, backend="interpreter", pipeline=None)
    result = []
    for i in argnums:
        x = np.array(args[i], dtype=np.float64)
        g = np.zeros_like(x)
        for k in range(x.size):
            for sign in (1, -1):
                xs = x.copy()
                xs.flat[k] += sign * STEP
                shifted = list(args)
                shifted[i] = xs
                g.flat[k] += sign * float(value(*shifted)) / (2 * STEP)
        result.append(g)
    return result


def check_grads(f, args, argnums=(0,), rtol=RTOL, atol=ATOL):
    """Asserts the gradient of f (any output shape) matches finite differences."""
    args = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else a
            for a in args]
    scalar_f = projected(f, output_shape(f, args))
    analytic = reverse_grads(scalar_f, args, tuple(argnums))
    numeric = numeric_grads(scalar_f, args, argnums)
    for i, got, want in zip(argnums, analytic, numeric):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of argument {i}")
    return analytic


def compiled_grads(name: str, f, args, argnums=(0,)):
    """The same gradient through the CPU backend, compared with the evaluator's."""
    args = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else a
            for a in args]
    scalar_f = projected(f, output_shape(f, args))
    want = reverse_grads(scalar_f, args, tuple(argnums))
    try:
        got = reverse_grads(scalar_f, args, tuple(argnums), backend="cpu",
                            pipeline="default")
    except NotImplementedError as e:
        pytest.xfail(f"backend: {e}")
    for i, a, b in zip(argnums, got, want):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11,
                                   err_msg=f"{name}: compiled gradient of argument {i}")


# --- inputs -------------------------------------------------------------------------------

def values(rng, shape, domain: str = "any") -> np.ndarray:
    """float64 test values, kept away from the kinks and poles of the ops under test."""
    x = rng.uniform(-2.0, 2.0, size=shape)
    if domain == "positive":
        return rng.uniform(0.3, 2.0, size=shape)
    if domain == "away0":        # |x| >= 0.1: relu, abs, sign-like kinks
        return np.sign(x + (x == 0)) * (0.1 + np.abs(x))
    return x


def broadcast_partner(draw, shape):
    """A shape that broadcasts against `shape` (drops leading dims, some dims -> 1)."""
    from hypothesis import strategies as st
    drop = draw(st.integers(0, len(shape)))
    tail = list(shape[drop:])
    return tuple(1 if draw(st.booleans()) else n for n in tail)
