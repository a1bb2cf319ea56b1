"""Shared helpers of the frontend tests: run a function on the evaluator and compiled,
compare with numpy under per-dtype tolerances, and draw shapes with hypothesis.

Compiled functions are cached for the session by (name, signature) so that a
kernel compiled by one test is reused by the next; a backend that lacks an
emitter for an opcode makes the compiled check an xfail with its message.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

from xlapy.frontend import jit_compile

FLOATS = (np.float32, np.float64, np.float16)
F32_F64 = (np.float32, np.float64)
INTS = (np.int32, np.int64, np.int8)
NUMBERS = FLOATS + INTS

# rtol, atol by result dtype (compositions of a few ops round a few times).
TOLERANCE = {np.dtype(np.float16): (5e-3, 5e-3), np.dtype(np.float32): (2e-5, 2e-6),
             np.dtype(np.float64): (1e-10, 1e-12)}

_compiled: dict[str, object] = {}


def interpret(fn, *args, static_argnums=()):
    """fn traced and run on the reference evaluator, without passes."""
    return jit_compile(fn, backend="interpreter", pipeline=None,
                       static_argnums=static_argnums)(*args)


def compiled(name: str, fn, *args, static_argnums=()):
    """fn compiled by the CPU backend (default pipeline), cached per session by `name`."""
    jit = _compiled.get(name)
    if jit is None:
        jit = _compiled[name] = jit_compile(fn, static_argnums=static_argnums, name=name)
    try:
        return jit(*args)
    except NotImplementedError as e:
        pytest.xfail(f"backend: {e}")


def assert_close(actual, expected, *, scale: float = 1.0, what: str = "") -> None:
    """actual ≈ expected (cast to actual's dtype) with the dtype's tolerance × scale."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    tol = TOLERANCE.get(actual.dtype)
    if tol is None:
        np.testing.assert_array_equal(actual, expected.astype(actual.dtype), err_msg=what)
    else:
        rtol, atol = tol
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol * scale, atol=atol * scale, equal_nan=True,
                                   err_msg=what)


def random_array(rng, shape, dtype, domain: str = "any") -> np.ndarray:
    """Values that keep the op well conditioned: floats in [-3, 3], ints in [-5, 5]."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo, hi = {"positive": (1, 6), "nonzero": (1, 6), "small": (0, 4),
                  "unit": (-1, 2)}.get(domain, (-5, 6))
        if dtype.kind == "u":
            lo = max(lo, 0)
        values = rng.integers(lo, hi, size=shape)
        if domain == "nonzero":
            values = values * rng.choice([-1, 1], size=shape) if dtype.kind == "i" else values
        return values.astype(dtype)
    lo, hi = {"positive": (0.1, 3.0), "unit": (-0.9, 0.9), "small": (0.0, 2.0),
              "nonzero": (0.5, 3.0)}.get(domain, (-3.0, 3.0))
    values = rng.uniform(lo, hi, size=shape)
    if domain == "nonzero":
        values *= rng.choice([-1.0, 1.0], size=shape)
    return values.astype(dtype)


def upcast(array: np.ndarray) -> np.ndarray:
    """Floats to float64 for the numpy reference (rounded once, at the end)."""
    return array.astype(np.float64) if array.dtype.kind == "f" else array


# --- hypothesis strategies -------------------------------------------------------------------

def shapes(min_rank: int = 0, max_rank: int = 3, min_side: int = 0, max_side: int = 4):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank,
                    max_size=max_rank).map(tuple)


@st.composite
def broadcastable_pair(draw, max_rank: int = 3):
    """Two shapes that broadcast: the second a suffix of the first with some dims 1."""
    a = draw(shapes(0, max_rank))
    keep = draw(st.integers(0, len(a)))
    suffix = list(a[len(a) - keep:])
    ones = draw(st.lists(st.booleans(), min_size=len(suffix), max_size=len(suffix)))
    b = tuple(1 if one else d for d, one in zip(suffix, ones))
    return (a, b) if draw(st.booleans()) else (b, a)


seeds = st.integers(0, 2**32 - 1)
