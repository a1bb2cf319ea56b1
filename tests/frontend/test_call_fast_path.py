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


def test_the_last_signature_is_tried_first_and_anything_else_falls_through():
    # call_exact runs only on exactly the signature's arrays; every other argument falls
    # through to the full path, which converts or explains.
    f = jit_compile(lambda x, y: (x + y, x * y), name="fast_last")
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.full((2, 3), 2.0, np.float32)
    for _ in range(2):
        s, p = f(x, y)                                      # a tuple comes back a tuple
        np.testing.assert_array_equal(s, x + y)
        np.testing.assert_array_equal(p, x * y)
    assert f._last is not None
    strided = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]     # same shape
    np.testing.assert_array_equal(f(strided, y)[0], strided + y)
    frozen = x.copy()
    frozen.flags.writeable = False
    np.testing.assert_array_equal(f(frozen, y)[1], x * y)
    fortran = np.asfortranarray(x)
    np.testing.assert_array_equal(f(fortran, y)[0], x + y)
    np.testing.assert_array_equal(f(x[:1], y[:1])[0], (x + y)[:1])   # another signature
    small = f(x.astype(np.int8), y.astype(np.int8))[1]                # another dtype
    assert small.dtype == np.int8
    np.testing.assert_array_equal(small, (x * y).astype(np.int8))
    assert f.trace_count == 3


def test_the_lean_execute_keeps_temps_and_fresh_results():
    # A program with temps in an arena and two kernels: each call gets fresh results.
    f = jit_compile(lambda x: (x @ x) @ x, name="fast_arena")
    x = np.eye(16, dtype=np.float32) * 2.0
    first = f(x)
    second = f(x)
    assert first is not second and not np.shares_memory(first, second)
    np.testing.assert_allclose(first, 8.0 * np.eye(16), rtol=1e-6)
    np.testing.assert_allclose(second, first)


def test_the_bound_dispatch_runs_repeated_calls_and_declines_the_rest():
    # Compiled._fast (CpuExecutable.fast_function): the repeated call's closure. It runs
    # exactly the signature's writable, aligned C arrays and returns None for anything
    # else, having run nothing; the call then takes the checked path.
    f = jit_compile(lambda x, y: (x + y, x * y), name="fast_bound")
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.full((2, 3), 2.0, np.float32)
    f(x, y)
    f(x, y)
    fast = f._last._fast
    assert fast is not None
    s, p = fast((x, y))
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(p, x * y)
    frozen = x.copy()
    frozen.flags.writeable = False
    misaligned = np.zeros(6 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(2, 3)
    misaligned[...] = x
    assert not misaligned.flags.aligned
    for args in [(frozen, y), (np.asfortranarray(x), y), (x, y.astype(np.float64)),
                 (x[:1], y[:1]), (x,), (x, y, y), (x.tolist(), y), (misaligned, y)]:
        assert fast(args) is None, args
    # ... and the jit function still answers those through the full path.
    np.testing.assert_array_equal(f(frozen, y)[0], x + y)
    np.testing.assert_array_equal(f(misaligned, y)[1], misaligned * y)


def test_the_bound_dispatch_gives_fresh_results_and_yields_to_a_trace(tmp_path):
    from xlapy import profiler
    f = jit_compile(lambda x: x * 3.0, name="fast_trace")
    x = np.ones(5, np.float32)
    a, b, c = f(x), f(x), f(x)
    assert not np.shares_memory(a, b) and not np.shares_memory(b, c)
    path = tmp_path / "trace.json"
    with profiler.trace(str(path)):
        assert f._last._fast((x,)) is None          # traced calls take the traced path
        np.testing.assert_array_equal(f(x), 3.0)
    assert '"ph"' in path.read_text()               # the traced run's spans
