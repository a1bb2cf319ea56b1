"""Shape rules of data-movement ops: broadcast, reshape, bitcast, transpose, slice,
pad, concatenate, reverse, iota, dynamic-slice, dynamic-update-slice.

`broadcast`, `reshape`, `bitcast` and `iota` cannot infer their result from the
operands alone: the caller's `hint` is the result, and the rule checks that it
fits (element counts, mapped dimensions, element type).
"""
from __future__ import annotations

from math import ceil

from .shape_rules_common import (array, check_dims_attr, fail, need_hint, rule, same_type,
                                 scalar)


@rule("broadcast")
def broadcast_shape(opcode, shapes, attrs, hint):
    """Operand dim i becomes result dim dimensions[i]; the other result dims are new."""
    (x,) = shapes
    array(x)
    out = array(need_hint(hint, "the result dims"), "result")
    same_type(x, out)
    dims = tuple(attrs.get("dimensions", ()))
    if len(dims) != x.rank:
        fail(f"dimensions {list(dims)} must have one entry per operand dim of {x}")
    check_dims_attr(dims, out.rank, "dimensions")
    for i, d in enumerate(dims):
        if x.dims[i] != out.dims[d]:
            fail(f"operand dim {i} of {x} (size {x.dims[i]}) maps to result dim {d} "
                 f"of {out} (size {out.dims[d]})")
    return out


@rule("reshape")
def reshape_shape(opcode, shapes, attrs, hint):
    """Same element type and element count, any dims."""
    (x,) = shapes
    array(x)
    out = array(need_hint(hint, "the result dims"), "result")
    same_type(x, out)
    if x.numel != out.numel:
        fail(f"element counts of {x} ({x.numel}) and {out} ({out.numel}) differ")
    return out


@rule("bitcast")
def bitcast_shape(opcode, shapes, attrs, hint):
    """Reinterprets the buffer: only the byte size must agree.

    After layout assignment XLA turns layout-compatible reshapes and transposes
    (and even same-width type changes, f32[] -> s32[]) into bitcasts, so dims,
    layout and element type may all differ.
    """
    (x,) = shapes
    array(x)
    out = array(need_hint(hint, "a bitcast is a reinterpretation"), "result")
    if x.numel * x.dtype.bits != out.numel * out.dtype.bits:
        fail(f"{x} and {out} have different sizes in bits")
    return out


@rule("transpose")
def transpose_shape(opcode, shapes, attrs, hint):
    """`dimensions` is a permutation: result dim i is operand dim perm[i]."""
    (x,) = shapes
    array(x)
    perm = tuple(attrs.get("dimensions", ()))
    if sorted(perm) != list(range(x.rank)):
        fail(f"dimensions {list(perm)} is not a permutation of the {x.rank} dims of {x}")
    return x.with_dims(x.dims[p] for p in perm)


@rule("slice")
def slice_shape(opcode, shapes, attrs, hint):
    """Per dim [start:limit:stride]: ceil((limit - start) / stride) elements."""
    (x,) = shapes
    array(x)
    slices = attrs.get("slice")
    if slices is None or len(slices) != x.rank:
        got = "none" if slices is None else len(slices)
        fail(f"slice needs one [start:limit:stride] per dim of {x}, got {got}")
    dims = []
    for i, (s, size) in enumerate(zip(slices, x.dims)):
        if s.stride < 1:
            fail(f"dim {i}: stride {s.stride} must be >= 1")
        if not 0 <= s.start <= s.limit <= size:
            fail(f"dim {i}: [{s.start}:{s.limit}] out of bounds for size {size}")
        dims.append(ceil((s.limit - s.start) / s.stride))
    return x.with_dims(dims)


@rule("pad")
def pad_shape(opcode, shapes, attrs, hint):
    """low + size + (size - 1) * interior + high per dim; low/high may be negative."""
    x, value = shapes
    array(x)
    scalar(value, "padding value")
    same_type(x, value)
    padding = attrs.get("padding")
    if padding is None or len(padding) != x.rank:
        got = "none" if padding is None else len(padding)
        fail(f"padding needs one low_high_interior per dim of {x}, got {got}")
    dims = []
    for i, (p, size) in enumerate(zip(padding, x.dims)):
        if p.interior < 0:
            fail(f"dim {i}: interior padding {p.interior} is negative")
        n = p.low + size + max(size - 1, 0) * p.interior + p.high
        if n < 0:
            fail(f"dim {i}: padding {p.low}_{p.high}_{p.interior} of size {size} gives {n} elements")
        dims.append(n)
    return x.with_dims(dims)


@rule("concatenate")
def concatenate_shape(opcode, shapes, attrs, hint):
    """Operands agree on every dim but `dimensions={d}`, where sizes add up."""
    if not shapes:
        fail("needs at least one operand")
    first = array(shapes[0])
    (d,) = check_dims_attr(attrs.get("dimensions", ()), max(first.rank, 1), "dimensions")
    if first.rank == 0:
        fail("cannot concatenate scalars")
    total = 0
    for s in shapes:
        array(s)
        same_type(first, s)
        if s.rank != first.rank or any(a != b for i, (a, b) in enumerate(zip(s.dims, first.dims))
                                       if i != d):
            fail(f"operand {s} does not match {first} outside dim {d}")
        total += s.dims[d]
    return first.with_dims(first.dims[:d] + (total,) + first.dims[d + 1:])


@rule("shuffle")
def shuffle_shape(opcode, shapes, attrs, hint):
    """shuffle(x), dimensions={d...}: the operand's shape. mode=rotate with shifts={s...}
    (one per dimension); mode=permute with indices=<an integer literal>: the operand's
    dims (1 where the coordinates are shared), plus a last dim of the coordinates when
    more than one dimension is shuffled."""
    from .ir import LiteralAttr
    (x,) = shapes
    array(x)
    dims = check_dims_attr(attrs.get("dimensions", ()), x.rank, "dimensions")
    if not dims or len(set(dims)) != len(dims):
        fail(f"needs dimensions={{d,...}}: distinct dimensions to shuffle, got {list(dims)}")
    mode = attrs.get("mode")
    if mode == "rotate":
        shifts = tuple(attrs.get("shifts", ()))
        if len(shifts) != len(dims):
            fail(f"mode=rotate needs one shift per dimension: shifts={list(shifts)} for "
                 f"dimensions={list(dims)}")
        if "indices" in attrs:
            fail("mode=rotate takes shifts=, not indices=")
    elif mode == "permute":
        ind = attrs.get("indices")
        if not isinstance(ind, LiteralAttr) or not ind.shape.is_array:
            fail("mode=permute needs indices=<an integer literal>")
        s = ind.shape
        if s.dtype.kind not in ("signed", "unsigned"):
            fail(f"indices must be integers, got {s}")
        want = x.rank + (1 if len(dims) > 1 else 0)
        if s.rank != want or any(n not in (1, m) for n, m in zip(s.dims, x.dims)) or \
                (len(dims) > 1 and s.dims[-1] != len(dims)):
            fail(f"indices {s} must have the operand's dims (or 1 where shared)"
                 + (f" and a last dim of {len(dims)} coordinates" if len(dims) > 1 else ""))
        if "shifts" in attrs:
            fail("mode=permute takes indices=, not shifts=")
    else:
        fail(f"mode must be rotate or permute, got {mode!r}")
    return x


@rule("reverse")
def reverse_shape(opcode, shapes, attrs, hint):
    (x,) = shapes
    array(x)
    check_dims_attr(attrs.get("dimensions", ()), x.rank, "dimensions")
    return x


@rule("iota")
def iota_shape(opcode, shapes, attrs, hint):
    """The hint's shape; `iota_dimension` must be one of its dims."""
    out = array(need_hint(hint, "iota has no operands"), "result")
    d = attrs.get("iota_dimension")
    if d is None or not 0 <= d < out.rank:
        fail(f"iota_dimension {d} out of range for {out}")
    if out.element_type == "pred":
        fail("iota of pred is not allowed")
    return out


def _start_indices(indices, rank: int) -> None:
    if len(indices) != rank:
        fail(f"needs {rank} start indices (one per operand dim), got {len(indices)}")
    for i, s in enumerate(indices):
        scalar(s, f"start index {i}")
        if not s.dtype.is_integer:
            fail(f"start index {i} must be an integer scalar, got {s}")


@rule("dynamic-slice")
def dynamic_slice_shape(opcode, shapes, attrs, hint):
    """dynamic-slice(operand, i0, i1, ...): the result has `dynamic_slice_sizes`."""
    if not shapes:
        fail("needs an operand")
    x = array(shapes[0])
    _start_indices(shapes[1:], x.rank)
    sizes = tuple(attrs.get("dynamic_slice_sizes", ()))
    if len(sizes) != x.rank:
        fail(f"dynamic_slice_sizes {list(sizes)} must have one size per dim of {x}")
    for i, (n, size) in enumerate(zip(sizes, x.dims)):
        if not 0 <= n <= size:
            fail(f"dim {i}: slice size {n} does not fit in {size}")
    return x.with_dims(sizes)


@rule("dynamic-update-slice")
def dynamic_update_slice_shape(opcode, shapes, attrs, hint):
    """dynamic-update-slice(operand, update, i0, ...): the operand's shape."""
    if len(shapes) < 2:
        fail("needs an operand and an update")
    x, update = array(shapes[0]), array(shapes[1], "update")
    same_type(x, update)
    if update.rank != x.rank or any(u > s for u, s in zip(update.dims, x.dims)):
        fail(f"update {update} does not fit in operand {x}")
    _start_indices(shapes[2:], x.rank)
    return x
