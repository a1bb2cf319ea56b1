"""General llvmlite.ir helpers: common types, intrinsic and C-library declarations,
i64 arithmetic, element pointers, vector splats, dtype conversions, counted loops
with or without LLVM's loop transforms, and entry-block allocas.

Written for the GEMM (gemm/) and shared with the vector generators (`splat`). The
GEMM's accumulation arithmetic and its spec are gemm/spec.py.
"""
from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from ...hlo.dtypes import dtype as hlo_dtype

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

_FLOAT_IR = {"f16": ir.HalfType(), "f32": ir.FloatType(), "f64": ir.DoubleType()}


def storage_type(name: str) -> ir.Type:
    """The LLVM type of one element of HLO type `name` as it sits in a buffer."""
    d = hlo_dtype(name)
    if name in _FLOAT_IR:
        return _FLOAT_IR[name]
    if d.is_integer or d.is_pred:
        return ir.IntType(d.bits)
    raise NotImplementedError(f"gemm: element type {name} is not supported")


def _type_suffix(ty: ir.Type) -> str:
    """LLVM's overload mangling: float -> f32, <16 x float> -> v16f32."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_type_suffix(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(ty)]


def intrinsic(module: ir.Module, base: str, ty: ir.Type, arity: int) -> ir.Function:
    """Declares (once) the overloaded intrinsic `base` for `ty`, e.g. llvm.fma.v16f32."""
    name = f"{base}.{_type_suffix(ty)}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ty, [ty] * arity), name)


def libc_function(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """Declares (once) a C library function the JIT resolves in the host process."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name)


def const(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def as_i64(value) -> ir.Value:
    return const(value) if isinstance(value, int) else value


def imin(b: ir.IRBuilder, x, y):
    x, y = as_i64(x), as_i64(y)
    return b.select(b.icmp_signed("<", x, y), x, y)


def element_ptr(b: ir.IRBuilder, base, ety: ir.Type, index) -> ir.Value:
    """&base[index] for elements of type `ety` (opaque pointers need the type)."""
    return b.gep(base, [as_i64(index)], source_etype=ety, inbounds=True)


def splat(b: ir.IRBuilder, scalar, lanes: int):
    """<lanes x T> with every lane equal to `scalar` (one vbroadcast instruction, or
    folded into an FMA's memory operand as {1toN} when used once)."""
    vty = ir.VectorType(scalar.type, lanes)
    undef = ir.Constant(vty, ir.Undefined)
    one = b.insert_element(undef, scalar, ir.Constant(I32, 0))
    return b.shuffle_vector(one, undef, ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))


def convert(b: ir.IRBuilder, value, src_dtype: str, dst: ir.Type, dst_is_float: bool):
    """Converts a scalar or vector holding `src_dtype` elements to element type `dst`
    (vector shape preserved). Float -> integer is not a GEMM conversion (HLO would
    convert explicitly) and is refused."""
    src = hlo_dtype(src_dtype)
    lanes = value.type.count if isinstance(value.type, ir.VectorType) else None
    target = ir.VectorType(dst, lanes) if lanes else dst
    src_ty = storage_type(src_dtype)
    if src_ty == dst:
        return value
    if src.is_float:
        if not dst_is_float:
            raise NotImplementedError(f"gemm: {src_dtype} operand with an integer output")
        src_bits = {"f16": 16, "f32": 32, "f64": 64}[src_dtype]
        dst_bits = 32 if isinstance(dst, ir.FloatType) else 64
        return b.fpext(value, target) if src_bits < dst_bits else b.fptrunc(value, target)
    if dst_is_float:
        return b.sitofp(value, target) if src.is_signed else b.uitofp(value, target)
    if src.bits < dst.width:
        return b.sext(value, target) if src.is_signed else b.zext(value, target)
    return b.trunc(value, target)


@contextmanager
def for_range(b: ir.IRBuilder, start, stop, step: int = 1, name: str = "i",
              transform: bool = True):
    """`for (i = start; i < stop; i += step)` with a signed i64 counter; yields `i`.

    The body is emitted by the `with` block; the builder ends positioned after the loop.
    `transform=False` asks LLVM neither to vectorize nor to unroll the loop: for
    strided copies (vectorized, they become slow-to-compile scatters and gathers) and
    for the GEMM's outer block loops (unrolled on their constant trip counts, they
    would copy the whole loop nest for nothing).
    """
    start, stop = as_i64(start), as_i64(stop)
    pre = b.block
    header = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name)
    i.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", i, stop), body, done)
    b.position_at_end(body)
    yield i
    i.add_incoming(b.add(i, const(step), name=f"{name}.next"), b.block)
    latch = b.branch(header)
    if not transform:
        latch.set_metadata("llvm.loop", _keep_loop_id(b.module))
    b.position_at_end(done)


def _keep_loop_id(module: ir.Module):
    """A fresh loop ID `!N = !{!N, !{"llvm.loop.vectorize.enable", i1 0},
    !{"llvm.loop.unroll.disable"}}` (self-referential, so each loop's is unique)."""
    no_vectorize = module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
                                        ir.Constant(I1, 0)])
    no_unroll = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    # add_metadata caches by content: a unique placeholder gives a fresh node, whose
    # first operand is then pointed at itself.
    loop_id = module.add_metadata([ir.MetaDataString(module, f"loop.{len(module.metadata)}"),
                                   no_vectorize, no_unroll])
    loop_id.operands = (loop_id, no_vectorize, no_unroll)
    return loop_id


def entry_alloca(b: ir.IRBuilder, ty: ir.Type, count: int = 1, name: str = "",
                 align: int | None = None) -> ir.Value:
    """An alloca in the function's entry block (so mem2reg/SROA can promote it)."""
    saved = b.block
    entry = b.function.entry_basic_block
    if entry.instructions:
        b.position_before(entry.instructions[0])
    else:
        b.position_at_start(entry)
    slot = b.alloca(ty if count == 1 else ir.ArrayType(ty, count), name=name)
    if align:
        slot.align = align
    # llvmlite types the alloca as `T*` (printed as `ptr` all the same); retyping it as
    # an opaque `ptr` lets the kernels load and store any type through it, as with
    # every other pointer here (a bitcast ptr->ptr would be folded away by llvmlite).
    slot.type = PTR
    b.position_at_end(saved)
    return slot
