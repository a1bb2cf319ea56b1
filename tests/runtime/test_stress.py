"""Stress and memory: many threads launching a JIT kernel, and 10,000 launches with allocations."""
import gc
import os
import threading
import time

import numpy as np

from xlapy import runtime
from xlapy.runtime import LaunchDims, make_buffer_table
from tests.runtime.llvm_kernels import add_one_kernel

N = 1024


def test_eight_threads_each_launching_500_times_on_their_own_streams():
    kernel = add_one_kernel()
    executor = runtime.get_platform().executor()
    dims = LaunchDims(N, 4)
    failures, finished = [], []

    def client(seed):
        stream = executor.create_stream()
        rng = np.random.default_rng(seed)
        try:
            for i in range(500):
                x = rng.standard_normal(N).astype(np.float32) + seed * 1000 + i
                out = runtime.empty(N, np.float32)
                stream.launch(kernel, dims, make_buffer_table([x.ctypes.data, out.ctypes.data]))
                stream.block_host_until_done()
                if not np.array_equal(out, x + np.float32(1)):
                    failures.append((seed, i))
            finished.append(seed)
        except BaseException as exc:                   # noqa: BLE001
            failures.append((seed, exc))

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(s,), daemon=True) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.1, 20 - (time.perf_counter() - start)))
    assert not any(t.is_alive() for t in threads), "deadlock: clients still running after 20 s"
    assert failures == []
    assert sorted(finished) == list(range(8))
    assert time.perf_counter() - start < 10


def test_eight_threads_chaining_two_streams_through_events():
    # Each client: stream A computes y = x + 1 and records an event, stream B waits
    # for it and computes z = y + 1, so every launch on B depends on one on A.
    kernel = add_one_kernel()
    executor = runtime.get_platform().executor()
    dims = LaunchDims(N, 3)
    failures = []

    def client(seed):
        first, second = executor.create_stream(), executor.create_stream()
        event = runtime.Event()
        try:
            for i in range(200):
                x = np.full(N, seed * 1000 + i, np.float32)
                y, z = runtime.empty(N, np.float32), runtime.empty(N, np.float32)
                first.launch(kernel, dims, make_buffer_table([x.ctypes.data, y.ctypes.data]))
                first.record_event(event)
                second.wait_event(event)
                second.launch(kernel, dims, make_buffer_table([y.ctypes.data, z.ctypes.data]))
                second.block_host_until_done()
                if not (z == x + 2).all():
                    failures.append((seed, i))
            first.block_host_until_done()
        except BaseException as exc:                   # noqa: BLE001
            failures.append((seed, exc))

    threads = [threading.Thread(target=client, args=(s,), daemon=True) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads), "deadlock: clients still running after 20 s"
    assert failures == []


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_resident_memory_is_stable_across_10000_launches():
    kernel = add_one_kernel()
    stream = runtime.get_platform().executor().create_stream()
    x = np.arange(4096, dtype=np.float32)
    dims = LaunchDims(4096, 2)

    def run(count):
        for _ in range(count):
            out = runtime.empty(4096, np.float32)
            stream.launch(kernel, dims, make_buffer_table([x.ctypes.data, out.ctypes.data]))
            stream.block_host_until_done()
        assert out[7] == 8

    run(500)                                            # warm up caches and pools
    gc.collect()
    before = _resident_bytes()
    run(10_000)
    gc.collect()
    growth = _resident_bytes() - before
    assert growth < 4 << 20, f"resident memory grew by {growth / 2**20:.1f} MiB"
