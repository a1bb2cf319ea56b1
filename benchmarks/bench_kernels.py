"""In-place and data-movement kernels of training steps, side by side: xlapy on 1 and 2
threads, numpy and JAX (XLA CPU).

Run by hand from the repository root (not part of the test suite):

    python3 benchmarks/bench_kernels.py                       # every row, full size
    python3 benchmarks/bench_kernels.py --small               # tiny shapes: a smoke run
    python3 benchmarks/bench_kernels.py --only embedding_grad --repeat 5

The rows are kernels that are not fusions of elementwise math:

- `embedding_grad`: the gradient of an embedding lookup, a scatter-add of
  f32[65536,256] update rows into a [32768,256] table at random row ids
  (duplicates included);
- `maxpool_grad`: the gradient of a 3x3 stride-2 max-pool (SAME padding) on
  f32[32,112,112,64], a select-and-scatter with a GE select and an add scatter;
- `transpose_batched`: f32[16,1024,1024] with its two minor dimensions swapped;
- `head_shuffle`: attention's f32[8,512,16,64] -> [8,16,512,64] (B,S,H,D -> B,H,S,D).

xlapy compiles the HLO text of each row (the default pipeline), once per thread
count (`runtime.configure(intra_op_threads=...)` at link time), and runs it numpy
in, numpy out (on 2 threads it also prints the busiest thread's CPU time per call,
the figure that holds on a busy machine). JAX gets device-resident inputs and is timed up to
`block_until_ready()`. Times are medians over `--repeat` runs after one warm-up
run. Every result is checked against numpy; a wrong one ends the run with exit
status 1 after the table. The machine has 2 cores and is often shared: note the
load average the script prints, and repeat the run.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (CheckError, fmt_ms, fmt_ratio, host_line, import_jax,  # noqa: E402
                     load_average, timed_ms)

_ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ge {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT c = pred[] compare(p, q), direction=GE
}
"""


# --- the rows: HLO text, inputs, numpy's and JAX's spelling -----------------------------------
def embedding_hlo(v, d, n):
    return f"""HloModule embedding_grad
{_ADD}
ENTRY e {{
  table = f32[{v},{d}] parameter(0)
  ids = s32[{n}] parameter(1)
  upd = f32[{n},{d}] parameter(2)
  ROOT r = f32[{v},{d}] scatter(table, ids, upd), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add
}}
"""


def embedding_inputs(rng, v, d, n):
    return [np.zeros((v, d), np.float32), rng.integers(0, v, n, dtype=np.int32),
            rng.standard_normal((n, d), dtype=np.float32)]


def embedding_numpy(table, ids, upd):
    out = table.copy()
    np.add.at(out, ids, upd)
    return out


def maxpool_padding(size):
    """SAME padding of a 3x3 stride-2 window: (low, high) and the output size."""
    out = -(-size // 2)
    total = max((out - 1) * 2 + 3 - size, 0)
    return (total // 2, total - total // 2), out


def maxpool_hlo(n, h, w, c):
    (hl, hh), oh = maxpool_padding(h)
    (wl, wh), ow = maxpool_padding(w)
    return f"""HloModule maxpool_grad
{_ADD}
ENTRY e {{
  x = f32[{n},{h},{w},{c}] parameter(0)
  g = f32[{n},{oh},{ow},{c}] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[{n},{h},{w},{c}] select-and-scatter(x, g, z), window={{size=1x3x3x1 stride=1x2x2x1 pad=0_0x{hl}_{hh}x{wl}_{wh}x0_0}}, select=ge, scatter=add
}}
"""


def maxpool_inputs(rng, n, h, w, c):
    oh, ow = maxpool_padding(h)[1], maxpool_padding(w)[1]
    return [rng.standard_normal((n, h, w, c), dtype=np.float32),
            rng.standard_normal((n, oh, ow, c), dtype=np.float32)]


def maxpool_numpy(x, g):
    """The first maximum of each window (GE select) receives the window's gradient."""
    n, h, w, c = x.shape
    (hl, hh), oh = maxpool_padding(h)
    (wl, wh), ow = maxpool_padding(w)
    padded = np.pad(x, ((0, 0), (hl, hh), (wl, wh), (0, 0)), constant_values=-np.inf)
    taps = np.stack([padded[:, i:i + 2 * oh:2, j:j + 2 * ow:2, :]
                     for i in range(3) for j in range(3)], axis=-1)
    best = np.argmax(taps, axis=-1)                     # first maximum: ties go to the first
    row = np.arange(oh)[None, :, None, None] * 2 + best // 3 - hl
    col = np.arange(ow)[None, None, :, None] * 2 + best % 3 - wl
    flat = ((np.arange(n)[:, None, None, None] * h + row) * w + col) * c \
        + np.arange(c)[None, None, None, :]
    out = np.zeros(x.size, np.float32)
    np.add.at(out, flat.ravel(), g.ravel())
    return out.reshape(x.shape)


def transpose_hlo(dims, perm):
    out = [dims[p] for p in perm]
    fmt = lambda ds: ",".join(map(str, ds))       # noqa: E731
    return f"""HloModule transpose
ENTRY e {{
  x = f32[{fmt(dims)}] parameter(0)
  ROOT t = f32[{fmt(out)}] transpose(x), dimensions={{{fmt(perm)}}}
}}
"""


@dataclass(frozen=True)
class Row:
    name: str
    title: str
    hlo: Callable              # hlo(*size) -> HLO text
    inputs: Callable           # inputs(rng, *size) -> arrays
    numpy_fn: Callable         # numpy_fn(*arrays) -> the expected array
    jax_fn: Callable           # jax_fn(jax, jnp) -> a function of the arrays
    size: tuple
    small: tuple


def _jax_embedding(jax, jnp):
    return lambda t, i, u: t.at[i].add(u)


def _jax_maxpool(jax, jnp):
    def grad(x, g):
        pool = lambda v: jax.lax.reduce_window(v, -jnp.inf, jax.lax.max, (1, 3, 3, 1),  # noqa
                                               (1, 2, 2, 1), "SAME")
        return jax.vjp(pool, x)[1](g)[0]
    return grad


def _transpose_row(name, title, dims, perm, small_dims):
    return Row(name, title, lambda *d: transpose_hlo(d, perm),
               lambda rng, *d: [rng.standard_normal(d, dtype=np.float32)],
               lambda x: np.ascontiguousarray(x.transpose(perm)),
               lambda jax, jnp: lambda x: jnp.transpose(x, perm), dims, small_dims)


ROWS = [
    Row("embedding_grad", "scatter-add f32[65536,256] -> [32768,256]", embedding_hlo,
        embedding_inputs, embedding_numpy, _jax_embedding, (32768, 256, 65536), (64, 32, 256)),
    Row("maxpool_grad", "max-pool 3x3/2 grad f32[32,112,112,64]", maxpool_hlo, maxpool_inputs,
        maxpool_numpy, _jax_maxpool, (32, 112, 112, 64), (2, 12, 12, 16)),
    _transpose_row("transpose_batched", "transpose f32[16,1024,1024] {0,2,1}",
                   (16, 1024, 1024), (0, 2, 1), (2, 64, 32)),
    _transpose_row("head_shuffle", "transpose f32[8,512,16,64] {0,2,1,3}",
                   (8, 512, 16, 64), (0, 2, 1, 3), (2, 8, 4, 16)),
]
BY_NAME = {r.name: r for r in ROWS}


# --- running ----------------------------------------------------------------------------------
def check(label: str, got, expected) -> None:
    """Within f32 rounding of numpy's result (the scatter orders agree: exact in practice)."""
    got = np.asarray(got)
    if got.shape != expected.shape:
        raise CheckError(f"{label}: shape {got.shape}, expected {expected.shape}")
    if not np.allclose(got, expected, rtol=2e-5, atol=1e-5):
        bad = float(np.max(np.abs(got.astype(np.float64) - expected)))
        raise CheckError(f"{label}: max error {bad:.3g}")


def xlapy_ms(row: Row, text: str, inputs, expected, threads: int, repeat: int):
    from xlapy import backend_cpu
    from xlapy import hlo
    from xlapy import runtime
    previous = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=threads)
    try:             # partitions are fixed when the executable links: compile per count
        exe = backend_cpu.compile(hlo.parse_module(text),
                                  backend_cpu.CompileOptions(pipeline="default", cache=False))
    finally:
        runtime.configure(intra_op_threads=previous)
    check(f"xlapy ({threads} threads)", exe.run(*inputs)[0], expected)
    return timed_ms(lambda: exe.run(*inputs), repeat)


def jax_ms(jax, jnp, row: Row, inputs, expected, repeat: int):
    fn = jax.jit(row.jax_fn(jax, jnp))
    device = [jax.device_put(x) for x in inputs]
    check("XLA", np.asarray(fn(*device)), expected)
    return timed_ms(lambda: fn(*device).block_until_ready(), repeat)


def run_row(row: Row, args, jax, jnp) -> bool:
    size = row.small if args.small else row.size
    inputs = row.inputs(np.random.default_rng(0), *size)
    expected = row.numpy_fn(*inputs)
    text = row.hlo(*size)
    times, error = {}, ""
    try:
        for threads in (1, 2):
            times[threads] = xlapy_ms(row, text, inputs, expected, threads, args.repeat)
        times["numpy"] = timed_ms(lambda: row.numpy_fn(*inputs), min(args.repeat, 3))
        if jax is not None:
            times["xla"] = jax_ms(jax, jnp, row, inputs, expected, args.repeat)
    except CheckError as e:
        error = f"WRONG {e}"
    t1, t2, xla = [getattr(times.get(k), "wall", None) for k in (1, 2, "xla")]
    busy = getattr(times.get(2), "busiest", None)
    title = row.title if not args.small else f"{row.name} {size} (--small)"
    print(f"{title:<44}{fmt_ms(t1):>9}{fmt_ms(t2):>9}{fmt_ms(busy):>9}{fmt_ratio(t1, t2):>7}"
          f"{fmt_ms(getattr(times.get('numpy'), 'wall', None)):>9}{fmt_ms(xla):>9}"
          f"{fmt_ratio(t2, xla):>7}", flush=True)
    if error:
        print(f"{'':<44}  !! {error}", flush=True)
    return not error


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help=f"comma-separated, from {','.join(BY_NAME)}")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="tiny shapes: a smoke run")
    parser.add_argument("--no-jax", action="store_true", help="skip the XLA column")
    args = parser.parse_args(argv)
    args.names = [n for n in args.only.split(",") if n] or list(BY_NAME)
    for n in args.names:
        if n not in BY_NAME:
            parser.error(f"unknown row {n!r}; choose from {', '.join(BY_NAME)}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    jax, jnp = (None, None) if args.no_jax else import_jax()
    print(host_line())
    print(f"{load_average()}; median of {args.repeat}{'; SMALL shapes' if args.small else ''}")
    print(f"JAX {jax.__version__} on {jax.devices()[0]}" if jax else "JAX not importable: "
          "no XLA column (pip install jax jaxlib)")
    print(f"{'kernel':<44}{'1 thr':>9}{'2 thr':>9}{'2t busy':>9}{'1/2':>7}{'numpy':>9}"
          f"{'XLA':>9}{'2t/XLA':>7}  (ms; '2t busy': the busiest thread's CPU time per call "
          f"on 2 threads, about the wall time on an idle machine)")
    ok = all([run_row(BY_NAME[name], args, jax, jnp) for name in args.names])
    print(load_average())
    if not ok:
        print("bench_kernels: some results were WRONG (see '!!' lines)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
