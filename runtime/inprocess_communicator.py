"""InProcessCommunicator: N devices in one process, one thread each, over shared memory.

Every collective is a meeting of its group's members. Each member posts its buffers
(references, no copy), then the members work in parallel, each reading its peers'
buffers directly, and meet again before anyone returns (a peer may still be reading a
buffer until then):

    all_reduce, large:  post ── reduce my chunk of every send ── sync ── copy the other
                        chunks from their owners' recv ── sync
                        (reduce-scatter then all-gather: each device moves ~2(N-1)/N of
                        the data, like a ring, in two steps instead of 2(N-1))
    all_reduce, small:  post ── reduce everything myself ── sync
                        (below SMALL_BYTES, one meeting less beats moving less)
    all_reduce, native: post ── fold my chunk of every send into every recv ── sync
                        (a native fold, collective_util.py: one pass, each send read
                        once and each recv written once, with stores that bypass the
                        cache; a pass less over memory than the two-step form)
    all_gather, reduce_scatter, all_to_all, broadcast: post ── copy/reduce what is mine ── sync

Members fold in group order, ((m0 op m1) op m2) ..., block by block (BLOCK_BYTES, so the
running result stays in cache), and every member of a group gets the same bits. numpy
releases the GIL in its loops, so devices reduce and copy in parallel.

The k-th collective a device issues over a group meets the k-th of each other member
(counters per device and group); a meeting whose members called different collectives, or
with different dtypes or sizes, fails every member with an error naming both calls.
`permute` is point to point: the sender posts a letter, the receiver copies from it and
marks it taken, and the sender returns once it is taken.

    comm = InProcessCommunicator(4)
    outputs = comm.run(lambda device: step(comm, device))   # a thread per device

`run` is the simple way to drive the devices: it aborts the communicator when a device
raises and re-raises that device's error (the others' CollectiveErrors are its echo).
"""
from __future__ import annotations

import queue
import threading
import time
import weakref

import numpy as np

from .collective_util import (Reduction, chunk_bounds, describe_error, describe_mismatch,
                              native_fold, run_native_fold, same_memory)
from .communicator import CollectiveError, Communicator

# A reduction's working block: the running result stays in L2 while members fold. 1 MiB
# against 256 KiB: 64 MiB on 4 devices 26.0-28.8 ms against 31.4-34.0 (2 cores, 2 MiB L2).
BLOCK_BYTES = 1 << 20
SMALL_BYTES = 64 << 10       # all-reduces up to this size are reduced whole by every member
# From this size per device a native all-reduce stores with non-temporal stores: the result
# would not stay in cache anyway, and the stores skip reading the lines they overwrite.
# (2 cores, 4 devices: 32 MiB 13.4 ms against 45.6 with cached stores; at 4 MiB cached
# stores win.)
NONTEMPORAL_BYTES = 16 << 20


class _Meeting:
    """One collective of one group: the members' posts and how far each has come."""
    __slots__ = ("key", "kind", "signature", "creator", "posts", "stage_of", "reached")

    def __init__(self, key, kind, signature, creator, size, stages):
        self.key, self.kind, self.signature, self.creator = key, kind, signature, creator
        self.posts = [None] * size
        self.stage_of = [-1] * size          # the last stage each member has reached
        self.reached = [0] * stages


class _Letter:
    """A buffer posted by `permute`'s sender; `taken` once the receiver has copied it."""
    __slots__ = ("data", "taken")

    def __init__(self, data):
        self.data, self.taken = data, False


class _Failure:
    __slots__ = ("device", "cause", "message")

    def __init__(self, device, cause, message):
        self.device, self.cause, self.message = device, cause, message


def _describe_signature(kind: str, signature: tuple) -> str:
    return f"{kind}({', '.join(map(str, signature))})"


class InProcessCommunicator(Communicator):
    """N devices of this process; each device's thread calls in (see the module docstring)."""

    def __init__(self, num_devices: int, timeout: float | None = None):
        if not isinstance(num_devices, int) or isinstance(num_devices, bool) or num_devices < 1:
            raise ValueError(f"num_devices must be an integer >= 1, got {num_devices!r}")
        super().__init__(num_devices, range(num_devices), timeout)
        self._cond = threading.Condition()
        self._meetings: dict = {}        # (group, k) -> _Meeting
        self._issued: dict = {}          # (device, group) -> collectives issued over group
        self._mail: dict = {}            # (source, target, k) -> _Letter
        self._sent: dict = {}            # (source, target) -> letters sent
        self._received: dict = {}        # (source, target) -> letters received
        self._failure: _Failure | None = None
        self._threads: list[_DeviceThread] | None = None

    # --- failure and waiting (callers hold self._cond) ----------------------------------

    @property
    def failure(self) -> CollectiveError | None:
        """The error every device now raises, or None while all is well."""
        f = self._failure
        return None if f is None else CollectiveError(f.message, f.device, f.cause)

    def abort(self, device, exc: BaseException) -> None:
        with self._cond:
            if self._failure is None:
                self._failure = _Failure(device, exc, f"device {device} failed: "
                                         f"{describe_error(exc)}")
            self._cond.notify_all()

    def _fail(self, device, cause, message):
        """Records a failure (if none yet) and returns the error for the caller to raise."""
        if self._failure is None:
            self._failure = _Failure(device, cause, message)
            self._cond.notify_all()
        return CollectiveError(message, device, cause)

    def _check_failed(self, device, what: str) -> None:
        f = self._failure
        if f is not None:
            raise CollectiveError(f"{what} on device {device}: {f.message}", f.device, f.cause)

    def _wait(self, device, what: str, ready, missing) -> None:
        """Waits on self._cond until ready(); raises on failure or timeout."""
        deadline = None
        while True:
            self._check_failed(device, what)
            if ready():
                return
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.timeout
            elif now >= deadline:
                absent = missing()
                message = (f"device {device} waited {self.timeout:g} s in {what} for "
                           f"device(s) {', '.join(map(str, absent))}")
                raise self._fail(absent[0] if len(absent) == 1 else None, None, message)
            self._cond.wait(deadline - now)

    # --- meetings ------------------------------------------------------------------------

    def _meet(self, device, group, kind, post, signature, stages) -> _Meeting:
        """Posts and waits until every member of `group` has: stage 0 of `stages`."""
        index = group.index(device)
        what = f"{kind} over group {group}"
        with self._cond:
            self._check_failed(device, what)
            k = self._issued.get((device, group), 0)
            self._issued[(device, group)] = k + 1
            key = (group, k)
            meeting = self._meetings.get(key)
            if meeting is None:
                meeting = _Meeting(key, kind, signature, device, len(group), stages)
                self._meetings[key] = meeting
            elif (meeting.kind, meeting.signature) != (kind, signature):
                theirs = _describe_signature(meeting.kind, meeting.signature)
                raise self._fail(None, None, (
                    f"devices disagree at their collective #{k} over group {group}: device "
                    f"{meeting.creator} called {theirs}, device {device} called "
                    f"{_describe_signature(kind, signature)}"))
            meeting.posts[index] = post
            self._arrive(device, index, meeting, 0, what, last=stages == 1)
        return meeting

    def _sync(self, device, group, meeting: _Meeting, stage: int, last: bool = False) -> None:
        with self._cond:
            self._arrive(device, group.index(device), meeting, stage,
                         f"{meeting.kind} over group {group}", last)

    def _arrive(self, device, index, meeting, stage, what, last) -> None:
        meeting.stage_of[index] = stage
        meeting.reached[stage] += 1
        size = len(meeting.posts)
        if meeting.reached[stage] == size:
            if last:
                del self._meetings[meeting.key]
            self._cond.notify_all()
            return
        group = meeting.key[0]
        self._wait(device, what, lambda: meeting.reached[stage] == size,
                   lambda: [group[i] for i, s in enumerate(meeting.stage_of) if s < stage])

    # --- the collectives -----------------------------------------------------------------

    def _alone(self, device, what: str) -> None:
        with self._cond:
            self._check_failed(device, what)

    def _all_reduce(self, device, group, send, recv, reduction: Reduction) -> None:
        n = len(group)
        in_place = same_memory(send, recv, "all_reduce")
        if n == 1:
            self._alone(device, "all_reduce")
            if not in_place:
                np.copyto(recv, send)
            return
        signature = (f"{send.dtype}[{send.size}]", reduction.name or "callable")
        if send.nbytes > SMALL_BYTES and reduction.name is not None:
            fold = native_fold(reduction.name, send.dtype, n, n, False)
            if fold is not None:
                fold_nt = native_fold(reduction.name, send.dtype, n, n, True) \
                    if send.nbytes >= NONTEMPORAL_BYTES else None
                meeting = self._meet(device, group, "all_reduce", (send, recv),
                                     signature + ("native",), 2)
                lo, hi = chunk_bounds(send.size, n, group.index(device))
                # In place is safe: element i of every buffer is read and written by
                # this member only, reads first.
                run_native_fold(fold, fold_nt, [p[0] for p in meeting.posts],
                                [p[1] for p in meeting.posts], lo, hi)
                self._sync(device, group, meeting, 1, last=True)
                return
        if send.nbytes <= SMALL_BYTES and not in_place:
            meeting = self._meet(device, group, "all_reduce", (send, recv), signature, 2)
            _fold([p[0] for p in meeting.posts], recv, reduction, scratch=False)
            self._sync(device, group, meeting, 1, last=True)
            return
        meeting = self._meet(device, group, "all_reduce", (send, recv), signature, 3)
        me = group.index(device)
        lo, hi = chunk_bounds(send.size, n, me)
        _fold([p[0][lo:hi] for p in meeting.posts], recv[lo:hi], reduction, scratch=in_place)
        self._sync(device, group, meeting, 1)
        for k in range(n):
            if k != me:
                lo, hi = chunk_bounds(send.size, n, k)
                np.copyto(recv[lo:hi], meeting.posts[k][1][lo:hi])
        self._sync(device, group, meeting, 2, last=True)

    def _all_gather(self, device, group, send, recv) -> None:
        meeting = self._meet(device, group, "all_gather", send,
                             (f"{send.dtype}[{send.size}]",), 2)
        size = send.size
        for k, peer_send in enumerate(meeting.posts):
            np.copyto(recv[k * size:(k + 1) * size], peer_send)
        self._sync(device, group, meeting, 1, last=True)

    def _reduce_scatter(self, device, group, send, recv, reduction: Reduction) -> None:
        meeting = self._meet(device, group, "reduce_scatter", send,
                             (f"{send.dtype}[{send.size}]", reduction.name or "callable"), 2)
        size, me = recv.size, group.index(device)
        parts = [peer_send[me * size:(me + 1) * size] for peer_send in meeting.posts]
        if len(parts) == 1:
            np.copyto(recv, parts[0])
        else:
            _fold(parts, recv, reduction, scratch=False)
        self._sync(device, group, meeting, 1, last=True)

    def _all_to_all(self, device, group, sends, recvs) -> None:
        meeting = self._meet(device, group, "all_to_all", sends, (str(sends[0].dtype),), 2)
        me = group.index(device)
        for k, peer_sends in enumerate(meeting.posts):
            source, target = peer_sends[me], recvs[k]
            if source.size != target.size:
                with self._cond:
                    raise self._fail(None, None, (
                        f"all_to_all over group {group}: device {group[k]} sends "
                        f"{source.size} elements to device {device}, which expects "
                        f"{target.size}"))
            np.copyto(target, source)
        self._sync(device, group, meeting, 1, last=True)

    def _permute(self, device, send_to, recv_from, send, recv) -> None:
        what = f"permute (to {send_to}, from {recv_from})"
        letter = None
        with self._cond:
            self._check_failed(device, what)
            if send_to is not None:
                k = self._sent.get((device, send_to), 0)
                self._sent[(device, send_to)] = k + 1
                letter = _Letter(send)
                self._mail[(device, send_to, k)] = letter
                self._cond.notify_all()
            if recv_from is not None:
                k = self._received.get((recv_from, device), 0)
                self._received[(recv_from, device)] = k + 1
                key = (recv_from, device, k)
                self._wait(device, what, lambda: key in self._mail, lambda: [recv_from])
                incoming = self._mail.pop(key)
                if incoming.data.dtype != recv.dtype or incoming.data.size != recv.size:
                    raise self._fail(None, None, (
                        f"permute: device {recv_from} sends {incoming.data.dtype}"
                        f"[{incoming.data.size}] to device {device}, which expects "
                        f"{recv.dtype}[{recv.size}]"))
        if recv_from is not None:
            np.copyto(recv, incoming.data)
            with self._cond:
                incoming.taken = True
                self._cond.notify_all()
        if letter is not None:
            with self._cond:
                self._wait(device, what, lambda: letter.taken, lambda: [send_to])

    def _broadcast(self, device, group, root, buf) -> None:
        meeting = self._meet(device, group, "broadcast", buf,
                             (f"{buf.dtype}[{buf.size}]", f"root {root}"), 2)
        if device != root:
            np.copyto(buf, meeting.posts[group.index(root)])
        self._sync(device, group, meeting, 1, last=True)

    def _barrier(self, device) -> None:
        self._meet(device, self._all, "barrier", None, (), 1)

    def _check_same_program(self, device, fingerprint: str) -> None:
        meeting = self._meet(device, self._all, "check_same_program", fingerprint, (), 1)
        if len(set(meeting.posts)) > 1:
            raise CollectiveError("devices run different programs (fingerprints differ): "
                                  + describe_mismatch(dict(enumerate(meeting.posts))))

    # --- driving the devices -------------------------------------------------------------

    def _device_threads(self) -> list["_DeviceThread"]:
        """One thread per device, started by the first `run` and kept for the next ones
        (a training loop runs a step per call: starting N threads each time cost more
        than a small step's kernels); `close` ends them."""
        if self._threads is None:
            self._threads = [_DeviceThread(f"xlapy-device-{d}") for d in range(self.num_devices)]
            # A communicator dropped without close() still ends its threads.
            weakref.finalize(self, _close_all, self._threads)
        return self._threads

    def close(self) -> None:
        super().close()
        threads, self._threads = self._threads, None
        _close_all(threads or ())

    def run(self, fn, timeout: float | None = None) -> list:
        """Calls fn(device) on a thread per device; returns the results in device order.

        A device that raises aborts the communicator (the others then raise
        CollectiveError naming it); `run` re-raises that device's own exception. With
        `timeout`, devices still running after that many seconds abort the communicator
        and `run` raises TimeoutError naming them.
        """
        n = self.num_devices
        results, errors = [None] * n, [None] * n

        def body(device):
            try:
                results[device] = fn(device)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors[device] = exc
                if not isinstance(exc, CollectiveError):
                    self.abort(device, exc)

        threads = self._device_threads()
        finished = [threading.Event() for _ in range(n)]
        for d, thread in enumerate(threads):
            thread.submit(lambda d=d: body(d), finished[d])
        deadline = None if timeout is None else time.monotonic() + timeout
        for event in finished:
            event.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        running = [d for d, e in enumerate(finished) if not e.is_set()]
        if running:
            self.abort(running[0], TimeoutError(f"still running after {timeout} s"))
            raise TimeoutError(f"device(s) {', '.join(map(str, running))} still running "
                               f"after {timeout} s")
        if any(e is not None for e in errors):
            failure = self._failure
            if failure is not None and failure.device is not None \
                    and errors[failure.device] is failure.cause:
                first = failure.device
            else:
                first = next(d for d, e in enumerate(errors) if e is not None)
            error = errors[first]
            if hasattr(error, "add_note") and not isinstance(error, CollectiveError):
                error.add_note(f"(on device {first} of {n})")
            raise error
        return results


class _DeviceThread:
    """A daemon thread that runs the work `run` hands it, one piece at a time."""

    def __init__(self, name: str):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, work, finished: threading.Event) -> None:
        self._queue.put((work, finished))

    def close(self) -> None:
        self._queue.put(None)

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, finished = item
            try:
                work()                   # catches everything itself (run's body)
            finally:
                finished.set()


def _close_all(threads) -> None:
    for thread in threads:
        thread.close()


def _fold(parts: list, out: np.ndarray, reduction: Reduction, scratch: bool) -> None:
    """out = ((parts[0] op parts[1]) op parts[2]) ..., block by block.

    With `scratch`, each block is folded in a temporary first: `out` may be one of the
    parts (an in-place all-reduce), which must not change before it is read.
    """
    size = out.size
    if size == 0:
        return
    block = max(1, BLOCK_BYTES // max(1, out.itemsize))
    buffer = np.empty(min(block, size), out.dtype) if scratch else None
    for start in range(0, size, block):
        stop = min(start + block, size)
        target = out[start:stop] if buffer is None else buffer[:stop - start]
        reduction.apply(parts[0][start:stop], parts[1][start:stop], target)
        for part in parts[2:]:
            reduction.apply(target, part[start:stop], target)
        if buffer is not None:
            np.copyto(out[start:stop], target)
