"""Inter-op parallelism: independent large kernels of one executable run on two
streams at the same time; chains and tiny programs keep running in order inline."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import runtime
from xlapy.backend_cpu import inter_op

FRESH = backend_cpu.CompileOptions(cache=False, disk_cache=False)

# Two exponentials of 1 MiB inputs that do not depend on each other, then a join.
INDEPENDENT = """HloModule independent
ENTRY e {
  x = f32[512,512] parameter(0)
  y = f32[512,512] parameter(1)
  a = f32[512,512] exponential(x)
  b = f32[512,512] exponential(y)
  ROOT s = f32[512,512] add(a, b)
}"""

CHAIN = """HloModule chain
ENTRY e {
  x = f32[512,512] parameter(0)
  a = f32[512,512] exponential(x)
  b = f32[512,512] negate(a)
  ROOT c = f32[512,512] abs(b)
}"""

TINY = """HloModule tiny
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a = f32[4] exponential(x)
  b = f32[4] exponential(y)
  ROOT s = f32[4] add(a, b)
}"""


@pytest.fixture
def two_streams():
    """Two streams, one partition per kernel (kernels split over every core by intra-op
    parallelism get no streams: see test_kernels_on_every_core_run_inline)."""
    previous = runtime.get_options()
    runtime.configure(inter_op_threads=2, intra_op_threads=1)
    yield
    runtime.configure(inter_op_threads=previous.inter_op_threads,
                      intra_op_threads=previous.intra_op_threads)


def _compile(text):
    return backend_cpu.compile(hlo.parse_module(text), FRESH)


def _inputs(rng, n, shape=(512, 512)):
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]


def test_independent_kernels_get_two_streams_and_the_join_waits(two_streams):
    program = _compile(INDEPENDENT)._program
    plan = program.stream_plan
    assert plan is not None and plan.num_streams == 2
    exp_a, exp_b, join = plan.stream
    assert exp_a != exp_b
    # The join runs after both: on one of their streams, waiting for the other's event.
    assert len(plan.waits[2]) == 1 and plan.waits[2][0] in plan.recorded


def test_independent_kernels_overlap(two_streams):
    """Both kernels must be running at once: each waits at a two-party barrier before
    it computes, which only completes when the other kernel has started too (in order,
    the first kernel would time out alone there)."""
    executable = _compile(INDEPENDENT)
    thunks = executable._program.thunks[:2]
    barrier = threading.Barrier(2, timeout=20)
    threads = {}

    def meet_then_run(thunk, name):
        original = thunk.run

        def run(table, address, keep):
            threads[name] = threading.get_ident()
            barrier.wait()                 # BrokenBarrierError if the other never starts
            original(table, address, keep)
        thunk.run = run
    for thunk, name in zip(thunks, "ab"):
        meet_then_run(thunk, name)
    x, y = _inputs(np.random.default_rng(0), 2)
    (result,) = executable.run(x, y)
    assert threads["a"] != threads["b"]
    np.testing.assert_allclose(result, np.exp(x) + np.exp(y), rtol=2e-5)


def test_results_are_right_on_streams_repeatedly(two_streams):
    executable = _compile(INDEPENDENT)
    rng = np.random.default_rng(1)
    for _ in range(20):
        x, y = _inputs(rng, 2)
        (result,) = executable.run(x, y)
        np.testing.assert_allclose(result, np.exp(x) + np.exp(y), rtol=2e-5)


def test_chains_and_tiny_programs_run_inline(two_streams):
    assert _compile(CHAIN)._program.stream_plan is None
    assert _compile(TINY)._program.stream_plan is None


def test_kernels_on_every_core_run_inline():
    previous = runtime.get_options()
    runtime.configure(inter_op_threads=2, intra_op_threads=os.cpu_count() or 1)
    try:
        program = _compile(INDEPENDENT)._program
        if all(len(t.dims.slices) >= (os.cpu_count() or 1) for t in program.thunks):
            assert program.stream_plan is None
    finally:
        runtime.configure(inter_op_threads=previous.inter_op_threads,
                          intra_op_threads=previous.intra_op_threads)


def test_independent_branches_do_not_share_arena_bytes(two_streams):
    """Two chains: sequential reuse would put the second chain's temps on the first's
    released bytes and chain them together; the arena keeps them apart instead."""
    text = """HloModule chains
ENTRY e {
  x = f32[512,512] parameter(0)
  y = f32[512,512] parameter(1)
  a1 = f32[512,512] exponential(x)
  a2 = f32[512,512] negate(a1)
  a3 = f32[512,512] exponential(a2)
  b1 = f32[512,512] exponential(y)
  b2 = f32[512,512] negate(b1)
  b3 = f32[512,512] exponential(b2)
  ROOT t = (f32[512,512], f32[512,512]) tuple(a3, b3)
}"""
    executable = _compile(text)
    plan = executable._program.stream_plan
    assert plan is not None and plan.num_streams == 2
    assert plan.stream[:3] != plan.stream[3:] and all(w == () for w in plan.waits)
    x, y = _inputs(np.random.default_rng(2), 2)
    a, b = executable.run(x, y)
    np.testing.assert_allclose(a, np.exp(-np.exp(x)), rtol=2e-5, atol=1e-37)  # FTZ
    np.testing.assert_allclose(b, np.exp(-np.exp(y)), rtol=2e-5, atol=1e-37)


def test_one_inter_op_thread_runs_in_order():
    previous = runtime.get_options().inter_op_threads
    runtime.configure(inter_op_threads=1)
    try:
        assert _compile(INDEPENDENT)._program.stream_plan is None
    finally:
        runtime.configure(inter_op_threads=previous)


def test_arena_reuse_is_a_dependency():
    """Temps placed at the same arena offset conflict even though their slots differ."""
    from xlapy.backend_cpu.buffer_assignment import Slot

    class Fake:
        def __init__(self, reads, writes):
            self.reads, self.writes = reads, writes
    slots = [Slot("param", 64), Slot("temp", 64, offset=0), Slot("temp", 64, offset=0),
             Slot("output", 64)]
    thunks = [Fake([0], [1]), Fake([1], [3]), Fake([0], [2])]
    deps = inter_op.dependencies(thunks, slots)
    assert deps[1] == [0]
    assert 1 in deps[2]          # writes slot 2 over slot 1's bytes, which thunk 1 reads


def test_one_pass_slot_dependencies_give_the_pairwise_order():
    """The one-pass edges may skip ones implied by others: the orders (ancestors) agree."""
    from xlapy.backend_cpu.buffer_assignment import Slot

    class Fake:
        def __init__(self, reads, writes):
            self.reads, self.writes = reads, writes
    rng = np.random.default_rng(7)
    slots = [Slot("output", 64) for _ in range(6)]   # no temps: regions are whole slots
    for _ in range(50):
        thunks = [Fake(list(rng.choice(6, rng.integers(0, 3), replace=False)),
                       list(rng.choice(6, rng.integers(1, 3), replace=False)))
                  for _ in range(8)]
        assert inter_op.ancestors(inter_op.slot_dependencies(thunks)) == \
            inter_op.ancestors(inter_op.dependencies(thunks, slots))
