"""Shape rules of gather and scatter, with all their dimension numbers.

Both ops see the indices array as a batch of index vectors: `index_vector_dim`
names the dim holding the vector; when it equals the rank of the indices the
vector has an implicit trailing length of 1. The remaining dims of the indices
are the batch (scatter) dims.

    gather:  result = batch dims of indices, interleaved with the offset dims
             (slice_sizes minus collapsed and operand-batching dims) at the
             positions `offset_dims`.
    scatter: updates = batch dims of indices + window dims (`update_window_dims`),
             the result has the operands' shape.
"""
from __future__ import annotations

from .shape import Shape
from .shape_rules_common import (array, check_dims_attr, check_reducer, fail, rule,
                                 tuple_or_single)


def _index_batch(indices: Shape, index_vector_dim: int | None) -> tuple[tuple[int, ...], int, list[int]]:
    """(batch dims sizes, index vector length, batch dim numbers) of an indices array."""
    if not indices.dtype.is_integer:
        fail(f"indices must be integers, got {indices}")
    ivd = index_vector_dim
    if ivd is None or not 0 <= ivd <= indices.rank:
        fail(f"index_vector_dim {ivd} out of range for indices {indices}")
    vector_len = indices.dims[ivd] if ivd < indices.rank else 1
    batch_dims = [d for d in range(indices.rank) if d != ivd]
    return tuple(indices.dims[d] for d in batch_dims), vector_len, batch_dims


def _sorted_dims(dims, rank: int, what: str) -> tuple[int, ...]:
    dims = check_dims_attr(dims, rank, what)
    if list(dims) != sorted(dims):
        fail(f"{what} {list(dims)} must be sorted")
    return dims


def _index_map(index_map, operand_rank: int, vector_len: int, excluded, what: str) -> None:
    index_map = check_dims_attr(index_map, operand_rank, what)
    if len(index_map) != vector_len:
        fail(f"{what} has {len(index_map)} entries, the index vector has {vector_len}")
    if set(index_map) & set(excluded):
        fail(f"{what} {list(index_map)} names a batching dim")


def _batching_pairs(operand: Shape, indices: Shape, operand_dims, indices_dims,
                    index_batch_dims, names: str) -> None:
    """Operand batching dim k pairs with indices batching dim k: equal sizes."""
    if len(operand_dims) != len(indices_dims):
        fail(f"{names}: {list(operand_dims)} and {list(indices_dims)} differ in length")
    for o, i in zip(operand_dims, indices_dims):
        if i not in index_batch_dims:
            fail(f"{names}: indices dim {i} is not a batch dim of {indices}")
        if operand.dims[o] != indices.dims[i]:
            fail(f"{names}: operand dim {o} (size {operand.dims[o]}) and indices dim {i} "
                 f"(size {indices.dims[i]}) differ")


@rule("gather")
def gather_shape(opcode, shapes, attrs, hint):
    operand, indices = array(shapes[0]), array(shapes[1], "indices")
    batch, vector_len, index_batch_dims = _index_batch(indices, attrs.get("index_vector_dim"))
    sizes = tuple(attrs.get("slice_sizes", ()))
    if len(sizes) != operand.rank:
        fail(f"slice_sizes {list(sizes)} must have one size per dim of {operand}")
    for i, (n, size) in enumerate(zip(sizes, operand.dims)):
        if not 0 <= n <= size:
            fail(f"slice size {n} of dim {i} does not fit in {size}")
    collapsed = _sorted_dims(attrs.get("collapsed_slice_dims", ()), operand.rank, "collapsed_slice_dims")
    op_batch = _sorted_dims(attrs.get("operand_batching_dims", ()), operand.rank, "operand_batching_dims")
    if set(collapsed) & set(op_batch):
        fail("collapsed_slice_dims and operand_batching_dims overlap")
    for d in collapsed + op_batch:
        if sizes[d] > 1:
            fail(f"dim {d} is collapsed or batching but its slice size is {sizes[d]}")
    _index_map(attrs.get("start_index_map", ()), operand.rank, vector_len, op_batch, "start_index_map")
    _batching_pairs(operand, indices, op_batch, tuple(attrs.get("start_indices_batching_dims", ())),
                    index_batch_dims, "operand_batching_dims/start_indices_batching_dims")
    offset_sizes = [n for d, n in enumerate(sizes) if d not in collapsed and d not in op_batch]
    rank = len(batch) + len(offset_sizes)
    offset_dims = _sorted_dims(attrs.get("offset_dims", ()), rank, "offset_dims")
    if len(offset_dims) != len(offset_sizes):
        fail(f"offset_dims {list(offset_dims)} must have {len(offset_sizes)} entries "
             f"(slice dims that are neither collapsed nor batching)")
    offsets, batches = iter(offset_sizes), iter(batch)
    dims = [next(offsets) if i in offset_dims else next(batches) for i in range(rank)]
    return operand.with_dims(dims)


@rule("scatter")
def scatter_shape(opcode, shapes, attrs, hint):
    """scatter(operands..., indices, updates...): the operands' shape (a tuple if several)."""
    if len(shapes) < 3 or len(shapes) % 2 == 0:
        fail(f"needs N operands, indices and N updates, got {len(shapes)} operands")
    n = (len(shapes) - 1) // 2
    operands, indices, updates = shapes[:n], array(shapes[n], "indices"), shapes[n + 1:]
    first = array(operands[0])
    for s in operands:
        if array(s).dims != first.dims:
            fail(f"operands {first} and {s} differ in dims")
    for s in updates:
        if array(s, "update").dims != updates[0].dims:
            fail(f"updates {updates[0]} and {s} differ in dims")
    for o, u in zip(operands, updates):
        if o.element_type != u.element_type:
            fail(f"operand {o} and update {u} differ in element type")
    upd = updates[0]
    batch, vector_len, index_batch_dims = _index_batch(indices, attrs.get("index_vector_dim"))
    window = _sorted_dims(attrs.get("update_window_dims", ()), upd.rank, "update_window_dims")
    inserted = _sorted_dims(attrs.get("inserted_window_dims", ()), first.rank, "inserted_window_dims")
    in_batch = _sorted_dims(attrs.get("input_batching_dims", ()), first.rank, "input_batching_dims")
    if set(inserted) & set(in_batch):
        fail("inserted_window_dims and input_batching_dims overlap")
    if len(window) + len(inserted) + len(in_batch) != first.rank:
        fail(f"update_window_dims, inserted_window_dims and input_batching_dims must "
             f"account for the {first.rank} dims of {first}")
    _index_map(attrs.get("scatter_dims_to_operand_dims", ()), first.rank, vector_len, in_batch,
               "scatter_dims_to_operand_dims")
    _batching_pairs(first, indices, in_batch, tuple(attrs.get("scatter_indices_batching_dims", ())),
                    index_batch_dims, "input_batching_dims/scatter_indices_batching_dims")
    scatter_dims = [d for d in range(upd.rank) if d not in window]
    if tuple(upd.dims[d] for d in scatter_dims) != batch:
        fail(f"update {upd} scatter dims {[upd.dims[d] for d in scatter_dims]} "
             f"do not match the index batch dims {list(batch)} of {indices}")
    window_operand_dims = [d for d in range(first.rank) if d not in inserted and d not in in_batch]
    for u, o in zip(window, window_operand_dims):
        if upd.dims[u] > first.dims[o]:
            fail(f"update window dim {u} (size {upd.dims[u]}) exceeds operand dim {o} "
                 f"(size {first.dims[o]})")
    types = [s.element_type for s in operands]
    check_reducer(attrs.get("to_apply"), "to_apply", types, types)
    return tuple_or_single(operands)
