"""Horizontal fusion: independent loop kernels become one kernel launch.

With an explain log (pass_base) the pass notes every merge, each loop kernel it
leaves out (too large, the root, not a per-element loop) and each candidate that
depends on every group formed before it.
"""
from __future__ import annotations

from ..hlo import HloComputation, HloInstruction, HloModule

from .fusion_utils import LOOP, create_fusion, fusion_kind, merge_siblings, outputs
from .hlo_utils import Reachability
from .instruction_fusion import fusible_computations, is_loop_body, is_loop_fusible
from .pass_base import HloModulePass, register_pass
from .target_facts import DEFAULT, TargetFacts


# Only kernels with at most `max_output_bytes` of output merge (the target's
# parallel_min_bytes). A larger kernel is split across threads when it runs alone,
# while a multi-output fusion whose outputs differ in shape runs one loop nest after
# another on one thread: merging the 32 MiB zero fill of an embedding gradient with a
# small index computation made the fill serial. Below this size a kernel runs on one
# thread anyway, so merging only saves launches.

def _work_bytes(instr: HloInstruction, values) -> int:
    """Bytes a kernel reads and writes: its distinct operands and its outputs (what the
    backend weighs against parallel_min_bytes). A reduction's output is small, its
    input need not be: the bias gradient of a [2048,2048] weight is 8 KiB of output
    from 16 MiB of input."""
    read = sum(leaf.nbytes for o in {id(o): o for o in instr.operands}.values()
               for leaf in o.shape.leaves())
    return read + sum(v.shape.nbytes for v in values)


def _is_candidate(instr: HloInstruction, max_output_bytes: int) -> bool:
    """Small loop fusions, and small unfused ops a loop fusion could hold (wrapped
    when merged): small in what they read and write, not only in what they write."""
    if instr.is_root:
        return False
    values = outputs(instr) if instr.opcode == "fusion" else [instr]
    if not all(v.shape.is_array for v in values) \
            or _work_bytes(instr, values) > max_output_bytes:
        return False
    if instr.opcode == "fusion":
        return fusion_kind(instr) == "loop" and is_loop_body(instr)
    return is_loop_fusible(instr) and instr.opcode != "constant"


def _why_not_candidate(instr: HloInstruction, max_output_bytes: int) -> str | None:
    """Why a loop fusion or loop-fusible op is not merged horizontally, or None when it
    is a candidate (explaining; `_is_candidate` decides)."""
    if instr.opcode == "fusion" and fusion_kind(instr) != "loop":
        return f"a {fusion_kind(instr)} fusion, not a loop"
    if instr.opcode == "fusion" and not is_loop_body(instr):
        return "writes in place or contracts (not a per-element loop)"
    if instr.is_root:
        return "the computation's root"
    values = outputs(instr) if instr.opcode == "fusion" else [instr]
    if not all(v.shape.is_array for v in values):
        return "a tuple-shaped output"
    size = _work_bytes(instr, values)
    if size > max_output_bytes:
        return f"{size} bytes read and written, more than {max_output_bytes} (a kernel " \
               f"that large runs on several threads alone)"
    return None


# A group computes at most MAX_GROUP_INSTRUCTIONS fused instructions (parameters and
# the tuple not counted, an expensive one counted as EXPENSIVE_SIZE). Its kernel body is one loop nest per output, so a group of
# every layer's small results grows with the model: the 12-layer GPT step's 46 layer-norm
# statistics made one body of 415 instructions, 115 KB of IR and 0.25-0.3 s of LLVM,
# while groups of a few layers' results are alike and compiled once (kernel_cache.py).
# Past a few launches, merging more saves next to nothing.
MAX_GROUP_INSTRUCTIONS = 64
EXPENSIVE_SIZE = 8


def _size(instr: HloInstruction) -> int:
    """Fused instructions, an expensive or transcendental one (exp, rsqrt, ...: a vecmath
    routine inlined, many instructions of IR) as EXPENSIVE_SIZE."""
    body = instr.fused_computation.instructions if instr.opcode == "fusion" else [instr]
    return sum(EXPENSIVE_SIZE if i.info.expensive or i.info.transcendental else 1 for i in body
               if i.opcode not in ("parameter", "tuple"))


def _room(group: HloInstruction, instr: HloInstruction, sizes: dict) -> bool:
    return sizes[id(group)] + sizes[id(instr)] <= MAX_GROUP_INSTRUCTIONS


def fuse_horizontally(comp: HloComputation, max_output_bytes: int, note=None) -> bool:
    """Greedily merges each candidate into the first earlier group it is independent of
    and fits in (MAX_GROUP_INSTRUCTIONS). `note`: None, or HloModulePass.note (explaining)."""
    candidates = [i for i in comp.post_order() if _is_candidate(i, max_output_bytes)]
    if note is not None:
        for instr in comp.post_order():
            if (instr.opcode == "fusion" or is_loop_fusible(instr) and instr.opcode != "constant") \
                    and not _is_candidate(instr, max_output_bytes):
                note(instr, None, _why_not_candidate(instr, max_output_bytes))
    if len(candidates) < 2:
        return False
    reach = Reachability(comp)
    collectives = [i for i in comp.instructions if i.info.collective]
    groups: list[HloInstruction] = []
    sizes = {id(i): _size(i) for i in candidates}     # a group's: what it holds so far
    changed = False
    for instr in candidates:
        group = next((g for g in groups if _room(g, instr, sizes) and reach.independent(g, instr)
                      and not _serializes_collectives(reach, collectives, g, instr)), None)
        if group is None:
            if note is not None and groups:
                note(instr, None, f"depends on (or feeds) every earlier group with room "
                                  f"({', '.join(g.name for g in groups)})")
            groups.append(instr)
            continue
        if note is not None:
            note(group, instr, None, "merged")
        reach.merge(group, instr)
        index = groups.index(group)
        size = sizes[id(group)] + sizes[id(instr)]
        if group.opcode != "fusion":
            group = groups[index] = _wrap(group, reach)
        merge_siblings(group, _wrap(instr, reach) if instr.opcode != "fusion" else instr,
                       sort_parent=False)
        sizes[id(group)] = size
        changed = True
    if changed:
        comp.sort_topologically()      # once, after all the merges (merge_siblings)
    return changed


def _serializes_collectives(reach: Reachability, collectives, a, b) -> bool:
    """True if merging `a` and `b` would order two collectives that were unordered: one
    of them reads collective C1's result and the other feeds collective C2, so the merged
    kernel makes C2 wait for C1. A gradient bucket's all-reduce could then no longer be in
    flight while the next bucket is packed (the backend overlaps unordered collectives
    with kernels)."""
    for x, y in ((a, b), (b, a)):
        after = [c for c in collectives if reach.depends_on(x, c)]
        if not after:
            continue
        for c2 in collectives:
            if reach.depends_on(c2, y) and not any(
                    c1 is c2 or reach.depends_on(c2, c1) for c1 in after):
                return True
    return False


def _wrap(instr: HloInstruction, reach: Reachability) -> HloInstruction:
    fusion = create_fusion(instr, LOOP)
    reach.rename(instr, fusion)
    return fusion


@register_pass
class HorizontalFusion(HloModulePass):
    """Merges loop kernels with no data dependence between them into one multi-output
    loop fusion (outputs may differ in shape: one loop nest per shape, one launch).

    Typical win: the many small elementwise results of a training step (bias
    updates) or of a module returning a tuple. Only kernels of at most the
    target's `parallel_min_bytes` of output merge (`facts`: passes/target_facts.py).
    Input, row and custom fusions, reductions and dots are left alone; a
    computation's root is never merged. True iff anything merged.
    """

    name = "horizontal-fusion"

    def __init__(self, facts: TargetFacts = DEFAULT):
        self.facts = facts

    def run(self, module: HloModule) -> bool:
        changed = False
        note = self.note if self.explain_log is not None else None
        for comp in fusible_computations(module):
            with comp.batch_removals():    # merged fusions leave the list once
                changed |= fuse_horizontally(comp, self.facts.parallel_min_bytes, note)
        return changed
