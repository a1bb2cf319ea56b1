"""One rank of the MultiWorkerMirroredStrategy checks (tests/frontend/test_distribute_backend.py).

    mpirun -n N python tests/frontend/mpi_distribute_worker.py

Every rank checks what it sees against numpy (the ranks' values are known to every rank:
they are made from the rank number), prints `rank R ok: K checks` and exits 0; a failed
check raises (the script exits non-zero and prints the difference).
"""
from __future__ import annotations

import numpy as np

from xlapy.frontend import distribute, ops
from xlapy.frontend.ops import collective


def main() -> None:
    s = distribute.MultiWorkerMirroredStrategy()
    n, r = s.num_replicas_in_sync, s.rank
    assert s.world_size == n and s.local_replica_ids == (r,), (s.world_size, n)
    assert 0 <= s.local_rank < n
    checks = 0

    # distribute_batch: this rank's shard of the global batch
    x = np.arange(6 * n, dtype=np.float32).reshape(2 * n, 3)
    (shard,) = s.distribute_batch(x).values
    np.testing.assert_array_equal(shard, x[2 * r:2 * r + 2])
    checks += 1

    # collectives and the replica context
    def f(v):
        ctx = distribute.get_replica_context()
        return {"sum": collective.all_reduce(v, n, 1, 1),
                "max": collective.all_reduce(v, n, 1, 2, merge_op="Max", final_op="Div"),
                "gather": collective.all_gather(v, n, 1, 3),
                "root": collective.broadcast_send(v, v.shape, v.dtype, n, 1, 4),
                "mean": ctx.all_reduce("MEAN", {"a": v, "b": ops.reduce_sum(v)}),
                "id": ctx.replica_id_in_sync_group}
    out = s.run(f, args=(s.distribute_batch(x),))
    parts = x.reshape(n, 2, 3)
    got = {k: v.values[0] for k, v in out.items() if k != "mean"}
    np.testing.assert_allclose(got["sum"], parts.sum(0), rtol=2e-5)
    np.testing.assert_allclose(got["max"], parts.max(0) / n, rtol=2e-5)
    np.testing.assert_array_equal(got["gather"], x)
    np.testing.assert_array_equal(got["root"], parts[0])
    np.testing.assert_allclose(out["mean"]["a"].values[0], parts.mean(0), rtol=2e-5)
    np.testing.assert_allclose(out["mean"]["b"].values[0], parts.sum((1, 2)).mean(), rtol=2e-5)
    assert got["id"] == r
    checks += 7

    # reduce brings every replica's value to every rank
    xs = s.distribute_batch(x)
    np.testing.assert_allclose(s.reduce("SUM", xs), parts.sum(0), rtol=2e-5)
    np.testing.assert_allclose(s.reduce("MEAN", xs, axis=0), x.mean(0), rtol=2e-5)
    checks += 2

    # gradients: MEAN over the replicas = the gradient of the global batch
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)

    def loss_fn(w, x):
        return ops.reduce_mean(ops.square(ops.tanh(x @ w)))

    def step(w, x):
        return distribute.grad(loss_fn)(w, x)
    grads = s.run(step, args=(w, xs)).values[0]
    h = np.tanh(x @ w)
    want = x.T @ (2 * h * (1 - h * h)) / h.size
    np.testing.assert_allclose(grads, want, rtol=1e-4, atol=1e-6)
    checks += 1
    print(f"rank {r} ok: {checks} checks", flush=True)


if __name__ == "__main__":
    main()
