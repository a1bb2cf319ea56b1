"""Shapes: an element type with dimensions (and an optional layout), or a tuple.

`Shape("f32", (32, 100), layout=(1, 0))` is `f32[32,100]{1,0}`; a tuple shape is
`Shape.tuple_of([...])`. The layout (minor-to-major dimension order, as XLA
prints it) is kept for printing and for `bitcast`, but is not part of equality:
two shapes are equal when element type and dimensions (or tuple elements) are.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from .dtypes import DType, dtype as _dtype


@dataclass(frozen=True)
class Shape:
    element_type: str                        # "f32", ..., or "tuple"
    dims: tuple[int, ...] = ()
    layout: tuple[int, ...] | None = field(default=None, compare=False)
    tuple_shapes: tuple["Shape", ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        if self.layout is not None:
            object.__setattr__(self, "layout", tuple(int(d) for d in self.layout))
        object.__setattr__(self, "tuple_shapes", tuple(self.tuple_shapes))

    @staticmethod
    def tuple_of(shapes) -> "Shape":
        return Shape("tuple", (), None, tuple(shapes))

    @staticmethod
    def scalar(element_type: str) -> "Shape":
        return Shape(element_type, ())

    # --- queries -------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_array(self) -> bool:
        return not self.is_tuple and self.element_type != "token"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self.dims

    @property
    def dtype(self) -> DType:
        return _dtype(self.element_type)

    @property
    def numel(self) -> int:
        return prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.numel * max(1, self.dtype.bits // 8)

    def minor_to_major(self) -> tuple[int, ...]:
        """The layout, or the default row-major one (last dimension minor-most)."""
        if self.layout is not None:
            return self.layout
        return tuple(range(self.rank - 1, -1, -1))

    def has_default_layout(self) -> bool:
        return self.minor_to_major() == tuple(range(self.rank - 1, -1, -1))

    def with_dims(self, dims) -> "Shape":
        return Shape(self.element_type, tuple(dims))

    def with_element_type(self, element_type: str) -> "Shape":
        return Shape(element_type, self.dims, self.layout)

    def without_layout(self) -> "Shape":
        if self.is_tuple:
            return Shape.tuple_of(s.without_layout() for s in self.tuple_shapes)
        return Shape(self.element_type, self.dims)

    def leaves(self) -> list["Shape"]:
        """Array shapes of a (possibly nested) tuple, flattened in order."""
        if self.is_tuple:
            return [leaf for s in self.tuple_shapes for leaf in s.leaves()]
        return [self]

    # --- text ----------------------------------------------------------------
    def to_text(self, with_layout: bool = True) -> str:
        if self.is_tuple:
            parts = []
            for i, s in enumerate(self.tuple_shapes):
                text = s.to_text(with_layout)
                # XLA marks every fifth element of a long tuple with its index.
                parts.append(f"/*index={i}*/{text}" if i and i % 5 == 0 else text)
            return "(" + ", ".join(parts) + ")"
        if self.element_type == "token":
            return "token[]"
        text = f"{self.element_type}[{','.join(map(str, self.dims))}]"
        if with_layout and self.layout is not None and self.dims:
            text += "{" + ",".join(map(str, self.layout)) + "}"
        return text

    def __str__(self) -> str:
        return self.to_text()
