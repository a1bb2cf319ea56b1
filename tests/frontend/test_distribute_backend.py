"""frontend.distribute through the CPU backend: in-process devices (run_devices) against
the reference evaluator, the example's training equal to one replica on the global batch,
and MultiWorkerMirroredStrategy under `mpirun -n 2` (and 3) in a subprocess.

The MPI tests skip, saying why, only where mpirun or mpi4py is missing
(`pip install 'xlapy[mpi]'`). mpich's mpirun runs as root with no flags; Open MPI's
needs --allow-run-as-root and --oversubscribe, added when its mpirun is the one found.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy.frontend import distribute, ops
from xlapy.frontend.distribute import PerReplica
from xlapy.frontend.ops import collective
from tests.mpi_util import mpirun_command, needs_mpi

from .util import assert_close

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_mlp_distributed.py"
WORKER = Path(__file__).with_name("mpi_distribute_worker.py")
LAUNCH_LIMIT = 240       # seconds for a whole mpirun (compiles included): a hang fails


def both(n, **options):
    return (distribute.MirroredStrategy(num_replicas=n, **options),
            distribute.MirroredStrategy(num_replicas=n, backend="interpreter", **options))


def assert_same(got, want, scale=1.0):
    """Pytrees with PerReplica leaves: the backend's against the evaluator's."""
    if isinstance(want, dict):
        assert sorted(got) == sorted(want)
        for k in want:
            assert_same(got[k], want[k], scale)
    elif isinstance(want, (tuple, list)):
        for g, w in zip(got, want):
            assert_same(g, w, scale)
    else:
        assert len(got.values) == len(want.values)
        for r, (g, w) in enumerate(zip(got.values, want.values)):
            assert g.dtype == w.dtype and g.shape == w.shape, f"replica {r}"
            assert_close(g, w, scale=scale, what=f"replica {r}")


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_collectives_on_devices_match_the_evaluator(n):
    rng = np.random.default_rng(n)
    xs = PerReplica([rng.standard_normal((2, 3)).astype(np.float32) for _ in range(n)])
    ks = PerReplica([rng.integers(-9, 9, (4,)).astype(np.int32) for _ in range(n)])
    g = 2 if n % 2 == 0 else 1

    def f(x, k):
        ctx = distribute.get_replica_context()
        return {"sum": collective.all_reduce(x, n, 1, 1),
                "max_div": collective.all_reduce(x, g, 2, 1, merge_op="Max", final_op="Div"),
                "int_mul": collective.all_reduce(k, n, 1, 2, merge_op="Mul"),
                "gather": collective.all_gather(x, g, 2, 2),
                "root": collective.broadcast_send(k, (4,), "int32", n, 1, 3),
                "tree": ctx.all_reduce("MEAN", {"x": x, "k": k, "s": ops.reduce_sum(x)}),
                "id": ctx.replica_id_in_sync_group}
    cpu, ref = both(n, bucket_bytes=16)
    assert_same(cpu.run(f, args=(xs, ks)), ref.run(f, args=(xs, ks)))


@pytest.mark.parametrize("n", [2, 4])
def test_bucketed_gradients_on_devices(n):
    rng = np.random.default_rng(0)
    params = {"w0": rng.standard_normal((5, 6)).astype(np.float32),
              "b0": np.zeros(6, np.float32),
              "w1": rng.standard_normal((6, 3)).astype(np.float32)}
    x = rng.standard_normal((4 * n, 5)).astype(np.float32)

    def loss_fn(p, x):
        return ops.reduce_mean(ops.square(ops.tanh(x @ p["w0"] + p["b0"]) @ p["w1"]))

    def step(p, x):
        loss, grads = distribute.value_and_grad(loss_fn)(p, x)
        return {k: p[k] - 0.1 * grads[k] for k in p}, loss
    cpu, ref = both(n, bucket_bytes=64)
    args = (params, cpu.distribute_batch(x))
    assert_same(cpu.run(step, args=args), ref.run(step, args=args))


def load_example():
    spec = importlib.util.spec_from_file_location("example_train_mlp_distributed_cpu",
                                                  EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_in_process_matches_one_replica():
    losses, single = load_example().main(replicas=2, steps=30, verbose=False)
    np.testing.assert_allclose(losses, single, rtol=2e-5, atol=1e-6)


# --- MPI ---------------------------------------------------------------------------------



def mpirun(n: int, *command: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, XLAPY_COLLECTIVE_TIMEOUT="60")
    return subprocess.run([*mpirun_command(), "-n", str(n), sys.executable, *command],
                          capture_output=True, text=True, env=env, timeout=LAUNCH_LIMIT,
                          cwd=ROOT)


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_multi_worker_strategy_under_mpirun(n):
    done = mpirun(n, str(WORKER))
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = sorted(int(r) for r in re.findall(r"rank (\d+) ok: \d+ checks", done.stdout))
    assert ranks == list(range(n)), done.stdout + done.stderr


@needs_mpi
def test_example_under_mpirun_matches_one_replica():
    done = mpirun(2, str(EXAMPLE), "--steps", "30", "--print-every", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MultiWorkerMirroredStrategy: 2 replicas" in done.stdout, done.stdout
    rows = re.findall(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+\S+$", done.stdout, re.M)
    assert len(rows) == 30, done.stdout          # rank 0 prints every step, once
    ours = np.array([float(r[1]) for r in rows])
    single = np.array([float(r[2]) for r in rows])
    np.testing.assert_allclose(ours, single, rtol=2e-5, atol=1e-6)
    assert ours[-1] < ours[0]


def test_early_buckets_overlap_the_rest_of_the_backward_pass():
    """In the compiled program the first bucket's all-reduce starts before kernels of the
    backward pass that come after it (the first layer's weight gradient) and is waited
    for only after them."""
    rng = np.random.default_rng(0)
    params = {"w0": rng.standard_normal((16, 32)).astype(np.float32),
              "w1": rng.standard_normal((32, 32)).astype(np.float32),
              "w2": rng.standard_normal((32, 4)).astype(np.float32)}
    x = rng.standard_normal((16, 16)).astype(np.float32)

    def loss_fn(p, x):
        h = ops.relu(x @ p["w0"])
        h = ops.relu(h @ p["w1"])
        return ops.reduce_mean(ops.square(h @ p["w2"]))

    def step(p, x):
        return distribute.grad(loss_fn)(p, x)
    s = distribute.MirroredStrategy(num_replicas=2, bucket_bytes=256)
    args = (params, s.distribute_batch(x))
    thunks = s.compile(step, args=args)._executable._program.thunks
    kinds = [type(t).__name__ for t in thunks]
    first_start = kinds.index("StartThunk")
    first_done = kinds.index("DoneThunk")
    # one bucket per weight; the last one has nothing left to overlap and runs synchronously
    assert kinds.count("StartThunk") + kinds.count("AllReduceThunk") == 3, kinds
    assert "KernelThunk" in kinds[first_start + 1:first_done], kinds
    ref = distribute.MirroredStrategy(num_replicas=2, backend="interpreter", bucket_bytes=256)
    # three layers of unscaled weights: sums of 32 products of O(10) values, in another
    # order than numpy's (a few elements cancel to ~0.1)
    assert_same(s.run(step, args=args), ref.run(step, args=args), scale=10)
