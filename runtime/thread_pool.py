"""A persistent thread pool: `parallel_for` for intra-op work, `schedule` for streams.

Workers are started once and then sleep on a queue. `parallel_for(n, fn)` is
work sharing, not work stealing: the job is a shared counter of indices; the
calling thread and up to `n - 1` workers each claim the next index until none is
left. Because the caller always takes part, a job finishes even when every
worker is busy elsewhere (another stream's launch, or a nested `parallel_for`
issued from inside `fn`) -- there is no way to deadlock by waiting on workers.

Python threads give real parallelism here because the work items are ctypes calls
into JIT-compiled kernels, and ctypes releases the GIL while native code runs.

Two process-wide pools exist (sizes from `runtime.config`):
- `default_thread_pool()`: the intra-op pool that runs the partitions of a launch.
  `intra_op_threads` counts the caller, so it has `intra_op_threads - 1` workers;
  with 1 it has none and everything runs on the calling thread.
- `inter_op_thread_pool()`: the workers that execute streams; `inter_op_threads`
  workers, so that many streams can run at once.
"""
from __future__ import annotations

import itertools
import os
import queue
import threading
import traceback
import weakref

from . import config


class _ParallelJob:
    """One `parallel_for` call: indices handed out by a shared counter."""
    __slots__ = ("_fn", "_n", "_take", "_lock", "_left", "_done", "error")

    def __init__(self, n: int, fn):
        self._fn, self._n = fn, n
        # next() on an itertools.count is one C call, hence atomic under the GIL.
        self._take = itertools.count().__next__
        self._lock = threading.Lock()
        self._left = n
        # A plain lock used as a one-shot event: cheaper than threading.Event.
        self._done = threading.Lock()
        self._done.acquire()
        self.error: BaseException | None = None

    def run(self) -> None:
        """Claims and runs indices until none is left (called by caller and workers)."""
        fn, n, take = self._fn, self._n, self._take
        finished = 0
        while (i := take()) < n:
            if self.error is None:          # after a failure, remaining indices are skipped
                try:
                    fn(i)
                except BaseException as exc:  # noqa: BLE001 - re-raised by wait()
                    with self._lock:
                        if self.error is None:
                            self.error = exc
            finished += 1
        if finished:
            with self._lock:
                self._left -= finished
                last = self._left == 0
            if last:
                self._done.release()

    def wait(self) -> None:
        self._done.acquire()
        if self.error is not None:
            raise self.error


def _worker_loop(tasks: queue.SimpleQueue) -> None:
    while True:
        task = tasks.get()
        if task is None:
            return
        try:
            task()
        except BaseException:  # noqa: BLE001 - a worker must survive a faulty task
            traceback.print_exc()


def _stop_workers(tasks: queue.SimpleQueue, count: int) -> None:
    for _ in range(count):
        tasks.put(None)


class ThreadPool:
    """`num_threads` threads of parallelism: the caller plus `num_threads - 1` workers.

    `workers` overrides the number of worker threads (the inter-op pool uses it: a
    stream is always drained by a worker, so it needs `num_threads` of them).
    Workers are daemon threads; they exit when the pool is garbage-collected or
    `shutdown()` is called.
    """

    def __init__(self, num_threads: int, name: str = "xlapy-pool", *, workers: int | None = None):
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"ThreadPool: num_threads must be an integer >= 1, got {num_threads!r}")
        self.num_threads = num_threads
        self.name = name
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        count = num_threads - 1 if workers is None else workers
        self._threads = [
            threading.Thread(target=_worker_loop, args=(self._tasks,),
                             name=f"{name}-{i}", daemon=True)
            for i in range(count)]
        for thread in self._threads:
            thread.start()
        # Workers only hold the queue, so the pool can be collected; then they stop.
        self._finalizer = weakref.finalize(self, _stop_workers, self._tasks, count)

    @property
    def num_workers(self) -> int:
        return len(self._threads)

    def parallel_for(self, n: int, fn) -> None:
        """Runs `fn(0) .. fn(n - 1)` across the pool; returns when all are done.

        The calling thread runs a share. The first exception raised by any `fn(i)` is
        re-raised here (indices not yet started when it happened are skipped).
        """
        if n <= 0:
            return
        if n == 1 or not self._threads:
            for i in range(n):
                fn(i)
            return
        job = _ParallelJob(n, fn)
        run = job.run
        for _ in range(min(n - 1, len(self._threads))):
            self._tasks.put(run)
        run()
        job.wait()

    def schedule(self, fn) -> None:
        """Runs `fn()` later on a worker (or now, on the caller, if there is none).

        `fn` should handle its own errors; one that escapes is printed and dropped.
        """
        if self._threads:
            self._tasks.put(fn)
        else:
            fn()

    def shutdown(self) -> None:
        """Stops the workers after the tasks already queued; the pool is unusable after."""
        self._finalizer()
        self._threads = []

    def __repr__(self):
        return f"ThreadPool({self.num_threads}, name={self.name!r}, workers={self.num_workers})"


_pools_lock = threading.Lock()
_pools: dict[str, ThreadPool] = {}      # "intra" and "inter", made on first use


def _shared_pool(kind: str) -> ThreadPool:
    pool = _pools.get(kind)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(kind)
            if pool is None:
                options = config.get_options()
                if kind == "intra":
                    pool = ThreadPool(options.intra_op_threads, name="xlapy-intra-op")
                else:
                    threads = options.inter_op_threads
                    pool = ThreadPool(threads, name="xlapy-inter-op", workers=threads)
                _pools[kind] = pool
    return pool


def default_thread_pool() -> ThreadPool:
    """The process-wide intra-op pool, sized by `intra_op_threads`."""
    return _shared_pool("intra")


def inter_op_thread_pool() -> ThreadPool:
    """The process-wide pool whose workers execute streams, sized by `inter_op_threads`."""
    return _shared_pool("inter")


def _forget_pools(_options) -> None:
    # Rebuilt lazily with the new sizes; the old ones stop once nothing holds them.
    with _pools_lock:
        _pools.clear()


config.on_configure(_forget_pools)
# A forked child has none of the parent's worker threads: start fresh pools there.
os.register_at_fork(after_in_child=lambda: _forget_pools(None))
