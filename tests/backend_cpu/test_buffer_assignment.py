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


def test_first_fit_in_order_places_as_the_general_walk_does():
    """The in-order first fit (kept sorted, released at each temp's last step) gives the
    offsets of the general walk told that every earlier thunk runs before each thunk:
    random schedules with unused, rewritten, zero-byte and non-temp slots."""
    import random
    from xlapy.backend_cpu import buffer_assignment as ba
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 40)
        kinds = [rng.choice(["temp", "temp", "temp", "param", "output"]) for _ in range(n)]
        sizes = [rng.choice([0, 1, 64, 100, 4096, rng.randint(1, 10000)]) for _ in range(n)]
        steps = rng.randint(1, 30)
        schedule = [(rng.sample(range(n), rng.randint(0, min(3, n))),
                     rng.sample(range(n), rng.randint(0, min(2, n)))) for _ in range(steps)]
        placed = []
        for ancestors in (None, [(1 << k) - 1 for k in range(steps)]):
            slots = [Slot(kind, nbytes) for kind, nbytes in zip(kinds, sizes)]
            size = ba._online_first_fit(slots, schedule, ancestors)
            placed.append((size, [s.offset for s in slots]))
        assert placed[0] == placed[1]
