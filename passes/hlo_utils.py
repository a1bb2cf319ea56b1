"""Small IR helpers shared by the passes: creating instructions, keeping a declared
layout when a value is replaced (`in_layout`), reachability, and the kernel count of
issue 3. Moving, cloning and ordering instructions are methods of the IR (hlo/ir.py)."""
from __future__ import annotations

from typing import Iterable

from ..hlo import HloComputation, HloInstruction, HloModule, Shape

# Top-level instructions that launch no kernel (see `count_kernels`): issue 3's list,
# plus opt-barrier, which only orders scheduling and aliases its operand (XLA's CPU
# pipeline deletes it before code generation).
TRIVIAL_OPCODES = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast",
                             "opt-barrier"})


def new_instruction(comp: HloComputation, opcode: str, shape: Shape,
                    operands: Iterable[HloInstruction] = (), *, before: HloInstruction | None = None,
                    name: str = "", **kwargs) -> HloInstruction:
    """Creates an instruction in `comp`, placed just before `before` (else at the end)."""
    return comp.add_instruction(HloInstruction(opcode, shape, operands, name=name, **kwargs),
                                before=before)


def same_bytes(have: Shape, want: Shape) -> bool:
    """True when a value of shape `have` is stored as `want` declares: every array leaf
    orders its dimensions of size > 1 the same way (or is empty). Layouts that differ
    only in where size-1 dimensions go store the same bytes."""
    if have is want:          # (a fused parameter is made with its operand's shape object)
        return True
    have_leaves, want_leaves = have.leaves(), want.leaves()
    return len(have_leaves) == len(want_leaves) and all(
        h.numel == 0 or _physical_order(h) == _physical_order(w)
        for h, w in zip(have_leaves, want_leaves) if h.is_array)


def _physical_order(shape: Shape) -> tuple[int, ...]:
    return tuple(d for d in shape.minor_to_major() if shape.dims[d] != 1)


def in_layout(value: HloInstruction, shape: Shape, comp: HloComputation, *,
              before: HloInstruction | None = None) -> HloInstruction:
    """`value` as an instruction of `comp` stored in the layout(s) of `shape` (equal to
    `value.shape` but for layouts): `value` itself when the bytes agree, else a `copy`
    to `shape`'s layout (tuples: a tuple of their elements, each conformed).

    For rewrites that replace an instruction I by a value V of another layout
    (forwarding gte(tuple(v)), binding a callee's parameter, fusing a producer into a
    fused parameter): a `bitcast` reading I means I's declared bytes, so I's users
    must keep reading I's layout. A copy is the simplest way that is always right
    (refusing would have to be decided by each caller, and the copy is an elementwise
    op the loop fusions absorb); it only appears where layouts differ, which HLO from
    JAX (default layouts nearly everywhere) seldom has.
    """
    if same_bytes(value.shape, shape):
        return value
    if not shape.is_tuple:
        return new_instruction(comp, "copy", shape, [value], before=before)
    elements = [in_layout(new_instruction(comp, "get-tuple-element", have, [value],
                                          before=before, attrs={"index": i}),
                          want, comp, before=before)
                for i, (have, want) in enumerate(zip(value.shape.tuple_shapes,
                                                     shape.tuple_shapes))]
    return new_instruction(comp, "tuple", Shape.tuple_of([e.shape for e in elements]),
                           elements, before=before)


def replace_keeping_layout(old: HloInstruction, value: HloInstruction) -> HloInstruction:
    """Replaces `old` (users and root) by `value` read in `old`'s layout (`in_layout`),
    removes `old` if nothing reads it any more, and returns what took its place."""
    comp = old.parent
    new = in_layout(value, old.shape, comp, before=old)
    comp.replace_instruction(old, new)
    return new


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
        # Keyed by id: the instructions are held so that no id is reused while this lives.
        self._held = comp.post_order()
        n = -1
        for n, instr in enumerate(self._held):
            self._bit[id(instr)] = 1 << n
            mask = 0
            for op in instr.operands + instr.control_predecessors:
                mask |= self._ancestors[id(op)] | self._bit[id(op)]
            self._ancestors[id(instr)] = mask
        self._next = n + 1

    def add(self, instr: HloInstruction) -> None:
        """`instr` is new, read by nothing yet: it depends on what its operands depend on."""
        mask = 0
        for op in instr.operands + instr.control_predecessors:
            mask |= self._ancestors[id(op)] | self._bit[id(op)]
        self._ancestors[id(instr)] = mask
        self._bit[id(instr)] = 1 << self._next
        self._next += 1
        self._held.append(instr)

    def knows(self, instr: HloInstruction) -> bool:
        return id(instr) in self._bit

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
