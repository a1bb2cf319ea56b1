"""Reference semantics of `sort`: a stable sort decided by the comparator computation.

The comparator takes 2N scalars (lhs_0, rhs_0, lhs_1, rhs_1, ...) and says
whether lhs goes before rhs. Instead of calling it once per comparison, it is
evaluated on all pairs of one row at once: less[i, j] = comp(x_i, x_j). For a
strict weak order, the stable position of element i is

    #{j : x_j < x_i}  +  #{j < i : x_j and x_i are equivalent}

(equivalent elements keep their order). Rows whose comparator is not a strict
weak order, or that are too long for an n x n table, are sorted with Python's
stable sort calling the comparator element by element.
"""
from __future__ import annotations

import functools

import numpy as np

from .eval_common import EvaluationError
from .opcodes import reference

# Cap on the elements of one batch of n x n comparison tables.
_TABLE_LIMIT = 1 << 22


@reference("sort")
def sort(instr, operands, ctx):
    (axis,) = instr.dims()
    comp = instr.attrs["to_apply"]
    moved = [np.moveaxis(x, axis, -1) for x in operands]
    batch_shape, n = moved[0].shape[:-1], moved[0].shape[-1]
    rows = [x.reshape(-1, n) for x in moved]
    order = _sort_order(comp, ctx, rows, n)
    results = tuple(np.moveaxis(np.take_along_axis(r, order, axis=1).reshape(batch_shape + (n,)),
                                -1, axis)
                    for r in rows)
    return results[0] if len(results) == 1 else results


def _sort_order(comp, ctx, rows, n) -> np.ndarray:
    """For every row, the indices of its elements in sorted order."""
    num_rows = rows[0].shape[0]
    order = np.empty((num_rows, n), dtype=np.int64)
    if n == 0 or num_rows == 0:
        return order
    if n * n > _TABLE_LIMIT:
        for r in range(num_rows):
            order[r] = _python_sort(comp, ctx, [x[r] for x in rows])
        return order
    chunk = max(1, _TABLE_LIMIT // (n * n))
    for start in range(0, num_rows, chunk):
        part = [x[start:start + chunk] for x in rows]
        order[start:start + chunk] = _table_sort(comp, ctx, part, n)
    return order


def _table_sort(comp, ctx, rows, n) -> np.ndarray:
    args = []
    for x in rows:
        args += [x[:, :, None], x[:, None, :]]        # lhs = x_i, rhs = x_j
    less = np.broadcast_to(np.asarray(ctx.call(comp, args), dtype=bool), (rows[0].shape[0], n, n))
    before = np.tril(np.ones((n, n), dtype=bool), k=-1)        # before[i, j]: j < i
    equivalent = ~less & ~np.swapaxes(less, 1, 2)
    rank = less.sum(axis=1) + (equivalent & before).sum(axis=2)  # less[j, i] summed over j
    order = np.argsort(rank, axis=1, kind="stable")
    valid = (np.take_along_axis(rank, order, axis=1) == np.arange(n)).all(axis=1)
    for r in np.flatnonzero(~valid):        # not a strict weak order: compare one by one
        order[r] = _python_sort(comp, ctx, [x[r] for x in rows])
    return order


def _python_sort(comp, ctx, row_values) -> list[int]:
    def less(i, j):
        args = []
        for x in row_values:
            args += [x[i], x[j]]
        return bool(ctx.call(comp, [np.asarray(a) for a in args]))

    def cmp(i, j):
        if less(i, j):
            return -1
        return 1 if less(j, i) else 0

    try:
        return sorted(range(len(row_values[0])), key=functools.cmp_to_key(cmp))
    except RecursionError as err:        # pragma: no cover - defensive
        raise EvaluationError(f"sort comparator failed: {err}") from None
