"""Work units of the GEMM-based kernels (dots, convolutions, depthwise convolutions).

The kernel's [begin, end) count *work units* (`run_units`): unit p covers a fixed
range of items (GEMM rows, batch indices, convolution chunks) given by a table of
cuts, and owns region p of a scratch slot (for the GEMM's packing buffers). Units
run concurrently on different threads, so no two share scratch memory, and the
generated code allocates nothing itself. `even_cuts` splits items evenly over the
runtime's intra-op threads, with at least MIN_FLOPS_PER_PARTITION per unit.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ... import runtime
from ...hlo.shape import Shape

from ..llvm.loops import for_range, i64

from .packed_gemm import MIN_FLOPS_PER_PARTITION
from .packing import ALIGN


def even_cuts(count: int, flops: int) -> list[int]:
    """Unit boundaries splitting `count` items evenly over the intra-op threads, with at
    least MIN_FLOPS_PER_PARTITION of `flops` (the whole launch's) per unit."""
    units = max(1, min(intra_op_threads(), count, flops // MIN_FLOPS_PER_PARTITION))
    return [count * p // units for p in range(units + 1)]


def run_units(kernel, cuts: list[int], scratch_bytes: int, body, pass_unit: bool = False) -> int:
    """Makes the kernel's [begin, end) count work units: unit p calls
    `body(lo, hi, scratch)` on items [cuts[p], cuts[p + 1]) with region p of a scratch
    slot of this kernel (`scratch_bytes` each, 64-byte aligned; null when 0), and
    with `pass_unit`, `body(lo, hi, scratch, p)`. Returns the partition extent (the
    number of units), which is also the most partitions worth launching. A launch
    with fewer partitions runs several units in turn."""
    units = len(cuts) - 1
    b = kernel.b
    table_type = ir.ArrayType(ir.IntType(64), len(cuts))
    table = ir.GlobalVariable(kernel.function.module, table_type, f"{kernel.name}.units")
    table.initializer = ir.Constant(table_type, cuts)
    table.global_constant, table.linkage = True, "internal"
    base = _aligned_scratch(kernel, units * scratch_bytes) if scratch_bytes else None
    with for_range(b, kernel.begin, kernel.end, "unit") as p:
        bound = [b.load(b.gep(table, [i64(0), q], inbounds=True, source_etype=table_type),
                        typ=ir.IntType(64)) for q in (p, b.add(p, i64(1)))]
        scratch = ir.Constant(ir.PointerType(), None) if base is None else \
            b.gep(base, [b.mul(p, i64(scratch_bytes))], inbounds=True, source_etype=ir.IntType(8))
        body(bound[0], bound[1], scratch, *([p] if pass_unit else []))
    kernel.max_partitions = units
    return units


def _aligned_scratch(kernel, nbytes: int) -> ir.Value:
    """A pointer to `nbytes` of this kernel's scratch slot, rounded up to 64 bytes."""
    slot = kernel.scratch_slot(Shape("u8", (nbytes + ALIGN,)))
    e, pointer = kernel.entry, kernel.slot_pointer(slot)
    pad = e.and_(e.sub(i64(0), e.ptrtoint(pointer, ir.IntType(64))), i64(ALIGN - 1))
    return e.gep(pointer, [pad], inbounds=True, source_etype=ir.IntType(8), name="gemm.scratch")


def intra_op_threads() -> int:
    """The runtime's intra-op thread count: how many units a launch is worth cutting into."""
    return runtime.get_options().intra_op_threads
