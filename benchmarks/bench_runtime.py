"""Runtime benchmark: launch overhead, intra-op scaling, inter-op overlap, allocator.

Run by hand from the repository root (not part of the test suite):

    python3 benchmarks/bench_runtime.py [--quick]

The kernels are tiny LLVM functions with the runtime's ABI, JIT-compiled with
llvmlite (tests/runtime/llvm_kernels.py), so this measures the runtime alone,
not the CPU backend's code generation. Every figure is a median of repeats.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import runtime  # noqa: E402
from runtime import LaunchDims, Stream, ThreadPool, launch, make_buffer_table  # noqa: E402
from tests.runtime.llvm_kernels import (add_one_kernel, iterate_fma_kernel,  # noqa: E402
                                        iterate_fma_reference)


def median_seconds(fn, repeats: int, inner: int = 1) -> float:
    """Median over `repeats` timings of `inner` back-to-back calls, per call."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def bench_launch_overhead(quick: bool) -> None:
    print("== launch overhead: x + 1 on f32[4] (per call, median) ==")
    kernel = add_one_kernel()
    x = np.arange(4, dtype=np.float32)
    out = runtime.empty(4, np.float32)
    table = make_buffer_table([x.ctypes.data, out.ctypes.data])
    address = ctypes.addressof(table)
    dims = LaunchDims(4, 1)
    executor = runtime.get_platform().executor()
    inline, queued = executor.create_stream(inline=True), executor.create_stream()

    def full_call():
        # What a compiled executable pays per call: an output, a table, the launch.
        result = runtime.empty(4, np.float32)
        launch(kernel, dims, make_buffer_table([x.ctypes.data, result.ctypes.data]))
        return result

    def on_stream(stream):
        stream.launch(kernel, dims, table)
        stream.block_host_until_done()

    inner, repeats = (2000, 5) if quick else (20000, 9)
    rows = [
        ("ctypes call of the kernel", lambda: kernel(address, 0, 4)),
        ("runtime.launch (1 partition)", lambda: launch(kernel, dims, table)),
        ("empty() + table + launch", full_call),
        ("inline stream launch + sync", lambda: on_stream(inline)),
        ("queued stream launch + sync", lambda: on_stream(queued)),
        ("numpy x + 1 (reference)", lambda: x + np.float32(1)),
    ]
    for name, fn in rows:
        seconds = median_seconds(fn, repeats, inner if "queued" not in name else inner // 10)
        print(f"  {name:32s} {seconds * 1e6:8.2f} us")
    np.testing.assert_array_equal(full_call(), x + 1)
    try:
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda v: v + 1)
        v = jax.device_put(jnp.arange(4, dtype=jnp.float32))
        f(v).block_until_ready()
        seconds = median_seconds(lambda: f(v).block_until_ready(), repeats, inner // 10)
        print(f"  {'JAX jit x + 1':32s} {seconds * 1e6:8.2f} us")
    except ImportError:
        print("  (JAX not installed: no XLA comparison)")


def time_kernel(kernel, n: int, threads: int, partitions: int, repeats: int) -> float:
    pool = ThreadPool(threads, name=f"bench-{threads}")
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = runtime.empty(n, np.float32)
    table = make_buffer_table([x.ctypes.data, out.ctypes.data])
    dims = LaunchDims(n, partitions)
    launch(kernel, dims, table, pool=pool)       # warm up (and page in) once
    seconds = median_seconds(lambda: launch(kernel, dims, table, pool=pool), repeats)
    pool.shutdown()
    return seconds


def bench_intra_op(quick: bool) -> None:
    n = 1 << 24
    repeats = 5 if quick else 15
    print(f"\n== intra-op scaling: 2 threads vs 1 on one launch (median of {repeats}) ==")
    for label, kernel, n_elems, bytes_per in [
            ("add_one f32[16M] (memory-bound)", add_one_kernel(), n, 8),
            ("iterate_fma f32[4M] (compute-bound)", iterate_fma_kernel(), n // 4, 8)]:
        one = time_kernel(kernel, n_elems, 1, 1, repeats)
        two = time_kernel(kernel, n_elems, 2, 2, repeats)
        many = time_kernel(kernel, n_elems, 2, 16, repeats)
        gbs = lambda s: n_elems * bytes_per / s / 1e9  # noqa: E731
        print(f"  {label}")
        print(f"    1 thread               {one * 1e3:8.2f} ms  {gbs(one):6.1f} GB/s")
        print(f"    2 threads, 2 parts     {two * 1e3:8.2f} ms  {gbs(two):6.1f} GB/s"
              f"   speed-up {one / two:4.2f}x")
        print(f"    2 threads, 16 parts    {many * 1e3:8.2f} ms  {gbs(many):6.1f} GB/s"
              f"   speed-up {one / many:4.2f}x")


def bench_inter_op(quick: bool) -> None:
    repeats = 5 if quick else 11
    n = 1 << 22
    print(f"\n== inter-op: two independent iterate_fma f32[4M] launches, 1 partition each "
          f"(median of {repeats}) ==")
    kernel = iterate_fma_kernel()
    dims = LaunchDims(n, 1)
    xs = [np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(2)]
    outs = [runtime.empty(n, np.float32) for _ in range(2)]
    tables = [make_buffer_table([x.ctypes.data, o.ctypes.data]) for x, o in zip(xs, outs)]
    pool = ThreadPool(2, workers=2, name="bench-inter-op")
    streams = [Stream(inter_op_pool=pool) for _ in range(2)]

    def run(stream_of):
        for i in range(2):
            stream_of[i].launch(kernel, dims, tables[i])
        for s in set(stream_of):
            s.block_host_until_done()

    run(streams)
    one = median_seconds(lambda: run([streams[0], streams[0]]), repeats)
    two = median_seconds(lambda: run(streams), repeats)
    print(f"  one stream (serial)     {one * 1e3:8.2f} ms")
    print(f"  two streams (overlap)   {two * 1e3:8.2f} ms   speed-up {one / two:4.2f}x")
    for x, o in zip(xs, outs):
        np.testing.assert_allclose(o, iterate_fma_reference(x), rtol=1e-5, atol=1e-5)


def bench_allocator(quick: bool) -> None:
    repeats = 5 if quick else 11
    n = 1 << 24
    print(f"\n== output buffers: fresh numpy.empty vs runtime.empty, f32[16M] x + 1 "
          f"(median of {repeats}) ==")
    kernel = add_one_kernel()
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    dims = LaunchDims(n, runtime.get_options().intra_op_threads)

    def call(make):
        out = make(n, np.float32)
        launch(kernel, dims, make_buffer_table([x.ctypes.data, out.ctypes.data]))
        return out

    call(runtime.empty)
    fresh = median_seconds(lambda: call(np.empty), repeats)
    cached = median_seconds(lambda: call(runtime.empty), repeats)
    print(f"  numpy.empty output      {fresh * 1e3:8.2f} ms  (page faults on every call)")
    print(f"  runtime.empty output    {cached * 1e3:8.2f} ms  ({fresh / cached:4.2f}x faster)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    desc = runtime.get_platform().executor().description
    options = runtime.get_options()
    print(f"host: {desc.name}, {desc.cores} cores, {desc.vector_width_bits}-bit vectors; "
          f"intra_op_threads={options.intra_op_threads}, "
          f"inter_op_threads={options.inter_op_threads}\n")
    bench_launch_overhead(args.quick)
    bench_intra_op(args.quick)
    bench_inter_op(args.quick)
    bench_allocator(args.quick)


if __name__ == "__main__":
    main()
