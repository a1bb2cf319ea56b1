"""Reference semantics of gather and scatter with XLA's full dimension numbers.

gather: every index vector (the `index_vector_dim` of the start indices)
gives, through `start_index_map`, the start of one slice of size
`slice_sizes`; starts are clamped so the slice stays inside the operand.
`collapsed_slice_dims` and `operand_batching_dims` (size-1 slice dims) are
dropped; the remaining slice dims become the output's `offset_dims`, the
index batch dims fill the other output dims in order. An operand batching
dim takes its start from the position along the matching
`start_indices_batching_dims`.

scatter is the mirror image: each update window goes to the operand at its
start, combined with the `to_apply` computation (in order for repeated
indices). Starts are not clamped: a window that does not fit in the operand is
dropped whole.
"""
from __future__ import annotations

import numpy as np

from .eval_common import EvaluationError
from .eval_reduce import combine_in_order
from .opcodes import reference


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """The start indices with the index vector as the last axis (added if implicit)."""
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def _batch_axis(indices_dim: int, index_vector_dim: int) -> int:
    """Position of an indices dimension among the batch dims (index vector removed)."""
    return indices_dim - (1 if indices_dim > index_vector_dim else 0)


def _starts(vectors, index_map, batching, operand_rank) -> list[np.ndarray]:
    """Per operand dim, the start of each batch element (shape: the batch shape).

    `batching` pairs (operand dim, batch axis) whose start is the position along that axis.
    """
    batch_shape = vectors.shape[:-1]
    starts = [np.zeros(batch_shape, dtype=np.int64) for _ in range(operand_rank)]
    for k, d in enumerate(index_map):
        starts[d] = vectors[..., k].astype(np.int64)
    for d, axis in batching:
        shape = [1] * len(batch_shape)
        shape[axis] = batch_shape[axis]
        starts[d] = np.broadcast_to(np.arange(batch_shape[axis]).reshape(shape), batch_shape)
    return starts


@reference("gather")
def gather(instr, operands, ctx):
    operand, indices = operands
    a = instr.attrs
    ivd = a.get("index_vector_dim", indices.ndim)
    vectors = _index_vectors(indices, ivd)
    batch_shape = vectors.shape[:-1]
    nb = len(batch_shape)
    sizes = instr.dims("slice_sizes")
    batching = [(d, _batch_axis(b, ivd)) for d, b in
                zip(instr.dims("operand_batching_dims"), instr.dims("start_indices_batching_dims"))]
    starts = _starts(vectors, instr.dims("start_index_map"), batching, operand.ndim)
    # Clamp every start so the whole slice is in bounds.
    starts = [np.clip(s, 0, operand.shape[d] - sizes[d]) for d, s in enumerate(starts)]
    # Index the operand with batch_shape + slice_sizes broadcast index arrays.
    index = []
    for d, s in enumerate(starts):
        offset_shape = [1] * operand.ndim
        offset_shape[d] = sizes[d]
        index.append(s.reshape(batch_shape + (1,) * operand.ndim)
                     + np.arange(sizes[d]).reshape(offset_shape))
    full = operand[tuple(index)] if operand.ndim else np.broadcast_to(operand, batch_shape)
    dropped = set(instr.dims("collapsed_slice_dims")) | set(instr.dims("operand_batching_dims"))
    kept = [d for d in range(operand.ndim) if d not in dropped]
    full = full.reshape(batch_shape + tuple(sizes[d] for d in kept))
    # Output dims: offset_dims get the kept slice dims, the others the batch dims, in order.
    offset_dims = instr.dims("offset_dims")
    out_rank = nb + len(kept)
    batch_iter, offset_iter = iter(range(nb)), iter(range(nb, out_rank))
    perm = [next(offset_iter) if i in offset_dims else next(batch_iter) for i in range(out_rank)]
    return np.transpose(full, perm)


@reference("scatter")
def scatter(instr, operands, ctx):
    n = (len(operands) - 1) // 2
    targets, indices, updates = operands[:n], operands[n], operands[n + 1:]
    a = instr.attrs
    ivd = a.get("index_vector_dim", indices.ndim)
    vectors = _index_vectors(indices, ivd)
    operand_shape = targets[0].shape
    window_dims = instr.dims("update_window_dims")
    update = updates[0]
    scatter_axes = [d for d in range(update.ndim) if d not in window_dims]
    if len(scatter_axes) != vectors.ndim - 1:
        raise EvaluationError(f"{instr.name}: updates have {len(scatter_axes)} scatter dims, "
                              f"the indices {vectors.ndim - 1} batch dims")
    # Updates as (scatter dims..., window dims...).
    updates = [np.transpose(u, scatter_axes + list(window_dims)) for u in updates]
    batch_shape = vectors.shape[:-1]
    batching = [(d, _batch_axis(b, ivd)) for d, b in
                zip(instr.dims("input_batching_dims"), instr.dims("scatter_indices_batching_dims"))]
    starts = _starts(vectors, instr.dims("scatter_dims_to_operand_dims"), batching, len(operand_shape))
    # Which operand dims the window dims cover (the others get a size-1 window).
    inserted = set(instr.dims("inserted_window_dims")) | set(instr.dims("input_batching_dims"))
    window_operand_dims = [d for d in range(len(operand_shape)) if d not in inserted]
    window_sizes = [1] * len(operand_shape)
    for k, d in enumerate(window_operand_dims):
        window_sizes[d] = update.shape[window_dims[k]]
    # A window is applied only if it lies entirely inside the operand.
    in_bounds = np.ones(batch_shape, dtype=bool)
    for d, s in enumerate(starts):
        in_bounds &= (s >= 0) & (s <= operand_shape[d] - window_sizes[d])
    # Flat operand position of every update element: batch_shape + window shape.
    nw = len(window_dims)
    position = np.zeros(batch_shape + (1,) * nw, dtype=np.int64)
    strides = np.cumprod((1,) + operand_shape[:0:-1])[::-1] if operand_shape else ()
    for d, s in enumerate(starts):
        pos = s.reshape(batch_shape + (1,) * nw)
        if d in window_operand_dims:
            k = window_operand_dims.index(d)
            shape = [1] * nw
            shape[k] = window_sizes[d]
            pos = pos + np.arange(window_sizes[d]).reshape(shape)
        position = position + pos * int(strides[d])
    window_shape = tuple(updates[0].shape[len(batch_shape):])
    position = np.broadcast_to(position, batch_shape + window_shape)
    mask = np.broadcast_to(in_bounds.reshape(batch_shape + (1,) * nw), position.shape)
    flat_targets = [np.array(t, copy=True).reshape(-1) for t in targets]
    combine_in_order(instr.attrs["to_apply"], ctx, flat_targets, position[mask],
                     [u[mask] for u in updates])
    results = tuple(t.reshape(operand_shape) for t in flat_targets)
    return results[0] if n == 1 else results
