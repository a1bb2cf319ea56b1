"""Shape rules of the collectives (XLA's shapes, as its text prints them).

    all-reduce(x_1..x_n)             the operands' shapes (a tuple when n > 1); to_apply
                                     is a scalar (T, T) -> T reducer
    all-gather(x_1..x_n), dims={d}   each x_i with dimension d multiplied by the shard
                                     count (taken from the hint: the group size is a fact
                                     of the module's devices, which the verifier checks)
    reduce-scatter(x_1..x_n), d      each x_i with dimension d divided by the shard count
    all-to-all(x), dimensions={d}    x's shape (split along d, concatenated along d)
    all-to-all(x_1..x_n)             (x_1, ..., x_n): operand i goes to participant i,
                                     result j comes from participant j; equal shapes
    collective-permute(x_1..x_n)     the operands' shapes
    collective-broadcast(x_1..x_n)   the operands' shapes

The async halves:

    all-reduce-start                 as all-reduce;  all-reduce-done: its operand's shape
    all-gather-start                 (operand(s), result(s)); all-gather-done: element 1
    collective-permute-start         (operand(s), result(s), context u32[]...) -- XLA
                                     prints two u32[] contexts (or none, in newer
                                     versions); collective-permute-done: element 1

The in-place collective-permute:

    collective-permute(input, output, input_offsets, output_offsets),
        slice_sizes={{..},..}        output's shape. input and output are arrays or
                                     tuples of arrays (one slice list per element);
                                     the offsets are a tuple of integer scalars (one
                                     per dimension) or a tuple of such tuples, one per
                                     slice list; a slice fits in input and output
    collective-permute-start         (input, output, u32[] contexts...) in that form

Operands or results that are tuples of tuples elsewhere are not supported.
"""
from __future__ import annotations

from .ir import ReplicaGroups
from .shape import Shape
from .shape_rules_common import (array, check_dims_attr, check_reducer, fail, need_hint, rule,
                                 tuple_or_single)

U32 = Shape.scalar("u32")


def _arrays(opcode: str, shapes) -> list[Shape]:
    if not shapes:
        fail("needs at least one operand")
    for i, s in enumerate(shapes):
        array(s, f"operand {i}")
    return list(shapes)


def _check_common_attrs(attrs) -> None:
    groups = attrs.get("replica_groups")
    if groups is not None and not isinstance(groups, ReplicaGroups):
        fail(f"replica_groups must be a ReplicaGroups, got {groups!r}")
    channel = attrs.get("channel_id")
    if channel is not None and (isinstance(channel, bool) or not isinstance(channel, int)
                                or channel < 0):
        fail(f"channel_id must be a non-negative integer, got {channel!r}")


def _one_dim(attrs, operands) -> int:
    dims = tuple(attrs.get("dimensions", ()))
    if len(dims) != 1:
        fail(f"needs dimensions={{d}} with exactly one dimension, got {list(dims)}")
    for i, s in enumerate(operands):
        check_dims_attr(dims, s.rank, f"dimensions of operand {i}")
    return dims[0]


def _results(hint: Shape, n: int, what: str) -> list[Shape]:
    """The hint as n result shapes (one array, or a tuple of n arrays)."""
    if n == 1:
        return [array(hint, what)]
    if not hint.is_tuple or len(hint.tuple_shapes) != n:
        fail(f"{what} must be a tuple of {n} arrays (one per operand), got {hint}")
    return [array(s, f"{what} element {i}") for i, s in enumerate(hint.tuple_shapes)]


def _check_reducer(attrs, operands) -> None:
    types = {s.element_type for s in operands}
    if len(types) != 1:
        fail(f"operands must share an element type (one reducer), got {sorted(types)}")
    t = operands[0].element_type
    check_reducer(attrs.get("to_apply"), "to_apply", [t], [t])


def _check_resized(operands, results, dim: int, grow: bool) -> None:
    """results[i] is operands[i] with dimension `dim` multiplied (grow) or divided by
    one shard count, the same for every operand."""
    count = None
    for i, (x, y) in enumerate(zip(operands, results)):
        if x.element_type != y.element_type or x.rank != y.rank or any(
                a != b for d, (a, b) in enumerate(zip(x.dims, y.dims)) if d != dim):
            fail(f"result {y} must be operand {i} {x} with only dimension {dim} changed")
        small, big = (x.dims[dim], y.dims[dim]) if grow else (y.dims[dim], x.dims[dim])
        if small == 0:
            if big != 0:
                fail(f"dimension {dim} is 0 in {x if grow else y} but {big} in "
                     f"{y if grow else x}")
            continue
        if big % small:
            fail(f"dimension {dim}: {big} is not a multiple of {small} "
                 f"({'operand' if grow else 'result'} {i})")
        if count is not None and big // small != count:
            fail(f"operands disagree on the shard count ({count} and {big // small})")
        count = big // small


@rule("all-reduce", "all-reduce-start")
def all_reduce_shape(opcode, shapes, attrs, hint):
    _check_common_attrs(attrs)
    operands = _arrays(opcode, shapes)
    _check_reducer(attrs, operands)
    return tuple_or_single(operands)


@rule("all-reduce-done")
def all_reduce_done_shape(opcode, shapes, attrs, hint):
    (x,) = shapes
    return x


@rule("all-gather")
def all_gather_shape(opcode, shapes, attrs, hint):
    _check_common_attrs(attrs)
    operands = _arrays(opcode, shapes)
    dim = _one_dim(attrs, operands)
    out = need_hint(hint, "the gathered size depends on the group size")
    _check_resized(operands, _results(out, len(operands), "result"), dim, grow=True)
    return out


@rule("all-gather-start")
def all_gather_start_shape(opcode, shapes, attrs, hint):
    """(operand(s), gathered result(s))."""
    _check_common_attrs(attrs)
    operands = _arrays(opcode, shapes)
    dim = _one_dim(attrs, operands)
    out = need_hint(hint, "the gathered size depends on the group size")
    if not out.is_tuple or len(out.tuple_shapes) != 2:
        fail(f"result must be a tuple (operand(s), result(s)), got {out}")
    sent, gathered = out.tuple_shapes
    if sent != tuple_or_single(operands):
        fail(f"element 0 of the result must be the operand(s) {tuple_or_single(operands)}, "
             f"got {sent}")
    _check_resized(operands, _results(gathered, len(operands), "element 1 of the result"),
                   dim, grow=True)
    return out


@rule("all-gather-done", "collective-permute-done")
def done_of_start_shape(opcode, shapes, attrs, hint):
    """Element 1 of the -start's tuple: the result."""
    (start,) = shapes
    if not start.is_tuple or len(start.tuple_shapes) < 2:
        fail(f"operand must be the tuple a -start returns, got {start}")
    return start.tuple_shapes[1]


@rule("reduce-scatter")
def reduce_scatter_shape(opcode, shapes, attrs, hint):
    _check_common_attrs(attrs)
    operands = _arrays(opcode, shapes)
    dim = _one_dim(attrs, operands)
    _check_reducer(attrs, operands)
    out = need_hint(hint, "the scattered size depends on the group size")
    _check_resized(operands, _results(out, len(operands), "result"), dim, grow=False)
    return out


@rule("all-to-all")
def all_to_all_shape(opcode, shapes, attrs, hint):
    _check_common_attrs(attrs)
    operands = _arrays(opcode, shapes)
    if "dimensions" in attrs:
        if len(operands) != 1:
            fail(f"with dimensions= takes one operand, got {len(operands)}")
        _one_dim(attrs, operands)
        return operands[0]
    for i, s in enumerate(operands):
        if s != operands[0]:
            fail(f"operands of the tuple form must have one shape: operand 0 is "
                 f"{operands[0]}, operand {i} is {s}")
    return Shape.tuple_of(operands)


def _check_pairs(attrs) -> None:
    pairs = attrs.get("source_target_pairs")
    if pairs is None:
        fail("needs source_target_pairs={{source,target},...}")
    if not isinstance(pairs, tuple) or not all(
            isinstance(p, tuple) and len(p) == 2 and all(type(v) is int for v in p)
            for p in pairs):
        fail(f"source_target_pairs must be a tuple of (source, target) pairs, got {pairs!r}")
    if "dynamic_slice_sizes" in attrs:
        fail("takes slice_sizes={{..},..} for its in-place form, not dynamic_slice_sizes")


_INDEX_TYPES = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")


def _offset_groups(shape: Shape, what: str) -> list[tuple[Shape, ...]]:
    """The offsets operand as a list of per-slice tuples of integer scalars."""
    if not shape.is_tuple or not shape.tuple_shapes:
        fail(f"{what} must be a tuple of integer scalars or a tuple of such tuples, got {shape}")
    elements = shape.tuple_shapes
    groups = [e.tuple_shapes for e in elements] if all(e.is_tuple for e in elements) \
        else [elements]
    for group in groups:
        for e in group:
            if not (e.is_array and e.rank == 0 and e.element_type in _INDEX_TYPES):
                fail(f"{what} must hold integer scalars, got {shape}")
    return groups


def in_place_permute_shape(shapes, attrs) -> tuple[Shape, Shape]:
    """(input, output) shapes of the in-place collective-permute, checked."""
    if len(shapes) != 4:
        fail(f"the in-place form (slice_sizes) takes 4 operands (input, output, input "
             f"offsets, output offsets), got {len(shapes)}")
    inp, out, in_off, out_off = shapes
    inputs = list(inp.tuple_shapes) if inp.is_tuple else [inp]
    outputs = list(out.tuple_shapes) if out.is_tuple else [out]
    if inp.is_tuple != out.is_tuple or len(inputs) != len(outputs) or not inputs:
        fail(f"input {inp} and output {out} must both be arrays or tuples of as many arrays")
    for i, (a, b) in enumerate(zip(inputs, outputs)):
        array(a, f"input element {i}")
        array(b, f"output element {i}")
        if a.element_type != b.element_type or a.rank != b.rank:
            fail(f"input {a} and output {b} must have one element type and rank")
    sizes = attrs["slice_sizes"]
    if not isinstance(sizes, tuple) or not sizes or not all(isinstance(g, tuple) for g in sizes):
        fail(f"slice_sizes must be a list of integer lists like {{{{64,32}}}}, got {sizes!r}")
    groups_in = _offset_groups(in_off, "the input offsets (operand 2)")
    groups_out = _offset_groups(out_off, "the output offsets (operand 3)")
    if not (len(groups_in) == len(groups_out) == len(sizes)):
        fail(f"{len(sizes)} slice_sizes lists need as many offset tuples, got "
             f"{len(groups_in)} input and {len(groups_out)} output offset tuples")
    if inp.is_tuple and len(sizes) != len(inputs):
        fail(f"a tuple input of {len(inputs)} arrays needs {len(inputs)} slice_sizes lists, "
             f"got {len(sizes)}")
    for j, size in enumerate(sizes):
        a, b = (inputs[j], outputs[j]) if inp.is_tuple else (inputs[0], outputs[0])
        for what, group in (("input", groups_in[j]), ("output", groups_out[j])):
            if len(group) != a.rank:
                fail(f"{what} offsets {j} give {len(group)} indices for rank {a.rank}")
        if len(size) != a.rank or any(not 0 <= z <= min(x, y)
                                      for z, x, y in zip(size, a.dims, b.dims)):
            fail(f"slice_sizes {list(size)} must give one size per dimension that fits in "
                 f"both input {a} and output {b}")
    return inp, out


@rule("collective-permute")
def collective_permute_shape(opcode, shapes, attrs, hint):
    _check_common_attrs(attrs)
    _check_pairs(attrs)
    if "slice_sizes" in attrs:
        return in_place_permute_shape(shapes, attrs)[1]
    return tuple_or_single(_arrays(opcode, shapes))


@rule("collective-permute-start")
def collective_permute_start_shape(opcode, shapes, attrs, hint):
    """(operand(s), result(s), u32[] contexts): two contexts unless the hint has none."""
    _check_common_attrs(attrs)
    _check_pairs(attrs)
    if "slice_sizes" in attrs:
        inp, out = in_place_permute_shape(shapes, attrs)
        if hint is None:
            return Shape.tuple_of([inp, out, U32, U32])
        if not hint.is_tuple or len(hint.tuple_shapes) < 2 or hint.tuple_shapes[0] != inp \
                or hint.tuple_shapes[1] != out \
                or any(c != U32 for c in hint.tuple_shapes[2:]):
            fail(f"result must be (input {inp}, output {out}, u32[] contexts...), got {hint}")
        return hint
    data = tuple_or_single(_arrays(opcode, shapes))
    if hint is None:
        return Shape.tuple_of([data, data, U32, U32])
    if not hint.is_tuple or len(hint.tuple_shapes) < 2:
        fail(f"result must be a tuple (operand(s), result(s), contexts...), got {hint}")
    first, second, *contexts = hint.tuple_shapes
    if first != data or second != data:
        fail(f"elements 0 and 1 of the result must be the operand(s) {data}, got {first} and "
             f"{second}")
    for i, c in enumerate(contexts):
        if c != U32:
            fail(f"element {i + 2} of the result (a context) must be u32[], got {c}")
    return hint


_RAGGED_INDEX_TYPES = ("s32", "s64")


@rule("ragged-all-to-all")
def ragged_all_to_all_shape(opcode, shapes, attrs, hint):
    """(input, output, input_offsets, send_sizes, output_offsets, recv_sizes) -> output's
    shape: slices of input's dimension 0 go to the group's members (see eval_collective)."""
    _check_common_attrs(attrs)
    if len(shapes) != 6:
        fail(f"takes 6 operands (input, output, input_offsets, send_sizes, output_offsets, "
             f"recv_sizes), got {len(shapes)}")
    inp, out = array(shapes[0], "input"), array(shapes[1], "output")
    if inp.rank == 0 or inp.rank != out.rank or inp.dims[1:] != out.dims[1:]:
        fail(f"input {inp} and output {out} must have one rank (at least 1) and the same "
             f"dimensions after the first")
    if inp.element_type != out.element_type:
        fail(f"input {inp} and output {out} must have one element type")
    names = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")
    first = shapes[2]
    for name, s in zip(names, shapes[2:]):
        array(s, name)
        if s.rank != 1 or s.element_type not in _RAGGED_INDEX_TYPES:
            fail(f"{name} must be a rank-1 s32 or s64 array, got {s}")
        if s.dims != first.dims:
            fail(f"{name} {s} must have as many elements as input_offsets {first}")
    return out


@rule("collective-broadcast")
def collective_broadcast_shape(opcode, shapes, attrs, hint):
    _check_common_attrs(attrs)
    return tuple_or_single(_arrays(opcode, shapes))
