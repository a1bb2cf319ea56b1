"""Kernel emitters: one LLVM function computing one entry instruction (often a fusion).

`emit_kernel` is the single entry point. A fusion's computation is turned
into generators (elemental.py) whose parameters read the fusion's operand
buffers; an unfused instruction is treated as a one-instruction fusion. The
root then decides the shape of the kernel:

- a generator-capable root (elementwise, movement, reduce, dot, ...) is
  materialized by one loop nest over its output, partitioned on the
  outermost dimension;
- a tuple root (multi-output fusion) stores every element from the same loop
  nest when they share a shape, else runs one nest per element;
- scatter, sort and select-and-scatter write their outputs in place, so they
  first copy (or initialize) the output and then update it in a serial loop.

`emit_kernel` returns the partition extent (how many units `[begin, end)` may
split), 1 meaning "call once with [0, 1)".
"""
from __future__ import annotations

import llvmlite.ir as ir

from . import elemental, row_normalize, streaming
from .column_reduce import (emit_column_reduce, is_column_reduce, try_emit_column_reduces,
                            try_emit_reduce_epilogue)
from .conv_emitter import try_emit_conv_gemm
from .dot_emitter import View, resolve_view, try_emit_gemm
from .hoisting import make_hoister, plan_hoisting
from .kernel_ir import Buffer, KernelIR, strides
from .llvm_types import I1, I64, compute_type
from .loops import emit_loop_nest, for_range, i64, partition_extent
from .reduction import window_source
from .sorting import emit_sort
from .transpose import try_emit_block_transpose


def emit_kernel(kernel: KernelIR, instr, operands: list[Buffer], outputs: list[Buffer]) -> int:
    """Emits the body of `kernel` computing `instr` from `operands` into `outputs`;
    returns the partition extent."""
    kernel.operands = operands
    operand_gens = [buffer_reader(buffer) for buffer in operands]
    views = {i: View(buf.pointer, buf.shape.dims, tuple(strides(buf.shape)), buf.etype)
             for i, buf in enumerate(operands)}
    if instr.opcode == "fusion":
        return _emit_fusion(kernel, instr.fused_computation, operand_gens, views, outputs)
    extent = _try_gemm(kernel, instr, lambda i: operand_gens[i], views.get, outputs)
    if extent is not None:
        return extent
    return _emit_root(kernel, instr, operand_gens, outputs)


def _emit_fusion(kernel, comp, operand_gens, views, outputs) -> int:
    root = comp.root
    # In-place ops get no generator: they are emitted from their operands' generators.
    in_place = [root] if root.opcode in _IN_PLACE else []
    if root.opcode == "tuple":
        in_place = [root] + [e for e in root.operands if e.opcode in _IN_PLACE]
    # Building generators emits no IR yet: only the ones the kernel calls cost code.
    gens = elemental.build_generators(kernel, comp, operand_gens, skip=set(in_place))
    extent = _try_gemm(kernel, root, lambda i: gens[root.operands[i]],
                       lambda i: resolve_view(root.operands[i], views), outputs)
    if extent is not None:
        return extent
    extent = try_emit_reduce_epilogue(kernel, comp, operand_gens, outputs)
    if extent is not None:       # a column reduce under pointwise ops (a mean)
        return extent
    plan = plan_hoisting(root)
    reduce = row_normalize.match(root, plan) if len(outputs) == 1 else None
    if reduce is not None:           # a softmax-like row: exp once, scale in place
        return row_normalize.emit(kernel, root, reduce, gens, plan, outputs[0])
    hoist = make_hoister(plan, gens) if plan else None
    if root.opcode == "tuple":
        return _emit_tuple_root(kernel, root, gens, outputs, hoist)
    return _emit_root(kernel, root, [gens[o] for o in root.operands], outputs, gens.get(root),
                      hoist)


def _try_gemm(kernel, root, operand_gen, operand_view, outputs) -> int | None:
    """The memory-view paths: dot and convolution on the packed GEMM, transposes by
    register blocks; None when they decline (then the generic generators run)."""
    if root.opcode == "dot":
        return try_emit_gemm(kernel, root, operand_view(0), operand_view(1), outputs[0])
    if root.opcode == "convolution":
        return try_emit_conv_gemm(kernel, root, operand_gen(0), operand_view(1), outputs[0])
    if root.opcode == "transpose":
        view = operand_view(0)
        if view is not None:
            perm = root.dims()
            view = View(view.pointer, tuple(view.dims[p] for p in perm),
                        tuple(view.strides[p] for p in perm), view.etype)
        return try_emit_block_transpose(kernel, root, view, outputs[0])
    return None


def buffer_reader(buffer: Buffer):
    """The generator of an array that is already in memory."""
    return lambda b, index: buffer.load(b, index)


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _emit_root(kernel, root, operand_gens, outputs, root_gen=None, hoist=None) -> int:
    special = _IN_PLACE.get(root.opcode)
    if special is not None:
        special(kernel, root, operand_gens, outputs)
        return 1
    if root.opcode == "reduce" and is_column_reduce(root):
        return emit_column_reduce(kernel, root, operand_gens, outputs)
    gen = root_gen or elemental.make_generator(kernel, root, operand_gens)
    return _store_together(kernel, lambda b, index: _as_list(gen(b, index)), outputs,
                           tile_dim=_transposed_dim(root), hoist=hoist)


def _emit_tuple_root(kernel, root, gens, outputs, hoist=None) -> int:
    """A multi-output fusion: one nest when every output has one shape, else one each."""
    extent = try_emit_column_reduces(kernel, root, gens, outputs)
    if extent is not None:       # sibling column reduces: one streaming walk
        return extent
    per_element, rest = [], list(outputs)
    for e in root.operands:
        count = len(e.shape.leaves())
        per_element.append((e, rest[:count]))
        rest = rest[count:]
    shapes = {(o.shape.dims, o.shape.minor_to_major()) for o in outputs}
    if len(shapes) == 1 and not any(e.opcode in _IN_PLACE for e in root.operands):
        return _store_together(
            kernel, lambda b, index: [v for e in root.operands for v in _as_list(gens[e](b, index))],
            outputs, hoist=hoist)
    for e, outs in per_element:          # serial: one whole nest (or in-place op) each
        if e.opcode in _IN_PLACE:
            _IN_PLACE[e.opcode](kernel, e, [gens[o] for o in e.operands], outs)
            continue
        for k, out in enumerate(outs):
            _fill(kernel, out, lambda b, index, g=gens[e], k=k: _as_list(g(b, index))[k])
    return 1


def _store_together(kernel, gen, outputs, tile_dim=None, hoist=None) -> int:
    """One loop nest over the (common) output shape storing every value of `gen`
    (a large output with non-temporal stores: streaming.py)."""
    shape = outputs[0].shape
    if tile_dim is None:
        outputs = streaming.streamed_outputs(kernel, shape, outputs,
                                             prefetch_next_row=hoist is not None)
    minor_loop = getattr(outputs[0], "emit_minor_loop", None)

    def body(b, index):
        with kernel.scope():
            for out, value in zip(outputs, gen(b, index)):
                out.store(b, index, value)
    emit_loop_nest(kernel.b, shape, kernel.begin, kernel.end, body, tile_dim=tile_dim,
                   hoist=hoist, level_scope=kernel.scope, minor_loop=minor_loop)
    return streaming.partition_extent(outputs) or partition_extent(shape)


def _transposed_dim(root) -> int | None:
    """For a root that moves data across the minor dimension (a transpose, or a copy
    changing the layout), the output dimension its input's minor dimension becomes:
    the loop nest tiles it against the output's own minor dimension."""
    if root.opcode not in ("transpose", "copy") or root.shape.rank < 2:
        return None
    operand = root.operands[0].shape
    source_minor = operand.minor_to_major()[0]
    if root.opcode == "transpose":
        out_dim = root.dims().index(source_minor)
    else:
        out_dim = source_minor
    return None if out_dim == root.shape.minor_to_major()[0] else out_dim


def _fill(kernel, out: Buffer, gen) -> None:
    """out[i] = gen(i) for every i, ignoring [begin, end) (serial kernels only)."""
    def body(b, index):
        with kernel.scope():
            out.store(b, index, gen(b, index))
    emit_loop_nest(kernel.b, out.shape, i64(0), i64(partition_extent(out.shape)), body)


def _for_each_index(kernel, shape, body, skip_dim=None) -> None:
    """Serial loops over every index of `shape` (dimension `skip_dim` left None)."""
    b = kernel.b
    index: list = [None] * shape.rank
    dims = [d for d in range(shape.rank) if d != skip_dim]

    def nest(level):
        if level == len(dims):
            with kernel.scope():
                body(b, list(index))
            return
        with for_range(b, 0, shape.dims[dims[level]], f"s{dims[level]}") as i:
            index[dims[level]] = i
            nest(level + 1)
    nest(0)


# --- in-place kernels ---------------------------------------------------------------------

def _scatter(kernel, instr, gens, outputs) -> None:
    from .elemental import apply_computation, index_to_i64, in_range
    n = len(outputs)
    inputs, indices, updates = gens[:n], gens[n], gens[n + 1:]
    a = instr.attrs
    operand_shape = instr.operands[0].shape
    indices_shape = instr.operands[n].shape
    update_shape = instr.operands[n + 1].shape
    window_dims_u = tuple(a.get("update_window_dims", ()))
    inserted = set(a.get("inserted_window_dims", ()))
    to_operand = tuple(a.get("scatter_dims_to_operand_dims", ()))
    input_batching = tuple(a.get("input_batching_dims", ()))
    indices_batching = tuple(a.get("scatter_indices_batching_dims", ()))
    ivd = a.get("index_vector_dim", indices_shape.rank)
    scatter_dims_u = [d for d in range(update_shape.rank) if d not in window_dims_u]
    indices_dims = [d for d in range(indices_shape.rank) if d != ivd]
    window_operand = [d for d in range(operand_shape.rank)
                      if d not in inserted and d not in input_batching]
    window_size = [1] * operand_shape.rank
    for ud, od in zip(window_dims_u, window_operand):
        window_size[od] = update_shape.dims[ud]
    for gen, out in zip(inputs, outputs):
        _fill(kernel, out, gen)

    def body(b, u):
        by_indices_dim = dict(zip(indices_dims, [u[d] for d in scatter_dims_u]))
        start = [i64(0)] * operand_shape.rank
        for k, od in enumerate(to_operand):
            at = [by_indices_dim.get(d) for d in range(indices_shape.rank)]
            if ivd < indices_shape.rank:
                at[ivd] = i64(k)
            start[od] = index_to_i64(b, indices(b, at), indices_shape.element_type)
        for od, idim in zip(input_batching, indices_batching):
            start[od] = by_indices_dim[idim]
        valid = ir.Constant(I1, 1)
        for od in range(operand_shape.rank):
            valid = b.and_(valid, in_range(b, start[od], 0,
                                           operand_shape.dims[od] - window_size[od] + 1))
        target = list(start)
        for ud, od in zip(window_dims_u, window_operand):
            target[od] = b.add(start[od], u[ud])
        with b.if_then(valid):
            with kernel.scope():
                old = [out.load(b, target) for out in outputs]
                new = apply_computation(kernel, instr.to_apply, old + [g(b, u) for g in updates])
                for out, value in zip(outputs, new):
                    out.store(b, target, value)
    _for_each_index(kernel, update_shape, body)


def _sort(kernel, instr, gens, outputs) -> None:
    emit_sort(kernel, instr, gens, outputs, _for_each_index)


def _select_and_scatter(kernel, instr, gens, outputs) -> None:
    from .elemental import apply_computation
    operand, source, init = gens
    out = outputs[0]
    operand_shape = instr.operands[0].shape
    window = instr.attrs["window"].dims
    etype = operand_shape.element_type
    _fill(kernel, out, lambda b, index: init(b, []))
    have = kernel.alloca(I1, "sas.have")
    best = kernel.alloca(compute_type(etype), "sas.best")
    where = [kernel.alloca(I64, f"sas.at{d}") for d in range(operand_shape.rank)]

    def per_source(b, s):
        b.store(ir.Constant(I1, 0), have)
        b.store(init(b, []), best)
        for cell in where:
            b.store(i64(0), cell)

        def per_tap(b, k):
            valid, pos = window_source(b, s, dict(enumerate(k)), window, operand_shape.dims)
            value = operand(b, pos)
            current = b.load(best)
            keep = apply_computation(kernel, instr.attrs["select"], [current, value])[0]
            take = b.or_(b.not_(b.load(have)), b.not_(keep))
            if valid is not None:
                take = b.and_(valid, take)
            b.store(b.select(take, value, current), best)
            b.store(b.or_(b.load(have), take), have)
            for cell, p in zip(where, pos):
                b.store(b.select(take, p, b.load(cell)), cell)
        _for_each_index(kernel, _window_shape(window), per_tap)
        with b.if_then(b.load(have)):
            with kernel.scope():
                target = [b.load(cell) for cell in where]
                new = apply_computation(kernel, instr.attrs["scatter"],
                                        [out.load(b, target), source(b, s)])[0]
                out.store(b, target, new)
    _for_each_index(kernel, instr.operands[1].shape, per_source)


def _window_shape(window):
    from hlo.shape import Shape
    return Shape("s64", tuple(w.size for w in window))


_IN_PLACE = {"scatter": _scatter, "sort": _sort, "select-and-scatter": _select_and_scatter}

KERNEL_OPCODES = elemental.GENERATOR_OPCODES | set(_IN_PLACE)
