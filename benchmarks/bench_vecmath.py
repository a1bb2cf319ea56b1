"""Throughput of backend_cpu.vecmath's math vs per-lane libm calls, numpy and JAX.

    python3 benchmarks/bench_vecmath.py [--dtype f64] [--ops sine,power] [--threads 2]
                                        [--size 4194304] [--repeat 7]

Each opcode runs as a JIT-compiled loop (explicit vectors of 16 f32 / 8 f64
lanes, FTZ/DAZ set) writing into a preallocated output, split into `--threads`
contiguous chunks run in parallel (the kernel call releases the GIL). For f64
the same loop is also built calling scalar libm once per element ("libm"),
which is what vecmath did for erf, sin, cos, tan, atan2 and pow before they
were written in IR. numpy (`out=`, one thread: its ufuncs do not split work)
and JAX's XLA CPU (jit, device-resident input, when installed) run the same
function. Prints the median time as M elements/s and each ratio to xlapy;
checks xlapy's results against numpy. Run by hand, under the benchmark lock;
not a test.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from llvmlite import ir

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from xlapy.backend_cpu.vecmath.standalone import MathKernel, math_kernel  # noqa: E402
from _common import host_line  # noqa: E402

# opcode -> (input range of x, range of y for binary ops, numpy function name, libm name)
CASES = {
    "exponential": ((-80, 80), None, "exp", "exp"),
    "tanh": ((-10, 10), None, "tanh", "tanh"),
    "log": ((1e-3, 1e3), None, "log", "log"),
    "logistic": ((-20, 20), None, None, None),
    "erf": ((-5, 5), None, None, "erf"),
    "sine": ((-100, 100), None, "sin", "sin"),
    "cosine": ((-100, 100), None, "cos", "cos"),
    "tan": ((-100, 100), None, "tan", "tan"),
    "atan2": ((-10, 10), (-10, 10), "arctan2", "atan2"),
    "power": ((0.1, 10), (-30, 30), "power", "pow"),
}
DEFAULT_OPS = {"f32": "exponential,tanh,log,erf", "f64": "erf,sine,cosine,tan,atan2,power"}


def _emit_libm(builder: ir.IRBuilder, opcode: str, args):
    """One scalar libm call per element (f64 only): the pre-vecmath baseline."""
    name = CASES[opcode][3]
    module = builder.module
    fn = module.globals.get(name) or ir.Function(
        module, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()] * len(args)), name=name)
    return builder.call(fn, list(args))


def median_time(fn, repeat: int) -> float:
    fn()                                     # warm up: compile, touch pages
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def parallel(kernel, inputs, out, threads: int, pool):
    """kernel(*inputs, out=out) over `threads` contiguous chunks at once."""
    if threads == 1:
        return lambda: kernel(*inputs, out=out)
    bounds = np.linspace(0, out.size, threads + 1).astype(int)
    chunks = [(tuple(a[lo:hi] for a in inputs), out[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
    return lambda: list(pool.map(lambda c: kernel(*c[0], out=c[1]), chunks))


def _jax_runner(op, inputs):
    try:
        import jax
        import jax.numpy as jnp
        from jax.scipy.special import erf as jax_erf
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    fns = {"erf": jax_erf, "sine": jnp.sin, "cosine": jnp.cos, "tan": jnp.tan,
           "atan2": jnp.arctan2, "power": jnp.power, "exponential": jnp.exp,
           "tanh": jnp.tanh, "log": jnp.log, "logistic": jax.nn.sigmoid}
    fn = jax.jit(fns[op])
    device_inputs = [jax.device_put(a) for a in inputs]
    return lambda: fn(*device_inputs).block_until_ready()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["f32", "f64"], default="f64")
    parser.add_argument("--size", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ops", default=None, help=f"comma-separated, from {','.join(CASES)}")
    parser.add_argument("--no-jax", action="store_true")
    args = parser.parse_args(argv)
    dtype = np.float32 if args.dtype == "f32" else np.float64
    ops = (args.ops or DEFAULT_OPS[args.dtype]).split(",")
    for op in ops:
        if op not in CASES:
            parser.error(f"unknown op {op!r}; choose from {', '.join(CASES)}")
    rng = np.random.default_rng(0)
    print(host_line())
    print(f"{args.dtype}[{args.size}], xlapy and libm on {args.threads} thread(s), "
          f"median of {args.repeat}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'opcode':<12}{'xlapy M/s':>11}{'libm M/s':>10}{'numpy M/s':>11}{'jax M/s':>9}"
          f"{'vs libm':>9}{'vs numpy':>10}{'vs jax':>8}{'max rel.diff':>13}")
    pool = ThreadPoolExecutor(args.threads)
    inputs = {op: _inputs(op, dtype, args.size, rng) for op in ops}
    rates, diffs = {}, {}
    for op in ops:
        rates[op], diffs[op] = _measure_ours(op, dtype, inputs[op], args, pool)
    pool.shutdown()
    # JAX last: its thread pool keeps spinning for a while after each call,
    # which would slow down whatever is measured next.
    for op in ops:
        runner = None if args.no_jax else _jax_runner(op, inputs[op])
        if runner:
            rates[op]["jax"] = args.size / median_time(runner, args.repeat)
    for op in ops:
        rate, ours = rates[op], rates[op]["xlapy"]
        cells = [f"{rate[k] / 1e6:>{w}.0f}" if k in rate else f"{'-':>{w}}"
                 for k, w in (("xlapy", 11), ("libm", 10), ("numpy", 11), ("jax", 9))]
        ratios = [f"{ours / rate[k]:>{w}.1f}x" if k in rate else f"{'-':>{w + 1}}"
                  for k, w in (("libm", 8), ("numpy", 9), ("jax", 7))]
        print(f"{op:<12}" + "".join(cells) + "".join(ratios) + f"{diffs[op]:>13}")


def _inputs(op, dtype, size, rng):
    x_range, y_range, _, _ = CASES[op]
    arrays = [rng.uniform(*x_range, size).astype(dtype)]
    if y_range:
        arrays.append(rng.uniform(*y_range, size).astype(dtype))
    return arrays


def _measure_ours(op, dtype, inputs, args, pool):
    """({"xlapy", "libm", "numpy": elements/s}, max relative difference to numpy)."""
    rate = {}
    out = np.empty_like(inputs[0])
    kernel = math_kernel(op, dtype, 16 if dtype == np.float32 else 8)
    rate["xlapy"] = args.size / median_time(parallel(kernel, inputs, out, args.threads, pool),
                                            args.repeat)
    if dtype == np.float64 and CASES[op][3]:
        libm = MathKernel(op, dtype, None, emit=_emit_libm)
        rate["libm"] = args.size / median_time(
            parallel(libm, inputs, np.empty_like(out), args.threads, pool), args.repeat)
    numpy_name = CASES[op][2]
    if not numpy_name:
        return rate, "n/a"
    out_np = np.empty_like(out)
    ufunc = getattr(np, numpy_name)
    with np.errstate(all="ignore"):
        rate["numpy"] = args.size / median_time(lambda: ufunc(*inputs, out=out_np), args.repeat)
    finite = np.isfinite(out_np)
    relative = np.abs(out[finite] - out_np[finite]) / np.abs(out_np[finite])
    return rate, f"{np.max(relative, initial=0.0, where=out_np[finite] != 0):.1e}"


if __name__ == "__main__":
    main()
