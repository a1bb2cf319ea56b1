"""Thunks: the steps of an executable, run against one buffer table (in order, or on
streams when independent: inter_op.py).

- `KernelThunk` launches a JIT-compiled kernel over its partitions on the
  runtime's intra-op thread pool (one partition runs inline: tiny kernels pay
  only the ctypes call).
- `CopyThunk` copies bytes between slots (a result that is a parameter or a
  constant must still be a fresh array).
- `WhileThunk`, `ConditionalThunk` and `CallThunk` run sub-programs (compiled
  computations with buffer tables of their own) on the host, and bind the
  arrays they return to this program's dynamic slots. A while whose cond and body
  are only kernels and copies runs as one call of native code instead
  (native_loop.py).
- collective_thunks.py holds the thunks that talk to other devices.

Every thunk has `link(lookup, threads=None)` (bind machine code; `threads`: the
intra-op threads one execution may use, None = the runtime option) and
`run(table, address, keep, ctx=None)`. `ctx` is the `DeviceContext` of the
execution: which device runs it and the communicator to its peers. It is passed
explicitly down into while/conditional/call sub-programs (no thread-local: the
threads of streams and pools would not see one); None means device 0 of one.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .. import runtime
from ..runtime import profiler as _profiler

from . import native_loop, target as targets


def array_at(address: int, shape, dtype) -> np.ndarray:
    """A numpy view of memory we own at `address` (no copy)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)


class DeviceContext:
    """Who runs an execution: `device` (global id), its `replica` and `partition`
    (hlo/collectives.py numbering) and `comm`, the runtime Communicator to the other
    devices (None when the program runs on one device)."""
    __slots__ = ("device", "replica", "partition", "comm")

    def __init__(self, device: int = 0, replica: int = 0, partition: int = 0, comm=None):
        self.device, self.replica, self.partition, self.comm = device, replica, partition, comm


SINGLE_DEVICE = DeviceContext()


def link_threads(threads: int | None) -> int:
    """The intra-op threads a kernel may use: `threads`, else the runtime option."""
    return runtime.get_options().intra_op_threads if threads is None else max(1, threads)


class KernelThunk:
    def __init__(self, name: str, extent: int, work_bytes: int, reads, writes,
                 partitions: int | None = None):
        self.name, self.extent, self.work_bytes = name, extent, work_bytes
        self.partitions = partitions       # the emitter's own choice, if it made one
        self.reads, self.writes = list(reads), list(writes)
        # Bound by `link` (the disk cache stores thunks without them: cache_format.py).
        self.kernel = None
        self.dims = None
        self._single = None

    def partitions_for(self, threads: int | None = None) -> int:
        """The partitions a launch gets with `threads` intra-op threads (None: the
        runtime option)."""
        threads = link_threads(threads)
        if self.partitions is not None:
            return max(1, min(self.partitions, threads, self.extent))
        if self.work_bytes >= targets.current().parallel_min_bytes and self.extent > 1:
            return min(threads, self.extent)
        # Less work runs as one partition on the caller (the compile target's fact,
        # which the pipeline's horizontal fusion reads too).
        return 1

    def link(self, lookup, threads: int | None = None) -> None:
        self.kernel = runtime.Kernel(lookup(self.name), self.name)
        self.dims = runtime.LaunchDims(self.extent, self.partitions_for(threads))
        # The lean path: one slice runs inline, straight through ctypes.
        self._single = (self.kernel._call, *self.dims.slices[0]) if len(self.dims.slices) == 1 \
            else None

    def run(self, table, address, keep, ctx=None) -> None:
        if self._single is not None:
            call, begin, end = self._single
            call(address, begin, end)
        elif self.dims.slices:
            runtime.launch(self.kernel, self.dims, address)


class CopyThunk:
    def __init__(self, src: int, dst: int, nbytes: int):
        self.src, self.dst, self.nbytes = src, dst, nbytes
        self.reads, self.writes = [src], [dst]

    def link(self, lookup, threads: int | None = None) -> None:
        pass

    def run(self, table, address, keep, ctx=None) -> None:
        if self.nbytes:
            ctypes.memmove(table[self.dst], table[self.src], self.nbytes)


def _bind(table, slots, arrays, keep: dict) -> None:
    """Points dynamic slots at arrays a sub-program returned (kept alive in `keep`)."""
    for slot, array in zip(slots, arrays):
        table[slot] = array.ctypes.data
        keep[slot] = array


class CallThunk:
    """Runs one sub-program on operand slots; its results become dynamic slots."""

    def __init__(self, program, reads, writes):
        self.program, self.reads, self.writes = program, list(reads), list(writes)

    def link(self, lookup, threads: int | None = None) -> None:
        self.program.link(lookup, threads)

    def run(self, table, address, keep, ctx=None) -> None:
        _bind(table, self.writes, self.program.execute([table[s] for s in self.reads], ctx),
              keep)


class WhileThunk:
    """while cond(state): state = body(state). When cond and body are only kernels and
    copies, the whole loop is one call of native code (native_loop.py: `loop` is
    "native"); else it runs on the host (`loop` "host", `host_reason` says why), with
    the state as arrays. Under a trace it always runs on the host (every kernel a span)."""

    def __init__(self, cond, body, reads, writes, leaf_shapes, used=None, donated=None):
        self.cond, self.body = cond, body
        self.reads, self.writes = list(reads), list(writes)
        self.leaf_shapes = leaf_shapes        # (dims, numpy dtype) per state leaf
        # Per leaf: does anything read its final value (None: all, or unknown)?
        self.used = None if used is None else [bool(u) for u in used]
        # Per leaf: is its init's slot handed over (updated there; the write slot is the
        # read slot)? None: none is.
        self.donated = None if donated is None else [bool(d) for d in donated]
        # Bound by `link` (transient in the disk cache: cache_format.py).
        self._native = None
        self.loop = None                      # "native" | "host" once linked
        self.host_reason = None
        self.trips = None                     # the last native run's trip count

    def link(self, lookup, threads: int | None = None) -> None:
        self.cond.link(lookup, threads)
        self.body.link(lookup, threads)
        plan = native_loop.plan(self.cond, self.body, self.leaf_shapes,
                                getattr(self, "donated", None))
        if isinstance(plan, str):
            self._native, self.loop, self.host_reason = None, "host", plan
        else:
            self._native, self.loop, self.host_reason = plan, "native", None

    def run(self, table, address, keep, ctx=None) -> None:
        native = self._native
        if native is not None and _profiler.active is None:
            state, self.trips = native.run([table[s] for s in self.reads],
                                           getattr(self, "used", None))
            for slot, read, array in zip(self.writes, self.reads, state):
                if array is None:
                    # A final value nobody reads (a dead relayout kernel may still load
                    # it): the init it equals, not handed to anyone.
                    table[slot] = table[read]
                else:
                    table[slot] = array.ctypes.data
                    keep[slot] = array
            return
        # Start from copies: the loop must never hand back (or write) its inputs, but
        # those handed over to it.
        donated = getattr(self, "donated", None) or [False] * len(self.reads)
        state = [array_at(table[s], dims, dt) if given else array_at(table[s], dims, dt).copy()
                 for s, (dims, dt), given in zip(self.reads, self.leaf_shapes, donated)]
        while True:
            addresses = [a.ctypes.data for a in state]
            if not bool(self.cond.execute(addresses, ctx)[0].reshape(())):
                break
            results = self.body.execute(addresses, ctx)
            # (None: a leaf the body updated in place, in the array it was given)
            state = [old if new is None else new for old, new in zip(state, results)]
        _bind(table, self.writes, state, keep)


class ConditionalThunk:
    """Runs the branch chosen by a pred (true = 0) or an s32 index (out of range = last)."""

    def __init__(self, branches, index_slot, index_dtype, operand_slots, writes):
        self.branches = branches
        self.index_slot, self.index_dtype = index_slot, np.dtype(index_dtype)
        self.operand_slots = operand_slots    # per branch: the slots of its operand leaves
        self.reads = [index_slot] + [s for slots in operand_slots for s in slots]
        self.writes = list(writes)

    def link(self, lookup, threads: int | None = None) -> None:
        for branch in self.branches:
            branch.link(lookup, threads)

    def run(self, table, address, keep, ctx=None) -> None:
        value = array_at(table[self.index_slot], (), self.index_dtype).item()
        if self.index_dtype == np.bool_:
            choice = 0 if value else 1
        else:
            choice = value if 0 <= value < len(self.branches) else len(self.branches) - 1
        program = self.branches[choice]
        results = program.execute([table[s] for s in self.operand_slots[choice]], ctx)
        _bind(table, self.writes, results, keep)
