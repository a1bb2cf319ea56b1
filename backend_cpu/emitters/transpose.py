"""Transposes in registers: n x n blocks moved with vector loads, shuffles and stores.

A kernel whose root is a transpose of an array in memory, where the output's two
minor dimensions are the input's in the other order, moves data block by block:

    for each n x n block (i0, j0) of out[..., i, j]:
      col[c] = load <n x T> in[..., i0:i0+n, j0 + c]   # unit stride in the input
      log2(n) rounds of pairwise interleaves (a perfect shuffle network) turn
      the n columns into the n rows of the block
      store <n x T> row[r] to out[..., i0 + r, j0:j0+n]

so every access is a full vector on contiguous memory, on both sides. The
perfect shuffle: pairing row i with row i + n/2 and interleaving their low and
high halves, log2(n) times, transposes an n x n matrix. n is 16 when a row of
the block fills a 64-byte vector register (f32 on AVX-512: 16 zmm registers in
flight; measured 4.6 ms against 7 ms with 8 x 8 on f32[4096,4096]), else 8.
The block rows need not be the output's second-minor dimension: any output
dimension the input is contiguous along will do (out[c, h, w, n] = in[n, h, w, c],
a convolution weight gradient's layout change), the others being batch
dimensions; one shorter than a block (3 channels) makes one partial block per
matrix. Other transposes (sizes not multiples of n, fused transposes) use the
tiled loop nest instead: on such shapes LLVM vectorizes it with gathers and
scatters, which costs it ~40 ms of O3 per kernel.

A large transpose (an output of at least streaming.STREAM_MIN_BYTES) reads its
input from memory, one line per input row and block. It walks GROUP blocks
side by side along i per step, so each input row gives GROUP consecutive lines
(f32[4096,4096] on 2 threads: ~4.3 -> ~3.8 ms with 2; 4 and 8 did no better),
and when its block rows are whole cache lines it writes them with non-temporal
stores (a prefetch of the blocks ahead only made it slower). A batch of matrices
is partitioned by (matrix, group of block rows), so a batch of one, or of an odd
count, still splits evenly (f32[16,1024,1024] with the minor dims swapped, 2
threads: ~4.1 -> ~3.1 ms).

A transpose that keeps the minor dimension (attention's head shuffle
[B,S,H,D] -> [B,H,S,D]) has nothing to shuffle: every output row is one input
row. When the output is large and its rows are whole lines, it copies rows as
line-sized vectors with non-temporal stores (try_emit_row_shuffle; the loop
nest's streaming needs rows of several chunks, and D is often one:
f32[8,512,16,64] on 2 threads ~0.56 -> ~0.37 ms).
"""
from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from .. import target as targets
from ..llvm.loops import for_range, i64
from ..llvm.types import I64, storage_type

from . import streaming

BLOCK = 8
WIDE_BLOCK = 16
LINE = streaming.LINE_BYTES
# Blocks per step of a large transpose (see the module docstring).
GROUP = 2
# Output rows per partition unit of a row shuffle (try_emit_row_shuffle).
SHUFFLE_ROWS = 16
# A row shuffle moves outputs from this size (smaller ones: the loop nest, cheap to
# compile at that size and as fast).
SHUFFLE_MIN_BYTES = 64 * 1024


def _block_size(esize: int, rows: int, columns: int) -> int:
    """16 when 16 elements fill one of the target's vector registers (f32 on
    AVX-512) and the sizes allow it, else 8."""
    if esize * WIDE_BLOCK == targets.current().vector_bytes and columns % WIDE_BLOCK == 0 \
            and rows % WIDE_BLOCK == 0:
        return WIDE_BLOCK
    return BLOCK


def _interleave_masks(n: int):
    lo = [x for i in range(n // 2) for x in (i, n + i)]
    hi = [x for i in range(n // 2, n) for x in (i, n + i)]
    return lo, hi


def _why_not_in_memory(root, view, out_shape) -> str | None:
    """What both register-level transposes need: a transpose of an array in memory
    into a default-layout output of rank >= 1."""
    if root.opcode != "transpose":
        return "not a transpose"
    if view is None:
        return "the operand is not an array in memory (a parameter, bitcast or transpose of one)"
    if not out_shape.has_default_layout():
        return "the output is not in the default layout"
    if not out_shape.rank:
        return "a rank-0 transpose (a copy)"
    return None


def why_not_block_transpose(root, view, out_shape) -> str | None:
    """Why `root` (a transpose of the strided `view`, permuted as the output) is not
    moved by n x n register blocks (try_emit_block_transpose), or None."""
    reason = _why_not_in_memory(root, view, out_shape)
    if reason is not None:
        return reason
    if view.strides[-1] == 1:
        return "minor dims not swapped: the minor dimension is kept (a row shuffle)"
    dims = out_shape.dims
    if len(dims) < 2:
        return "a vector"
    if dims[-1] % BLOCK:
        return f"the output's minor dimension ({dims[-1]}) is not a multiple of {BLOCK}"
    if not out_shape.numel:             # (an empty output would give loads "align 0")
        return "an empty output"
    p = _row_dim(view, dims)
    if p is None:
        return f"no output dimension along which the input is contiguous (a multiple of " \
               f"{BLOCK} long, or shorter)"
    if view.strides[-1] < dims[p]:
        return f"the input's stride along the output's minor dimension ({view.strides[-1]}) " \
               f"is shorter than a block column ({dims[p]})"
    return None


def try_emit_block_transpose(kernel, root, view, out) -> int | None:
    """Emits `root` (a transpose of the strided `view`) by n x n register blocks; None
    to decline (why_not_block_transpose says why)."""
    if why_not_block_transpose(root, view, out.shape) is not None:
        return None
    dims = out.shape.dims
    p = _row_dim(view, dims)
    out_strides = [prod(dims[d + 1:]) for d in range(len(dims))]
    batch = [d for d in range(len(dims) - 1) if d != p]
    b = kernel.b
    ety = storage_type(out.shape.element_type)
    esize = out.shape.nbytes // max(out.shape.numel, 1)
    n = _block_size(esize, dims[p], dims[-1])
    vec = ir.VectorType(ety, n)
    lo, hi = _interleave_masks(n)
    mask_type = ir.VectorType(ir.IntType(32), n)
    lo_mask, hi_mask = ir.Constant(mask_type, lo), ir.Constant(mask_type, hi)

    def address(pointer, elements):
        return b.gep(pointer, [elements], inbounds=True, source_etype=ety)

    # Rows shorter than a block (out[c, h, w, n] with 3 channels c) make one partial
    # block per matrix: its columns are gathered element by element, its rows stored.
    height = min(n, dims[p])

    def column(offset):
        if height == n:
            return b.load(address(view.pointer, offset), typ=vec, align=esize)
        value = ir.Constant(vec, None)
        for r in range(height):
            element = b.load(address(view.pointer, b.add(offset, i64(r))), typ=ety)
            value = b.insert_element(value, element, ir.Constant(ir.IntType(32), r))
        return value

    def shuffled(batch_in, i0, j0):
        columns = []
        for c in range(n):
            columns.append(column(
                b.add(batch_in, b.add(i0, b.mul(b.add(j0, i64(c)), i64(view.strides[-1]))))))
        rows = columns
        for _ in range(n.bit_length() - 1):           # log2(n) rounds
            new = [None] * n
            for i in range(n // 2):
                a, z = rows[i], rows[i + n // 2]
                new[2 * i] = b.shuffle_vector(a, z, lo_mask)
                new[2 * i + 1] = b.shuffle_vector(a, z, hi_mask)
            rows = new
        return rows

    def block(batch_in, batch_out, i0, j0):
        # Streamed, a step covers whole output lines: `per_line` blocks side by side
        # along j (two 8 x 8 blocks of f32 on AVX2), whose rows are stored one line
        # after another, so each line is written whole by consecutive streaming stores.
        parts = per_line if streamed else 1
        blocks = [shuffled(batch_in, i0, b.add(j0, i64(k * n))) for k in range(parts)]
        for r in range(height):
            row_start = b.add(batch_out, b.add(b.mul(b.add(i0, i64(r)), i64(out_strides[p])), j0))
            for k, rows in enumerate(blocks):
                offset = b.add(row_start, i64(k * n)) if k else row_start
                if streamed:        # part of a whole aligned cache line: straight to memory
                    store = b.store(rows[r], address(out.pointer, offset), align=n * esize)
                    store.set_metadata("nontemporal", streaming.nontemporal_node(b.module))
                else:
                    b.store(rows[r], address(out.pointer, offset), align=esize)

    # Blocks side by side along i read GROUP consecutive lines of each input row.
    large = out.shape.nbytes >= streaming.STREAM_MIN_BYTES and p == len(dims) - 2 \
        and height == n
    group = GROUP if dims[p] % (n * GROUP) == 0 and large else 1
    step = n * group
    # [begin, end) counts groups of block rows (`step` rows), matrix after matrix.
    per_matrix = max(dims[p] // step, 1)

    def tiles(batch_in, batch_out, i_lo, i_hi):
        # Not unrolled: copies of a block's shuffle network cost the code generator
        # ~10 ms each (four of them: 40 ms for an f32[8,16,16,32]) for no speed.
        with for_range(b, i_lo, i_hi, "tb.i", step=step, unroll=False) as i0:
            with for_range(b, 0, dims[-1], "tb.j", step=n * (per_line if streamed else 1),
                           unroll=False) as j0:
                if group == 1:
                    block(batch_in, batch_out, i0, j0)
                    return
                # A loop, not copies: a second copy of the shuffle network doubles
                # what LLVM has to optimize (compile time) for the same speed.
                with for_range(b, 0, group, "tb.g", scalar=True) as g:
                    block(batch_in, batch_out, b.add(i0, b.mul(g, i64(n))), j0)

    def all_blocks():
        if not batch:
            tiles(i64(0), i64(0), b.mul(kernel.begin, i64(step)), b.mul(kernel.end, i64(step)))
            return
        # Partitions split the batch x block-row groups, so a batch of one matrix (or
        # of an odd count) still keeps every thread busy.
        with for_range(b, kernel.begin, kernel.end, "tb.unit", unroll=False) as unit:
            offset_in, offset_out, row = _matrix_offsets(b, unit, per_matrix, batch, view,
                                                         dims, out_strides)
            tiles(offset_in, offset_out, b.mul(row, i64(step)),
                  b.mul(b.add(row, i64(1)), i64(step)))

    streamed = False
    per_line = max(LINE // (n * esize), 1)
    if large and _may_stream(out.shape, n * esize, dims[-1] * esize):
        # Every block row is a cache line when the output starts on one, as the
        # runtime's buffers do (and so does every matrix of a batch); a run-time check
        # sends any other address to a plain loop rather than fault (a second copy of
        # the blocks would double the code).
        misaligned = b.and_(b.ptrtoint(out.pointer, I64), i64(LINE - 1))
        with b.if_else(b.icmp_unsigned("==", misaligned, i64(0))) as (aligned, otherwise):
            with aligned:
                streamed = True
                all_blocks()
            with otherwise:
                _element_by_element(kernel, view, out, step, per_matrix)
        kernel.streams = True
    else:
        all_blocks()
    return prod(dims[d] for d in batch) * per_matrix


def _row_dim(view, dims) -> int | None:
    """The output dimension along which the input is contiguous (the rows of the
    blocks): the second-minor one when it qualifies (a batch of matrices), else any
    other (out[c, h, w, n] = in[n, h, w, c]); a multiple of BLOCK long, or shorter
    than a block (one partial block); None if none."""
    candidates = [len(dims) - 2] + list(range(len(dims) - 2))
    return next((d for d in candidates if view.strides[d] == 1 and dims[d] > 1
                 and (dims[d] % BLOCK == 0 or dims[d] < BLOCK)), None)


def _matrix_offsets(b, unit, per_matrix: int, batch, view, dims, out_strides):
    """(input offset, output offset, group of block rows) of partition unit `unit`:
    unit = matrix * per_matrix + group, the matrix a flat index over the output
    dimensions `batch` (all but the block rows' and the minor one)."""
    flat = b.udiv(unit, i64(per_matrix))
    row = b.urem(unit, i64(per_matrix))
    rest, offset_in, offset_out = flat, i64(0), i64(0)
    for d in reversed(batch):
        idx = b.urem(rest, i64(dims[d]))
        rest = b.udiv(rest, i64(dims[d]))
        offset_in = b.add(offset_in, b.mul(idx, i64(view.strides[d])))
        offset_out = b.add(offset_out, b.mul(idx, i64(out_strides[d])))
    return offset_in, offset_out, row


def _element_by_element(kernel, view, out, step: int, per_matrix: int) -> None:
    """out[.., i, j] = in[.., j, i] for the rows of this partition, one element at a
    time: the path for an output that is not line-aligned (never for the runtime's
    buffers)."""
    b = kernel.b
    ety = storage_type(out.shape.element_type)
    dims = out.shape.dims
    out_strides = [prod(dims[d + 1:]) for d in range(len(dims))]
    with for_range(b, kernel.begin, kernel.end, "te.unit", scalar=True) as unit:
        offset_in, offset_out, row = _matrix_offsets(b, unit, per_matrix, range(len(dims) - 2),
                                                     view, dims, out_strides)
        i_lo = b.mul(row, i64(step))
        with for_range(b, i_lo, b.add(i_lo, i64(step)), "te.i", scalar=True) as i:
            with for_range(b, 0, dims[-1], "te.j", scalar=True) as j:
                source = b.add(offset_in, b.add(i, b.mul(j, i64(view.strides[-1]))))
                value = b.load(b.gep(view.pointer, [source], inbounds=True, source_etype=ety),
                               typ=ety)
                target = b.add(offset_out, b.add(b.mul(i, i64(dims[-1])), j))
                b.store(value, b.gep(out.pointer, [target], inbounds=True, source_etype=ety))


def why_not_row_shuffle(root, view, out_shape) -> str | None:
    """Why `root` (a transpose of the strided `view`, permuted as the output) is not
    copied row by row (try_emit_row_shuffle), or None."""
    reason = _why_not_in_memory(root, view, out_shape)
    if reason is not None:
        return reason
    if view.strides[-1] != 1:
        return "the minor dimension moves"
    return _row_shuffle_refusal(out_shape)


def _row_shuffle_refusal(out_shape) -> str | None:
    dims = out_shape.dims
    esize = out_shape.nbytes // max(out_shape.numel, 1)
    if len(dims) < 2:
        return "a vector"
    if not out_shape.numel:
        return "an empty output"
    smallest = min(SHUFFLE_MIN_BYTES, streaming.STREAM_MIN_BYTES)
    if out_shape.nbytes < smallest:
        return f"small: {out_shape.nbytes} bytes (rows are copied whole from {smallest})"
    if (dims[-1] * esize) % LINE:
        return f"rows of {dims[-1] * esize} bytes are not whole {LINE}-byte lines"
    return None


def try_emit_row_shuffle(kernel, view, out) -> int | None:
    """A transpose that keeps the minor dimension (attention's head shuffle
    [B,S,H,D] -> [B,H,S,D]) moves whole rows: each output row is one contiguous input
    row, copied as line-sized vectors, stored non-temporally from STREAM_MIN_BYTES (the
    generic loop nest streams only rows of several chunks, and D is often a single
    one). Below that the stores are cached: the loop nest would compute each element's
    source with divisions, code LLVM takes 0.3 s to optimize for the GPT block's
    f32[8,256,8,64] head split, against 17 ms for these row copies. Partition units
    are SHUFFLE_ROWS output rows, so a small outer extent still splits. None to
    decline (why_not_row_shuffle says why)."""
    if _row_shuffle_refusal(out.shape) is not None:
        return None
    dims = out.shape.dims
    esize = out.shape.nbytes // max(out.shape.numel, 1)
    b = kernel.b
    ety = storage_type(out.shape.element_type)
    per_line = LINE // esize
    lines = dims[-1] // per_line
    # Lines copied per step, unrolled: a whole short row (D = 64 f32 is 4 lines).
    unroll = next(k for k in (4, 2, 1) if lines % k == 0)
    rows = min(SHUFFLE_ROWS, dims[-2])
    per_outer = -(-dims[-2] // rows)
    out_strides = [prod(dims[d + 1:]) for d in range(len(dims))]
    # Bytes are only moved: one integer vector type for every element type (LLVM drops
    # the non-temporal hint of vector types it must split, such as <32 x half>).
    vec = ir.VectorType(ir.IntType(64), LINE // 8)

    def address(pointer, elements):
        return b.gep(pointer, [elements], inbounds=True, source_etype=ety)

    def copy_rows(streamed: bool):
        with for_range(b, kernel.begin, kernel.end, "rs.unit") as unit:
            offset_in, offset_out, part = _matrix_offsets(b, unit, per_outer, range(len(dims) - 2),
                                                          view, dims, out_strides)
            r_lo = b.mul(part, i64(rows))
            r_hi = b.add(r_lo, i64(rows))
            if dims[-2] % rows:
                r_hi = b.select(b.icmp_signed("<", r_hi, i64(dims[-2])), r_hi, i64(dims[-2]))
            with for_range(b, r_lo, r_hi, "rs.row") as r:
                source = b.add(offset_in, b.mul(r, i64(view.strides[-2])))
                target = b.add(offset_out, b.mul(r, i64(dims[-1])))
                with for_range(b, 0, dims[-1], "rs.line", step=per_line * unroll,
                               scalar=True) as c:
                    for k in range(unroll):
                        at = b.add(c, i64(k * per_line))
                        value = b.load(address(view.pointer, b.add(source, at)), typ=vec,
                                       align=esize)
                        store = b.store(value, address(out.pointer, b.add(target, at)),
                                        align=LINE if streamed else esize)
                        if streamed:
                            store.set_metadata("nontemporal", streaming.nontemporal_node(b.module))

    # Rows are whole lines: all aligned when the buffer is (the runtime's always are).
    misaligned = b.and_(b.ptrtoint(out.pointer, I64), i64(LINE - 1))
    if out.shape.nbytes < streaming.STREAM_MIN_BYTES:
        copy_rows(streamed=False)          # the output stays in cache for its reader
        return prod(dims[:-2]) * per_outer
    with b.if_else(b.icmp_unsigned("==", misaligned, i64(0))) as (aligned, otherwise):
        with aligned:
            copy_rows(streamed=True)
        with otherwise:
            copy_rows(streamed=False)
    kernel.streams = True
    return prod(dims[:-2]) * per_outer


def _may_stream(shape, block_row_bytes: int, row_bytes: int) -> bool:
    """Large outputs whose block rows make whole cache lines (one block row, or two
    side by side) get non-temporal stores, on targets where those pay off."""
    return shape.nbytes >= streaming.STREAM_MIN_BYTES and LINE % block_row_bytes == 0 \
        and row_bytes % LINE == 0 and targets.current().streaming_stores
