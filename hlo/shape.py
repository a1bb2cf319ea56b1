"""Shapes: an element type with dimensions (and an optional layout), or a tuple.

`Shape("f32", (32, 100), layout=(1, 0))` is `f32[32,100]{1,0}`; a tuple shape is
`Shape.tuple_of([...])`. The layout (minor-to-major dimension order, as XLA
prints it) is kept for printing and for `bitcast`, but is not part of equality:
two shapes are equal when element type and dimensions (or tuple elements) are.

The rest of an XLA layout, after a colon (`{1,0:T(8,128)(2,1)S(1)E(4)}`: tiles,
memory space, element size, ...), is kept as canonical text in `layout_extra`
and printed back; hlo/layout.py reads it. Only the minor-to-major order computes:
tiles, memory spaces and the like mean nothing to a CPU and are ignored.

Dynamic dimensions: `f32[<=1801]` is a dimension bounded by 1801 (`dims` holds the
bound, `dynamic` marks it) and `f32[?,4]` an unbounded one (`dims` holds
UNBOUNDED, -1). They parse, print and round-trip; nothing computes with them:
`hlo.verifier.check_static_shapes` names the first instruction that has one, and
the evaluator and the CPU backend refuse such a module with that message
(docs/hlo.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from .dtypes import DType, dtype as _dtype


UNBOUNDED = -1   # the size of an unbounded dynamic dimension (`?`)


@dataclass(frozen=True)
class Shape:
    element_type: str                        # "f32", ..., or "tuple"
    dims: tuple[int, ...] = ()
    layout: tuple[int, ...] | None = field(default=None, compare=False)
    tuple_shapes: tuple["Shape", ...] = ()
    dynamic: tuple[bool, ...] = field(default=(), compare=False)   # () = all static
    layout_extra: str = field(default="", compare=False)          # after the ':' of a layout

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        dynamic = tuple(bool(d) for d in self.dynamic)
        object.__setattr__(self, "dynamic", dynamic if any(dynamic) else ())
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
        return self.element_type != "tuple" and self.element_type != "token"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self.dims

    @property
    def is_dynamic(self) -> bool:
        """True if some dimension is bounded (`<=N`) or unbounded (`?`), here or in a
        tuple element."""
        if self.is_tuple:
            return any(s.is_dynamic for s in self.tuple_shapes)
        return bool(self.dynamic)

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
        return Shape(element_type, self.dims, self.layout, dynamic=self.dynamic,
                     layout_extra=self.layout_extra)

    def without_layout(self) -> "Shape":
        if self.is_tuple:
            return Shape.tuple_of(s.without_layout() for s in self.tuple_shapes)
        return Shape(self.element_type, self.dims, dynamic=self.dynamic)

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
        text = f"{self.element_type}[{','.join(self._dim_texts())}]"
        if with_layout and self.layout is not None and (self.dims or self.layout_extra):
            extra = ":" + self.layout_extra if self.layout_extra else ""
            text += "{" + ",".join(map(str, self.layout)) + extra + "}"
        return text

    def _dim_texts(self) -> list[str]:
        if not self.dynamic:
            return [str(d) for d in self.dims]
        return ["?" if d == UNBOUNDED else f"<={d}" if dyn else str(d)
                for d, dyn in zip(self.dims, self.dynamic)]

    def __str__(self) -> str:
        return self.to_text()
