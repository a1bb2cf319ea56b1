"""Communicator: the collectives between the devices of one program. Knows nothing of HLO.

A program that runs on N devices (global ids 0..N-1) moves data between them through a
`Communicator`. Two implementations exist:

    InProcessCommunicator(N)      N devices in this process, one thread each, shared memory
                                  (inprocess_communicator.py)
    MpiCommunicator(comm)         one device per MPI rank, through mpi4py (mpi_communicator.py,
                                  the only module that imports mpi4py; `pip install xlapy[mpi]`)

Buffers are C-contiguous numpy arrays of any dtype numpy has (bool, ints, f16, f32, f64,
complex, ml_dtypes' bfloat16, ...), zero-size ones included. The calls, for the thread
that runs `device` (the caller's device: one of `comm.local_devices`):

    comm.num_devices                     N
    comm.local_devices                   the devices this process runs (all in-process;
                                         (rank,) under MPI)
    all_reduce(device, group, send, recv, op)      recv = send of every member, reduced
    all_gather(device, group, send, recv)          recv = the members' sends concatenated
                                                   (flat, C order) in group order
    reduce_scatter(device, group, send, recv, op)  member i gets flat chunk i of the reduction
                                                   (send.size = len(group) * recv.size)
    all_to_all(device, group, send_chunks, recv_chunks)
                                         send_chunks[j] goes to member j, which receives it
                                         in recv_chunks[i] (i = this device's place)
    permute(device, send_to, recv_from, send, recv)
                                         send to one device and receive from one (either may
                                         be None: nothing sent / recv left untouched)
    broadcast(device, group, root, buf)  buf of every member = buf of device `root`
    barrier(device)                      every device arrives before any leaves
    check_same_program(device, fingerprint)   every device compares a string (e.g. the
                                         module's fingerprint) at start; a mismatch raises
                                         naming the devices that differ
    abort(device, exc)                   device failed: every other device raises (below)

`group` is a tuple of global device ids that contains `device` (None = every device); the
members of one collective pass the same group, and the groups used at one step of the
program partition the devices taking part (as XLA's replica groups do). Every member
passes buffers of the same dtype and size. `op` is one of REDUCE_OPS -- "sum", "prod",
"min", "max" (NaN-propagating, like XLA), "and", "or" (bitwise on integers, logical on
bool; bool "sum" is "or", "prod" is "and") -- or a callable `combine(a, b) -> array` for a
reducer no engine has (a compiled reducer computation): elementwise, associative and
commutative; it is called on pieces of the buffers, from several threads at once, and may
return one of its arguments. `send` and `recv` may be the same array (in place); other
overlaps are an error, and buffers of different devices must not overlap.

Order. Each device issues its collectives in program order; the k-th collective a device
issues over a group meets the k-th of every other member (under MPI, the rank's calls
reach MPI in that order). Reductions over floats fold members in a fixed order, and every
member of a group receives bit-identical results (data-parallel replicas stay in sync).
In-process, an all-reduce folds in group order, ((m0 op m1) op m2) ..., as a sequential
reference does; MPI's own algorithms choose their own order.

Asynchronous use (XLA's all-reduce-start/-done): `start_all_reduce`, `start_all_gather`,
`start_reduce_scatter`, `start_all_to_all`, `start_permute`, `start_broadcast` take the
same arguments, return a `PendingCollective` at once and run on a thread of the device's
own; `pending.wait()` returns when it is done (and raises what the call would raise). The
device's collectives still run one at a time in issue order: a blocking call issued while
some started ones are outstanding runs after them. Buffers of a started collective must
not be touched until `wait()` returns.

Failure. A device whose work raises calls `comm.abort(device, exc)`. Every other device
waiting in a collective, or entering one later, raises `CollectiveError` naming the failed
device (rank) and its error. A device that waits longer than the timeout (`timeout=`,
default the runtime option `collective_timeout`, env XLAPY_COLLECTIVE_TIMEOUT, 60 s)
raises `CollectiveError` naming the devices it waited for, and the others then fail too:
no hang, no deadlock. Under MPI, a failed or timed-out rank prints one line naming itself
to stderr and calls MPI Abort, so mpirun ends every rank. After a failure the communicator
stays failed; make a new one.

For the CPU backend's collective thunks: a thunk holds its device id and its group (from
the replica groups and the device numbering, which are HLO business and stay there),
passes its operand and result buffers as numpy views, and turns a reducer computation
that matches a named op into that name (MPI then uses its own reduction), any other
into a callable. A gather or scatter along a non-major dimension is the thunk's transpose
around the flat concatenation this API does.
"""
from __future__ import annotations

import abc
import collections
import threading

import numpy as np

from . import config
from .collective_util import REDUCE_OPS  # noqa: F401 - part of this module's API
from .collective_util import (Reduction, check_writable, flat, resolve_reduction,
                              same_memory)


class CollectiveError(RuntimeError):
    """A collective could not complete: a device failed, timed out, or the devices disagree.

    `device` is the device (rank) that failed or that was waited for in vain, when known;
    `cause` is its exception, when known.
    """

    def __init__(self, message: str, device: int | None = None,
                 cause: BaseException | None = None):
        super().__init__(message)
        self.device = device
        self.cause = cause


class PendingCollective:
    """A started collective: `wait()` blocks until it is done and raises its error, if any."""
    __slots__ = ("label", "_done", "_error")

    def __init__(self, label: str):
        self.label = label
        self._done = threading.Event()
        self._error: BaseException | None = None

    def _finish(self, error: BaseException | None) -> None:
        self._error = error
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> None:
        """Blocks until done (the collective's own timeout bounds it); re-raises its error.

        With `timeout`, a TimeoutError if it is still running after that many seconds.
        """
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.label} still running after {timeout} s")
        if self._error is not None:
            raise self._error


class _Issuer:
    """Runs one device's collectives one at a time in issue order; started ones on a thread."""

    def __init__(self, name: str, threaded: bool = True):
        self._name = name
        self._threaded = threaded        # False: started collectives run at once, inline
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._outstanding = 0            # started, not yet finished
        self._thread: threading.Thread | None = None
        self._closed = False

    def run(self, label: str, body, blocking: bool) -> PendingCollective | None:
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{label}: the communicator is closed")
            if (blocking or not self._threaded) and self._outstanding == 0:
                pending = None
            else:
                pending = PendingCollective(label)
                self._outstanding += 1
                self._queue.append((body, pending))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name=self._name,
                                                    daemon=True)
                    self._thread.start()
                self._cond.notify()
        if pending is None:              # nothing in flight: run on the caller's thread
            if blocking:
                body()
                return None
            pending = PendingCollective(label)
            try:
                body()
            except BaseException as exc:  # noqa: BLE001 - handed to wait()
                pending._finish(exc)
            else:
                pending._finish(None)
            return pending
        if blocking:
            pending.wait()
            return None
        return pending

    @property
    def idle(self) -> bool:
        """No started collective is queued or running: a blocking call may run inline."""
        return self._outstanding == 0

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                body, pending = self._queue.popleft()
            error = None
            try:
                body()
            except BaseException as exc:  # noqa: BLE001 - handed to wait()
                error = exc
            with self._cond:
                self._outstanding -= 1
            pending._finish(error)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Communicator(abc.ABC):
    """Collectives between devices; see the module docstring for the contract.

    Subclasses implement the `_op` methods (blocking, arguments already checked); this
    class checks arguments, resolves reductions, orders each device's calls and runs the
    started ones.
    """

    def __init__(self, num_devices: int, local_devices, timeout: float | None = None,
                 start_threads: bool = True):
        if not isinstance(num_devices, int) or isinstance(num_devices, bool) or num_devices < 1:
            raise ValueError(f"num_devices must be an integer >= 1, got {num_devices!r}")
        if timeout is None:
            timeout = config.get_options().collective_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.num_devices = num_devices
        self.local_devices = tuple(local_devices)
        self.timeout = float(timeout)
        self._all = tuple(range(num_devices))
        self._issuers = {d: _Issuer(f"xlapy-collectives-{d}", start_threads)
                         for d in self.local_devices}
        self._known_groups: dict = {}

    # --- checks -------------------------------------------------------------------------

    def _check_device(self, device) -> int:
        if device not in self._issuers:
            raise ValueError(f"device {device!r} is not run by this process "
                             f"(local devices {list(self.local_devices)})")
        return device

    def _check_group(self, device: int, group) -> tuple:
        if group is None:
            return self._all
        if isinstance(group, tuple):
            known = self._known_groups.get((device, group))
            if known is not None:
                return known
        try:
            members = tuple(int(g) for g in group)
        except (TypeError, ValueError):
            raise ValueError(f"group must be a sequence of device ids, got {group!r}") from None
        if device not in members:
            raise ValueError(f"group {members} does not contain device {device}")
        if len(set(members)) != len(members):
            raise ValueError(f"group {members} names a device twice")
        bad = [g for g in members if not 0 <= g < self.num_devices]
        if bad:
            raise ValueError(f"group {members}: device(s) {bad} out of range "
                             f"(there are {self.num_devices} devices)")
        if isinstance(group, tuple):
            self._known_groups[(device, group)] = members
        return members

    def _check_peer(self, peer, what: str):
        if peer is None:
            return None
        if isinstance(peer, bool) or not isinstance(peer, (int, np.integer)) \
                or not 0 <= peer < self.num_devices:
            raise ValueError(f"{what} must be a device id in [0, {self.num_devices}) or None, "
                             f"got {peer!r}")
        return int(peer)

    # --- the calls ----------------------------------------------------------------------

    def _prepare_all_reduce(self, device, group, send, recv, op):
        device = self._check_device(device)
        group = self._check_group(device, group)
        s, r = flat(send, "all_reduce send"), flat(recv, "all_reduce recv")
        check_writable(r, "all_reduce recv")
        if s.dtype != r.dtype or s.size != r.size:
            raise ValueError(f"all_reduce: send {s.dtype}[{s.size}] and recv "
                             f"{r.dtype}[{r.size}] differ")
        same_memory(s, r, "all_reduce")
        reduction = resolve_reduction(op, s.dtype)
        return (device, group, s, r, reduction)

    def _prepare_all_gather(self, device, group, send, recv):
        device = self._check_device(device)
        group = self._check_group(device, group)
        s, r = flat(send, "all_gather send"), flat(recv, "all_gather recv")
        check_writable(r, "all_gather recv")
        if s.dtype != r.dtype or r.size != s.size * len(group):
            raise ValueError(f"all_gather over {len(group)} devices: recv {r.dtype}[{r.size}] "
                             f"must hold {len(group)} x send {s.dtype}[{s.size}]")
        if np.may_share_memory(s, r):
            raise ValueError("all_gather: send and recv overlap")
        return (device, group, s, r)

    def _prepare_reduce_scatter(self, device, group, send, recv, op):
        device = self._check_device(device)
        group = self._check_group(device, group)
        s, r = flat(send, "reduce_scatter send"), flat(recv, "reduce_scatter recv")
        check_writable(r, "reduce_scatter recv")
        if s.dtype != r.dtype or s.size != r.size * len(group):
            raise ValueError(f"reduce_scatter over {len(group)} devices: send "
                             f"{s.dtype}[{s.size}] must hold {len(group)} x recv "
                             f"{r.dtype}[{r.size}]")
        if np.may_share_memory(s, r):
            raise ValueError("reduce_scatter: send and recv overlap")
        return (device, group, s, r, resolve_reduction(op, s.dtype))

    def _prepare_all_to_all(self, device, group, send_chunks, recv_chunks):
        device = self._check_device(device)
        group = self._check_group(device, group)
        if len(send_chunks) != len(group) or len(recv_chunks) != len(group):
            raise ValueError(f"all_to_all over {len(group)} devices needs {len(group)} send "
                             f"and recv chunks, got {len(send_chunks)} and {len(recv_chunks)}")
        sends = [flat(c, f"all_to_all send chunk {i}") for i, c in enumerate(send_chunks)]
        recvs = [flat(c, f"all_to_all recv chunk {i}") for i, c in enumerate(recv_chunks)]
        dtype = sends[0].dtype
        for i, c in enumerate(sends + recvs):
            if c.dtype != dtype:
                raise ValueError(f"all_to_all: chunks mix dtypes {dtype} and {c.dtype}")
        for i, c in enumerate(recvs):
            check_writable(c, f"all_to_all recv chunk {i}")
            if any(np.may_share_memory(c, s) for s in sends):
                raise ValueError(f"all_to_all: recv chunk {i} overlaps a send chunk")
        return (device, group, sends, recvs)

    def _prepare_permute(self, device, send_to, recv_from, send, recv):
        device = self._check_device(device)
        send_to = self._check_peer(send_to, "send_to")
        recv_from = self._check_peer(recv_from, "recv_from")
        s = flat(send, "permute send") if send_to is not None else None
        r = flat(recv, "permute recv") if recv_from is not None else None
        if r is not None:
            check_writable(r, "permute recv")
            if s is not None and np.may_share_memory(s, r):
                raise ValueError("permute: send and recv overlap")
        return (device, send_to, recv_from, s, r)

    def _prepare_broadcast(self, device, group, root, buf):
        device = self._check_device(device)
        group = self._check_group(device, group)
        if root not in group:
            raise ValueError(f"broadcast root {root!r} is not in group {group}")
        b = flat(buf, "broadcast buf")
        if device != root:
            check_writable(b, "broadcast buf")
        return (device, group, int(root), b)

    def _issue(self, kind: str, args: tuple, blocking: bool):
        device = args[0]
        body = getattr(self, "_" + kind)

        def run():
            try:
                body(*args)
            except CollectiveError:
                raise
            except BaseException as exc:
                # An error inside a collective (a reducer that raises, an MPI error):
                # the peers are waiting for this device, so it fails for them too.
                self.abort(device, exc)
                raise
        return self._issuers[device].run(f"{kind} on device {device}", run, blocking)

    def all_reduce(self, device, group, send, recv, op="sum") -> None:
        self._issue("all_reduce", self._prepare_all_reduce(device, group, send, recv, op), True)

    def all_gather(self, device, group, send, recv) -> None:
        self._issue("all_gather", self._prepare_all_gather(device, group, send, recv), True)

    def reduce_scatter(self, device, group, send, recv, op="sum") -> None:
        self._issue("reduce_scatter",
                    self._prepare_reduce_scatter(device, group, send, recv, op), True)

    def all_to_all(self, device, group, send_chunks, recv_chunks) -> None:
        self._issue("all_to_all",
                    self._prepare_all_to_all(device, group, send_chunks, recv_chunks), True)

    def permute(self, device, send_to, recv_from, send, recv) -> None:
        self._issue("permute",
                    self._prepare_permute(device, send_to, recv_from, send, recv), True)

    def broadcast(self, device, group, root, buf) -> None:
        self._issue("broadcast", self._prepare_broadcast(device, group, root, buf), True)

    def start_all_reduce(self, device, group, send, recv, op="sum") -> PendingCollective:
        return self._issue("all_reduce",
                           self._prepare_all_reduce(device, group, send, recv, op), False)

    def start_all_gather(self, device, group, send, recv) -> PendingCollective:
        return self._issue("all_gather", self._prepare_all_gather(device, group, send, recv),
                           False)

    def start_reduce_scatter(self, device, group, send, recv, op="sum") -> PendingCollective:
        return self._issue("reduce_scatter",
                           self._prepare_reduce_scatter(device, group, send, recv, op), False)

    def start_all_to_all(self, device, group, send_chunks, recv_chunks) -> PendingCollective:
        return self._issue("all_to_all",
                           self._prepare_all_to_all(device, group, send_chunks, recv_chunks),
                           False)

    def start_permute(self, device, send_to, recv_from, send, recv) -> PendingCollective:
        return self._issue("permute",
                           self._prepare_permute(device, send_to, recv_from, send, recv), False)

    def start_broadcast(self, device, group, root, buf) -> PendingCollective:
        return self._issue("broadcast", self._prepare_broadcast(device, group, root, buf),
                           False)

    def barrier(self, device) -> None:
        device = self._check_device(device)
        self._issue("barrier", (device,), True)

    def check_same_program(self, device, fingerprint: str) -> None:
        device = self._check_device(device)
        if not isinstance(fingerprint, str):
            raise TypeError(f"fingerprint must be a str, not {type(fingerprint).__name__}")
        self._issue("check_same_program", (device, fingerprint), True)

    @abc.abstractmethod
    def abort(self, device, exc: BaseException) -> None:
        """Device `device` failed with `exc`: every other device's collectives raise."""

    def close(self) -> None:
        """Stops the threads that run started collectives (idempotent)."""
        for issuer in self._issuers.values():
            issuer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # --- what an implementation provides -------------------------------------------------

    @abc.abstractmethod
    def _all_reduce(self, device, group, send, recv, reduction: Reduction) -> None: ...

    @abc.abstractmethod
    def _all_gather(self, device, group, send, recv) -> None: ...

    @abc.abstractmethod
    def _reduce_scatter(self, device, group, send, recv, reduction: Reduction) -> None: ...

    @abc.abstractmethod
    def _all_to_all(self, device, group, sends, recvs) -> None: ...

    @abc.abstractmethod
    def _permute(self, device, send_to, recv_from, send, recv) -> None: ...

    @abc.abstractmethod
    def _broadcast(self, device, group, root, buf) -> None: ...

    @abc.abstractmethod
    def _barrier(self, device) -> None: ...

    @abc.abstractmethod
    def _check_same_program(self, device, fingerprint: str) -> None: ...
