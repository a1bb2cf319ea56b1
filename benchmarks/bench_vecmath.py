"""Throughput of backend_cpu.vecmath's f32 math vs numpy, one thread.

    python3 benchmarks/bench_vecmath.py [--size 16777216] [--repeat 7] [--ops exponential,tanh]

Each opcode runs as a JIT-compiled loop (explicit 16-lane vectors, FTZ/DAZ set)
over an f32 array, writing into a preallocated output, and so does numpy
(`out=`), so neither pays page faults for fresh memory. Prints the median
time and G elements/s of both and the speed ratio. Run by hand; not a test.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from backend_cpu.vecmath_kernel import math_kernel  # noqa: E402

# opcode -> (input range, numpy function(*inputs, out), or None when numpy has none)
CASES = {
    "exponential": ((-80, 80), lambda x, out: np.exp(x, out=out)),
    "tanh": ((-10, 10), lambda x, out: np.tanh(x, out=out)),
    "log": ((1e-3, 1e3), lambda x, out: np.log(x, out=out)),
    "erf": ((-5, 5), None),
    "logistic": ((-20, 20), lambda x, out: np.divide(1, 1 + np.exp(-x), out=out)),
    "sine": ((-100, 100), lambda x, out: np.sin(x, out=out)),
    "power": ((0.1, 10), lambda x, y, out: np.power(x, y, out=out)),
}


def median_time(fn, repeat: int) -> float:
    fn()                                     # warm up: compile, touch pages
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--ops", default="exponential,tanh,log,erf",
                        help=f"comma-separated, from {','.join(CASES)}")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"f32[{args.size}], 1 thread, median of {args.repeat}")
    print(f"{'opcode':<14}{'xlapy ms':>10}{'G/s':>8}{'numpy ms':>10}{'G/s':>8}{'speedup':>9}")
    for op in args.ops.split(","):
        if op not in CASES:
            parser.error(f"unknown op {op!r}; choose from {', '.join(CASES)}")
        (lo, hi), numpy_fn = CASES[op]
        x = rng.uniform(lo, hi, args.size).astype(np.float32)
        y = rng.uniform(0.5, 3, args.size).astype(np.float32)
        out = np.empty_like(x)
        kernel = math_kernel(op, np.float32, 16)
        inputs = (x, y) if kernel.arity == 2 else (x,)
        t_ours = median_time(lambda: kernel(*inputs, out=out), args.repeat)
        line = f"{op:<14}{t_ours * 1e3:>10.2f}{args.size / t_ours / 1e9:>8.2f}"
        if numpy_fn is None:
            print(line + f"{'n/a':>10}{'':>8}{'':>9}")
            continue
        out_np = np.empty_like(x)
        with np.errstate(all="ignore"):
            t_np = median_time(lambda: numpy_fn(*inputs, out_np), args.repeat)
        print(line + f"{t_np * 1e3:>10.2f}{args.size / t_np / 1e9:>8.2f}{t_np / t_ours:>8.1f}x")


if __name__ == "__main__":
    main()
