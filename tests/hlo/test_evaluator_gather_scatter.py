"""gather and scatter against per-element references written from XLA's specification."""
import numpy as np
import pytest

from xlapy.hlo import HloComputation, HloInstruction, Shape
from tests.hlo.evaluator_util import binary_computation, run_op


def _batch_position(indices_dim, index_vector_dim):
    return indices_dim if indices_dim < index_vector_dim else indices_dim - 1


def _index_vector(indices, batch_index, ivd):
    if ivd == indices.ndim:
        return [int(indices[tuple(batch_index)])]
    sl = list(batch_index)
    sl.insert(ivd, slice(None))
    return [int(v) for v in indices[tuple(sl)]]


def gather_reference(operand, indices, out_shape, offset_dims, collapsed, start_index_map,
                     slice_sizes, ivd, operand_batching=(), indices_batching=()):
    out = np.empty(out_shape, operand.dtype)
    batch_dims = [d for d in range(len(out_shape)) if d not in offset_dims]
    window_operand_dims = [d for d in range(operand.ndim)
                           if d not in collapsed and d not in operand_batching]
    for o in np.ndindex(*out_shape):
        g = [o[d] for d in batch_dims]
        s = _index_vector(indices, g, ivd)
        start = [0] * operand.ndim
        for k, d in enumerate(start_index_map):
            start[d] = s[k]
        for od, ib in zip(operand_batching, indices_batching):
            start[od] = g[_batch_position(ib, ivd)]
        start = [min(max(st, 0), operand.shape[d] - slice_sizes[d]) for d, st in enumerate(start)]
        full = list(start)
        for k, d in enumerate(window_operand_dims):
            full[d] += o[offset_dims[k]]
        out[o] = operand[tuple(full)]
    return out


GATHER_CASES = [
    # name, operand shape, indices, out shape, offset_dims, collapsed, start_index_map, slice_sizes, ivd
    ("rows", (6, 4), np.array([[0], [5], [9], [-3]]), (4, 4), (1,), (0,), (0,), (1, 4), 1),
    ("points", (5, 7), np.array([[1, 2], [4, 6], [-1, 9], [0, 0]]), (4,), (), (0, 1), (0, 1), (1, 1), 1),
    ("windows", (5, 7), np.array([[3, 5], [0, 0]]), (2, 2, 3), (1, 2), (), (0, 1), (2, 3), 1),
    ("implicit_vector", (8, 3), np.array([[7, 1], [2, 40]]), (2, 2, 3), (2,), (0,), (0,), (1, 3), 2),
    ("vector_in_middle", (4, 5, 6), np.array([[[1, 2], [3, 0]], [[0, 4], [9, 9]]]).transpose(0, 2, 1),
     (2, 6, 2), (1,), (0, 1), (0, 1), (1, 1, 6), 1),
]


@pytest.mark.parametrize("case", GATHER_CASES, ids=[c[0] for c in GATHER_CASES])
def test_gather_matches_reference(case):
    _, oshape, indices, out_shape, offset_dims, collapsed, sim, sizes, ivd = case
    operand = np.arange(np.prod(oshape), dtype=np.float32).reshape(oshape)
    indices = indices.astype(np.int32)
    expected = gather_reference(operand, indices, out_shape, offset_dims, collapsed, sim, sizes, ivd)
    out = run_op("gather", operand, indices, result=Shape("f32", out_shape), offset_dims=offset_dims,
                 collapsed_slice_dims=collapsed, start_index_map=sim, index_vector_dim=ivd,
                 slice_sizes=sizes)
    np.testing.assert_array_equal(out, expected)


def test_gather_with_batching_dims():
    # take_along_axis with explicit batching: operand [3,5], per-row indices [3,2].
    operand = np.arange(15, dtype=np.int32).reshape(3, 5)
    indices = np.array([[[4], [0]], [[2], [7]], [[-1], [1]]], np.int32)
    kwargs = dict(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,), index_vector_dim=2,
                  slice_sizes=(1, 1), operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    expected = gather_reference(operand, indices, (3, 2), (), (1,), (1,), (1, 1), 2,
                                operand_batching=(0,), indices_batching=(0,))
    out = run_op("gather", operand, indices, result=Shape("s32", (3, 2)), **kwargs)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(out, [[4, 0], [7, 9], [10, 11]])   # 7 clamps to 4, -1 to 0


def scatter_reference(operand, indices, updates, combine, update_window_dims, inserted, sdod, ivd,
                      input_batching=(), indices_batching=()):
    out = operand.copy()
    scatter_dims = [d for d in range(updates.ndim) if d not in update_window_dims]
    window_operand_dims = [d for d in range(operand.ndim)
                           if d not in inserted and d not in input_batching]
    size = [1] * operand.ndim
    for k, d in enumerate(window_operand_dims):
        size[d] = updates.shape[update_window_dims[k]]
    for u in np.ndindex(*updates.shape):
        g = [u[d] for d in scatter_dims]
        s = _index_vector(indices, g, ivd)
        start = [0] * operand.ndim
        for k, d in enumerate(sdod):
            start[d] = s[k]
        for od, ib in zip(input_batching, indices_batching):
            start[od] = g[_batch_position(ib, ivd)]
        if any(st < 0 or st + size[d] > operand.shape[d] for d, st in enumerate(start)):
            continue            # the whole window is dropped
        full = list(start)
        for k, d in enumerate(window_operand_dims):
            full[d] += u[update_window_dims[k]]
        out[tuple(full)] = combine(out[tuple(full)], updates[u])
    return out


def _set_then_double_computation():
    """combiner(old, new) = old * 2 + new: the order of duplicate updates matters."""
    comp = HloComputation("double_add")
    s = Shape("f32", ())
    a = comp.add_instruction(HloInstruction("parameter", s, name="old", parameter_number=0))
    b = comp.add_instruction(HloInstruction("parameter", s, name="new", parameter_number=1))
    d = comp.add_instruction(HloInstruction("add", s, [a, a], name="dbl"))
    comp.root = comp.add_instruction(HloInstruction("add", s, [d, b], name="r"))
    return comp


@pytest.mark.parametrize("combiner", ["add", "ordered"])
def test_scatter_rows_with_duplicates_and_out_of_bounds(combiner):
    operand = np.ones((6, 3), np.float32)
    indices = np.array([2, 0, 2, 6, -1, 5, 2], np.int32)          # 6 and -1 are dropped
    updates = np.arange(21, dtype=np.float32).reshape(7, 3)
    comp = binary_computation("add", "f32") if combiner == "add" else _set_then_double_computation()
    fn = (lambda a, b: a + b) if combiner == "add" else (lambda a, b: a * 2 + b)
    expected = scatter_reference(operand, indices, updates, fn, (1,), (0,), (0,), 1)
    out = run_op("scatter", operand, indices, updates, to_apply=comp, update_window_dims=(1,),
                 inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    np.testing.assert_array_equal(out, expected)


def test_scatter_window_partly_out_of_bounds_is_dropped_whole():
    operand = np.zeros((5, 5), np.int32)
    indices = np.array([[0, 0], [3, 3], [4, 1], [1, -1]], np.int32)   # windows of 2x2
    updates = np.ones((4, 2, 2), np.int32)
    expected = scatter_reference(operand, indices, updates, lambda a, b: a + b, (1, 2), (), (0, 1), 1)
    out = run_op("scatter", operand, indices, updates, to_apply=binary_computation("add", "s32"),
                 update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(0, 1),
                 index_vector_dim=1)
    np.testing.assert_array_equal(out, expected)
    assert out.sum() == 8           # only [0,0] and [3,3] fit


def test_scatter_with_batching_dims():
    operand = np.zeros((3, 4), np.float32)
    indices = np.array([[1, 1], [0, 3], [2, 9]], np.int32)           # per batch row; 9 is dropped
    updates = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    kwargs = dict(update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
                  index_vector_dim=2, input_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    expected = scatter_reference(operand, indices, updates, lambda a, b: a + b, (), (1,), (1,), 2,
                                 input_batching=(0,), indices_batching=(0,))
    out = run_op("scatter", operand, indices, updates, to_apply=binary_computation("add", "f32"), **kwargs)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(out, [[0, 3, 0, 0], [3, 0, 0, 4], [0, 0, 5, 0]])
