"""sharding-propagation: completes partial `sharding=` annotations (XLA's ShardingPropagation,
simplified).

First JAX's Shardy annotations are read (passes/sharding_maps.import_shardy). The
instructions annotated then are the user's choices and never change. The others
get a sharding carried along the dimension correspondences of sharding_maps.dim_map
(elementwise ops, broadcast, reshape (passes/spmd_reshape.py), transpose, slice, pad,
reverse, concatenate off its axis, dot's batch and free dimensions, reduce's kept
dimensions, convolution's batch, spatial (lhs) and output feature (kernel) dimensions,
reduce-window's dimensions (the partitioner exchanges halos for windowed ones,
passes/spmd_halo.py), gather's passthrough dimensions, scatter's operand;
tuple / get-tuple-element pass their elements through).

Control flow is looked through: the entry and every computation it reaches through
`while`, `conditional` and `call` (transitively) are one region, propagated together
(reducers and other scalar computations are not: they compute whole values):

    while:        operand  <->  body/condition parameter  <->  body root  <->  result
    conditional:  operand k+1 <-> branch k's parameter;  every branch root <-> result;
                  the branch index is a scalar (replicated)
    call:         operand i <-> the callee's parameter i;  callee root <-> result

(a while's state, its body's parameter and root and its condition's parameter are
one value, so a sharding any of them gets is a candidate for all of them: a fixed
point, as XLA's pass finds). The rounds:

1. forward, operands to users, in post order, every computation of the region
   callers first: the candidates are what each sharded operand implies (for a
   called computation's parameter: its call sites' operands; for a control-flow
   result: the called roots); the one splitting the value into the most tiles wins
   (ties: the first operand). An inferred sharding is replaced only by a strictly more
   tiled one (tuples: element by element), so the rounds end;
2. backward, users to operands, in reverse post order, only for instructions still
   without a sharding: the most tiled of what the users imply (a called root: what its
   caller's result has);
3. repeat until nothing changes (at most 16 rounds); what is left has no
   information and becomes `{replicated}`.

So, when choices conflict: the user's annotation wins, then what the operands imply
over what the users imply, then the more tiled sharding. Replicated candidates do
not count as information until the end (a broadcast scalar takes its user's
sharding, not the scalar's). Nothing is done to a module without any sharding.
The partitioner (spmd-partitioner) turns any sharding into any other, so a choice
here only changes the communication, never the numbers.
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..hlo import HloModule, HloSharding
from .pass_base import HloModulePass, register_pass
from .sharding_maps import derive, dim_map, import_shardy, invert
from .spmd_reshape import reshape_sharding

MAX_ROUNDS = 16


def _tiles(s: HloSharding | None) -> int:
    if s is None or s.kind != "tiled":
        return 0
    return s.num_tiles


def _has_tiles(s: HloSharding | None) -> bool:
    if s is None:
        return False
    if s.is_tuple:
        return any(_has_tiles(e) for e in s.elements)
    return s.kind == "tiled"


def _merge(old: HloSharding | None, new: HloSharding | None) -> HloSharding | None:
    """`old` improved by `new` (None: no improvement). Arrays: a strictly more tiled
    sharding; tuples: element by element."""
    if new is None:
        return None
    if old is None:
        return new if _has_tiles(new) else None
    if new.is_tuple and old.is_tuple:
        if len(new.elements) != len(old.elements):
            return None
        elems, better = [], False
        for o, n in zip(old.elements, new.elements):
            m = _merge(o, n)
            better |= m is not None
            elems.append(m if m is not None else o)
        return HloSharding.tuple_of(elems) if better else None
    if new.is_tuple or old.is_tuple:
        return None
    return new if _tiles(new) > _tiles(old) else None


def merge_compatible(a: HloSharding | None, b: HloSharding | None) -> HloSharding | None:
    """One sharding that splits every dimension `a` splits as `a` does and every one `b`
    splits as `b` does, when the devices allow it (each device's tile under `a` and
    under `b` pick one tile of the merged grid, every merged tile held by as many
    devices); None otherwise. A dot's lhs splitting its rows over mesh axis x (rows
    replicated over y) and its rhs splitting its columns over y give the result split
    both ways, [x, y]: the local dot then needs no communication, as XLA's merge of
    operand shardings does."""
    if a is None or b is None or a.kind != "tiled" or b.kind != "tiled":
        return None
    if a.data_rank != b.data_rank or any(k != "replicated" for k in a.subgroups + b.subgroups):
        return None
    if a.device_set() != b.device_set():
        return None
    rank = a.data_rank
    ca, cb = a.tile_counts(rank), b.tile_counts(rank)
    if any(x > 1 and y > 1 and x != y for x, y in zip(ca, cb)):
        return None
    counts = [max(x, y) for x, y in zip(ca, cb)]
    devices = sorted(a.device_set())
    tiles = prod(counts)
    if tiles <= max(a.num_tiles, b.num_tiles) or len(devices) % tiles:
        return None
    groups: dict[tuple, list] = {}
    for dev in devices:
        ia, ib = a.tile_index(dev), b.tile_index(dev)
        if any(x > 1 and y > 1 and i != j for x, y, i, j in zip(ca, cb, ia, ib)):
            return None
        groups.setdefault(tuple(i if x > 1 else j for x, i, j in zip(ca, ia, ib)),
                          []).append(dev)
    rep = len(devices) // tiles
    if len(groups) != tiles or any(len(g) != rep for g in groups.values()):
        return None
    grid = np.zeros(counts + [rep], dtype=np.int64)
    for index, g in groups.items():
        grid[index] = g
    return HloSharding.tiled(grid, replicate_last=True)


def _fits(s: HloSharding, shape) -> bool:
    if shape.is_tuple:
        return not s.is_tuple or len(s.elements) == len(shape.tuple_shapes)
    return not s.is_tuple


def branches(instr) -> list:
    """A conditional's branch computations, in branch-index order (false after true
    for the predicate form)."""
    if "branch_computations" in instr.attrs:
        return list(instr.attrs["branch_computations"])
    return [instr.attrs["true_computation"], instr.attrs["false_computation"]]


def control_callees(instr) -> list:
    """The computations a control-flow instruction runs on its operands."""
    if instr.opcode == "while":
        return [instr.attrs["condition"], instr.attrs["body"]]
    if instr.opcode == "conditional":
        return branches(instr)
    if instr.opcode == "call":
        return [instr.attrs["to_apply"]]
    return []


class _Region:
    """The entry and the computations it reaches through control flow, callers first,
    with each computation's call sites."""

    def __init__(self, module: HloModule):
        self.comps, self.sites = [], {}
        seen = set()

        def visit(comp):
            if id(comp) in seen:
                return
            seen.add(id(comp))
            self.comps.append(comp)
            for instr in comp.instructions:
                for callee in control_callees(instr):
                    self.sites.setdefault(callee, []).append(instr)
                    visit(callee)
        visit(module.entry)

    def param_sources(self, param) -> list:
        """The caller-side values that flow into `param` (a called computation's
        parameter): operands at every call site, and for a loop its state's other forms."""
        comp, k = param.parent, param.parameter_number
        out = []
        for site in self.sites.get(comp, ()):
            if site.opcode == "while":
                body = site.attrs["body"]
                out += [site.operands[0], site, body.root, body.parameters[0],
                        site.attrs["condition"].parameters[0]]
            elif site.opcode == "conditional":
                for b, comp_b in enumerate(branches(site)):
                    if comp_b is comp:
                        out.append(site.operands[b + 1])
            elif k < len(site.operands):
                out.append(site.operands[k])
        return [v for v in out if v is not param]

    def root_sources(self, root) -> list:
        """What a called computation's root must agree with: its callers' results."""
        out = []
        for site in self.sites.get(root.parent, ()):
            if site.opcode == "while" and root is not site.attrs["body"].root:
                continue        # the condition's root is a predicate
            out.append(site)
            if site.opcode == "while":
                out.append(site.attrs["body"].parameters[0])
        return out


def _forward_candidates(instr, current, region: _Region):
    """Shardings `instr`'s result would take from each of its operands."""
    out = []
    code = instr.opcode
    if code == "parameter":
        return [current[v] for v in region.param_sources(instr) if v in current]
    if code == "get-tuple-element":
        s = current.get(instr.operands[0])
        if s is not None and s.is_tuple:
            out.append(s.elements[instr.attrs["index"]])
        return out
    if code == "tuple":
        elems = [current.get(o) for o in instr.operands]
        if any(_has_tiles(e) for e in elems):
            out.append(HloSharding.tuple_of(e if e is not None else HloSharding.replicate()
                                            for e in elems))
        return out
    if code == "while":
        body, cond = instr.attrs["body"], instr.attrs["condition"]
        srcs = [instr.operands[0], body.root, body.parameters[0], cond.parameters[0]]
        return [current[v] for v in srcs if v in current]
    if code == "conditional":
        return [current[b.root] for b in branches(instr) if b.root in current]
    if code == "call":
        root = instr.attrs["to_apply"].root
        return [current[root]] if root in current else []
    if code == "opt-barrier" and len(instr.operands) == 1:
        s = current.get(instr.operands[0])
        return [s] if s is not None else []
    if code == "reshape" and instr.shape.is_array:
        s = current.get(instr.operands[0])
        d = reshape_sharding(s, instr.operands[0].shape.dims, instr.shape.dims) \
            if s is not None and not s.is_tuple else None
        return [d] if d is not None else []
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
    if code == "dot" and len(out) == 2:
        # the lhs's free dimensions split one way, the rhs's another: both at once
        merged = merge_compatible(out[0], out[1])
        if merged is not None:
            out.insert(0, merged)
    return out


def _backward_candidates(instr, operand_index, current):
    """Shardings operand `operand_index` of `instr` would take from `instr`'s (and, for
    control flow, from the called parameters)."""
    code = instr.opcode
    op = instr.operands[operand_index]
    if code == "while":
        srcs = [instr, instr.attrs["body"].parameters[0]]
        return [current[v] for v in srcs if v in current]
    if code == "conditional":
        if operand_index == 0:
            return []                   # the branch index: replicated
        p = branches(instr)[operand_index - 1].parameters
        return [current[p[0]]] if p and p[0] in current else []
    if code == "call":
        p = instr.attrs["to_apply"].parameters
        return [current[p[operand_index]]] if p[operand_index] in current else []
    s = current.get(instr)
    if s is None or code == "get-tuple-element":
        return []
    if code == "tuple":
        return [s.elements[operand_index]] if s.is_tuple else []
    if code == "opt-barrier" and len(instr.operands) == 1:
        return [s]
    if s.is_tuple or not op.shape.is_array:
        return []
    if code == "reshape":
        d = reshape_sharding(s, instr.shape.dims, op.shape.dims)
        return [d] if d is not None else []
    m = dim_map(instr, operand_index)
    if m is None:
        return []
    d = derive(s, invert(m, len(op.shape.dims)))
    return [d] if d is not None else []


def _offer(instr, cands, current) -> bool:
    """Improves current[instr] with the candidates, most tiled first; True if it moved."""
    moved = False
    for cand in sorted(cands, key=_tiles, reverse=True):
        if not _fits(cand, instr.shape):
            continue
        m = _merge(current.get(instr), cand)
        if m is not None:
            current[instr] = m
            moved = True
    return moved


@register_pass
class ShardingPropagation(HloModulePass):
    name = "sharding-propagation"

    def run(self, module: HloModule) -> bool:
        changed = import_shardy(module)
        if not any("sharding" in i.attrs for i in module.instructions()):
            return changed
        region = _Region(module)
        orders = [(comp, comp.post_order()) for comp in region.comps]
        fixed = {i for _, order in orders for i in order if "sharding" in i.attrs}
        current = {i: i.attrs["sharding"] for i in fixed}
        for _ in range(MAX_ROUNDS):
            moved = False
            for comp, order in orders:
                moved |= self._round(comp, order, fixed, current, region)
            if not moved:
                break
        for _, order in orders:
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

    @staticmethod
    def _round(comp, order, fixed, current, region) -> bool:
        moved = False
        for instr in order:
            if instr not in fixed:
                moved |= _offer(instr, _forward_candidates(instr, current, region), current)
        root = comp.root
        if comp in region.sites and root not in fixed and root not in current:
            moved |= _offer(root, [current[v] for v in region.root_sources(root)
                                   if v in current], current)
        for instr in reversed(order):
            for i, op in enumerate(instr.operands):
                if op in fixed or op in current:
                    continue
                moved |= _offer(op, _backward_candidates(instr, i, current), current)
        return moved
