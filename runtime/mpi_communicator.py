"""MpiCommunicator: one device per MPI rank, through mpi4py on numpy buffers.

The only module of xlapy that imports mpi4py, and only when a communicator is made
(`pip install 'xlapy[mpi]'` brings mpi4py and the mpich wheel, whose `mpirun` runs as root
with no flags). Device d is rank d of the communicator given (COMM_WORLD by default);
`local_devices` is `(rank,)`.

    mpirun -n 4 python train.py          # each rank: comm = MpiCommunicator()

Making one is collective over the ranks of `comm` (a nonblocking Idup, polled like every
other wait): every rank makes its communicators in the same order.

MPI is the engine; we write no transport. Data moves with mpi4py's buffer methods on
numpy arrays, never pickled: Allreduce, Allgather, Reduce_scatter_block, Alltoallv,
Isend/Irecv (permute), Bcast, Barrier (or their nonblocking forms; see Waiting).
Movements send bytes (any dtype, bfloat16 included); reductions use MPI's own op where it computes what numpy does:

    bool                         sum/or/max -> MAX, prod/and/min -> MIN (on bytes 0/1)
    int8..int64, uint8..uint64   sum, prod, min, max, and, or (bitwise)
    float32, float64, complex    sum, prod

Everything else -- min/max of floats (MPI's do not propagate NaN; XLA's do), float16,
bfloat16, non-native byte orders, and callable reducers -- runs as a ring over the
group's ranks: a reduce-scatter then an all-gather, each of n-1 steps of Isend/Irecv of
one chunk (each rank moves 2(n-1)/n of the data), the reducer applied with numpy or the
callable. Each chunk is reduced by one rank, so every rank gets the same bits.

Groups. A collective over a group runs on a sub-communicator of just those ranks, made
at its first use with Create_group (collective over the group's members only; Split would
be collective over every rank, and a rank whose group is already cached would not call
it again while the others do) and cached. A handshake of nonblocking messages among the
members comes first, so a member that never arrives is a timeout, not a hang.

Waiting. Every wait is bounded by the timeout (`collective_timeout`,
XLAPY_COLLECTIVE_TIMEOUT), in one of two modes, the same on every rank (agreed when the
communicator is made: a nonblocking collective on one rank never matches a blocking one on
another):

    blocking   every rank runs MPI_THREAD_MULTIPLE (mpi4py asks for it) and aborts on
               failure: collectives are MPI's blocking calls (Allreduce, ...), and a
               watchdog thread ends the rank when one outlives the timeout
    polling    otherwise: nonblocking calls (Iallreduce, ...) polled with Test(), looking
               at the clock between polls

They differ in speed only. MPI's blocking calls progress and yield the core in C; polling
from Python cost 18% of a 1 MiB all-reduce on 4 ranks sharing 2 cores. Point-to-point
messages (rings, permutes, the group handshake) are always Isend/Irecv and waited on.
On a timeout, an MPI error, or `abort(device, exc)`, the rank prints one line naming
itself to stderr and calls MPI Abort, so mpirun ends every rank (a rank killed outright is
noticed by mpirun, or by the others' timeout). `abort_on_failure=False` raises
CollectiveError instead (for callers that can end every rank themselves), which needs the
polling mode: a blocked call cannot be called off short of Abort. Unhandled Python
exceptions in a script do not call abort: run scripts as `python -m mpi4py script.py`, or
catch and call `comm.abort`.

Threads: started collectives run on a thread of their own (MPI calls stay one at a time,
in issue order), which needs MPI_THREAD_SERIALIZED or more (mpi4py asks for MULTIPLE);
below that, start_* runs the collective at once. Other MPI traffic of the program on the
same ranks must not overlap an outstanding started collective.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import weakref

import numpy as np

from .collective_util import (Reduction, chunk_bounds, describe_error, describe_mismatch,
                              resolve_reduction, same_memory)
from .communicator import CollectiveError, Communicator

_TAG_HANDSHAKE, _TAG_PERMUTE, _TAG_RING = 101, 102, 103
_POLLS_PER_CHECK = 16        # Test() calls between looks at the clock (and a yield)
_REPEAT_ENTRIES = 256        # all_reduce calls remembered for the fast path


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError("MpiCommunicator needs mpi4py: pip install 'xlapy[mpi]'") from exc
    return MPI


def _bytes(array: np.ndarray):
    """A 1-d uint8 view: movements send bytes, whatever the dtype."""
    return array.reshape(-1).view(np.uint8)


class MpiCommunicator(Communicator):
    """One device per rank of `comm` (default MPI.COMM_WORLD); see the module docstring."""

    def __init__(self, comm=None, timeout: float | None = None, abort_on_failure: bool = True):
        MPI = _mpi()
        world = MPI.COMM_WORLD if comm is None else comm
        self._MPI = MPI
        self.rank = world.Get_rank()
        threaded = MPI.Query_thread() >= MPI.THREAD_SERIALIZED
        super().__init__(world.Get_size(), (self.rank,), timeout, start_threads=threaded)
        self._world = world
        self._abort_on_failure = abort_on_failure
        self._failed: str | None = None
        # Our own copy of the communicator: our messages never match the program's.
        self._watchdog = None
        self._comm, request = world.Idup()
        self._wait(request, "creating the communicator")
        # Blocking calls under a watchdog only if every rank can: a nonblocking collective
        # on one rank never matches a blocking one on another.
        able = np.array([abort_on_failure and MPI.Query_thread() == MPI.THREAD_MULTIPLE],
                        np.uint8)
        everyone = np.zeros(1, np.uint8)
        self._wait(self._comm.Iallreduce([able, MPI.UINT8_T], [everyone, MPI.UINT8_T], MPI.MIN),
                   "creating the communicator")
        if everyone[0]:
            self._watchdog = _Watchdog(self)
        self._groups: dict = {self._all: self._comm}
        self._repeat: dict = {}             # all_reduce's fast path: see all_reduce
        self._engine = self._engine_table()

    # --- failing -------------------------------------------------------------------------

    def _fail(self, message: str, device: int | None = None, cause=None):
        """Ends every rank (MPI Abort) or, with abort_on_failure=False, raises."""
        self._failed = message
        if self._abort_on_failure:
            _abort_world(self._world, message)
        raise CollectiveError(message, device, cause)

    def abort(self, device, exc: BaseException) -> None:
        """This rank's device failed: print one line naming the rank, then MPI Abort."""
        message = f"rank {self.rank} (device {device}) failed: {describe_error(exc)}"
        _abort_world(self._world, message)

    def _timed_out(self, what: str, peers) -> str:
        waited = f"for rank(s) {', '.join(map(str, peers))}" if peers else "for its peers"
        return f"rank {self.rank} waited {self.timeout:g} s in {what} {waited}"

    def _wait(self, requests, what: str, peers=None, statuses=None) -> None:
        """Waits until every request is done (filling `statuses`, a list of MPI.Status, if
        given); fails after the timeout."""
        MPI = self._MPI
        if self._watchdog is not None:
            self._watchdog.arm(what, peers)
            try:
                if isinstance(requests, list):
                    MPI.Request.Waitall(requests, statuses)
                else:
                    requests.Wait()
            except MPI.Exception as exc:
                self._fail(f"rank {self.rank}: MPI error in {what}: {describe_error(exc)}",
                           cause=exc)
            finally:
                self._watchdog.disarm()
            return
        if isinstance(requests, list):
            def test():
                return MPI.Request.Testall(requests, statuses)
        else:
            test = requests.Test
        try:
            if test():
                return
            deadline = time.monotonic() + self.timeout
            while True:
                for _ in range(_POLLS_PER_CHECK):
                    if test():
                        return
                if time.monotonic() > deadline:
                    break
                os.sched_yield()        # ranks may outnumber cores: let the others run
        except MPI.Exception as exc:
            self._fail(f"rank {self.rank}: MPI error in {what}: {describe_error(exc)}",
                       cause=exc)
        self._fail(self._timed_out(what, peers),
                   device=peers[0] if peers and len(peers) == 1 else None)

    def _collective(self, what: str, comm, name: str, *args) -> None:
        """comm.<name>(*args) to completion: the blocking call under the watchdog, or
        comm.I<name> polled (see Waiting in the module docstring)."""
        if self._watchdog is None:
            nonblocking = getattr(comm, "I" + name[0].lower() + name[1:])
            self._wait(self._start(what, nonblocking, *args), what)
            return
        if self._failed is not None:
            raise CollectiveError(f"{what} on rank {self.rank}: {self._failed}")
        self._blocking(what, getattr(comm, name), *args)

    def _blocking(self, what: str, call, *args) -> None:
        """A blocking MPI call under the watchdog; an MPI error is a failure."""
        watchdog = self._watchdog
        watchdog.arm(what, None)
        try:
            call(*args)
        except self._MPI.Exception as exc:
            self._fail(f"rank {self.rank}: MPI error in {what}: {describe_error(exc)}",
                       cause=exc)
        finally:
            watchdog.disarm()

    def _start(self, what: str, call, *args):
        """Calls an MPI function, turning an MPI error into a failure."""
        if self._failed is not None:
            raise CollectiveError(f"{what} on rank {self.rank}: {self._failed}")
        try:
            return call(*args)
        except self._MPI.Exception as exc:
            self._fail(f"rank {self.rank}: MPI error in {what}: {describe_error(exc)}",
                       cause=exc)

    # --- groups and reductions -------------------------------------------------------------

    def _group(self, group: tuple, what: str):
        comm = self._groups.get(group)
        if comm is not None:
            return comm
        others = [g for g in group if g != self.rank]
        token = np.zeros(1, np.uint8)
        inbox = np.zeros(len(others), np.uint8)
        requests = [self._start(what, self._comm.Isend, [token, self._MPI.BYTE], g,
                                _TAG_HANDSHAKE) for g in others]
        receives = [self._start(what, self._comm.Irecv, [inbox[i:i + 1], self._MPI.BYTE], g,
                                _TAG_HANDSHAKE) for i, g in enumerate(others)]
        self._wait(requests + receives, f"{what} (meeting the group)", others)
        members = self._comm.Get_group().Incl(list(group))
        comm = self._start(what, self._comm.Create_group, members, 0)
        members.Free()
        self._groups[group] = comm
        return comm

    def _engine_table(self) -> dict:
        """(dtype, op name) -> (MPI datatype, MPI op, view dtype) where MPI matches numpy.

        Predefined datatypes only: MPI defines no reduction on a duplicate of one."""
        MPI = self._MPI
        table = {}
        for op in ("sum", "or", "max"):
            table[(np.dtype(bool), op)] = (MPI.UINT8_T, MPI.MAX, np.uint8)
        for op in ("prod", "and", "min"):
            table[(np.dtype(bool), op)] = (MPI.UINT8_T, MPI.MIN, np.uint8)
        ops = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX,
               "and": MPI.BAND, "or": MPI.BOR}
        datatypes = {"int8": MPI.INT8_T, "int16": MPI.INT16_T, "int32": MPI.INT32_T,
                     "int64": MPI.INT64_T, "uint8": MPI.UINT8_T, "uint16": MPI.UINT16_T,
                     "uint32": MPI.UINT32_T, "uint64": MPI.UINT64_T, "float32": MPI.FLOAT,
                     "float64": MPI.DOUBLE, "complex64": MPI.C_FLOAT_COMPLEX,
                     "complex128": MPI.C_DOUBLE_COMPLEX}
        for name, datatype in datatypes.items():
            dtype = np.dtype(name)
            if datatype == MPI.DATATYPE_NULL:
                continue
            for op in (ops if dtype.kind in "iu" else ("sum", "prod")):
                table[(dtype, op)] = (datatype, ops[op], dtype)
        return table

    # --- the collectives -----------------------------------------------------------------

    def _all_reduce(self, device, group, send, recv, reduction: Reduction) -> None:
        what = f"all_reduce over ranks {group}"
        in_place = same_memory(send, recv, "all_reduce")
        if send.size == 0:
            return
        if len(group) == 1:
            if not in_place:
                np.copyto(recv, send)
            return
        comm = self._group(group, what)
        engine = self._engine.get((send.dtype, reduction.name))
        if engine is None:
            self._ring_all_reduce(comm, group, send, recv, reduction, in_place, what)
            return
        datatype, op, view = engine
        MPI = self._MPI
        source = MPI.IN_PLACE if in_place else [send.view(view), datatype]
        self._collective(what, comm, "Allreduce", source, [recv.view(view), datatype], op)

    def all_reduce(self, device, group, send, recv, op="sum") -> None:
        """As Communicator.all_reduce. A call that repeats an earlier call's device, group,
        op and arrays (the same objects, still of that dtype and size, C-contiguous, the
        recv writable: what the checks looked at) goes straight to MPI in the blocking
        mode; the checks' answer cannot differ."""
        # The key is the array objects' ids, and the entry holds weak references to them:
        # every rank spins in MPI while one runs Python, and on a host with fewer cores
        # than ranks each microsecond of Python between calls costs several (building an
        # address key, 2 us, cost 1 MiB all-reduces on 4 ranks of 2 cores 5-8%).
        try:
            key = (device, group, op, id(send), id(recv))
            fast = self._repeat.get(key)
        except TypeError:                        # a group that is a list
            key = fast = None
        if fast is not None:
            send_ref, recv_ref, dtype, size, comm, source, datatype, mpi_op, what = fast
            if (send_ref() is send and recv_ref() is recv and send.dtype is dtype
                    and recv.dtype is dtype and send.size == size and recv.size == size
                    and recv.flags.writeable and send.flags.c_contiguous
                    and recv.flags.c_contiguous and self._failed is None
                    and self._issuers[device].idle):
                self._blocking(what, comm.Allreduce,
                               source if source is not None else [send, datatype],
                               [recv, datatype], mpi_op)
                return
        super().all_reduce(device, group, send, recv, op)
        if key is not None and self._watchdog is not None:
            self._remember_all_reduce(key, device, group, send, recv, op)

    def _remember_all_reduce(self, key, device, group, send, recv, op) -> None:
        """Records a checked all_reduce that MPI computes in one call, for all_reduce (the
        arrays by weak reference: a cache entry never keeps a caller's buffer alive)."""
        members = self._check_group(device, group)
        reduction = resolve_reduction(op, send.dtype)
        engine = self._engine.get((send.dtype, reduction.name))
        comm = self._groups.get(members)
        if engine is None or comm is None or len(members) == 1 or send.size == 0 \
                or engine[2] != send.dtype:
            return
        if len(self._repeat) >= _REPEAT_ENTRIES:
            self._repeat.clear()
        in_place = same_memory(send, recv, "all_reduce")
        try:
            refs = (weakref.ref(send), weakref.ref(recv))
        except TypeError:                        # an object without weak references
            return
        self._repeat[key] = (*refs, send.dtype, send.size, comm,
                             self._MPI.IN_PLACE if in_place else None, engine[0], engine[1],
                             f"all_reduce over ranks {members}")

    def _reduce_scatter(self, device, group, send, recv, reduction: Reduction) -> None:
        what = f"reduce_scatter over ranks {group}"
        if recv.size == 0:
            return
        if len(group) == 1:
            np.copyto(recv, send)
            return
        comm = self._group(group, what)
        engine = self._engine.get((send.dtype, reduction.name))
        if engine is None:
            work = send.copy()
            me, n = group.index(device), len(group)
            bounds = [(i * recv.size, (i + 1) * recv.size) for i in range(n)]
            owned = self._ring_reduce_scatter(comm, me, n, work, bounds, reduction, 1, what)
            assert owned == me
            np.copyto(recv, work[bounds[me][0]:bounds[me][1]])
            return
        datatype, op, view = engine
        self._collective(what, comm, "Reduce_scatter_block", [send.view(view), datatype],
                         [recv.view(view), datatype], op)

    def _ring_all_reduce(self, comm, group, send, recv, reduction, in_place, what) -> None:
        if not in_place:
            np.copyto(recv, send)
        me, n = group.index(self.rank), len(group)
        bounds = [chunk_bounds(recv.size, n, i) for i in range(n)]
        owned = self._ring_reduce_scatter(comm, me, n, recv, bounds, reduction, 0, what)
        # All-gather around the ring: pass on the chunk received the step before.
        right, left = (me + 1) % n, (me - 1) % n
        for step in range(n - 1):
            out_chunk, in_chunk = (owned - step) % n, (owned - step - 1) % n
            lo, hi = bounds[out_chunk]
            rlo, rhi = bounds[in_chunk]
            self._sendrecv(comm, recv[lo:hi], right, recv[rlo:rhi], left, what)

    def _ring_reduce_scatter(self, comm, me, n, work, bounds, reduction, shift, what) -> int:
        """Reduces `work` (this rank's data, overwritten) around the ring; returns the chunk
        this rank holds complete: (me + 1 - shift) % n."""
        right, left = (me + 1) % n, (me - 1) % n
        largest = max(hi - lo for lo, hi in bounds)
        incoming = np.empty(largest, work.dtype)
        for step in range(n - 1):
            out_chunk, in_chunk = (me - step - shift) % n, (me - step - shift - 1) % n
            lo, hi = bounds[out_chunk]
            rlo, rhi = bounds[in_chunk]
            part = incoming[:rhi - rlo]
            self._sendrecv(comm, work[lo:hi], right, part, left, what)
            reduction.apply(part, work[rlo:rhi], work[rlo:rhi])
        return (me + 1 - shift) % n

    def _sendrecv(self, comm, send, to, recv, source, what) -> None:
        BYTE = self._MPI.BYTE
        requests = [self._start(what, comm.Irecv, [_bytes(recv), BYTE], source, _TAG_RING),
                    self._start(what, comm.Isend, [_bytes(send), BYTE], to, _TAG_RING)]
        self._wait(requests, what)

    def _all_gather(self, device, group, send, recv) -> None:
        what = f"all_gather over ranks {group}"
        if send.size == 0:
            return
        if len(group) == 1:
            np.copyto(recv, send)
            return
        comm = self._group(group, what)
        BYTE = self._MPI.BYTE
        self._collective(what, comm, "Allgather", [_bytes(send), BYTE], [_bytes(recv), BYTE])

    def _all_to_all(self, device, group, sends, recvs) -> None:
        what = f"all_to_all over ranks {group}"
        if len(group) == 1:
            np.copyto(recvs[0], sends[0])
            return
        comm = self._group(group, what)
        BYTE = self._MPI.BYTE
        send_counts = [c.nbytes for c in sends]
        recv_counts = [c.nbytes for c in recvs]
        packed = np.concatenate([_bytes(c) for c in sends]) if sends else np.empty(0, np.uint8)
        landing = np.empty(sum(recv_counts), np.uint8)
        self._collective(what, comm, "Alltoallv",
                         [packed, (send_counts, _offsets(send_counts)), BYTE],
                         [landing, (recv_counts, _offsets(recv_counts)), BYTE])
        for chunk, start, count in zip(recvs, _offsets(recv_counts), recv_counts):
            _bytes(chunk)[:] = landing[start:start + count]

    def _permute(self, device, send_to, recv_from, send, recv) -> None:
        what = f"permute (to rank {send_to}, from rank {recv_from})"
        MPI = self._MPI
        requests, peers = [], []
        if recv_from is not None:           # first, so that statuses[0] is the receive's
            requests.append(self._start(what, self._comm.Irecv, [_bytes(recv), MPI.BYTE],
                                        recv_from, _TAG_PERMUTE))
            peers.append(recv_from)
        if send_to is not None:
            requests.append(self._start(what, self._comm.Isend, [_bytes(send), MPI.BYTE],
                                        send_to, _TAG_PERMUTE))
            peers.append(send_to)
        if not requests:
            return
        statuses = [MPI.Status() for _ in requests]
        self._wait(requests, what, peers, statuses)
        if recv_from is not None:
            count = statuses[0].Get_count(MPI.BYTE)
            if count != recv.nbytes:
                self._fail(f"permute: rank {recv_from} sent {count} bytes to rank {self.rank}, "
                           f"which expects {recv.nbytes} ({recv.dtype}[{recv.size}])")

    def _broadcast(self, device, group, root, buf) -> None:
        what = f"broadcast over ranks {group}"
        if buf.size == 0 or len(group) == 1:
            return
        comm = self._group(group, what)
        self._collective(what, comm, "Bcast", [_bytes(buf), self._MPI.BYTE], group.index(root))

    def _barrier(self, device) -> None:
        self._collective("barrier", self._comm, "Barrier")

    def _check_same_program(self, device, fingerprint: str) -> None:
        what = "check_same_program"
        MPI = self._MPI
        text = np.frombuffer(fingerprint.encode(), np.uint8)
        lengths = np.zeros(self.num_devices, np.int64)
        self._collective(what, self._comm, "Allgather",
                         [np.array([text.size], np.int64), MPI.INT64_T], [lengths, MPI.INT64_T])
        everything = np.zeros(int(lengths.sum()), np.uint8)
        counts = [int(c) for c in lengths]
        self._collective(what, self._comm, "Allgatherv", [text, MPI.BYTE],
                         [everything, (counts, _offsets(counts)), MPI.BYTE])
        texts = {rank: everything[start:start + count].tobytes().decode(errors="replace")
                 for rank, (start, count) in enumerate(zip(_offsets(counts), counts))}
        if len(set(texts.values())) > 1:
            raise CollectiveError("ranks run different programs (fingerprints differ): "
                                  + describe_mismatch(texts, noun="rank"))

    def close(self) -> None:
        super().close()
        if self._watchdog is not None:
            self._watchdog.stop()
        for group, comm in list(self._groups.items()):
            try:
                comm.Free()
            except self._MPI.Exception:
                pass
        self._groups.clear()
        self._repeat.clear()


class _Watchdog:
    """Ends the rank when one wait outlives the communicator's timeout.

    One wait is armed at a time (a communicator's MPI calls run one at a time). The thread
    looks a few times per timeout; a wait that ends between two looks is never seen."""

    def __init__(self, owner: MpiCommunicator):
        self._owner = owner
        self._armed: tuple | None = None      # (deadline, what, peers)
        self._stopped = threading.Event()
        self._period = min(0.25, max(0.005, owner.timeout / 8))
        self._thread = threading.Thread(target=self._loop, name="xlapy-mpi-watchdog",
                                        daemon=True)
        self._thread.start()

    def arm(self, what: str, peers) -> None:
        self._armed = (time.monotonic() + self._owner.timeout, what, peers)

    def disarm(self) -> None:
        self._armed = None

    def stop(self) -> None:
        self._stopped.set()

    def _loop(self) -> None:
        while not self._stopped.wait(self._period):
            armed = self._armed
            if armed is not None and time.monotonic() > armed[0]:
                owner = self._owner
                message = owner._timed_out(armed[1], armed[2])
                owner._failed = message
                _abort_world(owner._world, message)
                return


def _offsets(counts) -> list[int]:
    offsets, total = [], 0
    for count in counts:
        offsets.append(total)
        total += count
    return offsets


# How long a failing rank waits between printing why and MPI Abort. mpiexec forwards
# each rank's output on its own schedule and may tear the job down before it has read
# the line: under load (2 cores, 3 ranks and other work) the message of a rank that
# raised was lost about 1 run in 5 (test_a_rank_that_raises_ends_every_rank).
ABORT_GRACE_SECONDS = 0.5


def _abort_world(world, message: str) -> None:
    """Prints `message` for the user, gives mpiexec time to pass it on, then MPI Abort."""
    print(f"xlapy: {message} (MPI Abort)", file=sys.stderr, flush=True)
    time.sleep(ABORT_GRACE_SECONDS)
    world.Abort(1)
