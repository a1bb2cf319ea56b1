"""Benchmark of the IR GEMM (backend_cpu/gemm.py) on f32 matmuls, run by hand:

    python3 benchmarks/bench_gemm.py [--sizes 1024 2048] [--repeat 7]

For each size it JIT-compiles one kernel, runs it on 1 and 2 threads (row partitions
launched from a ThreadPoolExecutor; ctypes releases the GIL while the kernel runs),
and prints median times, GFLOP/s, the share of the machine's FMA peak, numpy's time
(OpenBLAS) and XLA CPU's time as measured in issue 9, and checks the result.
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import llvmlite.binding as llvm  # noqa: E402
from llvmlite import ir  # noqa: E402

from backend_cpu import llvm_target  # noqa: E402
from backend_cpu.gemm import emit_gemm, gemm_partitions  # noqa: E402

# 2 Zen 5 cores x 2 FMA pipes x 16 f32 lanes x 2 flops x ~4 GHz (issue 9's figure).
PEAK_GFLOPS_2_CORES = 500.0
# XLA CPU (JAX, device-resident inputs) on this machine, from issue 9, in ms.
XLA_MS = {1024: 8.2, 2048: 62.0}
KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64, ctypes.c_int64)


def compile_matmul(n: int):
    """(engine, ctypes kernel) for f32 [n, n] @ [n, n], both row-major."""
    module = ir.Module(name=f"matmul{n}")
    emit_gemm(module, "matmul", lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32",
              m=n, n=n, k=n, lhs_strides=(n, 1), rhs_strides=(n, 1))
    ref = llvm_target.parse_and_verify(str(module))
    llvm_target.optimize(ref)
    # MCJIT owns (and frees) the machine it is given: not the cached host machine.
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=3, codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(ref, machine)
    engine.finalize_object()
    return engine, KERNEL(engine.get_function_address("matmul"))


def row_bounds(m: int, parts: int, multiple: int = 14) -> list[tuple[int, int]]:
    """`parts` row ranges of nearly equal size, cut at multiples of the micro-tile height."""
    cuts = [min(m, round(m * i / parts / multiple) * multiple) for i in range(parts)] + [m]
    return list(zip(cuts, cuts[1:]))


def median_ms(fn, repeat: int) -> float:
    fn()   # warm-up: page faults, caches, thread start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def bench_size(n: int, repeat: int, pool: ThreadPoolExecutor) -> None:
    start = time.perf_counter()
    engine, kernel = compile_matmul(n)
    compile_ms = (time.perf_counter() - start) * 1e3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    flops = 2.0 * n ** 3
    numpy_ms = median_ms(lambda: a @ b, repeat)
    print(f"matmul f32 {n}^3  (compile {compile_ms:.0f} ms; numpy {numpy_ms:.2f} ms; "
          f"XLA CPU {XLA_MS.get(n, float('nan'))} ms per issue 9)")
    for threads in (1, 2):
        parts = min(threads, gemm_partitions(n, n, n, threads))
        bounds = row_bounds(n, parts)

        def run():
            list(pool.map(lambda r: kernel(a.ctypes.data, b.ctypes.data, c.ctypes.data, *r),
                          bounds))
        ms = median_ms(run, repeat)
        gflops = flops / ms / 1e6
        print(f"  {threads} thread(s): {ms:7.2f} ms  {gflops:6.1f} GFLOP/s  "
              f"{100 * gflops / PEAK_GFLOPS_2_CORES:5.1f}% of 2-core peak  "
              f"{100 * gflops / (PEAK_GFLOPS_2_CORES * threads / 2):5.1f}% of {threads}-core peak  "
              f"xlapy/numpy {ms / numpy_ms:.2f}  xlapy/XLA {ms / XLA_MS.get(n, float('nan')):.2f}")
    expected = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    worst = float(np.max(np.abs(c - expected) / scale))
    print(f"  max error / sum|a||b| = {worst:.2e}  {'ok' if worst < 1e-5 else 'WRONG'}")
    del engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with ThreadPoolExecutor(max_workers=2) as pool:
        for n in args.sizes:
            bench_size(n, args.repeat, pool)


if __name__ == "__main__":
    main()
