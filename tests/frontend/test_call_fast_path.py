"""The lean call path: positional numpy arrays seen before skip pytree flattening, but
results, retracing and argument errors stay exactly those of the full path."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import jit_compile


def test_repeated_calls_take_the_fast_path_and_stay_right():
    f = jit_compile(lambda x, y: x * y + 1.0, name="fast_mul")
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = rng.standard_normal((2, 8)).astype(np.float32)
        np.testing.assert_allclose(f(x, y), x * y + 1.0, rtol=1e-6)
    assert f.trace_count == 1
    assert len(f._fast) == 1


def test_other_shapes_and_dtypes_still_retrace():
    f = jit_compile(lambda x: x + 1.0, name="fast_retrace")
    f(np.zeros(4, np.float32))
    out = f(np.zeros(5, np.float32))
    assert out.shape == (5,) and f.trace_count == 2
    f(np.zeros(4, np.float64))
    assert f.trace_count == 3
    f(np.zeros(4, np.float32))
    assert f.trace_count == 3


def test_non_array_arguments_take_the_full_path():
    f = jit_compile(lambda x: x * 2.0, name="fast_lists")
    f(np.ones(3, np.float32))
    np.testing.assert_allclose(f([1.0, 2.0, 3.0]), [2.0, 4.0, 6.0])   # a list is one leaf
    view = np.arange(6, dtype=np.float32)[::2]                          # not contiguous
    np.testing.assert_allclose(f(view), view * 2.0)


def test_static_arguments_never_use_the_fast_path():
    f = jit_compile(lambda x, n: x * n, static_argnums=1, name="fast_static")
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(f(x, 2), 2.0)
    np.testing.assert_allclose(f(x, 3), 3.0)
    assert f._fast == {}


def test_compiled_object_fast_path_checks_shapes():
    f = jit_compile(lambda x: x - 1.0, name="fast_compiled")
    x = np.ones(4, np.float32)
    c = f.lower(x).compile()
    np.testing.assert_allclose(c(x), 0.0)
    with pytest.raises(ValueError, match="shape"):
        c(np.ones(5, np.float32))
    with pytest.raises(TypeError, match="dtype"):
        c(np.ones(4, np.float64))
