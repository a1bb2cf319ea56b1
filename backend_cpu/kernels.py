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
  first copy (or initialize) the output and then update it (scatter_kernels.py
  splits both over the threads where that is race-free).

`emit_kernel` returns the partition extent (how many units `[begin, end)` may
split), 1 meaning "call once with [0, 1)".
"""
from __future__ import annotations

import llvmlite.ir as ir

from . import elemental, row_normalize, streaming, vector_gen
from .column_reduce import (emit_column_reduce, is_column_reduce, try_emit_column_reduces,
                            try_emit_reduce_epilogue)
from .conv_emitter import try_emit_conv_gemm
from .dot_emitter import View, resolve_view, try_emit_gemm
from .hoisting import make_hoister, plan_hoisting
from .kernel_ir import Buffer, KernelIR, strides
from .loops import emit_loop_nest, for_range, i64, partition_extent
from .scatter_kernels import emit_scatter, emit_select_and_scatter
from .sorting import emit_sort
from .transpose import try_emit_block_transpose


def emit_kernel(kernel: KernelIR, instr, operands: list[Buffer], outputs: list[Buffer]) -> int:
    """Emits the body of `kernel` computing `instr` from `operands` into `outputs`;
    returns the partition extent."""
    kernel.operands = operands
    operand_gens = [elemental.buffer_reader(buffer) for buffer in operands]
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
    if _materialized(comp):
        return _emit_with_inner_in_place(kernel, comp, operand_gens, outputs)
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
    # Hoisted row reduces on vectors where the loop nest will be (_vector_body).
    on_vectors = len(outputs) == 1 and streaming.wants_streaming(root.shape, outputs)
    hoist = make_hoister(plan, gens, kernel if on_vectors else None) if plan else None
    if root.opcode == "tuple":
        return _emit_tuple_root(kernel, root, gens, outputs, hoist)
    return _emit_root(kernel, root, [gens[o] for o in root.operands], outputs, gens.get(root),
                      hoist, gens)


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


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _emit_root(kernel, root, operand_gens, outputs, root_gen=None, hoist=None,
               gens=None) -> int:
    """`gens`: every instruction's generator (a fusion's); None for an unfused `root`."""
    special = _IN_PLACE.get(root.opcode)
    if special is not None:
        return special(kernel, root, operand_gens, outputs, partitioned=True)
    if root.opcode == "reduce" and is_column_reduce(root):
        return emit_column_reduce(kernel, root, operand_gens, outputs)
    gen = root_gen or elemental.make_generator(kernel, root, operand_gens)
    if gens is None:
        gens = {**dict(zip(root.operands, operand_gens)), root: gen}
    return _store_together(kernel, lambda b, index: _as_list(gen(b, index)), outputs,
                           tile_dim=_transposed_dim(root), hoist=hoist,
                           roots=[root], gens=gens)


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
            outputs, hoist=hoist, roots=list(root.operands), gens=gens)
    for e, outs in per_element:          # serial: one whole nest (or in-place op) each
        if e.opcode in _IN_PLACE:
            _IN_PLACE[e.opcode](kernel, e, [gens[o] for o in e.operands], outs)
            continue
        for k, out in enumerate(outs):
            _fill(kernel, out, lambda b, index, g=gens[e], k=k: _as_list(g(b, index))[k])
    return 1


def _store_together(kernel, gen, outputs, tile_dim=None, hoist=None, roots=(),
                    gens=None) -> int:
    """One loop nest over the (common) output shape storing every value of `gen`
    (a large output with non-temporal stores: streaming.py). When `roots` (the
    instructions whose values `gen` gives, one output each) have vector generators,
    the minor loop works on vectors (vector_gen.py)."""
    shape = outputs[0].shape
    if tile_dim is None:
        outputs = streaming.streamed_outputs(kernel, shape, outputs,
                                             prefetch_next_row=hoist is not None)
    minor_loop = getattr(outputs[0], "emit_minor_loop", None)

    def body(b, index):
        with kernel.scope():
            for out, value in zip(outputs, gen(b, index)):
                out.store(b, index, value)
    vector_body = None if tile_dim is not None else _vector_body(kernel, roots, gens, outputs)
    emit_loop_nest(kernel.b, shape, kernel.begin, kernel.end, body, tile_dim=tile_dim,
                   hoist=hoist, level_scope=kernel.scope, minor_loop=minor_loop,
                   vector_body=vector_body)
    return streaming.partition_extent(outputs) or partition_extent(shape)


def _vector_body(kernel, roots, gens, outputs):
    """(lanes, body) storing every root's vector at an index, or None when some root
    has no vector generator along the outputs' minor dimension.

    Only kernels that stream their output take it (vector_gen.py says why)."""
    if not isinstance(outputs[0], streaming.StreamedBuffer):
        return None
    if not roots or gens is None or len(roots) != len(outputs) or outputs[0].shape.rank == 0:
        return None
    dim = outputs[0].minor_dim()
    if any(out.minor_dim() != dim or out.etype not in vector_gen.LANE_TYPES for out in outputs):
        return None
    lanes = outputs[0].lanes            # one cache line: a streamed chunk's unit
    vgens = [vector_gen.vector_generator(kernel, gens, r, dim, lanes) for r in roots]
    if None in vgens:
        return None

    def body(b, index):
        with kernel.scope():
            for out, vgen in zip(outputs, vgens):
                out.store_vector(b, index, vgen(b, index))
    return lanes, body


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

def _read_inside(comp) -> list:
    """The instructions of `comp` in _MATERIALIZED whose value something in it reads
    (not only the root, or a root tuple, as an output)."""
    root = comp.root
    roots = list(root.operands) if root.opcode == "tuple" else [root]
    return [i for i in comp.instructions if i.opcode in _MATERIALIZED
            and (all(i is not r for r in roots) or any(u is not root for u in i.users))]


def _materialized(comp) -> bool:
    return bool(_read_inside(comp))


def _emit_with_inner_in_place(kernel, comp, operand_gens, outputs) -> int:
    """A fusion that reads the result of a scatter, sort, select-and-scatter, dot or
    convolution inside (xlapy's passes never make one; XLA's YNNPACK fusions chain
    convolutions): each such op is computed once, first, into a scratch buffer of
    this kernel, which the rest then reads. The scratch buffer is shared by the whole
    launch, so the kernel runs as one partition (returns 1)."""
    if kernel.scratch_slot is None:
        raise NotImplementedError("backend_cpu: a scatter, sort, select-and-scatter, dot or "
                                  "convolution read inside a fusion needs scratch memory")
    root = comp.root
    roots = list(root.operands) if root.opcode == "tuple" else [root]
    # What something in the fusion reads goes to scratch memory; an in-place op that
    # is only an output is written straight into its output.
    to_scratch = {id(i) for i in _read_inside(comp)}
    gens: dict = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            gens[instr] = operand_gens[instr.parameter_number]
        elif id(instr) in to_scratch:
            leaves = instr.shape.leaves()
            scratch = [kernel.buffer(kernel.scratch_slot(s), s) for s in leaves]
            srcs = [gens[o] for o in instr.operands]
            if instr.opcode in _IN_PLACE:
                _IN_PLACE[instr.opcode](kernel, instr, srcs, scratch)
            else:
                _fill(kernel, scratch[0], elemental.make_generator(kernel, instr, srcs))
            readers = [elemental.buffer_reader(buf) for buf in scratch]
            gens[instr] = readers[0] if instr.shape.is_array else \
                (lambda b, index, rs=readers: [r(b, index) for r in rs])
        elif instr.opcode not in _IN_PLACE and not (instr is root and root.opcode == "tuple"):
            gens[instr] = elemental.make_generator(kernel, instr, [gens[o] for o in instr.operands])
    rest = list(outputs)
    for e in roots:                      # serial: one whole nest (or in-place op) each
        count = len(e.shape.leaves())
        outs, rest = rest[:count], rest[count:]
        if e.opcode in _IN_PLACE and id(e) not in to_scratch:
            _IN_PLACE[e.opcode](kernel, e, [gens[o] for o in e.operands], outs)
            continue
        for k, out in enumerate(outs):
            _fill(kernel, out, lambda b, index, g=gens[e], k=k: _as_list(g(b, index))[k])
    return 1


def _sort(kernel, instr, gens, outputs, partitioned=False) -> int:
    emit_sort(kernel, instr, gens, outputs, _for_each_index)
    return 1


_IN_PLACE = {"scatter": emit_scatter, "sort": _sort, "select-and-scatter": emit_select_and_scatter}

# Ops whose result a fusion must not recompute per element that reads it: the in-place
# ops have no element generator at all, and a contraction's generator is a whole dot
# product (a convolution read by a convolution is quadratic).
_MATERIALIZED = frozenset(_IN_PLACE) | {"dot", "convolution"}

KERNEL_OPCODES = elemental.GENERATOR_OPCODES | set(_IN_PLACE)
