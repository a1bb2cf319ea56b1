"""What every user-facing op function does first: find the trace, turn Python
and numpy values into tensors, promote dtypes, and record the node.

    apply("Relu", [x])                 -> Tensor   (one output)
    apply_multi("Split", [x], sizes=…) -> list[Tensor]
    promote(x, 2.0)                    -> (Tensor, Tensor) of one dtype

Python scalars are weakly typed (they take the other operand's dtype); numpy
arrays and numpy scalars keep their dtype. The rules are in frontend/dtypes.py.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from ..trace import current_graph, user_source_line

PYTHON_SCALARS = (bool, int, float, complex)


def graph_of(*values):
    """The trace the values belong to (the current one); an error outside a trace."""
    # The innermost trace wins: a cond/while body (a nested graph) records its
    # ops, capturing tensors of the enclosing trace, even when those come first.
    graph = current_graph()
    if graph is not None:
        return graph
    for v in values:
        if isinstance(v, Tensor):
            return v.graph
    raise RuntimeError("frontend ops build a traced graph: call them inside a function "
                       "run by jit_compile (or under trace.tracing)")


def constant(value, dtype=None, shape=None, name="Const") -> Tensor:
    """A Const node holding `value` (numpy array, scalar or list); with `shape`, a
    scalar (or one-element) value fills it and other values are reshaped to it."""
    array = dtypes.as_array(value) if dtype is None else \
        np.asarray(value, dtype=dtypes.canonical(dtype))
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        if array.size == 1:
            array = np.full(shape, array.reshape(()), array.dtype)
        elif array.size == int(np.prod(shape)):
            array = array.reshape(shape)
        else:
            raise user_error(TypeError, f"constant: {array.size} values do not fit "
                                        f"shape {list(shape)}")
    return graph_of().add_node("Const", [], {"value": array})[0]


def to_tensor(value, dtype=None) -> Tensor:
    """A Tensor as is (cast to `dtype` if given), or a constant made of `value`."""
    if isinstance(value, Tensor):
        return value if dtype is None or value.dtype == np.dtype(dtype) else cast(value, dtype)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        raise user_error(TypeError, "a list holding tensors is not a tensor: "
                                    "use ops.stack or ops.concat")
    return constant(value, dtype)


def apply_multi(op: str, inputs, **attrs) -> list[Tensor]:
    """Records `op` on the inputs (Tensors or values) and returns all its outputs."""
    inputs = [to_tensor(v) for v in inputs]
    return graph_of(*inputs).add_node(op, inputs, attrs)


def apply(op: str, inputs, **attrs) -> Tensor:
    return apply_multi(op, inputs, **attrs)[0]


def cast(x, dtype, name=None) -> Tensor:
    """x converted to `dtype` (a numpy dtype or a name: "float32", "f32")."""
    target = dtypes.canonical(dtype)
    x = to_tensor(x)
    if x.dtype == target:
        return x
    return apply("Cast", [x], dtype=dtypes.hlo_name(target))


def is_python_scalar(value) -> bool:
    return isinstance(value, PYTHON_SCALARS) and not isinstance(value, np.generic)


def promote(*values) -> list[Tensor]:
    """The values as tensors of one dtype: strong dtypes combine by `result_type`,
    Python scalars take the result (weak typing)."""
    strong = [v.dtype if isinstance(v, Tensor) else dtypes.default_dtype(v)
              for v in values if not is_python_scalar(v)]
    if strong:
        target = strong[0]
        for dt in strong[1:]:
            target = dtypes.result_type(target, dt)
        for v in values:
            if is_python_scalar(v):
                target = dtypes.result_type(target, dtypes.weak_scalar_dtype(v, target))
    else:
        target = dtypes.default_dtype(_widest_scalar(values))
    return [to_tensor(v, target) for v in values]


def user_error(kind: type, message: str) -> Exception:
    """An exception of `kind` whose message ends with the user's source line."""
    where = user_source_line()
    return kind(message + (f"\n  at {where}" if where else ""))


def promote_for(op: str, *values) -> list[Tensor]:
    """`promote`, with errors naming the op and the user's line."""
    try:
        return promote(*values)
    except TypeError as e:
        raise user_error(TypeError, f"{op}: {e}") from None


def _widest_scalar(values):
    """Among Python scalars, the one whose default type wins (bool < int < float)."""
    rank = {bool: 0, int: 1, float: 2, complex: 3}
    return max(values, key=lambda v: rank[type(v)] if type(v) in rank else 1)


def to_float(x) -> Tensor:
    """A floating tensor: integers and bools become the default float (float32)."""
    x = to_tensor(x)
    return x if dtypes.is_float(x.dtype) else cast(x, dtypes.DEFAULT_FLOAT)


def static_int(value, what: str) -> int:
    """A Python int from an int-like static argument (a shape entry, an axis)."""
    if isinstance(value, Tensor):
        raise user_error(TypeError, f"{what} must be known at trace time, "
                                    f"got a traced {value.aval_text()}")
    if not isinstance(value, numbers.Integral):
        raise user_error(TypeError, f"{what} must be an int, got {value!r}")
    return int(value)


def static_value(value):
    """The numpy value of `value` when it is known at trace time (a Python or numpy
    value, or a tensor made by a Const node), else None."""
    if isinstance(value, Tensor):
        node = value.node
        if node is not None and node.op == "Const":
            return np.asarray(node.attrs["value"])
        return None
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        return None
    return np.asarray(value)
