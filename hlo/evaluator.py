"""The numpy reference evaluator: runs an HLO module on numpy arrays.

It is the reference every other layer is tested against (passes, the LLVM
backend, constant folding, the frontend), so it follows XLA's semantics
exactly, including the corner cases XLA defines (integer division by zero,
over-wide shifts, float->int saturation, clamped indices, NaN-propagating
max/min, flush-to-zero of denormals as on XLA's CPU backend).

How it runs: `evaluate_computation` walks a computation's instructions in post
order (iteratively, operands before users) and calls, for each one, the
semantics registered in the opcode table: `OPCODES[opcode].ref(instr,
operand_values, ctx)`. The semantics live in the family modules imported
below; `ctx` (an `EvalContext`) lets them evaluate called computations
(`ctx.call(comp, args)`) and carries the denormal mode.

Values are numpy arrays (0-d for scalars) or tuples of values. Reducers,
comparators and combiners are evaluated on whole arrays of "scalars" at once,
so the semantics of scalar ops never depend on the value's shape.

Where the semantics live:

    eval_elementwise.py      unary and binary arithmetic, bit ops
    eval_compare_convert.py  compare, select, clamp, convert, bitcast-convert
    eval_movement.py         broadcast, reshape, bitcast, slices, pad, iota, tuples
    eval_reduce.py           reduce (and the vectorized reducer helpers)
    eval_window.py           reduce-window, select-and-scatter
    eval_sort.py             sort
    eval_gather_scatter.py   gather, scatter
    eval_dot_conv.py         dot, convolution
    eval_control.py          call, fusion, while, conditional, custom-call targets
    eval_library.py          topk, cholesky, triangular-solve, fft, batch norm,
                             reduce-precision, map, stochastic-convert, tokens, async
    eval_random.py           rng-bit-generator (XLA's bits), rng
    eval_collective.py       collectives, replica-id, partition-id (the device model)
    eval_common.py           EvaluationError, the float model (f16 upcast, FTZ)

Narrow element types (bf16, the 8-bit floats, s2/s4/u2/u4; dtypes.py) are held
natively, as ml_dtypes arrays, and computed as XLA's CPU computes them: an
instruction that does arithmetic on them (`_computes_narrow`) runs on its
operands widened to their compute type (f32 for bf16 and f8e8m0fnu, f16 for the
other 8-bit floats, s8/u8 for the narrow integers), as if its shapes said the
compute type, and its result is rounded back once (narrow_types.cast). The
computations it calls (a reducer, a comparator, a map's function) run wholly in
the compute types, rounding nothing in between: reductions of bf16 accumulate in
f32 (XLA's CPU rounds each step of such a reducer to bf16, in an order of its
own; the two agree within the type's precision, not bit for bit). Instructions
that only move or pass values (movement, tuples, control flow, collectives,
select, convert and bitcast-convert, which handle the types themselves) run on
the native arrays, so every bit is kept.

Modules on several devices: `evaluate` runs one device; a module that declares
more than one device (`replica_count` x `num_partitions`) and contains
collectives or device ids goes to `hlo.evaluate_devices` (eval_devices.py),
which runs every device in lockstep.
"""
from __future__ import annotations

import numpy as np

from .eval_collective import DeviceSlot
from .eval_common import EvaluationError, to_result
from .narrow_types import cast as narrow_cast, computes_narrow as _computes_narrow
from .narrow_types import narrow_dtype_of, wide_shape, widen
from .opcodes import OPCODES, reference
from .shape import Shape
from .verifier import VerifyError, check_static_shapes
# The family modules register their semantics in OPCODES when imported.
from . import eval_compare_convert, eval_control, eval_dot_conv, eval_elementwise  # noqa: F401
from . import eval_gather_scatter, eval_movement, eval_reduce, eval_sort, eval_window  # noqa: F401
from . import eval_collective, eval_library, eval_random  # noqa: F401

__all__ = ["EvaluationError", "EvalContext", "evaluate", "evaluate_computation",
           "evaluate_instruction"]


class EvalContext:
    """What the op semantics may ask of the evaluator while running one instruction."""

    def __init__(self, flush_denormals: bool = True, device: DeviceSlot | None = None):
        self.flush_denormals = flush_denormals
        # True while the called computations of an instruction on narrow types run:
        # they compute in the compute types throughout (see the module docstring).
        self.widened = False
        # The device this evaluation runs as (eval_collective.py): device 0 of a
        # one-device module unless evaluate_devices says otherwise.
        self.device = device if device is not None else DeviceSlot()
        # Post orders of the computations run so far: reducers are called many
        # times, and the module does not change while it is being evaluated.
        self._orders: dict[int, list] = {}

    def post_order(self, comp) -> list:
        order = self._orders.get(id(comp))
        if order is None:
            order = self._orders[id(comp)] = comp.post_order()
        return order

    def call(self, comp, args):
        """Evaluates the called computation `comp` on `args` (a list of values)."""
        return evaluate_computation(comp, args, ctx=self)


def evaluate(module, args, *, flush_denormals: bool = True) -> list[np.ndarray]:
    """Runs the entry computation of `module` on `args` (numpy arrays in ENTRY
    parameter order); returns the result with tuples flattened in order."""
    entry = module.entry
    if entry is None:
        raise EvaluationError(f"module {module.name} has no entry computation")
    _check_static(module)
    if module.num_devices > 1:
        per_device = next((i for i in module.instructions() if i.info.per_device), None)
        if per_device is not None:
            raise EvaluationError(
                f"module {module.name} runs on {module.num_devices} devices (replica_count="
                f"{module.replica_count}, num_partitions={module.num_partitions}) and "
                f"%{per_device.name} is a {per_device.opcode}: evaluate it with "
                f"hlo.evaluate_devices(module, args_per_device)")
    args = _check_args(entry, list(args))
    result = evaluate_computation(entry, args, ctx=EvalContext(flush_denormals))
    return _flatten(result)


def _check_static(module) -> None:
    try:
        check_static_shapes(module, "the evaluator computes with")
    except VerifyError as e:
        raise EvaluationError(str(e)) from None


def evaluate_computation(comp, args, *, ctx: EvalContext | None = None,
                         flush_denormals: bool = True):
    """The value of `comp`'s root with its parameters bound to `args`."""
    ctx = ctx or EvalContext(flush_denormals)
    order = ctx.post_order(comp)
    num_params = sum(1 for instr in order if instr.opcode == "parameter")
    if len(args) != num_params:
        raise EvaluationError(f"computation {comp.name} takes {num_params} arguments, "
                              f"got {len(args)}")
    values: dict[int, object] = {}
    for instr in order:
        if instr.opcode == "parameter":
            values[id(instr)] = args[instr.parameter_number]
            continue
        operand_values = [values[id(op)] for op in instr.operands]
        values[id(instr)] = _run(instr, operand_values, ctx)
    return values[id(comp.root)]


def evaluate_instruction(instr, operand_values, *, flush_denormals: bool = True):
    """The value of one instruction given its operands' values (constant folding)."""
    if instr.opcode == "parameter":
        raise EvaluationError(f"{instr.name}: a parameter has no value of its own")
    return _materialize(_run(instr, list(operand_values), EvalContext(flush_denormals)))


def _run(instr, operand_values, ctx):
    info = OPCODES[instr.opcode]
    if info.ref is None:
        raise EvaluationError(f"{instr.name}: {instr.opcode} has no reference semantics")
    if ctx.widened or _computes_narrow(instr):
        return _run_widened(instr, operand_values, ctx, info)
    try:
        value = info.ref(instr, operand_values, ctx)
    except EvaluationError:
        raise
    except (ValueError, TypeError, IndexError, KeyError) as err:
        # A module the verifier would reject (shapes or attributes that do not fit).
        raise EvaluationError(f"{instr.name} ({instr.opcode}): cannot evaluate: {err}") from err
    if isinstance(value, tuple):
        return value
    if not isinstance(value, np.ndarray):      # numpy returns scalars for 0-d math
        value = np.asarray(value)
    return value


# --- narrow element types ----------------------------------------------------------

class _Widened:
    """An instruction seen with its narrow types replaced by their compute types
    (its operands too); everything else is the instruction's own."""

    def __init__(self, instr):
        self._instr = instr
        self.shape = wide_shape(instr.shape)

    @property
    def operands(self):
        return [_Widened(o) for o in self._instr.operands]

    def operand(self, i):
        return _Widened(self._instr.operands[i])

    def __getattr__(self, name):
        return getattr(self._instr, name)


def _widen_value(value):
    if isinstance(value, tuple):
        return tuple(_widen_value(v) for v in value)
    return widen(np.asarray(value))


def _narrow_value(value, shape: Shape):
    if shape.is_tuple:
        return tuple(_narrow_value(v, s) for v, s in zip(value, shape.tuple_shapes))
    value = np.asarray(value)
    if shape.is_array and shape.dtype.is_narrow and narrow_dtype_of(value) is None:
        return narrow_cast(value, shape.element_type)
    return value


def _run_widened(instr, operand_values, ctx, info):
    outer = ctx.widened
    ctx.widened = True
    try:
        value = info.ref(_Widened(instr), [_widen_value(v) for v in operand_values], ctx)
    except EvaluationError:
        raise
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise EvaluationError(f"{instr.name} ({instr.opcode}): cannot evaluate: {err}") from err
    finally:
        ctx.widened = outer
    if outer:
        return _widen_value(value)       # stays in the compute type inside the computation
    return _narrow_value(value, instr.shape)


# --- arguments and results ---------------------------------------------------------

def _check_args(entry, args):
    params = entry.parameters
    if len(args) != len(params):
        raise EvaluationError(f"{entry.name} takes {len(params)} arguments, got {len(args)}")
    checked = []
    for param, arg in zip(params, args):
        checked.append(_check_arg(param, param.shape, arg))
    return checked


def _check_arg(param, shape, arg):
    where = f"argument {param.parameter_number} ({param.name})"
    if shape.is_tuple:
        if not isinstance(arg, (tuple, list)) or len(arg) != len(shape.tuple_shapes):
            raise EvaluationError(f"{where}: expected a tuple of {len(shape.tuple_shapes)} "
                                  f"values for {shape}")
        return tuple(_check_arg(param, s, a) for s, a in zip(shape.tuple_shapes, arg))
    if not shape.is_array:
        raise EvaluationError(f"{where}: {shape} values are not supported by the evaluator")
    arg = np.asarray(arg)
    expected = shape.dtype.numpy
    if tuple(arg.shape) != shape.dims:
        raise EvaluationError(f"{where}: expected shape {shape.dims} for {shape}, "
                              f"got {tuple(arg.shape)}")
    if shape.element_type == "bf16" and arg.dtype == np.float32:
        # Accepted as before bf16 was held natively: rounded to nearest even.
        return narrow_cast(arg, "bf16")
    if arg.dtype != expected:
        raise EvaluationError(f"{where}: expected dtype {expected} for {shape}, got {arg.dtype}")
    return arg


def _flatten(value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _flatten(v)]
    return [_materialize(value)]


def _materialize(value):
    """Owned, writable, contiguous arrays: internal values may be broadcast views
    or alias the arguments."""
    if isinstance(value, tuple):
        return tuple(_materialize(v) for v in value)
    return np.array(value, copy=True, order="C")


# --- leaves: parameter and constant ---------------------------------------------------

@reference("parameter")
def _parameter(instr, operands, ctx):
    raise EvaluationError(f"{instr.name}: parameters are bound by evaluate_computation")


@reference("constant")
def _constant(instr, operands, ctx):
    if instr.literal is None:
        raise EvaluationError(f"{instr.name}: the constant's value was elided ({{...}}) "
                              f"and cannot be evaluated")
    if isinstance(instr.literal, tuple):      # a tuple-shaped constant
        return instr.literal
    return to_result(instr.literal, instr)
