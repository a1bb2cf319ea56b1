"""sharding-propagation: completes partial `sharding=` annotations (XLA's ShardingPropagation,
simplified).

First JAX's Shardy annotations are read (passes/sharding_maps.import_shardy). The
instructions annotated then are the user's choices and never change. The others
get a sharding carried along the dimension correspondences of sharding_maps.dim_map
(elementwise ops, broadcast, reshape of whole dimensions, transpose, slice, pad,
reverse, concatenate off its axis, dot's batch and free dimensions, reduce's kept
dimensions, convolution's batch, spatial (lhs) and output feature (kernel) dimensions,
reduce-window's dimensions (the partitioner exchanges halos for windowed ones,
passes/spmd_halo.py), gather's passthrough dimensions, scatter's operand;
tuple / get-tuple-element / while / one-operand call pass their elements through; a
conditional is not looked through: its result is replicated unless annotated):

1. forward, operands to users, in post order: the candidates are what each sharded
   operand implies; the one splitting the value into the most tiles wins (ties: the
   first operand). An inferred sharding is replaced only by a strictly more tiled one,
   so the rounds end;
2. backward, users to operands, in reverse post order, only for instructions still
   without a sharding: the most tiled of what the users imply;
3. repeat until nothing changes (at most 8 rounds); what is left has no
   information and becomes `{replicated}`.

So, when choices conflict: the user's annotation wins, then what the operands imply
over what the users imply, then the more tiled sharding. Replicated candidates do
not count as information until the end (a broadcast scalar takes its user's
sharding, not the scalar's). Nothing is done to a module without any sharding.
The partitioner (spmd-partitioner) turns any sharding into any other, so a choice
here only changes the communication, never the numbers.
"""
from __future__ import annotations

from ..hlo import HloModule, HloSharding
from .pass_base import HloModulePass, register_pass
from .sharding_maps import derive, dim_map, import_shardy, invert

MAX_ROUNDS = 8


def _tiles(s: HloSharding | None) -> int:
    if s is None or s.kind != "tiled":
        return 0
    return s.num_tiles


def _forward_candidates(instr, current):
    """Shardings `instr`'s result would take from each of its operands."""
    out = []
    code = instr.opcode
    if code == "get-tuple-element":
        s = current.get(instr.operands[0])
        if s is not None and s.is_tuple:
            out.append(s.elements[instr.attrs["index"]])
        return out
    if code == "tuple":
        elems = [current.get(o) for o in instr.operands]
        if any(e is not None and e.kind == "tiled" for e in elems):
            out.append(HloSharding.tuple_of(e if e is not None else HloSharding.replicate()
                                            for e in elems))
        return out
    if code == "while" or (code in ("call", "opt-barrier") and len(instr.operands) == 1):
        s = current.get(instr.operands[0])
        if s is not None:
            out.append(s)
        return out
    for i, op in enumerate(instr.operands):
        s = current.get(op)
        if s is None or s.is_tuple:
            continue
        m = dim_map(instr, i)
        if m is None:
            continue
        d = derive(s, m)
        if d is not None:
            out.append(d)
    return out


def _backward_candidates(instr, operand_index, current):
    """Shardings operand `operand_index` of `instr` would take from `instr`'s."""
    s = current.get(instr)
    if s is None:
        return None
    code = instr.opcode
    op = instr.operands[operand_index]
    if code == "get-tuple-element":
        return None
    if code == "tuple":
        return s.elements[operand_index] if s.is_tuple else None
    if code == "while" or (code in ("call", "opt-barrier") and len(instr.operands) == 1):
        return s
    if s.is_tuple or not op.shape.is_array:
        return None
    m = dim_map(instr, operand_index)
    if m is None:
        return None
    return derive(s, invert(m, len(op.shape.dims)))


def _better(new: HloSharding | None, old: HloSharding | None) -> bool:
    if new is None:
        return False
    if old is None:
        return new.kind == "tiled" or (new.is_tuple and not new.is_replicated)
    if new.is_tuple or old.is_tuple:
        return False
    return _tiles(new) > _tiles(old)


@register_pass
class ShardingPropagation(HloModulePass):
    name = "sharding-propagation"

    def run(self, module: HloModule) -> bool:
        changed = import_shardy(module)
        if not any("sharding" in i.attrs for i in module.instructions()):
            return changed
        for comp in module.computations:
            if comp is not module.entry:
                continue            # called computations compute whole values
            changed |= self._run_computation(comp)
        return changed

    def _run_computation(self, comp) -> bool:
        order = comp.post_order()
        fixed = {i for i in order if "sharding" in i.attrs}
        current = {i: i.attrs["sharding"] for i in fixed}
        for _ in range(MAX_ROUNDS):
            moved = False
            for instr in order:
                if instr in fixed:
                    continue
                for cand in sorted(_forward_candidates(instr, current), key=_tiles, reverse=True):
                    if cand.is_tuple and instr.shape.is_tuple and \
                            len(cand.elements) != len(instr.shape.tuple_shapes):
                        continue
                    if _better(cand, current.get(instr)):
                        current[instr] = cand
                        moved = True
                    break
            for instr in reversed(order):
                for i, op in enumerate(instr.operands):
                    if op in fixed or op in current:
                        continue
                    cand = _backward_candidates(instr, i, current)
                    if cand is not None and _better(cand, None):
                        current[op] = cand
                        moved = True
            if not moved:
                break
        changed = False
        for instr in order:
            if instr in fixed:
                continue
            s = current.get(instr)
            if s is None:
                s = HloSharding.replicate()
            instr.attrs["sharding"] = s
            changed = True
            if self.explain_log is not None:
                self.note(instr, None, None, done=f"sharding {s.to_text()}")
        return changed
