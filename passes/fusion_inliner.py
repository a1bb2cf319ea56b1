"""Fusion inlining: undoes fusions that the CPU backend would emit badly.

Optimized modules from XLA arrive fused by XLA's own rules. Most of those fusions
are loops our backend emits well, but some hold a dot or a convolution whose
result the rest of the fusion reads: XLA's YNNPACK fusions (`kind=kCustom`,
`"__ynn_fusion"`) chain convolutions, batch norm and a mean in one body. Our
element generators would recompute such a contraction for every element that
reads it (a convolution of a convolution: a small ResNet's optimized module ran
in 6 s against 6 ms for its unoptimized one). Inlined, each contraction becomes a
kernel of its own (a GEMM) and the fusion passes group the rest again.
"""
from __future__ import annotations

from collections import Counter

from ..hlo import HloInstruction, HloModule

from .call_inliner import inline_call
from .fusion_utils import fusion_kind
from .pass_base import HloModulePass, register_pass

CONTRACTIONS = frozenset({"dot", "convolution"})


def reads_a_contraction(fusion: HloInstruction) -> bool:
    """True if a dot or convolution in the fusion's body feeds something else there."""
    body = fusion.fused_computation
    root = body.root
    outputs = list(root.operands) if root.opcode == "tuple" else [root]
    return any(i.opcode in CONTRACTIONS and (all(i is not o for o in outputs)
                                              or any(u is not root for u in i.users))
               for i in body.instructions)


def should_inline(fusion: HloInstruction) -> bool:
    if fusion.control_predecessors or fusion_kind(fusion) == "row":
        return False
    return reads_a_contraction(fusion)


@register_pass
class FusionInliner(HloModulePass):
    """Inlines every fusion whose body reads the result of a dot or convolution inside
    it (see the module docstring); its instructions take its place, names kept.
    Fusions inside fusions are left alone. True iff any fusion was inlined."""

    name = "fusion-inliner"

    def run(self, module: HloModule) -> bool:
        references = Counter(id(callee) for instr in module.instructions()
                             for callee in instr.called_computations())
        changed = False
        for comp in module.computations_post_order():
            if comp.is_fusion_computation:
                continue
            for fusion in [i for i in comp.instructions if i.opcode == "fusion"]:
                if should_inline(fusion):
                    body = fusion.fused_computation
                    inline_call(fusion, only_caller=references[id(body)] == 1, callee=body)
                    changed = True
        return changed
