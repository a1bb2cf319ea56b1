"""Streams and events: in-order queues of work, and the order between them.

A `Stream` is a FIFO of work items (kernel launches, copies, host callbacks,
event records and waits) executed one after another. Execution happens on a
worker of the inter-op pool, so work on two streams runs at the same time,
while each launch spreads its partitions over the intra-op pool.

    host:   s1.launch(k1) ─ s1.record_event(e) ─────────────── s2.block_host_until_done()
    s1:     [k1]────────────[signal e]
    s2:     s2.wait_event(e) ··· parked, no thread held ···[k2]───[done]

States of a stream: IDLE (nothing queued), SCHEDULED (a drain task is queued
on the pool), RUNNING (some thread is executing its items), BLOCKED (the next
item waits for an event that has not fired). A blocked stream gives its worker
back and is rescheduled by the event's callback, so waits never pin a thread
and even a one-worker pool cannot deadlock on cross-stream events.

Errors: an exception raised by a work item is stored, the stream's remaining
work up to the next synchronization is skipped (its inputs may be garbage),
and `block_host_until_done()` raises the original exception object. The stream
is then clean and usable. An event recorded after a failure carries the error:
streams waiting on it adopt it, and `Event.wait()` raises it.

Latency: `block_host_until_done()` on a stream whose drain task has not started
yet runs the work itself on the calling thread (no wake-up of a worker to wait
for); an `inline=True` stream always runs work on the enqueuing thread when it
is idle -- the lean path for tiny, latency-bound calls.
"""
from __future__ import annotations

import collections
import threading

from .kernel import Kernel, LaunchDims, launch
from .memory import address_of, copy_bytes
from .thread_pool import ThreadPool, inter_op_thread_pool

_IDLE, _SCHEDULED, _RUNNING, _BLOCKED = "idle", "scheduled", "running", "blocked"
# Work item kinds: (_WORK, fn, args) | (_RECORD, signal) | (_SYNC, signal) | (_WAIT, signal)
_WORK, _RECORD, _SYNC, _WAIT = 0, 1, 2, 3


class _Signal:
    """A one-shot flag set by a stream, with the error (if any) of the work before it."""
    __slots__ = ("_lock", "_flag", "_callbacks", "error")

    def __init__(self):
        self._lock = threading.Lock()
        self._flag = threading.Event()
        self._callbacks: list | None = []
        self.error: BaseException | None = None

    def set(self, error: BaseException | None = None) -> None:
        with self._lock:
            self.error = error
            callbacks, self._callbacks = self._callbacks, None
            self._flag.set()
        for callback in callbacks or ():
            callback()

    def is_set(self) -> bool:
        return self._flag.is_set()

    def add_callback(self, callback) -> bool:
        """Calls `callback()` when set; False (and no call) if it is set already."""
        with self._lock:
            if self._callbacks is None:
                return False
            self._callbacks.append(callback)
            return True

    def wait(self, timeout: float | None = None) -> bool:
        return self._flag.wait(timeout)


class Event:
    """A point in a stream's work: `record_event` places it, `wait_event` waits for it.

    Each record replaces the previous one; a wait refers to the record current at
    the time the wait is enqueued (as in CUDA). Waiting on an event never recorded
    is a no-op.
    """
    __slots__ = ("_signal",)

    def __init__(self):
        self._signal: _Signal | None = None

    def _new_record(self) -> _Signal:
        self._signal = _Signal()
        return self._signal

    def query(self) -> bool:
        """True when the latest record has been reached (or there is none)."""
        signal = self._signal
        return signal is None or signal.is_set()

    def wait(self, timeout: float | None = None) -> None:
        """Blocks the host until the latest record is reached; raises its stream's error."""
        signal = self._signal
        if signal is None:
            return
        if not signal.wait(timeout):
            raise TimeoutError(f"Event.wait: not reached within {timeout} s")
        if signal.error is not None:
            raise signal.error


def _check_event(method: str, event) -> None:
    if not isinstance(event, Event):
        raise TypeError(f"Stream.{method}: expected a runtime.Event, got {type(event).__name__}")


class Stream:
    """An in-order queue of work, executed on the inter-op pool (see the module doc)."""

    def __init__(self, executor=None, *, inline: bool = False,
                 intra_op_pool: ThreadPool | None = None,
                 inter_op_pool: ThreadPool | None = None):
        self.executor = executor
        self.inline = inline
        self._intra_op_pool = intra_op_pool          # None: the process-wide default
        self._inter_op_pool = inter_op_pool
        self._lock = threading.Lock()
        self._pending: collections.deque = collections.deque()
        self._state = _IDLE
        self._error: BaseException | None = None     # touched only by the running thread
        self._runner: int | None = None              # ident of the thread running the items

    # ----------------------------------------------------------------- enqueueing
    def launch(self, kernel: Kernel, launch_dims: LaunchDims, buffers) -> None:
        """Runs `kernel` over `launch_dims` with `buffers` (ctypes void* array or address).

        A ctypes array is kept alive by the queue; with a bare address the caller
        keeps the table (and the buffers) alive until the launch has run.
        """
        if not isinstance(kernel, Kernel):
            raise TypeError(f"Stream.launch: expected a runtime.Kernel, got {type(kernel).__name__}")
        if not isinstance(launch_dims, LaunchDims):
            raise TypeError(f"Stream.launch: expected LaunchDims, got {type(launch_dims).__name__}")
        self._enqueue((_WORK, launch, (kernel, launch_dims, buffers, self._intra_op_pool)))

    def memcpy(self, dst, src, nbytes: int | None = None) -> None:
        """Copies bytes between DeviceMemory, contiguous numpy arrays or addresses."""
        address_of(dst), address_of(src)          # reject bad arguments now, not at sync
        self._enqueue((_WORK, copy_bytes, (dst, src, nbytes, self._intra_op_pool)))

    def then_host_callback(self, fn) -> None:
        """Calls `fn()` on the stream's thread once the work before it is done."""
        if not callable(fn):
            raise TypeError(f"Stream.then_host_callback: {fn!r} is not callable")
        self._enqueue((_WORK, fn, ()))

    def record_event(self, event: Event) -> None:
        """Marks `event` reached once all work enqueued so far is done."""
        _check_event("record_event", event)
        self._enqueue((_RECORD, event._new_record()))

    def wait_event(self, event: Event) -> None:
        """Makes later work on this stream wait until `event`'s latest record is reached."""
        _check_event("wait_event", event)
        signal = event._signal
        if signal is not None:
            self._enqueue((_WAIT, signal))

    def _enqueue(self, item) -> None:
        with self._lock:
            self._pending.append(item)
            if self._state != _IDLE:
                return                            # whoever runs the stream will get to it
            if self.inline:
                self._state = _RUNNING
            else:
                self._state = _SCHEDULED
        if self.inline:
            self._run()
        else:
            self._pool().schedule(self._drain)

    # ----------------------------------------------------------------- synchronization
    def block_host_until_done(self) -> None:
        """Waits for all work enqueued so far; raises the first error since the last sync."""
        if self._runner == threading.get_ident():
            raise RuntimeError("Stream.block_host_until_done called from work running on the "
                               "same stream: it would wait for itself forever")
        with self._lock:
            if not self._pending and self._state == _IDLE:
                error, self._error = self._error, None
                marker = steal = None
            else:
                marker = _Signal()
                self._pending.append((_SYNC, marker))
                steal = self._state == _SCHEDULED
                if steal:                         # the drain task has not started: do it here
                    self._state = _RUNNING
        if marker is None:
            if error is not None:
                raise error
            return
        if steal:
            self._run()
        marker.wait()
        if marker.error is not None:
            raise marker.error

    def query(self) -> bool:
        """True when all enqueued work is done."""
        with self._lock:
            return not self._pending and self._state == _IDLE

    # ----------------------------------------------------------------- execution
    def _pool(self) -> ThreadPool:
        return self._inter_op_pool or inter_op_thread_pool()

    def _drain(self) -> None:
        with self._lock:
            if self._state != _SCHEDULED:         # stolen by a host that synchronized
                return
            self._state = _RUNNING
        self._run()

    def _resume(self) -> None:
        """Event callback for a BLOCKED stream: schedule it again."""
        with self._lock:
            if self._state != _BLOCKED:
                return
            self._state = _SCHEDULED
        self._pool().schedule(self._drain)

    def _run(self) -> None:
        """Executes items until the queue is empty or a wait blocks (caller holds RUNNING)."""
        pending = self._pending
        self._runner = threading.get_ident()
        while True:
            with self._lock:
                if not pending:
                    self._state = _IDLE
                    self._runner = None
                    return
                item = pending.popleft()
            kind = item[0]
            if kind == _WORK:
                if self._error is None:
                    try:
                        item[1](*item[2])
                    except BaseException as exc:  # noqa: BLE001 - surfaces at the next sync
                        self._error = exc
            elif kind == _SYNC:
                error, self._error = self._error, None
                item[1].set(error)
            elif kind == _RECORD:
                item[1].set(self._error)
            else:
                signal = item[1]
                if not signal.is_set():
                    with self._lock:
                        pending.appendleft(item)
                        self._state = _BLOCKED
                        self._runner = None
                    if not signal.add_callback(self._resume):
                        self._resume()            # it fired in between: go on elsewhere
                    return
                if signal.error is not None and self._error is None:
                    self._error = signal.error

    def __repr__(self):
        return f"Stream({self._state}, {len(self._pending)} pending{', inline' if self.inline else ''})"
