"""Rotations as JAX's threefry writes them, or(shift-left(x, a), shift-right-logical(x,
w - a)) with a broadcast scalar amount, are one funnel shift (elemental/generators.py
`_rotation`, issue 19). XLA's shift semantics (an amount >= w gives 0) make the result
rotl(x, a) for a <= w and 0 beyond: checked against the evaluator for every amount from
0 to w + 8 and the wrapped negative ones, both operand orders, every integer width, and
look-alikes that are not rotations (another constant, another x) left to the shifts."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from tests.corpus_util import assert_close

TEMPLATE = """HloModule rot
ENTRY e {
  x = T[N] parameter(0)
  y = T[N] parameter(1)
  s = T[1] parameter(2)
  a = T[] reshape(s)
  w = T[] constant(W)
  r = T[] subtract(w, a)
  ab = T[N] broadcast(a), dimensions={}
  rb = T[N] broadcast(r), dimensions={}
  l = T[N] shift-left(x, ab)
  h = T[N] shift-right-logical(SECOND, rb)
  ROOT o = T[N] or(FIRST)
}
"""
NUMPY = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
         "s8": np.int8, "s32": np.int32, "s64": np.int64}


def module_text(t: str, n: int, width: int, swap: bool = False, second: str = "x") -> str:
    return (TEMPLATE.replace("T[", f"{t}[").replace("N]", f"{n}]").replace("W)", f"{width})")
            .replace("SECOND", second).replace("FIRST", "h, l" if swap else "l, h"))


def run_all_amounts(text: str, t: str, amounts) -> None:
    dtype = NUMPY[t]
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    x = rng.integers(info.min, info.max, 300, dtype=dtype, endpoint=True)
    y = rng.integers(info.min, info.max, 300, dtype=dtype, endpoint=True)
    module = hlo.parse_module(text)
    executable = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline="default"))
    for amount in amounts:
        s = np.array([amount]).astype(dtype)
        expected = np.asarray(hlo.evaluate(module, [x, y, s])[0])
        assert_close(executable.run(x, y, s)[0], expected, f"{t} amount {amount}")


@pytest.mark.parametrize("swap", [False, True], ids=["shl_first", "shr_first"])
@pytest.mark.parametrize("t", sorted(NUMPY))
def test_rotation_matches_the_shifts(t, swap):
    width = np.dtype(NUMPY[t]).itemsize * 8
    amounts = list(range(0, width + 9)) + [2 ** (width - 1) - 1, -1, -width]
    if t.startswith("u"):
        amounts = [a % 2 ** width for a in amounts]
    run_all_amounts(module_text(t, 300, width, swap), t, amounts)


def test_the_threefry_shape_becomes_a_funnel_shift():
    text = module_text("u32", 300, 32)
    executable = backend_cpu.compile(hlo.parse_module(text),
                                     backend_cpu.CompileOptions(pipeline="default"))
    assert "@llvm.fshl." in executable.as_llvm_ir()     # scalar or vectorized


@pytest.mark.parametrize("width,second", [(31, "x"), (32, "y")], ids=["other_constant", "other_x"])
def test_look_alikes_stay_shifts(width, second):
    text = module_text("u32", 300, width, second=second)
    executable = backend_cpu.compile(hlo.parse_module(text),
                                     backend_cpu.CompileOptions(pipeline="default"))
    assert "llvm.fshl" not in executable.as_llvm_ir()
    run_all_amounts(text, "u32", [0, 1, 5, 31, 32, 33, 40])
