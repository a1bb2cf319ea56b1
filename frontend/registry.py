"""The op registry: tf2xla-style kernels that lower one named op to HLO.

A kernel is an `XlaOpKernel` subclass registered under a TensorFlow-like op
name. Its `compile(ctx)` reads the op's inputs (HLO instructions, already
lowered) and attributes from an `XlaOpContext`, emits HLO through
`ctx.builder`, and sets the op's outputs:

    @register_xla_op("Relu")
    class Relu(XlaOpKernel):
        def compile(self, ctx):
            x = ctx.input(0)
            ctx.set_output(0, ctx.builder.maximum(x, ctx.zeros_like(x)))

The same `compile` serves twice: at trace time, `abstract_eval` runs it on a
scratch builder whose parameters stand for the inputs, which gives the output
shapes and dtypes and raises shape errors while the user's line is still on
the stack; at lowering time it runs on the module's builder.

Kernels expect inputs of the dtypes they document (the `ops` layer promotes
and casts first, as TensorFlow's Python API does) and raise `ValueError` /
`TypeError` with a plain message; the tracer adds the op name, the input
shapes and the user's source line.
"""
from __future__ import annotations

import difflib

import numpy as np

from ..hlo import HloBuilder, Shape

from . import dtypes

_REGISTRY: dict[str, type["XlaOpKernel"]] = {}
_REQUIRED = object()


class UnknownOpError(KeyError):
    """No kernel is registered under the name (a KeyError that prints plainly)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class XlaOpKernel:
    """Base class: lower one op to HLO in `compile(ctx)`; one instance per op kind."""

    op_name: str = "?"

    def compile(self, ctx: "XlaOpContext") -> None:
        raise NotImplementedError(f"kernel {self.op_name} has no compile()")


def register_xla_op(name: str):
    """Class decorator: register an XlaOpKernel subclass under the op name `name`."""
    def register(cls):
        if name in _REGISTRY:
            raise ValueError(f"op {name!r} is already registered (by {_REGISTRY[name].__name__})")
        cls.op_name = name
        _REGISTRY[name] = cls
        return cls
    return register


def lookup(name: str) -> XlaOpKernel:
    """The kernel of op `name`; an unknown name is an UnknownOpError listing close names."""
    try:
        return _REGISTRY[name]()
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownOpError(f"no kernel registered for op {name!r}{hint}") from None


def registered_ops() -> list[str]:
    """The names of every registered op, sorted."""
    return sorted(_REGISTRY)


class XlaOpContext:
    """What a kernel sees: its inputs (HLO values), attributes, and the builder."""

    def __init__(self, op: str, builder: HloBuilder, inputs, attrs: dict):
        self.op = op
        self.builder = builder
        self.inputs = list(inputs)
        self.attrs = dict(attrs)
        self.outputs: dict[int, object] = {}

    # --- inputs and attributes -----------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    def input(self, i: int):
        return self.inputs[i]

    def input_shape(self, i: int) -> tuple[int, ...]:
        return tuple(self.inputs[i].shape.dims)

    def input_type(self, i: int) -> str:
        """The HLO element type name of input i ("f32")."""
        return self.inputs[i].shape.element_type

    def attr(self, name: str, default=_REQUIRED):
        if name in self.attrs:
            return self.attrs[name]
        if default is _REQUIRED:
            raise ValueError(f"missing attribute {name!r}")
        return default

    # --- outputs -------------------------------------------------------------------
    def set_output(self, i: int, value) -> None:
        self.outputs[i] = value

    def output_list(self) -> list:
        if sorted(self.outputs) != list(range(len(self.outputs))):
            raise RuntimeError(f"kernel {self.op} set outputs {sorted(self.outputs)}")
        return [self.outputs[i] for i in range(len(self.outputs))]

    # --- small helpers kernels share -------------------------------------------------
    def constant(self, value, like) -> object:
        """A scalar constant of the element type of `like` (an instruction or type name)."""
        etype = like if isinstance(like, str) else like.shape.element_type
        return self.builder.constant(value, etype)

    def full_like(self, value, like) -> object:
        """`value` broadcast to the shape of the instruction `like`."""
        return self.builder.broadcast(self.constant(value, like), like.shape.dims)

    def zeros_like(self, like) -> object:
        return self.full_like(0, like)


def abstract_eval(op: str, input_avals, attrs: dict) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Output (shape, dtype) pairs of `op` on inputs of the given (shape, dtype) pairs.

    Runs the kernel on a scratch builder; kernel and shape-inference errors
    propagate (the tracer words them for the user).
    """
    kernel = lookup(op)
    b = HloBuilder(f"abstract_{op}")
    params = [b.parameter(Shape(dtypes.hlo_name(dt), shape)) for shape, dt in input_avals]
    ctx = XlaOpContext(op, b, params, attrs)
    kernel.compile(ctx)
    return [(tuple(v.shape.dims), dtypes.canonical(v.shape.element_type))
            for v in ctx.output_list()]


def lower_op(op: str, builder: HloBuilder, inputs, attrs: dict) -> list:
    """Emits `op` on `inputs` (HLO instructions) into `builder`; returns its outputs."""
    ctx = XlaOpContext(op, builder, inputs, attrs)
    lookup(op).compile(ctx)
    return ctx.output_list()
