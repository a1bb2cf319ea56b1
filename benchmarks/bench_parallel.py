"""A transformer training step: 1 device vs 2 devices data, tensor and pipeline parallel.

Run by hand from the repository root (not part of the test suite):

    python3 benchmarks/bench_parallel.py              # d_model 256, 4 heads, d_ff 1024, 2 layers
    python3 benchmarks/bench_parallel.py --small      # smoke run: the example's tiny model
    python3 benchmarks/bench_parallel.py --no-mpi     # in-process rows only

The model is examples/transformer_model.py's (train_transformer.py's), the step
examples/train_transformer_tp.py's (forward, backward and Adam, dropout off), on its
character corpus. Rows, each on the same global batch and parameters:

    1 device            jit_compile(step)
    data parallel       jit_compile(step, mesh=Mesh(arange(2), ("data",))): the batch split,
                        parameters replicated (the partitioner all-reduces the gradients)
    tensor parallel     the example's Megatron layout over ("model",)
    pipeline gpipe/1f1b distribute.pipeline: embedding + first half of the blocks | the rest
                        + head and loss (transformer_model.embed/block/head) on 2 stages,
                        4 microbatches, an SGD update in numpy after value_and_grad

in this process (a thread per device), and again under `mpirun -n 2` (one device per
rank) when mpirun and mpi4py exist. Columns: median wall ms per step, the ratio to
1 device, and memory per device: the parameters and optimizer state the device holds,
plus its programs' temporary arena and outputs (pipeline: the largest stage program's,
plus the live microbatch inputs at the peak). Each row's loss is checked against
1 device's (f32, rtol 1e-4); a mismatch prints `!!` and exits with status 1.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import fmt_ms, load_average, median_ms  # noqa: E402

import xlapy  # noqa: E402
from xlapy.frontend import distribute, optimizers, pytree  # noqa: E402
from xlapy.frontend.distribute import Mesh, PartitionSpec as P  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIG = dict(seq_len=64, d_model=256, num_heads=4, d_ff=1024, num_layers=2)
BATCH = 8


def load_example():
    path = ROOT / "examples" / "train_transformer_tp.py"
    spec = importlib.util.spec_from_file_location("train_transformer_tp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ex = load_example()
sys.path.insert(0, str(ROOT / "examples"))
import transformer_model as tm  # noqa: E402


def nbytes(tree) -> int:
    return sum(np.asarray(a).nbytes for a in pytree.flatten(tree)[0])


def program_bytes(stats: dict) -> int:
    return stats["arena_bytes"] + stats["output_bytes"] + stats["constant_bytes"]


def sharded_row(name, step, args, repeat):
    """(name, ms, loss, bytes per device) of a ShardedFunction step."""
    out = step(*args)
    program = step.compile(*args)
    held = 0
    for shape, s in zip(program.param_shapes, program.param_shardings):
        dims = tuple(shape.dims)
        tile = s.tile_shape(dims) if s is not None else dims
        held += int(np.prod(tile, dtype=np.int64)) * np.dtype(
            xlapy.hlo.numpy_dtype(shape.element_type)).itemsize
    ms = median_ms(lambda: step(*args), repeat)
    return name, ms, float(out[-1]), held + program_bytes(program.executable.memory_stats())


def pipeline_stages(config):
    """The model as 2 stages: embedding + first half of the blocks | the rest + loss."""
    half = config.num_layers // 2

    def stage0(p, batch):
        inputs = xlapy.ops.slice(batch, [0, 0], [batch.shape[0], batch.shape[1] - 1])
        targets = xlapy.ops.slice(batch, [0, 1], [batch.shape[0], batch.shape[1] - 1])
        h = tm.embed(p, inputs, config)
        for i in range(half):
            h = tm.block(p[f"block{i}"], h, config)
        return h, targets

    def stage1(p, act):
        h, targets = act
        for i in range(half, config.num_layers):
            h = tm.block(p[f"block{i}"], h, config)
        logits = tm.head(p, h, config)
        return xlapy.ops.reduce_mean(
            xlapy.ops.sparse_softmax_cross_entropy_with_logits(targets, logits))

    def split(params):
        first = {"embed", "position"} | {f"block{i}" for i in range(half)}
        return [{k: v for k, v in params.items() if k in first},
                {k: v for k, v in params.items() if k not in first}]
    return [stage0, stage1], split


def _sgd(params, grads, lr):
    return pytree.unflatten(pytree.flatten(params)[1],
                            [p - lr * g for p, g in zip(pytree.flatten(params)[0],
                                                        pytree.flatten(grads)[0])])


def pipeline_row(schedule, config, params, batch, repeat, rank=None):
    stages, split = pipeline_stages(config)
    pipe = distribute.pipeline(stages, 4, schedule=schedule)
    parts = split(params)

    def step():
        loss, grads = pipe.value_and_grad(parts, batch)
        return [None if g is None else _sgd(p, g, 0.05) for p, g in zip(parts, grads)], loss
    _, loss = step()
    ms = median_ms(step, repeat)
    # memory of the busiest stage: its params, its largest program, the live inputs
    worst = 0
    for s, st in enumerate(next(iter(pipe._compiled.values()))):
        if rank is not None and s != rank:
            continue
        programs = [lowered.compile()._executable.memory_stats()
                    for jit in (st.forward, st.backward, st.loss_and_grads)
                    for lowered in jit._cache.values() if lowered._compiled is not None]
        live = pipe.stats["max_live_activations"][s] * sum(a.nbytes for a in st.x_avals)
        worst = max(worst, nbytes(parts[s]) + max(map(program_bytes, programs)) + live)
    return f"pipeline {schedule} (bubble {pipe.stats['bubble']:.2f}, ideal " \
           f"{pipe.ideal_bubble:.2f})", ms, float(loss), worst


def rows(sizes, repeat, mpi_rank=None):
    config, stream = ex.data(sizes, batch=BATCH)
    optimizer = optimizers.Adam(3e-3)
    params = ex.init_params(config, 0)
    state = optimizer.init(params)
    batch = next(stream)
    seed = np.zeros(2, np.int32)
    step = ex.make_train_step(config, optimizer)
    args = (params, state, batch, seed)
    out = []
    if mpi_rank is None:
        one = xlapy.jit_compile(step)
        loss = float(one(*args)[-1])
        stats = one.lower(*args).compile()._executable.memory_stats()
        out.append(("1 device", median_ms(lambda: one(*args), repeat), loss,
                    nbytes(params) + nbytes(state) + program_bytes(stats)))
    dp = xlapy.jit_compile(step, mesh=Mesh(np.arange(2), ("data",)),
                           in_shardings=(None, None, P("data"), None),
                           out_shardings=(None, None, None))
    out.append(sharded_row("data parallel", dp, args, repeat))
    tp = ex.tensor_parallel(step, Mesh(np.arange(2), ("model",)), params, state)
    out.append(sharded_row("tensor parallel", tp, args, repeat))
    for schedule in ("gpipe", "1f1b"):
        out.append(pipeline_row(schedule, config, params, batch, repeat, mpi_rank))
    return out


def print_rows(where, table, base, ref_loss):
    """Prints the rows; True when a row's loss differs from one device's."""
    bad = False
    for name, ms, loss, mem in table:
        ok = abs(loss - ref_loss) <= 1e-4 * abs(ref_loss)
        bad |= not ok
        print(f"{where:<10} {name:<40} {fmt_ms(ms):>10} {ms / base:>6.2f}x "
              f"{mem / 2**20:>9.2f} MiB  loss {loss:.6f}{'' if ok else '  !!'}")
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the example's tiny model")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--no-mpi", action="store_true")
    parser.add_argument("--mpi-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base-ms", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--base-loss", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    config = {} if args.small else BIG
    repeat = args.repeat or (3 if args.small else 10)
    if args.mpi_worker:
        from mpi4py import MPI
        rank = MPI.COMM_WORLD.Get_rank()
        table = rows(config, repeat, mpi_rank=rank)
        if rank == 0:
            return int(print_rows("mpi -n 2", table, args.base_ms, args.base_loss))
        return 0
    print(f"transformer {config or ex.SMALL}, batch {BATCH}; {load_average()}")
    print(f"{'where':<10} {'row':<40} {'ms/step':>10} {'ratio':>7} {'memory/device':>13}")
    table = rows(config, repeat)
    bad = print_rows("in-process", table, table[0][1], table[0][2])
    mpirun = shutil.which("mpirun") or shutil.which(
        "mpirun", path=str(Path(sys.executable).parent))
    if not args.no_mpi and mpirun and importlib.util.find_spec("mpi4py") is not None:
        sys.stdout.flush()
        cmd = [mpirun, "-n", "2", sys.executable, __file__, "--mpi-worker", "--repeat",
               str(repeat), "--base-ms", str(table[0][1]), "--base-loss", str(table[0][2])]
        if args.small:
            cmd.append("--small")
        done = subprocess.run(cmd, text=True, capture_output=True, cwd=ROOT)
        print(done.stdout, end="")
        if done.returncode:
            print(f"!! mpirun failed: {done.stderr.strip()[-500:]}")
            bad = True
        bad |= "!!" in done.stdout
    elif not args.no_mpi:
        print("(no MPI rows: mpirun or mpi4py missing; pip install 'xlapy[mpi]')")
    return int(bad)


if __name__ == "__main__":
    sys.exit(main())
