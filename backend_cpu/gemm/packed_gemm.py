"""Dot as a packed, cache-blocked, register-blocked GEMM emitted in LLVM IR.

`emit_gemm` adds to an llvmlite module one function

    void name(ptr lhs, ptr rhs, ptr out, i64 m_begin, i64 m_end, ptr scratch)

that computes rows [m_begin, m_end) of out[m, n] = lhs[m, k] @ rhs[k, n] (the caller
splits rows across threads; `gemm_partitions` says into how many parts). `scratch`
is the caller's packing memory, `gemm_scratch_bytes` long and 64-byte aligned, one
region per concurrent call (null when that size is 0): the generated code allocates
nothing, so it cannot fail, and the host's caching allocator hands out memory that
is already paged in. Operands
are addressed through element strides, so a transposed operand costs nothing extra:
the transpose is folded into packing. Shapes are static; the code is specialized
on them.

The loop nest is the one of BLIS / Goto's algorithm, each level sized for a
cache level (see the budgets below):

    for jc in [0, n) step NC:                 B panel  KC x NC  -> L3
      for pc in [0, k) step KC:
        pack B[pc:pc+KC, jc:jc+NC] into NR-wide micro-panels
        for ic in [m_begin, m_end) step MC:   A block  MC x KC  -> L2
          pack A[ic:ic+MC, pc:pc+KC] into MR-tall micro-panels
          for jr in [0, NC) step NR:          B micro-panel KC x NR -> L1/L2
            for ir in [0, MC) step MR:
              micro-kernel: C[MR x NR] (+)= A micro-panel @ B micro-panel

Packing converts operands to the accumulation type (s8 -> i32, f16 -> f32, ...) and
zero-pads partial panels, so the micro-kernel (microkernel.py) only ever sees
full, contiguous, aligned panels. The micro-kernel and the packing routines depend
on a few parameters only (spelled out in their names): they are compiled once per
process (library.py), and a GEMM only declares them. Matrix-vector products
(m == 1 or n == 1) skip all this and stream the matrix once (gemv.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from ...hlo.dtypes import DTYPES

from .. import target as targets
from ..llvm.ir_toolkit import (I64, PTR, VOID, const, element_ptr, entry_alloca, for_range, imin,
                               storage_type)

from . import library
from .gemv import emit_gemv
from .microkernel import MicroTile, choose_tile
from .packing import ALIGN, PackLayout
from .spec import GemmSpec

# Cache budgets, in bytes, from which KC, MC and NC follow for each element size:
# - the B micro-panel (KC x NR): a long k block amortizes C's read-modify-write, done
#   once per k block. At 192 KiB (KC = 768 f32) the micro-panel outgrows L1 and streams
#   from L2, which keeps up easily (4 vector loads per 24 FMAs); measured on a Zen 5
#   (48 KiB L1D, 1 MiB L2), 2048^3 runs ~8% faster than with an L1-sized block,
#   1024^3 the same. KC does not depend on the machine: it sets the order of the sums,
#   and so the rounding, which must not change from host to host;
# - the packed A block (MC x KC), re-read once per B micro-panel: L2_BLOCK_SHARE of the
#   core's L2 (target.l2), leaving room for the B micro-panels and C tiles passing
#   through. MC only decides which rows a block holds, not how sums are ordered;
# - the packed B panel (KC x NC), re-read once per A block: L3.
K_PANEL_BYTES = 192 * 1024
# ... but never a k block longer than 768: narrower tiles (AVX2's NR = 16 f32) would get
# KC = 3072 from the budget above, whose micro-panel no longer fits L2's share and whose
# one-run sums over k lose accuracy (a transformer's weight gradients had 2.2x XLA's
# error on AVX2). Measured with the AVX2 target on this host, 2048^3: 88 ms at 3072,
# 80-84 ms at 1536 and 768 (numpy's OpenBLAS, Haswell kernels: 80-83 ms).
MAX_KC = 768
# 3/8 of L2: 384 KiB on a 1 MiB L2 (Zen 5), 768 KiB on a 2 MiB one (an AVX-512 Xeon,
# quiet, two threads, interleaved in shuffled order, medians of 21, against 384 KiB
# there: 2048x512x2048 -2%, with B transposed -7%, with A transposed -5%,
# 2048x2048x512 the same; the GPT block's step the same).
L2_BLOCK_SHARE = (3, 8)
L3_PANEL_BYTES = 2 * 1024 * 1024
# From this size on, a GEMM is worth the compile time of the fastest A packing.
BIG_GEMM_FLOPS = 1 << 28
# Packing buffers up to this size live on the stack; larger ones are the caller's
# scratch (worker threads may have small stacks).
STACK_SCRATCH_BYTES = 64 * 1024
# Splitting a launch across threads costs a few tens of microseconds; a partition
# should have at least this much work (about 10 us of one core's FMA throughput).
MIN_FLOPS_PER_PARTITION = 1 << 21
# Row partitions are best cut at multiples of the micro-tile height (MR, 6 for both
# the AVX-512 and the AVX2 tiles).
ROW_SPLIT_MULTIPLE = 6
# Matrix-vector work is bound by reading the matrix: one element per multiply-add.
MIN_GEMV_ELEMENTS_PER_PARTITION = 1 << 18

_SUPPORTED_DTYPES = ("pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                     "f16", "f32", "f64")
_SUPPORTED_OUT = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64")


def host_vector_bits() -> int:
    """The widest vector register of the current target (target.py): 512 with
    AVX-512F, 256 with AVX, else 128."""
    return targets.current().vector_bits


@dataclass(frozen=True)
class GemmPlan:
    """The blocking of one GEMM (all in elements; mc and nc are multiples of the tile)."""
    tile: MicroTile
    kc: int
    mc: int
    nc: int


def l2_block_bytes(l2_bytes: int | None = None) -> int:
    """The packed A block's budget for a core with `l2_bytes` of L2 (None: the
    current target's)."""
    l2 = targets.current().l2 if l2_bytes is None else l2_bytes
    share, whole = L2_BLOCK_SHARE
    return l2 * share // whole


def plan_gemm(spec: GemmSpec, vector_bits: int, l2_bytes: int | None = None) -> GemmPlan:
    """Sizes KC, MC, NC from the cache budgets for this element size and tile (MC
    from `l2_bytes` of L2, None: the current target's)."""
    arith = spec.arith
    tile = choose_tile(vector_bits, arith, spec.n)
    esize = arith.nbytes
    kc = max(1, min(K_PANEL_BYTES // (tile.nr * esize), MAX_KC))
    if storage_type(spec.out_dtype) != arith.type:
        # C holds a narrower type (f16): partial sums must not round through it.
        kc = spec.k
    kc = math.ceil(spec.k / math.ceil(spec.k / kc))   # equal blocks, no tiny last one
    mc = max(tile.mr, l2_block_bytes(l2_bytes) // (kc * esize) // tile.mr * tile.mr)
    mc = min(mc, _round_up(spec.m, tile.mr))
    nc = max(tile.nr, L3_PANEL_BYTES // (kc * esize) // tile.nr * tile.nr)
    nc = min(nc, _round_up(spec.n, tile.nr))
    return GemmPlan(tile, kc, mc, nc)


def gemm_partitions(m: int, n: int, k: int, threads: int) -> int:
    """How many row partitions [m_begin, m_end) are worth launching for this GEMM."""
    if threads <= 1 or m <= 1:
        return 1
    if n == 1:
        parts = m * k // MIN_GEMV_ELEMENTS_PER_PARTITION
    else:
        # Each partition should own at least one full micro-tile of rows.
        parts = min(2 * m * n * max(k, 1) // MIN_FLOPS_PER_PARTITION,
                    math.ceil(m / ROW_SPLIT_MULTIPLE))
    return max(1, min(threads, parts))


def gemm_column_partitions(m: int, n: int, k: int, threads: int, nr: int) -> int:
    """How many column partitions are worth launching (each at least one micro-panel)."""
    if threads <= 1:
        return 1
    parts = min(2 * m * n * max(k, 1) // MIN_FLOPS_PER_PARTITION, math.ceil(n / nr))
    return max(1, min(threads, parts))


def splits_columns(m: int, n: int, k: int, threads: int, nr: int) -> bool:
    """Whether the threads of a GEMM should split C's columns rather than its rows.
    Each partition packs the B panels of its columns and the A blocks of its rows: split
    by rows, every thread packs all of B; by columns, all of A. With n > m the column
    split packs less (a weight gradient x^T @ dY, f32[512,2048]^T @ [2048,1536]: 14 MiB
    of packing per thread by rows, 10 by columns)."""
    return threads > 1 and m > 1 and n > 1 and k > 0 and n > m \
        and gemm_column_partitions(m, n, k, threads, nr) > 1


def gemm_column_split(n: int, parts: int, nr: int) -> list[tuple[int, int]]:
    """`parts` column ranges covering [0, n), cut at multiples of the micro-panel
    width NR (a cut elsewhere leaves a partial panel on both sides)."""
    panels = -(-n // nr)
    cuts = [min(n, round(panels * i / parts) * nr) for i in range(parts)] + [n]
    return [(a, z) for a, z in zip(cuts, cuts[1:]) if z > a]


def gemm_row_split(m: int, parts: int) -> list[tuple[int, int]]:
    """`parts` row ranges covering [0, m), nearly equal, cut at multiples of the
    micro-tile height where possible (a cut elsewhere leaves a partial tile on both
    sides). A caller may split rows any way it likes; this is the cheapest split."""
    cuts = [0]
    for i in range(1, parts):
        cut = round(m * i / parts / ROW_SPLIT_MULTIPLE) * ROW_SPLIT_MULTIPLE
        cuts.append(min(m, max(cuts[-1], cut)))
    return list(zip(cuts, cuts[1:] + [m]))


def gemm_scratch_bytes(*, lhs_dtype: str, rhs_dtype: str, out_dtype: str, m: int, n: int,
                       k: int, vector_bits: int | None = None, **_strides) -> int:
    """How many bytes of `scratch` one call of `emit_gemm`'s function needs (0: none,
    the packing buffers fit on its stack or it does not pack). Takes emit_gemm's
    keyword arguments (the strides do not matter)."""
    spec = GemmSpec(lhs_dtype, rhs_dtype, out_dtype, m, n, k, (0, 0), (0, 0))
    if m <= 1 or n <= 1 or k == 0:
        return 0                 # empty, zero-filled or matrix-vector: no packing
    return sum(_pack_bytes(spec, plan_gemm(spec, vector_bits or host_vector_bits())))


def _pack_bytes(spec: GemmSpec, plan: GemmPlan) -> tuple[int, int]:
    """(A block, B panel) bytes when they come from the caller's scratch, else (0, 0)."""
    esize = spec.arith.nbytes
    a_bytes = _round_up(plan.mc * plan.kc * esize, ALIGN)
    b_bytes = _round_up(plan.nc * plan.kc * esize, ALIGN)
    return (0, 0) if a_bytes + b_bytes <= STACK_SCRATCH_BYTES else (a_bytes, b_bytes)


def emit_gemm(module: ir.Module, name: str, *, lhs_dtype: str, rhs_dtype: str,
              out_dtype: str, m: int, n: int, k: int,
              lhs_strides: tuple[int, int], rhs_strides: tuple[int, int],
              vector_bits: int | None = None, batch: int = 1,
              columns: bool = False) -> ir.Function:
    """Adds `void name(ptr lhs, ptr rhs, ptr out, i64 m_begin, i64 m_end, ptr scratch)`
    to `module` (`scratch`: `gemm_scratch_bytes` bytes, see the module docstring).
    `batch`: how many times the caller runs it per launch (a batched dot's entries),
    which counts towards the size that pays for the faster packing routines.
    `columns`: the function's (m_begin, m_end) are columns [n_begin, n_end) of every
    row instead (see `splits_columns`; only for the packed path: m, n > 1, k > 0).

    It computes out[i, j] = sum_k lhs[i, k] * rhs[k, j] for m_begin <= i < m_end, in the
    accumulation type of `out_dtype` (f16 accumulates in f32; integers wrap). `vector_bits`
    overrides the host's vector width (tests use it to exercise the AVX2 tiling).
    """
    spec = GemmSpec(lhs_dtype, rhs_dtype, out_dtype, m, n, k,
                    tuple(lhs_strides), tuple(rhs_strides))
    _check_spec(spec)
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, PTR, I64, I64, PTR]), name)
    for arg, arg_name in zip(fn.args, ("lhs", "rhs", "out", "m_begin", "m_end", "scratch")):
        arg.name = arg_name
    bits = vector_bits or host_vector_bits()
    if m == 0 or n == 0:
        ir.IRBuilder(fn.append_basic_block("entry")).ret_void()
    elif k == 0:
        _emit_zero_fill(fn, spec)
    elif m == 1 or n == 1:
        emit_gemv(fn, spec, bits)
    else:
        _emit_packed_gemm(fn, spec, plan_gemm(spec, bits), batch, columns)
        # The packed driver only walks blocks and calls the packing routines and the
        # micro-kernel (where the time goes): optimizing it would not be measurable at
        # run time but costs several ms of every compile.
        fn.attributes.add("noinline")
        fn.attributes.add("optnone")
    return fn


def spec_error(*, lhs_dtype: str, rhs_dtype: str, out_dtype: str, m: int, n: int, k: int,
               lhs_strides: tuple[int, int], rhs_strides: tuple[int, int]) -> str | None:
    """Why emit_gemm refuses these arguments (its ValueError's message), or None."""
    try:
        _check_spec(GemmSpec(lhs_dtype, rhs_dtype, out_dtype, m, n, k,
                             tuple(lhs_strides), tuple(rhs_strides)))
    except ValueError as error:
        return str(error)
    return None


def _check_spec(spec: GemmSpec) -> None:
    for role, name in (("lhs", spec.lhs_dtype), ("rhs", spec.rhs_dtype)):
        if name not in _SUPPORTED_DTYPES:
            raise ValueError(f"gemm: unsupported {role} element type {name!r}")
    if spec.out_dtype not in _SUPPORTED_OUT:
        raise ValueError(f"gemm: unsupported output element type {spec.out_dtype!r}")
    operands_integral = all(DTYPES[d].kind in ("signed", "unsigned", "pred")
                            for d in (spec.lhs_dtype, spec.rhs_dtype))
    if DTYPES[spec.out_dtype].is_integer and not operands_integral:
        raise ValueError(f"gemm: float operands with integer output {spec.out_dtype} "
                         "(convert explicitly)")
    for dim, value in (("m", spec.m), ("n", spec.n), ("k", spec.k)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"gemm: {dim} must be a non-negative int, got {value!r}")
    for role, strides in (("lhs", spec.lhs_strides), ("rhs", spec.rhs_strides)):
        if len(strides) != 2 or not all(isinstance(s, int) for s in strides):
            raise ValueError(f"gemm: {role}_strides must be two ints, got {strides!r}")


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def _emit_zero_fill(fn: ir.Function, spec: GemmSpec) -> None:
    """k == 0: every output element is the empty sum, zero."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    _, _, out, m_begin, m_end, _ = fn.args
    out_ty = storage_type(spec.out_dtype)
    with for_range(b, b.mul(m_begin, const(spec.n)), b.mul(m_end, const(spec.n)), name="z") as i:
        b.store(ir.Constant(out_ty, None), element_ptr(b, out, out_ty, i))
    b.ret_void()


def _emit_packed_gemm(fn: ir.Function, spec: GemmSpec, plan: GemmPlan, batch: int = 1,
                      columns: bool = False) -> None:
    """The five-loop nest of the module docstring."""
    module, arith, tile = fn.module, spec.arith, plan.tile
    # The helpers are routines of the process-wide library (library.py): the
    # module only declares them, by names that encode every parameter.
    # Every GEMM whose C holds the accumulation type calls the micro-kernels that may
    # add to C (one branch per tile on their `acc` flag), also when k fits one block:
    # one routine fewer to compile per kind (each ~15 ms of LLVM), for one predictable
    # branch per tile, after its kc x MR x NR/lanes FMAs (not measured apart). A
    # narrower C is never accumulated into (kc = k).
    may_accumulate = storage_type(spec.out_dtype) == arith.type
    # The target is part of the names too: routines compiled for one target in this
    # process are never called by code compiled for another.
    prefix = f"xlapy.gemm.{targets.current().tag}"
    shape = f"{arith.type}.{tile.mr}x{tile.nrv}x{tile.lanes}"
    micro = library.declare(module, library.Routine(
        f"{prefix}.micro.{shape}.{spec.out_dtype}{'.acc' * may_accumulate}", "micro",
        spec.out_dtype, tile, may_accumulate))
    # A's rows and B's columns are the panels' x axis (packing.py).
    a_strides = [const(s) for s in spec.lhs_strides]            # (s_x, s_k)
    b_strides = [const(s) for s in reversed(spec.rhs_strides)]
    # A's panels are narrower than a vector: transposing them in registers wastes most
    # of each square, and pays (4-7% faster GEMMs) only when the GEMM is large -- or a
    # batch of GEMMs is (attention's q @ k^T: 64 heads of f32[256,64] @ [64,256]).
    a_layout = PackLayout.of(spec.lhs_dtype, *spec.lhs_strides, width=tile.mr, lanes=tile.lanes,
                             in_registers=2 * spec.m * spec.n * spec.k * batch >= BIG_GEMM_FLOPS)
    b_layout = PackLayout.of(spec.rhs_dtype, *reversed(spec.rhs_strides), width=tile.nr,
                             lanes=tile.lanes)
    pack_a, pack_b = (library.declare(module, library.Routine(
        f"{prefix}.pack.{arith.type}.{layout.key()}", "pack", spec.out_dtype, layout))
        for layout in (a_layout, b_layout))
    direct_a = reads_a_in_place(spec, tile)
    if direct_a:
        # A's k steps further apart than its rows (a transposed A): prefetched.
        far = spec.lhs_strides[1] > spec.lhs_strides[0]
        micro_a = library.declare(module, library.Routine(
            f"{prefix}.micro_sa{'f' * far}.{shape}.{spec.out_dtype}{'.acc' * may_accumulate}",
            "micro_strided_a_far" if far else "micro_strided_a", spec.out_dtype, tile,
            may_accumulate))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lhs, rhs, out, lo, hi, scratch = fn.args
    with b.if_then(b.icmp_signed(">=", lo, hi)):
        b.ret_void()   # an empty partition: do not even pack B
    a_buf, b_buf = _pack_buffers(b, spec, plan, scratch)
    n, k, mr, nr = spec.n, spec.k, tile.mr, tile.nr
    out_ty = storage_type(spec.out_dtype)
    m_begin, m_end, n_begin, n_end = (const(0), const(spec.m), lo, hi) if columns \
        else (lo, hi, const(0), const(n))
    with for_range(b, n_begin, n_end, plan.nc, name="jc", transform=False) as jc:
        ncb = imin(b, plan.nc, b.sub(n_end, jc))
        with for_range(b, 0, k, plan.kc, name="pc", transform=False) as pc:
            kcb = imin(b, plan.kc, b.sub(const(k), pc))
            b.call(pack_b, [b_buf, rhs, jc, ncb, pc, kcb, *b_strides])
            accumulate = b.icmp_signed("!=", pc, const(0))
            with for_range(b, m_begin, m_end, plan.mc, name="ic", transform=False) as ic:
                mcb = imin(b, plan.mc, b.sub(m_end, ic))
                if not direct_a:
                    b.call(pack_a, [a_buf, lhs, ic, mcb, pc, kcb, *a_strides])
                with for_range(b, 0, ncb, nr, name="jr", transform=False) as jr:
                    cols = imin(b, nr, b.sub(ncb, jr))
                    b_panel = element_ptr(b, b_buf, arith.type, b.mul(jr, kcb))
                    c_col = b.add(jc, jr)
                    with for_range(b, 0, mcb, mr, name="ir", transform=False) as i_r:
                        rows = imin(b, mr, b.sub(mcb, i_r))
                        row = b.add(ic, i_r)
                        c_tile = element_ptr(b, out, out_ty, b.add(b.mul(row, const(n)), c_col))
                        tail = [c_tile, const(n), kcb, rows, cols, accumulate]
                        if not direct_a:
                            a_panel = element_ptr(b, a_buf, arith.type, b.mul(i_r, kcb))
                            b.call(micro, [a_panel, b_panel, *tail])
                        else:
                            _direct_a_tile(b, mr, arith.type, row, rows, pc, kcb, lhs, a_buf,
                                           b_panel, tail, a_strides, pack_a, micro, micro_a)
    b.ret_void()


def reads_a_in_place(spec: GemmSpec, tile: MicroTile) -> bool:
    """Whether the micro-kernel reads A where it lies instead of from packed panels.

    - C one micro-panel wide (n <= NR): a packed A block would be read once, so packing
      it is a second pass over A for nothing, whatever A's layout. Measured, quiet
      AVX-512 host, interleaved medians of 40: attention's P @ V, f32[64 x 256,256] @
      [256,64] (row-major A, which packing transposes), 2.04 -> 1.80 ms; P^T @ dO (A's
      rows contiguous: packing copies) 2.67 -> 1.93 ms; an MLP's last layer
      [256,1024] @ [1024,10] 0.76 -> 0.24 ms (shared host).
    - A row-major (its k steps contiguous), any n: the kernel's MR row streams read
      the same bytes the packed micro-panel would hold, from the same cache level,
      and the packing pass is saved. Quiet AVX-512 host, two threads, interleaved in
      shuffled order, medians of 21: attention's q @ k^T (f32[64 x 256,64] @
      [64,256]) 3.00 -> 2.86 ms; 2048x512x2048, its transposed-B form, 2048x2048x512
      and 2048x512x512 within +-3% either way; the GPT block's step the same.
      A transposed A (rows contiguous) stays packed when n > NR: each k step would
      be a cache line of its own, re-read for every B micro-panel.

    A must need no conversion to the accumulation type. The last rows short of a
    full tile are still packed (the kernel reads MR rows). Results are the same
    either way: the order of the sums does not change."""
    if storage_type(spec.lhs_dtype) != spec.arith.type:
        return False
    return spec.n <= tile.nr or spec.lhs_strides[1] == 1


def _direct_a_tile(b, mr: int, etype, row, rows, pc, kcb, lhs, a_buf, b_panel, tail,
                   a_strides, pack_a, micro, micro_a) -> None:
    """One micro-tile with A read in place (reads_a_in_place): a full tile by the strided
    micro-kernel, the last partial tile (rows < MR) packed first (the kernel reads MR
    rows)."""
    with b.if_else(b.icmp_signed("==", rows, const(mr))) as (full, partial):
        with full:
            a_at = element_ptr(b, lhs, etype, b.add(b.mul(row, a_strides[0]),
                                                    b.mul(pc, a_strides[1])))
            b.call(micro_a, [a_at, b_panel, *tail, *a_strides])
        with partial:
            b.call(pack_a, [a_buf, lhs, row, rows, pc, kcb, *a_strides])
            b.call(micro, [a_buf, b_panel, *tail])


def _pack_buffers(b: ir.IRBuilder, spec: GemmSpec, plan: GemmPlan, scratch):
    """The 64-byte aligned packing buffers (a_buf, b_buf): the caller's scratch, or the
    stack when they are small (then `scratch` may be null)."""
    a_bytes, b_bytes = _pack_bytes(spec, plan)
    if a_bytes:
        return scratch, b.gep(scratch, [const(a_bytes)], source_etype=ir.IntType(8),
                              inbounds=True, name="b_pack")
    esize = spec.arith.nbytes
    a_buf = entry_alloca(b, ir.IntType(8), _round_up(plan.mc * plan.kc * esize, ALIGN),
                         name="a_pack", align=ALIGN)
    b_buf = entry_alloca(b, ir.IntType(8), _round_up(plan.nc * plan.kc * esize, ALIGN),
                         name="b_pack", align=ALIGN)
    return a_buf, b_buf
