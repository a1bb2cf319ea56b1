"""A data-parallel training step: 2 replicas of 1 thread each vs 1 replica of 2 threads.

Run by hand from the repository root (not part of the test suite):

    python3 benchmarks/bench_data_parallel.py              # MLP 512-1024-1024-10, batch 256
    python3 benchmarks/bench_data_parallel.py --small      # smoke run: a small MLP, 3 repeats
    python3 benchmarks/bench_data_parallel.py --batch 512 --hidden 2048 --repeat 15

Both rows run one SGD step of the same MLP (softmax cross-entropy, forward,
backward, update: one compiled module) on the same global batch:

    1 replica x 2 threads   jit_compile(step, intra_op_threads=2) on the whole batch
    2 replicas x 1 thread   MirroredStrategy(num_replicas=2, intra_op_threads=1): each
                            replica takes half the batch, gradients averaged by bucketed
                            all-reduce-start/-done pairs (frontend/distribute.py)

Issue 16's target: the 2-replica step no slower than the 1-replica step (ratio <= 1.00).
A third row runs the 1-replica step compiled for one thread on each half of the batch,
in two threads at once, with no all-reduce: the replicas' work without the exchange.
Columns: median wall ms per step, process CPU ms per step, the ratio to the first row.
The updated parameters of the two rows are checked against each other (f32, rtol 1e-4
relative to the largest parameter: two reduction orders); a mismatch prints `!!` and
exits with status 1. `--backend interpreter` runs the reference evaluator instead of
the CPU backend (a check that the script works; its times mean nothing).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import fmt_ms, load_average, timed_ms  # noqa: E402


def header() -> str:
    try:
        from _common import host_line
        return host_line()
    except Exception as exc:  # noqa: BLE001 - the header must not stop the benchmark
        return f"host: ({type(exc).__name__} reading the target: {exc})"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=256, help="the global batch")
    p.add_argument("--features", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--bucket-bytes", type=int, default=None)
    p.add_argument("--backend", choices=("cpu", "interpreter"), default="cpu")
    p.add_argument("--small", action="store_true", help="a small MLP and 3 repeats")
    args = p.parse_args(argv)
    if args.small:
        args.batch, args.features, args.hidden, args.repeat = 64, 32, 64, 3
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from xlapy.frontend import distribute, jit_compile, ops, value_and_grad

    sizes = [args.features, args.hidden, args.hidden, args.classes]
    rng = np.random.default_rng(0)
    params = {}
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = (rng.standard_normal((m, n)) * np.sqrt(2 / m)).astype(np.float32)
        params[f"b{i}"] = np.zeros(n, np.float32)
    x = rng.standard_normal((args.batch, args.features)).astype(np.float32)
    labels = rng.integers(0, args.classes, args.batch).astype(np.int32)
    lr = np.float32(0.01)

    def loss_fn(params, x, labels):
        h = x
        for i in range(len(sizes) - 1):
            h = ops.bias_add(ops.matmul(h, params[f"w{i}"]), params[f"b{i}"])
            if i < len(sizes) - 2:
                h = ops.relu(h)
        return ops.reduce_mean(ops.sparse_softmax_cross_entropy_with_logits(labels, h))

    def single_step(params, x, labels, lr):
        loss, grads = value_and_grad(loss_fn)(params, x, labels)
        return {k: params[k] - lr * grads[k] for k in params}, loss

    def replica_step(params, x, labels, lr):
        loss, grads = distribute.value_and_grad(loss_fn)(params, x, labels)
        return {k: params[k] - lr * grads[k] for k in params}, loss

    print(header())
    print(load_average())
    print(f"MLP {'-'.join(map(str, sizes))}, global batch {args.batch}, f32, "
          f"backend {args.backend}")
    single = jit_compile(single_step, intra_op_threads=2, backend=args.backend)
    strategy = distribute.MirroredStrategy(num_replicas=2, intra_op_threads=1,
                                           backend=args.backend,
                                           bucket_bytes=args.bucket_bytes)
    shards = strategy.distribute_batch((x, labels))
    want, _ = single(params, x, labels, lr)
    got, _ = strategy.run(replica_step, args=(params, *shards, lr))

    status = 0
    scale = max(float(np.max(np.abs(v))) for v in want.values())
    for k in params:
        for r, value in enumerate(got[k].values):
            err = float(np.max(np.abs(value - want[k])))
            if not err <= 1e-4 * scale:
                print(f"!! {k} on replica {r}: max difference {err:.3g} from the 1-replica step")
                status = 1

    rows = [("1 replica x 2 threads", lambda: single(params, x, labels, lr)),
            ("2 replicas x 1 thread",
             lambda: strategy.run(replica_step, args=(params, *shards, lr)))]
    if args.backend == "cpu":
        rows.append(("2 programs, no exchange", _independent_halves(
            jit_compile, single_step, params, shards, lr)))
    print(f"{'configuration':<24}{'ms/step':>10}{'cpu ms':>10}{'ratio':>8}")
    first = None
    for name, fn in rows:
        t = timed_ms(fn, args.repeat)
        first = first or t.wall
        print(f"{name:<24}{fmt_ms(t.wall):>10}{fmt_ms(t.cpu):>10}{t.wall / first:>8.2f}")
    print("target: 2 replicas x 1 thread no slower than 1 replica x 2 threads (ratio <= 1.00)")
    if args.backend == "cpu":
        print("'2 programs, no exchange': the 1-replica step compiled for 1 thread, run on each "
              "half of the batch in two threads at once, no gradients exchanged: what the two "
              "replicas cost before any all-reduce")
    return status


def _independent_halves(jit_compile, single_step, params, shards, lr):
    """Two 1-thread programs, one per half batch, run concurrently (no exchange); the
    second on a worker thread kept between calls, as the replicas' device threads are."""
    from concurrent.futures import ThreadPoolExecutor
    steps = [jit_compile(single_step, intra_op_threads=1) for _ in range(2)]
    halves = [(shards[0].values[r], shards[1].values[r]) for r in range(2)]
    for step, (x, labels) in zip(steps, halves):
        step(params, x, labels, lr)           # compile before timing
    worker = ThreadPoolExecutor(1)

    def run():
        other = worker.submit(steps[1], params, *halves[1], lr)
        steps[0](params, *halves[0], lr)
        other.result()
    return run


if __name__ == "__main__":
    sys.exit(main())
