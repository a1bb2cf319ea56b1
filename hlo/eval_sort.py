"""Reference semantics of `sort`: a stable sort decided by the comparator computation.

The comparator takes 2N scalars (lhs_0, rhs_0, lhs_1, rhs_1, ...) and says
whether lhs goes before rhs. Calling it once per comparison would be far too
slow, so the rows are sorted by a bottom-up merge sort that is vectorized
across all rows and all elements: at each level (runs of `width` elements
merged pairwise), every element finds its place in the merged run by a binary
search in the other run, one comparator evaluation per search step:

    left element x, index i in its run:   goes to start + i + #{r in right : r < x}
    right element y, index j in its run:  goes to start + j + #{l in left : not y < l}

(equal elements keep their order: the sort is stable). That is about
log2(n)**2 / 2 comparator evaluations in all. Rows whose comparator is not a
strict weak order (the positions collide) are sorted with Python's stable sort
calling the comparator element by element; so is every row when the comparator
is not made of scalar elementwise ops only (XLA's CPU tests put broadcasts,
scatters and loops in comparators), since only those compute the same on whole
arrays as on scalars.
"""
from __future__ import annotations

import functools

import numpy as np

from .opcodes import reference


@reference("sort")
def sort(instr, operands, ctx):
    (axis,) = instr.dims()
    comp = instr.attrs["to_apply"]
    moved = [np.moveaxis(x, axis, -1) for x in operands]
    batch_shape, n = moved[0].shape[:-1], moved[0].shape[-1]
    num_rows = int(np.prod(batch_shape))
    rows = [x.reshape(num_rows, n) for x in moved]
    order = sort_order(comp, ctx, rows)
    results = tuple(np.moveaxis(np.take_along_axis(r, order, axis=1).reshape(batch_shape + (n,)),
                                -1, axis)
                    for r in rows)
    return results[0] if len(results) == 1 else results


def _less(comp, ctx, lhs: list, rhs: list) -> np.ndarray:
    """comp(lhs_0, rhs_0, lhs_1, rhs_1, ...) evaluated on whole arrays."""
    args = []
    for a, b in zip(lhs, rhs):
        args += [a, b]
    return np.broadcast_to(np.asarray(ctx.call(comp, args), dtype=bool), lhs[0].shape)


def _elementwise_on_scalars(comp, seen=None) -> bool:
    """True if every instruction of `comp` (and of what it calls) is a scalar parameter,
    constant, tuple or elementwise op: then it computes on whole arrays elementwise."""
    seen = set() if seen is None else seen
    if id(comp) in seen:
        return True
    seen.add(id(comp))
    for instr in comp.instructions:
        if not all(leaf.rank == 0 for leaf in instr.shape.leaves()):
            return False
        if instr.opcode in ("parameter", "constant", "tuple", "get-tuple-element"):
            continue
        if instr.opcode == "call":
            if not _elementwise_on_scalars(instr.attrs["to_apply"], seen):
                return False
            continue
        if not instr.info.is_elementwise:
            return False
    return True


def sort_order(comp, ctx, rows: list[np.ndarray]) -> np.ndarray:
    """For each row (of the 2-D arrays `rows`), the indices of its elements in sorted order."""
    num_rows, n = rows[0].shape
    if not _elementwise_on_scalars(comp):
        order = np.empty((num_rows, n), dtype=np.int64)
        for r in range(num_rows):
            order[r] = _python_sort(comp, ctx, [x[r] for x in rows])
        return order
    order = np.broadcast_to(np.arange(n), (num_rows, n)).copy()
    broken = np.zeros(num_rows, dtype=bool)
    position = np.arange(n)
    width = 1
    while width < n:
        start = position // (2 * width) * (2 * width)
        in_left = position - start < width
        index_in_run = np.where(in_left, position - start, position - start - width)
        # The run each element is merged against (empty for a left run with no partner).
        other_start = np.where(in_left, start + width, start)
        other_end = np.where(in_left, np.minimum(start + 2 * width, n), start + width)
        count = _count_before(comp, ctx, [np.take_along_axis(r, order, axis=1) for r in rows],
                              in_left, other_start, np.maximum(other_end - other_start, 0))
        new_position = start + index_in_run + count
        ok = (np.sort(new_position, axis=1) == position).all(axis=1)
        broken |= ~ok
        merged = order.copy()           # broken rows keep their order (re-sorted below)
        merged[ok] = _scatter_rows(order[ok], new_position[ok])
        order = merged
        width *= 2
    for r in np.flatnonzero(broken):        # not a strict weak order: compare one by one
        order[r] = _python_sort(comp, ctx, [x[r] for x in rows])
    return order


def _scatter_rows(order: np.ndarray, new_position: np.ndarray) -> np.ndarray:
    out = np.empty_like(order)
    np.put_along_axis(out, new_position, order, axis=1)
    return out


def _count_before(comp, ctx, current, in_left, other_start, other_len) -> np.ndarray:
    """Binary search, for every element, of how many elements of its partner run go first."""
    shape = current[0].shape
    lo = np.zeros(shape, dtype=np.int64)
    hi = np.broadcast_to(other_len, shape).astype(np.int64)
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        at = np.where(active, other_start + mid, 0)
        other = [np.take_along_axis(c, at, axis=1) for c in current]
        # Left elements ask "other < x", right elements ask "not (x < other)".
        lhs = [np.where(in_left, o, x) for o, x in zip(other, current)]
        rhs = [np.where(in_left, x, o) for o, x in zip(other, current)]
        less = _less(comp, ctx, lhs, rhs)
        goes_first = active & np.where(in_left, less, ~less)
        lo = np.where(goes_first, mid + 1, lo)
        hi = np.where(active & ~goes_first, mid, hi)


def _python_sort(comp, ctx, row_values) -> list[int]:
    def less(i, j):
        return bool(_less(comp, ctx, [np.asarray(x[i]) for x in row_values],
                          [np.asarray(x[j]) for x in row_values]))

    def cmp(i, j):
        if less(i, j):
            return -1
        return 1 if less(j, i) else 0

    return sorted(range(len(row_values[0])), key=functools.cmp_to_key(cmp))
