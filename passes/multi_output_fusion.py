"""Multi-output fusion: one kernel computes several results from one pass over the data.

With an explain log (pass_base) the pass notes every merge, and for each pair it
considered and left apart (siblings reading one operand, a producer and its fused
consumer) why: different iteration spaces, a dependence between them, a fusion
that is not a per-element loop.
"""
from __future__ import annotations

from ..hlo import HloComputation, HloInstruction, HloModule

from .fusion_utils import fuse_producer, fusion_kind, merge_siblings, outputs
from .hlo_utils import Reachability
from .instruction_fusion import fusible_computations, is_loop_body
from .pass_base import HloModulePass, register_pass


def iteration_space(fusion: HloInstruction) -> tuple | None:
    """What a fusion's kernel loops over; only fusions with equal spaces may share a loop.

    A loop fusion iterates over its output dimensions (all outputs must agree);
    an input fusion over its reduce operand's dimensions and reduced dimensions.
    """
    values = outputs(fusion)
    if any(not v.shape.is_array for v in values):
        return None        # a variadic reduce (argmax) already returns a tuple: keep it flat
    kind = fusion_kind(fusion)
    if kind == "loop":
        spaces = {("loop", v.shape.dims) for v in values}
    elif kind == "input":
        spaces = {("input", v.operands[0].shape.dims, v.dims()) if v.opcode == "reduce" else None
                  for v in values}
    else:
        return None
    return spaces.pop() if len(spaces) == 1 and None not in spaces else None


def _is_candidate(instr: HloInstruction) -> bool:
    return (instr.opcode == "fusion" and not instr.is_root and iteration_space(instr) is not None
            and is_loop_body(instr))


class _Memo:
    """`_is_candidate`, `iteration_space` and `reduce_walk` of each instruction, computed
    once per walk over a computation: a fusion is asked once per operand it reads (and
    once per sibling for its walk), and each scans its body. `forget` an instruction a
    merge changed (keyed by id, the instruction is kept so that no id is reused)."""

    def __init__(self):
        self._seen: dict[int, tuple] = {}
        self._walks: dict[int, tuple] = {}

    def walk(self, instr: HloInstruction) -> tuple | None:
        entry = self._walks.get(id(instr))
        if entry is None:
            entry = self._walks[id(instr)] = (instr, reduce_walk(instr))
        return entry[1]

    def _entry(self, instr: HloInstruction) -> tuple:
        entry = self._seen.get(id(instr))
        if entry is None:
            space = iteration_space(instr) if instr.opcode == "fusion" else None
            entry = (instr, _is_candidate(instr), space)
            self._seen[id(instr)] = entry
        return entry

    def is_candidate(self, instr: HloInstruction) -> bool:
        return self._entry(instr)[1]

    def space(self, instr: HloInstruction) -> tuple | None:
        return self._entry(instr)[2]

    def forget(self, instr: HloInstruction) -> None:
        self._seen.pop(id(instr), None)
        self._walks.pop(id(instr), None)


def _why_not_candidate(instr: HloInstruction) -> str | None:
    """Why the fusion `instr` takes no part in multi-output fusion, or None (explaining)."""
    if instr.is_root:
        return f"{instr.name} is the computation's root"
    if iteration_space(instr) is None:
        return f"{instr.name} is not a loop or input fusion over one iteration space"
    if not is_loop_body(instr):
        return f"{instr.name} writes in place or contracts (not a per-element loop)"
    return None


def _space_text(space: tuple) -> str:
    if space[0] == "loop":
        return f"a loop over {list(space[1])}"
    return f"a reduce of {list(space[1])} over {list(space[2])}"


# Siblings merge for the read they share: only where the shared operand is at least
# 1/SHARED_READ_SHARE of what the larger of the two reads. A small shared operand saves
# next to nothing, and it chains: the 12-layer GPT step's 24 bias and gain updates
# (each reducing its own 4 MiB gradient) all read one small parameter with some other
# fusion, and merged, pair by pair, into one kernel of 24 outputs whose body alone took
# LLVM 0.43 s (a body per layer pair is compiled once and reused).
SHARED_READ_SHARE = 4


def _bytes(instr: HloInstruction) -> int:
    return sum(leaf.nbytes for leaf in instr.shape.leaves())


def _reads(fusion: HloInstruction) -> int:
    """Bytes of the distinct operands a fusion reads."""
    return sum(_bytes(o) for o in {id(o): o for o in fusion.operands}.values())


def _shares_enough(operand: HloInstruction, a: HloInstruction, b: HloInstruction) -> bool:
    return _bytes(operand) * SHARED_READ_SHARE >= max(_reads(a), _reads(b))


def reduce_walk(fusion: HloInstruction) -> tuple | None:
    """(walked dims, reduced dims) of a fusion that computes column reduces of one walk
    (each keeps its input's minor dimension; one input shape, the same reduced
    dimensions) and whose outputs are those reduces or pointwise functions of them
    (elementwise ops; parameters and constants of the reduces' shape; scalars). Such a
    kernel visits every element of the walked shape once, in order, and can store a
    value of that shape on the way (see `_side_partner`); None for other fusions."""
    if fusion.opcode != "fusion" or fusion_kind(fusion) not in ("loop", "input"):
        return None
    body = fusion.fused_computation
    reduces = [i for i in body.instructions if i.opcode == "reduce"]
    if not reduces:
        return None
    keys = set()
    for r in reduces:
        shape, dims = r.operands[0].shape, tuple(sorted(r.dims()))
        if len(r.operands) != 2 or not dims or shape.rank - 1 in dims \
                or not shape.has_default_layout() or not r.shape.has_default_layout():
            return None
        keys.add((shape.dims, dims))
    if len(keys) != 1:
        return None
    root = body.root
    elements = root.operands if root.opcode == "tuple" else [root]
    row = reduces[0].shape.dims
    if not all(_pointwise_over_reduces(e, row) for e in elements):
        return None
    return keys.pop()


def _pointwise_over_reduces(value: HloInstruction, row: tuple) -> bool:
    stack, seen = [value], set()
    while stack:
        node = stack.pop()
        if id(node) in seen or node.opcode == "reduce":
            continue
        seen.add(id(node))
        shape = node.shape
        if not shape.is_array or not shape.has_default_layout():
            return False
        if node.opcode in ("parameter", "constant"):
            if shape.dims != row and shape.rank:
                return False
        elif node.opcode == "broadcast" and node.operands[0].shape.rank == 0:
            stack.extend(node.operands)
        elif node.info.is_elementwise and (shape.dims == row or not shape.rank):
            stack.extend(node.operands)
        else:
            return False
    return True


def _side_values(fusion: HloInstruction, dims: tuple) -> bool:
    """A loop fusion with no reduce whose outputs all have the shape `dims`, in the
    default layout: values a column reduce's walk over `dims` can store as it goes."""
    if fusion_kind(fusion) != "loop" \
            or any(i.opcode == "reduce" for i in fusion.fused_computation.instructions):
        return False
    return all(v.shape.is_array and v.shape.dims == dims and v.shape.has_default_layout()
               for v in outputs(fusion))


def _side_partner(a: HloInstruction, b: HloInstruction,
                  memo: _Memo | None = None) -> HloInstruction | None:
    """The one of `a`, `b` that keeps the other as side outputs, or None: a column
    reduce's fusion (reduce_walk) and a loop fusion over the shape it walks (the bias
    gradient of a layer and the gradient it sums, both computed from the same inputs:
    one pass instead of two, and the gradient's producers computed once)."""
    for reducer, loop in ((a, b), (b, a)):
        walk = reduce_walk(reducer) if memo is None else memo.walk(reducer)
        if walk is not None and _side_values(loop, walk[0]):
            return reducer
    return None


def fuse_siblings(comp: HloComputation, note=None, memo: _Memo | None = None) -> bool:
    """Merges fusions that read a common operand, large enough to be worth reading once
    (`SHARED_READ_SHARE`), and loop over the same space. `note`: None, or
    HloModulePass.note (explaining). `memo`: one to share with a later walk over `comp`
    (kept right: a merged fusion is forgotten)."""
    reach = Reachability(comp)
    memo = _Memo() if memo is None else memo
    changed = False
    for operand in list(comp.post_order()):
        if operand.parent is not comp or operand.opcode == "constant":
            continue
        siblings = [u for u in dict.fromkeys(operand.users) if memo.is_candidate(u)]
        if note is not None:
            _explain_users(operand, note)
        while len(siblings) > 1:
            first, rest = siblings[0], siblings[1:]
            space = memo.space(first)
            partner = next((s for s in rest
                            if (memo.space(s) == space
                                or _side_partner(first, s, memo) is not None)
                            and reach.independent(first, s)
                            and _shares_enough(operand, first, s)), None)
            if partner is None:
                if note is not None:
                    for s in rest:
                        note(first, s, f"iteration spaces differ: {_space_text(space)}, "
                                       f"{_space_text(iteration_space(s))}"
                             if iteration_space(s) != space else
                             f"{operand.name} is a small part of what they read"
                             if not _shares_enough(operand, first, s)
                             else "one depends on the other")
                siblings = rest
                continue
            rest = [s for s in rest if s is not partner]
            if memo.space(partner) != space and _side_partner(first, partner, memo) is partner:
                first, partner = partner, first        # the reduce's kernel keeps the loop
            if note is not None:
                note(first, partner, None, f"merged (siblings reading {operand.name})")
            reach.merge(first, partner)
            merge_siblings(first, partner, sort_parent=False)
            memo.forget(first)
            siblings = [first] + rest
            changed = True
    if changed:
        comp.sort_topologically()      # once, after all the merges (merge_siblings)
    return changed


def _explain_users(operand: HloInstruction, note) -> None:
    """Notes the fusions reading `operand` that cannot merge with a sibling at all."""
    fusions = [u for u in dict.fromkeys(operand.users) if u.opcode == "fusion"]
    if len(fusions) > 1:
        for u in fusions:
            reason = _why_not_candidate(u)
            if reason is not None:
                note(u, None, f"{reason}: no sibling of the other fusions reading {operand.name}")


def fuse_producer_consumer(comp: HloComputation, note=None,
                           memo: _Memo | None = None) -> bool:
    """A loop fusion whose value is also needed elsewhere is fused into a loop consumer
    with the same iteration space and kept as an extra output of it. `note`: None, or
    HloModulePass.note (explaining). `memo`: as for `fuse_siblings`."""
    changed = False
    reach = None          # built when first needed, then kept up to date
    memo = _Memo() if memo is None else memo
    for producer in list(comp.post_order()):
        if (producer.parent is not comp or not memo.is_candidate(producer)
                or fusion_kind(producer) != "loop" or producer.shape.is_tuple):
            continue
        space = memo.space(producer)
        for consumer in dict.fromkeys(producer.users):
            # No other path from the producer to the consumer (through data or
            # control edges), or the merged fusion would have to run before itself.
            if memo.is_candidate(consumer) and memo.space(consumer) == space:
                if reach is None:
                    reach = Reachability(comp)
                if not any(op is not producer and reach.depends_on(op, producer)
                           for op in consumer.operands + consumer.control_predecessors):
                    if note is not None:
                        note(consumer, producer, None,
                             "merged (the producer kept as an output)")
                    fuse_producer(consumer, producer, keep_output=True)
                    memo.forget(consumer)
                    # What read the producer reads the consumer now (get-tuple-elements
                    # of it, new: read by nothing the walk has not seen), and depends on
                    # whatever the consumer depends on.
                    reach.merge(consumer, producer)
                    for gte in consumer.users:
                        if not reach.knows(gte):
                            reach.add(gte)
                    changed = True
                    break
            if note is not None and consumer.opcode == "fusion":
                note(consumer, producer, _why_not_candidate(consumer)
                     or (f"iteration spaces differ: {_space_text(space)}, "
                         f"{_space_text(iteration_space(consumer))}"
                         if iteration_space(consumer) != space else
                         "another path leads from the producer to the consumer"))
    return changed


@register_pass
class MultiOutputFusion(HloModulePass):
    """Sibling and producer/consumer multi-output fusion of loop and input fusions.

    Siblings: two fusions reading the same operand with the same iteration space
    (two reductions of one tensor over the same dimensions; two loops of one
    shape) become one fusion with a tuple root, read by get-tuple-element; so do
    a column reduce's fusion and a loop over the shape it walks (`_side_partner`).
    Producer/consumer: a loop fusion with several users is fused into a
    same-shaped loop consumer and kept as its extra output. Never creates a
    cycle (checked with reachability). True iff anything merged.
    """

    name = "multi-output-fusion"

    def run(self, module: HloModule) -> bool:
        changed = False
        note = self.note if self.explain_log is not None else None
        for comp in fusible_computations(module):
            # Whether each fusion is a candidate and its iteration space, found once for
            # both walks (each scans the fusion's body).
            memo = _Memo()
            with comp.batch_removals():    # merged fusions leave the list once
                changed |= fuse_siblings(comp, note, memo)
                changed |= fuse_producer_consumer(comp, note, memo)
        return changed
