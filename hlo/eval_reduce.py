"""Reference semantics of `reduce`, and the vectorized reducer helpers other ops share.

A reducer is a computation of 2N scalar parameters (N accumulators, N values)
returning N values. Evaluating it once per element would be far too slow, so:

- a recognized binary reducer (`ROOT add(p0, p1)`, multiply, maximum, minimum,
  and, or) becomes a numpy reduction. Float sums and products accumulate in
  f64 and round once: XLA's f32 loop is within a few ulps of the exact value,
  so the exact value is the best reference;
- any other reducer (argmax's variadic one, ...) is evaluated on whole arrays:
  `fold_pairwise` combines neighbours (0,1), (2,3), ... level by level, so a
  reduction of K elements takes log2(K) evaluations of the computation, and
  elements keep their order within each combination.

`combine_in_order` applies a combiner at scattered positions where an index
may repeat (scatter, select-and-scatter): duplicates are applied in order.
"""
from __future__ import annotations

import numpy as np

from .eval_common import (as_tuple, float_max_min, flush, recognize_binary_reducer,
                          reducer_ufunc, to_result)
from .opcodes import reference


def call_reducer(comp, ctx, accs, values) -> tuple:
    """Evaluates a 2N-parameter reducer on arrays: (acc_0..acc_N-1, x_0..x_N-1) -> N arrays."""
    return as_tuple(ctx.call(comp, list(accs) + list(values)))


def fold_pairwise(comp, ctx, values: list[np.ndarray]) -> list[np.ndarray]:
    """Reduces the last axis of each array in `values` with `comp`, neighbours first."""
    while values[0].shape[-1] > 1:
        n = values[0].shape[-1]
        even = n - n % 2
        left = [v[..., 0:even:2] for v in values]
        right = [v[..., 1:even:2] for v in values]
        combined = call_reducer(comp, ctx, left, right)
        combined = [np.broadcast_to(c, left[0].shape) for c in combined]
        if n % 2:
            combined = [np.concatenate([c, v[..., even:]], axis=-1)
                        for c, v in zip(combined, values)]
        values = combined
    return [v[..., 0] for v in values]


def ufunc_reduce(opcode: str, x: np.ndarray, axis, ctx) -> np.ndarray:
    """A recognized reducer applied over `axis` (no initial value)."""
    ufunc = reducer_ufunc(opcode, x.dtype)
    if x.dtype.kind == "f" and opcode in ("add", "multiply"):
        x = flush(x, ctx)
        with np.errstate(all="ignore"):
            return ufunc.reduce(x.astype(np.float64), axis=axis)
    with np.errstate(all="ignore"):
        y = ufunc.reduce(x, axis=axis, dtype=x.dtype)
    if x.dtype.kind == "f" and opcode in ("maximum", "minimum"):
        y = _signed_zero_extremum(opcode, x, axis, y)
    return y


def _signed_zero_extremum(opcode: str, x, axis, y):
    """Fixes the sign of zero results (np.maximum.reduce keeps whichever zero came
    first; XLA's llvm.maximum orders -0 < +0): a zero maximum is -0 only if no
    element is +0, a zero minimum is -0 if any element is -0."""
    zero = x == 0
    if opcode == "maximum":
        negative = ~np.any(zero & ~np.signbit(x), axis=axis)
    else:
        negative = np.any(zero & np.signbit(x), axis=axis)
    return np.where(y == 0, np.where(negative, -0.0, 0.0).astype(y.dtype), y)


def combine_with_init(opcode: str, partial: np.ndarray, init: np.ndarray, ctx, instr):
    """init (op) partial, rounded to the result type once."""
    ufunc = reducer_ufunc(opcode, init.dtype)
    with np.errstate(all="ignore"):
        if init.dtype.kind == "f" and opcode in ("add", "multiply"):
            value = ufunc(flush(init, ctx).astype(np.float64), partial)
            return flush(to_result(value.astype(_work_dtype(init)), instr), ctx)
        if init.dtype.kind == "f" and opcode in ("maximum", "minimum"):
            return to_result(float_max_min(opcode, init, partial), instr)
        return to_result(ufunc(init, partial), instr)


def _work_dtype(x):
    return np.float32 if x.dtype == np.float16 else x.dtype


@reference("reduce")
def reduce(instr, operands, ctx):
    n = len(operands) // 2
    inputs, inits = operands[:n], operands[n:]
    axes = tuple(instr.dims())
    comp = instr.attrs["to_apply"]
    kept = [d for d in range(inputs[0].ndim) if d not in axes]
    out_dims = tuple(inputs[0].shape[d] for d in kept)
    if any(inputs[0].shape[d] == 0 for d in axes):
        results = [np.broadcast_to(init, out_dims) for init in inits]
        return results[0] if n == 1 else tuple(results)
    opcode = recognize_binary_reducer(comp) if n == 1 else None
    if opcode is not None:
        partial = ufunc_reduce(opcode, inputs[0], axes, ctx)
        return combine_with_init(opcode, partial, inits[0], ctx, instr)
    # Generic reducer: reduced axes last, flattened to one; fold; then combine the init.
    count = int(np.prod([inputs[0].shape[d] for d in axes]))
    moved = [np.transpose(x, kept + list(axes)).reshape(out_dims + (count,)) for x in inputs]
    partial = fold_pairwise(comp, ctx, moved)
    results = call_reducer(comp, ctx, [np.broadcast_to(i, out_dims) for i in inits], partial)
    results = tuple(np.broadcast_to(r, out_dims) for r in results)
    return results[0] if n == 1 else results


def combine_in_order(comp, ctx, targets: list[np.ndarray], index: np.ndarray,
                     updates: list[np.ndarray]) -> None:
    """targets[k][index[i]] = comp(targets[k][index[i]], updates[k][i]) for i in order.

    `targets` are flat arrays updated in place; `index` and `updates` are flat.
    Repeated indices are applied in the order they appear.
    """
    opcode = recognize_binary_reducer(comp) if len(targets) == 1 else None
    if opcode in ("maximum", "minimum") and targets[0].dtype.kind == "f":
        opcode = None        # np.maximum.at picks either zero of (+0, -0): evaluate the combiner
    if opcode is not None:
        # ufunc.at is unbuffered: repeated indices accumulate, in order.
        with np.errstate(all="ignore"):
            reducer_ufunc(opcode, targets[0].dtype).at(targets[0], index, updates[0])
        return
    # Round k applies the k-th occurrence of every index: within a round the
    # indices are distinct, so it is one vectorized evaluation of the combiner.
    by_index = np.argsort(index, kind="stable")
    sorted_index = index[by_index]
    group_start = np.r_[True, sorted_index[1:] != sorted_index[:-1]] if index.size else np.ones(0, bool)
    first_of_group = np.maximum.accumulate(np.where(group_start, np.arange(index.size), 0))
    occurrence = np.empty(index.size, dtype=np.int64)
    occurrence[by_index] = np.arange(index.size) - first_of_group
    by_round = np.argsort(occurrence, kind="stable")
    bounds = np.searchsorted(occurrence[by_round], np.arange(occurrence.max(initial=-1) + 2))
    for k in range(len(bounds) - 1):
        now = by_round[bounds[k]:bounds[k + 1]]
        at = index[now]
        current = [t[at] for t in targets]
        new = call_reducer(comp, ctx, current, [u[now] for u in updates])
        for t, v in zip(targets, new):
            t[at] = np.broadcast_to(v, at.shape)
