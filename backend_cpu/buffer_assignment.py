"""Buffer assignment: which memory every array value of a computation lives in.

A *slot* is one entry of the executable's buffer table (`void* buffers[]`,
the first argument of every kernel). Each array value gets a slot of one kind:

    param     an entry parameter, bound per call (in place when contiguous)
    constant  a literal owned by the executable, bound once
    temp      a temporary: an offset in the one temp arena of a call
    output    a result: a fresh array per call, handed to the caller
    dynamic   produced by a host thunk (while, conditional, call) at run time

Aliasing instructions (tuple, get-tuple-element, bitcast, copy, reshape of a
row-major array) get no slot: they reuse their operand's.

Temporaries share one 64-byte aligned arena: walking the thunks in schedule
order, a temp is placed at the lowest offset that does not overlap any temp
still live (first fit), and its space is released after its last reader runs,
so later temps reuse it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ALIGNMENT = 64


@dataclass
class Slot:
    kind: str                       # param | constant | temp | output | dynamic
    nbytes: int
    shape: object = None            # the Shape of the array stored there
    param_index: int | None = None  # for params: the flattened parameter leaf
    array: np.ndarray | None = None # for constants: the physical bytes
    offset: int | None = None       # for temps: offset in the arena


def _round_up(n: int, multiple: int = ALIGNMENT) -> int:
    return -(-n // multiple) * multiple


@dataclass
class ArenaPlan:
    size: int = 0
    live: list = field(default_factory=list)   # (offset, end, slot) currently placed


def assign_arena(slots: list[Slot], schedule: list[tuple[list[int], list[int]]]) -> int:
    """Places every temp slot in the arena; returns its size in bytes.

    `schedule` is, per thunk in execution order, (slots it reads, slots it writes).
    """
    last_use: dict[int, int] = {}
    for step, (reads, writes) in enumerate(schedule):
        for s in list(reads) + list(writes):
            last_use[s] = step
    plan = ArenaPlan()
    for step, (reads, writes) in enumerate(schedule):
        for s in writes:
            slot = slots[s]
            if slot.kind == "temp" and slot.offset is None:
                slot.offset = _first_fit(plan, _round_up(max(slot.nbytes, 1)))
                plan.live.append((slot.offset, slot.offset + _round_up(max(slot.nbytes, 1)), s))
                plan.size = max(plan.size, plan.live[-1][1])
        # Release after the step: a kernel's outputs never overlap its own inputs.
        plan.live = [(lo, hi, s) for lo, hi, s in plan.live if last_use.get(s, step) > step]
    return plan.size


def _first_fit(plan: ArenaPlan, nbytes: int) -> int:
    offset = 0
    for lo, hi, _ in sorted(plan.live):
        if offset + nbytes <= lo:
            break
        offset = max(offset, hi)
    return offset
