"""Generators for `reduce` and `reduce-window`, and the emission of reducers.

A reduce generator computes one output element: accumulators start at the
init values, a loop nest walks the reduced dimensions (in the input's physical
order, so the innermost loop is unit-stride), and each step applies the reducer
computation. Accumulators live in entry-block allocas that mem2reg turns into
loop phis; for the common reducers (add, multiply, max, min, and, or of the two
parameters) the step is one instruction, and float add/multiply carry the
`reassoc` flag so LLVM's loop vectorizer may keep a vector of partial
accumulators and combine them with a tree at the end (XLA reassociates too).
Variadic reducers (argmax: value and index) run their computation per element.

A column reduce (the input's minor dimension kept) is not a generator: its
kernel streams the input once in memory order, adding several rows per step into
the output (`emit_column_reduce`).

A reduce-window generator loops over the window of one output element; a
window position in padding, or between base-dilated elements, contributes the
init value (XLA's definition), and is never read from memory.
"""
from __future__ import annotations

from .kernel_ir import KernelIR
from .llvm_types import compute_type, element_bytes, is_float
from .loops import for_range, i64, major_to_minor
from .scalar_ops import BINARY

# Vector bodies per iteration of a reduction's innermost loop: None lets LLVM choose
# (an explicit 2 made a softmax's max pass measurably slower).
REDUCE_INTERLEAVE = None

# Reducers emitted as one flagged instruction when the computation is just `op(p0, p1)`.
_SIMPLE = ("add", "multiply", "maximum", "minimum", "and", "or")


def simple_reducer(comp) -> str | None:
    """The opcode of a reducer `ROOT r = op(p0, p1)` on scalars, else None."""
    root = comp.root
    if root.opcode not in _SIMPLE or len(comp.instructions) != 3:
        return None
    if {o.opcode for o in root.operands} != {"parameter"} or len(set(map(id, root.operands))) != 2:
        return None
    return root.opcode


def make_reducer(kernel: KernelIR, comp, etypes: list[str]):
    """A function (b, accs, values) -> new accs emitting one step of `comp`."""
    from .elemental import apply_computation   # elemental imports this module
    simple = simple_reducer(comp) if len(etypes) == 1 else None
    if simple is not None:
        etype = etypes[0]
        if is_float(etype) and simple in ("add", "multiply"):
            op = "fadd" if simple == "add" else "fmul"
            return lambda b, accs, vals: [getattr(b, op)(accs[0], vals[0], flags=("reassoc",))]
        recipe = BINARY[simple]
        return lambda b, accs, vals: [recipe(b, accs[0], vals[0], etype)]
    return lambda b, accs, vals: apply_computation(kernel, comp, list(accs) + list(vals))


class _Accumulators:
    """Entry-block allocas holding the running values of a reduction."""

    def __init__(self, kernel: KernelIR, etypes: list[str]):
        self.cells = [kernel.alloca(compute_type(t), "acc") for t in etypes]

    def store(self, b, values) -> None:
        for cell, v in zip(self.cells, values):
            b.store(v, cell)

    def load(self, b) -> list:
        return [b.load(cell) for cell in self.cells]


def _loop_over(kernel, b, dims: list[int], sizes, body, name: str):
    """Nested loops over `dims` (outermost first); body(b, {dim: index})."""
    values: dict = {}

    def nest(level):
        if level == len(dims):
            body(b, dict(values))
            return
        innermost = level == len(dims) - 1
        with for_range(b, 0, sizes[dims[level]], f"{name}{dims[level]}",
                       interleave=REDUCE_INTERLEAVE if innermost else None) as i:
            values[dims[level]] = i
            nest(level + 1)
    with kernel.scope():
        nest(0)


def make_generator(kernel: KernelIR, instr, srcs):
    if instr.opcode == "reduce":
        return _reduce(kernel, instr, srcs)
    return _reduce_window(kernel, instr, srcs)


def _reduce(kernel, instr, srcs):
    n = len(instr.operands) // 2
    inputs, inits = srcs[:n], srcs[n:]
    in_shape = instr.operands[0].shape
    reduced = set(instr.dims())
    kept = [d for d in range(in_shape.rank) if d not in reduced]
    order = [d for d in major_to_minor(in_shape) if d in reduced]
    etypes = [o.shape.element_type for o in instr.operands[:n]]
    step = make_reducer(kernel, instr.to_apply, etypes)

    def gen(b, index):
        accs = _Accumulators(kernel, etypes)
        accs.store(b, [g(b, []) for g in inits])
        full = [None] * in_shape.rank
        for d, i in zip(kept, index):
            full[d] = i

        def body(b, loop):
            for d, i in loop.items():
                full[d] = i
            values = [g(b, list(full)) for g in inputs]
            accs.store(b, step(b, accs.load(b), values))
        _loop_over(kernel, b, order, in_shape.dims, body, "r")
        result = accs.load(b)
        return result[0] if n == 1 else result
    return gen


def _reduce_window(kernel, instr, srcs):
    n = len(instr.operands) // 2
    inputs, inits = srcs[:n], srcs[n:]
    in_shape = instr.operands[0].shape
    window = instr.attrs["window"].dims
    etypes = [o.shape.element_type for o in instr.operands[:n]]
    step = make_reducer(kernel, instr.to_apply, etypes)
    loop_dims = [d for d, w in enumerate(window) if w.size > 1]

    def gen(b, index):
        init_values = [g(b, []) for g in inits]
        accs = _Accumulators(kernel, etypes)
        accs.store(b, init_values)

        def body(b, loop):
            valid, source = window_source(b, index, loop, window, in_shape.dims)
            values = [g(b, source) for g in inputs]
            if valid is not None:
                values = [b.select(valid, v, init) for v, init in zip(values, init_values)]
            accs.store(b, step(b, accs.load(b), values))
        _loop_over(kernel, b, loop_dims, [w.size for w in window], body, "w")
        result = accs.load(b)
        return result[0] if n == 1 else result
    return gen


def window_source(b, index, loop: dict, window, in_dims):
    """(valid or None, clamped input index) of window position `loop` of output `index`.

    Input position = out * stride + k * window_dilation - pad_low, in the base-dilated
    input; it is a real element iff it lands on a multiple of base_dilation inside.
    """
    from .elemental import clamp_index, in_range
    valid, source = None, []
    for d, w in enumerate(window):
        k = loop.get(d, i64(0))
        pos = index[d] if w.stride == 1 else b.mul(index[d], i64(w.stride))
        if w.window_dilation != 1:
            k = b.mul(k, i64(w.window_dilation))
        pos = b.sub(b.add(pos, k), i64(w.pad_low))
        ok = None
        if w.base_dilation != 1:
            step = i64(w.base_dilation)
            ok = b.and_(b.icmp_signed(">=", pos, i64(0)),
                        b.icmp_signed("==", b.srem(pos, step), i64(0)))
            pos = b.sdiv(pos, step)
        # Without padding or base dilation a valid window never leaves the input.
        if w.pad_low > 0 or w.pad_high > 0 or w.base_dilation != 1:
            bounds = in_range(b, pos, 0, in_dims[d])
            ok = bounds if ok is None else b.and_(ok, bounds)
            pos = clamp_index(b, pos, 0, in_dims[d] - 1)
        if ok is not None:
            valid = ok if valid is None else b.and_(valid, ok)
        source.append(pos)
    return valid, source


# --- the streaming column reduce ---------------------------------------------------------

# Rows of the input one step of a column reduce adds into the accumulator row, by the
# cost of computing an input element. One row per step loads and stores the whole
# accumulator row for every input row: the stores fill the store queue while the input
# loads wait for memory, and the core keeps fewer misses in flight (f32[4096,4096] axis 0
# read ~25 GB/s on one core). Eight rows per step cut that traffic eightfold and give
# eight independent load streams (~43 GB/s, like a row reduce); sixteen streams were
# slower again. An expensive input expression is copied once per row of a step, so it
# gets fewer rows.
ROWS_PER_STEP = 8
ROWS_PER_STEP_COMPUTED = 4      # inputs with a few cheap elementwise ops
ROWS_PER_STEP_EXPENSIVE = 2     # inputs with an expensive op or many ops
_CHEAP_OPS = 4


def is_column_reduce(instr) -> bool:
    """True when the input's minor-most physical dimension is kept: reading the input
    element by element for each output would stride through memory, so the kernel
    streams the input once instead, accumulating into the output."""
    in_shape = instr.operands[0].shape
    return in_shape.rank > 0 and in_shape.minor_to_major()[0] not in set(instr.dims()) \
        and bool(instr.dims())


def rows_per_step(instr) -> int:
    """How many input rows one step of the column reduce `instr` adds (see ROWS_PER_STEP)."""
    n = len(instr.operands) // 2
    ops, expensive, seen = 0, False, set()
    stack = list(instr.operands[:n])
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        kind = node.info.kind
        if kind not in ("leaf", "movement"):
            ops += 1
            expensive = expensive or node.info.expensive or not node.info.is_elementwise
        stack.extend(node.operands)
    if ops == 0:
        return ROWS_PER_STEP
    if expensive or ops > _CHEAP_OPS:
        return ROWS_PER_STEP_EXPENSIVE
    return ROWS_PER_STEP_COMPUTED


def emit_column_reduce(kernel: KernelIR, instr, srcs, outputs) -> int:
    """out = init; then, walking the input in memory order, out[kept] = f(out[kept], in).

    `[begin, end)` ranges over one kept dimension (see _Partition), so the partitions
    write disjoint cache lines of the output and never race. The innermost reduced
    dimension ("rows") advances R = rows_per_step() rows per step, and the rows of a step
    are combined before they meet the accumulator:

        for i in [0, rows - rows % R, step R):        # reduced
          for j in [begin, end):                      # kept, unit stride: vectorized
            out[j] = out[j] + ((in[i, j] + in[i+1, j]) + (in[i+2, j] + in[i+3, j]))
        for i in [rows - rows % R, rows):             # the remaining rows, one at a time
          for j in [begin, end):
            out[j] = out[j] + in[i, j]

    Summation order: each output element sums its rows in row order, R at a time as a
    balanced tree (pairwise within the step, which also keeps the rounding error low);
    it never depends on the thread count, because the partitions split the kept
    dimension, not the rows. A reducer that is not one simple associative op (argmax)
    is applied row by row in order.
    """
    n = len(instr.operands) // 2
    inputs, inits = srcs[:n], srcs[n:]
    in_shape = instr.operands[0].shape
    out_shape = outputs[0].shape
    reduced = set(instr.dims())
    kept = [d for d in range(in_shape.rank) if d not in reduced]
    etypes = [o.shape.element_type for o in instr.operands[:n]]
    step = make_reducer(kernel, instr.to_apply, etypes)
    tree = n == 1 and simple_reducer(instr.to_apply) is not None
    b = kernel.b
    part = _Partition(b, kernel, out_shape, outputs)
    init_values = [g(b, []) for g in inits]
    full: list = [None] * in_shape.rank

    def init_level(level):
        if level == out_shape.rank:
            for out, value in zip(outputs, init_values):
                out.store(b, [full[d] for d in kept], value)
            return
        k = major_to_minor(out_shape)[level]
        with for_range(b, *part.bounds(k), f"ci{k}") as i:
            full[kept[k]] = i
            init_level(level + 1)
    init_level(0)

    order = major_to_minor(in_shape)
    row_dim = [d for d in order if d in reduced][-1]

    def accumulate(b, rows):
        with kernel.scope():
            out_index = [full[d] for d in kept]
            values = []
            for row in rows:
                full[row_dim] = row
                values.append([g(b, list(full)) for g in inputs])
            accs = [out.load(b, out_index) for out in outputs]
            if tree:
                accs = step(b, accs, _combine_pairwise(b, step, values))
            else:
                for value in values:
                    with kernel.scope():     # a reducer's own values are memoized per step
                        accs = step(b, accs, value)
            for out, value in zip(outputs, accs):
                out.store(b, out_index, value)

    def nest(level, rows):
        if level == len(order):
            accumulate(b, rows)
            return
        d = order[level]
        if d == row_dim:
            _row_steps(b, in_shape.dims[d], rows_per_step(instr), f"c{d}",
                       lambda rows: nest(level + 1, rows))
            return
        bounds = part.bounds(kept.index(d)) if d in kept else (0, in_shape.dims[d])
        with for_range(b, *bounds, f"c{d}") as i:
            full[d] = i
            nest(level + 1, rows)
    nest(0, None)
    return part.extent


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


def _combine_pairwise(b, step, values: list) -> list:
    """values[0] op values[1] op ... as a balanced tree (neighbours first)."""
    while len(values) > 1:
        paired = [step(b, values[k], values[k + 1]) for k in range(0, len(values) - 1, 2)]
        values = paired + ([values[-1]] if len(values) % 2 else [])
    return values[0]
