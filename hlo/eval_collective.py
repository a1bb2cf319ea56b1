"""Reference semantics of the collectives, replica-id and partition-id.

Each device runs the module in its own thread (`hlo.evaluate_devices`,
eval_devices.py) with an `EvalContext` whose `device` is a `DeviceSlot`: its
device id, the module's replica and partition counts, and the `Rendezvous` the
devices meet at. A collective hands its operands to the rendezvous under the key
(instruction, how many times this device has run it, its group) and waits until
every member of its group has done the same; then each device computes its own
result from all of the group's operands, in rank order (hlo/collectives.py):

    all-reduce            the group's values combined with to_apply, in rank order
                          (a recognized add/multiply/max/min/and/or reducer runs as
                          one numpy reduction; floats accumulate in f64 and round once)
    all-gather            the values concatenated along dimension d, in rank order
    reduce-scatter        the all-reduce, split along d: rank k keeps part k
    all-to-all(d)         each value split along d in G parts; rank k concatenates
                          part k of every member's value, in rank order
    all-to-all (tuple)    result j is operand k of rank j, for rank k
    ragged-all-to-all     the output operand with slices of dimension 0 written in:
                          with N offsets and S = N / G, rank r receives from each
                          member m its slices i = r*S .. r*S+S-1, input[input_offsets[i]
                          : +send_sizes[i]] of m, written at m's output_offsets[i]; the
                          size must equal the receiver's recv_sizes[m*S + k] (XLA's
                          semantics, as jax.lax.ragged_all_to_all documents them); a
                          slice out of bounds or sizes that disagree are errors
    collective-permute    the value of the source device; zeros if none
    collective-broadcast  the value of the group's first device
    -start / -done        the start computes everything; the done picks it out

One participant (a group of one) gets its own values back unchanged. Without a
rendezvous (`hlo.evaluate`, constant folding) the context is device 0 of a
one-device module, and a collective that needs other devices is an error.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from . import collectives
from .dtypes import dtype as _dtype
from .eval_common import EvaluationError, flush, recognize_binary_reducer
from .narrow_types import cast as narrow_cast, widen
from .eval_reduce import call_reducer, ufunc_reduce
from .opcodes import reference


class PeerFailed(EvaluationError):
    """Raised in a device whose collective cannot finish because another device failed."""


class Rendezvous:
    """Where the devices of one `evaluate_devices` run exchange operands.

    `exchange` blocks until the whole group has arrived; it fails at once (instead
    of waiting for the timeout) when a member has failed or has finished its program
    without arriving."""

    def __init__(self, num_devices: int, timeout: float):
        self.num_devices, self.timeout = num_devices, timeout
        self._cond = threading.Condition()
        self._slots: dict[tuple, dict] = {}
        self._finished: set[int] = set()
        self._failed: dict[int, str] = {}

    def exchange(self, key: tuple, group: tuple[int, ...], device: int, value, what: str) -> list:
        deadline = time.monotonic() + self.timeout
        with self._cond:
            slot = self._slots.setdefault(key, {"values": {}, "read": 0})
            slot["values"][device] = value
            self._cond.notify_all()
            while True:
                missing = [d for d in group if d not in slot["values"]]
                if not missing:
                    break
                if self._failed:
                    d, message = next(iter(self._failed.items()))
                    raise PeerFailed(f"{what}: device {d} failed ({message})")
                done = [d for d in missing if d in self._finished]
                if done:
                    raise EvaluationError(
                        f"{what}: device{'s' * (len(done) > 1)} {_join(done)} finished "
                        f"the program without taking part (devices {_join(group)} must all "
                        f"run it the same number of times)")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EvaluationError(f"{what}: timed out after {self.timeout:g} s waiting "
                                          f"for device{'s' * (len(missing) > 1)} "
                                          f"{_join(missing)}")
                self._cond.wait(left)
            values = [slot["values"][d] for d in group]
            slot["read"] += 1
            if slot["read"] == len(group):
                del self._slots[key]
            return values

    def finish(self, device: int) -> None:
        with self._cond:
            self._finished.add(device)
            self._cond.notify_all()

    def fail(self, device: int, error: BaseException) -> None:
        with self._cond:
            if not isinstance(error, PeerFailed):
                self._failed.setdefault(device, str(error).split("\n")[0])
            self._finished.add(device)
            self._cond.notify_all()


def _join(ids) -> str:
    return ", ".join(map(str, ids))


@dataclass
class DeviceSlot:
    """The device an evaluation runs as (device 0 of one by default)."""
    device: int = 0
    replica_count: int = 1
    num_partitions: int = 1
    rendezvous: Rendezvous | None = None
    executions: dict[int, int] = field(default_factory=dict)
    _groups: dict[int, tuple] = field(default_factory=dict)

    @property
    def replica(self) -> int:
        return collectives.replica_of(self.device, self.num_partitions)

    @property
    def partition(self) -> int:
        return collectives.partition_of(self.device, self.num_partitions)

    def group(self, instr) -> tuple[int, ...]:
        """The devices that run `instr` with this one, in rank order."""
        group = self._groups.get(id(instr))
        if group is None:
            try:
                group = collectives.group_of(instr, self.device, self.replica_count,
                                             self.num_partitions)
            except collectives.CollectiveError as e:
                raise EvaluationError(str(e)) from None
            self._groups[id(instr)] = group
        return group

    def exchange(self, instr, values: list) -> list[list]:
        """Every group member's `values` (operand lists), in rank order."""
        group = self.group(instr)
        count = self.executions.get(id(instr), 0)
        self.executions[id(instr)] = count + 1
        if len(group) == 1:
            return [values]
        if self.rendezvous is None:
            raise EvaluationError(f"%{instr.name} ({instr.opcode}) runs on devices "
                                  f"{_join(group)}: evaluate the module with "
                                  f"hlo.evaluate_devices")
        what = f"%{instr.name} ({instr.opcode}) execution {count + 1}"   # the caller names the device
        return self.rendezvous.exchange((id(instr), count, group), group, self.device,
                                        values, what)


# --- device ids ---------------------------------------------------------------------

@reference("replica-id")
def replica_id(instr, operands, ctx):
    return np.asarray(ctx.device.replica, dtype=np.uint32)


@reference("partition-id")
def partition_id(instr, operands, ctx):
    return np.asarray(ctx.device.partition, dtype=np.uint32)


# --- helpers -------------------------------------------------------------------------

def _cast(value, element_type: str) -> np.ndarray:
    value = np.asarray(value)
    target = _dtype(element_type).numpy
    if value.dtype != target:
        if _dtype(element_type).is_narrow:
            return narrow_cast(value, element_type)
        with np.errstate(all="ignore"):
            value = value.astype(target)
    return value


def _result(values: list, shape):
    """One value, or a tuple for a tuple shape (variadic forms)."""
    return values[0] if not shape.is_tuple else tuple(values)


def _leaf_shapes(instr) -> list:
    return [o.shape for o in instr.operands]


def _combine(instr, ctx, values: list[np.ndarray], element_type: str) -> np.ndarray:
    """The group's values (rank order) combined with the instruction's to_apply."""
    if len(values) == 1:
        return values[0]
    # Narrow types combine in their compute type (bf16 in f32), rounded once.
    values = [widen(v) for v in values]
    comp = instr.attrs["to_apply"]
    opcode = recognize_binary_reducer(comp)
    if opcode is None:
        acc = values[0]
        for v in values[1:]:
            (acc,) = call_reducer(comp, ctx, [acc], [v])
        return _cast(np.broadcast_to(acc, values[0].shape), element_type)
    stacked = np.stack(values, axis=-1)
    reduced = ufunc_reduce(opcode, stacked, -1, ctx)
    if stacked.dtype.kind == "f" and opcode in ("add", "multiply"):
        work = np.float32 if stacked.dtype == np.float16 else stacked.dtype
        with np.errstate(all="ignore"):
            reduced = reduced.astype(work)
        return flush(_cast(reduced, element_type), ctx)
    return _cast(reduced, element_type)


def _all_reduce_values(instr, ctx, operands) -> list[np.ndarray]:
    gathered = ctx.device.exchange(instr, list(operands))
    return [_combine(instr, ctx, [member[i] for member in gathered], x.shape.element_type)
            for i, x in enumerate(instr.operands)]


# --- the collectives -------------------------------------------------------------------

@reference("all-reduce", "all-reduce-start")
def all_reduce(instr, operands, ctx):
    return _result(_all_reduce_values(instr, ctx, operands), instr.shape)


@reference("all-reduce-done")
def all_reduce_done(instr, operands, ctx):
    return operands[0]


def _gathered(instr, ctx, operands) -> list[np.ndarray]:
    (d,) = instr.dims()
    gathered = ctx.device.exchange(instr, list(operands))
    return [np.concatenate([member[i] for member in gathered], axis=d)
            for i in range(len(operands))]


@reference("all-gather")
def all_gather(instr, operands, ctx):
    return _result(_gathered(instr, ctx, operands), instr.shape)


@reference("all-gather-start")
def all_gather_start(instr, operands, ctx):
    sent = tuple(operands) if len(operands) > 1 else operands[0]
    gathered = _gathered(instr, ctx, operands)
    return (sent, tuple(gathered) if len(operands) > 1 else gathered[0])


@reference("all-gather-done", "collective-permute-done")
def done_of_start(instr, operands, ctx):
    return operands[0][1]


@reference("reduce-scatter")
def reduce_scatter(instr, operands, ctx):
    (d,) = instr.dims()
    group = ctx.device.group(instr)
    rank = group.index(ctx.device.device)
    reduced = _all_reduce_values(instr, ctx, operands)
    parts = [np.split(r, len(group), axis=d)[rank] for r in reduced]
    return _result(parts, instr.shape)


@reference("all-to-all")
def all_to_all(instr, operands, ctx):
    group = ctx.device.group(instr)
    rank = group.index(ctx.device.device)
    gathered = ctx.device.exchange(instr, list(operands))
    if "dimensions" in instr.attrs:
        (d,) = instr.dims()
        return np.concatenate([np.split(member[0], len(group), axis=d)[rank]
                               for member in gathered], axis=d)
    return tuple(np.array(member[rank], copy=True) for member in gathered)


def _permuted(instr, ctx, operands) -> list[np.ndarray]:
    if collectives.is_in_place_permute(instr):
        raise EvaluationError(collectives.IN_PLACE_PERMUTE_REFUSAL)
    slot = ctx.device
    try:
        source, _ = collectives.permute_peers(instr, slot.device, slot.replica_count,
                                              slot.num_partitions)
    except collectives.CollectiveError as e:
        raise EvaluationError(str(e)) from None
    group = slot.group(instr)
    gathered = slot.exchange(instr, list(operands))
    if source is None:
        return [np.zeros_like(x) for x in operands]
    return [np.array(x, copy=True) for x in gathered[group.index(source)]]


@reference("collective-permute")
def collective_permute(instr, operands, ctx):
    return _result(_permuted(instr, ctx, operands), instr.shape)


@reference("collective-permute-start")
def collective_permute_start(instr, operands, ctx):
    sent = tuple(operands) if len(operands) > 1 else operands[0]
    received = _permuted(instr, ctx, operands)
    contexts = [np.zeros((), np.uint32) for _ in instr.shape.tuple_shapes[2:]]
    return (sent, tuple(received) if len(operands) > 1 else received[0], *contexts)


def ragged_exchange(rank: int, inputs, input_offsets, send_sizes, output_offsets,
                    recv_sizes, output: np.ndarray) -> np.ndarray:
    """ragged-all-to-all's result on the member of place `rank`, from every member's
    input, input_offsets, send_sizes and output_offsets (lists in rank order) and its own
    recv_sizes and output. ValueError for a slice out of bounds or sizes that disagree.
    (The CPU backend's thunk computes with this function too.)"""
    group = len(inputs)
    n = len(recv_sizes)
    if n % group:
        raise ValueError(f"{n} offsets do not split evenly over a group of {group}")
    per = n // group
    result = np.array(output, copy=True)
    rows_out = result.shape[0]
    for m in range(group):
        rows_in = inputs[m].shape[0]
        for k in range(per):
            i = rank * per + k
            start, size = int(input_offsets[m][i]), int(send_sizes[m][i])
            at, expected = int(output_offsets[m][i]), int(recv_sizes[m * per + k])
            if size != expected:
                raise ValueError(f"member {m} sends {size} rows as its slice {i}, but "
                                 f"member {rank} expects {expected} (recv_sizes[{m * per + k}])")
            if size < 0 or not 0 <= start <= rows_in - size or not 0 <= at <= rows_out - size:
                raise ValueError(f"slice {i} of member {m}: rows [{start}, {start + size}) "
                                 f"of an input of {rows_in} rows to rows [{at}, {at + size}) "
                                 f"of an output of {rows_out}: out of bounds")
            result[at:at + size] = inputs[m][start:start + size]
    return result


@reference("ragged-all-to-all")
def ragged_all_to_all(instr, operands, ctx):
    group = ctx.device.group(instr)
    rank = group.index(ctx.device.device)
    gathered = ctx.device.exchange(instr, list(operands))
    try:
        return ragged_exchange(rank, [g[0] for g in gathered], [g[2] for g in gathered],
                               [g[3] for g in gathered], [g[4] for g in gathered],
                               operands[5], operands[1])
    except ValueError as e:
        raise EvaluationError(f"{instr.name}: {e}") from None


@reference("collective-broadcast")
def collective_broadcast(instr, operands, ctx):
    gathered = ctx.device.exchange(instr, list(operands))
    return _result([np.array(x, copy=True) for x in gathered[0]], instr.shape)
