"""Element generators: the composable heart of loop fusion (STYLE.md §4).

A generator maps a logical output index (a list of LLVM i64 values) to the
value of that element (or a list of values for a multi-output instruction).
Elementwise ops apply a scalar recipe (scalar_ops.py) to their operands'
values at the same index; movement ops only remap the index before asking
their operand; reductions, windows and contractions (reduction.py,
contraction.py) loop inside the generator. A fused computation is emitted by
composing the generators of its instructions in post order: no intermediate
array is ever materialized.

Out-of-range reads never happen: every computed index (dynamic-slice and
gather starts, pad and concatenate sources, window positions) is clamped into
the operand before it is read, and the value selected away when it was invalid.
"""
from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from ...hlo.shape import Shape

from ..llvm.kernel_ir import KernelIR, delinearize, linearize
from ..llvm.loops import clamp_index, i64, in_range, index_to_i64
from ..llvm.types import bits, compute_type, constant as llvm_constant, is_float, is_pred

from . import complex_ops
from .scalar_ops import emit_bitcast_convert, emit_elementwise

Generator = Callable[[ir.IRBuilder, list], object]

# The generators of the ops that loop inside one element, by opcode: reduce and
# reduce-window (reduction.py), dot and convolution (contraction.py). Those modules
# build on this one (a reducer is emitted with apply_computation), so they register
# their factories here when imported; the package's __init__ imports them, so the
# table is complete whenever any module of elemental/ is.
_LOOPING: dict[str, Callable] = {}


def register_looping(opcodes, factory: Callable) -> None:
    """`factory(kernel, instr, srcs) -> Generator` makes the generators of `opcodes`."""
    for opcode in opcodes:
        _LOOPING[opcode] = factory


# --- index helpers ------------------------------------------------------------------

def memo_key(instr, index) -> tuple:
    parts = []
    for v in index:
        parts.append(("c", v.constant) if isinstance(v, ir.Constant) else id(v))
    return (id(instr), tuple(parts))


def nondegenerate_dims(shape: Shape, physical: bool) -> list[int]:
    """Dimensions of size > 1, major to minor: in memory order (physical) or logical."""
    order = list(reversed(shape.minor_to_major())) if physical else list(range(shape.rank))
    return [d for d in order if shape.dims[d] != 1]


def remap_reshape(b, index, out_shape: Shape, in_shape: Shape, physical: bool) -> list:
    """Operand index of a reshape (logical, row-major) or bitcast (physical) at `index`."""
    out_dims = nondegenerate_dims(out_shape, physical)
    in_dims = nondegenerate_dims(in_shape, physical)
    if [out_shape.dims[d] for d in out_dims] == [in_shape.dims[d] for d in in_dims]:
        # Only size-1 dimensions come or go: a pure renaming of indices.
        result = [i64(0)] * in_shape.rank
        for o, i in zip(out_dims, in_dims):
            result[i] = index[o]
        return result
    # Otherwise by groups: runs of dimensions, major to minor, whose sizes multiply to
    # the same count on both sides ([8,256,3,8,64] and [2048,1536]: (8,256)-(2048) and
    # (3,8,64)-(1536)). A group of one dimension on each side maps directly, a group
    # with one operand dimension is a sum of products: only an operand group of several
    # dimensions divides. The minor index then stays affine in the loop's counter
    # wherever the groups allow (the head split of attention, whose loops LLVM could
    # not vectorize through a division by 1536), and the divisions that remain work on
    # a group's small offset. Same element for every index as one linearization.
    result = [i64(0)] * in_shape.rank
    out_sizes = [out_shape.dims[d] for d in out_dims]
    in_sizes = [in_shape.dims[d] for d in in_dims]
    o = i = 0
    while o < len(out_dims):
        o_end, i_end = o + 1, i + 1
        out_count, in_count = out_sizes[o], in_sizes[i]
        while out_count != in_count:
            if out_count < in_count:
                out_count *= out_sizes[o_end]
                o_end += 1
            else:
                in_count *= in_sizes[i_end]
                i_end += 1
        offset = index[out_dims[o]]
        for d in out_dims[o + 1:o_end]:
            offset = b.add(b.mul(offset, i64(out_shape.dims[d]), flags=("nsw",)), index[d],
                           flags=("nsw",))
        group = in_dims[i:i_end]
        for d in reversed(group[1:]):
            result[d] = b.urem(offset, i64(in_shape.dims[d]))
            offset = b.udiv(offset, i64(in_shape.dims[d]))
        result[group[0]] = offset
        o, i = o_end, i_end
    return result


# --- building generators over a computation -------------------------------------------

def buffer_reader(buffer) -> Generator:
    """The generator of an array that is already in memory. It carries the buffer
    (`.buffer`), so a vector generator (vector_gen.py) can load whole vectors."""
    def read(b, index):
        return buffer.load(b, index)
    read.buffer = buffer
    return read


def build_generators(kernel: KernelIR, comp, param_gens: list[Generator], skip=()) -> dict:
    """Generators of every instruction of `comp` (but `skip`), parameters bound to `param_gens`."""
    gens: dict = {}
    for instr in comp.post_order():
        if skip and instr in skip:
            continue
        if instr.opcode == "parameter":
            gens[instr] = param_gens[instr.parameter_number]
        else:
            gens[instr] = make_generator(kernel, instr, [gens[o] for o in instr.operands])
    return gens


def apply_computation(kernel: KernelIR, comp, values: list) -> list:
    """Emits a scalar computation (a reducer, a comparator) on LLVM values; its results."""
    gens = build_generators(kernel, comp, [(lambda b, idx, v=v: v) for v in values])
    result = gens[comp.root](kernel.b, [])
    return list(result) if isinstance(result, list) else [result]


def make_generator(kernel: KernelIR, instr, srcs: list[Generator]) -> Generator:
    """The (memoized) generator of one instruction from its operands' generators."""
    raw = _rotation(instr, srcs) or _raw_generator(kernel, instr, srcs)

    def generate(b, index):
        key = memo_key(instr, index)
        value = kernel.memo_get(key)
        if value is None:
            value = raw(b, index)
            kernel.memo_put(key, value)
        return value
    generate.buffer = getattr(raw, "buffer", None)     # see buffer_reader
    generate.operand_gens = srcs                        # see _rotation
    return generate


def _rotation(instr, srcs) -> Generator | None:
    """A rotate for `or(shift-left(x, a), shift-right-logical(x, w - a))` (either order;
    w the bit width, a and w - a broadcast scalars as JAX's threefry writes them), else
    None. The shifts' XLA semantics (an amount >= w gives 0) make it rotl(x, a) for
    a <= w (a = 0 and a = w: x) and 0 beyond: one funnel shift and one select on an
    amount that is the same for every element, instead of two shifts with a select each
    (LLVM unswitched the kernel's loop on each of those eight selects of threefry's
    four rotations: 256 copies of the loop)."""
    t = instr.shape.element_type
    if instr.opcode != "or" or t not in ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64") \
            or len(srcs) != 2:
        return None
    for i in (0, 1):
        left, right = instr.operands[i], instr.operands[1 - i]
        if left.opcode != "shift-left" or right.opcode != "shift-right-logical" \
                or left.operands[0] is not right.operands[0] \
                or any(o.shape.dims != instr.shape.dims for o in (*left.operands, *right.operands)):
            continue
        inner = getattr(srcs[i], "operand_gens", None)
        amount, rest = _scalar_source(left.operands[1]), _scalar_source(right.operands[1])
        if inner is None or amount is None or rest is None or rest.opcode != "subtract":
            continue
        width = _scalar_source(rest.operands[0])
        if _scalar_source(rest.operands[1]) is not amount or width is None \
                or width.opcode != "constant" or width.literal is None \
                or int(width.literal.reshape(-1)[0]) != bits(t):
            continue
        x_gen, a_gen = inner

        def gen(b, index):
            x, a = x_gen(b, index), a_gen(b, index)
            rotated = b.call(_funnel_left(b.module, x.type), [x, x, a])
            return b.select(b.icmp_unsigned("<=", a, ir.Constant(a.type, bits(t))), rotated,
                            ir.Constant(x.type, 0))
        return gen
    return None


def _scalar_source(instr):
    """The scalar instruction a value of one element repeated everywhere comes from
    (through broadcasts of one element and reshapes of one element), or None."""
    while instr.opcode in ("broadcast", "reshape", "bitcast") \
            and instr.operands[0].shape.numel == 1:
        instr = instr.operands[0]
    return instr if instr.shape.numel == 1 else None


def _funnel_left(module: ir.Module, ty: ir.Type) -> ir.Function:
    name = f"llvm.fshl.i{ty.width}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ty, [ty, ty, ty]), name)


def _raw_generator(kernel: KernelIR, instr, srcs) -> Generator:
    op = instr.opcode
    if instr.info.is_elementwise:
        return _elementwise(instr, srcs)
    emitter = _MOVEMENT.get(op)
    if emitter is not None:
        return emitter(kernel, instr, srcs)
    looping = _LOOPING.get(op)
    if looping is not None:
        return looping(kernel, instr, srcs)
    raise NotImplementedError(f"backend_cpu: no emitter for {op}")


def _elementwise(instr, srcs) -> Generator:
    types = [o.shape.element_type for o in instr.operands]
    # Old-style HLO lets a scalar operand stand for a broadcast one (clamp bounds).
    scalar = [o.shape.rank == 0 and instr.shape.rank > 0 for o in instr.operands]
    emit = complex_ops.emit_elementwise if complex_ops.handles(instr) else emit_elementwise

    def gen(b, index):
        args = [s(b, [] if sc else index) for s, sc in zip(srcs, scalar)]
        return emit(b, instr, args, types)
    return gen


# --- movement and leaves ------------------------------------------------------------------

def _constant(kernel, instr, srcs):
    literal = instr.literal
    if literal is None:
        raise NotImplementedError(f"backend_cpu: constant {instr.name} has an elided literal")
    etype = instr.shape.element_type
    if literal.size == 1 and instr.shape.rank == 0:
        value = llvm_constant(etype, literal.reshape(()))    # 0-d: narrow types keep their bits
        return lambda b, index: value
    return buffer_reader(kernel.buffer(kernel.constant_slot(instr), Shape(etype, instr.shape.dims)))


def _broadcast(kernel, instr, srcs):
    dims = instr.dims()
    return lambda b, index: srcs[0](b, [index[d] for d in dims])


def _reshape(kernel, instr, srcs):
    out_shape, in_shape = instr.shape, instr.operands[0].shape
    physical = instr.opcode == "bitcast"
    src_t, dst_t = in_shape.element_type, out_shape.element_type

    def gen(b, index):
        value = srcs[0](b, remap_reshape(b, index, out_shape, in_shape, physical))
        # A bitcast may also reinterpret the element type (same width).
        return value if src_t == dst_t else emit_bitcast_convert(b, value, src_t, dst_t)
    return gen


def _bitcast_convert(kernel, instr, srcs):
    """A bitcast-convert between element types of different widths (one of equal widths
    is elementwise). The bits stay where they are, little-endian, lowest bits first:

        narrowing  u64[n] -> u32[n,2]:  out[i,k] = bits(x[i]) >> (32 k), truncated
        widening   u8[n,4] -> f32[n]:   out[i]   = OR_k zext(x[i,k]) << (8 k)

    s2/s4/u2/u4 are w bits held in the low bits of an i8 (llvm/types.py): they are
    computed on in their i8 container and masked to their w bits, so s8[n] -> s4[n,2]
    gives each byte's low nibble, then its high one (as XLA and the evaluator do).
    """
    src_t, dst_t = instr.operands[0].shape.element_type, instr.shape.element_type
    src_bits, dst_bits = bits(src_t), bits(dst_t)
    if is_pred(src_t) or is_pred(dst_t):
        raise NotImplementedError("backend_cpu: bitcast-convert of pred")
    # The integer types the bits are computed in: the element's own width, or the
    # i8 that holds a sub-byte element.
    src_int, dst_int = ir.IntType(max(8, src_bits)), ir.IntType(max(8, dst_bits))

    def as_int(b, value, int_type, width):
        value = value if value.type == int_type else b.bitcast(value, int_type)
        if width < int_type.width:           # a sub-byte element: only its low bits
            value = b.and_(value, ir.Constant(int_type, (1 << width) - 1))
        return value

    def resize(b, value, int_type):
        if value.type.width > int_type.width:
            return b.trunc(value, int_type)
        return value if value.type.width == int_type.width else b.zext(value, int_type)

    def from_int(b, value):
        target = compute_type(dst_t)
        if dst_bits < dst_int.width:
            value = b.and_(value, ir.Constant(dst_int, (1 << dst_bits) - 1))
        return value if value.type == target else b.bitcast(value, target)

    if src_bits == dst_bits:
        return lambda b, index: emit_bitcast_convert(b, srcs[0](b, index), src_t, dst_t)
    if src_bits > dst_bits:
        def narrow(b, index):
            whole = as_int(b, srcs[0](b, index[:-1]), src_int, src_bits)
            k = index[-1]
            if src_int.width < 64:
                k = b.trunc(k, src_int)
            shift = b.mul(k, ir.Constant(src_int, dst_bits))
            return from_int(b, resize(b, b.lshr(whole, shift), dst_int))
        return narrow
    pieces = dst_bits // src_bits

    def widen(b, index):
        result = None
        for k in range(pieces):
            piece = resize(b, as_int(b, srcs[0](b, list(index) + [i64(k)]), src_int, src_bits),
                           dst_int)
            if k:
                piece = b.shl(piece, ir.Constant(dst_int, k * src_bits))
            result = piece if result is None else b.or_(result, piece)
        return from_int(b, result)
    return widen


def _transpose(kernel, instr, srcs):
    perm = instr.dims()

    def gen(b, index):
        operand_index = [None] * len(perm)
        for j, d in enumerate(perm):
            operand_index[d] = index[j]
        return srcs[0](b, operand_index)
    return gen


def _slice(kernel, instr, srcs):
    spec = instr.attrs["slice"]

    def gen(b, index):
        return srcs[0](b, [i if (s.start == 0 and s.stride == 1) else
                           b.add(b.mul(i, i64(s.stride)), i64(s.start)) for i, s in zip(index, spec)])
    return gen


def _reverse(kernel, instr, srcs):
    dims, sizes = set(instr.dims()), instr.shape.dims

    def gen(b, index):
        return srcs[0](b, [b.sub(i64(sizes[d] - 1), i) if d in dims else i
                           for d, i in enumerate(index)])
    return gen


def _iota(kernel, instr, srcs):
    dim, etype = instr.attrs["iota_dimension"], instr.shape.element_type
    ty = compute_type(etype)

    def gen(b, index):
        i = index[dim]
        if is_float(etype):
            return b.sitofp(i, ty)
        return b.trunc(i, ty) if ty.width < 64 else i
    return gen


def _pad(kernel, instr, srcs):
    spec, in_dims = instr.attrs["padding"], instr.operands[0].shape.dims

    def gen(b, index):
        valid, source = None, []
        for i, p, size in zip(index, spec, in_dims):
            pos = b.sub(i, i64(p.low))
            ok = b.icmp_signed(">=", pos, i64(0))
            if p.interior:
                step = i64(p.interior + 1)
                ok = b.and_(ok, b.icmp_signed("==", b.srem(pos, step), i64(0)))
                pos = b.sdiv(pos, step)
            ok = b.and_(ok, b.icmp_signed("<", pos, i64(size)))
            valid = ok if valid is None else b.and_(valid, ok)
            source.append(clamp_index(b, pos, 0, max(size - 1, 0)))
        value = srcs[0](b, source)
        return value if valid is None else b.select(valid, value, srcs[1](b, []))
    return gen


def _concatenate(kernel, instr, srcs):
    dim = instr.dims()[0]
    pieces, offset = [], 0
    for src, operand in zip(srcs, instr.operands):
        size = operand.shape.dims[dim]
        if size:
            pieces.append((src, offset, size))
        offset += size
    if not pieces:     # every operand, so the result too, is empty: the loop never runs,
        pieces.append((srcs[0], 0, 1))         # but its body needs some value

    def gen(b, index):
        result = None
        for src, start, size in reversed(pieces):
            local = clamp_index(b, b.sub(index[dim], i64(start)), 0, size - 1)
            value = src(b, index[:dim] + [local] + index[dim + 1:])
            if result is None:
                result = value
            else:
                result = b.select(b.icmp_signed("<", index[dim], i64(start + size)), value, result)
        return result
    return gen


def _starts(b, instr, srcs, first: int, sizes) -> list:
    """Clamped dynamic start indices (operands first..) so the window fits the operand."""
    operand_dims = instr.operands[0].shape.dims
    starts = []
    for d, (src, operand) in enumerate(zip(srcs[first:], instr.operands[first:])):
        value = index_to_i64(b, src(b, []), operand.shape.element_type)
        starts.append(clamp_index(b, value, 0, operand_dims[d] - sizes[d]))
    return starts


def _dynamic_slice(kernel, instr, srcs):
    sizes = instr.shape.dims

    def gen(b, index):
        starts = _starts(b, instr, srcs, 1, sizes)
        return srcs[0](b, [b.add(s, i) for s, i in zip(starts, index)])
    return gen


def _dynamic_update_slice(kernel, instr, srcs):
    sizes = instr.operands[1].shape.dims

    def gen(b, index):
        starts = _starts(b, instr, srcs, 2, sizes)
        inside, local = None, []
        for i, s, size in zip(index, starts, sizes):
            pos = b.sub(i, s)
            ok = in_range(b, pos, 0, size)
            inside = ok if inside is None else b.and_(inside, ok)
            local.append(clamp_index(b, pos, 0, max(size - 1, 0)))
        old = srcs[0](b, index)
        if inside is None or 0 in sizes:
            return old if 0 in sizes else srcs[1](b, local)
        return b.select(inside, srcs[1](b, local), old)
    return gen


def _gather(kernel, instr, srcs):
    a = instr.attrs
    operand_shape, indices_shape = instr.operands[0].shape, instr.operands[1].shape
    offset_dims = tuple(a.get("offset_dims", ()))
    collapsed = set(a.get("collapsed_slice_dims", ()))
    start_map = tuple(a.get("start_index_map", ()))
    operand_batching = tuple(a.get("operand_batching_dims", ()))
    indices_batching = tuple(a.get("start_indices_batching_dims", ()))
    ivd = a.get("index_vector_dim", indices_shape.rank)
    slice_sizes = tuple(a["slice_sizes"])
    batch_out_dims = [d for d in range(instr.shape.rank) if d not in offset_dims]
    indices_dims = [d for d in range(indices_shape.rank) if d != ivd]
    window_dims = [d for d in range(operand_shape.rank)
                   if d not in collapsed and d not in operand_batching]
    index_etype = indices_shape.element_type

    def gen(b, index):
        batch = [index[d] for d in batch_out_dims]     # one per start-indices dim but ivd
        by_indices_dim = dict(zip(indices_dims, batch))
        start = [i64(0)] * operand_shape.rank
        for k, operand_dim in enumerate(start_map):
            at = [by_indices_dim.get(d) for d in range(indices_shape.rank)]
            if ivd < indices_shape.rank:
                at[ivd] = i64(k)
            value = index_to_i64(b, srcs[1](b, at), index_etype)
            start[operand_dim] = clamp_index(b, value, 0,
                                             operand_shape.dims[operand_dim] - slice_sizes[operand_dim])
        for operand_dim, indices_dim in zip(operand_batching, indices_batching):
            start[operand_dim] = by_indices_dim[indices_dim]
        operand_index = list(start)
        for out_dim, operand_dim in zip(offset_dims, window_dims):
            operand_index[operand_dim] = b.add(start[operand_dim], index[out_dim])
        return srcs[0](b, operand_index)
    return gen


def _map(kernel, instr, srcs):
    """map: the to_apply computation inlined on the operands' values at the index."""
    comp = instr.attrs["to_apply"]
    return lambda b, index: apply_computation(kernel, comp, [s(b, index) for s in srcs])[0]


def _get_tuple_element(kernel, instr, srcs):
    k = instr.attrs["index"]
    return lambda b, index: srcs[0](b, index)[k]


def _tuple(kernel, instr, srcs):
    return lambda b, index: [src(b, index) for src in srcs]


_MOVEMENT = {
    "constant": _constant,
    "tuple": _tuple,
    "broadcast": _broadcast,
    "reshape": _reshape,
    "bitcast": _reshape,
    "transpose": _transpose,
    "slice": _slice,
    "reverse": _reverse,
    "iota": _iota,
    "pad": _pad,
    "concatenate": _concatenate,
    "bitcast-convert": _bitcast_convert,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "gather": _gather,
    "get-tuple-element": _get_tuple_element,
    "map": _map,          # not movement: its computation applied per element
}

# The opcodes registered in _LOOPING (tests/backend_cpu/test_elemental_registry.py).
LOOPING_OPCODES = frozenset({"reduce", "reduce-window", "dot", "convolution"})
GENERATOR_OPCODES = frozenset(_MOVEMENT) | LOOPING_OPCODES
