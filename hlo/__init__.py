"""HLO: the IR, its text format, shape inference, verifier, builder and evaluator.

Imports nothing else of the project (see DESIGN.md). The public surface:

    parse_module(text) -> HloModule        ParseError
    print_module(module) -> str            (also module.to_text())
    infer_shape(opcode, operand_shapes, attrs) -> Shape
    verify(module)                         VerifyError
    HloBuilder                             build modules in Python
    evaluate(module, args) -> list[np.ndarray]
    evaluate_devices(module, args_per_device) -> list[list[np.ndarray]]
    ReplicaGroups, collectives             collectives' groups and device numbering
    HloSharding, parse_sharding            `sharding=` as data (hlo/sharding.py)
"""
from .dtypes import DTYPES, DType, dtype, from_numpy, numpy_dtype
from .shape import Shape
from .opcodes import OPCODES, OpInfo
from .ir import (HloComputation, HloInstruction, HloModule, PadDim, RawAttr, ReplicaGroups,
                 SliceDim, Window, WindowDim)
from .shape_inference import ShapeError, infer_shape
from .parser import ParseError, parse_module
from .printer import print_module
from .verifier import VerifyError, check_static_shapes, verify
from .builder import HloBuilder
from .evaluator import EvaluationError, evaluate
from .eval_devices import evaluate_devices
from . import collectives
from .sharding import HloSharding, ShardingError, parse_sharding

__all__ = [
    "DTYPES", "DType", "dtype", "from_numpy", "numpy_dtype", "Shape", "OPCODES", "OpInfo",
    "HloComputation", "HloInstruction", "HloModule", "PadDim", "RawAttr", "ReplicaGroups",
    "SliceDim",
    "Window", "WindowDim", "ShapeError", "infer_shape", "ParseError", "parse_module", "print_module",
    "VerifyError", "verify", "check_static_shapes", "HloBuilder", "EvaluationError", "evaluate", "evaluate_devices",
    "collectives", "HloSharding", "ShardingError", "parse_sharding",
]
