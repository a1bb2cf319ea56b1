"""Run under `mpirun -n N`: a sharded jit_compile on a mesh of the N ranks (one device
per rank, distributed='mpi' chosen automatically) gives every rank the whole result,
equal to numpy; prints 'rank R ok'."""
import functools
import sys

import numpy as np

import xlapy
from xlapy import ops
from xlapy.frontend.distribute import Mesh, PartitionSpec as P


def main() -> None:
    from mpi4py import MPI
    rank, n = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    mesh = Mesh(np.arange(n), ("x",))
    rng = np.random.default_rng(0)                       # every rank: the same arrays
    x = rng.standard_normal((4 * n + 1, 6)).astype(np.float32)
    w = rng.standard_normal((6, 3 * n)).astype(np.float32)

    @functools.partial(xlapy.jit_compile, mesh=mesh, in_shardings=(P("x"), P(None, "x")),
                       out_shardings=(P("x"), None, None))
    def f(x, w):
        h = ops.tanh(x @ w)
        return h, ops.reduce_sum(h, 0), ops.reduce_mean(h)

    h, s, mean = f(x, w)
    ref = np.tanh(x @ w)
    assert mean.shape == ()                              # a scalar stays 0-d
    np.testing.assert_allclose(mean, ref.mean(), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(h, ref, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(s, ref.sum(0), rtol=2e-5, atol=1e-4)
    assert f.compile(x, w).device == rank
    shards = xlapy.jit_compile(f.fn, mesh=mesh, in_shardings=(P("x"), P(None, "x")),
                               out_shardings=(P("x"), None, None), return_shards=True)(x, w)
    mine = shards[0][rank]
    assert all(p is None for d, p in enumerate(shards[0]) if d != rank)
    rows = -(-x.shape[0] // n)
    np.testing.assert_allclose(mine, ref[rank * rows:(rank + 1) * rows], rtol=2e-5, atol=1e-5)
    print(f"rank {rank} ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
