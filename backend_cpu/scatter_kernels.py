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

import llvmlite.ir as ir

from hlo.shape import Shape

from .elemental import apply_computation, in_range, index_to_i64
from .llvm_types import I1, I64, compute_type
from .loops import for_range, i64, major_to_minor
from .reduction import window_source

LINE_BYTES = 64
# The partition dimension is the major-most candidate with at least this many units
# (enough for a balanced split over the pool); failing that, the one with the most.
MIN_UNITS = 8


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
        with for_range(b, lo, hi, f"{name}{d}") as i:
            index[d] = i
            nest(level + 1)
    nest(0)


def fill(kernel, out, gen, partition: Partition, partitioned: bool) -> None:
    """out[i] = gen(i) over this launch's slice of the output."""
    bounds = partition.bounds(kernel, partitioned)
    ranges = {partition.dim: bounds} if bounds is not None else None

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
    for gen, out in zip(inputs, outputs):
        fill(kernel, out, gen, partition, partitioned)
    bounds = partition.bounds(kernel, partitioned)
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
    `select` prefers (the first such), combined by `scatter`; returns the extent."""
    operand, source, init = gens
    out = outputs[0]
    operand_shape = instr.operands[0].shape
    source_shape = instr.operands[1].shape
    window = instr.attrs["window"].dims
    partition = choose_partition(out.shape, _pointwise_window_dims(window))
    fill(kernel, out, lambda b, index: init(b, []), partition, partitioned)
    bounds = partition.bounds(kernel, partitioned)
    have = kernel.alloca(I1, "sas.have")
    best = kernel.alloca(compute_type(operand_shape.element_type), "sas.best")
    where = [kernel.alloca(I64, f"sas.at{d}") for d in range(operand_shape.rank)]

    def per_source(b, s):
        b.store(ir.Constant(I1, 0), have)
        b.store(init(b, []), best)
        for cell in where:
            b.store(i64(0), cell)

        def per_tap(b, k):
            valid, pos = window_source(b, s, dict(enumerate(k)), window, operand_shape.dims)
            value = operand(b, pos)
            current = b.load(best)
            keep = apply_computation(kernel, instr.attrs["select"], [current, value])[0]
            # A later tap wins when select(current, tap) is false (XLA's rule).
            take = b.or_(b.not_(b.load(have)), b.not_(keep))
            if valid is not None:
                take = b.and_(valid, take)
            b.store(b.select(take, value, current), best)
            b.store(b.or_(b.load(have), take), have)
            for cell, p in zip(where, pos):
                b.store(b.select(take, p, b.load(cell)), cell)
        taps = Shape("s64", tuple(w.size for w in window))
        walk(kernel, taps, per_tap, dims=range(taps.rank), name="tap")
        with b.if_then(b.load(have)):
            with kernel.scope():
                target = [b.load(cell) for cell in where]
                new = apply_computation(kernel, instr.attrs["scatter"],
                                        [out.load(b, target), source(b, s)])[0]
                out.store(b, target, new)
    # Logical order (the evaluator's): sources sharing a target apply in that order.
    ranges = {partition.dim: bounds} if bounds is not None else None
    walk(kernel, source_shape, per_source, dims=range(source_shape.rank), ranges=ranges,
         name="src")
    return partition.extent if partitioned else 1
