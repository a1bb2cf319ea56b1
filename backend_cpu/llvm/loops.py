"""Loop emission: counted loops, and the loop nest that materializes an array (and
the i64 index arithmetic they use: constants, clamping, range checks).

`for_range` is the one loop shape the backend emits (a header with the
induction phi, a body, a latch back to the header), written so LLVM's loop
passes see canonical counted loops and can vectorize the innermost one.

`emit_loop_nest` walks every index of an array shape in *physical* order (the
minor-most dimension of the layout innermost, so consecutive iterations touch
consecutive addresses and the loop vectorizer can use full-width vectors). The
outermost loop runs over `[begin, end)` only: that is the kernel ABI's share of
the outermost parallel dimension, so one kernel body serves every partition.

    for i0 in [begin, end):          # partitioned across threads
      for i1 in [0, d1):
        for i2 in [0, d2):           # vectorized by LLVM
          body([i0, i1, i2])
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import llvmlite.ir as ir

from .types import I64, is_signed


def i64(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def clamp_index(b: ir.IRBuilder, value: ir.Value, lo: int, hi: int) -> ir.Value:
    """min(max(value, lo), hi) on signed i64."""
    value = b.select(b.icmp_signed("<", value, i64(lo)), i64(lo), value)
    return b.select(b.icmp_signed(">", value, i64(hi)), i64(hi), value)


def index_to_i64(b: ir.IRBuilder, value: ir.Value, etype: str) -> ir.Value:
    """An integer element used as an index, widened to i64 by its signedness."""
    if value.type.width == 64:
        return value
    return b.sext(value, I64) if is_signed(etype) else b.zext(value, I64)


def in_range(b: ir.IRBuilder, value: ir.Value, lo: int, hi: int) -> ir.Value:
    """lo <= value < hi."""
    return b.and_(b.icmp_signed(">=", value, i64(lo)), b.icmp_signed("<", value, i64(hi)))


def loop_hints(module: ir.Module, interleave: int | None,
               scalar: bool = False) -> ir.values.MDValue:
    """A loop ID (`!llvm.loop`) asking the vectorizer for `interleave` vector bodies
    per iteration (None: the vectorizer decides) and no unrolling after it; with
    `scalar`, no vectorization either.

    A loop ID refers to itself (`!7 = !{!7, !8}`), which makes it unique to its loop;
    llvmlite's `add_metadata` would hash (and share) nodes, so it is built directly.
    """
    hints = []
    if interleave is not None:
        hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.interleave.count"),
                                          ir.Constant(ir.IntType(32), interleave)]))
    if scalar:
        hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
                                          ir.Constant(ir.IntType(1), 0)]))
    hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")]))
    loop_id = ir.values.MDValue(module, hints, name=str(len(module.metadata)))
    loop_id.operands = (loop_id, *hints)
    return loop_id


# Loops that run at least this many iterations (a compile-time count) are never
# fully unrolled by LLVM; partial unrolling only copies their (already interleaved)
# vector bodies again, which about doubles what the optimizer and the code generator
# work through for no measurable speed on these streaming loops. Such a loop gets
# LONG_LOOP_INTERLEAVE vector bodies instead (a loop ID that disables unrolling also
# stops the vectorizer's own interleaving, and a reduction then has one accumulator).
NO_UNROLL_TRIP_COUNT = 256
LONG_LOOP_INTERLEAVE = 4


def _long_loop(start: ir.Value, stop: ir.Value, step: int) -> bool:
    """True if the loop's trip count is a constant >= NO_UNROLL_TRIP_COUNT."""
    if not (isinstance(start, ir.Constant) and isinstance(stop, ir.Constant)):
        return False
    if not (isinstance(start.constant, int) and isinstance(stop.constant, int)):
        return False
    return (stop.constant - start.constant) // step >= NO_UNROLL_TRIP_COUNT


def loops_left_to_llvm(fn: ir.Function) -> int:
    """How many innermost loops of `fn` (emitted by for_range) wait for LLVM's loop
    vectorizer: neither written on vectors (`vectorized=True`) nor meant to stay
    scalar (`scalar=True`). Zero lets the compile driver skip LLVM's heavy pipeline."""
    return getattr(fn, "xlapy_loops_left", 0)


def _enter_loop(fn: ir.Function) -> list:
    """Opens a loop in the bookkeeping of `loops_left_to_llvm`; its record."""
    stack = fn.__dict__.setdefault("xlapy_open_loops", [])
    if stack:
        stack[-1][0] = True               # the enclosing loop is not innermost
    record = [False]                      # [has an inner loop]
    stack.append(record)
    return record


def _leave_loop(fn: ir.Function, record: list, handled: bool) -> None:
    fn.xlapy_open_loops.pop()
    if not record[0] and not handled:
        fn.xlapy_loops_left = loops_left_to_llvm(fn) + 1


@contextmanager
def for_range(b: ir.IRBuilder, start, stop, name: str = "i", step: int = 1,
              interleave: int | None = None, scalar: bool = False,
              vectorized: bool = False, unroll: bool = True) -> Iterator[ir.Value]:
    """`for i in range(start, stop, step)` with an i64 induction variable.

    The body is emitted inside the `with` block; on exit the builder is
    positioned after the loop. `interleave`, `scalar`: see `loop_hints` (None and
    False: LLVM decides). A long loop (NO_UNROLL_TRIP_COUNT) is interleaved but not
    unrolled. `vectorized`: the body already works on vectors (elemental/vector_gen.py), so
    LLVM's vectorizer is told to leave it alone, as with `scalar`. `unroll=False`:
    never unrolled, not even fully (the outer loops of a loop nest: see
    emit_loop_nest).
    """
    start = i64(start) if isinstance(start, int) else start
    stop = i64(stop) if isinstance(stop, int) else stop
    scalar = scalar or vectorized
    fn = b.function
    record = _enter_loop(fn)
    pre = b.block
    header = b.append_basic_block(f"{name}.header")
    body = b.append_basic_block(f"{name}.body")
    exit_ = b.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    index = b.phi(I64, name=name)
    index.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", index, stop), body, exit_)
    b.position_at_end(body)
    yield index
    nxt = b.add(index, i64(step), name=f"{name}.next", flags=("nsw", "nuw"))
    index.add_incoming(nxt, b.block)
    latch = b.branch(header)
    if interleave is None and _long_loop(start, stop, step):
        interleave = LONG_LOOP_INTERLEAVE
    if interleave is not None or scalar or not unroll:
        latch.set_metadata("llvm.loop", loop_hints(b.block.function.module, interleave, scalar))
    b.position_at_end(exit_)
    _leave_loop(fn, record, handled=scalar)


def major_to_minor(shape) -> list[int]:
    """Logical dimensions of an array shape from the major-most to the minor-most."""
    return list(reversed(shape.minor_to_major()))


def nest_order(shape) -> list[int]:
    """The dimensions a loop nest over `shape` opens, outermost first: major to minor,
    without the leading size-1 ones (their index is 0), so that `[begin, end)` splits
    a dimension that can be split (f32[1,128,768]: the 128 rows, not the batch of 1)."""
    order = major_to_minor(shape)
    while len(order) > 1 and shape.dims[order[0]] == 1:
        order = order[1:]
    return order


def partition_extent(shape) -> int:
    """The size of the dimension `[begin, end)` ranges over (1 for a scalar)."""
    if shape.rank == 0:
        return 1
    return shape.dims[nest_order(shape)[0]]


def emit_loop_nest(b: ir.IRBuilder, shape, begin: ir.Value, end: ir.Value,
                   body: Callable[[ir.IRBuilder, list], None], name: str = "e",
                   tile_dim: int | None = None, tile: int = 64, hoist=None,
                   level_scope=None, minor_loop=None, vector_body=None) -> None:
    """Calls `body(b, index)` for every logical index of `shape`, outermost in [begin, end).

    With `tile_dim` (a dimension other than the minor-most one), that dimension and
    the minor-most one are walked in tile x tile blocks, so a kernel that reads its
    input transposed touches a tile of cache lines on both sides at a time:

        for a0 in [.., step tile):  ...  for b0 in [0, B, step tile):
            for a in [a0, min(a0 + tile, ..)):  for b in [b0, min(b0 + tile, B)):

    The loops around the minor-most one are never unrolled: LLVM fully unrolls
    nests with small constant trip counts, and then vectorizes the straight-line
    copies (a layout copy f32[3,3,8,16] -> 1152 copies of its body: 108 ms of O3,
    for a kernel that runs in microseconds either way). The minor loop is
    vectorized and unrolled as LLVM sees fit.

    With `hoist` (see elemental/hoisting.py), `hoist(b, opened_dims, index)` runs at the top of
    the nest and at the top of every loop body, inside `level_scope()`.

    With `minor_loop` (untiled nests only; see emitters/streaming.py), the minor-most loop is
    `minor_loop(b, lo, hi, index, dim, per_element, name, per_vector=...)` instead of
    a `for_range`: it calls `per_element(b, i)` wherever it wants the body for element
    i emitted (and `per_vector(b, i)` for elements i .. i + lanes - 1, when given).

    With `vector_body = (lanes, fn)` (untiled nests only), `fn(b, index)` emits the
    body for `lanes` consecutive elements along the minor-most dimension at once
    (elemental/vector_gen.py): the minor loop is a `vector_loop`, and `body` is not used there.
    """
    if tile_dim is not None:
        minor_loop = vector_body = None
    if hoist is not None and tile_dim is None:
        return _hoisting_nest(b, shape, begin, end, body, name, hoist, level_scope, minor_loop,
                              vector_body)
    if shape.rank == 0:
        # A scalar is one partition of extent 1: run the body iff it is ours.
        with for_range(b, begin, end, f"{name}.s"):
            body(b, [])
        return
    order = nest_order(shape)
    minor = order[-1]
    if tile_dim == minor or tile_dim not in order:
        tile_dim = None
    index: list = [i64(0)] * shape.rank
    outer_of: dict = {}

    def bounds(level, dim):
        return (begin, end) if level == 0 else (i64(0), i64(shape.dims[dim]))

    def inner_range(dim, lo, hi):
        start = outer_of[dim]
        stop = b.add(start, i64(tile))
        return start, b.select(b.icmp_signed("<", stop, hi), stop, hi)

    def nest(level: int) -> None:
        if level == len(order):
            body(b, list(index))
            return
        dim = order[level]
        lo, hi = bounds(level, dim)
        if tile_dim is not None and dim == tile_dim:
            with for_range(b, lo, hi, f"{name}.t{dim}", step=tile, unroll=False) as t:
                outer_of[dim] = t
                nest(level + 1)
            return
        if tile_dim is not None and dim == minor:
            with for_range(b, lo, hi, f"{name}.t{dim}", step=tile, unroll=False) as t:
                outer_of[dim] = t
                a_lo, a_hi = bounds(order.index(tile_dim), tile_dim)
                with for_range(b, *inner_range(tile_dim, a_lo, a_hi), f"{name}.d{tile_dim}",
                               unroll=False) as a:
                    index[tile_dim] = a
                    with for_range(b, *inner_range(dim, lo, hi), f"{name}.d{dim}") as i:
                        index[dim] = i
                        body(b, list(index))
            return
        if level == len(order) - 1 and (minor_loop is not None or vector_body is not None):
            def per_element(b, i):
                index[dim] = i
                body(b, list(index))

            def per_vector(b, i):
                index[dim] = i
                vector_body[1](b, list(index))
            _minor_loop(b, lo, hi, index, dim, per_element, f"{name}.d{dim}", minor_loop,
                        vector_body and (vector_body[0], per_vector))
            return
        with for_range(b, lo, hi, f"{name}.d{dim}",
                       unroll=level == len(order) - 1) as i:   # outer loops: see above
            index[dim] = i
            nest(level + 1)

    nest(0)


def _minor_loop(b, lo, hi, index, dim, per_element, name, minor_loop, vector) -> None:
    """The minor-most loop: `minor_loop` when given (streaming), else the vector loop
    with its scalar tail (`vector` = (lanes, per_vector))."""
    if minor_loop is not None:
        if vector is None:
            minor_loop(b, lo, hi, index, dim, per_element, name)
        else:
            minor_loop(b, lo, hi, index, dim, per_element, name, per_vector=vector[1])
        return
    vector_loop(b, lo, hi, vector[0], vector[1], name)


# Vector bodies per iteration of a loop written on vectors: two independent bodies
# side by side give the core two dependency chains to overlap (a tanh-GELU body is
# ~80 cycles of latency: f32[64,256] ran in 19.6 us with one body, ~15 with two).
VECTOR_UNROLL = 2


def vector_loop(b: ir.IRBuilder, lo, hi, lanes: int, per_vector, name: str) -> None:
    """`per_vector(b, i)` on vectors of elements i .. i + lanes - 1 covering [lo, hi):
    VECTOR_UNROLL whole vectors per iteration, the whole vectors left over, and when
    hi - lo is not whole vectors, the vector that ends at hi (it overlaps the one
    before it, so `per_vector` must store values that do not depend on what is
    already there; it starts at 0 at the earliest: the dimension holds a vector)."""
    lo = i64(lo) if isinstance(lo, int) else lo
    hi = i64(hi) if isinstance(hi, int) else hi
    step = VECTOR_UNROLL * lanes
    if isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant):
        count = hi.constant - lo.constant
        whole = i64(lo.constant + count - count % lanes)
        unrolled = i64(lo.constant + count - count % step)
    else:
        count = b.sub(hi, lo)
        whole = b.add(lo, b.mul(b.sdiv(count, i64(lanes)), i64(lanes)))
        unrolled = b.add(lo, b.mul(b.sdiv(count, i64(step)), i64(step)))
    with for_range(b, lo, unrolled, f"{name}.v", step=step, vectorized=True) as i:
        for u in range(VECTOR_UNROLL):
            per_vector(b, b.add(i, i64(u * lanes), flags=("nsw",)) if u else i)
    if not (isinstance(whole, ir.Constant) and whole.constant == unrolled.constant):
        with for_range(b, unrolled, whole, f"{name}.v1", step=lanes, vectorized=True) as i:
            per_vector(b, i)
    if isinstance(whole, ir.Constant):
        if whole.constant != hi.constant:
            per_vector(b, i64(max(hi.constant - lanes, 0)))
        return
    last = b.sub(hi, i64(lanes))
    with b.if_then(b.icmp_signed("<", whole, hi)):
        per_vector(b, b.select(b.icmp_signed("<", last, i64(0)), i64(0), last))


def _hoisting_nest(b, shape, begin, end, body, name, hoist, level_scope, minor_loop,
                   vector_body=None) -> None:
    """The untiled nest, calling `hoist` as each loop opens (see emit_loop_nest)."""
    order = nest_order(shape) if shape.rank else []
    fixed = set(range(shape.rank)) - set(order)     # leading size-1 dims: index 0
    index: list = [i64(0) if d in fixed else None for d in range(shape.rank)]
    hoist(b, set(fixed), list(index))
    if shape.rank == 0:
        with for_range(b, begin, end, f"{name}.s"):
            body(b, [])
        return

    def nest(level: int) -> None:
        dim = order[level]
        lo, hi = (begin, end) if level == 0 else (0, shape.dims[dim])

        def per_element(b, i):
            index[dim] = i
            with level_scope():
                hoist(b, fixed | set(order[:level + 1]), index)
                if level + 1 < len(order):
                    nest(level + 1)
                else:
                    body(b, list(index))
        def per_vector(b, i):
            index[dim] = i
            with level_scope():
                hoist(b, fixed | set(order), index)   # (nothing left to hoist in the minor loop)
                vector_body[1](b, list(index))
        if level == len(order) - 1 and (minor_loop is not None or vector_body is not None):
            _minor_loop(b, lo, hi, index, dim, per_element, f"{name}.d{dim}", minor_loop,
                        vector_body and (vector_body[0], per_vector))
            return
        with for_range(b, lo, hi, f"{name}.d{dim}", unroll=level == len(order) - 1) as i:
            per_element(b, i)
    nest(0)
