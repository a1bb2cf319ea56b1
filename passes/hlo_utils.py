"""Small IR helpers shared by the passes: creating and placing instructions, ordering,
reachability, and the kernel count of issue 3."""
from __future__ import annotations

import heapq
from typing import Iterable

import numpy as np

from hlo import HloComputation, HloInstruction, HloModule, Shape

# Top-level instructions that launch no kernel (see `count_kernels`): issue 3's list,
# plus opt-barrier, which only orders scheduling and aliases its operand (XLA's CPU
# pipeline deletes it before code generation).
TRIVIAL_OPCODES = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast",
                             "opt-barrier"})


def new_instruction(comp: HloComputation, opcode: str, shape: Shape,
                    operands: Iterable[HloInstruction] = (), *, before: HloInstruction | None = None,
                    name: str = "", **kwargs) -> HloInstruction:
    """Creates an instruction in `comp`, placed just before `before` (else at the end)."""
    instr = comp.add_instruction(HloInstruction(opcode, shape, operands, name=name, **kwargs))
    if before is not None:
        move_before(comp, instr, before)
    return instr


def clone_instruction(instr: HloInstruction, comp: HloComputation,
                      operands: Iterable[HloInstruction], *, before: HloInstruction | None = None,
                      name: str | None = None) -> HloInstruction:
    """A copy of `instr` (attributes, literal, parameter number) in `comp` over `operands`."""
    literal = None if instr.literal is None else copy_literal(instr.literal)
    return new_instruction(comp, instr.opcode, instr.shape, operands, before=before,
                           name=instr.name if name is None else name, attrs=dict(instr.attrs),
                           literal=literal, parameter_number=instr.parameter_number)


def copy_literal(literal):
    """A copy of a constant's literal: an array, or a tuple of literals for a tuple shape."""
    if isinstance(literal, tuple):
        return tuple(copy_literal(element) for element in literal)
    return np.array(literal, copy=True)


def move_before(comp: HloComputation, instr: HloInstruction, anchor: HloInstruction) -> None:
    """Moves `instr` in the instruction list of `comp` to just before `anchor`."""
    comp.instructions.remove(instr)
    comp.instructions.insert(comp.instructions.index(anchor), instr)


def add_computation_before(module: HloModule, comp: HloComputation,
                           anchor: HloComputation | None) -> HloComputation:
    """Adds `comp` to the module, listed before `anchor` (callees print before callers)."""
    module.add_computation(comp)
    if anchor is not None and anchor in module.computations:
        module.computations.remove(comp)
        module.computations.insert(module.computations.index(anchor), comp)
    return comp


def sort_topologically(comp: HloComputation) -> None:
    """Reorders `comp.instructions` so operands come first, otherwise keeping the order."""
    index = {id(i): n for n, i in enumerate(comp.instructions)}
    pending = {id(i): len({id(o) for o in i.operands + i.control_predecessors})
               for i in comp.instructions}
    readers: dict[int, list[HloInstruction]] = {}
    for i in comp.instructions:
        for o in {id(o): o for o in i.operands + i.control_predecessors}.values():
            readers.setdefault(id(o), []).append(i)
    heap = [(index[id(i)], i.name, i) for i in comp.instructions if pending[id(i)] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, _, instr = heapq.heappop(heap)
        order.append(instr)
        for r in readers.get(id(instr), ()):
            pending[id(r)] -= 1
            if pending[id(r)] == 0:
                heapq.heappush(heap, (index[id(r)], r.name, r))
    assert len(order) == len(comp.instructions), f"cycle in {comp.name}"
    comp.instructions[:] = order


def is_kernel(instr: HloInstruction) -> bool:
    """True if a top-level `instr` computes something (launches a kernel)."""
    return instr.opcode not in TRIVIAL_OPCODES


def count_kernels(module: HloModule) -> int:
    """Kernels of the entry: fusions and unfused non-trivial ops (issue 3's definition)."""
    return sum(1 for i in module.entry.instructions if is_kernel(i))


class Reachability:
    """Which instructions of a computation depend on which (ancestor bitmasks).

    Snapshot semantics: built once, then `merge` keeps it correct while a pass
    combines independent instructions into one.
    """

    def __init__(self, comp: HloComputation):
        self._bit: dict[int, int] = {}
        self._ancestors: dict[int, int] = {}
        for n, instr in enumerate(comp.post_order()):
            self._bit[id(instr)] = 1 << n
            mask = 0
            for op in instr.operands + instr.control_predecessors:
                mask |= self._ancestors[id(op)] | self._bit[id(op)]
            self._ancestors[id(instr)] = mask

    def depends_on(self, a: HloInstruction, b: HloInstruction) -> bool:
        """True if `a` (transitively) reads `b`."""
        return bool(self._ancestors[id(a)] & self._bit[id(b)])

    def independent(self, a: HloInstruction, b: HloInstruction) -> bool:
        return not self.depends_on(a, b) and not self.depends_on(b, a)

    def merge(self, kept: HloInstruction, gone: HloInstruction) -> None:
        """`gone` was merged into `kept`: whatever depended on either depends on both."""
        both = self._bit[id(kept)] | self._bit[id(gone)]
        ancestors = self._ancestors[id(kept)] | self._ancestors[id(gone)]
        for key, mask in self._ancestors.items():
            if mask & both:
                self._ancestors[key] = mask | both | ancestors
        self._ancestors[id(kept)] = ancestors
        self._bit[id(kept)] = both

    def rename(self, old: HloInstruction, new: HloInstruction) -> None:
        """`new` took the place of `old` (e.g. wrapped it in a fusion)."""
        self._bit[id(new)] = self._bit.pop(id(old))
        self._ancestors[id(new)] = self._ancestors.pop(id(old))
