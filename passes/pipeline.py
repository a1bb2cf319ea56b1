"""The CPU pipeline (`default`) and the empty one (`O0`)."""
from __future__ import annotations

from .algebraic_simplifier import AlgebraicSimplifier
from .call_inliner import CallInliner
from .constant_folding import ConstantFolding
from .cse import CSE
from .dce import DCE
from .fusion_inliner import FusionInliner
from .horizontal_fusion import HorizontalFusion
from .instruction_fusion import CpuInstructionFusion
from .multi_output_fusion import MultiOutputFusion
from .pass_base import HloPassFix, HloPassPipeline, PassError
from .result_layouts import DefaultResultLayouts
from .row_fusion import RowFusion
from .target_facts import DEFAULT, TargetFacts
from .tuple_simplifier import TupleSimplifier
from .while_loop_analysis import WhileTripCountAnnotator
from .while_loop_invariant_code_motion import WhileLoopInvariantCodeMotion
from .while_loop_simplifier import WhileLoopSimplifier
from .while_loop_unroll import WhileLoopUnroll


def cpu_pipeline(facts: TargetFacts = DEFAULT, **options) -> HloPassPipeline:
    """The default pipeline, read top to bottom. `facts`: the machine it optimizes for
    (the CPU backend passes its compile target; the default is host-independent).
    `options` go to HloPassPipeline (`verify_each`, `dump_dir`, ...)."""
    simplify = HloPassPipeline("simplify", [
        AlgebraicSimplifier(),
        ConstantFolding(),
        TupleSimplifier(),
        # Loops: the constant inits folding exposes are sunk and give trip counts; a
        # small counted loop becomes straight-line code the passes above simplify (its
        # induction variable folds to constants) and fusion later merges across trips.
        WhileLoopSimplifier(),    # sinks constant leaves, drops dead ones
        WhileLoopUnroll(),
        WhileLoopInvariantCodeMotion(),   # after unrolling: what is left is a loop for good
        CSE(),
        DCE(),
    ])
    return HloPassPipeline("default", [
        CallInliner(),            # first: later passes see one flat entry computation
        FusionInliner(),          # fusions of another compiler that read a dot or conv
                                  # inside come apart: the contraction is a kernel of its own
        DCE(),                    # the inlined callees are now unreachable
        HloPassFix(simplify),     # rewrites enable each other (a fold exposes x * 1, ...)
        WhileTripCountAnnotator(),  # the loops that remain carry their trip counts (before
                                    # fusion hides the cond's compare in a kernel)
        DefaultResultLayouts(),   # results the caller gets row-major are computed so
                                  # (before fusion, which absorbs the copies)
        # Fusion runs on simplified code: producers are already minimal.
        RowFusion(),              # before loop fusion, which would split the row pattern
        # Merging kernels can leave a shared producer with a single user, which
        # loop fusion can then absorb: iterate. Every change removes a kernel.
        HloPassFix(HloPassPipeline("fusion", [
            CpuInstructionFusion(facts),  # loop and input fusion of what is left
            MultiOutputFusion(),      # after vertical fusion: merges the fusions it made
            HorizontalFusion(facts),  # last: packs the remaining independent loops together
        ])),
        # Clean-up; also makes a second run a no-op: tuple(gte(f, 0), ...) -> f, and
        # bodies merged by fusion may now hold common subexpressions.
        TupleSimplifier(),
        CSE(),
        DCE(),                    # fusion leaves dead producers and constants behind
    ], **options)


def o0_pipeline(facts: TargetFacts = DEFAULT, **options) -> HloPassPipeline:
    """No optimization: the module runs as written (whatever the target)."""
    return HloPassPipeline("O0", [], **options)


PIPELINES = {"default": cpu_pipeline, "O0": o0_pipeline}


def named_pipeline(name: str, **options) -> HloPassPipeline:
    try:
        return PIPELINES[name](**options)
    except KeyError:
        raise PassError(f"unknown pipeline {name!r} (known: {', '.join(PIPELINES)})") from None
