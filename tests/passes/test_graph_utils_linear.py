"""The graph utilities made cheaper for issue 19 give the results of the plain algorithms.

`HloComputation.sort_topologically` sorts only the part of the list from the first
instruction listed before one of its operands (the prefix keeps its places in the
full sort); checked against the full sort (below, as it was) on random modules whose
lists are shuffled in part. `control_edge_scope` (a pipeline runs each pass in one)
skips the scans for control successors in computations without control edges;
checked by running the pipeline with and without it on modules with random control
edges, and by giving an instruction an edge inside the scope.
"""
from __future__ import annotations

import contextlib
import heapq
import random

from hypothesis import HealthCheck, given, settings, strategies as st

from xlapy import hlo, passes
from xlapy.hlo.ir import control_edge_scope
from xlapy.passes import pass_base
from tests import hlo_strategies as hs


def full_sort(instructions: list) -> list:
    """The order sort_topologically gave before: Kahn's algorithm over the whole list,
    the earliest listed of the ready instructions first."""
    index = {id(i): n for n, i in enumerate(instructions)}
    pending = {id(i): len({id(o) for o in i.operands + i.control_predecessors})
               for i in instructions}
    readers: dict = {}
    for i in instructions:
        for o in {id(o): o for o in i.operands + i.control_predecessors}.values():
            readers.setdefault(id(o), []).append(i)
    heap = [(index[id(i)], i.name, i) for i in instructions if pending[id(i)] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, _, instr = heapq.heappop(heap)
        order.append(instr)
        for r in readers.get(id(instr), ()):
            pending[id(r)] -= 1
            if pending[id(r)] == 0:
                heapq.heappush(heap, (index[id(r)], r.name, r))
    return order


@st.composite
def modules_with_edges(draw, max_instructions: int = 24):
    """A random module; with some control edges that agree with its post order."""
    module = draw(hs.hlo_modules(hs.GenOptions(max_instructions=max_instructions,
                                               control_flow=False, transcendental=False,
                                               dtypes=("f32", "s32"))))
    order = module.entry.post_order()
    for _ in range(draw(st.integers(0, 5))):
        i, j = draw(st.integers(0, len(order) - 1)), draw(st.integers(0, len(order) - 1))
        if i != j:
            first, then = order[min(i, j)], order[max(i, j)]
            then.add_control_predecessor(first)
    return module


FAST = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@FAST
@given(module=modules_with_edges(), seed=st.integers(0, 2**16))
def test_sort_equals_the_full_sort(module, seed):
    comp = module.entry
    rng = random.Random(seed)
    for _ in range(3):
        # Shuffle a random slice of the list: before it the order is right, after it
        # the list may or may not be.
        n = len(comp.instructions)
        a = rng.randrange(n)
        b = rng.randrange(a, n + 1)
        part = comp.instructions[a:b]
        rng.shuffle(part)
        comp.instructions[a:b] = part
        expected = [i.name for i in full_sort(comp.instructions)]
        comp.sort_topologically()
        assert [i.name for i in comp.instructions] == expected


def test_sort_still_refuses_a_cycle_and_foreign_operands():
    module = hlo.parse_module("""
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  ROOT b = f32[4] abs(a)
}""")
    comp = module.entry
    p, a, b = (comp.instruction(n) for n in ("p", "a", "b"))
    a.add_control_predecessor(b)           # a after b, b reads a
    try:
        comp.sort_topologically()
        raise AssertionError("no error for a cycle")
    except ValueError as e:
        assert "cycle" in str(e)


@FAST
@given(module=modules_with_edges(max_instructions=16))
def test_pipeline_same_with_and_without_the_scope(module):
    text = hlo.print_module(module)
    scoped = hlo.parse_module(text)
    passes.cpu_pipeline(verify_each=True).run(scoped)
    plain = hlo.parse_module(text)
    real = pass_base.control_edge_scope
    pass_base.control_edge_scope = lambda m: contextlib.nullcontext()
    try:
        passes.cpu_pipeline(verify_each=True).run(plain)
    finally:
        pass_base.control_edge_scope = real
    assert hlo.print_module(scoped) == hlo.print_module(plain)


def test_an_edge_given_inside_the_scope_is_seen():
    module = hlo.parse_module("""
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  b = f32[4] abs(p)
  ROOT t = (f32[4], f32[4]) tuple(a, b)
}""")
    comp = module.entry
    a, b = comp.instruction("a"), comp.instruction("b")
    with control_edge_scope(module):
        assert not comp.has_control_edges() and comp.control_successors(a) == []
        b.add_control_predecessor(a)
        assert comp.has_control_edges() and comp.control_successors(a) == [b]
        # Replacing `a` moves its edge to the replacement.
        c = comp.add_instruction(hlo.HloInstruction("exponential", a.shape, [comp.instruction("p")]))
        comp.replace_instruction(a, c)
        assert b.control_predecessors == [c]
    assert comp.has_control_edges()
    # An instruction with an edge moved into a marked computation unmarks it.
    other = hlo.parse_module("""
HloModule n
ENTRY e {
  ROOT q = f32[] parameter(0)
}""")
    with control_edge_scope(other):
        assert not other.entry.has_control_edges()
        other.entry.move_instruction(b)
        assert other.entry.has_control_edges()


class _CountingList(list):
    """A control_predecessors list that counts the scans looking into it."""
    looks = 0

    def __contains__(self, item):
        _CountingList.looks += 1
        return super().__contains__(item)

    def __iter__(self):
        _CountingList.looks += 1
        return super().__iter__()


def test_the_scope_skips_the_scans_of_a_computation_without_edges():
    """Removing or replacing an instruction scanned every instruction's control
    predecessors (a pass removing n instructions did n^2 work); in the scope, none."""
    lines = ["HloModule m", "ENTRY e {", "  p = f32[4] parameter(0)"]
    lines += [f"  n{i} = f32[4] negate(p)" for i in range(50)]
    lines += ["  ROOT r = f32[4] abs(p)", "}"]
    module = hlo.parse_module("\n".join(lines))
    comp = module.entry
    for instr in comp.instructions:
        instr.control_predecessors = _CountingList()
    _CountingList.looks = 0
    with control_edge_scope(module):
        for i in range(25):
            comp.remove_instruction(comp.instruction(f"n{i}"))
        comp.replace_instruction(comp.instruction("n30"), comp.instruction("n31"))
        assert comp.control_successors(comp.instruction("p")) == []
    assert _CountingList.looks == 0
    comp.remove_instruction(comp.instruction("n40"))     # outside: the scan runs
    assert _CountingList.looks > 0
