"""Elementwise opcodes on the CPU backend vs the reference evaluator, in every dtype.

One module per dtype holds every applicable opcode (a tuple of results), so each
dtype compiles once. Inputs start with the dtype's edge values (0, -0, +-inf, NaN,
denormals, INT_MIN, INT_MAX, -1, over-wide shift amounts) followed by random ones.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo
from xlapy.backend_cpu.elemental import scalar_ops
from xlapy.hlo.opcodes import transcendental_opcodes
from tests.backend_cpu.helpers import check_against_evaluator, edge_values

N = 96
# Every opcode the table flags transcendental is tested here (in table order).
MATH_UNARY = [op for op in transcendental_opcodes() if hlo.OPCODES[op].arity == 1]
MATH_BINARY = [op for op in transcendental_opcodes() if hlo.OPCODES[op].arity == 2]
FLOAT_UNARY = ["abs", "negate", "sign", "floor", "ceil", "round-nearest-afz",
               "round-nearest-even", *MATH_UNARY, "copy"]
INT_UNARY = ["abs", "negate", "sign", "not", "popcnt", "count-leading-zeros", "copy"]
FLOAT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
                *MATH_BINARY]
INT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
              "power", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
              "shift-right-logical"]
DIRECTIONS = ["EQ", "NE", "LT", "LE", "GT", "GE"]
INT_TYPES = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]
FLOAT_TYPES = ["f16", "f32", "f64"]


def _module(t: str, unary, binary, compare_types) -> str:
    lines = [f"  x = {t}[{N}] parameter(0)", f"  y = {t}[{N}] parameter(1)"]
    results = []
    for op in unary:
        lines.append(f"  u{len(results)} = {t}[{N}] {op}(x)")
        results.append((f"u{len(results)}", t))
    for op in binary:
        lines.append(f"  b{len(results)} = {t}[{N}] {op}(x, y)")
        results.append((f"b{len(results)}", t))
    for cmp_type in compare_types:
        for d in DIRECTIONS:
            extra = f", type={cmp_type}" if cmp_type else ""
            lines.append(f"  c{len(results)} = pred[{N}] compare(x, y), direction={d}{extra}")
            results.append((f"c{len(results)}", "pred"))
    shapes = ", ".join(f"{rt}[{N}]" for _, rt in results)
    lines.append(f"  ROOT t = ({shapes}) tuple({', '.join(n for n, _ in results)})")
    return "HloModule elementwise_" + t + "\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


def _inputs(t: str):
    x = edge_values(t, N, seed=1)
    y = edge_values(t, N, seed=2)
    y[: N // 2] = x[::-1][: N // 2]       # pair every edge value with every other
    if t in INT_TYPES:
        y[-12:] = np.arange(28, 40).astype(y.dtype)     # shift amounts around the width
    return x, y


@pytest.mark.parametrize("t", FLOAT_TYPES)
def test_float_elementwise(t):
    x, y = _inputs(t)
    with np.errstate(all="ignore"):
        check_against_evaluator(_module(t, FLOAT_UNARY, FLOAT_BINARY,
                                        [None, "TOTALORDER"]), [x, y], t)


@pytest.mark.parametrize("t", FLOAT_TYPES)
def test_is_finite(t):
    x = edge_values(t, N)
    text = f"HloModule f\nENTRY e {{\n  x = {t}[{N}] parameter(0)\n  ROOT r = pred[{N}] is-finite(x)\n}}\n"
    check_against_evaluator(text, [x], t)


@pytest.mark.parametrize("t", INT_TYPES)
def test_int_elementwise(t):
    x, y = _inputs(t)
    check_against_evaluator(_module(t, INT_UNARY, INT_BINARY, [None]), [x, y], t)


def test_pred_elementwise():
    x, y = _inputs("pred")
    check_against_evaluator(_module("pred", ["not", "copy"], ["and", "or", "xor", "maximum",
                                                              "minimum"], [None]), [x, y], "pred")


def test_int_division_edges_are_xla_defined():
    """x / 0 = -1, x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0: never a trap."""
    text = """HloModule div
ENTRY e {
  x = s32[4] parameter(0)
  y = s32[4] parameter(1)
  d = s32[4] divide(x, y)
  r = s32[4] remainder(x, y)
  ROOT t = (s32[4], s32[4]) tuple(d, r)
}"""
    x = np.array([7, -7, -2**31, -2**31], np.int32)
    y = np.array([0, 0, -1, 0], np.int32)
    d, r = check_against_evaluator(text, [x, y])
    np.testing.assert_array_equal(d, [-1, -1, -2**31, -1])
    np.testing.assert_array_equal(r, [7, -7, 0, -2**31])


ALL_TYPES = ["pred"] + INT_TYPES + FLOAT_TYPES


@pytest.mark.parametrize("src", ALL_TYPES)
def test_convert_to_every_type(src):
    """Saturating float->int with NaN -> 0, wrapping int narrowing, pred as 0/1."""
    lines = [f"  x = {src}[{N}] parameter(0)"]
    names = []
    for i, dst in enumerate(ALL_TYPES):
        lines.append(f"  c{i} = {dst}[{N}] convert(x)")
        names.append(f"c{i}")
    shapes = ", ".join(f"{d}[{N}]" for d in ALL_TYPES)
    lines.append(f"  ROOT t = ({shapes}) tuple({', '.join(names)})")
    text = f"HloModule convert_{src}\nENTRY e {{\n" + "\n".join(lines) + "\n}\n"
    x = edge_values(src, N, seed=3)
    if x.dtype.kind == "f":
        x[np.abs(x) < 1e-30] = 0      # denormals: see test_denormal_inputs_read_as_zero
    with np.errstate(all="ignore"):
        check_against_evaluator(text, [x], src)


def test_denormal_inputs_read_as_zero():
    """Kernels run with FTZ/DAZ like XLA's CPU backend: a denormal input is zero
    everywhere, including compares and conversions to pred."""
    text = """HloModule daz
ENTRY e {
  x = f32[2] parameter(0)
  zero = f32[] constant(0)
  z = f32[2] broadcast(zero), dimensions={}
  eq = pred[2] compare(x, z), direction=EQ
  p = pred[2] convert(x)
  two = f32[] constant(2)
  t = f32[2] broadcast(two), dimensions={}
  m = f32[2] multiply(x, t)
  ROOT r = (pred[2], pred[2], f32[2]) tuple(eq, p, m)
}"""
    from tests.backend_cpu.helpers import compiled
    _, executable = compiled(text)
    eq, as_pred, doubled = executable.run(np.array([1e-40, -1e-39], np.float32))
    assert eq.all() and not as_pred.any()
    np.testing.assert_array_equal(doubled, [0, 0])


@pytest.mark.parametrize("src,dst", [("f32", "s32"), ("f32", "u32"), ("s32", "f32"),
                                     ("f64", "s64"), ("u64", "f64"), ("f16", "s16"),
                                     ("u16", "f16")])
def test_bitcast_convert(src, dst):
    text = (f"HloModule bc\nENTRY e {{\n  x = {src}[{N}] parameter(0)\n"
            f"  ROOT r = {dst}[{N}] bitcast-convert(x)\n}}\n")
    x = edge_values(src, N, seed=4)
    (result,) = check_against_evaluator(text, [x])
    np.testing.assert_array_equal(result.view(x.dtype), x)


@pytest.mark.parametrize("t", ["f32", "s32", "u8", "f16"])
def test_select_and_clamp(t):
    text = f"""HloModule sc
ENTRY e {{
  p = pred[{N}] parameter(0)
  x = {t}[{N}] parameter(1)
  y = {t}[{N}] parameter(2)
  lo = {t}[] parameter(3)
  s = {t}[{N}] select(p, x, y)
  c = {t}[{N}] clamp(lo, x, y)
  ROOT r = ({t}[{N}], {t}[{N}]) tuple(s, c)
}}"""
    x, y = _inputs(t)
    lo = np.asarray(edge_values(t, 8, seed=5)[5])
    check_against_evaluator(text, [edge_values("pred", N), x, y, lo], t)


def test_every_elementwise_opcode_has_a_recipe():
    """The coverage check a C++ switch would give: no elementwise opcode is forgotten."""
    missing = [name for name, info in hlo.OPCODES.items()
               if info.is_elementwise and not scalar_ops.has_recipe(name)
               and name not in scalar_ops.UNSUPPORTED]
    assert missing == []
