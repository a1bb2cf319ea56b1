"""Producer->consumer fusion into kLoop and kInput fusions.

The driver (`InstructionFusion`) walks each computation from its root towards
its parameters (reverse post order) and asks the policy, operand by operand,
whether a producer may be fused into its consumer. The policy answers with a
`FusionDecision` that carries its reason when the answer is no, so "why was
this not fused?" is one `explain()` call away; with an explain log (pass_base)
the driver records every answer it acted on.
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

from ..hlo import HloComputation, HloInstruction, HloModule

from .fusion_utils import INPUT, LOOP, ROW, control_successors, create_fusion, fuse_producer, \
    fusion_kind
from .pass_base import HloModulePass, register_pass
from .target_facts import DEFAULT, TargetFacts

# Data movement a loop emitter computes element by element (index remapping only;
# a bitcast-convert that changes the element width splits or joins elements).
LOOP_MOVEMENT = frozenset({"broadcast", "reshape", "bitcast", "bitcast-convert", "transpose",
                           "slice", "pad", "concatenate", "iota", "reverse", "dynamic-slice",
                           "gather"})

# Ops whose per-element generator loops over many inputs (a window, reduced
# dimensions). Fusible, but never duplicated, never fused where an element of
# theirs would be computed more than once, and nothing expensive is fused
# below them (it would be recomputed for every window position).
LOOPING = frozenset({"reduce", "reduce-window"})

# Attributes naming computations that run as kernels of their own (a while body),
# as opposed to scalar computations applied inside an op (a reduce's to_apply).
SEQUENTIAL_CALL_ATTRS = ("body", "condition", "true_computation", "false_computation",
                         "branch_computations")
_SEQUENTIAL_KEYS = frozenset(SEQUENTIAL_CALL_ATTRS)
_ATTRS = operator.attrgetter("attrs")


# A matrix transpose of at least the target's large_transpose_bytes (1 MiB) stays a
# kernel of its own, with nothing fused into it and it fused into nothing: the CPU
# backend moves a lone transpose by register blocks, while a fused one becomes a loop
# nest of strided accesses. transpose(relu(x)) on 2 threads, fused / apart:
# f32[4096,4096] 15.8-16.3 / 5.0-7.6 ms, f32[2048,2048] 4.0-4.6 / 1.0-2.0 ms,
# f32[1024,1024] 0.90-1.09 / 0.29-0.41 ms. A batch of matrices (f32[16,1024,256]
# swapping the minor two) was faster fused: 1.14-1.22 / 1.35-1.63 ms, so the rule
# leaves it.

def is_large_matrix_transpose(instr: HloInstruction, min_bytes: int) -> bool:
    """A transpose of at least `min_bytes` of one matrix: it swaps its operand's two
    minor-most dimensions, and every other dimension has size 1."""
    if instr.opcode != "transpose" or instr.shape.rank < 2 \
            or instr.shape.nbytes < min_bytes:
        return False
    out_order = instr.shape.minor_to_major()
    in_order = instr.operands[0].shape.minor_to_major()
    perm = instr.dims()
    if instr.shape.dims[out_order[0]] * instr.shape.dims[out_order[1]] != instr.shape.numel:
        return False          # a batch of matrices: faster fused (see above)
    return perm[out_order[0]] == in_order[1] and perm[out_order[1]] == in_order[0]


@dataclass(frozen=True)
class FusionDecision:
    """The answer to "may this producer be fused?": `reason` is None for yes."""
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.reason is None


YES = FusionDecision()


def is_loop_fusible(instr: HloInstruction) -> bool:
    """Ops a loop emitter computes per output element without materializing inputs
    (a reduce is one too, but only as the producer of a same-sized loop: see
    `CpuInstructionFusion.should_fuse`). Never a per-device op: a collective is a
    thunk of its own, and replica-id / partition-id are computed once per device."""
    if not instr.shape.is_array or instr.info.per_device:
        return False
    if instr.opcode == "constant":
        return instr.shape.is_scalar
    if instr.opcode == "reduce-window":
        return len(instr.operands) == 2
    return instr.info.is_elementwise or instr.opcode in LOOP_MOVEMENT


# Inside a fused body, besides loop-fusible ops: what a loop or input fusion also holds.
_BODY_OPCODES = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "reduce"})


def is_loop_body(fusion: HloInstruction) -> bool:
    """True if a fusion's body is computed element by element like the fusions this
    pass makes. False for a body that writes in place or contracts (XLA's
    `wrapped_scatter`, a sort, a dot): such a fusion stays a kernel of its own, never
    merged into another one where its root would no longer be the root."""
    return all(i.opcode in _BODY_OPCODES or is_loop_fusible(i)
               for i in fusion.fused_computation.instructions)


def is_cheap(instr: HloInstruction) -> bool:
    """Cheap enough to recompute in every consumer that fuses it."""
    return (is_loop_fusible(instr) and not instr.info.expensive
            and instr.opcode not in LOOPING)


def _widens_reads(consumer: HloInstruction, producer: HloInstruction) -> bool:
    """True if a copy of `producer` in `consumer` would read more than one array as large
    as the producer's value that the consumer does not read already, one of them a
    shared cheap value that would be copied in next (`_copied_next`). Copying then goes
    on up a chain: a residual stream x + f1 + f2 + ... grew into every layer's kernels,
    each reading all earlier layers' outputs again (the 12-layer GPT step: layer k's
    kernels read up to 2k + 1 arrays of 4 MiB, and their bodies grew with k). Declined,
    the value stays a kernel's output (it has other users) and is read as one array."""
    size = sum(leaf.nbytes for leaf in producer.shape.leaves())
    read = {id(o) for o in consumer.operands}
    large = {id(o): o for o in producer.operands if id(o) not in read and _reads(o) >= size}
    return len(large) > 1 and any(_copied_next(o) for o in large.values())


def _copied_next(instr: HloInstruction) -> bool:
    """True if `instr`, read by a copy, would be copied in next: a cheap loop op (or
    loop fusion) with several users. Only then does copying go on up a chain (a copy
    reading a dot's result and another array is one extra read, and keeps a gradient
    and its bias reduction in one loop)."""
    if instr.opcode in ("parameter", "constant") or len(set(map(id, instr.users))) < 2:
        return False
    if instr.opcode == "fusion":
        return fusion_kind(instr) == "loop"
    return is_cheap(instr)


def _stays_outside(others: list[HloInstruction], consumer: HloInstruction,
                   limit: int = 64) -> bool:
    """True if one of the producer's other users does not feed the consumer (searched
    up its operands, `limit` instructions at most). One that does is, as a rule, fused
    into the consumer later, and the copy then replaces the original: a chain where
    every value has two users (Threefry's rounds) still becomes one kernel."""
    pending = {id(u): u for u in others}
    seen: set[int] = set()
    stack = list(consumer.operands)
    while stack and pending and len(seen) < limit:
        instr = stack.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        pending.pop(id(instr), None)
        stack.extend(instr.operands)
    return bool(pending)


def _reads(instr: HloInstruction) -> int:
    """Bytes a copy of `instr` fused in reads: a broadcast reads its operand, an iota
    nothing, anything else is read as its value."""
    if instr.opcode == "iota":
        return 0
    if instr.opcode == "broadcast":
        instr = instr.operands[0]
    return sum(leaf.nbytes for leaf in instr.shape.leaves())


def _rereads(consumer: HloInstruction, index: int) -> bool:
    """True if operand `index` of the consumer is read many times per output element
    (it feeds a window, possibly through other fused instructions)."""
    if consumer.opcode != "fusion":
        return consumer.opcode == "reduce-window"
    frontier = [consumer.fused_computation.parameter(index)]
    seen = set()
    while frontier:
        instr = frontier.pop()
        if instr.opcode == "reduce-window":
            return True
        for user in instr.users:
            if id(user) not in seen:
                seen.add(id(user))
                frontier.append(user)
    return False


def fusible_computations(module: HloModule) -> list[HloComputation]:
    """The entry and computations that run as kernel sequences (while bodies,
    conditional branches) -- not fused bodies or scalar `to_apply` regions."""
    comps = [module.entry]
    for comp in module.computations_post_order():
        # (the attribute dicts naming such a computation, picked without a Python step
        # per instruction)
        for attrs in itertools.filterfalse(_SEQUENTIAL_KEYS.isdisjoint,
                                           map(_ATTRS, comp.instructions)):
            for key in SEQUENTIAL_CALL_ATTRS:
                value = attrs.get(key)
                for callee in (value if isinstance(value, (tuple, list)) else [value]):
                    if callee is not None and callee not in comps:
                        comps.append(callee)
    return [c for c in comps if not c.is_fusion_computation]


# Producers `should_fuse` declines into any consumer: not loop-fusible and not a reduce
# (nor a broadcast, iota or constant, what a row fusion takes). The driver does not ask
# about them (the 12-layer GPT step: half of its questions were about parameters, dots
# and fusions).
NEVER_FUSED = frozenset({"parameter", "dot", "convolution", "fusion", "get-tuple-element",
                         "tuple", "custom-call", "while", "call", "conditional"})


class InstructionFusion(HloModulePass):
    """The generic driver; subclasses supply `should_fuse` and `consumer_kind`."""

    def should_fuse(self, consumer: HloInstruction, index: int) -> FusionDecision:
        raise NotImplementedError

    def consumer_kind(self, consumer: HloInstruction) -> str | None:
        """The kind of fusion `consumer` starts (or is), or None if it takes no producers."""
        raise NotImplementedError

    # ids of computations without control edges (fusion adds none to those), so that
    # `runs_before_others` need not scan them; empty outside `run`.
    _edge_free: frozenset = frozenset()

    def run(self, module: HloModule) -> bool:
        changed = False
        comps = fusible_computations(module)
        self._edge_free = frozenset(id(c) for c in comps if not c.has_control_edges())
        try:
            for comp in comps:
                # Producers moved into fusions leave the list once, at the end.
                with comp.batch_removals():
                    changed |= self.fuse_computation(comp)
        finally:
            self._edge_free = frozenset()
        return changed

    def runs_before_others(self, producer: HloInstruction, consumer: HloInstruction) -> bool:
        """True if a control edge orders something other than `consumer` after `producer`:
        moved into the consumer's fusion, it would order that fusion first, which closes
        a cycle if the fusion also reads what runs after."""
        if id(producer.parent) in self._edge_free:
            return False
        return any(s is not consumer for s in control_successors(producer))

    def fuse_computation(self, comp: HloComputation) -> bool:
        changed = False
        for consumer in reversed(comp.post_order()):
            if consumer.parent is not comp or self.consumer_kind(consumer) is None:
                continue          # fused away already, or cannot host a fusion
            changed |= self._fuse_operands(consumer, parent_sorted=changed)
        return changed

    def _fuse_operands(self, consumer: HloInstruction, parent_sorted: bool = False) -> bool:
        """Fuses the operands the policy accepts, one at a time. `parent_sorted`: the
        computation's order is topological (an earlier step of this driver sorted it;
        `fuse_producer` then keeps it so without sorting it again on every step). The
        fused body is sorted once, after its last producer (nothing in between reads its
        order; a sort per producer was a third of this pass on the 12-layer GPT step)."""
        changed = False
        progress = True
        quiet = self.explain_log is None
        while progress:           # operands change as producers fuse in: rescan
            progress = False
            for i in range(len(consumer.operands)):
                if quiet and consumer.operands[i].opcode in NEVER_FUSED:
                    continue      # declined whatever else holds (should_fuse)
                decision = self.should_fuse(consumer, i)
                if self.explain_log is not None and consumer.operands[i].opcode != "parameter":
                    self.note(consumer, consumer.operands[i], decision.reason)
                if decision:
                    producer = consumer.operands[i]
                    if consumer.opcode != "fusion":
                        consumer = create_fusion(consumer, self.consumer_kind(consumer))
                    fuse_producer(consumer, producer, parent_sorted=parent_sorted,
                                  sort_body=False)
                    changed = progress = parent_sorted = True
                    break
        if changed:
            consumer.fused_computation.sort_topologically()
        return changed

    def explain(self, consumer: HloInstruction) -> list[str]:
        """One line per operand: fused or not, and why not."""
        return [f"{consumer.name} <- {op.name}: {self.should_fuse(consumer, i).reason or 'fuse'}"
                for i, op in enumerate(consumer.operands)]


@register_pass
class CpuInstructionFusion(InstructionFusion):
    """Loop fusion (elementwise and movement chains) and input fusion (a reduce with
    the expressions producing its operands), with XLA CPU's duplication policy.

    Never fuses parameters, non-scalar constants, dots, convolutions or any op a
    loop emitter cannot compute per element; never duplicates an expensive
    producer (exp, log, tanh, ...) into a second consumer, nor fuses one where
    it would be recomputed per broadcast element, nor copies a cheap producer into a
    second consumer where the copy reads more arrays than its value and would pull a
    further shared producer in (`_widens_reads`: a residual stream stays one array read
    by each layer, not a sum recomputed in each). Row fusions take broadcasts,
    iotas and scalar constants only.
    True iff anything was fused.
    """

    name = "instruction-fusion"

    def __init__(self, facts: TargetFacts = DEFAULT):
        self.facts = facts          # large_transpose_bytes (passes/target_facts.py)

    def consumer_kind(self, consumer: HloInstruction) -> str | None:
        if consumer.opcode == "fusion":    # loop and input fusions keep growing
            return {"loop": LOOP, "input": INPUT, "row": ROW}.get(fusion_kind(consumer))
        if consumer.opcode == "reduce":
            return INPUT
        if is_loop_fusible(consumer) and consumer.opcode != "constant":
            return LOOP
        return None

    def should_fuse(self, consumer: HloInstruction, index: int) -> FusionDecision:
        producer = consumer.operands[index]
        if consumer.opcode == "fusion" and fusion_kind(consumer) == "row":
            return self._should_fuse_into_row(consumer, producer)
        if producer.opcode == "reduce":
            return self._should_fuse_reduce(consumer, index)
        large = self.facts.large_transpose_bytes
        if is_large_matrix_transpose(consumer, large) or is_large_matrix_transpose(producer, large):
            return FusionDecision("a large transpose stays a kernel of its own")
        if not is_loop_fusible(producer):
            return FusionDecision(f"{producer.opcode} is not loop-fusible")
        if producer.is_root:
            return FusionDecision("producer is the computation root")
        if self.runs_before_others(producer, consumer):
            return FusionDecision("a control edge orders another instruction after the producer")
        if consumer.opcode == "reduce" and index >= len(consumer.operands) // 2 \
                and producer.opcode != "constant":
            return FusionDecision("reduce init values stay operands")
        others = [u for u in producer.users if u is not consumer]
        costly = producer.info.expensive or producer.opcode in LOOPING
        if others and costly:
            return FusionDecision("would duplicate an expensive producer")
        if costly and producer.shape.numel < _iteration_size(consumer):
            return FusionDecision("an expensive producer would be recomputed per reuse")
        if costly and _rereads(consumer, index):
            return FusionDecision("an expensive producer would be recomputed per window")
        if others and not is_cheap(producer):
            return FusionDecision("would duplicate a producer that is not cheap")
        if others and _widens_reads(consumer, producer) and _stays_outside(others, consumer):
            return FusionDecision("a duplicate would read more than the producer's value")
        return YES

    def _should_fuse_into_row(self, consumer: HloInstruction,
                              producer: HloInstruction) -> FusionDecision:
        """A row fusion (row_fusion.py) takes only what costs nothing to recompute in its
        rows: a broadcast (its operand stays an operand), an iota, a scalar constant.
        Written out as kernels of their own they cost a full-size store and load (the
        GPT block: a causal mask and a scale broadcast to [8,8,256,256])."""
        if producer.opcode not in ("broadcast", "iota") and not (
                producer.opcode == "constant" and producer.shape.is_scalar):
            return FusionDecision("a row fusion takes only broadcasts, iotas and scalars")
        if not producer.shape.is_array or producer.info.per_device:
            return FusionDecision(f"{producer.opcode} is not loop-fusible")
        if producer.is_root:
            return FusionDecision("producer is the computation root")
        if self.runs_before_others(producer, consumer):
            return FusionDecision("a control edge orders another instruction after the producer")
        return YES

    def _should_fuse_reduce(self, consumer: HloInstruction, index: int) -> FusionDecision:
        producer = consumer.operands[index]
        # mean = sum / n: the loop over the reduce's output computes each sum once,
        # so the reduction becomes part of that loop instead of a kernel of its own.
        if not producer.shape.is_array or producer.is_root:
            return FusionDecision("a multi-output or root reduce is not fused")
        if self.runs_before_others(producer, consumer):
            return FusionDecision("a control edge orders another instruction after the producer")
        if self.consumer_kind(consumer) != LOOP:
            return FusionDecision("a reduce only fuses into a loop consumer")
        if any(u is not consumer for u in producer.users):
            return FusionDecision("would duplicate a reduce")
        if producer.shape.numel != _iteration_size(consumer) or _rereads(consumer, index):
            return FusionDecision("the reduce would be recomputed per reuse")
        return YES


def _iteration_size(consumer: HloInstruction) -> int:
    """Elements the consumer's loop visits (a reduce visits its input)."""
    if consumer.opcode == "fusion":
        root = consumer.fused_computation.root
        roots = root.operands if root.opcode == "tuple" else [root]
        return max(_iteration_size(r) for r in roots)
    if consumer.opcode == "reduce":
        return consumer.operands[0].shape.numel
    return consumer.shape.numel if consumer.shape.is_array else 0
