"""The HLO IR: instructions, computations and modules.

An `HloInstruction` has an opcode, a result `Shape`, operands and users, and a
dict of attributes in structured form (see ATTRIBUTES below). A computation is
an ordered list of instructions with numbered parameters and a root; a module
is a list of computations, one of them the entry, plus the module-level config
(`entry_computation_layout`, `is_scheduled`, ...) kept as text.

Every change to the graph goes through the methods here, so passes never touch
`users`, `parent`, a computation's instruction list or the control edges
directly (tests/passes/test_ir_mutation.py checks passes/ for it):

    operands and users   replace_operand, replace_operand_with, set_operands,
                         replace_all_uses_with, drop_operands
    control edges        add_control_predecessor, remove_control_predecessor,
                         drop_control_predecessors
    instruction lists    HloComputation.add_instruction(before=), move_before,
                         move_instruction (from another computation, name kept),
                         clone_instruction, remove_instruction, replace_instruction,
                         sort_topologically, set_root
    computations         HloModule.add_computation(before=), remove_computation,
                         replace_entry

ATTRIBUTES — the Python form of each attribute (the parser produces it, the
printer prints it back, everything else reads it):

    dimensions, dynamic_slice_sizes, slice_sizes,
    lhs/rhs_contracting_dims, lhs/rhs_batch_dims,
    offset_dims, collapsed_slice_dims, start_index_map,
    operand_batching_dims, start_indices_batching_dims,
    update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
    input_batching_dims, scatter_indices_batching_dims     tuple[int, ...]
    index, iota_dimension, index_vector_dim,
    feature_group_count, batch_group_count                 int
    is_stable, indices_are_sorted, unique_indices          bool
    direction ("EQ", "NE", "LT", "LE", "GT", "GE"),
    type ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"),
    kind ("kLoop", "kInput", "kOutput", "kCustom"),
    dim_labels ("b01f_01io->b01f"), custom_call_target     str
    slice                                                  tuple[SliceDim, ...]
    padding                                                tuple[PadDim, ...]
    window                                                 Window
    to_apply, calls, condition, body, select, scatter,
    true_computation, false_computation                    HloComputation
    branch_computations                                    tuple[HloComputation, ...]
    channel_id                                             int
    use_global_device_ids, constrain_layout                bool
    replica_groups                                         ReplicaGroups (expanded groups,
                                                           and the spelling, kept to print back)
    source_target_pairs                                    tuple[tuple[int, int], ...]
    outfeed_shape, infeed_shape                            Shape
    operand_layout_constraints                             tuple[Shape, ...]
    literal                                                LiteralAttr (shape and value)
    metadata, backend_config, frontend_attributes, sharding,
    and any attribute the parser does not know            RawAttr (text kept verbatim)

A computation may carry attributes of its own (`}, execution_thread="x"` in the
text) in `HloComputation.attrs`: execution_thread is a str, others RawAttr.

`replica_groups` is written in one of XLA's spellings: a list `{{0,1},{2,3}}`
(`{}`: one group of everyone), the iota form `[2,2]<=[4]` or
`[2,2]<=[2,2]T(1,0)`, or the mesh form `mesh['x'=2,'y'=2] {'x'}`
(hlo/replica_groups.py expands them). What the ids mean (replicas, partitions or
global devices) depends on the collective: hlo/collectives.py.

A constant keeps its value in `instr.literal` (a numpy array, or None for an
elided `{...}` literal); a parameter its number in `instr.parameter_number`.
Attributes keep the order they were given in, and print in that order.
"""
from __future__ import annotations

import contextlib
import heapq
import itertools
import operator
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import numpy as np

from .opcodes import CALLED_COMPUTATION_ATTRS, CALLED_COMPUTATION_LIST_ATTRS, OPCODES, info_of
from .shape import Shape


# --- structured attribute values ----------------------------------------------

@dataclass(frozen=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True)
class PadDim:
    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    window_dilation: int = 1
    base_dilation: int = 1
    reversal: bool = False


@dataclass(frozen=True)
class Window:
    dims: tuple[WindowDim, ...]


@dataclass(frozen=True)
class ReplicaGroups:
    """The `replica_groups` of a collective: `groups` expanded to explicit ids (`()`:
    one group of every id), `text` the spelling it was written in (printed back as
    is). Equality compares the groups only: `[2,2]<=[4]` equals `{{0,1},{2,3}}`."""
    groups: tuple[tuple[int, ...], ...]
    text: str = field(default="", compare=False)

    def __post_init__(self):
        groups = tuple(tuple(int(i) for i in g) for g in self.groups)
        object.__setattr__(self, "groups", groups)
        if not self.text:
            object.__setattr__(self, "text", "{" + ",".join(
                "{" + ",".join(map(str, g)) + "}" for g in groups) + "}")

    @property
    def form(self) -> str:
        """"list", "iota" or "mesh": how `text` spells the groups."""
        if self.text.startswith("mesh"):
            return "mesh"
        return "iota" if self.text.startswith("[") else "list"


def _values_equal(a, b) -> bool:
    """Literal values equal, NaN equal to NaN; a tuple literal element by element."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(_values_equal(x, y) for x, y in zip(a, b)))
    a, b = np.asarray(a), np.asarray(b)
    return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc" and b.dtype.kind in "fc")


@dataclass(frozen=True, eq=False)
class LiteralAttr:
    """An attribute whose value is a literal with its shape: `literal=s32[2]{0} {1, 2}`."""
    shape: Shape
    value: Any

    def __eq__(self, other):
        return (isinstance(other, LiteralAttr) and self.shape == other.shape
                and _values_equal(self.value, other.value))

    def __hash__(self):
        return hash(self.shape)


@dataclass(frozen=True)
class RawAttr:
    """An attribute kept as the exact text of its value (metadata, unknown keys)."""
    text: str


# --- instructions --------------------------------------------------------------

class HloInstruction:
    """One HLO instruction. Create with `HloComputation.add_instruction` or the builder."""

    def __init__(self, opcode: str, shape: Shape, operands: Iterable["HloInstruction"] = (),
                 attrs: dict[str, Any] | None = None, name: str = "",
                 literal: np.ndarray | None = None, parameter_number: int | None = None):
        if opcode not in OPCODES:
            raise ValueError(f"unknown opcode {opcode!r}")
        self.opcode = opcode
        self.shape = shape
        self.name = name
        self.operands: list[HloInstruction] = []
        self.users: list[HloInstruction] = []
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.literal = literal
        self.parameter_number = parameter_number
        self.control_predecessors: list[HloInstruction] = []
        self.parent: HloComputation | None = None
        for op in operands:
            self._append_operand(op)

    # --- operands and users ---------------------------------------------------
    def _append_operand(self, op: "HloInstruction") -> None:
        if self.parent is not None:
            self.parent._in_order = False
        self.operands.append(op)
        if self not in op.users:
            op.users.append(self)

    def operand(self, i: int) -> "HloInstruction":
        return self.operands[i]

    def replace_operand(self, i: int, new: "HloInstruction") -> None:
        if self.parent is not None:
            self.parent._in_order = False
        old = self.operands[i]
        self.operands[i] = new
        if old not in self.operands and self in old.users:
            old.users.remove(self)
        if self not in new.users:
            new.users.append(self)

    def replace_operand_with(self, old: "HloInstruction", new: "HloInstruction") -> None:
        for i, op in enumerate(self.operands):
            if op is old:
                self.replace_operand(i, new)

    def set_operands(self, operands: Iterable["HloInstruction"]) -> None:
        if self.parent is not None:
            self.parent._in_order = False
        for op in self.operands:
            if self in op.users:
                op.users.remove(self)
        self.operands = []
        for op in operands:
            self._append_operand(op)

    def replace_all_uses_with(self, new: "HloInstruction") -> None:
        """Every user of self reads `new` instead; a root self makes `new` the root."""
        for user in list(self.users):
            if user is not new:
                user.replace_operand_with(self, new)
        comp = self.parent
        if comp is not None and comp.root is self:
            comp.root = new

    def drop_operands(self) -> None:
        self.set_operands(())

    # --- control edges ----------------------------------------------------------
    def add_control_predecessor(self, pred: "HloInstruction") -> None:
        """`pred` must run before self (kept once; the order of addition is kept)."""
        if not any(p is pred for p in self.control_predecessors):
            self.control_predecessors.append(pred)
            if self.parent is not None:
                self.parent._edge_free = self.parent._in_order = False

    def remove_control_predecessor(self, pred: "HloInstruction") -> None:
        self.control_predecessors = [p for p in self.control_predecessors if p is not pred]

    def drop_control_predecessors(self) -> None:
        self.control_predecessors = []

    # --- queries ----------------------------------------------------------------
    @property
    def info(self):
        if self.opcode != "bitcast-convert":     # (info_of's one special case)
            return OPCODES[self.opcode]
        return info_of(self)

    @property
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self

    def called_computations(self) -> list["HloComputation"]:
        comps = []
        for key, value in self.attrs.items():
            if key in CALLED_COMPUTATION_ATTRS:
                comps.append(value)
            elif key in CALLED_COMPUTATION_LIST_ATTRS:
                comps.extend(value)
        return comps

    @property
    def to_apply(self) -> "HloComputation | None":
        return self.attrs.get("to_apply")

    @property
    def fused_computation(self) -> "HloComputation":
        return self.attrs["calls"]

    def dims(self, key: str = "dimensions") -> tuple[int, ...]:
        return tuple(self.attrs.get(key, ()))

    def has_side_effect(self) -> bool:
        """Never removed, folded or merged: the opcode's flag, or (as in XLA) a
        collective whose layout is constrained."""
        info = OPCODES[self.opcode]
        return info.side_effect or (info.collective and bool(self.attrs.get("constrain_layout")))

    def __repr__(self) -> str:
        return f"<{self.name} = {self.shape} {self.opcode}>"


# --- computations -----------------------------------------------------------------

class HloComputation:
    """An ordered list of instructions with parameters and a root."""

    _edge_free = False      # see `control_edge_scope` (a class default for old pickles)
    _in_order = False       # likewise

    def __init__(self, name: str):
        self.name = name
        self.instructions: list[HloInstruction] = []
        self.root: HloInstruction | None = None
        self.parent: HloModule | None = None
        self.is_fusion_computation = False   # set when a fusion instruction calls it
        # Attributes written after the closing brace: {"execution_thread": "main"}.
        self.attrs: dict[str, Any] = {}
        # True while a pipeline (or a pass) runs under `control_edge_scope` and no
        # instruction here has a control predecessor: the scans for control successors
        # are skipped.
        self._edge_free = False
        # Under the same scope: True when the list is known to be in topological order
        # (a sort or a check found it so, and no method here changed an edge or a place
        # since): `post_order` and `sort_topologically` skip their scan. Outside the scope
        # it is never trusted (code other than passes may edit the lists directly).
        self._in_order = False

    # --- building -------------------------------------------------------------
    def add_instruction(self, instr: HloInstruction, *,
                        before: HloInstruction | None = None) -> HloInstruction:
        """Adds a new instruction (named uniquely in the module), at the end or just
        before `before`."""
        if instr.parent is not None and instr.parent is not self:
            raise ValueError(f"{instr.name} already belongs to {instr.parent.name}")
        instr.parent = self
        self._in_order = False
        if instr.control_predecessors:
            self._edge_free = False
        if not instr.name:
            instr.name = self._fresh_name(instr.opcode)
        elif self.parent is not None:
            instr.name = self.parent.uniquify(instr.name)
        self.instructions.append(instr)
        if before is not None:
            self.move_before(instr, before)
        return instr

    def clone_instruction(self, instr: HloInstruction, operands: Iterable[HloInstruction], *,
                          before: HloInstruction | None = None,
                          name: str | None = None) -> HloInstruction:
        """A copy of `instr` (opcode, shape, attributes, literal, parameter number) over
        `operands`, added to this computation; named like `instr` (made unique) by default."""
        literal = None if instr.literal is None else _copy_literal(instr.literal)
        clone = HloInstruction(instr.opcode, instr.shape, operands, attrs=dict(instr.attrs),
                               name=instr.name if name is None else name, literal=literal,
                               parameter_number=instr.parameter_number)
        return self.add_instruction(clone, before=before)

    def move_instruction(self, instr: HloInstruction, *,
                         before: HloInstruction | None = None) -> None:
        """Moves `instr` out of its computation into this one, name, operands and users
        kept, at the end or just before `before`."""
        source = instr.parent
        if source is not None:
            batch = source.__dict__.get("_batch")
            if batch is not None and source._edge_free and source is not self:
                batch[id(instr)] = instr       # (see batch_removals)
            else:
                source.instructions.remove(instr)
        instr.parent = self
        self._in_order = False
        if instr.control_predecessors:
            self._edge_free = False
        self.instructions.append(instr)
        if before is not None:
            self.move_before(instr, before)

    def move_before(self, instr: HloInstruction, anchor: HloInstruction) -> None:
        """Moves `instr` in the instruction list to just before `anchor`."""
        self._in_order = False
        if self.instructions[-1] is instr:          # (just added, most often)
            self.instructions.pop()
        else:
            self.instructions.remove(instr)
        self.instructions.insert(self.instructions.index(anchor), instr)

    def set_root(self, instr: HloInstruction) -> None:
        if instr.parent is not self:
            raise ValueError(f"the root of {self.name} must belong to it, not to "
                             f"{instr.parent.name if instr.parent else 'no computation'}")
        self.root = instr

    def sort_topologically(self) -> None:
        """Reorders the instruction list so operands (and control predecessors) come
        first, otherwise keeping the order: of the instructions that are ready, the
        earliest listed goes first.

        Passes call this after each rewrite, which leaves most of the list in order: the
        instructions before the first one listed ahead of an operand are ready in turn
        and each is the earliest listed, so they keep their places, and only the rest is
        sorted (one scan finds where that starts; the result is the same as sorting all)."""
        if self.__dict__.get("_batch"):
            self._flush_removals()
        if self._in_order and self._edge_free:
            return            # known to be in order (see __init__)
        instrs = self.instructions
        start, done = _sorted_prefix(instrs)
        if start == len(instrs):
            self._in_order = self._edge_free
            return            # already in order: the order below would be this one
        rest = instrs[start:]
        # Heap keys are list positions (unique), so instructions are never compared.
        pending: dict[int, int] = {}
        readers: dict[int, list[tuple[int, HloInstruction]]] = {}
        heap = []
        for n, instr in enumerate(rest, start):
            waits = set(map(id, instr.operands))
            if instr.control_predecessors:
                waits.update(map(id, instr.control_predecessors))
            waits -= done                  # the placed prefix is ready
            pending[id(instr)] = len(waits)
            if waits:
                item = (n, instr)
                for key in waits:          # (each list grows in list order)
                    readers.setdefault(key, []).append(item)
            else:
                heap.append((n, instr))
        heapq.heapify(heap)
        order = instrs[:start]
        while heap:
            _, instr = heapq.heappop(heap)
            order.append(instr)
            for item in readers.get(id(instr), ()):
                key = id(item[1])
                pending[key] -= 1
                if pending[key] == 0:
                    heapq.heappush(heap, item)
        if len(order) != len(instrs):
            raise ValueError(f"cycle in {self.name}")
        self.instructions[:] = order
        self._in_order = self._edge_free

    def _fresh_name(self, base: str) -> str:
        if self.parent is not None:
            return self.parent.uniquify(base)
        taken = {i.name for i in self.instructions}
        n, name = 0, base
        while name in taken:
            n += 1
            name = f"{base}.{n}"
        return name

    def remove_instruction(self, instr: HloInstruction) -> None:
        """Removes an instruction that has no users (and is not the root)."""
        if instr.users:
            raise ValueError(f"cannot remove {instr.name}: it still has users "
                             f"{[u.name for u in instr.users]}")
        if instr is self.root:
            raise ValueError(f"cannot remove the root {instr.name}")
        instr.drop_operands()
        if not self._edge_free:
            for other in self.instructions:
                if instr in other.control_predecessors:
                    other.control_predecessors.remove(instr)
        batch = self.__dict__.get("_batch")
        if batch is not None and self._edge_free:
            batch[id(instr)] = instr       # left in the list until the batch ends
        else:
            self.instructions.remove(instr)
        instr.parent = None

    @contextlib.contextmanager
    def batch_removals(self):
        """Inside: `remove_instruction` (and `replace_instruction`), and `move_instruction`
        taking an instruction out of this computation, leave it in the list until the
        block ends, then the list is rebuilt once, instead of a search of the list per
        removal (CSE and DCE remove hundreds from a list of thousands; fusion moves
        thousands of producers out of it). Everything else about a removal happens at
        once (its `parent` is no longer this computation). `post_order` and
        `sort_topologically` rebuild the list first; code in the block that reads the
        list itself must skip instructions whose `parent` is not this computation. Only
        in a computation known to have no control edges (`control_edge_scope`):
        elsewhere removals happen as usual."""
        if self.__dict__.get("_batch") is not None:
            yield
            return
        self._batch = {}
        try:
            yield
        finally:
            self._flush_removals()
            self._batch = None

    def _flush_removals(self) -> None:
        batch = self._batch
        if batch:
            self.instructions[:] = [i for i in self.instructions if id(i) not in batch]
            batch.clear()

    def replace_instruction(self, old: HloInstruction, new: HloInstruction) -> None:
        """Every use of `old` (and the root, if it is) becomes `new`; `old` is removed
        once nothing reads it. Its control edges move to `new` (what had to run before
        `old` runs before `new`, what had to wait for `old` waits for `new`), except an
        edge that would close a cycle, whose order the data flow already fixes."""
        old.replace_all_uses_with(new)
        if not old.users and not old.is_root and old.parent is self:
            self._move_control_edges(old, new)
            self.remove_instruction(old)

    def _move_control_edges(self, old: HloInstruction, new: HloInstruction) -> None:
        if self._edge_free:
            return
        successors = [i for i in self.instructions if old in i.control_predecessors]
        if not successors and not old.control_predecessors:
            return
        for before in old.control_predecessors:
            if before is not new and before not in new.control_predecessors \
                    and not _depends_on(before, new):
                new.control_predecessors.append(before)
        for after in successors:
            if after is not new and new not in after.control_predecessors \
                    and not _depends_on(new, after):
                after.control_predecessors.append(new)

    # --- queries ----------------------------------------------------------------
    def control_successors(self, instr: HloInstruction) -> list[HloInstruction]:
        """The instructions that must run after `instr` (a scan of the computation)."""
        if self._edge_free:
            return []
        return [other for other in self.instructions if other.control_predecessors
                and any(p is instr for p in other.control_predecessors)]

    def has_control_edges(self) -> bool:
        """True if an instruction here has a control predecessor (a scan, unless a
        `control_edge_scope` knows there is none)."""
        return not self._edge_free and any(i.control_predecessors for i in self.instructions)

    @property
    def parameters(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda p: p.parameter_number)

    def parameter(self, number: int) -> HloInstruction:
        for i in self.instructions:
            if i.opcode == "parameter" and i.parameter_number == number:
                return i
        raise IndexError(f"{self.name} has no parameter {number}")

    @property
    def num_parameters(self) -> int:
        return sum(1 for i in self.instructions if i.opcode == "parameter")

    def instruction(self, name: str) -> HloInstruction:
        for i in self.instructions:
            if i.name == name:
                return i
        raise KeyError(f"no instruction {name!r} in {self.name}")

    def post_order(self) -> list[HloInstruction]:
        """Instructions with every operand (and control predecessor) before its users:
        a depth-first walk of the operands from each instruction in list order. On a
        list in topological order that walk gives the list itself (each instruction's
        operands were visited before it), so it is not walked."""
        if self.__dict__.get("_batch"):
            self._flush_removals()
        if self._in_order and self._edge_free:
            return list(self.instructions)      # known to be in order (see __init__)
        if _sorted_prefix(self.instructions)[0] == len(self.instructions):
            self._in_order = self._edge_free
            return list(self.instructions)
        order: list[HloInstruction] = []
        seen: set[int] = set()
        for start in self.instructions:
            if id(start) in seen:
                continue
            stack: list[tuple[HloInstruction, Iterator]] = [(start, iter(start.operands + start.control_predecessors))]
            seen.add(id(start))
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    order.append(node)
                elif id(nxt) not in seen:
                    seen.add(id(nxt))
                    stack.append((nxt, iter(nxt.operands + nxt.control_predecessors)))
        return order

    def __iter__(self):
        return iter(self.instructions)

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"


# --- modules ------------------------------------------------------------------

class HloModule:
    """Computations (callees before callers when printed) and one entry."""

    def __init__(self, name: str, config: dict[str, str] | None = None):
        self.name = name
        self.computations: list[HloComputation] = []
        self.entry: HloComputation | None = None
        # Module header attributes other than the name, kept as text in order:
        # {"is_scheduled": "true", "entry_computation_layout": "{(f32[4]{0})->f32[4]{0}}"}
        self.config: dict[str, str] = dict(config or {})
        self._names: set[str] = set()
        self._counters: dict[str, int] = {}

    # --- devices: `replica_count=R, num_partitions=P` in the header ------------------
    # The module runs on R * P devices; device d is replica d // P, partition d % P.
    @property
    def replica_count(self) -> int:
        return int(self.config.get("replica_count", "1"))

    @replica_count.setter
    def replica_count(self, value: int) -> None:
        self._set_count("replica_count", value)

    @property
    def num_partitions(self) -> int:
        return int(self.config.get("num_partitions", "1"))

    @num_partitions.setter
    def num_partitions(self, value: int) -> None:
        self._set_count("num_partitions", value)

    @property
    def num_devices(self) -> int:
        return self.replica_count * self.num_partitions

    def _set_count(self, key: str, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
        if int(value) == 1 and key not in self.config:
            return                       # the default: the header does not spell it
        self.config[key] = str(int(value))

    def add_computation(self, comp: HloComputation, entry: bool = False, *,
                        before: HloComputation | None = None) -> HloComputation:
        """Adds `comp` (renamed if its name is taken), listed last or just before
        `before` (callees print before their callers)."""
        comp.parent = self
        taken = self._computation_names()
        if comp.name in taken:         # computations have a namespace of their own
            comp.name = self._free_computation_name(comp.name, taken)
        taken.add(comp.name)
        for instr in comp.instructions:
            self._names.add(instr.name)
        comps = self.computations
        place = None
        if before is not None:         # (most often the last one: the entry)
            place = next((i for i in range(len(comps) - 1, -1, -1) if comps[i] is before),
                         None)
        if place is not None:
            comps.insert(place, comp)
        else:
            comps.append(comp)
        if entry:
            self.entry = comp
        return comp

    # The names of the computations, and for each base name the suffix below which every
    # `base.N` is taken: kept by the methods here (the only ones that add, remove or name
    # computations), so a name is found without a scan of the module per computation
    # added (the 12-layer GPT step adds some 450 fused computations, all named from
    # "fused_computation"). Each name is the smallest free one, as a search from 1 finds.
    _comp_names: set | None = None
    _comp_marks: dict | None = None

    def _computation_names(self) -> set[str]:
        if self._comp_names is None:
            self._comp_names = {c.name for c in self.computations}
        return self._comp_names

    def _free_computation_name(self, base: str, taken: set[str]) -> str:
        if self._comp_marks is None:
            self._comp_marks = {}
        n = self._comp_marks.get(base, 1)
        while f"{base}.{n}" in taken:
            n += 1
        self._comp_marks[base] = n + 1
        return f"{base}.{n}"

    def _forget_computation_name(self, name: str) -> None:
        if self._comp_names is not None:
            self._comp_names.discard(name)
        base, _, digits = name.rpartition(".")
        if self._comp_marks and base in self._comp_marks and digits.isdigit() \
                and digits.isascii() and str(int(digits)) == digits and int(digits) >= 1:
            self._comp_marks[base] = min(self._comp_marks[base], int(digits))

    def replace_entry(self, comp: HloComputation) -> HloComputation:
        """Makes `comp` the entry in place of the current one, which leaves the
        module (a pass that rewrites the whole entry, like the SPMD partitioner)."""
        old = self.entry
        self.entry = None
        if old is not None:
            self.computations.remove(old)
            self._forget_computation_name(old.name)
            old.parent = None
        return self.add_computation(comp, entry=True)

    def remove_computation(self, comp: HloComputation) -> None:
        if comp is self.entry:
            raise ValueError("cannot remove the entry computation")
        self.computations.remove(comp)
        self._forget_computation_name(comp.name)
        comp.parent = None

    def computation(self, name: str) -> HloComputation:
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(f"no computation {name!r} in module {self.name}")

    def uniquify(self, name: str) -> str:
        """`name` if unused in this module, else `name.N` with the next free N; reserves it."""
        if name not in self._names:
            self._names.add(name)
            return name
        base = name
        n = self._counters.get(base, 0)
        while True:
            n += 1
            candidate = f"{base}.{n}"
            if candidate not in self._names:
                self._counters[base] = n
                self._names.add(candidate)
                return candidate

    def reserve_name(self, name: str) -> None:
        self._names.add(name)

    def clone(self) -> "HloModule":
        """A copy to rewrite apart from this module: the same computations, instructions,
        names (and the name counters new names continue from), attributes and literals,
        printing the same text. Cheaper than parsing the text or lowering again (the
        12-layer GPT step: ~8,000 instructions)."""
        copy = HloModule(self.name, self.config)
        copy._names, copy._counters = set(self._names), dict(self._counters)
        comps: dict[int, HloComputation] = {}
        for comp in self.computations:
            new = HloComputation(comp.name)
            new.parent, new.is_fusion_computation = copy, comp.is_fusion_computation
            new.attrs = _copy_value(comp.attrs, comps)
            comps[id(comp)] = new
            copy.computations.append(new)
        instrs: dict[int, HloInstruction] = {}
        for comp in self.computations:
            new = comps[id(comp)]
            for instr in comp.instructions:
                clone = HloInstruction(
                    instr.opcode, instr.shape, [instrs[id(o)] for o in instr.operands],
                    attrs=_copy_value(instr.attrs, comps), name=instr.name,
                    literal=None if instr.literal is None else _copy_literal(instr.literal),
                    parameter_number=instr.parameter_number)
                clone.parent = new
                instrs[id(instr)] = clone
                new.instructions.append(clone)
            for instr in comp.instructions:
                if instr.control_predecessors:
                    instrs[id(instr)].control_predecessors = \
                        [instrs[id(p)] for p in instr.control_predecessors]
            new.root = None if comp.root is None else instrs[id(comp.root)]
        # Users in the original's order (passes visit them in it), not in the order the
        # operands were added here.
        for comp in self.computations:
            for instr in comp.instructions:
                instrs[id(instr)].users = [instrs[id(u)] for u in instr.users
                                           if id(u) in instrs]
        copy.entry = None if self.entry is None else comps[id(self.entry)]
        return copy

    def computations_post_order(self) -> list[HloComputation]:
        """Callees before callers, ending with the entry; unreachable ones excluded."""
        return callees_first([self.entry] if self.entry is not None else [])

    def instructions(self) -> Iterator[HloInstruction]:
        for comp in self.computations:
            yield from comp.instructions

    def to_text(self) -> str:
        from .printer import print_module   # printer imports ir; import late
        return print_module(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"


@contextlib.contextmanager
def control_edge_scope(module: "HloModule"):
    """While a pass runs: each computation of `module` without control edges is marked
    so, and the scans for control successors (removing or replacing an instruction,
    `control_successors`) skip it. The IR's methods unmark a computation when one of
    them gives an instruction of it a control predecessor (`add_control_predecessor`,
    adding or moving in an instruction that has some); a pass must not append to
    `control_predecessors` itself (tests/passes/test_ir_mutation.py checks passes/).
    Without the scope every scan runs: the results are the same.

    Scopes nest: a pipeline holds one over its whole run and each pass one of its own
    (which marks the computations made since, fused bodies). The marks and a
    computation's known order (`HloComputation._in_order`, kept by the IR's methods)
    last from one pass to the next and are forgotten when the outermost scope ends."""
    outermost = module.__dict__.get("_scoped") is None
    if outermost:
        module._scoped = []
    marked = [c for c in module.computations
              if not c._edge_free and not any(i.control_predecessors for i in c.instructions)]
    for comp in marked:
        comp._edge_free = True
    module._scoped.extend(marked)
    try:
        yield
    finally:
        # The marks last until the outermost scope ends (between passes only the
        # pipeline runs, which edits nothing).
        if outermost:
            for comp in module._scoped:
                comp._edge_free = comp._in_order = False
            module._scoped = None


_IMMUTABLE = (str, int, float, bool, type(None), Shape, RawAttr, SliceDim, PadDim, WindowDim,
              Window, ReplicaGroups)


def _copy_value(value, comps: dict):
    """An attribute value for a module's clone: computations mapped to their copies,
    containers copied, immutable values shared, anything else deep-copied."""
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, HloComputation):
        return comps[id(value)]
    if isinstance(value, tuple):
        return tuple(_copy_value(v, comps) for v in value)
    if isinstance(value, list):
        return [_copy_value(v, comps) for v in value]
    if isinstance(value, dict):
        return {k: _copy_value(v, comps) for k, v in value.items()}
    import copy
    return copy.deepcopy(value)


def _copy_literal(literal):
    """A copy of a constant's literal: an array, or a tuple of literals for a tuple shape."""
    if isinstance(literal, tuple):
        return tuple(_copy_literal(element) for element in literal)
    return np.array(literal, copy=True)


def _sorted_prefix(instrs: list[HloInstruction]) -> tuple[int, set[int]]:
    """(n, ids): instrs[:n] lists every operand and control predecessor before its
    reader, instrs[n] does not (n = len(instrs): all in order); ids: those of instrs[:n]."""
    done: set[int] = set()
    seen = done.__contains__
    for n, instr in enumerate(instrs):
        if not all(map(seen, map(id, instr.operands))) or (
                instr.control_predecessors
                and not all(map(seen, map(id, instr.control_predecessors)))):
            return n, done
        done.add(id(instr))
    return len(instrs), done


def _depends_on(a: HloInstruction, b: HloInstruction) -> bool:
    """True if `a` must run after `b`: `b` is reachable from `a` through operands and
    control predecessors."""
    seen, stack = set(), [a]
    while stack:
        x = stack.pop()
        if x is b:
            return True
        if id(x) in seen:
            continue
        seen.add(id(x))
        stack.extend(x.operands)
        stack.extend(x.control_predecessors)
    return False


_CALL_KEYS = frozenset(CALLED_COMPUTATION_ATTRS) | frozenset(CALLED_COMPUTATION_LIST_ATTRS)
_ONE_CALL = frozenset(CALLED_COMPUTATION_ATTRS)
_LIST_CALL = frozenset(CALLED_COMPUTATION_LIST_ATTRS)
_ATTRS = operator.attrgetter("attrs")


def callees_first(roots: Iterable[HloComputation]) -> list[HloComputation]:
    """Every computation reachable from `roots` (in their order), each after the
    computations it calls. Call graphs are shallow, so recursion is fine."""
    order: list[HloComputation] = []
    seen: set[int] = set()

    def visit(comp: HloComputation) -> None:
        if id(comp) in seen:
            return
        seen.add(id(comp))
        # The attribute dicts that name a computation, picked without a Python step per
        # instruction (every pass asks for this order; the 12-layer GPT step has ~4,000
        # instructions); their callees in the order called_computations gives.
        for attrs in itertools.filterfalse(_CALL_KEYS.isdisjoint,
                                           map(_ATTRS, comp.instructions)):
            for key, value in attrs.items():
                if key in _ONE_CALL:
                    visit(value)
                elif key in _LIST_CALL:
                    for callee in value:
                        visit(callee)
        order.append(comp)

    for root in roots:
        visit(root)
    return order
