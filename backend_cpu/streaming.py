"""Non-temporal ("streaming") stores for kernels whose output cannot stay in cache.

An ordinary store to a line that is not in cache first reads the line from
memory ("read for ownership"), then writes it back when it is evicted: a
kernel that reads N bytes and writes N bytes moves 3N over the memory bus.
A non-temporal store (`vmovntps`) writes whole lines straight to memory
through write-combining buffers, without the read: 2N. On this machine two
cores saturate the memory system at ~50 GB/s of useful traffic with ordinary
stores, and reach ~70 GB/s with streaming ones, so it is also what lets a
memory-bound kernel scale from one thread to two.

x86 only streams full, aligned vectors (LLVM splits an under-aligned
`store <16 x float> ..., !nontemporal` into 8-byte `movntsd`s, and its loop
vectorizer refuses to vectorize a loop whose scalar store is marked
non-temporal without 8-byte alignment). So the kernel's minor-most loop is
emitted by hand in aligned chunks of CHUNK_BYTES (four cache lines):

    head = elements before the first 64-byte aligned output address
    for c in [lo + head, stop, step C):          # full, aligned chunks
      for j in [0, C):  stage[j] = value(c + j)  # vectorized by LLVM (C is constant)
      store <C x T> stage -> out[c ..]  !nontemporal, align 64
    for i in [lo, lo + head) ∪ [stop, hi):       # the edges: ordinary scalar stores
      out[i] = value(i)

LLVM's SROA forwards the stage (a 256-byte alloca) from its vector stores to
the vector load, so it stays in registers. Streaming stores are weakly ordered:
the kernel ends with an `sfence` (KernelIR.finish) so its results are visible
to whichever thread runs the next kernel.

Only outputs of at least STREAM_MIN_BYTES stream: smaller ones may still be in
the shared L3 when the next kernel reads them (the MLP's hidden layer), where a
streaming store would send them to memory and back.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .kernel_ir import Buffer
from .llvm_types import I32, I64, PTR, to_storage
from .loops import for_range, i64

# Outputs smaller than this (in total) keep ordinary stores: half of the 32 MiB L3,
# so an output the next kernel reads may still be found in cache. See the module doc.
STREAM_MIN_BYTES = 16 << 20
# One chunk: four 64-byte cache lines (four zmm stores of f32). The minor dimension
# must hold a few chunks, or the scalar edges would do most of the work.
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
    if esize not in _ELEMENT_BYTES:
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
        self.vector = ir.VectorType(self.llvm_type, self.chunk)
        stage = kernel.alloca(ir.ArrayType(self.llvm_type, self.chunk), "stream.stage")
        stage.align = LINE_BYTES
        stage.type = PTR        # llvmlite types it `[C x T]*`; it is addressed by element
        self.stage = stage
        self._lane = None          # the index of the element being staged, when staging
        kernel.streams = True      # KernelIR.finish adds the sfence

    def store(self, b: ir.IRBuilder, index: list, value: ir.Value) -> None:
        if self._lane is None:
            super().store(b, index, value)
            return
        cell = b.gep(self.stage, [self._lane], inbounds=True, source_etype=self.llvm_type)
        b.store(to_storage(b, value, self.etype), cell, align=self.esize)

    def emit_minor_loop(self, b: ir.IRBuilder, lo, hi, index: list, dim: int, per_element,
                        name: str) -> None:
        """The minor-most loop over [lo, hi) in dimension `dim` (module docstring):
        `per_element(b, i)` emits the body for element i, storing through self."""
        lo = i64(lo) if isinstance(lo, int) else lo
        hi = i64(hi) if isinstance(hi, int) else hi
        first = b.ptrtoint(self.address(b, _at(index, dim, lo)), I64)
        # Elements before the first aligned address (buffers are element-aligned).
        head = b.udiv(b.and_(b.sub(i64(0), first), i64(LINE_BYTES - 1)), i64(self.esize))
        span = b.sub(hi, lo)
        head = b.select(b.icmp_signed("<", head, span), head, span)
        start = b.add(lo, head)
        chunks = b.sdiv(b.sub(hi, start), i64(self.chunk))
        stop = b.add(start, b.mul(chunks, i64(self.chunk)))
        with for_range(b, start, stop, f"{name}.chunk", step=self.chunk) as c:
            self._emit_chunk(b, c, index, dim, per_element, name)
        # The edges: [lo, start) then [stop, hi), as one loop so the body is emitted once.
        edges = b.add(head, b.sub(hi, stop))
        with for_range(b, 0, edges, f"{name}.edge", scalar=True) as k:
            in_head = b.icmp_signed("<", k, head)
            i = b.select(in_head, b.add(lo, k), b.add(stop, b.sub(k, head)))
            per_element(b, i)

    def _emit_chunk(self, b, c, index, dim, per_element, name) -> None:
        for source in self.prefetch:
            self._prefetch_next_row(b, source, _at(index, dim, c), dim)
        with for_range(b, 0, self.chunk, f"{name}.lane") as j:
            self._lane = j
            try:
                per_element(b, b.add(c, j, flags=("nsw",)))
            finally:
                self._lane = None
        staged = b.load(self.stage, typ=self.vector, align=LINE_BYTES)
        inst = b.store(staged, self.address(b, _at(index, dim, c)), align=LINE_BYTES)
        inst.set_metadata("nontemporal", nontemporal_node(b.module))
        if self._on_access is not None:
            self._on_access(inst)


    def _prefetch_next_row(self, b, source: Buffer, at: list, dim: int) -> None:
        """Asks for the chunk's lines of `source` one row ahead (see streamed_outputs).
        A prefetch never faults, so the row after a partition's last one is harmless."""
        ahead = b.gep(source.address(b, at), [i64(self.shape.dims[dim])],
                      source_etype=source.llvm_type)
        for line in range(0, CHUNK_BYTES * source_bytes(source) // self.esize, LINE_BYTES):
            b.call(_prefetch_intrinsic(b.module), [
                b.gep(ahead, [i64(line)], source_etype=ir.IntType(8)),
                ir.Constant(I32, 0), ir.Constant(I32, PREFETCH_LOCALITY), ir.Constant(I32, 1)])


def source_bytes(buffer: Buffer) -> int:
    return buffer.shape.nbytes // max(buffer.shape.numel, 1)


def _prefetch_intrinsic(module: ir.Module) -> ir.Function:
    """`llvm.prefetch(ptr, rw, locality, cache type)`."""
    name = "llvm.prefetch.p0"
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]), name)


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
    sources = [op for op in kernel.operands if op.shape.is_array and op.shape.dims == out.shape.dims
               and op.shape.minor_to_major() == out.shape.minor_to_major()] \
        if prefetch_next_row and shape.rank > 1 else []
    return [StreamedBuffer(out, kernel, sources)]
