"""The memory-aware order of a program's instructions (schedule.py) and the arena packing
(buffer_assignment.py): any order the scheduler picks is topological and keeps ordered
instructions in place; on a backward pass it keeps fewer bytes alive than the post-order,
and the results do not change."""
from __future__ import annotations

import numpy as np

from xlapy import backend_cpu, hlo
from xlapy.backend_cpu import schedule
from xlapy.backend_cpu.buffer_assignment import Slot, assign_arena

# Two "gradients" g1, g2 (4 KiB each) and their updates, as the backend sees them after
# fusion: the post-order computes both gradients before either update; the memory order
# updates as soon as a gradient exists.
GRADIENTS = """
HloModule grads

ENTRY main {
  x = f32[32,32] parameter(0)
  w1 = f32[32,32] parameter(1)
  w2 = f32[32,32] parameter(2)
  g1 = f32[32,32] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  e = f32[32,32] exponential(x)
  g2 = f32[32,32] dot(e, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  u1 = f32[32,32] subtract(w1, g1)
  u2 = f32[32,32] subtract(w2, g2)
  ROOT t = (f32[32,32], f32[32,32]) tuple(u1, u2)
}
"""


def live_peak(order, comp) -> int:
    """Bytes of non-parameter, non-root values alive at once, walking `order`."""
    root_parts = set(map(id, comp.root.operands)) | {id(comp.root)}
    last = {}
    for step, x in enumerate(order):
        for o in x.operands:
            last[id(o)] = step
    peak, alive = 0, {}
    for step, x in enumerate(order):
        if x.opcode not in ("parameter", "constant", "tuple") and id(x) not in root_parts:
            alive[id(x)] = x.shape.nbytes
        peak = max(peak, sum(alive.values()))
        for o in x.operands:
            if last.get(id(o)) == step:
                alive.pop(id(o), None)
    return peak


def is_topological(order) -> bool:
    seen = set()
    for x in order:
        if any(id(o) not in seen for o in x.operands + x.control_predecessors):
            return False
        seen.add(id(x))
    return True


def test_updates_run_as_soon_as_their_gradient_exists():
    comp = hlo.parse_module(GRADIENTS).entry
    order = schedule.memory_order(comp)
    assert is_topological(order) and len(order) == len(comp.post_order())
    names = [x.name for x in order]
    assert names.index("u1") < names.index("g2") or names.index("u2") < names.index("g1")
    assert live_peak(order, comp) < live_peak(comp.post_order(), comp)


def test_results_do_not_change():
    module = hlo.parse_module(GRADIENTS)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((32, 32)).astype(np.float32) for _ in range(3)]
    got = backend_cpu.compile(module).run(*args)
    want = hlo.evaluate(module, args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_ordered_instructions_keep_their_order():
    text = """
HloModule ordered, replica_count=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  x = f32[64] parameter(0)
  big = f32[64,64] broadcast(x), dimensions={0}
  r1 = f32[64,64] all-reduce(big), replica_groups={}, to_apply=add
  y = f32[64] negate(x)
  r2 = f32[64] all-reduce(y), replica_groups={}, to_apply=add
  s = f32[64] reduce(r1, f32[] constant(0)), dimensions={1}, to_apply=add
  ROOT t = (f32[64], f32[64]) tuple(s, r2)
}
"""
    comp = hlo.parse_module(text).entry
    order = [x.name for x in schedule.memory_order(comp)]
    assert order.index("r1") < order.index("r2")


def test_every_corpus_program_is_scheduled_topologically():
    import pathlib
    corpus = pathlib.Path(__file__).parent.parent / "corpus"
    for path in sorted(corpus.glob("*.hlo"))[:60]:
        module = hlo.parse_module(path.read_text())
        for comp in module.computations:
            order = schedule.memory_order(comp)
            assert is_topological(order), f"{path.name}: {comp.name}"
            assert len(order) == len(comp.post_order())


def test_best_fit_packing_beats_first_fit_where_small_temps_split_the_arena():
    # s0 small and short-lived; s1 large, written after s0 died; first fit puts s2
    # (small, alive with s1) at 0 and then s3 (large, alive with s2 but after s1) past
    # it. Largest first puts s1 and s3 at 0 and the small ones after them.
    slots = [Slot("temp", 64), Slot("temp", 1024), Slot("temp", 64), Slot("temp", 1024)]
    schedule_ = [([], [0]), ([0], [2]), ([], [1]), ([1, 2], []), ([2], [3]), ([3], [])]
    size = assign_arena(slots, schedule_)
    assert size <= 1024 + 64
    for a, b in ((1, 2), (2, 3)):          # alive together: disjoint
        lo_a, lo_b = slots[a].offset, slots[b].offset
        assert lo_a + slots[a].nbytes <= lo_b or lo_b + slots[b].nbytes <= lo_a


# A data-parallel step's tail: two gradients, each exchanged by an async all-reduce. g1
# is the larger one and comes first in the program (the backward pass made it first).
ASYNC_GRADIENTS = """
HloModule async_grads, replica_count=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  x = f32[64,64] parameter(0)
  y = f32[64,32] parameter(1)
  w1 = f32[64,64] parameter(2)
  w2 = f32[64,32] parameter(3)
  g1 = f32[64,64] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s1 = f32[64,64] all-reduce-start(g1), replica_groups={{0,1}}, to_apply=add
  g2 = f32[64,32] dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s2 = f32[64,32] all-reduce-start(g2), replica_groups={{0,1}}, to_apply=add
  d1 = f32[64,64] all-reduce-done(s1)
  d2 = f32[64,32] all-reduce-done(s2)
  u1 = f32[64,64] subtract(w1, d1)
  u2 = f32[64,32] subtract(w2, d2)
  ROOT t = (f32[64,64], f32[64,32]) tuple(u1, u2)
}
"""


def test_async_collectives_start_early_and_finish_late():
    # The memory order alone would compute the smaller gradient first (it allocates
    # less) and run each update right after its done, leaving no work between a start
    # and its done: the exchange could not hide behind anything.
    comp = hlo.parse_module(ASYNC_GRADIENTS).entry
    names = [x.name for x in schedule.memory_order(comp)]
    assert names.index("g1") < names.index("s1") < names.index("g2") < names.index("d1")
    assert names.index("d1") > names.index("s2")


def test_async_gradients_give_the_evaluators_numbers_on_two_devices():
    module = hlo.parse_module(ASYNC_GRADIENTS)
    rng = np.random.default_rng(1)
    args = [[rng.standard_normal(s).astype(np.float32) for s in ((64, 64), (64, 32), (64, 64), (64, 32))]
            for _ in range(2)]
    want = hlo.evaluate_devices(module, args)
    got = backend_cpu.compile(module, backend_cpu.CompileOptions(num_devices=2)).run_devices(args)
    for g_dev, w_dev in zip(got, want):
        for g, w in zip(g_dev, w_dev):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-3)
