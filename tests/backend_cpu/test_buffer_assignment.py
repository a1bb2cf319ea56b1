"""The temp arena (buffer_assignment.py): first fit over live temps, released bytes
reused only by writers that run after all of the bytes' users."""
from __future__ import annotations

from xlapy.backend_cpu.buffer_assignment import Slot, assign_arena


def _temps(n: int, nbytes: int = 64) -> list[Slot]:
    return [Slot("temp", nbytes) for _ in range(n)]


def test_in_order_a_released_temp_is_reused():
    slots = _temps(3)
    # s0 is read by step 1 only; s2, written at step 2, takes its bytes.
    size = assign_arena(slots, [([], [0]), ([0], [1]), ([1], [2])])
    assert slots[2].offset == slots[0].offset == 0
    assert slots[1].offset == 64 and size == 128


def test_concurrent_writer_avoids_bytes_whose_users_may_still_run():
    """Step 2 may run alongside steps 0 and 1 (no ancestors): it must not take the
    bytes of s0, which step 1 (after step 0) reused for s1, still live until step 3.
    The live s1 and the busy released range of s0 then cover the same bytes, which
    first fit must sort by range alone (their owners, a slot number and None, do not
    compare: a TypeError once, in the gradient of a convnet)."""
    slots = _temps(3)
    schedule = [([], [0]), ([], [1]), ([], [2]), ([1], [])]
    ancestors = [0b0000, 0b0001, 0b0000, 0b0111]
    size = assign_arena(slots, schedule, ancestors)
    assert slots[1].offset == slots[0].offset == 0     # s0 is dead when step 1 writes
    assert slots[2].offset == 64 and size == 128       # neither s0's nor s1's bytes
