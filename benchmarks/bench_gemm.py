"""Benchmark of the IR GEMM (backend_cpu/gemm/packed_gemm.py) on f32 matmuls, run by hand:

    python3 benchmarks/bench_gemm.py [--shapes 1024 2048 256x4096x1024] [--repeat 7]

A shape is N (an N^3 matmul) or MxNxK. The defaults are issue 9's two matmuls and
the two matmuls of its MLP row. For each shape it JIT-compiles one kernel, runs it
on 1 and 2 threads (row partitions launched from a ThreadPoolExecutor; ctypes
releases the GIL while the kernel runs), and prints median times, GFLOP/s, the share of the machine's FMA peak, numpy's time
(OpenBLAS) and XLA CPU's time as measured in issue 9, and checks the result. The
slowest thread's CPU time is printed too: on a busy machine it still shows what the
kernel achieves when it gets the cores.

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, when set on this machine, slow numpy's matmul;
for a fair numpy column run `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 ...`.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llvmlite import ir  # noqa: E402

from xlapy.backend_cpu import disk_cache  # noqa: E402
from xlapy.backend_cpu.gemm import library  # noqa: E402
from xlapy.backend_cpu.llvm import target_machine  # noqa: E402
from _common import host_line  # noqa: E402
from xlapy.backend_cpu.gemm.packed_gemm import (emit_gemm, gemm_partitions, gemm_row_split,  # noqa: E402
                              gemm_scratch_bytes)

# 2 Zen 5 cores x 2 FMA pipes x 16 f32 lanes x 2 flops x ~4 GHz (issue 9's figure).
PEAK_GFLOPS_2_CORES = 500.0
# XLA CPU (JAX, device-resident inputs) on this machine, from issue 9, in ms.
XLA_MS = {(1024, 1024, 1024): 8.2, (2048, 2048, 2048): 62.0}
DEFAULT_SHAPES = ["1024", "2048", "256x4096x1024", "256x1024x4096"]
KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)


def compile_matmul(m: int, n: int, k: int):
    """(engine, kernel(a, b, c, m_begin, m_end)) for f32 [m, k] @ [k, n], both row-major
    (the kernel takes data addresses; each thread packs into its own scratch)."""
    module = ir.Module(name=f"matmul{m}x{n}x{k}")
    args = dict(lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32", m=m, n=n, k=k,
                lhs_strides=(k, 1), rhs_strides=(n, 1))
    emit_gemm(module, "matmul", **args)
    library.ensure_compiled(library.routines_in(module), disk_cache)
    jit = target_machine.jit_compile(str(module))
    kernel, nbytes = KERNEL(jit.lookup("matmul")), gemm_scratch_bytes(**args)
    scratch = threading.local()       # packing memory: one block per thread, reused

    def call(a, b, c, m_begin, m_end):
        if not hasattr(scratch, "block"):
            scratch.block = np.zeros(nbytes + 64, np.uint8)
        address = scratch.block.ctypes.data
        kernel(a, b, c, m_begin, m_end, address + (-address) % 64 if nbytes else None)
    return jit, call


def median_ms(fn, repeat: int) -> float:
    """Median wall time of fn() in ms, after one warm-up call (page faults, threads)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def run_partitions(pool, kernel, a, b, c, bounds) -> float:
    """Runs the row partitions in parallel; returns the longest partition's CPU time
    (ms), which, unlike wall time, other processes on a shared machine barely change."""
    def one(rows):
        start = time.thread_time()
        kernel(a.ctypes.data, b.ctypes.data, c.ctypes.data, *rows)
        return time.thread_time() - start
    return max(pool.map(one, bounds)) * 1e3


def parse_shape(text: str) -> tuple[int, int, int]:
    dims = [int(d) for d in text.lower().split("x")]
    if len(dims) == 1:
        return dims[0], dims[0], dims[0]
    if len(dims) != 3:
        raise SystemExit(f"bench_gemm: shape {text!r} is neither N nor MxNxK")
    return dims[0], dims[1], dims[2]


def bench_shape(shape: tuple[int, int, int], repeat: int, pool: ThreadPoolExecutor) -> None:
    m, n, k = shape
    start = time.perf_counter()
    engine, kernel = compile_matmul(m, n, k)
    compile_ms = (time.perf_counter() - start) * 1e3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    flops = 2.0 * m * n * k
    xla_ms = XLA_MS.get(shape, float("nan"))
    numpy_ms = median_ms(lambda: a @ b, repeat)
    print(f"matmul f32 {m}x{n}x{k}  (compile {compile_ms:.0f} ms; numpy {numpy_ms:.2f} ms; "
          f"XLA CPU {xla_ms} ms per issue 9)")
    for threads in (1, 2):
        bounds = gemm_row_split(m, min(threads, gemm_partitions(m, n, k, threads)))

        cpu_times = []

        def run():
            cpu_times.append(run_partitions(pool, kernel, a, b, c, bounds))
        ms = median_ms(run, repeat)
        cpu_ms = statistics.median(cpu_times)
        gflops = flops / ms / 1e6
        print(f"  {threads} thread(s): {ms:7.2f} ms  {gflops:6.1f} GFLOP/s  "
              f"{100 * gflops / PEAK_GFLOPS_2_CORES:5.1f}% of 2-core peak  "
              f"{100 * gflops / (PEAK_GFLOPS_2_CORES * threads / 2):5.1f}% of {threads}-core peak  "
              f"xlapy/numpy {ms / numpy_ms:.2f}  xlapy/XLA {ms / xla_ms:.2f}  "
              f"[slowest thread's CPU time {cpu_ms:.2f} ms = {flops / cpu_ms / 1e6:.0f} GFLOP/s]")
    expected = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    worst = float(np.max(np.abs(c - expected) / scale))
    print(f"  max error / sum|a||b| = {worst:.2e}  {'ok' if worst < 1e-5 else 'WRONG'}")
    del engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    loadavg = Path("/proc/loadavg")
    load = " ".join(loadavg.read_text().split()[:3]) if loadavg.exists() else "?"
    blas_env = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    note = f"; {', '.join(blas_env)} set (numpy may be slow)" if blas_env else ""
    print(host_line())
    print(f"load average {load}{note}")
    with ThreadPoolExecutor(max_workers=2) as pool:
        for shape in args.shapes:
            bench_shape(parse_shape(shape), args.repeat, pool)


if __name__ == "__main__":
    main()
