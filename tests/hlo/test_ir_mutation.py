"""The IR's mutation methods (hlo/ir.py): moving, cloning, ordering, roots, control
edges and the place of a new computation. Passes change the graph only through them
(tests/passes/test_ir_mutation.py)."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo
from xlapy.hlo import HloComputation, HloInstruction, Shape

F32 = Shape("f32", (4,))


def _module():
    return hlo.parse_module("""
HloModule m
callee {
  q = f32[4] parameter(0)
  n = f32[4] negate(q)
  ROOT e = f32[4] exponential(n)
}
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  a = f32[4] add(p, c)
  ROOT r = f32[4] call(a), to_apply=callee
}""")


def _names(comp):
    return [i.name for i in comp.instructions]


def test_add_instruction_before_an_anchor():
    module = _module()
    entry = module.entry
    a = entry.instruction("a")
    s = entry.add_instruction(HloInstruction("sqrt", F32, [entry.instruction("p")], name="s"),
                              before=a)
    assert _names(entry) == ["p", "c", "s", "a", "r"]
    assert s.parent is entry and s in entry.instruction("p").users


def test_move_instruction_between_computations_keeps_name_and_edges():
    module = _module()
    entry, callee = module.entry, module.computation("callee")
    n = callee.instruction("n")
    n.replace_operand(0, entry.instruction("a"))
    entry.move_instruction(n, before=entry.instruction("r"))
    assert n.parent is entry and n.name == "n"
    assert _names(entry) == ["p", "c", "a", "n", "r"]
    assert "n" not in _names(callee)
    assert n in entry.instruction("a").users and callee.instruction("e").operands == [n]


def test_clone_instruction_copies_attributes_and_literal():
    module = _module()
    entry = module.entry
    c = entry.instruction("c")
    clone = entry.clone_instruction(c, [], before=entry.instruction("a"))
    assert clone is not c and clone.name == "c.1" and clone.parent is entry
    np.testing.assert_array_equal(clone.literal, c.literal)
    clone.literal[0] = 9.0
    assert c.literal[0] == 1.0                 # a copy, not the same array
    assert _names(entry) == ["p", "c", "c.1", "a", "r"]
    named = entry.clone_instruction(entry.instruction("a"), [clone, clone], name="twice")
    assert named.name == "twice" and named.operands == [clone, clone]
    assert clone.users == [named]


def test_sort_topologically_keeps_the_order_of_what_is_ready():
    module = _module()
    entry = module.entry
    a, p = entry.instruction("a"), entry.instruction("p")
    entry.move_before(a, p)                    # a before its operand p
    assert _names(entry) == ["a", "p", "c", "r"]
    entry.sort_topologically()
    assert _names(entry) == ["p", "c", "a", "r"]


def test_sort_topologically_follows_control_edges_and_reports_a_cycle():
    module = _module()
    entry = module.entry
    c, p = entry.instruction("c"), entry.instruction("p")
    p.add_control_predecessor(c)
    entry.sort_topologically()
    assert _names(entry)[:2] == ["c", "p"]
    c.add_control_predecessor(entry.instruction("a"))     # a reads p, p waits for c
    with pytest.raises(ValueError, match="cycle in e"):
        entry.sort_topologically()


def test_control_edges_are_added_once_and_removed_by_identity():
    module = _module()
    entry = module.entry
    p, c, a = (entry.instruction(n) for n in ("p", "c", "a"))
    a.add_control_predecessor(p)
    a.add_control_predecessor(c)
    a.add_control_predecessor(p)
    assert a.control_predecessors == [p, c]
    assert entry.control_successors(p) == [a]
    a.remove_control_predecessor(p)
    assert a.control_predecessors == [c] and entry.control_successors(p) == []
    a.drop_control_predecessors()
    assert a.control_predecessors == []


def test_set_root_takes_only_an_instruction_of_the_computation():
    module = _module()
    entry, callee = module.entry, module.computation("callee")
    entry.set_root(entry.instruction("a"))
    assert entry.root.name == "a" and entry.instruction("a").is_root
    with pytest.raises(ValueError, match="must belong to it"):
        entry.set_root(callee.instruction("n"))


def test_add_computation_before_another():
    module = _module()
    added = module.add_computation(HloComputation("callee"), before=module.entry)
    assert added.name == "callee.1"
    assert [c.name for c in module.computations] == ["callee", "callee.1", "e"]
    module.add_computation(HloComputation("last"))
    assert module.computations[-1].name == "last"
