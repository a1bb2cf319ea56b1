"""The frame of one kernel function, and typed views of the buffers it touches.

Every kernel has the ABI of DESIGN.md:

    void kernel(ptr buffers, i64 begin, i64 end)

`buffers` is the executable's buffer table (one pointer per slot, see
buffer_assignment.py); a kernel knows at compile time which slots it reads and
writes, so the slot numbers are constants in its IR. `[begin, end)` is the
launch's share of the outermost dimension of the kernel's loop nest.

`KernelIR` owns the function being emitted: an entry block for allocas and
the loads of slot pointers (so they dominate everything and mem2reg/LICM see
them), the body builder, the denormal flush mode set on entry and restored on
exit, and the scoped memo table element generators use to avoid re-emitting
the same value for the same index.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

import llvmlite.ir as ir

from .fp_env import emit_restore_fp_mode, emit_set_flush_denormals, emit_store_fence
from .loops import i64
from .types import (I32, I64, PTR, VOID, element_align, element_bytes, from_storage, storage_type,
                    to_storage)

def strides(shape) -> list[int]:
    """Element strides of each logical dimension under the shape's layout."""
    result = [0] * shape.rank
    step = 1
    for dim in shape.minor_to_major():
        result[dim] = step
        step *= shape.dims[dim]
    return result


def linearize(b: ir.IRBuilder, index: list, shape) -> ir.Value:
    """The physical element offset of a logical index under the shape's layout."""
    terms = []
    for i, stride, size in zip(index, strides(shape), shape.dims):
        if size == 1:        # the index of a degenerate dimension is always 0
            continue
        terms.append(i if stride == 1 else b.mul(i, i64(stride), flags=("nsw",)))
    if not terms:
        return i64(0)
    offset = terms[0]
    for term in terms[1:]:
        offset = b.add(offset, term, flags=("nsw",))
    return offset


def delinearize(b: ir.IRBuilder, offset: ir.Value, shape) -> list:
    """The logical index whose physical offset under the shape's layout is `offset`."""
    index: list = [i64(0)] * shape.rank
    rest = offset
    for dim in shape.minor_to_major():
        size = shape.dims[dim]
        if size == 1:
            continue
        index[dim] = b.urem(rest, i64(size))
        rest = b.udiv(rest, i64(size))
    return index


class Buffer:
    """A typed view of one slot inside a kernel: element loads/stores by logical index."""

    def __init__(self, pointer: ir.Value, shape, on_access: Callable | None = None):
        self.pointer = pointer
        self.shape = shape
        self.etype = shape.element_type
        self.llvm_type = storage_type(self.etype)
        self._on_access = on_access     # records loads/stores for alias metadata

    def address(self, b: ir.IRBuilder, index: list) -> ir.Value:
        return b.gep(self.pointer, [linearize(b, index, self.shape)], inbounds=True,
                     source_etype=self.llvm_type)

    def load(self, b: ir.IRBuilder, index: list) -> ir.Value:
        raw = b.load(self.address(b, index), typ=self.llvm_type, align=element_align(self.etype))
        if self._on_access is not None:
            self._on_access(raw)
        return from_storage(b, raw, self.etype)

    def store(self, b: ir.IRBuilder, index: list, value: ir.Value) -> None:
        inst = b.store(to_storage(b, value, self.etype), self.address(b, index),
                       align=element_align(self.etype))
        if self._on_access is not None:
            self._on_access(inst)

    def minor_dim(self) -> int | None:
        """The logical dimension that is unit-stride in memory (None for a scalar)."""
        return self.shape.minor_to_major()[0] if self.shape.rank else None

    def load_vector(self, b: ir.IRBuilder, index: list, lanes: int) -> ir.Value:
        """`lanes` consecutive elements from `index` along the minor dimension, as one
        vector in compute type (elemental/vector_gen.py; the caller keeps them inside the row)."""
        vector = ir.VectorType(self.llvm_type, lanes)
        raw = b.load(self.address(b, index), typ=vector, align=element_bytes(self.etype))
        if self._on_access is not None:
            self._on_access(raw)
        return from_storage(b, raw, self.etype)

    def store_vector(self, b: ir.IRBuilder, index: list, value: ir.Value) -> None:
        """Stores a vector to consecutive elements from `index` along the minor dimension."""
        inst = b.store(to_storage(b, value, self.etype), self.address(b, index),
                       align=element_bytes(self.etype))
        if self._on_access is not None:
            self._on_access(inst)


class KernelIR:
    """One kernel function under construction (see the module docstring)."""

    def __init__(self, module: ir.Module, name: str, constant_slot: Callable,
                 scratch_slot: Callable | None = None):
        fnty = ir.FunctionType(VOID, [PTR, I64, I64])
        self.function = ir.Function(module, fnty, name)
        self.name = name
        self.buffers, self.begin, self.end = self.function.args
        self.buffers.name, self.begin.name, self.end.name = "buffers", "begin", "end"
        self.entry = ir.IRBuilder(self.function.append_basic_block("entry"))
        self.b = ir.IRBuilder(self.function.append_basic_block("body"))
        self.constant_slot = constant_slot   # constant instruction -> slot holding it
        self.scratch_slot = scratch_slot     # Shape -> a temp slot private to this kernel
        self._slot_pointers: dict[int, ir.Value] = {}
        self._accesses: list[tuple[int, ir.Instruction]] = []
        self._memo: list[dict] = [{}]
        self.max_partitions: int | None = None   # set by emitters that know better
        self.streams = False    # set by emitters/streaming.py: non-temporal stores need an sfence
        self.operands: list = []    # the input Buffers (emit_kernel sets them)
        self._fp_saved = emit_set_flush_denormals(self.entry)

    # --- entry-block values -------------------------------------------------------
    def alloca(self, ty: ir.Type, name: str = "") -> ir.Value:
        return self.entry.alloca(ty, name=name)

    def slot_pointer(self, slot: int) -> ir.Value:
        if slot not in self._slot_pointers:
            e = self.entry
            cell = e.gep(self.buffers, [i64(slot)], inbounds=True, source_etype=PTR)
            self._slot_pointers[slot] = e.load(cell, name=f"slot{slot}", typ=PTR, align=8)
        return self._slot_pointers[slot]

    def buffer(self, slot: int, shape) -> Buffer:
        return Buffer(self.slot_pointer(slot), shape,
                      lambda inst: self._accesses.append((slot, inst)))

    # --- memo of generated values --------------------------------------------------
    def memo_get(self, key):
        for scope in reversed(self._memo):
            if key in scope:
                return scope[key]
        return None

    def memo_put(self, key, value) -> None:
        self._memo[-1][key] = value

    @contextmanager
    def scope(self):
        """Values generated inside (a loop body) must not be reused after it."""
        self._memo.append({})
        try:
            yield
        finally:
            self._memo.pop()

    # --- done --------------------------------------------------------------------------
    def finish(self) -> None:
        if self.streams:
            # Non-temporal stores are weakly ordered: drain them before the thread
            # pool hands this partition's results to anyone else.
            emit_store_fence(self.b)
        emit_restore_fp_mode(self.b, self._fp_saved)
        self.b.ret_void()
        self.entry.branch(self.b.function.blocks[1])
        self._annotate_aliasing()

    def _annotate_aliasing(self) -> None:
        """Tells LLVM that different slots never overlap (alias.scope / noalias).

        True by construction: a kernel's outputs are fresh or arena space disjoint from
        everything live while it runs, and inputs are only read. Without it the loop
        vectorizer guards every loop with run-time overlap checks and a scalar copy.
        """
        slots = sorted({slot for slot, _ in self._accesses})
        if len(slots) < 2:
            return
        module = self.function.module
        domain = module.add_metadata([ir.MetaDataString(module, f"{self.name}.buffers")])
        scope = {s: module.add_metadata([ir.MetaDataString(module, f"{self.name}.slot{s}"),
                                         domain]) for s in slots}
        own = {s: module.add_metadata([scope[s]]) for s in slots}
        others = {s: module.add_metadata([scope[t] for t in slots if t != s]) for s in slots}
        for slot, inst in self._accesses:
            inst.set_metadata("alias.scope", own[slot])
            inst.set_metadata("noalias", others[slot])
