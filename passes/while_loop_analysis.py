"""What the while-loop passes know about a loop: its trip count, the state leaves its
body passes through unchanged, whether its computations may be cloned or moved.

The trip count is known for the counted loop JAX emits for `fori_loop`, `scan` and
threefry's rounds, and only for that form (anything else: None, "unknown"):

    init:  tuple(..., constant(a), ...)           leaf k, an integer scalar
    cond:  ROOT compare(gte(param, k), constant(c)), direction=LT|LE|GT|GE|NE
           (or the constant on the left)
    body:  ROOT tuple(..., add(gte(param, k), constant(s)), ...)
           (or subtract, or the constant on the left of the add)

The count is the number of times the body runs, computed in exact integers, and
declared unknown where the induction variable would wrap around its type before the
compare turns false (the loop may then not end where the arithmetic says). A state
that is the scalar itself (no tuple) has the same form with the parameter in place
of gte(param, k).

`WhileTripCountAnnotator` ("while-trip-count") writes the count on the while as XLA
prints it, `backend_config={"known_trip_count":{"n":"5"},...}`, where the while has
no backend_config of its own yet; the other passes ask `trip_count` directly.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..hlo import HloComputation, HloInstruction, HloModule, RawAttr

from .pass_base import HloModulePass, register_pass

# Opcodes that carry control flow: a body holding one is neither cloned (its callees
# would be shared by the clones) nor partly moved out of its loop.
CONTROL_FLOW = frozenset({"while", "conditional", "call", "async-start", "async-update",
                          "async-done", "fusion"})


@dataclass(frozen=True)
class InductionVariable:
    """The counted form found in a loop: state leaf `index` (None: the state is the
    scalar itself) starts at `init`, moves by `step` per trip, and the loop runs
    `trips` times."""
    index: int | None
    init: int
    step: int
    trips: int


def is_movable(instr: HloInstruction) -> bool:
    """May `instr` be evaluated another number of times, or elsewhere, than written?
    Not a side effect (rng, infeed, outfeed, send, recv, custom-call, ...), not a
    collective, not control flow."""
    info = instr.info
    return not (instr.has_side_effect() or info.side_effect or info.collective
                or info.per_device or instr.opcode in CONTROL_FLOW)


def is_pure_computation(comp: HloComputation) -> bool:
    """Every instruction of `comp` and of what it calls is movable (see `is_movable`),
    and none orders another by a control edge."""
    for instr in comp.instructions:
        if not is_movable(instr) or instr.control_predecessors:
            return False
        for callee in instr.called_computations():
            if not is_pure_computation(callee):
                return False
    return True


def leaf_of(value: HloInstruction, param: HloInstruction) -> int | None | bool:
    """The state leaf `value` reads: k for gte(param, k), None for the parameter
    itself; False for anything else."""
    if value is param:
        return None
    if value.opcode == "get-tuple-element" and value.operands[0] is param:
        return value.attrs["index"]
    return False


def reads_leaf(value: HloInstruction, param: HloInstruction, index: int | None) -> bool:
    """True if `value` is state leaf `index` of `param` (None: the whole parameter)."""
    found = leaf_of(value, param)
    return found is not False and found == index


def element_of(tup: HloInstruction, index: int | None) -> HloInstruction | None:
    """The instruction giving element `index` of tuple value `tup` (None: `tup`
    itself), when `tup` is a tuple instruction; else None."""
    if index is None:
        return tup
    if tup.opcode == "tuple":
        return tup.operands[index]
    return None


def constant_value(instr: HloInstruction | None):
    """The Python int of an integer scalar constant, else None."""
    if instr is None or instr.opcode != "constant" or instr.literal is None \
            or instr.shape.is_tuple or instr.shape.dims != ():
        return None
    value = np.asarray(instr.literal)
    if value.dtype.kind not in "iu":
        return None
    return int(value)


def passthrough_leaves(body: HloComputation) -> set[int]:
    """The state leaves the body returns unchanged: root tuple operand k is
    gte(param, k)."""
    root, param = body.root, body.parameters[0]
    if root.opcode != "tuple" or not param.shape.is_tuple:
        return set()
    return {k for k, op in enumerate(root.operands) if reads_leaf(op, param, k)}


_FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE", "EQ": "EQ"}


def induction_variable(loop: HloInstruction) -> InductionVariable | None:
    """The counted form of `loop` (a while), or None when it is not of that form."""
    cond, body = loop.attrs["condition"], loop.attrs["body"]
    compare = cond.root
    if compare.opcode != "compare" or len(compare.operands) != 2:
        return None
    cparam = cond.parameters[0]
    direction = compare.attrs.get("direction")
    lhs, rhs = compare.operands
    index = leaf_of(lhs, cparam)
    limit = constant_value(rhs)
    if index is False:                  # constant(c) < i  is  i > c
        index, limit = leaf_of(rhs, cparam), constant_value(lhs)
        direction = _FLIP.get(direction)
    if index is False or limit is None or direction not in _FLIP:
        return None
    element_type = (cparam.shape if index is None
                    else cparam.shape.tuple_shapes[index]).element_type
    if not _is_integer(element_type):
        return None
    # The body's update of the same leaf: i + s, s + i or i - s.
    update = element_of(body.root, index)
    bparam = body.parameters[0]
    if update is None or update.opcode not in ("add", "subtract") or len(update.operands) != 2:
        return None
    a, b = update.operands
    if reads_leaf(a, bparam, index) and constant_value(b) is not None:
        step = constant_value(b)
    elif update.opcode == "add" and reads_leaf(b, bparam, index) \
            and constant_value(a) is not None:
        step = constant_value(a)
    else:
        return None
    if update.opcode == "subtract":
        step = -step
    start = constant_value(element_of(loop.operands[0], index))
    if start is None:
        start = _constant_tuple_element(loop.operands[0], index)
    if start is None:
        return None
    trips = _count(start, step, limit, direction, element_type)
    if trips is None:
        return None
    return InductionVariable(index, start, step, trips)


def trip_count(loop: HloInstruction) -> int | None:
    """How many times the body of `loop` runs, when `induction_variable` knows."""
    iv = induction_variable(loop)
    return None if iv is None else iv.trips


def _constant_tuple_element(init: HloInstruction, index: int | None):
    """Element `index` of a tuple-shaped constant init, as an int, else None."""
    if index is None or init.opcode != "constant" or not isinstance(init.literal, tuple):
        return None
    value = np.asarray(init.literal[index])
    return int(value) if value.shape == () and value.dtype.kind in "iu" else None


def _is_integer(element_type: str) -> bool:
    return element_type[:1] in ("s", "u") and element_type[1:].isdigit()


def _bounds(element_type: str) -> tuple[int, int]:
    bits = int(element_type[1:])
    if element_type[0] == "u":
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _count(start: int, step: int, limit: int, direction: str, element_type: str) -> int | None:
    """Trips of `i = start; while (i <dir> limit) i += step` in exact arithmetic, or None
    when that is not what the typed loop does (a value leaves the type's range)."""
    low, high = _bounds(element_type)
    if not (low <= start <= high and low <= limit <= high):
        return None
    holds = {"LT": lambda i: i < limit, "LE": lambda i: i <= limit,
             "GT": lambda i: i > limit, "GE": lambda i: i >= limit,
             "NE": lambda i: i != limit, "EQ": lambda i: i == limit}[direction]
    if not holds(start):
        return 0
    if step == 0:
        return None                      # runs forever (or until something else ends it)
    if direction == "EQ":
        trips = 1                        # i == c once; after a nonzero step, no more
    elif direction == "NE":
        if (limit - start) % step or (limit - start) // step < 0:
            return None                  # steps over the limit: wraps around
        trips = (limit - start) // step
    elif direction in ("LT", "LE"):
        if step < 0:
            return None
        bound = limit if direction == "LT" else limit + 1
        trips = -(-(bound - start) // step)
    else:
        if step > 0:
            return None
        bound = limit if direction == "GT" else limit - 1
        trips = -(-(start - bound) // -step)
    # Every value the body computes, the last one included, must fit the type.
    last = start + trips * step
    if not low <= last <= high:
        return None
    return trips


def single_caller(module: HloModule) -> dict[int, int]:
    """How many instructions call each computation (by id)."""
    counts: dict[int, int] = {}
    for instr in module.instructions():
        for callee in instr.called_computations():
            counts[id(callee)] = counts.get(id(callee), 0) + 1
    return counts


def whiles(module: HloModule) -> list[HloInstruction]:
    """The while instructions of the computations reachable from the entry, callees'
    first."""
    return [i for comp in module.computations_post_order() for i in comp.instructions
            if i.opcode == "while"]


@register_pass
class WhileTripCountAnnotator(HloModulePass):
    """Writes the known trip count on each while whose count `trip_count` knows and
    that has no backend_config yet: `backend_config={"known_trip_count":{"n":"5"},
    "known_induction_variable":{"tuple_index":"0"}}` (XLA's spelling). Changes nothing
    else; True iff it annotated a loop."""

    name = "while-trip-count"

    def run(self, module: HloModule) -> bool:
        changed = False
        for loop in whiles(module):
            if "backend_config" in loop.attrs:
                continue
            iv = induction_variable(loop)
            if iv is None:
                continue
            config = {"known_trip_count": {"n": str(iv.trips)}}
            if iv.index is not None:
                config["known_induction_variable"] = {"tuple_index": str(iv.index)}
            loop.attrs["backend_config"] = RawAttr(json.dumps(config, separators=(",", ":")))
            changed = True
        return changed
