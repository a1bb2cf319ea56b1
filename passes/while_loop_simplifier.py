"""While-loop simplification: constants sunk into the loop, dead state leaves dropped.

Constant sinking. A leaf the body passes through unchanged whose init is a constant
(or a broadcast or iota of constants: cheap to recompute, and loop fusion absorbs it)
holds that value on every trip, so the cond and the body read a copy of the constant
instead of the leaf:

    init = tuple(..., c = f32[4] constant({...}), ...)
    body: x = gte(p, k); y = add(x, z)     ->    x' = constant({...}); y = add(x', z)

The leaf then usually has no reader left but its own pass-through, and goes next.

Dead leaves. Leaf k is dead when nothing outside the loop reads it (every user of the
while is a get-tuple-element of another leaf), the cond does not read it, and in the
body what reads it feeds nothing but leaf k's own next value (no other leaf, no side
effect). Dropping it removes its per-trip work and its buffers.

Loops whose state is not a tuple read through get-tuple-element, or whose cond or body
another instruction also calls, are left alone (`can_reshape_state`). Sinking needs
only the loop's own cond and body. True iff anything changed.
"""
from __future__ import annotations

from ..hlo import HloComputation, HloInstruction, HloModule

from .hlo_utils import in_layout
from .pass_base import HloModulePass, register_pass
from .while_loop_analysis import is_movable, passthrough_leaves, single_caller, whiles
from .while_state import can_reshape_state, remove_leaves

# What sinking may clone into a loop: constants, and what makes an array of constants
# without reading memory.
SINKABLE = frozenset({"constant", "broadcast", "iota", "reshape", "bitcast"})


def _sinkable(value: HloInstruction) -> bool:
    if value.opcode not in SINKABLE or value.control_predecessors:
        return False
    if value.opcode == "constant":
        return value.literal is not None and not value.shape.is_tuple
    return all(_sinkable(op) for op in value.operands)


def _clone_into(comp: HloComputation, value: HloInstruction, before: HloInstruction,
                done: dict[int, HloInstruction]) -> HloInstruction:
    if id(value) not in done:
        operands = [_clone_into(comp, op, before, done) for op in value.operands]
        done[id(value)] = comp.clone_instruction(value, operands, before=before)
    return done[id(value)]


def sink_constants(loop: HloInstruction) -> bool:
    """Replaces the cond's and body's reads of constant pass-through leaves by copies of
    the constants; True if any read was replaced."""
    init = loop.operands[0]
    if init.opcode != "tuple":
        return False
    body, cond = loop.attrs["body"], loop.attrs["condition"]
    changed = False
    for k in sorted(passthrough_leaves(body)):
        value = init.operands[k]
        if not _sinkable(value):
            continue
        for comp in (body, cond):
            param = comp.parameters[0]
            for gte in list(param.users):
                if gte.opcode != "get-tuple-element" or gte.attrs["index"] != k:
                    continue
                readers = [u for u in gte.users if not (comp is body and u is body.root)]
                if not readers:
                    continue
                # (read in the leaf's layout, which the init's need not have)
                copy = in_layout(_clone_into(comp, value, gte, {}), gte.shape, comp, before=gte)
                for reader in readers:
                    reader.replace_operand_with(gte, copy)
                if gte.is_root:
                    comp.set_root(copy)
                changed = True
    return changed


def dead_leaves(loop: HloInstruction) -> set[int]:
    """The leaves of `loop` that nothing needs (see the module docstring)."""
    if loop.is_root or any(u.opcode != "get-tuple-element" for u in loop.users):
        return set()
    n = len(loop.shape.tuple_shapes)
    read_outside = {u.attrs["index"] for u in loop.users}
    cond, body = loop.attrs["condition"], loop.attrs["body"]
    read_by_cond = {g.attrs["index"] for g in cond.parameters[0].users if g.users or g.is_root}
    # feeds[i]: the root elements instruction i's value reaches (None: something that is
    # not a root element -- a side effect, or another computation's result).
    root = body.root
    feeds: dict[int, set | None] = {}
    for instr in reversed(body.post_order()):
        if instr is root:
            continue
        if not is_movable(instr) and instr.opcode != "get-tuple-element":
            feeds[id(instr)] = None
            continue
        reach: set | None = set()
        for user in instr.users:
            if user is root:
                reach |= {k for k, op in enumerate(root.operands) if op is instr}
                continue
            got = feeds.get(id(user))
            if got is None:
                reach = None
                break
            reach |= got
        feeds[id(instr)] = reach
    dead = set()
    param = body.parameters[0]
    readers: dict[int, list] = {}
    for gte in param.users:
        readers.setdefault(gte.attrs["index"], []).append(gte)
    for k in range(n):
        if k in read_outside or k in read_by_cond:
            continue
        if all(feeds.get(id(g)) is not None and feeds[id(g)] <= {k} for g in readers.get(k, [])) \
                and _only_feeds(root.operands[k], k, feeds):
            dead.add(k)
    return dead


def _only_feeds(value: HloInstruction, k: int, feeds) -> bool:
    # Leaf k's next value: what computes it must reach nothing else (else removing the
    # leaf's element changes nothing and the leaf's readers must stay).
    got = feeds.get(id(value))
    return got is not None and got <= {k}


@register_pass
class WhileLoopSimplifier(HloModulePass):
    """Sinks constant pass-through leaves into the loop and removes dead state leaves
    (see the module docstring). True iff anything changed."""

    name = "while-loop-simplifier"

    def run(self, module: HloModule) -> bool:
        changed = False
        loops = whiles(module)
        if not loops:
            return False
        callers = single_caller(module)
        for loop in loops:
            cond, body = loop.attrs["condition"], loop.attrs["body"]
            if callers.get(id(cond)) != 1 or callers.get(id(body)) != 1:
                continue
            changed |= sink_constants(loop)
            if not can_reshape_state(loop, callers):
                continue
            dead = dead_leaves(loop)
            if dead and len(dead) < len(loop.shape.tuple_shapes):
                remove_leaves(loop, dead)
                changed = True
        return changed

