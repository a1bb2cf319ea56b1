"""HLO module passes and the CPU pipeline.

Importing the package registers every pass by name (see `pass_base`):

    from xlapy.passes import make_pass, pipeline_from_text, cpu_pipeline
    cpu_pipeline().run(module)
"""
from .pass_base import (PASS_REGISTRY, FusionNote, HloModulePass, HloPassFix, HloPassPipeline,
                        PassError, PassRecord, explain_lines, make_pass, pass_names,
                        pipeline_from_text, register_pass)
from .dce import DCE
from .cse import CSE
from .tuple_simplifier import TupleSimplifier
from .call_inliner import CallInliner
from .fusion_inliner import FusionInliner
from .constant_folding import ConstantFolding
from .algebraic_simplifier import AlgebraicSimplifier
from . import simplify_movement  # noqa: F401  (registers rules of the simplifier)
from . import simplify_dot_layouts  # noqa: F401  (registers a rule of the simplifier)
from .instruction_fusion import CpuInstructionFusion, FusionDecision, InstructionFusion
from .row_fusion import RowFusion
from .multi_output_fusion import MultiOutputFusion
from .horizontal_fusion import HorizontalFusion
from .narrow_types import NarrowTypeNormalization
from .while_loop_analysis import WhileTripCountAnnotator, induction_variable, trip_count
from .while_loop_simplifier import WhileLoopSimplifier
from .while_loop_unroll import WhileLoopUnroll
from .while_loop_invariant_code_motion import WhileLoopInvariantCodeMotion
from .hlo_utils import count_kernels
from .cost_analysis import cost_analysis
from .sharding_propagation import ShardingPropagation
from .spmd_partitioner import SpmdPartitioner
from .pipeline import cpu_pipeline, o0_pipeline, named_pipeline

__all__ = [
    "PASS_REGISTRY", "HloModulePass", "HloPassFix", "HloPassPipeline", "PassError",
    "PassRecord", "make_pass", "pass_names", "pipeline_from_text", "register_pass",
    "FusionNote", "explain_lines",
    "DCE", "CSE", "TupleSimplifier", "CallInliner", "FusionInliner", "ConstantFolding",
    "AlgebraicSimplifier",
    "CpuInstructionFusion", "FusionDecision", "InstructionFusion", "RowFusion",
    "MultiOutputFusion", "HorizontalFusion", "count_kernels", "cost_analysis", "cpu_pipeline",
    "o0_pipeline", "named_pipeline", "ShardingPropagation", "SpmdPartitioner",
    "NarrowTypeNormalization",
    "WhileTripCountAnnotator", "WhileLoopSimplifier", "WhileLoopUnroll",
    "WhileLoopInvariantCodeMotion", "induction_variable", "trip_count",
]
