"""Row normalization in place: `e / sum(e)` with `e` computed once per element.

A fused softmax is `divide(e, broadcast(reduce_sum(e)))` with `e = exp(x - max)`.
Hoisting (elemental/hoisting.py) alone emits three passes per row and evaluates `e` twice:

    m = max_k x[k];   s = sum_k exp(x[k] - m);   out[j] = exp(x[j] - m) / s

This emitter keeps `e` instead: the sum pass also stores each `e` into the output
row (which stays in cache), and the last pass scales it by the reciprocal:

    m = max_k x[k];   for k: out[k] = e = exp(x[k] - m); s += e;   r = 1 / s
    for j: out[j] *= r

Half the exponentials, and a multiply instead of a divide. `e * (1/s)` differs
from `e / s` by at most one rounding (≤ 1.5 ulp): far inside DESIGN.md's f32
and f64 tolerances. Only f32 and f64 qualify: a narrower output could not hold
`e` at compute precision between the passes.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...hlo.shape import Shape

from ..elemental.hoisting import make_hoister
from ..elemental.reduction import BlockPlan, block_elements, blocked_sum, simple_reducer
from ..elemental.vector_gen import accumulate_row, horizontal_sum, vector_generator
from ..llvm.ir_toolkit import splat
from ..llvm.kernel_ir import Buffer
from ..llvm.loops import emit_loop_nest, for_range, nest_order, partition_extent
from ..llvm.types import PTR, compute_type, lanes_for, storage_type

from . import streaming

_TYPES = ("f32", "f64")
# Vector bodies per iteration of the exp-and-sum loop: LLVM's choice (4) copies the
# inlined exp polynomial 4 times; 2 halves that code (and its compile time) and ran
# as fast on a softmax f32[4096,4096].
ROW_INTERLEAVE = 2
# The longest row kept on a kernel's stack (a thread's stack is megabytes; a row
# this long still fits the 1 MiB L2 next to the input row).
STACK_ROW_MAX_BYTES = 256 * 1024


def match(root, plan) -> object | None:
    """The reduce `R` when `root` is `e / broadcast(R)`, `R = reduce_sum(e)` over the
    minor-most dimension, hoisted per row; else None."""
    shape = root.shape
    if root.opcode != "divide" or not shape.is_array or shape.element_type not in _TYPES \
            or shape.rank < 1 or not shape.has_default_layout():
        return None
    num = root.operands[0]
    inner = shape.rank - 1
    for reduce, mapping in plan:
        if len(reduce.operands) == 2 and reduce.operands[0] is num \
                and tuple(reduce.dims()) == (inner,) and mapping == list(range(inner)) \
                and simple_reducer(reduce.to_apply) == "add" \
                and _reads_only(root.operands[1], reduce):
            return reduce
    return None


def why_not(root, plan) -> str | None:
    """Why `root` is not a row normalization (`match` gives no reduce), or None."""
    if match(root, plan) is not None:
        return None
    shape = root.shape
    if root.opcode != "divide":
        return "the root is not a divide"
    if not shape.is_array or shape.element_type not in _TYPES:
        return f"{shape.element_type} output (f32 and f64 only)"
    if shape.rank < 1:
        return "a scalar output"
    if not shape.has_default_layout():
        return "the output is not in the default layout"
    reduce = root.operands[1]
    while reduce.opcode in ("broadcast", "reshape", "bitcast") and len(reduce.operands) == 1:
        reduce = reduce.operands[0]
    if reduce.opcode != "reduce":
        return "the divisor is not a reduce seen through broadcasts and reshapes"
    inner = shape.rank - 1
    if len(reduce.operands) != 2:
        return "the divisor is a variadic reduce"
    if reduce.operands[0] is not root.operands[0]:
        return "the divisor does not reduce the numerator"
    if tuple(reduce.dims()) != (inner,):
        dims = ", ".join(str(d) for d in reduce.dims())
        return f"reduce over dimension{'s' * (len(reduce.dims()) != 1)} {dims}, not the " \
               f"minor dimension {inner}"
    if simple_reducer(reduce.to_apply) != "add":
        return "the divisor's reduce is not a sum"
    if not any(r is reduce for r, _ in plan):
        return "the sum is not hoisted out of the row loop (elemental/hoisting.py)"
    return "the sum's row does not follow the output's outer dimensions"


def _reads_only(value, reduce) -> bool:
    """True when `value` is `reduce` seen through broadcasts and reshapes only (the
    hoisting plan's mapping then says which root dims index it)."""
    while value is not reduce:
        if value.opcode not in ("broadcast", "reshape", "bitcast") or len(value.operands) != 1:
            return False
        value = value.operands[0]
    return True


def emit(kernel, root, reduce, gens, plan, output) -> int:
    """Emits the two-pass row normalization (module docstring) into `output`."""
    shape = root.shape
    inner = shape.rank - 1
    num = root.operands[0]
    others = [(r, m) for r, m in plan if r is not reduce]
    outer = set(range(inner))
    state: dict = {}

    # The scaling pass writes the row for the last time: a large output streams it
    # to memory (streaming.py). Then `e` waits in a row on the stack, not in the
    # output: an ordinary store to the output would first read its line from memory.
    # A row on the stack also lets the scaling pass redo a few elements (the last,
    # overlapping vector of a row that is not whole vectors: loops.vector_loop).
    row_bytes = shape.nbytes // max(shape.numel, 1) * shape.dims[-1]
    final, stash = output, output
    if row_bytes <= STACK_ROW_MAX_BYTES:    # (streaming must not read the output)
        final = streaming.streamed_outputs(kernel, shape, [output], prefetch_next_row=True)[0]
        stash = _stack_row(kernel, shape)
    # A streamed row is computed on vectors (elemental/vector_gen.py says why only those).
    on_vectors = final is not output
    base = make_hoister(others, gens, kernel if on_vectors else None) if others else None

    def hoist(b, opened: set, index: list) -> None:
        if base is not None:
            base(b, opened, index)
        if opened == outer and "scale" not in state:
            state["scale"] = _stash_and_sum(kernel, b, num, reduce, gens, index, shape, stash,
                                            on_vectors)

    def body(b, index):
        with kernel.scope():
            final.store(b, index, b.fmul(stash.load(b, index), state["scale"]))

    lanes = getattr(final, "lanes", None) or lanes_for(shape.element_type)

    def vector_body(b, index):
        scale = splat(b, state["scale"], lanes)
        final.store_vector(b, index, b.fmul(stash.load_vector(b, index, lanes), scale))

    minor_loop = getattr(final, "emit_minor_loop", None)
    if minor_loop is not None and len(nest_order(shape)) > 1 and shape.dims[-1] % final.chunk == 0:
        def minor_loop(b, lo, hi, index, dim, per_element, name, per_vector=None):
            # The scaling pass on whole vectors of the stack row, stored as lines.
            scale = splat(b, state["scale"], lanes)
            final.emit_vector_map(b, 0, shape.dims[-1], index, dim, stash,
                                  lambda b, line: b.fmul(line, scale), name)
    emit_loop_nest(kernel.b, shape, kernel.begin, kernel.end, body, hoist=hoist,
                   level_scope=kernel.scope, minor_loop=minor_loop,
                   vector_body=(lanes, vector_body) if on_vectors and shape.dims[-1] >= lanes
                   else None)
    # A single streamed row is split by chunks (streaming.partition_extent).
    return streaming.partition_extent([final]) or partition_extent(shape)


class _StackRow(Buffer):
    """One row of the output's shape in a stack array, addressed by the output's index
    (only the minor-most index counts)."""

    def address(self, b: ir.IRBuilder, index: list) -> ir.Value:
        return b.gep(self.pointer, [index[-1]], inbounds=True, source_etype=self.llvm_type)


def _stack_row(kernel, shape) -> Buffer:
    row = Shape(shape.element_type, (shape.dims[-1],))
    cell = kernel.alloca(ir.ArrayType(storage_type(shape.element_type), row.numel), "row.stash")
    cell.align = 64
    cell.type = PTR      # llvmlite types it `[n x T]*`; it is addressed by element
    return _StackRow(cell, row)


def _stash_and_sum(kernel, b, num, reduce, gens, index, shape, output,
                   on_vectors: bool) -> ir.Value:
    """for k: out[.., k] = e[.., k]; s += e  ->  1 / s (s starts at the reduce's init)."""
    inner = shape.rank - 1
    ty = compute_type(shape.element_type)
    acc = kernel.alloca(ty, "rowsum")
    b.store(gens[reduce.operands[1]](b, []), acc)
    size = shape.dims[inner]
    lanes = lanes_for(shape.element_type)
    vgen = vector_generator(kernel, gens, num, inner, lanes) if on_vectors else None
    if vgen is not None:       # on vectors, stashed and summed a vector at a time
        def vector_at(b, k):
            at = list(index[:inner]) + [k]
            value = vgen(b, at)
            output.store_vector(b, at, value)
            return value
        total = accumulate_row(kernel, size, lanes, vector_at,
                               lambda b, acc, v: b.fadd(acc, v, flags=("reassoc",)),
                               ir.Constant(ty, -0.0), "rowsum", pairwise=True)
        b.store(b.fadd(b.load(acc), horizontal_sum(b, total), flags=("reassoc",)), acc)
        return b.fdiv(ir.Constant(ty, 1.0), b.load(acc))

    def element(b, loop):
        at = list(index[:inner]) + [loop[inner]]
        value = gens[num](b, at)
        output.store(b, at, value)
        return value
    plan = BlockPlan([size], block_elements(shape.element_type, [size], ROW_INTERLEAVE))
    if plan.blocks > 1:       # a long row: blocks combined pairwise (elemental/pairwise_sum.py)
        total = blocked_sum(kernel, b, [inner], [size], plan, element, ty, "row",
                            interleave=ROW_INTERLEAVE)
        b.store(b.fadd(b.load(acc), total), acc)
        return b.fdiv(ir.Constant(ty, 1.0), b.load(acc))
    with for_range(b, 0, size, "row.k", interleave=ROW_INTERLEAVE) as k:
        with kernel.scope():
            b.store(b.fadd(b.load(acc), element(b, {inner: k}), flags=("reassoc",)), acc)
    return b.fdiv(ir.Constant(ty, 1.0), b.load(acc))
