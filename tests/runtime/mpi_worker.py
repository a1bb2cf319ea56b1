"""One rank of the MPI communicator tests (tests/runtime/test_mpi_communicator.py).

    mpirun -n N python tests/runtime/mpi_worker.py MODE

MODE: `ops` (every collective against numpy; prints "rank r ok: k checks"), `raise` (rank 1
fails and aborts), `kill` (rank 1 dies mid-run), `stall` (the last rank stays away from a
collective), `fingerprint` (rank 1 runs another program). Every rank makes every rank's
inputs from seeds, so each computes the expected results itself.
"""
from __future__ import annotations

import functools
import os
import signal
import sys
import time

import numpy as np

from xlapy.runtime import CollectiveError
from xlapy.runtime.mpi_communicator import MpiCommunicator

UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
         "and": np.bitwise_and, "or": np.bitwise_or}
DTYPES = ["bool", "int8", "uint8", "int16", "int32", "uint64", "int64", "float16", "float32",
          "float64", "complex64", "complex128", ">f4"]


def make(dtype, size, seed):
    """Small values: sums and products are exact in any order (MPI picks its own)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == bool:
        return rng.random(size) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -3, 4, size).astype(dtype)
    values = rng.integers(1, 4, size) * rng.choice([-1, 1], size) * 0.5
    if dtype.kind == "c":
        values = values + 1j * rng.integers(-2, 3, size)
    return values.astype(dtype)


def ops_for(dtype):
    kind = np.dtype(dtype).kind
    if kind == "c":
        return ["sum", "prod"]
    if kind == "f":
        return ["sum", "prod", "min", "max"]
    return ["sum", "prod", "min", "max", "and", "or"]


def partitions(n):
    if n == 2:
        return [[(0, 1)], [(1, 0)], [(0,), (1,)]]
    return [[tuple(range(n))], [tuple(reversed(range(n)))], [(0,), tuple(range(1, n))],
            [(0, n - 1)] + [(d,) for d in range(1, n - 1)]]


class Checker:
    def __init__(self, rank):
        self.rank, self.count = rank, 0

    def equal(self, got, expected, label):
        self.count += 1
        got, expected = np.asarray(got), np.asarray(expected)
        if got.dtype != expected.dtype or got.shape != expected.shape or not np.array_equal(
                got, expected, equal_nan=got.dtype.kind in "fc"):
            raise AssertionError(f"rank {self.rank}: {label}: got {got!r}, expected {expected!r}")

    def close(self, got, expected, label):
        self.count += 1
        np.testing.assert_allclose(got, expected, rtol=1e-12, err_msg=f"rank {self.rank}: {label}")


def check_ops(comm: MpiCommunicator) -> int:
    n, rank = comm.num_devices, comm.rank
    check = Checker(rank)

    # all_reduce: every dtype and op, MPI's own and the ring, sizes around the chunking.
    for dtype in DTYPES:
        for size in (0, 1, 7, 10_001):
            sends = [make(dtype, size, 100 * d + size) for d in range(n)]
            for op in ops_for(dtype):
                recv = np.zeros(size, dtype)
                comm.all_reduce(rank, None, sends[rank], recv, op)
                expected = functools.reduce(UFUNC[op], sends)
                check.equal(recv, expected.astype(dtype), f"all_reduce {op} {dtype}[{size}]")
    # In place, NaN-propagating max, a callable, groups of several shapes.
    sends = [make("float64", 5000, d) for d in range(n)]
    buffer = sends[rank].copy()
    comm.all_reduce(rank, None, buffer, buffer, "sum")
    check.equal(buffer, functools.reduce(np.add, sends), "in-place all_reduce")
    nans = [np.array([np.nan if d == k else float(d) for k in range(n)], np.float32)
            for d in range(n)]
    out = np.empty(n, np.float32)
    comm.all_reduce(rank, None, nans[rank], out, "max")
    check.equal(np.isnan(out), np.ones(n, bool), "max propagates NaN")
    out = np.empty(5000)
    comm.all_reduce(rank, None, sends[rank], out, np.logaddexp)
    check.close(out, functools.reduce(np.logaddexp, sends), "callable all_reduce")
    for partition in partitions(n):
        group = next(g for g in partition if rank in g)
        for dtype, op in (("float32", "sum"), ("int64", "max"), ("float16", "sum")):
            data = [make(dtype, 999, d) for d in range(n)]
            out = np.empty(999, dtype)
            comm.all_reduce(rank, group, data[rank], out, op)
            check.equal(out, functools.reduce(UFUNC[op], [data[m] for m in group]),
                        f"all_reduce {op} {dtype} over {group}")

        # all_gather, reduce_scatter (MPI's and the ring), broadcast, all_to_all.
        me, size = group.index(rank), len(group)
        data = [make("complex64", 6, d) for d in range(n)]
        gathered = np.empty(6 * size, np.complex64)
        comm.all_gather(rank, group, data[rank], gathered)
        check.equal(gathered, np.concatenate([data[m] for m in group]), f"all_gather {group}")
        for dtype, op in (("int32", "sum"), ("float32", "max"), ("float64", np.logaddexp)):
            data = [make(dtype, 4 * size, d) for d in range(n)]
            out = np.empty(4, dtype)
            comm.reduce_scatter(rank, group, data[rank], out, op)
            combine = op if callable(op) else UFUNC[op]
            full = functools.reduce(combine, [data[m] for m in group])
            check.close(out, full[4 * me:4 * me + 4], f"reduce_scatter {op} {group}")
        root = group[-1]
        buf = np.full(3, rank, np.int16)
        comm.broadcast(rank, group, root, buf)
        check.equal(buf, np.full(3, root, np.int16), f"broadcast {group}")
        sends_a2a = [np.array([rank, target, 7], np.float64) for target in group]
        recvs_a2a = [np.empty(3) for _ in group]
        comm.all_to_all(rank, group, sends_a2a, recvs_a2a)
        for k, source in enumerate(group):
            check.equal(recvs_a2a[k], np.array([source, rank, 7], np.float64),
                        f"all_to_all {group} from {source}")

    # permute: a shift, then only rank 0 sends (to the last rank).
    recv = np.full(4, -1, np.int32)
    comm.permute(rank, (rank + 1) % n, (rank - 1) % n, np.full(4, rank, np.int32), recv)
    check.equal(recv, np.full(4, (rank - 1) % n, np.int32), "permute shift")
    recv = np.full(4, -1, np.int32)
    comm.permute(rank, n - 1 if rank == 0 else None, 0 if rank == n - 1 else None,
                 np.full(4, 5, np.int32), recv)
    check.equal(recv, np.full(4, 5 if rank == n - 1 else -1, np.int32), "permute partial")

    # Started collectives overlap the caller and keep program order.
    data = [make("float32", 20_000, d) for d in range(n)]
    summed, maxed = np.empty(20_000, np.float32), np.empty(20_000, np.float32)
    first = comm.start_all_reduce(rank, None, data[rank], summed, "sum")
    second = comm.start_all_reduce(rank, None, data[rank], maxed, "max")
    gathered = np.empty(n, np.float32)
    comm.all_gather(rank, None, data[rank][:1], gathered)
    first.wait()
    second.wait()
    check.equal(summed, functools.reduce(np.add, data), "started all_reduce")
    check.equal(maxed, functools.reduce(np.maximum, data), "started all_reduce max")
    check.equal(gathered, np.array([d[0] for d in data]), "all_gather after starts")

    # Every rank holds the same bits after a float sum whose order matters.
    rng = np.random.default_rng(rank)
    noisy = (rng.standard_normal(30_001) * 10.0 ** rng.integers(-6, 6, 30_001)).astype(np.float32)
    total = np.empty_like(noisy)
    comm.all_reduce(rank, None, noisy, total)
    everyone = np.empty(n * total.size, np.float32)
    comm.all_gather(rank, None, total, everyone)
    for r in range(n):
        check.equal(everyone[r * total.size:(r + 1) * total.size].view(np.uint32),
                    total.view(np.uint32), f"rank {r} has the same bits")

    # A repeated call (same buffers: the fast path) sees new contents, in place or not,
    # and still refuses a read-only recv at the same address.
    send, out = np.empty(4096, np.float32), np.empty(4096, np.float32)
    for step in range(3):
        send[:] = make("float32", 4096, 10 * step + rank)
        comm.all_reduce(rank, None, send, out)
        check.equal(out, functools.reduce(np.add, [make("float32", 4096, 10 * step + d)
                                                   for d in range(n)]), f"repeat {step}")
        comm.all_reduce(rank, None, out, out, "max")
        check.equal(out, functools.reduce(np.add, [make("float32", 4096, 10 * step + d)
                                                   for d in range(n)]), f"repeat max {step}")
    # The fast path knows the arrays by identity: the same object reinterpreted (a dtype
    # of the same size) or a new object that got a dead one's id must take the checks.
    ints = np.empty(4096, np.float32)
    comm.all_reduce(rank, None, ints, ints)
    comm.all_reduce(rank, None, ints, ints)
    ints.dtype = np.int32
    ints[:] = rank + 1
    comm.all_reduce(rank, None, ints, ints)
    check.equal(ints, np.full(4096, n * (n + 1) // 2, np.int32), "same object, new dtype")
    for step in range(3):              # new arrays each time: ids may be reused
        fresh_send = np.full(1000 + step, step + rank, np.float64)
        fresh_out = np.empty_like(fresh_send)
        comm.all_reduce(rank, None, fresh_send, fresh_out)
        check.equal(fresh_out, np.full(1000 + step, n * step + n * (n - 1) / 2),
                    f"fresh arrays {step}")
        del fresh_send, fresh_out
    frozen = out.view()
    frozen.flags.writeable = False
    try:
        comm.all_reduce(rank, None, send, frozen)
    except ValueError as exc:
        check.equal(str(exc), "all_reduce recv must be writable", "read-only recv")
    else:
        raise AssertionError(f"rank {rank}: a read-only recv was written")

    comm.barrier(rank)
    comm.check_same_program(rank, "program-1")

    # The polling mode (abort_on_failure=False) computes the same.
    polled = MpiCommunicator(abort_on_failure=False)
    for _ in range(2):
        send[:] = make("float32", 4096, rank)
        polled.all_reduce(rank, None, send, out)
        check.equal(out, functools.reduce(np.add, [make("float32", 4096, d) for d in range(n)]),
                    "polling all_reduce")
    gathered = np.empty(n * 3, np.int16)
    polled.all_gather(rank, None, np.full(3, rank, np.int16), gathered)
    check.equal(gathered, np.repeat(np.arange(n, dtype=np.int16), 3), "polling all_gather")
    polled.barrier(rank)
    polled.close()
    return check.count


def main(mode: str) -> int:
    comm = MpiCommunicator()
    rank, n = comm.rank, comm.num_devices
    x = np.ones(1000, np.float32)
    try:
        if mode == "ops":
            print(f"rank {rank} ok: {check_ops(comm)} checks", flush=True)
        elif mode == "raise":
            comm.all_reduce(rank, None, x, np.empty_like(x))
            if rank == 1:
                raise ValueError("boom on rank 1")
            comm.all_reduce(rank, None, x, np.empty_like(x))
            time.sleep(60)               # never reached: mpirun ends every rank first
        elif mode == "kill":
            comm.all_reduce(rank, None, x, np.empty_like(x))
            if rank == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            comm.all_reduce(rank, None, x, np.empty_like(x))
            comm.barrier(rank)
            time.sleep(60)
        elif mode == "stall":
            out = np.empty_like(x)
            comm.all_reduce(rank, None, x, out)
            if rank == n - 1:
                time.sleep(60)           # alive but absent: the others time out
            comm.all_reduce(rank, None, x, out)      # a repeat: the fast path
        elif mode == "fingerprint":
            try:
                comm.check_same_program(rank, "module-b" if rank == 1 else "module-a")
            except CollectiveError as exc:
                print(f"rank {rank}: {exc}", file=sys.stderr, flush=True)
                return 3
        else:
            raise ValueError(f"unknown mode {mode!r}")
    except CollectiveError:
        raise
    except BaseException as exc:  # noqa: BLE001 - this rank failed: end every rank
        comm.abort(rank, exc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
