"""Kernels and launches: LaunchDims slicing, Python and JIT kernels, partitions in parallel."""
import ctypes
import threading

import numpy as np
import pytest
from hypothesis import given, strategies as st

from xlapy.runtime import Kernel, LaunchDims, ThreadPool, launch, make_buffer_table
from tests.runtime.llvm_kernels import add_one_kernel, iterate_fma_kernel, iterate_fma_reference


@given(st.integers(0, 10_000), st.integers(1, 64))
def test_launch_dims_cover_the_range_in_near_equal_contiguous_slices(total, partitions):
    slices = LaunchDims(total, partitions).slices
    assert all(b < e for b, e in slices)                       # no empty slice
    flat = [i for b, e in slices for i in range(b, e)] if total < 200 else None
    if flat is not None:
        assert flat == list(range(total))
    assert sum(e - b for b, e in slices) == total
    assert all(e0 == b1 for (_, e0), (b1, _) in zip(slices, slices[1:]))
    sizes = {e - b for b, e in slices}
    assert not sizes or max(sizes) - min(sizes) <= 1
    assert len(slices) == min(total, partitions)


@pytest.mark.parametrize("args,message", [((-1, 2), "total"), ((4, 0), "partitions"),
                                          ((4.0, 2), "total")])
def test_bad_launch_dims_are_clear_errors(args, message):
    with pytest.raises(ValueError, match=message):
        LaunchDims(*args)


def test_python_kernel_gets_every_slice_once_across_threads():
    calls, lock = [], threading.Lock()

    def body(buffers, begin, end):
        with lock:
            calls.append((buffers, begin, end, threading.current_thread().name))

    pool = ThreadPool(2, name="kernel-test")
    launch(Kernel.from_callable(body), LaunchDims(10, 4), 1234, pool=pool)
    assert sorted(c[1:3] for c in calls) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert {c[0] for c in calls} == {1234}


def test_single_partition_runs_inline_on_the_caller():
    where = []
    kernel = Kernel.from_callable(lambda b, s, e: where.append(threading.current_thread()))
    launch(kernel, LaunchDims(100, 1), None)
    assert where == [threading.current_thread()]


def test_kernel_rejects_a_bad_address_and_buffers():
    with pytest.raises(ValueError, match="address"):
        Kernel(0, "null")
    with pytest.raises(TypeError, match="buffers"):
        launch(Kernel.from_callable(lambda *a: None), LaunchDims(1), "not a table")


@pytest.mark.parametrize("n,partitions", [(1, 1), (4, 2), (1000, 3), (4097, 8), (5, 16)])
def test_jit_kernel_over_several_partitions(n, partitions):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    table = make_buffer_table([x.ctypes.data, out.ctypes.data])
    launch(add_one_kernel(), LaunchDims(n, partitions), table)
    np.testing.assert_array_equal(out, x + np.float32(1))


def test_jit_kernel_touches_only_its_range():
    x = np.zeros(64, np.float32)
    out = np.full(64, -7, np.float32)
    table = make_buffer_table([x.ctypes.data, out.ctypes.data])
    add_one_kernel()(ctypes.addressof(table), 10, 20)
    assert (out[10:20] == 1).all() and (out[:10] == -7).all() and (out[20:] == -7).all()


def test_compute_kernel_matches_numpy():
    x = np.linspace(-3, 3, 999, dtype=np.float32)
    out = np.empty_like(x)
    launch(iterate_fma_kernel(), LaunchDims(999, 4), make_buffer_table([x.ctypes.data,
                                                                        out.ctypes.data]))
    np.testing.assert_allclose(out, iterate_fma_reference(x), rtol=1e-5, atol=1e-5)
