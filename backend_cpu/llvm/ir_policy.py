"""Decisions the compile driver takes on the emitted LLVM IR, before LLVM sees it.

LLVM's pipeline costs every function some milliseconds (roughly: its loops
times a few hundred passes), whatever the function computes. The kernel
emitters decide how each loop is vectorized and interleaved; these rules keep
LLVM from spending compile time where that decision is already made:

    no_runtime_unrolling(module)           loops without the emitters' hints are
                                           not runtime-unrolled
    only_drives_unoptimized_routines(fn)   a kernel that only calls out-of-line
                                           routines (the GEMM driver): optnone
"""
from __future__ import annotations

import llvmlite.ir as ir

from . import fp_env


def no_runtime_unrolling(module: ir.Module) -> None:
    """Gives every loop the emitters left without hints `llvm.loop.unroll.runtime.disable`.

    LLVM's runtime unroller copies the body of a loop whose trip count is known
    only at run time (4 copies plus a remainder loop). On our kernels that is
    never a vectorized loop (the vectorizer marks those itself) but a scalar or
    chunk loop around already-vectorized code: the copies doubled what the
    optimizer and the code generator work through (the first streamed softmax
    kernel: 41 -> 25 ms of LLVM time) without a measurable run-time gain. Full unrolling of loops
    with small constant trip counts stays on (convolution windows need it).

    A loop is found by its latch: a branch back to a block emitted earlier in the
    function (the emitters create a loop's header before its body). A branch that
    is not really a latch only carries a hint LLVM never reads.
    """
    hint = None
    for fn in module.functions:
        position = {id(block): i for i, block in enumerate(fn.blocks)}
        for i, block in enumerate(fn.blocks):
            branch = block.terminator
            if not isinstance(branch, (ir.Branch, ir.ConditionalBranch)) \
                    or "llvm.loop" in branch.metadata:
                continue
            if not any(position.get(id(target), i + 1) <= i for target in branch.operands
                       if isinstance(target, ir.Block)):
                continue
            if hint is None:
                hint = module.add_metadata([ir.MetaDataString(
                    module, "llvm.loop.unroll.runtime.disable")])
            # A loop ID refers to itself, which makes it unique to its loop.
            loop_id = ir.values.MDValue(module, [hint], name=str(len(module.metadata)))
            loop_id.operands = (loop_id, hint)
            branch.set_metadata("llvm.loop", loop_id)


_FLOAT_TYPES = (ir.HalfType, ir.FloatType, ir.DoubleType, ir.VectorType)


def only_drives_unoptimized_routines(fn: ir.Function) -> bool:
    """True if `fn` calls an `optnone` function and computes nothing itself: no
    floating-point or vector values, no calls but those and the floating-point mode's
    intrinsics (fp_env.py)."""
    drives = False
    for block in fn.blocks:
        for instr in block.instructions:
            if isinstance(instr.type, _FLOAT_TYPES):
                return False
            if isinstance(instr, ir.CallInstr):
                callee = instr.callee
                if isinstance(callee, ir.Function) and "optnone" in callee.attributes:
                    drives = True
                elif not getattr(callee, "name", "").startswith(fp_env.INTRINSIC_PREFIXES):
                    return False
    return drives
