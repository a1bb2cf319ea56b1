"""Passes change the IR only through hlo/ir.py's methods (move, clone, replace, order,
roots, control edges): no pass assigns `parent`, `root`, an instruction list or a
control-edge list, or edits such a list in place. A static check of passes/*.py."""
from __future__ import annotations

import ast
import os

PASSES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "passes")

# Attributes only hlo/ir.py may assign or edit in place.
OWNED = frozenset({"instructions", "parent", "root", "control_predecessors", "users",
                   "operands", "computations", "entry"})
LIST_EDITS = frozenset({"append", "remove", "insert", "pop", "extend", "clear", "sort",
                        "reverse"})


def _direct_edits(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            while isinstance(target, ast.Subscript):     # x.instructions[:] = ...
                target = target.value
            if isinstance(target, ast.Attribute) and target.attr in OWNED:
                found.append((node.lineno, f"assigns .{target.attr}"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in LIST_EDITS and isinstance(node.func.value, ast.Attribute) \
                and node.func.value.attr in OWNED:
            found.append((node.lineno, f".{node.func.value.attr}.{node.func.attr}()"))
    return sorted(found)


def test_the_check_finds_direct_edits():
    source = """
comp.instructions.remove(instr)
instr.parent = comp
comp.instructions[:] = order
fusion.control_predecessors.append(pred)
comp.root = gte
module.computations.insert(0, c)
"""
    assert [line for line, _ in _direct_edits(source)] == [2, 3, 4, 5, 6, 7]
    assert _direct_edits("comp.move_instruction(instr)\nx = comp.instructions[0]\n") == []


def test_passes_edit_the_ir_only_through_its_methods():
    edits = {}
    for name in sorted(os.listdir(PASSES)):
        if name.endswith(".py"):
            with open(os.path.join(PASSES, name), encoding="utf-8") as f:
                found = _direct_edits(f.read())
            if found:
                edits[name] = found
    assert edits == {}
