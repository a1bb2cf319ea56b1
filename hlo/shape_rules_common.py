"""Helpers shared by the shape rules (`shape_rules_*.py`).

A shape rule has the signature `rule(operand_shapes, attrs, hint=None) -> Shape`
and is attached to `OPCODES[name].shape_rule` by the `rule` decorator below. The
decorator binds the opcode name, so one function can serve many opcodes, and
prefixes every error with it: a rule raises `ShapeError("operand shapes f32[4]
and f32[5] differ")` and the caller sees `add: operand shapes f32[4] and f32[5]
differ`.
"""
from __future__ import annotations

from typing import Callable, Sequence

from .opcodes import shape_rule
from .shape import Shape


class ShapeError(ValueError):
    """An operand, attribute or called computation does not fit the opcode."""


def fail(message: str):
    raise ShapeError(message)


def rule(*names: str):
    """Decorator: register `fn(opcode, operand_shapes, attrs, hint)` for `names`.

    What lands in OPCODES is `rule(operand_shapes, attrs, hint=None)` with the
    opcode bound and error messages prefixed by it.
    """
    def register(fn: Callable):
        for name in names:
            shape_rule(name)(_bind(fn, name))
        return fn
    return register


def _bind(fn: Callable, opcode: str) -> Callable:
    def bound(operand_shapes: Sequence[Shape], attrs: dict, hint: Shape | None = None) -> Shape:
        try:
            return fn(opcode, list(operand_shapes), attrs, hint)
        except ShapeError as e:
            raise ShapeError(f"{opcode}: {e}") from None
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as e:
            # A missing or malformed attribute or operand list: still one clear line.
            raise ShapeError(f"{opcode}: bad operands or attributes "
                             f"({type(e).__name__}: {e})") from None
    bound.__name__ = f"{fn.__name__}[{opcode}]"
    bound.__doc__ = fn.__doc__
    return bound


# --- checks on operands --------------------------------------------------------

def array(shape: Shape, what: str = "operand") -> Shape:
    """`shape` if it is an array (not a tuple or token), else a ShapeError."""
    if not isinstance(shape, Shape):
        fail(f"{what} has no shape ({shape!r})")
    if not shape.is_array:
        fail(f"{what} must be an array, got {shape}")
    return shape


def scalar(shape: Shape, what: str) -> Shape:
    array(shape, what)
    if shape.dims:
        fail(f"{what} must be a scalar, got {shape}")
    return shape


def same_type(a: Shape, b: Shape, what: str = "operand element types") -> None:
    if a.element_type != b.element_type:
        fail(f"{what} {a.element_type} and {b.element_type} differ")


def kind_of(shape: Shape) -> str:
    return shape.dtype.kind


def need_hint(hint: Shape | None, why: str) -> Shape:
    """The result shape given by the caller for ops whose shape is not implied by operands."""
    if hint is None:
        fail(f"result shape cannot be inferred from operands ({why}); pass result_hint")
    return hint


def check_dims_attr(dims: Sequence[int], rank: int, what: str, distinct: bool = True) -> tuple[int, ...]:
    """Dimension numbers in [0, rank), distinct unless told otherwise."""
    dims = tuple(int(d) for d in dims)
    for d in dims:
        if not 0 <= d < rank:
            fail(f"{what} {list(dims)} out of range for rank {rank}")
    if distinct and len(set(dims)) != len(dims):
        fail(f"{what} {list(dims)} has duplicates")
    return dims


def tuple_or_single(shapes: Sequence[Shape]) -> Shape:
    """A single shape, or a tuple of them for variadic ops with several results."""
    shapes = list(shapes)
    return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


# --- windows (reduce-window, select-and-scatter, convolution) -----------------

def window_output_size(size: int, wd) -> int:
    """Number of window positions along one dimension of extent `size`.

    The input is first dilated (base_dilation - 1 holes between elements) and
    padded; the window itself spans (window_size - 1) * window_dilation + 1.
    """
    if wd.size < 1 or wd.stride < 1 or wd.base_dilation < 1 or wd.window_dilation < 1:
        fail(f"window dimension {wd} needs size, stride and dilations >= 1")
    dilated = (size - 1) * wd.base_dilation + 1 if size > 0 else 0
    padded = dilated + wd.pad_low + wd.pad_high
    span = (wd.size - 1) * wd.window_dilation + 1
    if padded < span:
        return 0
    return (padded - span) // wd.stride + 1


def window_output_dims(dims: Sequence[int], window, what: str = "window") -> tuple[int, ...]:
    if window is None:
        fail(f"missing {what}")
    if len(window.dims) != len(dims):
        fail(f"{what} has {len(window.dims)} dimensions, operand has rank {len(dims)}")
    return tuple(window_output_size(d, wd) for d, wd in zip(dims, window.dims))


# --- called computations ------------------------------------------------------

def param_shapes(comp) -> list[Shape]:
    return [p.shape for p in comp.parameters]


def root_shape(comp, what: str) -> Shape:
    if comp is None:
        fail(f"missing {what} computation")
    if comp.root is None:
        fail(f"{what} computation {comp.name} has no root")
    return comp.root.shape


def check_scalar_function(comp, what: str, arg_types: Sequence[str],
                          result_types: Sequence[str]) -> None:
    """`comp` takes scalars of `arg_types` and returns scalars of `result_types`.

    One result is a bare scalar, several are a tuple (XLA's convention for
    reducers, comparators, select and scatter functions).
    """
    got = root_shape(comp, what)
    params = param_shapes(comp)
    want_params = [Shape.scalar(t) for t in arg_types]
    if params != want_params:
        fail(f"{what} computation {comp.name} takes ({', '.join(map(str, params))}), "
             f"expected ({', '.join(map(str, want_params))})")
    want = tuple_or_single([Shape.scalar(t) for t in result_types])
    if got != want:
        fail(f"{what} computation {comp.name} returns {got}, expected {want}")


def check_reducer(comp, what: str, acc_types: Sequence[str], input_types: Sequence[str]) -> None:
    """A reducer of N values: (acc_1..acc_N, x_1..x_N) -> (acc_1..acc_N)."""
    check_scalar_function(comp, what, list(acc_types) + list(input_types), acc_types)


def check_params_match(comp, what: str, operand_shapes: Sequence[Shape]) -> None:
    """A called computation (call, fusion, branch) takes exactly the operand shapes."""
    if comp is None:
        fail(f"missing {what} computation")
    params = param_shapes(comp)
    if len(params) != len(operand_shapes):
        fail(f"{what} computation {comp.name} has {len(params)} parameters, "
             f"given {len(operand_shapes)} operands")
    for i, (p, o) in enumerate(zip(params, operand_shapes)):
        if p != o:
            fail(f"{what} computation {comp.name} parameter {i} is {p}, operand is {o}")
