"""Column normalization: a row fusion's column form (softmax over axis 0) as one kernel.

The column form of a row fusion (passes/row_fusion.py, fusion_utils) reduces a
dimension `a` that is not the minor one: softmax over axis 0 of x:[A, N] is

    m[j] = max_i x[i, j];   s[j] = sum_i exp(x[i, j] - m[j]);   out[i, j] = exp(x[i, j] - m[j]) / s[j]

Computed as a plain loop nest, each output element would redo its column's
reductions; XLA's CPU backend makes four kernels, each streaming the whole
tensor through memory (reading it four times and writing it twice). This kernel
takes a *block* of columns (the dimensions other than `a`) at a time and makes,
for that block, one pass over `a` per reduce and then the output pass: the input
is read once per reduce and once for the output, the output written once:

    for each block [lo, hi) of columns (split over the thread pool):
      m[lo:hi] = -inf;  for i: m[lo:hi] = max(m[lo:hi], x[i, lo:hi])       # pass 1
      s[lo:hi] = 0;     for i: s[lo:hi] += exp(x[i, lo:hi] - m[lo:hi])     # pass 2
      for i: out[i, lo:hi] = exp(x[i, lo:hi] - m[lo:hi]) / s[lo:hi]        # output

Each vector lane is a different column (lanes run along the minor dimension,
which is kept): a reduction along `a` is lane-wise, with no horizontal reduce.
The reduces' block values live in small arrays on the stack (`_BlockArray`);
the fusion's element generators read them there instead of reducing, and so
does every value computed from them alone that is broadcast back over `a` (a
layernorm's rsqrt(var + eps), computed once per column, not once per element).
A pass combines a few rows per step, as a balanced tree (fewer loads and stores
of the block's accumulators; column_reduce.rows_per_step picks how many). A float
sum over more than BLOCK_CHAIN steps of rows is cut into blocks of rows whose sums
are combined pairwise per column (elemental/pairwise_sum.py), like the backend's
other float sums: the error grows like log(rows), not rows (a layernorm down 2^18
rows was off by 6e-4 with one chain per column).

Blocks: columns are the dimensions other than `a` in row-major order; a block is
a range of one of them (`bd`) with every dimension after it whole. A block's rows
are a page long (PAGE_BYTES), or shorter to give the thread pool two partitions
(MIN_BLOCKS at most). Narrow blocks that would keep all A rows in L2 between the
passes were measured first and lost: softmax f32[4096,4096] over axis 0 took
30-60 ms in blocks of 32 columns (a new page per row in every pass, and rows 16
KiB apart share a few cache sets), 7.4 ms when those blocks were first copied to
the stack, and 5.8 ms with two blocks of 2048 columns that stream every pass
(the four kernels before: 11.7 ms; 2 threads, AVX-512 host). A small tensor's
passes still find it in cache. A large output (streaming.STREAM_MIN_BYTES) is
written with non-temporal stores, like the streamed loop kernels.

Which fusions: the column form with f32/f64 reduces of one input and a scalar
init, every value depending on a reduce being a row value read elementwise, a
row scalar (elementwise, reshapes between the two scalar forms) or a broadcast
back over every dimension but `a` (`why_not` checks it: the block arrays hold
only the block's columns, so no other read of them is correct). Lanes need the
f32/f64 types vector generators compute (elemental/vector_gen.py); any other
piece (a bf16 root, a minor dimension shorter than a vector, a reducer that is
not one op) is emitted on scalars in the same loops.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...hlo.shape import Shape

from .. import target as targets
from ..elemental import generators
from ..elemental.pairwise_sum import (BLOCK_CHAIN, final_levels, is_pairwise, levels_needed,
                                      trailing_ones)
from ..elemental.reduction import make_reducer, simple_reducer
from ..elemental.vector_gen import vector_generator
from ..llvm.ir_toolkit import splat
from ..llvm.kernel_ir import Buffer
from ..llvm.loops import for_range, i64
from ..llvm.types import I64, PTR, element_bytes, lanes_for, storage_type, to_storage

from . import streaming
from .column_reduce import rows_per_step

_TYPES = ("f32", "f64")
# A block's rows are a page long (4 KiB, the smallest page of x86-64 and AArch64):
# each pass then reads whole pages of every row (module docstring).
PAGE_BYTES = 4096
# Partitions for the thread pool: blocks are made shorter than a page for up to this
# many of them, and there are two at least when the columns hold two vectors.
MIN_BLOCKS = 8
# The most columns in one block, and the most bytes of a block's stack arrays.
MAX_BLOCK_COLUMNS = 4096
STACK_BYTES = 256 * 1024
LINE_BYTES = 64


def reduced_dim(comp) -> int | None:
    """The dimension `a` every reduce of the fusion computation reduces (the column
    form), or None when the reduces disagree or reduce the root's minor dimension."""
    root = comp.root
    reduces = [i for i in comp.instructions if i.opcode == "reduce"]
    if not reduces or not root.shape.is_array or root.shape.rank < 2:
        return None
    dims = {tuple(r.dims()) for r in reduces}
    if len(dims) != 1 or len(next(iter(dims))) != 1:
        return None
    a = next(iter(dims))[0]
    return None if a == root.shape.rank - 1 else a


def why_not(comp, outputs) -> str | None:
    """Why the fusion computation `comp` (output buffers `outputs`) is not a column
    normalization (module docstring), or None."""
    root = comp.root
    if root.opcode == "tuple" or len(outputs) != 1:
        return "several outputs"
    shape = root.shape
    if not shape.is_array or shape.rank < 2:
        return "not an array of rank 2 or more"
    if not shape.has_default_layout():
        return "the root is not in the default layout"
    reduces = [i for i in comp.post_order() if i.opcode == "reduce"]
    if not reduces:
        return "no reduce in the fusion"
    a = reduced_dim(comp)
    if a is None:
        return "the reduces do not all reduce one dimension that is not the minor one"
    for r in reduces:
        if len(r.operands) != 2:
            return f"{r.name} is a variadic reduce"
        source, init = r.operands
        if source.shape.dims != shape.dims:
            return f"{r.name} reduces {list(source.shape.dims)}, not the root's dimensions"
        if source.shape.element_type not in _TYPES or r.shape.element_type not in _TYPES:
            return f"{r.name} reduces {source.shape.element_type} (f32 and f64 only)"
        if init.shape.rank != 0:
            return f"{r.name}'s init is not a scalar"
    return _why_not_reads(comp, a)


def _scalar_forms(shape, a: int) -> tuple:
    dims = shape.dims
    return dims[:a] + dims[a + 1:], dims[:a] + (1,) + dims[a + 1:]


def _dependent(comp) -> set:
    """ids of the instructions that read a reduce's result, directly or not (and the
    reduces)."""
    dep: set = set()
    for instr in comp.post_order():
        if instr.opcode == "reduce" or any(id(o) in dep for o in instr.operands):
            dep.add(id(instr))
    return dep


def _why_not_reads(comp, a: int) -> str | None:
    """Every value computed from a reduce is read at its own column only."""
    root = comp.root
    row = root.shape.dims
    forms = _scalar_forms(root.shape, a)
    kept = tuple(d for d in range(len(row)) if d != a)
    dep = _dependent(comp)
    for instr in comp.post_order():
        if id(instr) not in dep:
            continue
        if instr.opcode == "reduce":
            if any(id(o) in dep for o in instr.operands[1:]):
                return f"{instr.name}'s init depends on a reduce"
            continue
        if not instr.shape.is_array:
            return f"{instr.name} is not an array"
        dims, op = instr.shape.dims, instr.opcode
        deps = [o for o in instr.operands if id(o) in dep]
        if dims == row and op == "broadcast":
            if deps[0].shape.dims != forms[0] or instr.dims() != kept:
                return f"{instr.name} broadcasts a reduce's result along other dimensions " \
                       f"than the columns"
            continue
        if instr.info.is_elementwise and (dims == row or dims in forms):
            if all(o.shape.dims == dims or o.shape.rank == 0 for o in instr.operands):
                continue
        if op in ("reshape", "bitcast") and dims in forms and deps[0].shape.dims in forms \
                and instr.shape.has_default_layout() and deps[0].shape.has_default_layout():
            continue
        return f"{instr.name} ({op}) reads a reduce's result at other indices than its column"
    if id(root) not in dep:
        return "the root reads no reduce"
    return None


class _Blocks:
    """The blocks of columns (module docstring): the split dimension `bd`, its width
    `width`, the dimensions inside a block (`inner`: after bd, whole) and around it
    (`outer`: before bd, one index per block), the partition extent.

    A block's rows are a page long (PAGE_BYTES) when the columns hold two such
    blocks, else there are two blocks, or MIN_BLOCKS when that makes them longer;
    `max_columns` bounds the block's stack arrays."""

    def __init__(self, shape, a: int, lanes: int, max_columns: int | None = None):
        dims = shape.dims
        self.kept = [d for d in range(shape.rank) if d != a]
        esize = element_bytes(shape.element_type)
        line = max(lanes, LINE_BYTES // esize)
        total = 1
        for d in self.kept:
            total *= dims[d]
        half = -(-total // 2)
        columns = max(-(-total // MIN_BLOCKS), min(max(line, PAGE_BYTES // esize), half))
        cap = MAX_BLOCK_COLUMNS if max_columns is None else min(MAX_BLOCK_COLUMNS, max_columns)
        columns = max(line, min(columns, cap))
        columns -= columns % lanes
        j = len(self.kept) - 1
        inner_size = 1
        while j > 0 and inner_size * dims[self.kept[j]] <= columns:
            inner_size *= dims[self.kept[j]]
            j -= 1
        self.bd = self.kept[j]
        self.inner = self.kept[j + 1:]
        self.outer = self.kept[:j]
        self.inner_size = inner_size
        self.width = max(1, min(dims[self.bd], columns // inner_size))
        self.count = -(-dims[self.bd] // self.width)       # blocks along bd
        self.extent = self.count
        for d in self.outer:
            self.extent *= dims[d]
        self.columns = self.width * inner_size             # elements of a block array


class _BlockArray(Buffer):
    """A value per column of the current block (a reduce's, or one computed from the
    reduces), on the stack. It is read at the value's own index: the columns' form
    (the root's dimensions but `a`) or the keepdims form (`a` of size 1)."""

    def __init__(self, pointer, instr, blocks: _Blocks, a: int, shape):
        super().__init__(pointer, Shape(instr.shape.element_type, instr.shape.dims))
        self.blocks, self.lo = blocks, None
        rank = shape.rank
        # Where each dimension of the root sits in this value's index (None: absent).
        if instr.shape.rank == rank:
            self.at = list(range(rank))
        else:
            self.at = [None if d == a else (d if d < a else d - 1) for d in range(rank)]
        self.dims = shape.dims

    level = None      # the levels of a pairwise sum: an i64 level, set before each use

    def address(self, b: ir.IRBuilder, index: list) -> ir.Value:
        blocks = self.blocks
        offset = b.sub(index[self.at[blocks.bd]], self.lo, flags=("nsw",))
        if blocks.inner_size > 1:
            offset = b.mul(offset, i64(blocks.inner_size), flags=("nsw",))
        stride = blocks.inner_size
        for d in blocks.inner:
            stride //= self.dims[d]
            term = index[self.at[d]]
            if self.dims[d] == 1:
                continue
            offset = b.add(offset, term if stride == 1 else b.mul(term, i64(stride), flags=("nsw",)),
                           flags=("nsw",))
        if self.level is not None:
            offset = b.add(offset, b.mul(self.level, i64(blocks.columns), flags=("nsw",)),
                           flags=("nsw",))
        return b.gep(self.pointer, [offset], inbounds=True, source_etype=self.llvm_type)

    def minor_dim(self) -> int | None:
        # The root's minor dimension is kept, and the last of this value's dimensions.
        return self.shape.rank - 1


def _pairwise_blocks(reduce) -> int:
    """The blocks of rows a long float sum is cut into (0: summed in one chain)."""
    if reduce.opcode != "reduce" or not is_pairwise(simple_reducer(reduce.to_apply),
                                                    reduce.shape.element_type):
        return 0
    source = reduce.operands[0]
    size = source.shape.dims[reduce.dims()[0]]
    per_step = max(1, min(rows_per_step(reduce), size))
    if size // per_step <= BLOCK_CHAIN:
        return 0
    return -(-size // (BLOCK_CHAIN * per_step))


def emit(kernel, comp, operand_gens, output) -> int:
    """Emits the column normalization of the fusion computation `comp` (why_not is
    None) into `output`; returns the partition extent."""
    root = comp.root
    shape = root.shape
    a = reduced_dim(comp)
    b = kernel.b
    if shape.numel == 0:
        return 1
    lanes = lanes_for(shape.element_type)
    dep = _dependent(comp)
    # What lives in block arrays: the reduces, and the values broadcast back over `a`.
    kept_dims = tuple(d for d in range(shape.rank) if d != a)
    held = [i for i in comp.post_order() if i.opcode == "reduce" or (
        id(i) in dep and any(u.opcode == "broadcast" and u.shape.dims == shape.dims
                             and u.dims() == kept_dims for u in i.users))]
    # Those arrays and the levels of long sums stay within STACK_BYTES.
    per_column = sum((1 + levels_needed(_pairwise_blocks(i)) if _pairwise_blocks(i) else 1)
                     * element_bytes(i.shape.element_type) for i in held)
    blocks = _Blocks(shape, a, lanes, STACK_BYTES // max(1, per_column))
    arrays = {}
    for instr in held:
        cell = kernel.alloca(ir.ArrayType(storage_type(instr.shape.element_type),
                                          blocks.columns), f"{instr.name}.block")
        cell.align = 64
        cell.type = PTR      # llvmlite types it `[n x T]*`; it is addressed by element
        arrays[instr] = _BlockArray(cell, instr, blocks, a, shape)
    # Long float sums keep levels of pairwise partial sums per column.
    levels = {}
    for instr in held:
        count = _pairwise_blocks(instr)
        if count:
            cell = kernel.alloca(ir.ArrayType(storage_type(instr.shape.element_type),
                                              levels_needed(count) * blocks.columns),
                                 f"{instr.name}.levels")
            cell.align = 64
            cell.type = PTR
            levels[instr] = _BlockArray(cell, instr, blocks, a, shape)
    gens: dict = {}
    compute: dict = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            gens[instr] = operand_gens[instr.parameter_number]
            continue
        if instr.opcode != "reduce":
            compute[instr] = generators.make_generator(kernel, instr,
                                                       [gens[o] for o in instr.operands])
        gens[instr] = generators.buffer_reader(arrays[instr]) if instr in arrays \
            else compute[instr]

    m = shape.rank - 1
    dims = shape.dims
    with for_range(b, kernel.begin, kernel.end, "cn.block", unroll=False) as block:
        with kernel.scope():
            q = b.urem(block, i64(blocks.count)) if blocks.count > 1 else i64(0)
            rest = b.udiv(block, i64(blocks.count)) if blocks.count > 1 else block
            index: list = [None] * shape.rank
            for d in reversed(blocks.outer):
                index[d] = b.urem(rest, i64(dims[d])) if dims[d] > 1 else i64(0)
                rest = b.udiv(rest, i64(dims[d])) if dims[d] > 1 else rest
            lo = b.mul(q, i64(blocks.width), flags=("nsw", "nuw"))
            hi = b.add(lo, i64(blocks.width), flags=("nsw", "nuw"))
            if dims[blocks.bd] % blocks.width:
                hi = b.select(b.icmp_signed("<", hi, i64(dims[blocks.bd])), hi,
                              i64(dims[blocks.bd]))
            for array in list(arrays.values()) + list(levels.values()):
                array.lo = lo
            cols = _Columns(kernel, shape, blocks, index, lo, hi, lanes)
            for instr in held:
                if instr.opcode == "reduce":
                    _reduce_pass(kernel, cols, instr, gens, arrays[instr], levels.get(instr), a)
                else:
                    _scalar_pass(kernel, cols, instr, compute[instr], gens, arrays[instr], a)
            _output_pass(kernel, cols, root, gens, output, a)
    return blocks.extent


class _Columns:
    """Loops over the columns of the current block, with `a` at a given row index:
    vectors along the minor dimension where a body on vectors is given, scalars for
    the rest."""

    def __init__(self, kernel, shape, blocks, index, lo, hi, lanes):
        self.kernel, self.shape, self.blocks = kernel, shape, blocks
        self.index, self.lo, self.hi, self.lanes = index, lo, hi, lanes

    def walk(self, row, vector_body, scalar_body, name: str) -> None:
        """body(b, index) for every column of the block; index[a] = `row` (None: the
        dimension is absent, the caller fills it)."""
        kernel, b, blocks, shape = self.kernel, self.kernel.b, self.blocks, self.shape
        dims = shape.dims
        loops = [blocks.bd] + blocks.inner
        index = list(self.index)
        minor = shape.rank - 1

        def nest(level):
            d = loops[level]
            lo, hi = (self.lo, self.hi) if d == blocks.bd else (i64(0), i64(dims[d]))
            if d != minor:
                with for_range(b, lo, hi, f"{name}{d}", unroll=False) as i:
                    index[d] = i
                    nest(level + 1)
                return
            lanes = self.lanes
            end = lo
            if vector_body is not None and (d != blocks.bd or blocks.width >= lanes) \
                    and dims[d] >= lanes:
                if isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant):
                    end = i64(lo.constant + (hi.constant - lo.constant) // lanes * lanes)
                else:
                    count = b.sub(hi, lo, flags=("nsw",))
                    end = b.add(lo, b.sub(count, b.urem(count, i64(lanes))), flags=("nsw",))
                with for_range(b, lo, end, f"{name}.v", step=lanes, vectorized=True) as i:
                    index[d] = i
                    with kernel.scope():
                        vector_body(b, self._at(index, row))
            with for_range(b, end, hi, f"{name}.s") as i:
                index[d] = i
                with kernel.scope():
                    scalar_body(b, self._at(index, row))
        nest(0)

    def _at(self, index, row):
        return [row if v is None else v for v in index]


def _kept_index(index: list, a: int) -> list:
    return index[:a] + index[a + 1:]


def _value_index(instr, index: list, a: int, shape) -> list:
    """The index of a held value (either scalar form) at the root's index."""
    if instr.shape.rank == shape.rank:
        return index[:a] + [i64(0)] + index[a + 1:]
    return _kept_index(index, a)


def _reduce_pass(kernel, cols, reduce, gens, array, levels, a: int) -> None:
    """array[block] = reduce over `a` of the reduce's input, rows a few at a time. A float
    sum over more than BLOCK_CHAIN steps of rows is summed in blocks of rows combined
    pairwise per column (elemental/pairwise_sum.py), in `levels`, the init added last."""
    b = kernel.b
    source, init = reduce.operands
    etype = source.shape.element_type
    size = source.shape.dims[a]
    shape = cols.shape
    step = make_reducer(kernel, reduce.to_apply, [etype])
    simple = simple_reducer(reduce.to_apply) is not None
    vgen = vector_generator(kernel, gens, source, shape.rank - 1, cols.lanes) if simple else None
    start = gens[init](b, [])
    per_step = max(1, min(rows_per_step(reduce) if simple else 1, size))

    def fill(target, value_of) -> None:
        """target[block] = value_of(b, load), `load(buffer)` reading a block array at
        the column (a vector or a scalar)."""
        def body(vector):
            def emit(b, index):
                at = _kept_index(index, a)
                load = (lambda buf: buf.load_vector(b, at, cols.lanes)) if vector else \
                    (lambda buf: buf.load(b, at))
                value = value_of(b, load, vector)
                (target.store_vector if vector else target.store)(b, at, value)
            return emit
        cols.walk(i64(0), body(True) if vgen is not None else None, body(False), "cn.fill")

    def constant(value):
        return lambda b, load, vector: splat(b, value, cols.lanes) if vector else value

    def fold(values):
        while len(values) > 1:
            paired = [step(b, [values[k]], [values[k + 1]])[0]
                      for k in range(0, len(values) - 1, 2)]
            values = paired + ([values[-1]] if len(values) % 2 else [])
        return values[0]

    def rows_body(rows):
        def with_rows(read, load, store):
            def body(b, index):
                at = _kept_index(index, a)
                values = []
                for r in rows:
                    full = list(index)
                    full[a] = r
                    values.append(read(b, full))
                store(b, at, step(b, [load(b, at)], [fold(values)])[0])
            return body
        vector = None
        if vgen is not None:
            vector = with_rows(vgen, lambda b, at: array.load_vector(b, at, cols.lanes),
                               array.store_vector)
        scalar = with_rows(gens[source], array.load, array.store)
        cols.walk(None, vector, scalar, f"cn.{reduce.name}")

    def rows_between(lo, hi, whole: bool) -> None:
        """The rows [lo, hi) in steps of per_step, then one at a time (`whole`: hi - lo
        is always a multiple of per_step)."""
        if whole:
            main = hi
        else:
            count = b.sub(hi, lo, flags=("nsw",)) if not isinstance(lo, int) else None
            if isinstance(lo, int) and isinstance(hi, int):
                main = hi - (hi - lo) % per_step
            else:
                main = b.sub(hi, b.urem(count, i64(per_step)), flags=("nsw",))
        with for_range(b, lo, main, f"cn.{reduce.name}.rows", step=per_step, unroll=False) as i:
            rows_body([i] + [b.add(i, i64(k), flags=("nsw", "nuw")) for k in range(1, per_step)])
        if not whole:
            with for_range(b, main, hi, f"cn.{reduce.name}.rest", unroll=False) as i:
                rows_body([i])

    if levels is None:
        fill(array, constant(start))
        rows_between(0, size, size % per_step == 0)
        return
    # A long float sum: blocks of BLOCK_CHAIN steps, each from -0.0, carried like a
    # binary increment into the levels (level t: the sum of 2^t blocks).
    chunk = BLOCK_CHAIN * per_step
    blocks = -(-size // chunk)
    add = lambda b, x, y: b.fadd(x, y)     # noqa: E731  (in this order: no reassociation)
    with for_range(b, 0, blocks, f"cn.{reduce.name}.block", unroll=False) as q:
        fill(array, constant(ir.Constant(start.type, -0.0)))
        lo = b.mul(q, i64(chunk), flags=("nsw", "nuw"))
        hi = b.add(lo, i64(chunk), flags=("nsw", "nuw"))
        if size % chunk:
            hi = b.select(b.icmp_signed("<", hi, i64(size)), hi, i64(size))
        rows_between(lo, hi, size % per_step == 0)
        carry = trailing_ones(b, q)
        with for_range(b, i64(0), carry, f"cn.{reduce.name}.carry", unroll=False) as t:
            def carried(b, load, vector, t=t):
                levels.level = t
                value = load(levels)
                levels.level = None
                return add(b, value, load(array))
            fill(array, carried)
        levels.level = carry
        fill(levels, lambda b, load, vector: load(array))
        levels.level = None

    def total(b, load, vector):
        parts = final_levels(blocks)
        levels.level = i64(parts[0])
        value = load(levels)
        for t in parts[1:]:
            levels.level = i64(t)
            value = add(b, load(levels), value)
        levels.level = None
        first = splat(b, start, cols.lanes) if vector else start
        return add(b, first, value)
    fill(array, total)


def _scalar_pass(kernel, cols, instr, compute, gens, array, a: int) -> None:
    """array[block] = the value of `instr` (computed from held values) per column."""
    shape = cols.shape
    vgen = vector_generator(kernel, {**gens, instr: compute}, instr, instr.shape.rank - 1,
                            cols.lanes)

    def scalar(b, index):
        at = _value_index(instr, index, a, shape)
        array.store(b, at, compute(b, at))

    def vector(b, index):
        at = _value_index(instr, index, a, shape)
        array.store_vector(b, at, vgen(b, at))
    cols.walk(i64(0), vector if vgen is not None else None, scalar, f"cn.{instr.name}")


def _output_pass(kernel, cols, root, gens, output, a: int) -> None:
    """out[i, block] = the root, for every row i. A large output whose vectors all
    start aligned is written with non-temporal stores when its base is aligned
    (streaming.py says why: no read for ownership)."""
    b = kernel.b
    minor = root.shape.rank - 1
    vgen = None
    if output.minor_dim() == minor:
        vgen = vector_generator(kernel, gens, root, minor, cols.lanes)
    scalar = lambda b, index: output.store(b, index, gens[root](b, index))     # noqa: E731

    def rows(streamed: bool) -> None:
        vector = None
        if vgen is not None:
            def vector(b, index):
                value = vgen(b, index)
                if not streamed:
                    output.store_vector(b, index, value)
                    return
                raw = to_storage(b, value, output.etype)
                inst = b.store(raw, output.address(b, index), align=vector_bytes)
                inst.set_metadata("nontemporal", streaming.nontemporal_node(b.module))
                output._on_access(inst)
        with for_range(b, 0, root.shape.dims[a], "cn.out.rows", unroll=False) as i:
            cols.walk(i, vector, scalar, "cn.out")

    shape, blocks = root.shape, cols.blocks
    vector_bytes = cols.lanes * element_bytes(output.etype)
    target = targets.current()
    whole = shape.dims[minor] % cols.lanes == 0 and (
        blocks.bd != minor or blocks.width % cols.lanes == 0)
    if vgen is None or not whole or not target.streaming_stores \
            or output.shape.nbytes < streaming.STREAM_MIN_BYTES \
            or vector_bytes != target.vector_bytes or output._on_access is None:
        rows(False)
        return
    kernel.streams = True        # KernelIR.finish adds the sfence
    base = b.ptrtoint(output.pointer, I64)
    aligned = b.icmp_unsigned("==", b.and_(base, i64(vector_bytes - 1)), i64(0))
    with b.if_else(aligned) as (then, otherwise):
        with then:
            rows(True)
        with otherwise:
            rows(False)
