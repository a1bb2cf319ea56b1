"""Run under `mpirun -n 2`: a 2-stage pipeline, one stage per rank (distributed='mpi'
chosen automatically), both schedules; the loss on every rank and this rank's stage
gradients equal one device's value_and_grad on the whole batch. Prints 'rank R ok'."""
import sys

import numpy as np

import xlapy
from xlapy import ops
from xlapy.frontend import distribute


def first(p, batch):
    x, y = batch
    return {"h": ops.tanh(x @ p["w"]), "y": y}


def last(p, act):
    return ops.reduce_mean(ops.square(act["h"] @ p["w"] - act["y"]))


def main() -> None:
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.Get_rank()
    rng = np.random.default_rng(0)
    params = [{"w": rng.standard_normal((5, 7)).astype(np.float32)},
              {"w": rng.standard_normal((7, 3)).astype(np.float32)}]
    x = rng.standard_normal((12, 5)).astype(np.float32)
    y = rng.standard_normal((12, 3)).astype(np.float32)
    want_loss, want = xlapy.value_and_grad(
        lambda ps, x, y: last(ps[1], first(ps[0], (x, y))))(params, x, y)
    for schedule in ("gpipe", "1f1b"):
        pipe = distribute.pipeline([first, last], 3, schedule=schedule)
        assert pipe.distributed == "mpi"
        loss, grads = pipe.value_and_grad(params, (x, y))
        np.testing.assert_allclose(loss, want_loss, rtol=2e-5, atol=1e-6)
        assert grads[1 - rank] is None
        np.testing.assert_allclose(grads[rank]["w"], want[rank]["w"], rtol=2e-5, atol=1e-6)
        assert 0 <= pipe.stats["bubble"] < 1
    print(f"rank {rank} ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
