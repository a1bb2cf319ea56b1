"""Helpers the kernels share: numpy broadcasting, axes, reductions, constants.

All of them take an `HloBuilder` (or a kernel context's builder) and HLO
instructions, and emit plain HLO: numpy's implicit broadcasting becomes an
explicit `reshape` (dropping the size-1 dims that stretch) plus `broadcast`,
which is what XLA needs.
"""
from __future__ import annotations

import numpy as np

from ...hlo import Shape

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")


def is_float(etype: str) -> bool:
    return etype in FLOAT_TYPES


def is_integer(etype: str) -> bool:
    return etype[0] in "su" and etype[1:].isdigit()


def require_same_types(values, what: str = "operands") -> str:
    """The common element type of `values`; TypeError when they differ."""
    types = [v.shape.element_type for v in values]
    if len(set(types)) > 1:
        raise TypeError(f"{what} must have one element type, got {', '.join(types)}")
    return types[0]


def require_float(value, what: str = "input") -> str:
    etype = value.shape.element_type
    if not is_float(etype):
        raise TypeError(f"{what} must be floating point, got {etype}")
    return etype


# --- shapes and axes ---------------------------------------------------------------------

def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """numpy's broadcast of shapes; ValueError naming them when they do not fit."""
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            text = " and ".join(str(list(s)) for s in shapes)
            raise ValueError(f"shapes {text} cannot be broadcast together")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def broadcast_to(b, x, dims):
    """`x` broadcast to `dims` by numpy's rules (trailing dims aligned)."""
    dims = tuple(dims)
    src = tuple(x.shape.dims)
    if src == dims:
        return x
    offset = len(dims) - len(src)
    if offset < 0 or any(s not in (1, dims[offset + i]) for i, s in enumerate(src)):
        raise ValueError(f"shape {list(src)} cannot be broadcast to {list(dims)}")
    # Dims of size 1 that stretch are dropped first: broadcast maps operand dims
    # to result dims one to one and cannot change a size.
    keep = [i for i, s in enumerate(src) if s == dims[offset + i]]
    if len(keep) != len(src):
        x = b.reshape(x, [src[i] for i in keep])
    return b.broadcast(x, dims, dims=[offset + i for i in keep])


def broadcast_all(b, values):
    """Every value broadcast to the common shape of all of them."""
    dims = broadcast_shapes(*[tuple(v.shape.dims) for v in values])
    return [broadcast_to(b, v, dims) for v in values]


def normalize_axis(axis: int, rank: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return int(axis) % rank if rank else 0


def normalize_axes(axis, rank: int) -> tuple[int, ...]:
    """Sorted, distinct, non-negative axes; None means all of them."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    axes = tuple(sorted({normalize_axis(a, rank) for a in axis}))
    if len(axes) != len(tuple(axis)):
        raise ValueError(f"repeated axis in {tuple(axis)}")
    return axes


# --- constants and reductions ------------------------------------------------------------

def full(b, value, etype: str, dims):
    return b.broadcast(b.constant(value, etype), tuple(dims))


def lowest(etype: str):
    """The identity of maximum: -inf for floats, the minimum of an integer type."""
    if etype == "pred":
        return False
    if is_float(etype):
        return -np.inf
    return np.iinfo(Shape.scalar(etype).dtype.numpy).min


def highest(etype: str):
    if etype == "pred":
        return True
    if is_float(etype):
        return np.inf
    return np.iinfo(Shape.scalar(etype).dtype.numpy).max


def reduce(b, x, opcode: str, init, axes):
    """Reduces `axes` of `x` with the scalar `opcode` ("add", "maximum", ...)."""
    etype = x.shape.element_type
    reducer = b.scalar_computation(f"{opcode.replace('-', '_')}_{etype}", opcode, etype)
    return b.reduce(x, b.constant(init, etype), dims=tuple(axes), to_apply=reducer)


NARROW_FLOATS = ("f16", "bf16")


def accumulation_type(etype: str) -> str:
    """The type sums of `etype` accumulate in: f32 for f16 and bf16 (as TF's XLA
    kernels do), the type itself otherwise."""
    return "f32" if etype in NARROW_FLOATS else etype


def sum_wide(b, x, axes):
    """The sum of `axes` of `x`, f16/bf16 accumulated in f32 and rounded once."""
    etype = x.shape.element_type
    work = accumulation_type(etype)
    if work == etype:
        return reduce(b, x, "add", 0, axes)
    return b.convert(reduce(b, b.convert(x, work), "add", 0, axes), etype)


def expand_reduced(b, reduced, dims, axes):
    """A reduced value broadcast back along `axes` to the full `dims`."""
    kept = [d for d in range(len(dims)) if d not in axes]
    return b.broadcast(reduced, tuple(dims), dims=kept)


def keepdims_shape(dims, axes) -> tuple[int, ...]:
    return tuple(1 if d in axes else n for d, n in enumerate(dims))


def count(dims, axes) -> int:
    n = 1
    for a in axes:
        n *= dims[a]
    return n
