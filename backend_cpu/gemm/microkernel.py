"""The GEMM micro-kernel: an MR x NR block of C held in vector registers.

The packed GEMM (packed_gemm.py) hands the micro-kernel one *micro-panel* of A (MR rows,
`kc` columns, stored column by column: a[kk*MR + r]) and one of B (`kc` rows, NR
columns, stored row by row: b[kk*NR + c]), both zero-padded to full size. For each
kk the kernel loads NR/lanes vectors of B's row kk, broadcasts each of A's MR values
and does MR * NR/lanes independent FMAs into the accumulators:

        B row kk:      [ b0 .. b15 | b16 .. b31 | b32 .. b47 | b48 .. b63 ]  (4 zmm loads)
    A col kk:  a0  ->  [ acc[0][0] | acc[0][1]  | acc[0][2]  | acc[0][3]  ]  acc += a * b
               ...
               a5  ->  [ acc[5][0] | acc[5][1]  | acc[5][2]  | acc[5][3]  ]

Only the C block is written back (added to C when an earlier k-block already
stored there). Tiles cut by the matrix edge go through a small stack tile so the
hot path stays branch-free.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..llvm.ir_toolkit import (I1, I32, I64, PTR, VOID, const, element_ptr, entry_alloca, for_range,
                               splat, storage_type)

from .spec import Arith, narrow

# The k loop body is repeated this many times per iteration: amortizes the loop
# counter and lets the scheduler overlap loads of step kk+1 with FMAs of step kk.
K_UNROLL = 4
# A read in place with its k steps far apart (`prefetch_a`: a transposed operand, one
# cache line per k step, 1 KiB or more away) defeats the hardware prefetchers; the
# kernel asks for A's lines this many k steps ahead itself. Measured on the AVX-512
# host with caches flushed between calls, as in a training step: attention's P^T @ dO,
# f32[64 x 256,256]^T @ [256,64], 3.00-3.75 -> 2.57-2.77 ms (quiet, two threads,
# medians of 15 in alternating processes; shared, one thread: 5.5-6.0 -> 4.6-4.9 ms at
# 32 or 16 steps ahead). P @ V, whose A rows stream, gets no prefetches (a little
# slower with them).
A_PREFETCH_STEPS = 32


@dataclass(frozen=True)
class MicroTile:
    """Register blocking: `mr` rows of C, each `nrv` vectors of `lanes` elements."""
    mr: int
    nrv: int
    lanes: int

    @property
    def nr(self) -> int:
        return self.nrv * self.lanes


# Register blocks by vectors per row (nrv), for 32 registers (AVX-512) and 16 (AVX2):
# rows x nrv accumulators plus nrv B vectors and one broadcast must fit, with at least
# 8 accumulators (FMA latency 4 x 2 pipes) to keep both FMA units busy.
_ROWS_BY_NRV_32_REGS = {1: 12, 2: 12, 3: 8, 4: 6}
_ROWS_BY_NRV_16_REGS = {1: 8, 2: 6}


def choose_tile(vector_bits: int, arith: Arith, n: int | None = None) -> MicroTile:
    """The register block for the host's vector width (and a narrow C, if n is given).

    With AVX-512 there are 32 vector registers: 6 rows x 4 vectors = 24 accumulators,
    4 for the B row and 1 for the broadcast A value. Each k step issues 24 FMAs for 10
    loads (4 vectors, 6 broadcasts). Measured against 14 x 2 (28 FMAs for 16 loads):
    as fast on square matrices and 5-10% faster when a thread owns few rows (a 6-row
    tile wastes less on the last, partial tile of a partition). A C narrower than 4
    vectors gets fewer vectors per row and more rows instead (n = 10 on 6 x 4 would
    compute 64 columns for 10; on 12 x 1, 16: measured 2.2x faster).
    Without AVX-512 there are 16 registers: the classic 6 x 2 block (12 accumulators).
    """
    lanes = max(1, vector_bits // arith.bits)
    rows_by_nrv = _ROWS_BY_NRV_32_REGS if vector_bits >= 512 else _ROWS_BY_NRV_16_REGS
    nrv = max(rows_by_nrv)
    if n is not None:
        nrv = max(1, min(nrv, -(-n // lanes)))
    return MicroTile(mr=rows_by_nrv[nrv], nrv=nrv, lanes=lanes)


def emit_microkernel(module: ir.Module, name: str, arith: Arith, tile: MicroTile,
                     out_dtype: str, may_accumulate: bool, strided_a: bool = False,
                     prefetch_a: bool = False) -> ir.Function:
    """Adds `void name(ptr a, ptr b, ptr c, i64 ldc, i64 kc, i64 rows, i64 cols, i1 acc)`.

    C[r, c] (+)= sum_kk a[kk*MR + r] * b[kk*NR + c] for r < rows, c < cols, with C of
    `out_dtype` and row stride `ldc` elements. `acc` adds to C instead of overwriting;
    it is only honoured when `may_accumulate` (then out_dtype is the accumulation type).

    `strided_a`: A is read where it lies, not from a packed panel: two more arguments
    `i64 a_row_stride, i64 a_k_stride` and a[kk*a_k_stride + r*a_row_stride], for all MR
    rows (the caller passes only full tiles; see packed_gemm's direct A). `prefetch_a`
    (with `strided_a`): prefetch the first and last row's element A_PREFETCH_STEPS k
    steps ahead, for an A whose k steps are far apart.
    """
    params = [PTR, PTR, PTR, I64, I64, I64, I64, I1] + [I64, I64] * strided_a
    fnty = ir.FunctionType(VOID, params)
    fn = ir.Function(module, fnty, name)
    fn.linkage = "internal"
    # Kept out of line: the register allocator then sees only this loop's live
    # vectors, and one call per MR x NR x kc block costs nothing measurable.
    fn.attributes.add("noinline")
    for arg in fn.args:
        if isinstance(arg.type, ir.PointerType):
            arg.add_attribute("noalias")
    a, bp, c, ldc, kc, rows, cols, acc_flag = fn.args[:8]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if strided_a:
        row_stride, k_stride = fn.args[8:]
        # One pointer per row of the tile, advanced by the k stride.
        a = ([element_ptr(b, a, arith.type, b.mul(const(r), row_stride))
              for r in range(tile.mr)], k_stride, prefetch_a)
    vty = arith.vector(tile.lanes)
    accs = [[entry_alloca(b, vty, name=f"acc{r}_{v}") for v in range(tile.nrv)]
            for r in range(tile.mr)]
    for row in accs:
        for slot in row:
            b.store(arith.zero(vty), slot)
    _prefetch_c(b, arith, tile, c, ldc, out_dtype)
    _emit_k_loop(b, arith, tile, a, bp, kc, accs)
    values = [[b.load(slot, typ=vty) for slot in row] for row in accs]
    _emit_store(b, arith, tile, values, c, ldc, rows, cols, acc_flag, out_dtype, may_accumulate)
    b.ret_void()
    return fn


def _prefetch(b, ptr, write: bool) -> None:
    """llvm.prefetch of `ptr` into every cache level (never faults, even past the end;
    callers pass addresses without `inbounds`, which past the end would be poison)."""
    prefetch = b.module.globals.get("llvm.prefetch.p0") or ir.Function(
        b.module, ir.FunctionType(VOID, [PTR, I32, I32, I32]), "llvm.prefetch.p0")
    b.call(prefetch, [ptr, ir.Constant(I32, int(write)), ir.Constant(I32, 3), ir.Constant(I32, 1)])


def _prefetch_c(b, arith, tile, c, ldc, out_dtype):
    """Asks for the C tile's cache lines now (with write intent): they arrive while the
    k loop runs, and the stores at the end do not wait for memory (C rows are far
    apart). A tile cut by C's edge asks for lines past it too: plain addresses."""
    out_ty = storage_type(out_dtype)
    line = 64 // (out_ty.width // 8 if isinstance(out_ty, ir.IntType) else arith.nbytes)
    for r in range(tile.mr):
        row = b.mul(const(r), ldc)
        for offset in range(0, tile.nr, line):
            _prefetch(b, b.gep(c, [b.add(row, const(offset))], source_etype=out_ty,
                               inbounds=False), write=True)


def _emit_k_step(b, arith, tile, a, bp, kk, accs):
    """One rank-1 update: acc[r][v] += a[kk*MR + r] * b[kk*NR + v*lanes : +lanes]."""
    vty = arith.vector(tile.lanes)
    # B micro-panels start 64-byte aligned and NR*bytes is a multiple of 64.
    vec_align = min(64, tile.lanes * arith.nbytes)
    b_row = b.mul(kk, const(tile.nr))
    b_vecs = [b.load(element_ptr(b, bp, arith.type, b.add(b_row, const(v * tile.lanes))),
                     typ=vty, align=vec_align) for v in range(tile.nrv)]
    if isinstance(a, tuple):              # strided A: (row pointers, k stride, prefetch)
        row_ptrs, k_stride, prefetch_a = a
        offset = b.mul(kk, k_stride)
        a_ptrs = [element_ptr(b, row, arith.type, offset) for row in row_ptrs]
        if prefetch_a:
            ahead = b.mul(b.add(kk, const(A_PREFETCH_STEPS)), k_stride)
            for row in (row_ptrs[0], row_ptrs[-1]):
                # Past the last k step the address leaves A: no `inbounds` on it (a
                # prefetch never faults, but an inbounds address out of bounds is poison).
                ahead_ptr = b.gep(row, [ahead], source_etype=arith.type, inbounds=False)
                _prefetch(b, ahead_ptr, write=False)
    else:
        a_col = b.mul(kk, const(tile.mr))
        a_ptrs = [element_ptr(b, a, arith.type, b.add(a_col, const(r))) for r in range(tile.mr)]
    for r in range(tile.mr):
        a_val = b.load(a_ptrs[r], typ=arith.type)
        a_vec = splat(b, a_val, tile.lanes)
        for v in range(tile.nrv):
            slot = accs[r][v]
            b.store(arith.madd(b, a_vec, b_vecs[v], b.load(slot, typ=vty)), slot)


def _emit_k_loop(b, arith, tile, a, bp, kc, accs):
    """for kk < kc: rank-1 update; unrolled K_UNROLL times plus a remainder loop."""
    main = b.and_(kc, const(-K_UNROLL))
    with for_range(b, 0, main, K_UNROLL, name="k") as k0:
        for u in range(K_UNROLL):
            _emit_k_step(b, arith, tile, a, bp, b.add(k0, const(u)), accs)
    with for_range(b, main, kc, name="krem") as kk:
        _emit_k_step(b, arith, tile, a, bp, kk, accs)


def _emit_store(b, arith, tile, values, c, ldc, rows, cols, acc_flag, out_dtype, may_accumulate):
    """Writes the accumulators to C: vector stores for a full tile, else via a stack tile."""
    full = b.and_(b.icmp_signed("==", rows, const(tile.mr)),
                  b.icmp_signed("==", cols, const(tile.nr)))
    with b.if_else(full) as (then, otherwise):
        with then:
            _store_full(b, arith, tile, values, c, ldc, acc_flag, out_dtype, may_accumulate)
        with otherwise:
            _store_edge(b, arith, tile, values, c, ldc, rows, cols, acc_flag, out_dtype,
                        may_accumulate)


def _maybe_accumulate(b, acc_flag, may_accumulate, overwrite, accumulate):
    """Emits `accumulate()` under `if acc_flag`, else `overwrite()` (no branch if C is
    never accumulated into)."""
    if not may_accumulate:
        overwrite()
        return
    with b.if_else(acc_flag) as (then, otherwise):
        with then:
            accumulate()
        with otherwise:
            overwrite()


def _store_full(b, arith, tile, values, c, ldc, acc_flag, out_dtype, may_accumulate):
    out_ty = storage_type(out_dtype)
    out_vty = ir.VectorType(out_ty, tile.lanes)
    ptrs = []
    for r in range(tile.mr):
        row = b.mul(const(r), ldc)
        ptrs.append([element_ptr(b, c, out_ty, b.add(row, const(v * tile.lanes)))
                     for v in range(tile.nrv)])

    def overwrite():
        for r in range(tile.mr):
            for v in range(tile.nrv):
                b.store(narrow(b, values[r][v], arith, out_dtype), ptrs[r][v], align=1)

    def accumulate():
        for r in range(tile.mr):
            for v in range(tile.nrv):
                old = b.load(ptrs[r][v], typ=out_vty, align=1)
                b.store(arith.add(b, old, values[r][v]), ptrs[r][v], align=1)

    _maybe_accumulate(b, acc_flag, may_accumulate, overwrite, accumulate)


def _store_edge(b, arith, tile, values, c, ldc, rows, cols, acc_flag, out_dtype, may_accumulate):
    out_ty = storage_type(out_dtype)
    scratch = entry_alloca(b, arith.type, tile.mr * tile.nr, name="edge_tile", align=64)
    for r in range(tile.mr):
        for v in range(tile.nrv):
            b.store(values[r][v], element_ptr(b, scratch, arith.type, r * tile.nr + v * tile.lanes),
                    align=1)
    with for_range(b, 0, rows, name="er") as r:
        with for_range(b, 0, cols, name="ec") as col:
            src = element_ptr(b, scratch, arith.type, b.add(b.mul(r, const(tile.nr)), col))
            dst = element_ptr(b, c, out_ty, b.add(b.mul(r, ldc), col))
            value = b.load(src, typ=arith.type)

            def overwrite():
                b.store(narrow(b, value, arith, out_dtype), dst)

            def accumulate():
                b.store(arith.add(b, b.load(dst, typ=out_ty), value), dst)

            _maybe_accumulate(b, acc_flag, may_accumulate, overwrite, accumulate)
