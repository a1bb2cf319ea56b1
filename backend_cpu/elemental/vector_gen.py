"""Vector generators: a fused computation evaluated on several consecutive elements.

A scalar generator (generators.py) gives the value of one element, and LLVM's
loop vectorizer turns the loop around it into vector code. That works, but it
is most of the compile time of a memory-bound kernel: on a softmax row kernel
LLVM's O3 pipeline takes ~10 ms, of which almost nothing is left to do once the
loops are written on vectors (then a light pipeline of three passes takes
~1 ms, see target_machine.optimize). A vector generator gives `lanes` consecutive
elements along one dimension at once, as one LLVM vector:

    vgen = vector_generator(kernel, gens, instr, dim, lanes)   # None: not possible
    value = vgen(b, index)      # <lanes x T>: elements index, index + e_dim, ...

`index` is the index of the first lane; the caller keeps all lanes inside the
array. Each instruction is evaluated by one of these rules, chosen while the
generator is built (so nothing is emitted for a computation that declines):

- *uniform*: the lane dimension does not reach the instruction (a broadcast
  row statistic, a scalar operand): its scalar generator, splatted to all lanes.
  A hoisted reduce (hoisting.py) is uniform, so a softmax reads its max once;
- *elementwise*: the scalar recipe applied to vectors (scalar_ops.py takes both);
- *index moves* (broadcast, transpose, slice with unit stride along the lanes,
  reshape or bitcast that only adds or drops size-1 dimensions, reverse away
  from the lanes): the operand's index of the first lane, as the scalar
  generator computes it, with the lane dimension followed through;
- *iota* along the lanes: the first lane's index plus <0, 1, 2, ...>;
- *an array in memory* (a kernel operand, a constant) whose unit-stride
  dimension is the lane dimension: one vector load.

Anything else (gathers, pads, concatenates, reductions along the lanes, f16,
a lane dimension that is not unit-stride in memory) declines: the kernel then
keeps its scalar loop, and LLVM's vectorizer.

Who uses them: the kernels that stream their output (emitters/streaming.py), where
memory sets the speed and compile time is what is left to win (the softmax
kernel of f32[4096,4096]: the whole compile went from ~24 to ~17 ms, the run
time stayed the same). Kernels whose data stays in cache keep LLVM's
vectorizer: on long bodies its code was faster than these loops even after O3
(a tanh and an exp on f32[512,512]: ~90 us against ~108 us; LLVM interleaves
four vector bodies instruction by instruction, which two or four bodies in a
row, or wider vectors, did not reproduce).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...hlo.dtypes import dtype

from ..llvm.ir_toolkit import splat      # `value` in every lane (shared with the GEMM)
from ..llvm.loops import for_range, i64
from ..llvm.types import I64, compute_type, is_float, lanes_for

from .generators import memo_key, nondegenerate_dims
from .pairwise_sum import BLOCK_CHAIN, Levels
from .reduction import simple_reducer
from .scalar_ops import BINARY, call_intrinsic, emit_bitcast_convert, emit_elementwise

# Element types a vector generator computes in. f16 is missing on purpose: its
# f64 -> f16 conversion is a scalar sequence (scalar_ops._f64_to_f16).
LANE_TYPES = frozenset({"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                        "f32", "f64"})
# Vector accumulators of a reduction along the lanes (emit_row_reduce).
ACCUMULATORS = 4


class _Decline(Exception):
    """Raised while building: some instruction has no vector rule."""


def vector_generator(kernel, gens: dict, instr, dim: int, lanes: int):
    """The vector generator of `instr` along its dimension `dim`, reading the scalar
    generators `gens` (instruction -> generator); None when some instruction on the
    way has no vector rule (module docstring)."""
    if instr.shape.dims[dim] < lanes:
        return None
    try:
        return _Builder(kernel, gens, lanes).build(instr, dim)
    except _Decline:
        return None


class _Builder:
    def __init__(self, kernel, gens: dict, lanes: int):
        self.kernel, self.gens, self.lanes = kernel, gens, lanes
        self._built: dict = {}

    def build(self, instr, dim: int | None):
        key = (id(instr), dim)
        if key not in self._built:
            self._built[key] = self._memoized(instr, dim, self._rule(instr, dim))
        return self._built[key]

    def _memoized(self, instr, dim, raw):
        kernel, tag = self.kernel, ("lanes", dim)

        def generate(b, index):
            key = (tag, memo_key(instr, index))
            value = kernel.memo_get(key)
            if value is None:
                value = raw(b, index)
                kernel.memo_put(key, value)
            return value
        return generate

    def _rule(self, instr, dim):
        if not instr.shape.is_array:
            raise _Decline
        scalar = self.gens.get(instr)
        if dim is None:                        # uniform along the lanes
            if scalar is None:
                raise _Decline
            return lambda b, index: splat(b, scalar(b, index), self.lanes)
        if instr.shape.element_type not in LANE_TYPES:
            raise _Decline
        buffer = getattr(scalar, "buffer", None)
        if buffer is not None:                 # an array in memory
            if buffer.minor_dim() != dim:
                raise _Decline
            return lambda b, index: buffer.load_vector(b, index, self.lanes)
        if instr.info.is_elementwise:
            return self._elementwise(instr, dim)
        rule = getattr(self, "_" + instr.opcode.replace("-", "_"), None)
        if rule is None:
            raise _Decline
        return rule(instr, dim)

    def _elementwise(self, instr, dim):
        types = [o.shape.element_type for o in instr.operands]
        if any(t not in LANE_TYPES for t in types):
            raise _Decline
        # Old-style HLO lets a scalar operand stand for a broadcast one (clamp bounds).
        scalar = [o.shape.rank == 0 and instr.shape.rank > 0 for o in instr.operands]
        srcs = [self.build(o, None if sc else dim) for o, sc in zip(instr.operands, scalar)]

        def gen(b, index):
            args = [s(b, [] if sc else index) for s, sc in zip(srcs, scalar)]
            return emit_elementwise(b, instr, args, types)
        return gen

    # --- index moves: the operand index of the first lane, and where the lanes go ---

    def _broadcast(self, instr, dim):
        dims = instr.dims()
        src = self.build(instr.operands[0], dims.index(dim) if dim in dims else None)
        return lambda b, index: src(b, [index[d] for d in dims])

    def _transpose(self, instr, dim):
        perm = instr.dims()
        src = self.build(instr.operands[0], perm[dim])

        def gen(b, index):
            operand_index = [None] * len(perm)
            for j, d in enumerate(perm):
                operand_index[d] = index[j]
            return src(b, operand_index)
        return gen

    def _slice(self, instr, dim):
        spec = instr.attrs["slice"]
        if spec[dim].stride != 1:
            raise _Decline
        src = self.build(instr.operands[0], dim)
        return lambda b, index: src(b, [i if (s.start == 0 and s.stride == 1) else
                                        b.add(b.mul(i, i64(s.stride)), i64(s.start))
                                        for i, s in zip(index, spec)])

    def _reverse(self, instr, dim):
        dims, sizes = set(instr.dims()), instr.shape.dims
        if dim in dims:
            raise _Decline
        src = self.build(instr.operands[0], dim)
        return lambda b, index: src(b, [b.sub(i64(sizes[d] - 1), i) if d in dims else i
                                        for d, i in enumerate(index)])

    def _reshape(self, instr, dim):
        """Only reshapes that add or drop size-1 dimensions: a renaming of indices."""
        out_shape, in_shape = instr.shape, instr.operands[0].shape
        physical = instr.opcode == "bitcast"
        out_dims = nondegenerate_dims(out_shape, physical)
        in_dims = nondegenerate_dims(in_shape, physical)
        if [out_shape.dims[d] for d in out_dims] != [in_shape.dims[d] for d in in_dims] \
                or dim not in out_dims:
            raise _Decline
        src_t, dst_t = in_shape.element_type, out_shape.element_type
        src = self.build(instr.operands[0], in_dims[out_dims.index(dim)])

        def gen(b, index):
            operand_index = [i64(0)] * in_shape.rank
            for o, i in zip(out_dims, in_dims):
                operand_index[i] = index[o]
            value = src(b, operand_index)
            return value if src_t == dst_t else emit_bitcast_convert(b, value, src_t, dst_t)
        return gen

    _bitcast = _reshape

    def _iota(self, instr, dim):
        if instr.attrs["iota_dimension"] != dim:
            return self._rule(instr, None)     # constant along the lanes
        etype, lanes = instr.shape.element_type, self.lanes
        ty = ir.VectorType(compute_type(etype), lanes)
        steps = ir.Constant(ir.VectorType(I64, lanes), list(range(lanes)))

        def gen(b, index):
            at = b.add(splat(b, index[dim], lanes), steps)
            if is_float(etype):
                return b.sitofp(at, ty)
            return b.trunc(at, ty) if ty.element.width < 64 else at
        return gen


# --- reductions along the lanes ---------------------------------------------------------

# The value a vector accumulator starts from, per reducer: the identity, so that
# lanes that never saw an element do not change the result. (-0.0 is the identity
# of a float sum: 0.0 would turn a row of -0.0 into +0.0.)
def _identity(reducer: str, etype: str):
    d = dtype(etype)
    if reducer == "add":
        return -0.0 if d.is_float else 0
    if reducer == "multiply":
        return 1
    big = float("inf") if d.is_float else (2 ** (d.bits - 1) - 1 if d.is_signed else 2 ** d.bits - 1)
    small = -big if d.is_float else (-(2 ** (d.bits - 1)) if d.is_signed else 0)
    return small if reducer == "maximum" else big


# llvm.vector.reduce.* per reducer: (float, signed integer, unsigned integer).
_HORIZONTAL = {"add": ("fadd", "add", "add"), "multiply": ("fmul", "mul", "mul"),
               "maximum": ("fmaximum", "smax", "umax"), "minimum": ("fminimum", "smin", "umin")}


def emit_row_reduce(kernel, gens: dict, reduce, index: list):
    """Emits `reduce` (one input, one reduced dimension that is the input's minor one,
    an add/multiply/max/min reducer) at output `index` on vectors (accumulate_row),
    then a horizontal reduction and the init value. Returns the value, or None when
    the reduce does not qualify (nothing is emitted then: the caller uses its
    scalar generator)."""
    if len(reduce.operands) != 2 or len(reduce.dims()) != 1:
        return None
    source, init = reduce.operands
    etype = source.shape.element_type
    reducer = simple_reducer(reduce.to_apply)
    dim = reduce.dims()[0]
    if reducer not in _HORIZONTAL or etype == "pred" or etype not in LANE_TYPES \
            or source.shape.minor_to_major()[0] != dim:
        return None
    lanes = lanes_for(etype)
    vgen = vector_generator(kernel, gens, source, dim, lanes)
    if vgen is None:
        return None
    b = kernel.b
    ty = compute_type(etype)
    float_ = is_float(etype)
    flags = ("reassoc",) if float_ and reducer in ("add", "multiply") else ()

    def combine(b, acc, value):
        if flags:
            return (b.fadd if reducer == "add" else b.fmul)(acc, value, flags=flags)
        return BINARY[reducer](b, acc, value, etype)

    # The input index of the first lane: the kept dimensions from `index`.
    kept = iter(index)
    at = [None if d == dim else next(kept) for d in range(source.shape.rank)]

    def vector_at(b, k):
        at[dim] = k
        return vgen(b, list(at))
    identity = ir.Constant(ty, _identity(reducer, etype))
    acc = accumulate_row(kernel, source.shape.dims[dim], lanes, vector_at, combine, identity,
                         "row", ACCUMULATORS, pairwise=float_ and reducer == "add")
    vty = acc.type
    kind = 0 if float_ else (1 if etype[0] == "s" else 2)
    name = f"llvm.vector.reduce.{_HORIZONTAL[reducer][kind]}"
    if float_ and reducer == "add":
        total = horizontal_sum(b, acc)
    elif float_ and reducer == "multiply":
        fn = _declare(b.module, f"{name}.v{lanes}{ty.intrinsic_name}", ty, [ty, vty])
        total = b.call(fn, [ir.Constant(ty, 1.0), acc], fastmath=flags)
    else:
        total = call_intrinsic(b, name, [acc], ret=ty, overload=[vty])
    return combine(b, gens[init](b, []), total)


def accumulate_row(kernel, size: int, lanes: int, vector_at, combine, identity: ir.Constant,
                   name: str, accumulators: int = 2, pairwise: bool = False) -> ir.Value:
    """Folds the vectors of a row of `size` (>= lanes) elements into one vector:
    `vector_at(b, k)` gives elements k .. k + lanes - 1, `combine(b, acc, v)` folds.

    The loop keeps several accumulators (a NaN-propagating maximum is ~10 cycles of
    latency per vector: one chain of them would be slower than memory). A row that
    is not whole vectors ends with the vector of its last `lanes` elements, in which
    the lanes already counted are replaced by the reducer's `identity`: no scalar
    loop. (`vector_at` thus sees some elements twice: it must not mind.)

    `pairwise` (a float sum; `identity` is -0.0): a row longer than one block of
    BLOCK_CHAIN vectors per accumulator is summed block by block, each block into
    fresh accumulators, and the block sums (vectors) are combined pairwise
    (pairwise_sum.py): the error grows with log(size), not size / lanes."""
    b = kernel.b
    vty = ir.VectorType(identity.type, lanes)
    start = ir.Constant(vty, [identity] * lanes)
    split = size - size % lanes
    count = next(u for u in (accumulators, 2, 1) if split % (u * lanes) == 0)
    accs = [kernel.alloca(vty, f"{name}.acc") for _ in range(count)]
    block = count * lanes * BLOCK_CHAIN
    blocks = -(-split // block) if pairwise else 1

    def fold(lo, hi) -> ir.Value:
        for acc in accs:
            b.store(start, acc)
        with for_range(b, lo, hi, f"{name}.v", step=count * lanes, vectorized=True) as k:
            for u, acc in enumerate(accs):
                with kernel.scope():
                    at = b.add(k, i64(u * lanes), flags=("nsw",)) if u else k
                    b.store(combine(b, b.load(acc), vector_at(b, at)), acc)
        values = [b.load(acc) for acc in accs]
        while len(values) > 1:          # (a0 + a1) + (a2 + a3)
            paired = [combine(b, values[j], values[j + 1]) for j in range(0, len(values) - 1, 2)]
            values = paired + values[len(values) - len(values) % 2:]
        return values[0]
    if blocks <= 1:
        total = fold(0, split)
    else:
        levels = Levels(kernel, vty, blocks, name)
        with for_range(b, 0, blocks, f"{name}.block", unroll=False) as q:
            lo = b.mul(q, i64(block), flags=("nsw", "nuw"))
            hi = b.add(lo, i64(block), flags=("nsw", "nuw"))
            if split % block:
                hi = b.select(b.icmp_signed("<", hi, i64(split)), hi, i64(split))
            levels.push(b, q, fold(lo, hi))
        total = levels.total(b)
    if split < size:
        first = size - lanes
        fresh = ir.Constant(ir.VectorType(ir.IntType(1), lanes),
                            [int(first + j >= split) for j in range(lanes)])
        with kernel.scope():
            last = b.select(fresh, vector_at(b, i64(first)), start)
        total = combine(b, total, last)
    return total


def horizontal_sum(b: ir.IRBuilder, vector: ir.Value) -> ir.Value:
    """The sum of a float vector's lanes, in any order (reassociated, like the sums
    LLVM's vectorizer makes)."""
    ty = vector.type.element
    name = f"llvm.vector.reduce.fadd.v{vector.type.count}{ty.intrinsic_name}"
    fn = _declare(b.module, name, ty, [ty, vector.type])
    return b.call(fn, [ir.Constant(ty, -0.0), vector], fastmath=("reassoc",))


def _declare(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ir.FunctionType(ret, args), name)
