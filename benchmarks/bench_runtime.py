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

from xlapy import runtime  # noqa: E402
from _common import host_line  # noqa: E402
from xlapy.runtime import LaunchDims, Stream, ThreadPool, launch, make_buffer_table  # noqa: E402
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
    print(host_line())
    print("== launch overhead: x + 1 on f32[4] (per call, median) ==")
    kernel = add_one_kernel()
    x = np.arange(4, dtype=np.float32)
    out = runtime.empty(4, np.float32)
    table = make_buffer_table([x.ctypes.data, out.ctypes.data])
    address = ctypes.addressof(table)
    dims = LaunchDims(4, 1)
    executor = runtime.get_platform().executor()
    inline, queued = executor.create_stream(inline=True), executor.create_stream()

    x_address = x.ctypes.data
    table_type = ctypes.c_void_p * 2

    def full_call():
        # What a lean compiled executable pays per call: a fresh output from the
        # cache, a buffer table, the launch.
        result, result_address = runtime.empty_with_address(4, np.float32)
        launch(kernel, dims, table_type(x_address, result_address))
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


def interleaved(fns: dict, repeats: int) -> dict:
    """Times each fn once per round, rounds alternating, so that background load
    hits every variant alike. Returns {name: (median, best)} in seconds."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(t), min(t)) for name, t in times.items()}


def bench_intra_op(quick: bool) -> None:
    n = 1 << 24
    repeats = 7 if quick else 21
    print(f"\n== intra-op scaling: 2 threads vs 1 on one launch ({repeats} interleaved rounds; "
          f"median / best) ==")
    pools = {1: ThreadPool(1, name="bench-1"), 2: ThreadPool(2, name="bench-2")}
    for label, kernel, n_elems in [
            ("add_one f32[16M] (memory-bound, 128 MiB moved)", add_one_kernel(), n),
            ("iterate_fma f32[4M] (compute-bound)", iterate_fma_kernel(), n // 4)]:
        x = np.random.default_rng(0).standard_normal(n_elems).astype(np.float32)
        out = runtime.empty(n_elems, np.float32)
        table = make_buffer_table([x.ctypes.data, out.ctypes.data])
        variants = {(threads, parts): (lambda p=pools[threads], d=LaunchDims(n_elems, parts):
                                       launch(kernel, d, table, pool=p))
                    for threads, parts in [(1, 1), (2, 2), (2, 16)]}
        for fn in variants.values():
            fn()                                  # warm up: page in, wake the workers
        result = interleaved(variants, repeats)
        base_median, base_best = result[(1, 1)]
        print(f"  {label}")
        for (threads, parts), (median, best) in result.items():
            gbs = n_elems * 8 / best / 1e9
            line = (f"    {threads} thread(s), {parts:2d} partitions  {median * 1e3:7.2f} / "
                    f"{best * 1e3:7.2f} ms  ({gbs:5.1f} GB/s best)")
            if threads > 1:
                line += f"  speed-up {base_median / median:4.2f}x / {base_best / best:4.2f}x"
            print(line)
    for pool in pools.values():
        pool.shutdown()


def bench_inter_op(quick: bool) -> None:
    repeats = 7 if quick else 21
    n = 1 << 22
    print(f"\n== inter-op: two independent iterate_fma f32[4M] launches, 1 partition each "
          f"({repeats} interleaved rounds; median / best) ==")
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
    result = interleaved({"one": lambda: run([streams[0], streams[0]]),
                          "two": lambda: run(streams)}, repeats)
    (one, one_best), (two, two_best) = result["one"], result["two"]
    print(f"  one stream (serial)     {one * 1e3:8.2f} / {one_best * 1e3:8.2f} ms")
    print(f"  two streams (overlap)   {two * 1e3:8.2f} / {two_best * 1e3:8.2f} ms   "
          f"speed-up {one / two:4.2f}x / {one_best / two_best:4.2f}x")
    for x, o in zip(xs, outs):
        np.testing.assert_allclose(o, iterate_fma_reference(x), rtol=1e-5, atol=1e-5)


def bench_allocator(quick: bool) -> None:
    repeats = 7 if quick else 21
    n = 1 << 24
    print(f"\n== output buffers: fresh numpy.empty vs runtime.empty, f32[16M] x + 1 "
          f"({repeats} interleaved rounds; median / best) ==")
    kernel = add_one_kernel()
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    dims = LaunchDims(n, runtime.get_options().intra_op_threads)

    def call(make):
        out = make(n, np.float32)
        launch(kernel, dims, make_buffer_table([x.ctypes.data, out.ctypes.data]))
        return out

    call(runtime.empty)
    result = interleaved({"fresh": lambda: call(np.empty), "cached": lambda: call(runtime.empty)},
                         repeats)
    (fresh, fresh_best), (cached, cached_best) = result["fresh"], result["cached"]
    print(f"  numpy.empty output      {fresh * 1e3:8.2f} / {fresh_best * 1e3:8.2f} ms"
          f"  (pages fault in on every call)")
    print(f"  runtime.empty output    {cached * 1e3:8.2f} / {cached_best * 1e3:8.2f} ms"
          f"  ({fresh / cached:4.2f}x / {fresh_best / cached_best:4.2f}x faster)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    desc = runtime.get_platform().executor().description
    options = runtime.get_options()
    load = os.getloadavg()[0]
    print(f"host: {desc.name}, {desc.cores} cores, {desc.vector_width_bits}-bit vectors; "
          f"intra_op_threads={options.intra_op_threads}, "
          f"inter_op_threads={options.inter_op_threads}; load average {load:.2f} "
          f"(other processes skew the numbers: compare the 'best' columns)\n")
    bench_launch_overhead(args.quick)
    bench_intra_op(args.quick)
    bench_inter_op(args.quick)
    bench_allocator(args.quick)


if __name__ == "__main__":
    main()
