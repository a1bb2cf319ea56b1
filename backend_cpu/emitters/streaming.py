"""Non-temporal ("streaming") stores for kernels whose output cannot stay in cache.

An ordinary store to a line that is not in cache first reads the line from
memory ("read for ownership"), then writes it back when it is evicted: a
kernel that reads N bytes and writes N bytes moves 3N over the memory bus.
A non-temporal store (`vmovntps`) writes whole lines straight to memory
through write-combining buffers, without the read: 2N. On this (shared,
virtual) machine the memory system gives two cores between ~35 and ~70 GB/s
of useful traffic from one hour to the next, and one core alone already
reaches most of it with streaming stores: measured side by side, streaming
made the 2-thread f32[16M] and f32[4096,4096] kernels 5-15% faster.

x86 only streams full, aligned vectors (LLVM splits an under-aligned
`store <16 x float> ..., !nontemporal` into 8-byte `movntsd`s, and its loop
vectorizer refuses to vectorize a loop whose scalar store is marked
non-temporal without 8-byte alignment). So the kernel's minor-most loop is
emitted by hand in chunks of CHUNK_BYTES (four cache lines), from the first
64-byte aligned element on:

    for each chunk start c:            # lo (if unaligned), the aligned starts, hi - C
      for j in [0, C):  stage[j] = value(c + j)    # vectorized by LLVM (C is constant)
      if out + c is aligned:  store <C x T> stage -> out[c ..]  !nontemporal, align 64
      else:                   store <C x T> stage -> out[c ..]  (ordinary)

The unaligned head and tail chunks overlap their aligned neighbours and write
the same values there again: one loop body serves every element, and no scalar
edge loop is needed (each one is compile time). So a kernel body must not read
its own output (none does: outputs never alias inputs), and a partition must
hold at least one chunk. Rows made of whole chunks (f32[4096,4096]) skip the
head and tail logic: a constant-trip chunk loop costs LLVM ~2.5 ms less to
optimize (softmax compile +6 -> +3.6 ms over ordinary stores).

LLVM's SROA forwards the stage (a 256-byte alloca) from its vector stores to
the vector load, so it stays in registers. Streaming stores are weakly ordered:
the kernel ends with an `sfence` (KernelIR.finish) so its results are visible
to whichever thread runs the next kernel.

Only outputs of at least STREAM_MIN_BYTES stream: smaller ones may still be in
the shared L3 when the next kernel reads them (the MLP's hidden layer), where a
streaming store would send them to memory and back. Measured on 2 threads with
streaming forced on, the 8-op chain was slower at 4 and 8 MiB outputs (0.13 ->
0.15, 0.19 -> 0.24 ms), even at 16 MiB and faster at 32 MiB (1.30 -> 1.18 ms);
softmax f32[1024,4096] (16 MiB) was already faster (0.70 -> 0.63 ms).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..llvm.kernel_ir import Buffer
from ..llvm.loops import for_range, i64, nest_order
from ..llvm.types import I32, I64, PTR, to_storage

# Outputs smaller than this (in total) keep ordinary stores: half of the 32 MiB L3,
# so an output the next kernel reads may still be found in cache. See the module doc.
STREAM_MIN_BYTES = 16 << 20
# One chunk: four 64-byte cache lines (four zmm stores of f32; chunks of one or two
# lines ran 10-25% slower). The minor dimension must hold a few chunks, since the
# unaligned head and tail chunks redo part of their neighbours' work.
CHUNK_BYTES = 256
LINE_BYTES = 64
MIN_CHUNKS_PER_ROW = 4
_ELEMENT_BYTES = (4, 8)
# llvm.prefetch locality: 3 = keep in all levels (prefetcht0).
PREFETCH_LOCALITY = 3


def wants_streaming(shape, outputs) -> bool:
    """True when a loop nest over `shape` writing `outputs` should stream its stores:
    one large output of 4- or 8-byte elements whose minor dimension spans chunks."""
    if len(outputs) != 1 or shape.rank == 0 or not shape.is_array:
        return False
    out = outputs[0].shape
    if out.nbytes < STREAM_MIN_BYTES or out.numel == 0:
        return False
    esize = out.nbytes // out.numel
    if esize not in _ELEMENT_BYTES or out.dtype.is_complex:   # lines are vectors of scalars
        return False
    minor = shape.dims[shape.minor_to_major()[0]]
    return minor * esize >= MIN_CHUNKS_PER_ROW * CHUNK_BYTES


class StreamedBuffer(Buffer):
    """An output view whose stores go to the chunk's stage while a chunk is emitted.

    The loop nest's body stores through this object as through any Buffer; the
    streaming loop (`emit_minor_loop`) switches where those stores land.
    """

    def __init__(self, buffer: Buffer, kernel, prefetch: list | None = None):
        super().__init__(buffer.pointer, buffer.shape, buffer._on_access)
        self.prefetch = prefetch or []      # inputs whose next row each chunk prefetches
        self.esize = buffer.shape.nbytes // buffer.shape.numel
        self.chunk = CHUNK_BYTES // self.esize
        self.vector = ir.VectorType(self.llvm_type, LINE_BYTES // self.esize)
        stage = kernel.alloca(ir.ArrayType(self.llvm_type, self.chunk), "stream.stage")
        stage.align = LINE_BYTES
        stage.type = PTR        # llvmlite types it `[C x T]*`; it is addressed by element
        self.stage = stage
        # A vector of whole chunks is partitioned by chunks: [begin, end) counts them.
        # The loop nest splits the minor dimension itself (loops.nest_order).
        self.by_chunks = len(nest_order(self.shape)) == 1 and self.shape.numel % self.chunk == 0
        self.lanes = self.vector.count    # elements per line: per_vector's lanes
        self._per_vector = None
        self._lane = None          # the index of the element being staged, when staging
        self._lines = None         # the vectors of the chunk being built, when on vectors
        kernel.streams = True      # KernelIR.finish adds the sfence

    def store(self, b: ir.IRBuilder, index: list, value: ir.Value) -> None:
        if self._lane is None:
            super().store(b, index, value)
            return
        cell = b.gep(self.stage, [self._lane], inbounds=True, source_etype=self.llvm_type)
        b.store(to_storage(b, value, self.etype), cell, align=self.esize)

    def store_vector(self, b: ir.IRBuilder, index: list, value: ir.Value) -> None:
        if self._lines is None:
            super().store_vector(b, index, value)
            return
        self._lines.append(to_storage(b, value, self.etype))

    def emit_minor_loop(self, b: ir.IRBuilder, lo, hi, index: list, dim: int, per_element,
                        name: str, per_vector=None) -> None:
        """The minor-most loop over [lo, hi) in dimension `dim` (module docstring):
        `per_element(b, i)` emits the body for element i, storing through self.
        With `per_vector`, `per_vector(b, i)` emits the body for one line of elements
        from i (stored with `store_vector`), and chunks are built from lines instead.
        Needs hi - lo >= one chunk (wants_streaming and streamed_outputs see to it)."""
        self._per_vector = per_vector
        if self.by_chunks:        # every partition starts on a chunk: no head, no tail
            self._chunk_loop(b, b.mul(lo, i64(self.chunk)), b.mul(hi, i64(self.chunk)),
                             index, dim, per_element, name)
        elif _constant(lo) is not None and _constant(hi) is not None \
                and (_constant(hi) - _constant(lo)) % self.chunk == 0:
            # Whole rows of whole chunks: they are all aligned or none is (rows are
            # multiples of a line, unless the buffer itself is not): no head, no tail.
            self._chunk_loop(b, lo, hi, index, dim, per_element, name)
        else:
            self._chunks_with_ends(b, lo, hi, index, dim, per_element, name)

    def _chunk_loop(self, b, start, stop, index, dim, per_element, name) -> None:
        """Chunks at start, start + C, ... < stop. Not unrolled: its body is already a
        few vector bodies, and copies of it cost compile time for nothing here."""
        with for_range(b, start, stop, f"{name}.chunk", step=self.chunk, scalar=True) as c:
            self._emit_chunk(b, c, index, dim, per_element, name)

    def _chunks_with_ends(self, b, lo, hi, index, dim, per_element, name) -> None:
        """[lo, hi) as an unaligned head chunk at lo, the aligned chunks, and a tail
        chunk at hi - C (each end overlaps its aligned neighbour)."""
        lo = i64(lo) if isinstance(lo, int) else lo
        hi = i64(hi) if isinstance(hi, int) else hi
        first = b.ptrtoint(self.address(b, _at(index, dim, lo)), I64)
        # Elements before the first aligned address (buffers are element-aligned).
        head = b.udiv(b.and_(b.sub(i64(0), first), i64(LINE_BYTES - 1)), i64(self.esize))
        start = b.add(lo, head)
        full = b.sdiv(b.sub(hi, start), i64(self.chunk))
        stop = b.add(start, b.mul(full, i64(self.chunk)))
        has_head = b.zext(b.icmp_signed("!=", head, i64(0)), I64)
        has_tail = b.zext(b.icmp_signed("!=", stop, hi), I64)
        count = b.add(b.add(has_head, full), has_tail)
        last = b.sub(hi, i64(self.chunk))
        with for_range(b, 0, count, f"{name}.chunk", scalar=True) as k:
            at = b.add(start, b.mul(b.sub(k, has_head), i64(self.chunk)))
            at = b.select(b.icmp_signed("<", at, lo), lo, at)         # the head chunk
            at = b.select(b.icmp_signed(">", at, last), last, at)     # the tail chunk
            self._emit_chunk(b, at, index, dim, per_element, name)

    def _emit_chunk(self, b, c, index, dim, per_element, name) -> None:
        """Elements [c, c + chunk): staged, then stored as whole vectors."""
        for source in self.prefetch:
            self._prefetch_next_row(b, source, _at(index, dim, c), dim)
        per_line = self.lanes
        if self._per_vector is not None:      # computed line by line, in registers
            self._lines = []
            try:
                for k in range(self.chunk // per_line):
                    self._per_vector(b, b.add(c, i64(k * per_line), flags=("nsw",)))
                lines = self._lines
            finally:
                self._lines = None
            self._store_lines(b, lines, _at(index, dim, c))
            return
        with for_range(b, 0, self.chunk, f"{name}.lane") as j:
            self._lane = j
            try:
                per_element(b, b.add(c, j, flags=("nsw",)))
            finally:
                self._lane = None
        # One vector per cache line, as the zmm stores will write them.
        lines = []
        for k in range(self.chunk // per_line):
            cell = b.gep(self.stage, [i64(k * per_line)], inbounds=True,
                         source_etype=self.llvm_type)
            lines.append(b.load(cell, typ=self.vector, align=LINE_BYTES))
        self._store_lines(b, lines, _at(index, dim, c))

    def emit_vector_map(self, b, lo: int, hi: int, index: list, dim: int, source: Buffer,
                        fn, name: str) -> None:
        """out[.., i] = fn(source[.., i]) for i in [lo, hi), a row of whole chunks, on
        whole vectors (`fn` maps a vector of lines): no element generators, no stage,
        nothing for LLVM's vectorizer to do. `source` must be line-aligned (a stack row)."""
        assert (hi - lo) % self.chunk == 0, "emit_vector_map: a row of whole chunks"
        per_line = self.lanes
        with for_range(b, lo, hi, f"{name}.chunk", step=self.chunk, scalar=True) as c:
            for src in self.prefetch:
                self._prefetch_next_row(b, src, _at(index, dim, c), dim)
            lines = []
            for k in range(self.chunk // per_line):
                at = source.address(b, _at(index, dim, b.add(c, i64(k * per_line))))
                lines.append(fn(b, b.load(at, typ=self.vector, align=LINE_BYTES)))
            self._store_lines(b, lines, _at(index, dim, c))

    def _store_lines(self, b, lines: list, at: list) -> None:
        """Stores consecutive line vectors from `at`: streamed if aligned, else ordinary."""
        target = self.address(b, at)
        aligned = b.icmp_unsigned("==", b.and_(b.ptrtoint(target, I64), i64(LINE_BYTES - 1)),
                                  i64(0))
        with b.if_else(aligned) as (then, otherwise):
            with then:
                for k, line in enumerate(lines):
                    inst = b.store(line, self._line(b, target, k), align=LINE_BYTES)
                    inst.set_metadata("nontemporal", nontemporal_node(b.module))
                    self._record(inst)
            with otherwise:       # a head or tail chunk: overlaps its neighbour with equal values
                for k, line in enumerate(lines):
                    self._record(b.store(line, self._line(b, target, k), align=self.esize))

    def _line(self, b, target, k: int):
        return b.gep(target, [i64(k * (LINE_BYTES // self.esize))], inbounds=True,
                     source_etype=self.llvm_type)

    def _record(self, inst) -> None:
        if self._on_access is not None:
            self._on_access(inst)

    def _prefetch_next_row(self, b, source: Buffer, at: list, dim: int) -> None:
        """Asks for the chunk's lines of `source` one row ahead (see streamed_outputs).
        A prefetch never faults, so the row after a partition's last one is harmless."""
        ahead = b.gep(source.address(b, at), [i64(self.shape.dims[dim])],
                      source_etype=source.llvm_type)
        for line in range(0, self.chunk * _element_bytes(source), LINE_BYTES):
            b.call(_prefetch_intrinsic(b.module), [
                b.gep(ahead, [i64(line)], source_etype=ir.IntType(8)),
                ir.Constant(I32, 0), ir.Constant(I32, PREFETCH_LOCALITY), ir.Constant(I32, 1)])


def _element_bytes(buffer: Buffer) -> int:
    return buffer.shape.nbytes // max(buffer.shape.numel, 1)


def _prefetch_intrinsic(module: ir.Module) -> ir.Function:
    """`llvm.prefetch(ptr, rw, locality, cache type)`."""
    name = "llvm.prefetch.p0"
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]), name)


def _constant(value) -> int | None:
    """The integer a loop bound is when it is known at compile time, else None."""
    if isinstance(value, int):
        return value
    if isinstance(value, ir.Constant) and isinstance(value.constant, int):
        return value.constant
    return None


def _at(index: list, dim: int, value) -> list:
    at = list(index)
    at[dim] = value
    return at


def nontemporal_node(module: ir.Module):
    """`!{i32 1}`: LLVM's marker for a non-temporal store."""
    return module.add_metadata([ir.Constant(ir.IntType(32), 1)])


def streamed_outputs(kernel, shape, outputs: list, prefetch_next_row: bool = False) -> list:
    """`outputs`, with the one output wrapped as a StreamedBuffer when it should stream.

    `prefetch_next_row`: the loop nest makes several passes over each row (hoisted
    row reductions), so the hardware prefetcher, which follows demand misses, idles
    while the last passes work in cache; the streaming pass then prefetches the next
    row of every input of the output's shape, one chunk's worth per chunk.
    """
    if not wants_streaming(shape, outputs):
        return outputs
    out = outputs[0]
    chunk = CHUNK_BYTES // (out.shape.nbytes // out.shape.numel)
    split_minor = len(nest_order(shape)) == 1
    if split_minor and out.shape.numel % chunk:
        # [begin, end) is then the minor loop itself: every partition must hold a chunk.
        cap = out.shape.numel // chunk
        kernel.max_partitions = min(kernel.max_partitions or cap, cap)
    sources = [op for op in kernel.operands if op.shape.is_array and op.shape.dims == out.shape.dims
               and op.shape.minor_to_major() == out.shape.minor_to_major()] \
        if prefetch_next_row and not split_minor else []
    return [StreamedBuffer(out, kernel, sources)]


def partition_extent(outputs: list) -> int | None:
    """The kernel's partition extent when streaming sets it (a vector split by
    chunks), else None."""
    out = outputs[0] if len(outputs) == 1 else None
    return out.shape.numel // out.chunk if isinstance(out, StreamedBuffer) and out.by_chunks \
        else None
