"""Collective thunks: the HLO collectives as calls of the runtime's Communicator.

One compiled program serves every device; what differs per device (its group, its
permute peers, its replica and partition) is looked up at run time from the
execution's `DeviceContext` (thunks.py), in tables built at compile time from
hlo/collectives.py (the device numbering and group modes are HLO business):

    all-reduce            comm.all_reduce per operand; a reducer that is one
                          add/multiply/maximum/minimum/and/or of its parameters runs as
                          the communicator's named op (MPI's own reduction where it
                          computes what XLA does), any other as a callable that
                          evaluates the reducer computation on numpy arrays
    all-gather            comm.all_gather
    reduce-scatter        comm.reduce_scatter
    all-to-all            comm.all_to_all: with `dimensions=`, the operand's parts along
                          the dimension; in tuple form, operand j to member j
    collective-permute    comm.permute with the device's (source, target); a device that
                          is no pair's target gets zeros
    collective-broadcast  comm.broadcast from the first device of the group
    ragged-all-to-all     comm.all_gather of the input and of the offset and size arrays
                          (equal shapes on every member), then each device writes its
                          own received slices (hlo's ragged_exchange, the evaluator's
                          code): G times the traffic of a true ragged exchange, but no
                          communicator method of its own (XLA:CPU has no thunk for it)
    replica-id, partition-id   the context's numbers as u32
    X-start / X-done      the start issues comm.start_X (the device's communication
                          thread runs it, in issue order) and leaves the PendingCollective
                          in the execution's `keep`; the done waits for it

The communicator moves flat C-ordered buffers and gathers/scatters along the major
dimension. Where the dimension is not the major one, or a layout is not the default,
the thunk rearranges on the host with numpy around the flat call: the operand is
viewed logically, the dimension moved to the front, the result written back through
a logical view of its physical buffer. A group of one needs no communicator.

Values of the narrow types (bf16, the 8-bit floats, s2/s4/u2/u4) live in their own
buffers (ml_dtypes arrays on the host side): the communicator combines them with
ml_dtypes' arithmetic, which computes in f32 and rounds each step.

Ordering (`schedule`): a -start moves as early and a -done as late as the slots they
touch allow, so independent kernels run while the collective is in flight; a plain
all-reduce is compiled as a start/done pair and stays synchronous where no kernel
fits in between. The order is a function of the program alone, so every device
issues its collectives in the same order (MPI needs that). The -done lists the
start's operands among its reads: buffer assignment keeps them live until it.
"""
from __future__ import annotations

import numpy as np

from ..hlo import collectives
from ..hlo.dtypes import numpy_dtype
from ..hlo.eval_collective import ragged_exchange
from ..hlo.eval_common import recognize_binary_reducer
from ..hlo.eval_reduce import call_reducer
from ..hlo.evaluator import EvalContext

from .executable import physical_dims
from .thunks import SINGLE_DEVICE, array_at

# The reducers the communicator runs by name (runtime REDUCE_OPS).
_NAMED_OPS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
              "and": "and", "or": "or"}


class Buffer:
    """One array leaf: its slot, and how to view it physically or logically."""

    def __init__(self, slot: int, shape):
        self.slot = slot
        self.dims = tuple(shape.dims)
        self.phys_dims = physical_dims(shape)
        self.dtype = numpy_dtype(shape.element_type)
        self.element_type = shape.element_type
        order = list(reversed(shape.minor_to_major())) if shape.dims else []
        self.default = order == sorted(order)
        self.to_logical = tuple(int(i) for i in np.argsort(order)) if order else ()
        self.order = tuple(order)

    def physical(self, table) -> np.ndarray:
        return array_at(table[self.slot], self.phys_dims, self.dtype)

    def logical(self, table) -> np.ndarray:
        view = self.physical(table)
        return view if self.default else view.transpose(self.to_logical)

    def same_storage(self, other: "Buffer") -> bool:
        """True when both hold the same logical array in the same bytes order."""
        return self.dims == other.dims and (self.default and other.default or
                                            self.order == other.order)


def _leaves(slots, shapes) -> list[Buffer]:
    return [Buffer(s, shape) for s, shape in zip(slots, shapes)]


def _device_table(instr, R: int, P: int, fn) -> tuple:
    return tuple(fn(d) for d in range(R * P))


def _groups(instr, R: int, P: int) -> tuple:
    """Per device, its group (rank order)."""
    table: list = [None] * (R * P)
    for g in collectives.device_groups(instr, R, P):
        for d in g:
            table[d] = g
    return tuple(table)


def _major_first(value: np.ndarray, dim: int) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(value, dim, 0))


def _flat_along(buffer: Buffer, dim: int) -> bool:
    """True if the buffer, in its own bytes, is already 'dimension `dim` major': the
    default layout and every dimension before `dim` of size 1."""
    return buffer.default and all(n == 1 for n in buffer.dims[:dim])


def reducer_op(comp):
    """The communicator's op for a collective's to_apply computation: a name, or a
    callable."""
    opcode = recognize_binary_reducer(comp)
    if opcode in _NAMED_OPS:
        return _NAMED_OPS[opcode]
    ctx = EvalContext()

    def combine(a, b):
        (out,) = call_reducer(comp, ctx, [a], [b])
        out = np.broadcast_to(np.asarray(out), a.shape)
        if out.dtype != a.dtype:
            with np.errstate(all="ignore"):
                out = out.astype(a.dtype)
        return out
    return combine


def _staged(src: "Buffer", dst: "Buffer", table):
    """(send, recv, staging) for a call that keeps the shape: the buffers themselves when
    they share storage (in place), else a contiguous copy of the operand and a fresh
    array that `_finisher` writes into the result (staging; None when in place)."""
    if src.same_storage(dst):
        return src.physical(table), dst.physical(table), None
    send = np.ascontiguousarray(src.logical(table))
    out = np.empty_like(send)
    return send, out, out


def _finisher(table, pendings, after, dim: int | None = None):
    """The `finish` of an issue: waits for its calls, then writes each (result, staging)
    of `after` whose staging is not None into the result (`dim`: the staging holds that
    dimension first)."""
    def finish():
        for pending in pendings:
            if pending is not None:
                pending.wait()
        for dst, out in after:
            if out is not None:
                dst.logical(table)[...] = out if dim is None else np.moveaxis(out, 0, dim)
    return finish


class CollectiveThunk:
    """Base: `issue(table, ctx, start)` makes the calls (started ones return their
    PendingCollectives) and returns a function that finishes the result once they are
    done (or None). `run` is issue-and-finish; the async halves split it."""

    def __init__(self, name: str, reads, writes):
        self.name = name
        self.reads, self.writes = list(reads), list(writes)

    def link(self, lookup, threads: int | None = None) -> None:
        if getattr(self, "reducer", None) is not None:
            self.op = reducer_op(self.reducer)     # (a callable is not stored on disk)

    def issue(self, table, ctx, start: bool):
        raise NotImplementedError

    def run(self, table, address, keep, ctx=None) -> None:
        _, finish = self.issue(table, ctx or SINGLE_DEVICE, False)
        if finish is not None:
            finish()


def _call(ctx, start: bool, kind: str, *args):
    """comm.<kind>(ctx.device, *args), or comm.start_<kind>: returns the pending or None."""
    method = getattr(ctx.comm, ("start_" if start else "") + kind)
    return method(ctx.device, *args)


class AllReduceThunk(CollectiveThunk):
    def __init__(self, instr, operands: list[Buffer], results: list[Buffer], R: int, P: int):
        super().__init__(instr.name, [b.slot for b in operands], [b.slot for b in results])
        self.operands, self.results = operands, results
        self.groups = _groups(instr, R, P)
        self.reducer = instr.attrs["to_apply"]
        self.op = reducer_op(self.reducer)

    def issue(self, table, ctx, start: bool):
        group = self.groups[ctx.device]
        pendings, after = [], []
        for src, dst in zip(self.operands, self.results):
            if len(group) == 1 or ctx.comm is None:
                dst.logical(table)[...] = src.logical(table)
                continue
            send, recv, out = _staged(src, dst, table)
            pendings.append(_call(ctx, start, "all_reduce", group, send, recv, self.op))
            after.append((dst, out))
        return pendings, _finisher(table, pendings, after)


class AlongDimThunk(CollectiveThunk):
    """all-gather and reduce-scatter: one call per operand along the instruction's
    dimension, which the staging puts first when the layouts do not already have it
    outermost. `kind` names the communicator's call; `rows(n, size)` is the staged
    result's first extent for a group of n."""
    kind = ""

    def __init__(self, instr, operands: list[Buffer], results: list[Buffer], R: int, P: int):
        super().__init__(instr.name, [b.slot for b in operands], [b.slot for b in results])
        self.operands, self.results = operands, results
        self.groups = _groups(instr, R, P)
        (self.dim,) = instr.dims()

    def rows(self, n: int, size: int) -> int:
        raise NotImplementedError

    def extra(self) -> tuple:
        return ()

    def issue(self, table, ctx, start: bool):
        group, d = self.groups[ctx.device], self.dim
        pendings, after = [], []
        for src, dst in zip(self.operands, self.results):
            if len(group) == 1 or ctx.comm is None:
                dst.logical(table)[...] = src.logical(table)
                continue
            if _flat_along(src, d) and _flat_along(dst, d):
                send, recv, out = src.physical(table), dst.physical(table), None
            else:
                send = _major_first(src.logical(table), d)
                recv = out = np.empty((self.rows(len(group), send.shape[0]),) + send.shape[1:],
                                      send.dtype)
            pendings.append(_call(ctx, start, self.kind, group, send, recv, *self.extra()))
            after.append((dst, out))
        return pendings, _finisher(table, pendings, after, d)


class AllGatherThunk(AlongDimThunk):
    kind = "all_gather"

    def rows(self, n: int, size: int) -> int:
        return size * n


class ReduceScatterThunk(AlongDimThunk):
    kind = "reduce_scatter"

    def __init__(self, instr, operands: list[Buffer], results: list[Buffer], R: int, P: int):
        super().__init__(instr, operands, results, R, P)
        self.reducer = instr.attrs["to_apply"]
        self.op = reducer_op(self.reducer)

    def rows(self, n: int, size: int) -> int:
        return size // n

    def extra(self) -> tuple:
        return (self.op,)


class AllToAllThunk(CollectiveThunk):
    def __init__(self, instr, operands: list[Buffer], results: list[Buffer], R: int, P: int):
        super().__init__(instr.name, [b.slot for b in operands], [b.slot for b in results])
        self.operands, self.results = operands, results
        self.groups = _groups(instr, R, P)
        self.dim = instr.dims()[0] if "dimensions" in instr.attrs else None

    def issue(self, table, ctx, start: bool):
        group = self.groups[ctx.device]
        if len(group) == 1 or ctx.comm is None:
            for src, dst in zip(self.operands, self.results):
                dst.logical(table)[...] = src.logical(table)
            return [], None
        n = len(group)
        if self.dim is not None:
            (src,), (dst,) = self.operands, self.results
            d = self.dim
            moved = _major_first(src.logical(table), d)
            out = np.empty_like(moved)
            m = moved.shape[0] // n
            sends = [moved[j * m:(j + 1) * m] for j in range(n)]
            recvs = [out[j * m:(j + 1) * m] for j in range(n)]
            pending = _call(ctx, start, "all_to_all", group, sends, recvs)

            def finish():
                if pending is not None:
                    pending.wait()
                dst.logical(table)[...] = np.moveaxis(out, 0, d)
            return [pending], finish
        direct = all(b.default for b in self.operands + self.results)
        if direct:
            sends = [b.physical(table) for b in self.operands]
            recvs = [b.physical(table) for b in self.results]
        else:
            sends = [np.ascontiguousarray(b.logical(table)) for b in self.operands]
            recvs = [np.empty(b.dims, b.dtype) for b in self.results]
        pending = _call(ctx, start, "all_to_all", group, sends, recvs)

        def finish():
            if pending is not None:
                pending.wait()
            if not direct:
                for dst, out in zip(self.results, recvs):
                    dst.logical(table)[...] = out
        return [pending], finish


class PermuteThunk(CollectiveThunk):
    """collective-permute; `extra` slots (the -start's u32 contexts) are set to zero."""

    def __init__(self, instr, operands: list[Buffer], results: list[Buffer], R: int, P: int,
                 extra: list[Buffer] = ()):
        super().__init__(instr.name, [b.slot for b in operands],
                         [b.slot for b in results] + [b.slot for b in extra])
        self.operands, self.results, self.extra = operands, results, list(extra)
        self.peers = _device_table(instr, R, P,
                                   lambda d: collectives.permute_peers(instr, d, R, P))

    def issue(self, table, ctx, start: bool):
        source, target = self.peers[ctx.device]
        for b in self.extra:
            b.physical(table)[...] = 0
        pendings, after = [], []
        for src, dst in zip(self.operands, self.results):
            if source is None and target is None:
                dst.physical(table)[...] = 0
                continue
            if ctx.comm is None or (source == ctx.device and target == ctx.device):
                dst.logical(table)[...] = src.logical(table)
                continue
            send, recv, out = _staged(src, dst, table)
            if source is None:
                dst.physical(table)[...] = 0
                out = None
            pendings.append(_call(ctx, start, "permute", target, source, send, recv))
            after.append((dst, out))
        return pendings, _finisher(table, pendings, after)


class RaggedAllToAllThunk(CollectiveThunk):
    """ragged-all-to-all as all-gathers plus a local scatter (see the module docstring)."""

    def __init__(self, instr, operands: list[Buffer], results: list[Buffer], R: int, P: int):
        super().__init__(instr.name, [b.slot for b in operands], [b.slot for b in results])
        self.operands, (self.result,) = operands, results
        self.groups = _groups(instr, R, P)

    def issue(self, table, ctx, start: bool):
        group = self.groups[ctx.device]
        rank = group.index(ctx.device)
        values = [np.ascontiguousarray(b.logical(table)) for b in self.operands]
        shared = (0, 2, 3, 4)        # the input, input_offsets, send_sizes, output_offsets
        gathered: dict[int, list] = {}
        pendings, staged = [], []
        for k in shared:
            v = values[k]
            if len(group) == 1 or ctx.comm is None or v.size == 0:
                gathered[k] = [v] * len(group)
                continue
            recv = np.empty((len(group) * v.shape[0],) + v.shape[1:], v.dtype)
            pendings.append(_call(ctx, start, "all_gather", group, v, recv))
            staged.append((k, recv))

        def finish():
            for pending in pendings:
                if pending is not None:
                    pending.wait()
            for k, recv in staged:
                gathered[k] = np.split(recv, len(group))
            try:
                out = ragged_exchange(rank, gathered[0], gathered[2], gathered[3], gathered[4],
                                      values[5], values[1])
            except ValueError as e:
                raise ValueError(f"{self.name} (ragged-all-to-all) on device {ctx.device}: "
                                 f"{e}") from None
            self.result.logical(table)[...] = out
        return pendings, finish


class BroadcastThunk(CollectiveThunk):
    def __init__(self, instr, operands: list[Buffer], results: list[Buffer], R: int, P: int):
        super().__init__(instr.name, [b.slot for b in operands], [b.slot for b in results])
        self.operands, self.results = operands, results
        self.groups = _groups(instr, R, P)

    def issue(self, table, ctx, start: bool):
        group = self.groups[ctx.device]
        pendings, after = [], []
        for src, dst in zip(self.operands, self.results):
            dst.logical(table)[...] = src.logical(table)
            if len(group) == 1 or ctx.comm is None:
                continue
            if dst.default:
                buf, out = dst.physical(table), None
            else:
                buf = out = np.ascontiguousarray(src.logical(table))
            pendings.append(_call(ctx, start, "broadcast", group, group[0], buf))
            after.append((dst, out))
        return pendings, _finisher(table, pendings, after)


class DeviceIdThunk(CollectiveThunk):
    """replica-id or partition-id: the context's number, as u32."""

    def __init__(self, instr, result: Buffer):
        super().__init__(instr.name, [], [result.slot])
        self.result = result
        self.field = "replica" if instr.opcode == "replica-id" else "partition"

    def issue(self, table, ctx, start: bool):
        self.result.physical(table)[...] = getattr(ctx, self.field)
        return [], None


class StartThunk:
    """The -start half: issues `collective` started, parks (pendings, finish) in `keep`."""

    def __init__(self, collective: CollectiveThunk):
        self.collective = collective
        self.name = collective.name + ".start"
        self.key = ("collective", collective.name)     # unique in its computation
        self.reads, self.writes = list(collective.reads), list(collective.writes)

    def link(self, lookup, threads: int | None = None) -> None:
        self.collective.link(lookup, threads)

    def run(self, table, address, keep, ctx=None) -> None:
        ctx = ctx or SINGLE_DEVICE
        keep[self.key] = self.collective.issue(table, ctx, ctx.comm is not None)


class DoneThunk:
    """The -done half: waits for its start and finishes the result. It reads the start's
    operands (so they stay live until now) and writes its results (their readers come
    after it)."""

    def __init__(self, start: StartThunk):
        self.start = start                 # (for the schedule; a copy after a disk load)
        self.key = start.key
        self.name = start.collective.name + ".done"
        self.reads = list(start.reads)
        self.writes = list(start.writes)

    def link(self, lookup, threads: int | None = None) -> None:
        pass

    def run(self, table, address, keep, ctx=None) -> None:
        entry = keep.pop(self.key, None)
        if entry is None:
            raise RuntimeError(f"backend_cpu: {self.name} ran before its start")
        _, finish = entry
        if finish is not None:
            finish()


# --- ordering ------------------------------------------------------------------------

def schedule(thunks: list, dependencies) -> list:
    """`thunks` reordered: starts as early, dones as late as `dependencies` (per thunk,
    the earlier thunks it needs, on slots) allow; everything else in program order. A
    start whose done directly follows it becomes its synchronous collective again."""
    if not any(isinstance(t, StartThunk) for t in thunks):
        return thunks
    deps = dependencies(thunks)
    users: list[list[int]] = [[] for _ in thunks]
    waiting = [len(set(ds)) for ds in deps]
    for j, ds in enumerate(deps):
        for i in set(ds):
            users[i].append(j)
    rank = [0 if isinstance(t, StartThunk) else 2 if isinstance(t, DoneThunk) else 1
            for t in thunks]
    ready = sorted((rank[j], j) for j in range(len(thunks)) if waiting[j] == 0)
    order = []
    while ready:
        _, j = ready.pop(0)
        order.append(j)
        for u in users[j]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append((rank[u], u))
        ready.sort()
    result = []
    for j in order:
        t = thunks[j]
        if isinstance(t, DoneThunk) and result and result[-1] is t.start:
            result[-1] = t.start.collective          # nothing to overlap: synchronous
        else:
            result.append(t)
    return result
