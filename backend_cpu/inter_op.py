"""Inter-op parallelism: independent thunks of one program on different streams.

A program's thunks come in schedule order, and running them in that order on
the calling thread is always correct. When two *large* kernels do not depend on
each other (neither reads what the other writes, directly or through a chain),
they may run at the same time on two runtime `Stream`s, with `Event`s for the
dependencies that cross streams:

    thunks:   k1(a)  k2(b)  k3(k1, k2)
    stream 0: [k1]──────────────wait e2──[k3]
    stream 1: [k2]──record e2

Dependencies come from memory, not just from slots: temporaries share the
arena, so two thunks conflict when any bytes they touch overlap and one of them
writes. So that reuse does not chain independent branches together, programs
with independent large kernels lay out their arena knowing which thunks may run
at the same time (`overlap_ancestors`, buffer_assignment.py): a temp only reuses
bytes whose readers all run before its writer in every order.

`plan(thunks, slots, max_streams)` returns None for the common case -- a single
chain, tiny kernels, kernels already split over every core by intra-op
parallelism, control flow, or `inter_op_threads` = 1 -- and the program then
runs its thunks inline, paying nothing for this module.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from .. import runtime
from ..runtime import profiler

from .thunks import CopyThunk, KernelThunk

# A kernel reading and writing at least this many bytes is worth a stream of its own
# (a stream hop costs tens of microseconds; such a kernel takes a hundred or more).
INTER_OP_MIN_BYTES = 1 << 20


@dataclass(frozen=True)
class StreamPlan:
    """Which stream runs each thunk, which events it waits for, which it records."""
    num_streams: int
    stream: tuple[int, ...]                # per thunk
    waits: tuple[tuple[int, ...], ...]     # per thunk: the thunks whose events it waits on
    recorded: frozenset                    # thunks followed by an event record


def _regions(slots, slot_ids) -> list:
    """The memory a thunk touches: arena byte ranges for temps, whole slots otherwise
    (`slots` None: every slot on its own, as before the arena is laid out)."""
    regions = []
    for s in slot_ids:
        slot = slots[s] if slots is not None else None
        if slot is not None and slot.kind == "temp":
            regions.append(("arena", slot.offset, slot.offset + max(slot.nbytes, 1)))
        else:
            regions.append(("slot", s, s + 1))
    return regions


def _overlap(a, b) -> bool:
    return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x in a for y in b)


def slot_dependencies(thunks) -> list[list[int]]:
    """`dependencies` on slots alone, in one pass: the last writer of each slot, and
    the readers since."""
    last_writer: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    deps = []
    for j, t in enumerate(thunks):
        found = {last_writer[s] for s in list(t.reads) + list(t.writes) if s in last_writer}
        for s in t.writes:
            found.update(readers.get(s, ()))
        for s in t.reads:
            readers.setdefault(s, []).append(j)
        for s in t.writes:
            last_writer[s] = j
            readers[s] = []
        found.discard(j)
        deps.append(sorted(found))
    return deps


def dependencies(thunks, slots=None) -> list[list[int]]:
    """Per thunk, the earlier thunks it must wait for (read-after-write, write-after-read,
    write-after-write on overlapping memory; `slots` None: on the same slots)."""
    if slots is None:
        return slot_dependencies(thunks)
    reads = [_regions(slots, t.reads) for t in thunks]
    writes = [_regions(slots, t.writes) for t in thunks]
    deps = []
    for j in range(len(thunks)):
        deps.append([i for i in range(j) if _overlap(writes[i], reads[j] + writes[j])
                     or _overlap(reads[i], writes[j])])
    return deps


def _is_large_kernel(thunk) -> bool:
    return isinstance(thunk, KernelThunk) and thunk.work_bytes >= INTER_OP_MIN_BYTES


def _leaves_cores_idle(thunk) -> bool:
    """A linked kernel launched on fewer partitions than the machine has cores: only
    then can another kernel use the rest (two kernels already on every core would
    only take turns, plus the streams' hand-offs)."""
    return thunk.dims is not None and len(thunk.dims.slices) < (os.cpu_count() or 1)


def ancestors(deps) -> list[int]:
    """Per thunk, a bit mask of every thunk that must run before it (transitively)."""
    masks = []
    for ds in deps:
        mask = 0
        for i in ds:
            mask |= masks[i] | (1 << i)
        masks.append(mask)
    return masks


def overlap_ancestors(thunks) -> list[int] | None:
    """Before the arena is laid out: the ancestor masks when independent large kernels
    would overlap (`plan` would give them streams: they leave cores idle with today's
    intra-op threads), and buffer_assignment then never lets two thunks that may run at
    the same time share arena bytes; else None, and the arena is reused freely.

    Keeping branches apart costs memory (the GPT block's training step: 240.9 MiB
    against 185.0 reused freely), so it is paid only where streams are expected. If
    the threads change before `link`, the plan is still right: it follows the bytes
    that temps share (`dependencies`), and only overlaps less."""
    if sum(map(_is_large_kernel, thunks)) < 2 \
            or not all(isinstance(t, (KernelThunk, CopyThunk)) for t in thunks):
        return None                         # the common case, found in one pass
    cores = os.cpu_count() or 1
    idle = sum(_is_large_kernel(t) and t.partitions_for() < cores for t in thunks)
    if idle < 2:
        return None
    deps = slot_dependencies(thunks)
    return ancestors(deps) if _has_independent_large_kernels(
        thunks, deps, lambda t: t.partitions_for() < cores) else None


def _has_independent_large_kernels(thunks, deps, also=lambda t: True) -> bool:
    ancestors_of = ancestors(deps)
    large = [j for j, t in enumerate(thunks) if _is_large_kernel(t) and also(t)]
    return any(not (ancestors_of[j] >> i) & 1 for n, i in enumerate(large) for j in large[n + 1:])


def plan(thunks, slots, max_streams: int) -> StreamPlan | None:
    """A stream assignment, or None when running in order on the caller is as good."""
    if max_streams < 2 or sum(_is_large_kernel(t) and _leaves_cores_idle(t) for t in thunks) < 2:
        return None                         # the common case, found in one pass
    # Independent on slots is necessary for independent in memory: check it first.
    if not _has_independent_large_kernels(thunks, slot_dependencies(thunks), _leaves_cores_idle):
        return None
    # Host thunks (while, conditional, call) bind slots at run time: keep them in order.
    if not all(isinstance(t, (KernelThunk, CopyThunk)) for t in thunks):
        return None
    deps = dependencies(thunks, slots)
    if not _has_independent_large_kernels(thunks, deps, _leaves_cores_idle):
        return None
    stream, tails, waits = [], [], []
    for j, ds in enumerate(deps):
        # Continue the chain of a dependency that is still the last on its stream;
        # else open a stream; else (all in use) queue behind the latest dependency.
        chosen = next((stream[i] for i in reversed(ds) if tails[stream[i]] == i), None)
        if chosen is None:
            chosen = len(tails) if len(tails) < max_streams else (stream[ds[-1]] if ds else 0)
            if chosen == len(tails):
                tails.append(None)
        stream.append(chosen)
        tails[chosen] = j
        waits.append(tuple(i for i in ds if stream[i] != chosen))
    recorded = frozenset(i for w in waits for i in w)
    return StreamPlan(len(tails), tuple(stream), tuple(waits), recorded)


def _traced(rec, pid: int, row, thunk, table, address, keep) -> None:
    """thunk.run as a span on the stream's thread (runtime.profiler)."""
    name, cat, args = row
    start = profiler.now()
    try:
        thunk.run(table, address, keep)
    finally:
        rec.add(name, cat, start, profiler.now(), pid, args)


def run(stream_plan: StreamPlan, thunks, table, address, keep, trace=None) -> None:
    """Enqueues every thunk on its stream and waits for all of them.

    Every stream is synchronized even when one fails (the others still use the
    buffer table); the first error is raised afterwards. `trace`: (recorder, pid,
    (name, category, args) per thunk) while a trace runs: each thunk is a span.
    """
    streams = [runtime.Stream() for _ in range(stream_plan.num_streams)]
    events = {i: runtime.Event() for i in stream_plan.recorded}
    for j, thunk in enumerate(thunks):
        stream = streams[stream_plan.stream[j]]
        for i in stream_plan.waits[j]:
            stream.wait_event(events[i])
        if trace is None:
            stream.then_host_callback(functools.partial(thunk.run, table, address, keep))
        else:
            rec, pid, rows = trace
            stream.then_host_callback(functools.partial(_traced, rec, pid, rows[j], thunk,
                                                        table, address, keep))
        if j in events:
            stream.record_event(events[j])
    first_error = None
    for stream in streams:
        try:
            stream.block_host_until_done()
        except BaseException as e:      # noqa: BLE001 - re-raised once all streams are done
            first_error = first_error or e
    if first_error is not None:
        raise first_error
