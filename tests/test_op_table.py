"""One table per fact (issue 15): the opcode table's `transcendental` flag and the
frontend's unary rows, checked against every layer that reads them.

For each opcode the table flags transcendental: a vector routine for f32 and f64
(emitted without a call to anything but an LLVM intrinsic: never a scalar libm
loop), a reference function, a cost entry. For each row of the frontend's elementwise
table (unary and binary): a kernel emitting its opcode, an `ops` function, a gradient
or a place in NON_DIFFERENTIABLE, and rows in the value and gradient tests. And no module spells
either set out again.
"""
from __future__ import annotations

import ast
import os

import numpy as np
import pytest
from llvmlite import ir

from xlapy import hlo
from xlapy.backend_cpu.elemental import scalar_ops
from xlapy.backend_cpu.vecmath import routines
from xlapy.frontend import jit_compile, ops
from xlapy.frontend.autodiff import NON_DIFFERENTIABLE, registered_gradients
from xlapy.frontend.registry import lookup
from xlapy.frontend.elementwise_table import (BINARY_ROWS, BOOL, COMPARISON, FLOAT, NUMBER,
                                             ROUNDING, TRUEDIV, UNARY_ROWS)
from xlapy.hlo.opcodes import OPCODES, transcendental_opcodes
from xlapy.passes.cost_analysis import cost_analysis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRANSCENDENTAL = transcendental_opcodes()
N = 8


def _module(op: str, dtype: str = "f32") -> hlo.HloModule:
    arity = OPCODES[op].arity
    params = "\n".join(f"  p{i} = {dtype}[{N}] parameter({i})" for i in range(arity))
    args = ", ".join(f"p{i}" for i in range(arity))
    return hlo.parse_module(f"HloModule m\nENTRY e {{\n{params}\n"
                            f"  ROOT r = {dtype}[{N}] {op}({args})\n}}\n")


def test_the_flag_marks_elementwise_float_functions():
    assert len(TRANSCENDENTAL) >= 10
    for op in TRANSCENDENTAL:
        info = OPCODES[op]
        assert info.kind in ("unary", "binary") and info.arity in (1, 2), op
        assert info.float_only or op == "power", f"{op}: a transcendental op takes floats"


@pytest.mark.parametrize("op", TRANSCENDENTAL)
def test_every_transcendental_op_has_a_vector_routine(op):
    """f32, f64, their vectors and f16 (computed in f32) all go to vecmath, and the
    emitted code calls nothing but LLVM intrinsics."""
    f32, f64 = routines.ROUTINES[op]
    assert callable(f32) and callable(f64)
    types = [ir.HalfType(), ir.FloatType(), ir.DoubleType(),
             ir.VectorType(ir.FloatType(), 8), ir.VectorType(ir.DoubleType(), 4)]
    module = ir.Module(name=op)
    for n, ty in enumerate(types):
        arity = OPCODES[op].arity
        fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), name=f"f{n}")
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(scalar_ops.emit_math(b, op, list(fn.args)))
    called = {f.name for f in module.functions if f.is_declaration}
    assert all(name.startswith("llvm.") for name in called), f"{op} calls {called}"


@pytest.mark.parametrize("op", TRANSCENDENTAL)
def test_every_transcendental_op_has_a_reference(op):
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.5, 2.0, N).astype(np.float32) for _ in range(OPCODES[op].arity)]
    (value,) = hlo.evaluate(_module(op), args)
    assert value.dtype == np.float32 and np.isfinite(value).all(), op


@pytest.mark.parametrize("op", TRANSCENDENTAL)
def test_every_transcendental_op_counts_as_one_in_cost_analysis(op):
    cost = cost_analysis(_module(op))
    assert cost["transcendentals"] == N and cost["flops"] == 0, cost


def test_a_transcendental_op_without_a_routine_is_an_error(monkeypatch):
    """Not a scalar libm loop: the compile fails, naming the opcode."""
    monkeypatch.delitem(routines.ROUTINES, "tanh")
    fn = ir.Function(ir.Module(), ir.FunctionType(ir.FloatType(), [ir.FloatType()]), name="f")
    b = ir.IRBuilder(fn.append_basic_block())
    with pytest.raises(ValueError, match="unsupported opcode 'tanh'"):
        scalar_ops.emit_math(b, "tanh", list(fn.args))


# --- the frontend's unary rows ---------------------------------------------------------

@pytest.mark.parametrize("row", UNARY_ROWS, ids=lambda row: row.name)
def test_every_unary_row_generates_kernel_function_and_gradient(row):
    info = OPCODES[row.opcode]
    assert info.kind == "unary", row
    assert row.inputs in (FLOAT, NUMBER, ROUNDING)
    assert (row.inputs != NUMBER) == info.float_only, f"{row.name}: inputs vs {row.opcode}"
    assert lookup(row.name).op_name == row.name
    fn = getattr(ops, row.function)
    assert fn.__name__ == row.function and row.name in fn.__doc__
    if row.derivative is None:
        assert row.name in NON_DIFFERENTIABLE
    else:
        assert row.name in registered_gradients() and row.name not in NON_DIFFERENTIABLE
    lowered = jit_compile(fn).lower(np.ones(3, np.float32)).as_hlo_text()
    assert f" {row.opcode}(" in lowered, lowered


def test_every_unary_row_has_value_and_gradient_tests():
    from tests.frontend.autodiff.test_grad_elementwise import UNARY as GRADIENT_CASES
    from tests.frontend.test_elementwise import UNARY as VALUE_CASES
    valued = {case.name for case in VALUE_CASES}
    assert [r.function for r in UNARY_ROWS if r.function not in valued] == []
    assert [r.name for r in UNARY_ROWS if r.derivative and r.name not in GRADIENT_CASES] == []


# --- the frontend's binary rows ----------------------------------------------------------

_BINARY_INPUTS = {NUMBER: np.float32, FLOAT: np.int32, TRUEDIV: np.int32,
                  COMPARISON: np.float32, BOOL: np.bool_}


@pytest.mark.parametrize("row", BINARY_ROWS, ids=lambda row: row.name)
def test_every_binary_row_generates_kernel_function_and_gradient(row):
    info = OPCODES[row.opcode]
    assert info.kind == ("compare" if row.inputs == COMPARISON else "binary"), row
    assert (row.direction is not None) == (row.inputs == COMPARISON), row
    if info.float_only:
        assert row.inputs == FLOAT, f"{row.name}: {row.opcode} takes floats only"
    assert lookup(row.name).op_name == row.name
    fn = getattr(ops, row.function)
    assert fn.__name__ == row.function and row.name in fn.__doc__
    if row.partials is None:
        assert row.name in NON_DIFFERENTIABLE
    else:
        assert row.name in registered_gradients() and row.name not in NON_DIFFERENTIABLE
    # the ops function broadcasts: a [2, 3] and a [3] input
    dtype = _BINARY_INPUTS[row.inputs]
    lowered = jit_compile(fn).lower(np.ones((2, 3), dtype), np.ones(3, dtype)).as_hlo_text()
    emitted = (f" compare(" if row.inputs == COMPARISON else f" {row.opcode}(")
    assert emitted in lowered, lowered
    if row.direction:
        assert f"direction={row.direction}" in lowered, lowered


def test_every_binary_row_has_value_and_gradient_tests():
    from tests.frontend.autodiff.test_grad_elementwise import BINARY as GRADIENT_CASES
    from tests.frontend.test_elementwise import BINARY as VALUE_CASES
    valued = {case.name for case in VALUE_CASES}
    assert [r.function for r in BINARY_ROWS if r.function not in valued] == []
    assert [r.name for r in BINARY_ROWS if r.partials and r.name not in GRADIENT_CASES] == []


def test_a_binary_gradient_sums_back_over_broadcast_dims():
    """The generator's one unbroadcast: x [2, 3] and y [3] (and a scalar) get
    cotangents of their own shapes, for every differentiable row."""
    from xlapy.frontend import grad
    for row in BINARY_ROWS:
        if row.partials is None:
            continue
        fn = getattr(ops, row.function)
        loss = jit_compile(grad(lambda x, y, fn=fn: ops.reduce_sum(fn(x, y)), argnums=(0, 1)))
        x = np.full((2, 3), 1.5, np.float32)
        for y in (np.full(3, 0.75, np.float32), np.float32(0.75)):
            gx, gy = loss(x, y)
            assert np.shape(gx) == x.shape and np.shape(gy) == np.shape(y), row.name


# --- no second copy ----------------------------------------------------------------------

def _spelled_out_sets(names: set[str]):
    """(file, line) of every literal set, list or tuple naming half of `names` or more."""
    for folder in ("hlo", "passes", "backend_cpu", "frontend", "runtime", "tests", "benchmarks"):
        for directory, _, files in os.walk(os.path.join(ROOT, folder)):
            for file in files:
                if not file.endswith(".py"):
                    continue
                path = os.path.join(directory, file)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                for node in ast.walk(tree):
                    if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
                        found = {e.value for e in node.elts if isinstance(e, ast.Constant)
                                 and e.value in names}
                        if 2 * len(found) >= len(names):
                            yield os.path.relpath(path, ROOT), node.lineno


def test_no_module_spells_out_the_transcendental_ops():
    """Tables keyed by opcode (a routine, a reference, test values per op) are facts of
    their own; a bare collection of the names is a copy of the flag."""
    assert list(_spelled_out_sets(set(TRANSCENDENTAL))) == []


def test_no_module_spells_out_the_unary_rows():
    assert list(_spelled_out_sets({row.name for row in UNARY_ROWS})) == []
    assert list(_spelled_out_sets({row.function for row in UNARY_ROWS})) == []


def test_no_module_spells_out_the_binary_rows():
    assert list(_spelled_out_sets({row.name for row in BINARY_ROWS})) == []
    assert list(_spelled_out_sets({row.function for row in BINARY_ROWS})) == []


# --- reducers ------------------------------------------------------------------------------

def _reducer(op: str, dtype: str) -> hlo.HloComputation:
    module = hlo.parse_module(f"HloModule m\nENTRY r {{\n  a = {dtype}[] parameter(0)\n"
                              f"  b = {dtype}[] parameter(1)\n"
                              f"  ROOT c = {dtype}[] {op}(a, b)\n}}\n")
    return module.entry


@pytest.mark.parametrize("op", sorted(OPCODES))
def test_the_reducer_flag_is_what_evaluator_and_backend_recognize(op):
    """A reduce whose computation is a flagged op alone runs as one operation per
    element in both (numpy ufunc, one flagged instruction); no other op does."""
    from xlapy.backend_cpu.elemental.reduction import simple_reducer
    from xlapy.hlo.eval_common import recognize_binary_reducer
    info = OPCODES[op]
    if info.kind != "binary":
        assert not info.reducer, op
        return
    dtype = "s32" if op in ("and", "or", "xor") or "shift" in op else "f32"
    comp = _reducer(op, dtype)
    expected = op if info.reducer else None
    assert simple_reducer(comp) == expected
    assert recognize_binary_reducer(comp) == expected
