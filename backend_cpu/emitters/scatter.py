"""Scatter and select-and-scatter: kernels that update their output in place, in parallel
where the partitions provably never touch the same element.

Both ops first initialize the output (scatter copies its operand, select-and-scatter
fills it with the init value), then walk their updates (scatter) or source elements
(select-and-scatter) in order and combine each into one target element:

    out = operand                            # or init
    for u in updates (in the evaluator's order):
      t = target(u)                          # data-dependent for a scatter
      if t is valid:  out[t] = combine(out[t], update[u])

Duplicate targets make the loop a chain of read-modify-writes, so threads may only
split it along an output dimension whose coordinate every update *names* rather than
computes. Then `[begin, end)` is a slice of that dimension ("the partition
dimension"), every partition walks all updates but only the part of each that falls
in its slice, and initializes that slice itself first: no two partitions ever write
the same element, and no partition reads what another one writes, so there is no
barrier between the initialization and the updates.

- Scatter: an operand dimension spanned by a whole update window dimension (the
  row width D of an embedding gradient, scatter-add of [N, D] rows into [V, D]).
  A window that covers the whole dimension fits only at start 0, so its target
  coordinate is the update's own window coordinate.
- Select-and-scatter: an operand dimension whose window has size 1, stride 1, no
  padding and no dilation (batch and channels of a max-pool gradient): source
  coordinate and target coordinate are the same there.

Each partition applies the updates of a target in the same order as a serial
loop, so the result does not depend on the thread count. When no dimension
qualifies, the kernel is one serial partition. A partition of the output's
minor-most dimension is a whole number of cache lines, so two threads never write
into the same line.

Every emitter takes `partitioned`: True when it is the kernel's root (it then uses
`[begin, end)` and returns the partition extent), False inside a multi-output
kernel that calls it once (it covers everything and returns 1).
"""
from __future__ import annotations

from itertools import product

import llvmlite.ir as ir

from ...hlo.shape import Shape

from ..elemental.generators import apply_computation
from ..elemental.reduction import window_source
from ..llvm.kernel_ir import linearize
from ..llvm.loops import for_range, i64, in_range, index_to_i64, major_to_minor
from ..llvm.types import I1, I64, PTR, compute_type, element_bytes, from_storage, to_storage

LINE_BYTES = 64
# The partition dimension is the major-most candidate with at least this many units
# (enough for a balanced split over the pool); failing that, the one with the most.
MIN_UNITS = 8
# Select-and-scatter: source elements whose targets are chosen per block (a stack
# array of offsets), and the largest window whose elements are unrolled.
SELECT_BLOCK = 128
MAX_UNROLLED_TAPS = 64


# --- partitions -------------------------------------------------------------------------------
class Partition:
    """The slice `[lo, hi)` of output dimension `dim` that this launch owns.

    A unit of `[begin, end)` is one index of `dim`, or one cache line of them when
    `dim` is the output's minor-most dimension. `dim` None: one serial partition.
    """

    def __init__(self, shape: Shape, dim: int | None):
        self.dim = dim
        self.unit = 1
        self.extent = 1
        if dim is not None:
            if dim == shape.minor_to_major()[0]:
                esize = shape.nbytes // shape.numel
                self.unit = max(1, LINE_BYTES // esize)
            self.extent = -(-shape.dims[dim] // self.unit)
        self.size = shape.dims[dim] if dim is not None else 0

    def bounds(self, kernel, partitioned: bool):
        """(lo, hi) of `dim` as LLVM values; None when not partitioned."""
        if self.dim is None:
            return None
        if not partitioned:
            return i64(0), i64(self.size)
        b = kernel.b
        lo = b.mul(kernel.begin, i64(self.unit))
        hi = b.mul(kernel.end, i64(self.unit))
        if self.size % self.unit:      # the last line of the dimension is partial
            hi = b.select(b.icmp_signed("<", hi, i64(self.size)), hi, i64(self.size))
        return lo, hi


def choose_partition(shape: Shape, candidates) -> Partition:
    """The partition over the best of `candidates` (output dimensions) for `shape`."""
    if not shape.is_array or shape.numel == 0:
        return Partition(shape, None)
    options = [Partition(shape, d) for d in major_to_minor(shape) if d in set(candidates)]
    options = [p for p in options if p.extent > 1]
    if not options:
        return Partition(shape, None)
    for p in options:
        if p.extent >= MIN_UNITS:
            return p
    return max(options, key=lambda p: p.extent)


# --- loops ------------------------------------------------------------------------------------
def walk(kernel, shape: Shape, body, dims=None, ranges: dict | None = None,
         name: str = "w") -> None:
    """`body(b, index)` for every index of `shape` over `dims` (default: all, in physical
    order, the minor-most innermost), each dimension in `ranges.get(d)` or its full
    extent. Indices of dimensions not in `dims` are left None."""
    b = kernel.b
    dims = major_to_minor(shape) if dims is None else list(dims)
    ranges = ranges or {}
    index: list = [None] * shape.rank

    def nest(level):
        if level == len(dims):
            with kernel.scope():
                body(b, list(index))
            return
        d = dims[level]
        lo, hi = ranges.get(d, (i64(0), i64(shape.dims[d])))
        # Only the innermost loop may be unrolled: LLVM would fully unroll a small
        # constant nest (a max-pool gradient's slice fill) and vectorize every copy.
        with for_range(b, lo, hi, f"{name}{d}", unroll=level == len(dims) - 1) as i:
            index[d] = i
            nest(level + 1)
    nest(0)


def fill(kernel, out, gen, ranges: dict | None) -> None:
    """out[i] = gen(i) over the index ranges `ranges` (walk) of the output."""
    def body(b, index):
        out.store(b, index, gen(b, index))
    walk(kernel, out.shape, body, ranges=ranges, name="fill")


# --- scatter ----------------------------------------------------------------------------------
class ScatterDims:
    """The dimension numbers of a scatter, resolved against its shapes."""

    def __init__(self, instr, n: int):
        a = instr.attrs
        self.operand = instr.operands[0].shape
        self.indices = instr.operands[n].shape
        self.update = instr.operands[n + 1].shape
        self.window_u = tuple(a.get("update_window_dims", ()))
        inserted = set(a.get("inserted_window_dims", ()))
        self.to_operand = tuple(a.get("scatter_dims_to_operand_dims", ()))
        self.input_batching = tuple(a.get("input_batching_dims", ()))
        self.indices_batching = tuple(a.get("scatter_indices_batching_dims", ()))
        self.ivd = a.get("index_vector_dim", self.indices.rank)
        self.scatter_u = [d for d in range(self.update.rank) if d not in self.window_u]
        self.indices_dims = [d for d in range(self.indices.rank) if d != self.ivd]
        self.window_operand = [d for d in range(self.operand.rank)
                               if d not in inserted and d not in self.input_batching]
        self.window_size = [1] * self.operand.rank
        for ud, od in zip(self.window_u, self.window_operand):
            self.window_size[od] = self.update.dims[ud]
        # operand dim -> the update dim that walks it
        self.update_dim_of = dict(zip(self.window_operand, self.window_u))

    def full_windows(self) -> list[int]:
        """Operand dims a window spans whole: the only valid start there is 0."""
        return [od for od in self.window_operand
                if self.window_size[od] == self.operand.dims[od]]


def emit_scatter(kernel, instr, gens, outputs, partitioned: bool = False) -> int:
    """A (variadic) scatter into `outputs`; returns the partition extent."""
    n = len(outputs)
    inputs, indices, updates = gens[:n], gens[n], gens[n + 1:]
    sd = ScatterDims(instr, n)
    partition = choose_partition(outputs[0].shape, sd.full_windows())
    bounds = partition.bounds(kernel, partitioned)
    for gen, out in zip(inputs, outputs):
        fill(kernel, out, gen, {partition.dim: bounds} if bounds is not None else None)
    window_ranges = {sd.update_dim_of[partition.dim]: bounds} if bounds is not None else None

    def per_scatter_index(b, u):
        start, valid = _window_start(kernel, sd, indices, u)
        with b.if_then(valid):
            def per_window_element(b, u_full):
                target = list(start)
                for ud, od in zip(sd.window_u, sd.window_operand):
                    target[od] = b.add(start[od], u_full[ud])
                at = [u_full[d] if d in sd.window_u else u[d] for d in range(sd.update.rank)]
                old = [out.load(b, target) for out in outputs]
                new = apply_computation(kernel, instr.to_apply, old + [g(b, at) for g in updates])
                for out, value in zip(outputs, new):
                    out.store(b, target, value)
            window_order = [d for d in major_to_minor(sd.update) if d in sd.window_u]
            walk(kernel, sd.update, per_window_element, dims=window_order,
                 ranges=window_ranges, name="sw")
    # The evaluator's order: scatter dims outer (logical order), window dims inner. Two
    # updates of one target differ in their scatter index, so they apply in that order.
    walk(kernel, sd.update, per_scatter_index, dims=sd.scatter_u, name="si")
    return partition.extent if partitioned else 1


def _window_start(kernel, sd: ScatterDims, indices, u):
    """(start index in the operand, whether the window fits) of scatter index `u`."""
    b = kernel.b
    by_indices_dim = dict(zip(sd.indices_dims, [u[d] for d in sd.scatter_u]))
    start = [i64(0)] * sd.operand.rank
    for k, od in enumerate(sd.to_operand):
        at = [by_indices_dim.get(d) for d in range(sd.indices.rank)]
        if sd.ivd < sd.indices.rank:
            at[sd.ivd] = i64(k)
        start[od] = index_to_i64(b, indices(b, at), sd.indices.element_type)
    for od, idim in zip(sd.input_batching, sd.indices_batching):
        start[od] = by_indices_dim[idim]
    # XLA drops a window that does not fit entirely (no clamping, unlike gather).
    valid = ir.Constant(I1, 1)
    for od in range(sd.operand.rank):
        valid = b.and_(valid, in_range(b, start[od], 0,
                                       sd.operand.dims[od] - sd.window_size[od] + 1))
    return start, valid


# --- select-and-scatter -----------------------------------------------------------------------
def _pointwise_window_dims(window) -> list[int]:
    """Dims where each source element sees exactly its own operand element."""
    return [d for d, w in enumerate(window)
            if (w.size, w.stride, w.pad_low, w.pad_high, w.window_dilation, w.base_dilation)
            == (1, 1, 0, 0, 1, 1)]


def emit_select_and_scatter(kernel, instr, gens, outputs, partitioned: bool = False) -> int:
    """select-and-scatter: each source element goes to the element of its window that
    `select` prefers (the first such), combined by `scatter`; returns the extent.

    Choosing reads only, scattering writes: per block of SELECT_BLOCK source elements
    along the innermost dimension, one loop chooses every target (straight-line code
    over the taps that LLVM vectorizes: a max-pool's channels are consecutive) into a
    stack array, and a second loop applies the scatters in order."""
    source, init = gens[1], gens[2]
    out = outputs[0]
    source_shape = instr.operands[1].shape
    window = instr.attrs["window"].dims
    partition = choose_partition(out.shape, _pointwise_window_dims(window))
    bounds = partition.bounds(kernel, partitioned)
    chooser = _TargetChooser(kernel, instr, gens[0], init, out)

    def scatter(b, s, offset):
        with b.if_then(b.icmp_signed(">=", offset, i64(0))):
            with kernel.scope():
                new = apply_computation(kernel, instr.attrs["scatter"],
                                        [_load_at(b, out, offset), source(b, s)])[0]
                _store_at(b, out, offset, new)

    if source_shape.rank == 0:
        fill(kernel, out, lambda b, index: init(b, []), None)
        with kernel.scope():
            scatter(kernel.b, [], chooser.choose(kernel.b, []))
        return partition.extent if partitioned else 1
    lane = source_shape.rank - 1
    chosen = kernel.alloca(ir.ArrayType(I64, SELECT_BLOCK), "sas.chosen")
    chosen.type = PTR       # llvmlite types it `[N x i64]*`; it is addressed by element

    def per_row(b, s, ranges):
        lo, hi = ranges.get(lane, (i64(0), i64(source_shape.dims[lane])))
        with for_range(b, lo, hi, "sas.block", step=SELECT_BLOCK, unroll=False) as c0:
            c1 = b.add(c0, i64(SELECT_BLOCK))
            c1 = b.select(b.icmp_signed("<", c1, hi), c1, hi)
            # Vectorized, never unrolled: with few channels (8) LLVM would rather copy
            # the straight-line choice over all taps once per channel.
            with for_range(b, c0, c1, "sas.choose", unroll=False) as c:
                with kernel.scope():
                    s[lane] = c
                    b.store(chooser.choose(b, list(s)), _cell(b, chosen, b.sub(c, c0)))
            with for_range(b, c0, c1, "sas.scatter") as c:
                with kernel.scope():
                    s[lane] = c
                    scatter(b, list(s), b.load(_cell(b, chosen, b.sub(c, c0)), typ=I64))
    def fill_then_scatter(ranges):
        fill(kernel, out, lambda b, index: init(b, []), ranges)
        # Logical order (the evaluator's): sources sharing a target apply in that order.
        walk(kernel, source_shape, lambda b, s: per_row(b, s, ranges), dims=range(lane),
             ranges=ranges, name="src")

    if bounds is not None and partition.dim == major_to_minor(out.shape)[0]:
        # One slice of the major dimension at a time (a max-pool's image: 3 MiB), so
        # the scatters find the slice just filled still in cache.
        with for_range(kernel.b, *bounds, "sas.slice", unroll=False) as i:
            fill_then_scatter({partition.dim: (i, kernel.b.add(i, i64(1)))})
    else:
        fill_then_scatter({partition.dim: bounds} if bounds is not None else {})
    return partition.extent if partitioned else 1


class _TargetChooser:
    """Emits the choice of one source element's target: the physical offset in the
    output of the window element `select` prefers, or -1 when the window has no
    element (all padding). Pure: it only reads the operand."""

    def __init__(self, kernel, instr, operand, init, out):
        self.kernel, self.operand, self.init, self.out = kernel, operand, init, out
        self.select = instr.attrs["select"]
        self.window = instr.attrs["window"].dims
        self.dims = instr.operands[0].shape.dims
        self.etype = instr.operands[0].shape.element_type

    def choose(self, b, s) -> ir.Value:
        taps = list(product(*[range(w.size) for w in self.window]))
        if len(taps) <= MAX_UNROLLED_TAPS:
            state = (ir.Constant(I1, 0), self.init(b, []), i64(-1))
            for k in taps:       # straight-line code: vectorizable along the source row
                state = self._step(b, s, [i64(x) for x in k], state)
            return state[2]
        return self._choose_in_loops(b, s)

    def _step(self, b, s, k, state):
        """(have, best, offset) after window element `k`: it replaces the current choice
        when there is none yet or select(current, element) is false (XLA's rule)."""
        have, best, offset = state
        valid, pos = window_source(b, s, dict(enumerate(k)), self.window, self.dims)
        with self.kernel.scope():       # the same computation again: no stale memo
            value = self.operand(b, pos)
            keep = apply_computation(self.kernel, self.select, [best, value])[0]
        take = b.or_(b.not_(have), b.not_(keep))
        if valid is not None:
            take = b.and_(valid, take)
        return (b.or_(have, take), b.select(take, value, best),
                b.select(take, linearize(b, pos, self.out.shape), offset))

    def _choose_in_loops(self, b, s) -> ir.Value:
        """A large window (global pooling): loops over its elements, state in allocas."""
        cells = [self.kernel.alloca(t, f"sas.{n}") for t, n in
                 [(I1, "have"), (compute_type(self.etype), "best"), (I64, "offset")]]
        for cell, value in zip(cells, (ir.Constant(I1, 0), self.init(b, []), i64(-1))):
            b.store(value, cell)

        def per_tap(b, k):
            state = self._step(b, s, k, [b.load(cell) for cell in cells])
            for cell, value in zip(cells, state):
                b.store(value, cell)
        taps = Shape("s64", tuple(w.size for w in self.window))
        walk(self.kernel, taps, per_tap, dims=range(taps.rank), name="tap")
        return b.load(cells[2])


def _cell(b, array, i):
    return b.gep(array, [i], inbounds=True, source_etype=I64)


def _load_at(b, buffer, offset):
    """buffer's element at physical offset `offset` (a Buffer loads by logical index)."""
    raw = b.load(b.gep(buffer.pointer, [offset], inbounds=True, source_etype=buffer.llvm_type),
                 typ=buffer.llvm_type, align=element_bytes(buffer.etype))
    buffer._on_access and buffer._on_access(raw)
    return from_storage(b, raw, buffer.etype)


def _store_at(b, buffer, offset, value) -> None:
    inst = b.store(to_storage(b, value, buffer.etype),
                   b.gep(buffer.pointer, [offset], inbounds=True, source_etype=buffer.llvm_type),
                   align=element_bytes(buffer.etype))
    buffer._on_access and buffer._on_access(inst)
