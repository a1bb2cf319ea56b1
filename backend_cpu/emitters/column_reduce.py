"""The streaming column reduce: reductions that keep the input's minor dimension.

Computing such a reduce element by element (a generator, elemental/reduction.py) would
walk down a column of a row-major matrix, one new cache line (and often a new
page) per load. Instead the kernel streams the input once, in memory order,
and accumulates into the output, which stays in cache:

    out = init
    for i in [0, rows - rows % R, step R):         # the innermost reduced dim
      for j in [lo, hi):                           # kept, unit stride: vectorized
        out[j] = out[j] + ((in[i, j] + in[i+1, j]) + (in[i+2, j] + in[i+3, j]))
    for i in [rows - rows % R, rows):              # the remaining rows, one at a time
      for j in [lo, hi):
        out[j] = out[j] + in[i, j]

Several rows per step (R, `rows_per_step`): one row per step loads and stores
the whole accumulator row for every input row; those stores fill the store
queue while the input loads wait for memory, so the core keeps fewer misses in
flight (f32[4096,4096] axis 0 read ~25 GB/s on one core). Eight rows per step
cut that traffic eightfold and give eight independent load streams (~43 GB/s,
like a row reduce); sixteen were slower again. An input expression computed in
the kernel is copied once per row of a step, so an expensive one gets fewer rows.

Summation order: each output element adds its rows in row order, R at a time
combined as a balanced tree. An f32 sum adds each step's tree (in f32) into an
f64 scratch row, rounded to f32 once at the end: within a few roundings of the
exact sum (a transformer's bias gradient on an SSE4.2 target: 2.05x XLA's
elementwise error with f32 blocks, 1.44x with this; f32[4096,4096] axis 0 at
the same speed, 2.58 vs 2.63 ms, its error 1.6e-7 -> 6.1e-8 of the largest sum).
Other float sums over more than BLOCK_CHAIN steps of rows are cut into blocks of
rows: each block accumulates from -0.0, and the block rows join per-output
scratch levels pairwise (elemental/pairwise_sum.py; the error grows like
log(rows), and 2^24 is no ceiling), the init added last. An f16 sum or product
accumulates in an f32 scratch row, rounded once. The order never
depends on the thread count: the partitions split a kept dimension, not the
rows (`_Partition`). A reducer that is not one simple associative op (argmax)
is applied row by row, in order.

Sibling column reduces of one multi-output fusion (sum and sum of squares of
the same input, for a mean and a variance) share the walk: each step loads the
input once and updates every output (`try_emit_column_reduces`). A fusion
whose outputs map column reduces pointwise (a mean: sum / n; a keepdims
reshape) accumulates into scratch rows, then each partition computes its own
slice of the outputs from them (`try_emit_reduce_epilogue`). A reduce that
reads an earlier one broadcast back over the rows (a variance,
sum((x - sum(x) / n)^2)) runs in a second walk of the same kernel, after the
first has filled its scratch row: a partition only ever reads the columns it
computed itself, so the walks need no synchronization (`plan_stages`).

Side outputs (`split_sides`): a root tuple element with no reduce in it, of the
walked shape, is stored at each element as the (first) walk passes it, each
partition its own columns of every row. Multi-output fusion makes such kernels
from a bias gradient's reduce and the loop fusion that writes the gradient it
sums: the gradient's inputs are read and its producers computed once.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...hlo.shape import Shape

from ..elemental import generators
from ..elemental.pairwise_sum import (BLOCK_CHAIN, final_levels, is_pairwise, levels_needed,
                                      trailing_ones, wide_type)
from ..elemental.reduction import BlockPlan, make_reducer, simple_reducer
from ..llvm.kernel_ir import KernelIR, delinearize, linearize
from ..llvm.loops import for_range, i64, major_to_minor
from ..llvm.types import compute_type, element_bytes

ROWS_PER_STEP = 8
ROWS_PER_STEP_COMPUTED = 4      # inputs with a few cheap elementwise ops
ROWS_PER_STEP_EXPENSIVE = 2     # inputs with an expensive op, or many ops
_CHEAP_OPS = 4


def is_column_reduce(instr) -> bool:
    """True when the input's minor-most physical dimension is kept (and some dimension
    is reduced): such a reduce is emitted by this module, not as a generator."""
    in_shape = instr.operands[0].shape
    return in_shape.rank > 0 and in_shape.minor_to_major()[0] not in set(instr.dims()) \
        and bool(instr.dims())


def why_not_column_reduce(instr) -> str | None:
    """Why `instr` is not a column reduce (is_column_reduce), or None."""
    if instr.opcode != "reduce":
        return "not a reduce"
    if is_column_reduce(instr):
        return None
    in_shape = instr.operands[0].shape
    if in_shape.rank == 0 or not instr.dims():
        return "reduces no dimension"
    return f"reduces the input's minor dimension {in_shape.minor_to_major()[0]} (a row reduce)"


def rows_per_step(instr) -> int:
    """How many input rows one step of the column reduce `instr` combines, by the cost
    of computing one input element in the kernel (see the module docstring)."""
    n = len(instr.operands) // 2
    ops, expensive, seen = 0, False, set()
    stack = list(instr.operands[:n])
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.info.kind not in ("leaf", "movement"):
            ops += 1
            expensive = expensive or node.info.expensive or not node.info.is_elementwise
        stack.extend(node.operands)
    if ops == 0:
        return ROWS_PER_STEP
    if expensive or ops > _CHEAP_OPS:
        return ROWS_PER_STEP_EXPENSIVE
    return ROWS_PER_STEP_COMPUTED


def emit_column_reduce(kernel: KernelIR, instr, srcs, outputs) -> int:
    """Emits the column reduce `instr` (operand generators `srcs`) into `outputs`;
    returns the partition extent."""
    return _emit(kernel, [_Reduce(kernel, instr, srcs, outputs)])


def why_not_column_reduces(root, outputs) -> str | None:
    """Why the tuple `root` is not sibling column reduces sharing one walk
    (try_emit_column_reduces), or None."""
    if root.opcode != "tuple":
        return "not a tuple root"
    if not root.operands:
        return "an empty tuple"
    sides, elements = split_sides(root)
    if not elements:
        return "no reduce in the tuple"
    for e in elements:
        reason = why_not_column_reduce(e)
        if reason is not None:
            return f"{e.name}: {reason}"
    if len({_walk_key(e) for e in elements}) != 1:
        return "the reduces walk different inputs or dimensions"
    if sum(len(e.shape.leaves()) for e in root.operands) != len(outputs):
        return "the outputs do not match the root's elements"
    reduce_outputs = [o for e, outs in _outputs_by_element(root, outputs) if e not in sides
                      for o in outs]
    if len({(o.shape.dims, tuple(o.shape.minor_to_major())) for o in reduce_outputs}) != 1:
        return "the outputs differ in shape or layout"
    return _why_not_sides(sides, elements[0])


def try_emit_column_reduces(kernel: KernelIR, root, gens: dict, outputs) -> int | None:
    """A tuple root whose elements are all column reduces of inputs of one shape over
    the same dimensions: one streaming walk updates every output. None otherwise
    (why_not_column_reduces says why)."""
    if why_not_column_reduces(root, outputs) is not None:
        return None
    sides = split_sides(root)[0]
    reduces, side_outputs = [], []
    for e, outs in _outputs_by_element(root, outputs):
        if e in sides:
            side_outputs.append((gens[e], outs[0]))
        else:
            reduces.append(_Reduce(kernel, e, [gens[o] for o in e.operands], outs))
    return _emit(kernel, reduces, sides=side_outputs)


def _outputs_by_element(root, outputs) -> list:
    """(element, its output buffers) for each element of the tuple `root` (a variadic
    reduce has several)."""
    pairs, rest = [], list(outputs)
    for e in root.operands:
        count = len(e.shape.leaves())
        pairs.append((e, rest[:count]))
        rest = rest[count:]
    return pairs


def try_emit_reduce_epilogue(kernel: KernelIR, comp, operand_gens, outputs) -> int | None:
    """A fusion whose root (or each element of a root tuple) maps column reduces
    pointwise (elementwise ops, reshapes that keep the row-major order): the reduces
    stream into scratch rows, then the partition that owns a slice of the rows computes
    the outputs there. A reduce whose input reads an earlier one broadcast back over
    the rows (a variance: sum((x - mean)^2)) waits for it: one walk per stage. None
    otherwise (and for a one-stage root that is a reduce, or a tuple of reduces only:
    those accumulate straight into their outputs); why_not_reduce_epilogue says why."""
    if why_not_reduce_epilogue(comp, kernel.scratch_slot is not None, len(outputs)) is not None:
        return None
    stages = plan_stages(comp)
    sides = split_sides(comp.root)[0]
    elements = comp.root.operands if comp.root.opcode == "tuple" else [comp.root]
    side_elements = [(e, out) for e, out in zip(elements, outputs) if e in sides]
    outputs = [out for e, out in zip(elements, outputs) if e not in sides]
    elements = [e for e in elements if e not in sides]
    reduces = [r for stage in stages for r in stage]
    accs = {r: kernel.buffer(kernel.scratch_slot(r.shape), r.shape) for r in reduces}
    gens: dict = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            gens[instr] = operand_gens[instr.parameter_number]
        elif instr in accs:
            gens[instr] = lambda b, index, acc=accs[instr]: acc.load(b, index)
        elif instr.opcode != "tuple":
            gens[instr] = generators.make_generator(kernel, instr,
                                                    [gens[o] for o in instr.operands])
    row_shape = reduces[0].shape
    part = _Partition(kernel.b, kernel, row_shape, list(accs.values()))

    def epilogue(b, index):
        linear = linearize(b, index, row_shape)
        for element, out in zip(elements, outputs):
            at = delinearize(b, linear, out.shape)
            out.store(b, at, gens[element](b, at))
    for k, stage in enumerate(stages):
        walk = [_Reduce(kernel, r, [gens[o] for o in r.operands], [accs[r]]) for r in stage]
        # Side outputs (values of the walked shape, no reduce in them) are stored by the
        # first walk, which computes their elements anyway.
        _emit(kernel, walk, epilogue if k == len(stages) - 1 else None, part,
              sides=[(gens[e], out) for e, out in side_elements] if k == 0 else ())
    return part.extent


def why_not_reduce_epilogue(comp, has_scratch: bool, output_count: int) -> str | None:
    """Why the fusion computation `comp` is not column reduces under pointwise ops
    (try_emit_reduce_epilogue), or None. `has_scratch`: the kernel has scratch memory;
    `output_count`: its output buffers."""
    stages = _stages(comp)
    if isinstance(stages, str):
        return stages
    if not has_scratch:
        return "the kernel has no scratch memory"
    elements = comp.root.operands if comp.root.opcode == "tuple" else [comp.root]
    if len(elements) != output_count:
        return "a root element with several outputs"
    return None


def plan_stages(comp) -> list[list] | None:
    """The column reduces of comp in walks (stages), for try_emit_reduce_epilogue; None
    when comp is not of that form (why_not_reduce_epilogue says why).

    All reduces share one walk shape (input shape, reduced dimensions), have one
    output, and are in the default layout, like every output (whose element count is
    theirs): linear offsets then agree along the way. Values that depend on a reduce
    are "rows" (its output shape: the reduce, then elementwise ops and order-keeping
    reshapes) or "inputs" (a row broadcast back over the reduced dimensions, then
    elementwise ops); a reduce may read inputs (it is then one stage later than the
    reduces they come from), outputs must be rows. Either way a partition only reads
    row elements it computed itself.
    """
    stages = _stages(comp)
    return None if isinstance(stages, str) else stages


def _stages(comp) -> list[list] | str:
    """plan_stages' stages, or the reason there are none."""
    root = comp.root
    sides, elements = split_sides(root)
    reduces = [i for i in comp.post_order() if i.opcode == "reduce"]
    if not reduces:
        return "no reduce in the fusion"
    for r in reduces:
        if not is_column_reduce(r):
            return f"{r.name}: {why_not_column_reduce(r)}"
        if len(r.operands) != 2:
            return f"{r.name} is a variadic reduce"
        if not r.shape.has_default_layout():
            return f"{r.name}'s output is not in the default layout"
    if len({_walk_key(r) for r in reduces}) != 1:
        return "the reduces walk different inputs or dimensions"
    in_shape = reduces[0].operands[0].shape
    kept = tuple(d for d in range(in_shape.rank) if d not in set(reduces[0].dims()))
    level, stage = {}, {}                 # id -> "row" | "input"; id -> its latest stage
    for instr in comp.post_order():
        deps = [o for o in instr.operands if id(o) in level]
        if instr.opcode == "reduce":
            if id(instr.operands[1]) in level or (deps and level[id(deps[0])] != "input"):
                return f"{instr.name} reads a reduce's result other than broadcast back " \
                       f"over the rows"
            level[id(instr)], stage[id(instr)] = "row", (stage[id(deps[0])] + 1 if deps else 0)
            continue
        if not deps or instr is root and root.opcode == "tuple":
            continue
        kind = _dependent_kind(instr, [level[id(o)] for o in deps], kept, in_shape)
        if kind is None:
            return f"{instr.name} ({instr.opcode}) does not keep a reduce's indices"
        level[id(instr)], stage[id(instr)] = kind, max(stage[id(o)] for o in deps)
    numel = reduces[0].shape.numel
    if not all(level.get(id(e), "row") == "row" and e.shape.is_array and e.shape.numel == numel
               and e.shape.has_default_layout() for e in elements):
        return "an output is not computed pointwise from the reduces' rows"
    stages = [[r for r in reduces if stage[id(r)] == k]
              for k in range(1 + max(stage[id(r)] for r in reduces))]
    if len(stages) == 1 and all(e.opcode == "reduce" for e in elements):
        # The direct paths need no scratch.
        return "only reduces at the root (they accumulate into their outputs directly)"
    reason = _why_not_sides(sides, reduces[0])
    return stages if reason is None else reason


def split_sides(root) -> tuple[list, list]:
    """(side elements, the others) of a fusion root: a side element is a root tuple
    element with no reduce among its operands' operands, all the way down -- a value
    the kernel also writes out, computed over the shape a column reduce walks (a loop
    fusion merged with a reduce of the same values by multi-output fusion: the
    gradient of a bias and the gradient it sums)."""
    elements = root.operands if root.opcode == "tuple" else [root]
    if root.opcode != "tuple":
        return [], elements
    sides = [e for e in elements if e.opcode != "reduce" and not _reaches_reduce(e)]
    return sides, [e for e in elements if e not in sides]


def _reaches_reduce(instr) -> bool:
    stack, seen = [instr], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.opcode == "reduce":
            return True
        stack.extend(node.operands)
    return False


def _why_not_sides(sides: list, reduce) -> str | None:
    """Side elements are stored element by element during the walk of `reduce`: each
    must have the walked shape, in the default layout, like the walked input."""
    in_shape = reduce.operands[0].shape
    for e in sides:
        if not e.shape.is_array or e.shape.dims != in_shape.dims \
                or not e.shape.has_default_layout() or not in_shape.has_default_layout():
            return f"{e.name} is neither a reduce's value nor of the walked shape " \
                   f"{list(in_shape.dims)} in the default layout"
    return None


def _dependent_kind(instr, levels: list[str], kept: tuple, in_shape) -> str | None:
    """"row" or "input" for an instruction reading reduce-dependent values of `levels`,
    None if it would break the correspondence of indices (see plan_stages)."""
    if instr.opcode == "broadcast":
        back = levels == ["row"] and tuple(instr.dims()) == kept \
            and instr.shape.dims == in_shape.dims
        return "input" if back else None
    if len(set(levels)) != 1:
        return None
    if instr.info.is_elementwise:
        return levels[0]
    reshape = instr.opcode in ("reshape", "bitcast") and instr.shape.has_default_layout() \
        and instr.operands[0].shape.has_default_layout()
    return "row" if reshape and levels[0] == "row" else None


def _walk_key(reduce) -> tuple:
    """Reduces with equal keys can share one streaming walk."""
    shape = reduce.operands[0].shape
    return shape.dims, tuple(shape.minor_to_major()), tuple(sorted(reduce.dims()))


class _Reduce:
    """One reduce of the walk: its input generators, init values, step and outputs.

    `accs` are the buffers the walk accumulates into: the outputs themselves, or, for
    an f16 sum or product (accumulated in f32, pairwise_sum.wide_type) and an f32 sum
    (in f64), a scratch copy in the wider type that `finish` rounds into the outputs. A float sum over more rows than
    one block also keeps scratch levels of block sums per output (`plan_blocks`)."""

    def __init__(self, kernel, instr, srcs, outputs):
        n = len(instr.operands) // 2
        self.instr, self.outputs = instr, outputs
        self.inputs, self.inits = srcs[:n], srcs[n:]
        etypes = [o.shape.element_type for o in instr.operands[:n]]
        reducer = simple_reducer(instr.to_apply) if n == 1 else None
        scratch = kernel.scratch_slot is not None
        self.pairwise = scratch and is_pairwise(reducer, etypes[0])
        self.wide = wide_type(etypes[0]) if scratch and reducer in ("add", "multiply") else None
        self.rows_step = None
        if scratch and reducer == "add" and etypes == ["f32"]:
            # An f32 sum: each step's rows are added in f32 as before, then into an f64
            # accumulator, rounded to f32 once at the end. The f64 chain is exact to
            # ~2^-53 per addition, so no blocks are needed, and the sum is within a few
            # roundings of the exact one (see the module docstring).
            self.wide, self.pairwise = ir.DoubleType(), False
            self.rows_step = make_reducer(kernel, instr.to_apply, etypes)
        self.accs = outputs
        if self.wide is not None:
            wide = "f64" if isinstance(self.wide, ir.DoubleType) else "f32"
            shape = Shape(wide, outputs[0].shape.dims, outputs[0].shape.layout)
            self.accs = [kernel.buffer(kernel.scratch_slot(shape), shape)]
            etypes = [wide]
        self.step = make_reducer(kernel, instr.to_apply, etypes)
        self.tree = n == 1 and reducer is not None
        self.levels = None      # (scratch buffer, blocks) once the walk is cut into blocks

    def init_values(self, b) -> list:
        values = [g(b, []) for g in self.inits]
        return [b.fpext(v, self.wide) for v in values] if self.wide is not None else values

    def accumulate(self, kernel, b, out_index, inputs_at: list) -> None:
        """accs[out_index] = step(accs[out_index], rows), the rows' input indices
        being `inputs_at` (one index list per row)."""
        values = [[g(b, index) for g in self.inputs] for index in inputs_at]
        if self.rows_step is not None:          # f32 rows, then the f64 accumulator
            values = [[b.fpext(v, self.wide)
                       for v in _combine_pairwise(b, self.rows_step, values)]]
        elif self.wide is not None:
            values = [[b.fpext(v, self.wide) for v in row] for row in values]
        accs = [acc.load(b, out_index) for acc in self.accs]
        if self.tree:
            accs = self.step(b, accs, _combine_pairwise(b, self.step, values))
        else:
            for value in values:
                with kernel.scope():     # a reducer's own values are memoized per step
                    accs = self.step(b, accs, value)
        for acc, value in zip(self.accs, accs):
            acc.store(b, out_index, value)

    # --- blocks of rows combined pairwise (elemental/pairwise_sum.py), per output element ----

    def plan_blocks(self, kernel, blocks: int) -> None:
        """Keeps scratch levels for `blocks` blocks of rows (a float sum only)."""
        out = self.accs[0].shape
        shape = Shape(out.element_type, (levels_needed(blocks) * out.numel,))
        self.levels = (kernel.buffer(kernel.scratch_slot(shape), shape), blocks)

    def _level(self, b, level, out_index) -> list:
        """The index in the levels' buffer of output `out_index` at `level`."""
        out = self.accs[0].shape
        level = i64(level) if isinstance(level, int) else level
        offset = b.mul(level, i64(out.numel), flags=("nsw", "nuw"))
        return [b.add(offset, linearize(b, out_index, out), flags=("nsw", "nuw"))]

    def reset(self, b, out_index) -> None:
        """A block starts: its accumulator is -0.0 (the identity of a float sum)."""
        acc = self.accs[0]
        acc.store(b, out_index, ir.Constant(compute_type(acc.etype), -0.0))

    def carry(self, b, level, out_index) -> None:
        """acc = levels[level] + acc: the block takes in a partial sum of its weight."""
        buffer, acc = self.levels[0], self.accs[0]
        acc.store(b, out_index, b.fadd(buffer.load(b, self._level(b, level, out_index)),
                                       acc.load(b, out_index)))

    def settle(self, b, level, out_index) -> None:
        """levels[level] = acc: the block, with what it carried, settles there."""
        buffer, acc = self.levels[0], self.accs[0]
        buffer.store(b, self._level(b, level, out_index), acc.load(b, out_index))

    def finish(self, b, out_index, inits: list) -> None:
        """The outputs from the accumulators: init + the levels' sum for a blocked sum,
        rounded to f16 for an f16 reduce accumulated in f32."""
        if self.levels is not None:
            buffer, blocks = self.levels
            parts = final_levels(blocks)
            total = buffer.load(b, self._level(b, parts[0], out_index))
            for level in parts[1:]:
                total = b.fadd(buffer.load(b, self._level(b, level, out_index)), total)
            value = b.fadd(inits[0], total)
        elif self.wide is not None:
            value = self.accs[0].load(b, out_index)
        else:
            return
        if self.wide is not None:
            value = b.fptrunc(value, compute_type(self.outputs[0].etype))
        self.outputs[0].store(b, out_index, value)


def _emit(kernel: KernelIR, reduces: list[_Reduce], epilogue=None, part=None,
          sides=()) -> int:
    """The walk shared by `reduces` (same input shape, same reduced dimensions); then
    `epilogue(b, index)` for every output index of this partition, if given. `part`:
    the split of the outputs (by default, from the outputs' shape and types). `sides`:
    (generator, output) pairs of the walked shape, stored at every element the walk
    visits (split_sides): each partition writes its slice of the kept dimensions in
    every row.

    Float sums over more rows than one block (BLOCK_CHAIN steps of rows) cut the walk
    into blocks at one reduced loop (reduction.BlockPlan): each block accumulates into
    the accumulator row from -0.0, then joins the scratch levels of its outputs like
    a binary carry (elemental/pairwise_sum.py), and the outputs are init + the levels at the end.
    Other reduces of the walk accumulate through the blocks as before."""
    b = kernel.b
    first = reduces[0].instr
    in_shape = first.operands[0].shape
    reduced = set(first.dims())
    kept = [d for d in range(in_shape.rank) if d not in reduced]
    outputs = [out for r in reduces for out in r.outputs]
    out_shape = outputs[0].shape
    sides = list(sides)
    part = part or _Partition(b, kernel, out_shape, outputs)
    full: list = [None] * in_shape.rank

    init_values = [r.init_values(b) for r in reduces]

    def init(b, index):
        for r, values in zip(reduces, init_values):
            for acc, value in zip(r.accs, values):
                acc.store(b, index, value)
    _for_partition(kernel, b, out_shape, part, init, "ci")

    order = major_to_minor(in_shape)
    walked = [d for d in order if d in reduced]
    row_dim = walked[-1]
    per_step = min(rows_per_step(r.instr) for r in reduces)
    plan = BlockPlan([in_shape.dims[d] for d in walked], BLOCK_CHAIN * per_step)
    blocked = [r for r in reduces if r.pairwise] if plan.blocks > 1 else []
    for r in blocked:
        r.plan_blocks(kernel, plan.blocks)
    split_dim = walked[plan.split] if blocked else None
    # Reduced loops outside the blocks: the digits of a block's number (with the chunk).
    digits = set(walked[:plan.split]) if blocked else set()

    def accumulate(rows):
        with kernel.scope():
            out_index = [full[d] for d in kept]
            at = []
            for row in rows:
                full[row_dim] = row
                at.append(list(full))
            for r in reduces:
                r.accumulate(kernel, b, out_index, at)
            for index in at:
                for gen, out in sides:
                    out.store(b, index, gen(b, index))

    def for_block_outputs(level, body, name):
        """body(b, out_index) for the outputs of this partition that a block opened at
        nest level `level` touches: the kept dims inside it vary, the others are fixed
        by the loops around it."""
        inner = [d for d in order[level + 1:] if d in kept]
        index = {d: full[d] for d in kept}

        def walk(j):
            if j == len(inner):
                with kernel.scope():
                    body(b, [index[d] for d in kept])
                return
            d = inner[j]
            with for_range(b, *part.bounds(kept.index(d)), f"{name}{d}") as i:
                index[d] = i
                walk(j + 1)
        walk(0)

    def chunked(level, k):
        d = order[level]
        size, chunk = in_shape.dims[d], plan.chunk
        with for_range(b, 0, plan.chunks, f"c{d}.block", unroll=False) as q:
            for_block_outputs(level, lambda b, at: [r.reset(b, at) for r in blocked], "cr")
            lo = b.mul(q, i64(chunk), flags=("nsw", "nuw"))
            hi = b.add(lo, i64(chunk), flags=("nsw", "nuw"))
            if size % chunk:
                hi = b.select(b.icmp_signed("<", hi, i64(size)), hi, i64(size))
            if d == row_dim:      # chunks are whole steps of rows; the last may be short
                _row_steps_between(b, lo, hi, per_step, size % per_step == 0, f"c{d}",
                                   lambda rows: nest(level + 1, rows, None))
            else:
                with for_range(b, lo, hi, f"c{d}") as i:
                    full[d] = i
                    nest(level + 1, None, None)
            block = q if k is None else b.add(b.mul(k, i64(plan.chunks), flags=("nsw", "nuw")),
                                              q, flags=("nsw", "nuw"))
            carry = trailing_ones(b, block)
            with for_range(b, i64(0), carry, f"c{d}.carry", unroll=False) as t:
                for_block_outputs(level, lambda b, at: [r.carry(b, t, at) for r in blocked], "cc")
            for_block_outputs(level, lambda b, at: [r.settle(b, carry, at) for r in blocked], "cs")

    def nest(level, rows, k):
        if level == len(order):
            accumulate(rows)
            return
        d = order[level]
        if d == split_dim:
            chunked(level, k)
            return
        if d == row_dim:
            _row_steps(b, in_shape.dims[d], per_step, f"c{d}", lambda rows: nest(level + 1, rows, k))
            return
        bounds = part.bounds(kept.index(d)) if d in kept else (0, in_shape.dims[d])
        with for_range(b, *bounds, f"c{d}") as i:
            full[d] = i
            if d in digits:
                k = i if k is None else b.add(b.mul(k, i64(in_shape.dims[d]), flags=("nsw", "nuw")),
                                              i, flags=("nsw", "nuw"))
            nest(level + 1, rows, k)
    nest(0, None, None)
    if any(r.levels is not None or r.wide is not None for r in reduces):
        def finish(b, index):
            for r, values in zip(reduces, init_values):
                r.finish(b, index, values)
        _for_partition(kernel, b, out_shape, part, finish, "cf")
    if epilogue is not None:
        _for_partition(kernel, b, out_shape, part, epilogue, "ce")
    return part.extent


def _for_partition(kernel, b, out_shape, part, body, name: str) -> None:
    """body(b, index) for every output index of this launch, in memory order."""
    index: list = [None] * out_shape.rank

    def level(depth):
        if depth == out_shape.rank:
            with kernel.scope():
                body(b, list(index))
            return
        k = major_to_minor(out_shape)[depth]
        with for_range(b, *part.bounds(k), f"{name}{k}") as i:
            index[k] = i
            level(depth + 1)
    level(0)


class _Partition:
    """How the launches of a column reduce split the output.

    The split dimension is the output's major-most one of size > 1 (a leading
    dimension of size 1 would leave one partition). When it is the minor-most one, the
    kernel's `[begin, end)` counts blocks of a cache line of output elements, so that
    two threads never write the same line: the accumulator row is stored once per step
    of rows, and a line shared at a boundary (or a whole output narrower than two
    lines, like f32[10]) would bounce between the cores on every step.
    """

    LINE_BYTES = 64

    def __init__(self, b, kernel, out_shape, outputs):
        order = major_to_minor(out_shape)
        self.dims = out_shape.dims
        self.dim = next((k for k in order if out_shape.dims[k] > 1), order[0])
        self.size = out_shape.dims[self.dim]
        self.unit = 1
        if self.dim == order[-1]:
            self.unit = max(1, self.LINE_BYTES // min(element_bytes(o.etype) for o in outputs))
        self.extent = -(-self.size // self.unit)
        if self.unit == 1:
            self.lo, self.hi = kernel.begin, kernel.end
        else:
            self.lo = b.mul(kernel.begin, i64(self.unit), flags=("nsw", "nuw"))
            hi = b.mul(kernel.end, i64(self.unit), flags=("nsw", "nuw"))
            self.hi = b.select(b.icmp_signed("<", hi, i64(self.size)), hi, i64(self.size))

    def bounds(self, out_dim: int) -> tuple:
        """[lo, hi) of output dimension `out_dim` in this launch."""
        return (self.lo, self.hi) if out_dim == self.dim else (0, self.dims[out_dim])


def _row_steps(b, size: int, per_step: int, name: str, body) -> None:
    """body(rows) for [0, size) in steps of `per_step` rows, then the rest one by one."""
    per_step = max(1, min(per_step, size))
    main = size - size % per_step
    if main:
        with for_range(b, 0, main, name, step=per_step) as i:
            body([i] + [b.add(i, i64(k), flags=("nsw", "nuw")) for k in range(1, per_step)])
    if main < size:
        with for_range(b, main, size, f"{name}.rest") as i:
            body([i])


def _row_steps_between(b, lo, hi, per_step: int, whole: bool, name: str, body) -> None:
    """body(rows) for [lo, hi) (run-time bounds) in steps of `per_step` rows, then the
    rest one by one; `whole`: hi - lo is always a multiple of `per_step` (no rest)."""
    if whole:
        main = hi
    else:
        count = b.sub(hi, lo, flags=("nsw", "nuw"))
        main = b.add(lo, b.sub(count, b.urem(count, i64(per_step))), flags=("nsw", "nuw"))
    with for_range(b, lo, main, name, step=per_step) as i:
        body([i] + [b.add(i, i64(k), flags=("nsw", "nuw")) for k in range(1, per_step)])
    if not whole:
        with for_range(b, main, hi, f"{name}.rest") as i:
            body([i])


def _combine_pairwise(b, step, values: list) -> list:
    """values[0] op values[1] op ... as a balanced tree (neighbours first)."""
    while len(values) > 1:
        paired = [step(b, values[k], values[k + 1]) for k in range(0, len(values) - 1, 2)]
        values = paired + ([values[-1]] if len(values) % 2 else [])
    return values[0]
