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

A float sum longer than one block (`BlockPlan`: BLOCK_CHAIN additions per
accumulator lane LLVM's vectorizer keeps) is cut into blocks at one reduced
loop; each block is summed from -0.0 by that same vectorized loop, the block
sums are combined pairwise (pairwise_sum.py), and the init is added last, so
the error grows like log(n) instead of n / lanes. An f16 sum or product
accumulates in f32 and is rounded once. Integer sums, max, min and f32/f64
products keep the one-accumulator loop: exact, or (products) no better in a tree.

A column reduce (the input's minor dimension kept) is not a generator: its
kernel streams the input once in memory order (emitters/column_reduce.py).

A reduce-window generator loops over the window of one output element,
starting from the init value; a window position in padding, or between
base-dilated elements, is skipped (XLA's definition: the init value enters once
per output element, not once per padded position), and is never read from memory.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...hlo.dtypes import dtype
from ...hlo.opcodes import OPCODES

from .. import target as targets
from ..llvm.kernel_ir import KernelIR
from ..llvm.loops import (LONG_LOOP_INTERLEAVE, NO_UNROLL_TRIP_COUNT, clamp_index, for_range, i64,
                          in_range, major_to_minor)
from ..llvm.types import compute_type, is_complex, is_float, lanes_for

from . import complex_ops
from .generators import apply_computation, register_looping
from .pairwise_sum import BLOCK_CHAIN, LLVM_ACCUMULATORS, Levels, is_pairwise, wide_type
from .scalar_ops import BINARY

# Vector bodies per iteration of a reduction's innermost loop: None lets LLVM choose
# (an explicit 2 made a softmax's max pass measurably slower).
REDUCE_INTERLEAVE = None



def simple_reducer(comp) -> str | None:
    """The opcode of a reducer `ROOT r = op(p0, p1)` on scalars, else None: emitted as
    one flagged instruction (the opcodes the table flags `reducer`)."""
    root = comp.root
    if not OPCODES[root.opcode].reducer or len(comp.instructions) != 3:
        return None
    if {o.opcode for o in root.operands} != {"parameter"} or len(set(map(id, root.operands))) != 2:
        return None
    return root.opcode


def make_reducer(kernel: KernelIR, comp, etypes: list[str]):
    """A function (b, accs, values) -> new accs emitting one step of `comp`."""
    simple = simple_reducer(comp) if len(etypes) == 1 else None
    if simple is not None:
        etype = etypes[0]
        if is_float(etype) and simple in ("add", "multiply"):
            op = "fadd" if simple == "add" else "fmul"
            return lambda b, accs, vals: [getattr(b, op)(accs[0], vals[0], flags=("reassoc",))]
        if is_complex(etype):       # add, multiply on {re, im}; the rest, as written
            if simple in ("add", "multiply"):
                return lambda b, accs, vals: [complex_ops.binary(b, simple, accs[0], vals[0])]
            return lambda b, accs, vals: apply_computation(kernel, comp, list(accs) + list(vals))
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
    reducer = simple_reducer(instr.to_apply) if n == 1 else None
    if is_pairwise(reducer, etypes[0]) or (reducer == "multiply" and wide_type(etypes[0])):
        return _float_reduce(kernel, instr, srcs, reducer, kept, order)
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


def _float_reduce(kernel, instr, srcs, reducer: str, kept: list[int], order: list[int]):
    """A float sum (or an f16 product): accumulated in the wide type (f32 for f16), and
    for a sum longer than one block, in blocks combined pairwise (pairwise_sum.py)."""
    source, init = srcs
    in_shape = instr.operands[0].shape
    etype = in_shape.element_type
    ty = compute_type(etype)
    wide = wide_type(etype) or ty
    sizes = [in_shape.dims[d] for d in order]
    # A kept minor dimension (a column reduce computed per element, in a fusion that
    # could not take emitters/column_reduce.py's walk) leaves a strided inner loop: one chain.
    strided = in_shape.rank > 0 and in_shape.minor_to_major()[0] in kept
    plan = BlockPlan(sizes, block_elements(etype, sizes, 0 if strided else LLVM_ACCUMULATORS)) \
        if reducer == "add" else None
    op = "fadd" if reducer == "add" else "fmul"

    def widen(b, value):
        return b.fpext(value, wide) if wide is not ty else value

    def gen(b, index):
        full = [None] * in_shape.rank
        for d, i in zip(kept, index):
            full[d] = i

        def element(b, loop):
            for d, i in loop.items():
                full[d] = i
            return widen(b, source(b, list(full)))
        start = widen(b, init(b, []))
        if plan is not None and plan.blocks > 1:
            total = blocked_sum(kernel, b, order, sizes, plan, element, wide, "r")
            result = b.fadd(start, total)
        else:
            acc = kernel.alloca(wide, "acc")
            b.store(start, acc)

            def body(b, loop):
                b.store(getattr(b, op)(b.load(acc), element(b, loop), flags=("reassoc",)), acc)
            _loop_over(kernel, b, order, in_shape.dims, body, "r")
            result = b.load(acc)
        return b.fptrunc(result, ty) if wide is not ty else result
    return gen


def block_elements(etype: str, sizes: list[int], interleave: int = LLVM_ACCUMULATORS) -> int:
    """Elements per block of a generator's sum: BLOCK_CHAIN additions per accumulator
    lane, counting the accumulators LLVM's vectorizer keeps (`interleave` vectors of the
    target's width) when the innermost loop is long enough to fill them (else one: a
    short innermost loop stays scalar; `interleave` 0: the loop is not vectorized)."""
    lanes = lanes_for(etype)
    inner = sizes[-1] if sizes else 1
    if not interleave:
        return BLOCK_CHAIN
    if inner % (interleave * lanes) and not targets.current().has("avx"):
        # A loop whose length is not whole vector bodies needs a tail: in an optsize
        # kernel (a small output, compiler.py) LLVM may only fold it into masked
        # vectors, which SSE4.2 (and NEON) lack: the loop may then stay one scalar chain.
        return BLOCK_CHAIN
    accumulators = next((a for a in (interleave * lanes, lanes) if inner >= a), 1)
    return BLOCK_CHAIN * accumulators


class BlockPlan:
    """How a nest of reduced loops (`sizes`, outermost first) is cut into blocks of at
    most `block` elements: the loops above `split` run whole, loop `split` runs in
    `chunks` chunks of `chunk` iterations (the last one shorter if it does not divide),
    and the loops below it run whole inside each chunk. `blocks` counts them all
    (1: the whole nest fits one block, and there is no split)."""

    def __init__(self, sizes: list[int], block: int):
        inner, j = 1, len(sizes)
        while j > 0 and inner * sizes[j - 1] <= block:
            inner *= sizes[j - 1]
            j -= 1
        self.blocks, self.split = 1, None
        if j == 0:
            return
        self.split = j - 1
        self.chunk = max(1, block // inner)
        self.chunks = -(-sizes[self.split] // self.chunk)
        self.blocks = self.chunks
        for size in sizes[:self.split]:
            self.blocks *= size


def blocked_sum(kernel, b, order: list[int], sizes: list[int], plan: BlockPlan, element,
                ty: ir.Type, name: str, interleave: int | None = None) -> ir.Value:
    """The float sum of `element(b, {dim: index})` over the reduced loops `order` (sizes
    `sizes`), in the blocks of `plan`, each summed by a reassociable loop that LLVM
    vectorizes, combined pairwise. Block number = (outer loop indices, chunk) read as
    one mixed-radix number, so the pairwise counter needs no state of its own.
    `interleave`: the innermost loop's vector bodies (None: REDUCE_INTERLEAVE, or a
    long loop's for a long chunk loop)."""
    levels = Levels(kernel, ty, plan.blocks, name)
    acc = kernel.alloca(ty, f"{name}.block")
    loop: dict = {}
    last = len(sizes) - 1

    def inner(level):
        if level > last:
            with kernel.scope():
                b.store(b.fadd(b.load(acc), element(b, dict(loop)), flags=("reassoc",)), acc)
            return
        with for_range(b, 0, sizes[level], f"{name}{order[level]}",
                       interleave=(interleave or REDUCE_INTERLEAVE) if level == last else None) as i:
            loop[order[level]] = i
            inner(level + 1)

    def one_block(lo, hi, q, k, hint):
        """The block of chunk `q` (iterations [lo, hi) of the split loop)."""
        b.store(ir.Constant(ty, -0.0), acc)              # -0.0: the identity of a float sum
        with kernel.scope():
            with for_range(b, lo, hi, f"{name}{order[plan.split]}", interleave=hint) as i:
                loop[order[plan.split]] = i
                inner(plan.split + 1)
        block = q if k is None else b.add(b.mul(k, i64(plan.chunks), flags=("nsw", "nuw")), q,
                                          flags=("nsw", "nuw"))
        levels.push(b, block, b.load(acc))

    def chunked(k):
        size, chunk = sizes[plan.split], plan.chunk
        innermost = plan.split == last
        # The chunk loop's trip count is not a constant LLVM sees: give an innermost
        # one the interleave of a long loop (loops.NO_UNROLL_TRIP_COUNT) by hand.
        hint = interleave if innermost else None
        if hint is None and innermost:
            hint = LONG_LOOP_INTERLEAVE if chunk >= NO_UNROLL_TRIP_COUNT else REDUCE_INTERLEAVE
        # An innermost loop of a run-time length may need its tail folded into masked
        # vectors, which optsize kernels on targets without masked loads (SSE4.2) turn
        # into a scalar loop: the short last chunk is emitted on its own instead.
        whole = plan.chunks - 1 if innermost and size % chunk else plan.chunks
        with for_range(b, 0, whole, f"{name}.chunk", unroll=False) as q:
            lo = b.mul(q, i64(chunk), flags=("nsw", "nuw"))
            hi = b.add(lo, i64(chunk), flags=("nsw", "nuw"))
            if size % chunk and not innermost:
                hi = b.select(b.icmp_signed("<", hi, i64(size)), hi, i64(size))
            one_block(lo, hi, q, k, hint)
        if whole < plan.chunks:
            one_block(i64(whole * chunk), i64(size), i64(whole), k, interleave)

    def outer(level, k):
        if level == plan.split:
            chunked(k)
            return
        with for_range(b, 0, sizes[level], f"{name}{order[level]}", unroll=False) as i:
            loop[order[level]] = i
            outer(level + 1, i if k is None else
                  b.add(b.mul(k, i64(sizes[level]), flags=("nsw", "nuw")), i, flags=("nsw", "nuw")))
    with kernel.scope():
        outer(0, None)
    return levels.total(b)


def _reduce_window(kernel, instr, srcs):
    n = len(instr.operands) // 2
    inputs, inits = srcs[:n], srcs[n:]
    in_shape = instr.operands[0].shape
    window = instr.attrs["window"].dims
    etypes = [o.shape.element_type for o in instr.operands[:n]]
    step = make_reducer(kernel, instr.to_apply, etypes)
    loop_dims = [d for d, w in enumerate(window) if w.size > 1]
    # Padding and dilation holes must leave the accumulators as they are: a one-op
    # reducer reads its identity there (off the accumulator's dependency chain),
    # any other keeps the old accumulator.
    identity = _identity(simple_reducer(instr.to_apply), etypes[0]) if n == 1 else None

    def gen(b, index):
        init_values = [g(b, []) for g in inits]
        accs = _Accumulators(kernel, etypes)
        accs.store(b, init_values)

        def body(b, loop):
            valid, source = window_source(b, index, loop, window, in_shape.dims)
            values = [g(b, source) for g in inputs]
            if valid is not None and identity is not None:
                values = [b.select(valid, values[0], identity)]
            old = accs.load(b)
            new = step(b, old, values)
            if valid is not None and identity is None:
                new = [b.select(valid, v, a) for v, a in zip(new, old)]
            accs.store(b, new)
        _loop_over(kernel, b, loop_dims, [w.size for w in window], body, "w")
        result = accs.load(b)
        return result[0] if n == 1 else result
    return gen


def _identity(reducer: str | None, etype: str) -> ir.Constant | None:
    """x op identity == x for every x (NaN and signed zeros included), or None."""
    d = dtype(etype)
    ty = compute_type(etype)
    if d.is_complex:
        return complex_ops.zero(etype) if reducer == "add" else None
    if reducer == "add":
        return ir.Constant(ty, -0.0 if d.is_float else 0)
    if reducer == "multiply":
        return ir.Constant(ty, 1.0 if d.is_float else 1)
    if reducer in ("and", "or") and not d.is_float:
        return ir.Constant(ty, (1 if d.is_pred else -1) if reducer == "and" else 0)
    if reducer in ("maximum", "minimum"):
        if d.is_float:
            return ir.Constant(ty, float("-inf") if reducer == "maximum" else float("inf"))
        if d.is_pred:
            return ir.Constant(ty, 0 if reducer == "maximum" else 1)
        lo = -(2 ** (d.bits - 1)) if d.is_signed else 0
        hi = 2 ** (d.bits - 1) - 1 if d.is_signed else -1      # (unsigned: all ones)
        return ir.Constant(ty, lo if reducer == "maximum" else hi)
    return None


def window_source(b, index, loop: dict, window, in_dims):
    """(valid or None, clamped input index) of window position `loop` of output `index`.

    Input position = out * stride + k * window_dilation - pad_low, in the base-dilated
    input; it is a real element iff it lands on a multiple of base_dilation inside.
    """
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


register_looping(("reduce", "reduce-window"), make_generator)
