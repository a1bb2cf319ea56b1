"""examples/train_mlp.py's MLP, trained data-parallel: same data, same steps, N replicas.

Each step the global batch is split along axis 0 across the replicas
(`strategy.distribute_batch`); every replica runs forward and backward on its
shard, the gradients are averaged across replicas by all-reduces in buckets
that start while the backward pass is still running (`distribute.value_and_grad`),
and every replica applies the same SGD update. The mean of the replicas' losses
is the loss of the global batch, so the loss curve is the one of a single replica
trained on the whole batch (examples/train_mlp.py's train_step), up to f32
rounding: the script trains both and prints them side by side.

    python examples/train_mlp_distributed.py --replicas 2    # 2 devices, one process
    mpirun -n 2 python examples/train_mlp_distributed.py     # one replica per MPI rank

Under mpirun (detected from MPI's environment) it uses MultiWorkerMirroredStrategy
and rank 0 prints; otherwise MirroredStrategy(num_replicas=--replicas).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

import numpy as np

from xlapy.frontend import distribute


def _load_train_mlp():
    """examples/train_mlp.py, the single-replica version (data, model, loss, step)."""
    path = Path(__file__).resolve().with_name("train_mlp.py")
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train_mlp = _load_train_mlp()


def train_step(params, x, labels, learning_rate):
    """One replica's SGD step: (new params, the loss of the global batch)."""
    loss, grads = distribute.value_and_grad(train_mlp.loss_fn)(params, x, labels)
    loss = distribute.get_replica_context().all_reduce("MEAN", loss)
    return {k: params[k] - learning_rate * grads[k] for k in params}, loss


def under_mpirun() -> bool:
    """True when started by mpirun with more than one process (MPICH's or Open MPI's)."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"):
        if int(os.environ.get(name, "1")) > 1:
            return True
    return False


def make_strategy(replicas: int | None = None, backend: str = "cpu",
                  bucket_bytes: int | None = None, intra_op_threads: int | None = None):
    options = dict(backend=backend, bucket_bytes=bucket_bytes,
                   intra_op_threads=intra_op_threads)
    if replicas is None and under_mpirun():
        return distribute.MultiWorkerMirroredStrategy(**options)
    return distribute.MirroredStrategy(num_replicas=replicas or 2, **options)


def main(replicas: int | None = None, steps: int = 300, batch: int = 128,
         learning_rate: float = 0.1, sizes=(16, 32, 32, 4), print_every: int = 25,
         backend: str = "cpu", bucket_bytes: int | None = None, seed: int = 0,
         verbose: bool = True, strategy=None):
    """Trains with the strategy and with one replica on the global batch; returns
    (losses of the strategy, losses of one replica), one per step."""
    strategy = strategy or make_strategy(replicas, backend, bucket_bytes)
    rank0 = strategy.local_replica_ids[0] == 0
    n = strategy.num_replicas_in_sync
    rng = np.random.default_rng(seed)
    x, labels = train_mlp.make_dataset(rng, dim=sizes[0], classes=sizes[-1])
    params = train_mlp.init_params(rng, list(sizes))
    single = dict(params)
    lr = np.float32(learning_rate)
    losses, single_losses = [], []
    if verbose and rank0:
        print(f"{type(strategy).__name__}: {n} replica{'s' * (n != 1)}, global batch {batch} "
              f"({batch // n} per replica), backend {strategy.backend}")
        print(f"{'step':>4}  {'loss, ' + str(n) + ' replicas':>18}  {'loss, 1 replica':>16}"
              f"  {'difference':>10}")
    for step in range(steps):
        at = (step * batch) % len(x)
        xb, yb = x[at:at + batch], labels[at:at + batch]
        shards = strategy.distribute_batch((xb, yb))
        params, loss = strategy.run(train_step, args=(params, *shards, lr))
        losses.append(float(strategy.experimental_local_results(loss)[0]))
        if rank0:
            # The reference: examples/train_mlp.py's step on the whole batch.
            single, single_loss = train_mlp.train_step(single, xb, yb, lr)
            single_losses.append(float(single_loss))
            if verbose and (step % print_every == 0 or step == steps - 1):
                print(f"{step:4d}  {losses[-1]:18.6f}  {single_losses[-1]:16.6f}  "
                      f"{abs(losses[-1] - single_losses[-1]):10.2e}")
    if verbose and rank0:
        a, b = np.array(losses), np.array(single_losses)
        worst = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-6)))
        print(f"largest relative difference of the loss curves over {steps} steps: "
              f"{worst:.2e}")
    return losses, single_losses


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replicas", type=int, default=None,
                   help="replicas in this process (default 2; under mpirun: one per rank)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=128, help="the global batch")
    p.add_argument("--print-every", type=int, default=25)
    p.add_argument("--bucket-bytes", type=int, default=None,
                   help="gradient bucket size in bytes (default: the strategy's)")
    p.add_argument("--backend", choices=("cpu", "interpreter"), default="cpu")
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    main(replicas=args.replicas, steps=args.steps, batch=args.batch,
         print_every=args.print_every, backend=args.backend, bucket_bytes=args.bucket_bytes)
