"""The HLO verifier: structural and shape invariants of a module.

`verify(module)` returns None or raises `VerifyError` naming the computation,
the instruction (`%add.1 = f32[4] add(%x, %y)`) and what is wrong. Passes run
it between pipeline stages with `context="after pass dce"`, which prefixes the
message so the culprit is named.

Checks, in the order they run (structure first, so that shape inference never
sees a broken graph):

- module: an entry that belongs to it, unique computation and instruction
  names, called computations that belong to the module, no recursion;
- computation: a root inside it, parameters numbered 0..n-1, operands, users
  and control predecessors inside the same computation and consistent with
  each other, no cycles;
- instruction: operand count vs. the opcode's arity, a constant's literal of
  the declared dims, and the declared shape equal (ignoring layouts) to the one
  shape inference gives. The shape rules also check called-computation
  signatures (reducers, comparators, loop condition/body, branches, fusion and
  call parameters), fusion kinds, tuple indices and float-only operands; no
  mixed floating-point precision among the operands except in the ops XLA's
  verifier allows it in (MIXED_PRECISION_OPCODES: dot, convolution, sort,
  reduce-window, tuple, call, ...); a custom-call's operand_layout_constraints
  has one shape per operand, equal to it up to layout;
- collectives, against the module's `replica_count` x `num_partitions` devices
  (hlo/collectives.py; a module whose header gives neither count gets only the
  checks that need none, as in XLA): replica_groups name every id in range exactly once, in
  groups of one size except for all-reduce; source_target_pairs in range with
  no source or target twice; the group size fits the shapes (all-gather and
  reduce-scatter change dimension d by exactly the group size, all-to-all
  splits a dimension divisible by it or takes one operand per participant);
  a -done takes the matching -start.
- shardings (hlo/sharding.py): a `sharding=` fits its instruction's shape (a tiled
  sharding splits as many dimensions as the shape has, a tuple sharding has one element
  per tuple element) and, when the header gives the device count, names every device
  exactly once.

`check_static_shapes(module)` is a separate check for whoever computes (the
evaluator and the CPU backend call it): it raises VerifyError naming the first
instruction with a dynamic dimension (`f32[<=8]`, `f32[?]`). Such modules parse,
verify and print, but nothing here computes with them: a bounded dimension
would compute with its bound, which is only right while the runtime size equals
it, so they are refused rather than guessed at.
"""
from __future__ import annotations

import numpy as np

from . import collectives
from .attributes import layout_constraints_problem
from .dtypes import DTYPES
from .ir import HloComputation, HloInstruction, HloModule
from .opcodes import OPCODES
from .shape_inference import infer_shape
from .shape_rules_common import ShapeError
from .sharding import HloSharding, ShardingError


class VerifyError(ValueError):
    """The module breaks an invariant; the message names where and what."""


def describe(instr: HloInstruction) -> str:
    """`%add.1 = f32[4] add(%x, %y)`: enough to find the instruction in a dump."""
    operands = ", ".join(f"%{o.name}" for o in instr.operands)
    return f"%{instr.name} = {instr.shape} {instr.opcode}({operands})"


def check_static_shapes(module: HloModule, what: str = "this computes") -> None:
    """Raises VerifyError at the first instruction (or called computation's) with a
    dynamic dimension: `what` says who refuses it."""
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.shape.is_dynamic or any(o.shape.is_dynamic for o in instr.operands):
                raise VerifyError(
                    f"in computation {comp.name}: {describe(instr)}: dynamic dimensions "
                    f"(<=N or ?) are parsed and printed but {what} only static shapes")


def verify(module: HloModule, context: str | None = None) -> None:
    """Raises VerifyError unless `module` satisfies every invariant above."""
    try:
        _verify_module(module)
    except VerifyError as e:
        if context:
            raise VerifyError(f"{context}: {e}") from None
        raise


def _fail(where: str, message: str):
    raise VerifyError(f"{where}: {message}")


# --- module ---------------------------------------------------------------------

def _verify_module(module: HloModule) -> None:
    where = f"module {module.name}"
    if module.entry is None:
        _fail(where, "has no entry computation")
    if not any(c is module.entry for c in module.computations):
        _fail(where, f"entry computation {module.entry.name} is not in the module")
    _check_unique_names(module)
    _check_call_graph(module)
    for comp in module.computations:
        _verify_structure(comp)
    for comp in module.computations:
        for instr in comp.instructions:
            _verify_instruction(comp, instr)
            if OPCODES[instr.opcode].collective:
                _verify_collective(module, comp, instr)
            if isinstance(instr.attrs.get("sharding"), HloSharding):
                _verify_sharding(module, comp, instr)


def _check_unique_names(module: HloModule) -> None:
    where = f"module {module.name}"
    seen_comps: set[str] = set()
    seen_instrs: dict[str, str] = {}
    for comp in module.computations:
        if comp.name in seen_comps:
            _fail(where, f"two computations are named {comp.name}")
        seen_comps.add(comp.name)
        for instr in comp.instructions:
            if instr.name in seen_instrs:
                _fail(where, f"instruction name {instr.name} is used in computation "
                             f"{seen_instrs[instr.name]} and in {comp.name}")
            seen_instrs[instr.name] = comp.name


def _check_call_graph(module: HloModule) -> None:
    """Called computations belong to the module; no computation calls itself, even indirectly."""
    members = {id(c) for c in module.computations}
    for comp in module.computations:
        for instr in comp.instructions:
            for callee in instr.called_computations():
                if not isinstance(callee, HloComputation):
                    _fail(f"computation {comp.name}, instruction {describe(instr)}",
                          f"calls {callee!r}, which is not a computation")
                if id(callee) not in members:
                    _fail(f"computation {comp.name}, instruction {describe(instr)}",
                          f"calls computation {callee.name}, which is not in the module")
    state: dict[int, str] = {}          # absent: unvisited, "active": on the stack, "done"

    def visit(comp: HloComputation, path: list[str]) -> None:
        state[id(comp)] = "active"
        for instr in comp.instructions:
            for callee in instr.called_computations():
                if state.get(id(callee)) == "active":
                    cycle = " -> ".join(path + [comp.name, callee.name])
                    _fail(f"module {module.name}", f"recursive calls: {cycle}")
                if id(callee) not in state:
                    visit(callee, path + [comp.name])
        state[id(comp)] = "done"

    for comp in module.computations:
        if id(comp) not in state:
            visit(comp, [])


# --- computation structure --------------------------------------------------------

def _verify_structure(comp: HloComputation) -> None:
    where = f"computation {comp.name}"
    members = {id(i) for i in comp.instructions}
    if comp.root is None:
        _fail(where, "has no root")
    if id(comp.root) not in members:
        _fail(where, f"root {describe(comp.root)} is not one of its instructions")
    numbers = []
    for instr in comp.instructions:
        at = f"{where}, instruction {describe(instr)}"
        if instr.parent is not comp:
            owner = instr.parent.name if instr.parent is not None else "no computation"
            _fail(at, f"its parent is {owner}")
        if instr.opcode == "parameter":
            if instr.parameter_number is None:
                _fail(at, "parameter has no number")
            numbers.append(instr.parameter_number)
        _check_edges(comp, instr, members, at)
    if sorted(numbers) != list(range(len(numbers))):
        _fail(where, f"parameters must be numbered 0..{len(numbers) - 1} without gaps "
                     f"or duplicates, got {sorted(numbers)}")
    _check_acyclic(comp)


def _check_edges(comp, instr, members, at) -> None:
    """Operands, users and control predecessors stay inside `comp` and agree."""
    for op in instr.operands:
        if id(op) not in members:
            owner = op.parent.name if op.parent is not None else "no computation"
            _fail(at, f"operand %{op.name} belongs to {owner}, not {comp.name}")
        if not any(u is instr for u in op.users):
            _fail(at, f"is missing from the users of its operand %{op.name}")
    for user in instr.users:
        if id(user) not in members:
            _fail(at, f"user %{user.name} is not in {comp.name}")
        if not any(o is instr for o in user.operands):
            _fail(at, f"lists %{user.name} as a user, but is not its operand")
    for pred in instr.control_predecessors:
        if id(pred) not in members:
            _fail(at, f"control predecessor %{pred.name} is not in {comp.name}")


def _check_acyclic(comp: HloComputation) -> None:
    """Depth-first search over operands and control edges; a back edge is a cycle."""
    state: dict[int, str] = {}
    for start in comp.instructions:
        if id(start) in state:
            continue
        state[id(start)] = "active"
        stack = [(start, iter(start.operands + start.control_predecessors))]
        while stack:
            node, edges = stack[-1]
            nxt = next(edges, None)
            if nxt is None:
                state[id(node)] = "done"
                stack.pop()
            elif state.get(id(nxt)) == "active":
                cycle = " -> ".join(f"%{n.name}" for n, _ in stack) + f" -> %{nxt.name}"
                _fail(f"computation {comp.name}", f"has a cycle: {cycle}")
            elif id(nxt) not in state:
                state[id(nxt)] = "active"
                stack.append((nxt, iter(nxt.operands + nxt.control_predecessors)))


# --- instructions ---------------------------------------------------------------------

def _verify_instruction(comp: HloComputation, instr: HloInstruction) -> None:
    at = f"computation {comp.name}, instruction {describe(instr)}"
    arity = OPCODES[instr.opcode].arity
    if arity is not None and len(instr.operands) != arity:
        _fail(at, f"{instr.opcode} takes {arity} operand{'s' * (arity != 1)}, "
                  f"has {len(instr.operands)}")
    if instr.opcode == "constant":
        _check_literal(instr, at)
    try:
        inferred = infer_shape(instr.opcode, [o.shape for o in instr.operands], instr.attrs,
                               result_hint=instr.shape)
    except ShapeError as e:
        _fail(at, str(e))
    if inferred != instr.shape:      # Shape equality ignores layouts
        _fail(at, f"shape {instr.shape} does not match the inferred {inferred}")
    _check_mixed_precision(instr, at)
    constraints = instr.attrs.get("operand_layout_constraints")
    if constraints is not None:
        problem = layout_constraints_problem(constraints, [o.shape for o in instr.operands])
        if problem:
            _fail(at, problem)


# Opcodes whose operands may mix floating-point types, as in XLA's verifier (its
# allow-list for mixed precision: ops that pass data through, group it in tuples, or
# accumulate in a wider type). Every other op with floating-point operands takes one
# floating-point type across all of them (tuple elements included).
MIXED_PRECISION_OPCODES = frozenset({
    "call", "conditional", "constant", "convolution", "dot",
    "all-reduce", "all-reduce-start", "all-reduce-done",
    "all-gather", "all-gather-start", "all-gather-done",
    "async-start", "async-update", "async-done", "copy-start", "copy-done",
    "custom-call", "domain", "fusion", "get-tuple-element", "opt-barrier", "parameter",
    "reduce-precision", "reduce-window", "sort", "tuple", "while"})


def _check_mixed_precision(instr: HloInstruction, at: str) -> None:
    if instr.opcode in MIXED_PRECISION_OPCODES:
        return
    seen = None
    for op in instr.operands:
        for leaf in op.shape.leaves():
            if leaf.is_array and DTYPES[leaf.element_type].is_float:
                if seen is None:
                    seen = leaf.element_type
                elif leaf.element_type != seen:
                    _fail(at, f"floating-point operands of different precisions ({seen} and "
                              f"{leaf.element_type}): mixed precision is not allowed in "
                              f"{instr.opcode} (only in {', '.join(sorted(MIXED_PRECISION_OPCODES))})")


def _verify_sharding(module: HloModule, comp: HloComputation, instr: HloInstruction) -> None:
    """The sharding fits the shape; with num_partitions in the header, its devices are
    the partitions 0..P-1 (SPMD shardings name partitions)."""
    devices = module.num_partitions if "num_partitions" in module.config else None
    try:
        instr.attrs["sharding"].validate(instr.shape, devices)
    except ShardingError as e:
        _fail(f"computation {comp.name}, instruction {describe(instr)}", str(e))


def _check_literal(instr: HloInstruction, at: str) -> None:
    """An array constant's literal has the declared dims (None: an elided `{...}`)."""
    if instr.literal is None or not instr.shape.is_array:
        return
    got = tuple(np.shape(instr.literal))
    if got != instr.shape.dims:
        _fail(at, f"literal has dims {list(got)}, the shape says {list(instr.shape.dims)}")


# --- collectives ----------------------------------------------------------------------

# Ops that split or stack per participant: their groups must all have one size.
_UNIFORM_GROUPS = frozenset({"all-gather", "all-gather-start", "reduce-scatter", "all-to-all",
                             "ragged-all-to-all", "collective-broadcast"})


def _verify_collective(module: HloModule, comp: HloComputation, instr: HloInstruction) -> None:
    at = f"computation {comp.name}, instruction {describe(instr)}"
    R, P = module.replica_count, module.num_partitions
    if "replica_count" not in module.config and "num_partitions" not in module.config:
        # As XLA's verifier: a module that does not say how many devices it runs on
        # (JAX's global module before partitioning) only gets the checks that need
        # no device count.
        _check_ids_unique(at, instr)
        return
    try:
        if collectives.is_async_done(instr):
            collectives.async_start_of(instr)
            return
        if instr.opcode in ("collective-permute", "collective-permute-start"):
            collectives.permute_pairs(instr, R, P)
            return
        groups = collectives.device_groups(instr, R, P)
    except collectives.CollectiveError as e:
        _fail(at, f"{e.detail} (replica_count={R}, num_partitions={P})")
    sizes = sorted({len(g) for g in groups})
    if instr.opcode in _UNIFORM_GROUPS and len(sizes) > 1:
        _fail(at, f"{instr.opcode} needs groups of one size, got sizes {sizes}")
    size = sizes[0]
    if instr.opcode in ("all-gather", "all-gather-start", "reduce-scatter"):
        _check_shard_count(at, instr, size)
    elif instr.opcode == "ragged-all-to-all":
        n = instr.operands[2].shape.dims[0]
        if n % size:
            _fail(at, f"ragged-all-to-all's {n} offsets must split evenly over groups of "
                      f"{size}")
    elif instr.opcode == "all-to-all":
        if "dimensions" in instr.attrs:
            (d,) = instr.dims()
            extent = instr.operands[0].shape.dims[d]
            if extent % size:
                _fail(at, f"all-to-all splits dimension {d} of size {extent} into {size} "
                          f"parts (the group size): not divisible")
        elif len(instr.operands) != size:
            _fail(at, f"all-to-all without dimensions= takes one operand per participant: "
                      f"{size}, got {len(instr.operands)}")


def _check_ids_unique(at: str, instr: HloInstruction) -> None:
    groups = instr.attrs.get("replica_groups")
    ids = [i for g in groups.groups for i in g] if groups is not None else []
    if groups is not None and any(not g for g in groups.groups):
        _fail(at, "replica_groups has an empty group")
    pairs = instr.attrs.get("source_target_pairs", ())
    for what, values in (("id", ids), ("source", [s for s, _ in pairs]),
                         ("target", [t for _, t in pairs])):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            where = "replica_groups" if what == "id" else "source_target_pairs"
            _fail(at, f"{where} names {what} {twice[0]} twice")


def _check_shard_count(at: str, instr: HloInstruction, size: int) -> None:
    """all-gather multiplies dimension d by the group size, reduce-scatter divides it."""
    (d,) = instr.dims()
    result = instr.shape.tuple_shapes[1] if instr.opcode == "all-gather-start" else instr.shape
    results = result.tuple_shapes if len(instr.operands) > 1 else (result,)
    for i, (x, y) in enumerate(zip(instr.operands, results)):
        if instr.opcode == "reduce-scatter":
            extent = x.shape.dims[d]
            if extent % size:
                _fail(at, f"reduce-scatter over groups of {size} cannot split dimension {d} "
                          f"of operand {i} ({extent}): not divisible")
            if y.dims[d] != extent // size:
                _fail(at, f"reduce-scatter over groups of {size} makes dimension {d} of "
                          f"operand {i} {extent // size}, not {y.dims[d]}")
        elif y.dims[d] != x.shape.dims[d] * size:
            _fail(at, f"all-gather over groups of {size} makes dimension {d} of operand {i} "
                      f"{x.shape.dims[d] * size}, not {y.dims[d]}")
