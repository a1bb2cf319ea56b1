"""Layouts where a value crosses a boundary: each side reads it in its own declared layout.

Issue 14: a conditional branch returning `f32[3,3]{0,1} transpose(x)` in a tuple
declared `{1,0}` gave x untransposed, and the gradient of a Flax LSTM was wrong
because `{2,0,1}` transposes flowed into a while state declared `{2,1,0}`. The
backend used to alias such values as bytes. Every case here puts a value in one
layout across a boundary whose other side declares another (conditional operands
and results, while state in and out, call, fusion parameters and roots, tuples
nested, get-tuple-element, entry parameters and results, copy/bitcast/reshape/
opt-barrier), in both directions (the value non-default and the declaration
row-major, and the reverse), and compares with the evaluator, which reads no
layout but bitcast's. Each runs as given and through the CPU pipeline.
"""
from __future__ import annotations

from pathlib import Path
from string import Template

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from tests.backend_cpu.helpers import uniquify
from tests.corpus_util import assert_close

# (dims, a layout other than row-major)
LAYOUTS = [
    ((3, 4), (0, 1)),
    ((2, 3, 4), (2, 0, 1)),
    ((2, 3, 4), (0, 2, 1)),
    ((2, 3, 4), (1, 0, 2)),
    ((2, 3, 4), (0, 1, 2)),
]
LAYOUT_IDS = ["{" + ",".join(map(str, layout)) + "}" for _, layout in LAYOUTS]
PIPELINES = [None, "default"]


def shape_text(dims, layout) -> str:
    return f"f32[{','.join(map(str, dims))}]{{{','.join(map(str, layout))}}}"


def variants(dims, layout):
    """(S, D) substitutions: the value's layout S differs from the declared D, both ways."""
    other = shape_text(dims, layout)
    default = shape_text(dims, tuple(range(len(dims) - 1, -1, -1)))
    return [dict(S=other, D=default), dict(S=default, D=other)]


def run_and_compare(text: str, args, pipeline=None, what: str = "") -> list[np.ndarray]:
    module = hlo.parse_module(uniquify(text))
    hlo.verify(module)
    expected = hlo.evaluate(module, list(args))
    options = backend_cpu.CompileOptions(pipeline=pipeline)
    actual = backend_cpu.compile(module, options).run(*args)
    assert len(actual) == len(expected), what
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, np.asarray(e), f"{what} output {i}")
    return actual


def distinct(dims, seed=0) -> np.ndarray:
    """Distinct values, so that any element read from the wrong place shows."""
    n = int(np.prod(dims))
    return (np.random.default_rng(seed).permutation(n) + 1).astype(np.float32).reshape(dims)


def check_all_layouts(template: str, extra_args=(), pipeline=None):
    for dims, layout in LAYOUTS:
        for subst in variants(dims, layout):
            text = Template(template).substitute(subst)
            args = list(extra_args) + [distinct(dims)]
            run_and_compare(text, args, pipeline, f"{subst}")


# --- the reported case -------------------------------------------------------------------

ISSUE_14 = """
HloModule issue14

b0 {
  p = f32[3,3]{1,0} parameter(0)
  t = f32[3,3]{0,1} transpose(p), dimensions={1,0}
  ROOT r = (f32[3,3]{1,0}) tuple(t)
}

b1 {
  p = f32[3,3]{1,0} parameter(0)
  ROOT r = (f32[3,3]{1,0}) tuple(p)
}

ENTRY e {
  i = s32[] parameter(0)
  x = f32[3,3]{1,0} parameter(1)
  c = (f32[3,3]{1,0}) conditional(i, x, x), branch_computations={b0, b1}
  ROOT g = f32[3,3]{1,0} get-tuple-element(c), index=0
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("branch", [0, 1])
def test_issue14_conditional_returns_transposed_layout(branch, pipeline):
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    (out,) = run_and_compare(ISSUE_14, [np.int32(branch), x], pipeline)
    np.testing.assert_array_equal(out, x.T if branch == 0 else x)


# --- conditional -------------------------------------------------------------------------

@pytest.mark.parametrize("etype", ["f64", "f16", "s8", "s32", "u64", "pred"])
def test_relayout_of_every_element_size(etype):
    """The relayout copy moves elements of every width (pred and s8 are bytes)."""
    text = ISSUE_14.replace("f32[", f"{etype}[")
    dtype = hlo.numpy_dtype(etype)
    x = (np.arange(9) % 2 == 1) if etype == "pred" else np.arange(9).astype(dtype)
    x = x.reshape(3, 3)
    (out,) = run_and_compare(text, [np.int32(0), x])
    np.testing.assert_array_equal(out, x.T)


COND_RESULT = """
HloModule cond_result

b0 {
  p = $D parameter(0)
  t = $S copy(p)
  n = $S negate(t)
  ROOT r = ($D, $S) tuple(n, t)
}

b1 {
  p = $D parameter(0)
  ROOT r = ($D, $S) tuple(p, p)
}

b2 {
  p = $D parameter(0)
  t = $S copy(p)
  ROOT r = ($S, $D) tuple(t, t)
}

ENTRY e {
  i = s32[] parameter(0)
  x = $D parameter(1)
  c = ($D, $D) conditional(i, x, x, x), branch_computations={b0, b1, b2}
  g0 = $D get-tuple-element(c), index=0
  g1 = $D get-tuple-element(c), index=1
  ROOT s = $D subtract(g0, g1)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("branch", [0, 1, 2])
def test_conditional_results(branch, pipeline):
    check_all_layouts(COND_RESULT, [np.int32(branch)], pipeline)


COND_ARRAY_RESULT = """
HloModule cond_array_result

t {
  p = $D parameter(0)
  ROOT t = $S copy(p)
}

f {
  p = $D parameter(0)
  ROOT n = $S negate(p)
}

ENTRY e {
  i = pred[] parameter(0)
  x = $D parameter(1)
  c = $D conditional(i, x, x), true_computation=t, false_computation=f
  ROOT a = $D add(c, c)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("which", [True, False])
def test_conditional_array_result(which, pipeline):
    check_all_layouts(COND_ARRAY_RESULT, [np.bool_(which)], pipeline)


COND_OPERANDS = """
HloModule cond_operands

b0 {
  p = $D parameter(0)
  ROOT n = $D negate(p)
}

b1 {
  p = ($S, $D) parameter(0)
  a = $S get-tuple-element(p), index=0
  b = $D get-tuple-element(p), index=1
  ROOT s = $D subtract(a, b)
}

ENTRY e {
  i = s32[] parameter(0)
  x = $D parameter(1)
  t = $S copy(x)
  n = $S negate(x)
  tp = ($D, $S) tuple(t, n)
  ROOT c = $D conditional(i, t, tp), branch_computations={b0, b1}
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("branch", [0, 1])
def test_conditional_operands(branch, pipeline):
    check_all_layouts(COND_OPERANDS, [np.int32(branch)], pipeline)


# --- while ---------------------------------------------------------------------------------

WHILE_STATE = """
HloModule while_state

cond {
  p = (s32[], $S, $D) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(k, n), direction=LT
}

body {
  p = (s32[], $D, $D) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  k1 = s32[] add(k, one)
  v = $D get-tuple-element(p), index=1
  a = $D get-tuple-element(p), index=2
  h = f32[] constant(0.5)
  hb = $D broadcast(h), dimensions={}
  a1 = $S multiply(a, hb)
  a2 = $S add(a1, v)
  v1 = $S negate(v)
  ROOT r = (s32[], $S, $D) tuple(k1, v1, a2)
}

ENTRY e {
  x = $D parameter(0)
  zero = s32[] constant(0)
  t = $S copy(x)
  y = $D exponential(x)
  init = (s32[], $D, $S) tuple(zero, t, y)
  w = (s32[], $S, $S) while(init), condition=cond, body=body
  g1 = $D get-tuple-element(w), index=1
  g2 = $S get-tuple-element(w), index=2
  ROOT r = ($D, $D) tuple(g1, g2)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_while_state_in_and_out(pipeline):
    check_all_layouts(WHILE_STATE, [], pipeline)


WHILE_CONDITION_READS = """
HloModule while_condition_reads

cond {
  p = (s32[], $S) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  v = $S get-tuple-element(p), index=1
  e = $CORNER slice(v), slice=$SLICE
  s = f32[] reshape(e)
  kf = f32[] convert(k)
  ROOT lt = pred[] compare(kf, s), direction=LT
}

body {
  p = (s32[], $D) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  k1 = s32[] add(k, one)
  v = $D get-tuple-element(p), index=1
  v1 = $S copy(v)
  ROOT r = (s32[], $S) tuple(k1, v1)
}

ENTRY e {
  x = $D parameter(0)
  zero = s32[] constant(0)
  t = $S copy(x)
  init = (s32[], $S) tuple(zero, t)
  w = (s32[], $D) while(init), condition=cond, body=body
  ROOT k = s32[] get-tuple-element(w), index=0
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_while_condition_reads_state(pipeline):
    """The trip count is the value of one element: read in the wrong layout, another."""
    for dims, layout in LAYOUTS:
        corner = [0] * (len(dims) - 1) + [1]          # the element (0, ..., 0, 1)
        x = np.zeros(dims, np.float32)
        x.flat[:] = 9.0
        x[tuple(corner)] = 3.0
        for subst in variants(dims, layout):
            text = Template(WHILE_CONDITION_READS).substitute(
                subst, CORNER=f"f32[{','.join('1' * len(dims))}]",
                SLICE="{" + ",".join(f"[{c}:{c + 1}]" for c in corner) + "}")
            (k,) = run_and_compare(text, [x], pipeline, f"{subst}")
            assert k == 3


WHILE_DOT = """
HloModule while_dot

cond {
  p = (s32[], f32[8,8]{0,1}, f32[8,8]{1,0}) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(k, n), direction=LT
}

body {
  p = (s32[], f32[8,8]{1,0}, f32[8,8]{1,0}) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  k1 = s32[] add(k, one)
  m = f32[8,8]{1,0} get-tuple-element(p), index=1
  a = f32[8,8]{1,0} get-tuple-element(p), index=2
  d = f32[8,8]{1,0} dot(a, m), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (s32[], f32[8,8]{1,0}, f32[8,8]{1,0}) tuple(k1, m, d)
}

ENTRY e {
  x = f32[8,8]{1,0} parameter(0)
  a = f32[8,8]{1,0} parameter(1)
  zero = s32[] constant(0)
  t = f32[8,8]{0,1} transpose(x), dimensions={1,0}
  init = (s32[], f32[8,8]{0,1}, f32[8,8]{1,0}) tuple(zero, t, a)
  w = (s32[], f32[8,8]{0,1}, f32[8,8]{1,0}) while(init), condition=cond, body=body
  m = f32[8,8]{0,1} get-tuple-element(w), index=1
  d = f32[8,8]{1,0} get-tuple-element(w), index=2
  ROOT r = (f32[8,8]{1,0}, f32[8,8]{0,1}) tuple(d, m)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_while_carries_transposed_layout_into_dot(pipeline):
    """Like the LSTM: a {0,1} transpose in the while state, read by a dot every iteration."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((8, 8)) / 3).astype(np.float32)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    d, m = run_and_compare(WHILE_DOT, [x, a], pipeline)
    np.testing.assert_array_equal(m, x.T)
    expected = a.astype(np.float64)
    for _ in range(5):
        expected = expected @ x.T.astype(np.float64)
    np.testing.assert_allclose(d, expected, rtol=1e-4, atol=1e-5)


# --- call -----------------------------------------------------------------------------------

CALL = """
HloModule call_layouts

f {
  p0 = $D parameter(0)
  p1 = ($S, $D) parameter(1)
  a = $S get-tuple-element(p1), index=0
  b = $D get-tuple-element(p1), index=1
  s = $S subtract(p0, a)
  m = $D multiply(s, b)
  ps = ($D, $S) tuple(p0, s)
  ROOT r = ($S, ($D, $S)) tuple(m, ps)
}

ENTRY e {
  x = $D parameter(0)
  t = $S copy(x)
  y = $D exponential(x)
  ty = $S copy(y)
  tp = ($D, $S) tuple(ty, t)
  c = ($D, ($S, $D)) call(t, tp), to_apply=f
  g0 = $D get-tuple-element(c), index=0
  g1 = ($D, $D) get-tuple-element(c), index=1
  g10 = $S get-tuple-element(g1), index=0
  g11 = $D get-tuple-element(g1), index=1
  ROOT r = ($D, $S, $S) tuple(g0, g10, g11)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_call(pipeline):
    check_all_layouts(CALL, [], pipeline)


# --- fusion ---------------------------------------------------------------------------------

FUSION = """
HloModule fusion_layouts

fc {
  p = $D parameter(0)
  q = $S parameter(1)
  a = $S add(p, q)
  ROOT n = $D negate(a)
}

ENTRY e {
  x = $D parameter(0)
  t = $S copy(x)
  y = $D exponential(x)
  f = $S fusion(t, y), kind=kLoop, calls=fc
  ROOT m = $D multiply(f, x)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_fusion_parameters_and_root(pipeline):
    check_all_layouts(FUSION, [], pipeline)


FUSION_BITCAST = """
HloModule fusion_bitcast

fc {
  p = f32[3,4]{1,0} parameter(0)
  b = f32[4,3]{0,1} bitcast(p)
  ROOT n = f32[4,3]{1,0} negate(b)
}

ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  t = f32[3,4]{0,1} copy(x)
  ROOT f = f32[4,3]{1,0} fusion(t), kind=kLoop, calls=fc
}
"""


# Through the pipeline, passes put a value of one layout where another was declared
# (fusing a producer into a fused parameter, inlining a call, gte(tuple(x)) -> x); they
# keep the declared layout for a bitcast reading it (passes.hlo_utils.in_layout).


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_fusion_bitcast_reads_parameter_in_its_declared_layout(pipeline):
    """bitcast reinterprets the fused parameter's bytes as *it* declares them (row-major
    here), whatever layout the fusion's operand has."""
    x = distinct((3, 4))
    (out,) = run_and_compare(FUSION_BITCAST, [x], pipeline)
    np.testing.assert_array_equal(out, -x.T)


FUSION_DOT_BITCAST = """
HloModule fusion_dot_bitcast

fc {
  p = f32[32,32]{1,0} parameter(0)
  q = f32[32,32]{1,0} parameter(1)
  b = f32[32,32]{0,1} bitcast(p)
  ROOT d = f32[32,32]{1,0} dot(b, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY e {
  x = f32[32,32]{1,0} parameter(0)
  y = f32[32,32]{1,0} parameter(1)
  t = f32[32,32]{0,1} copy(x)
  ROOT f = f32[32,32]{1,0} fusion(t, y), kind=kOutput, calls=fc
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_fusion_dot_of_bitcast_parameter(pipeline):
    """The GEMM path views the bitcast's bytes in memory: the parameter's declared layout
    must be the operand's, or the view is wrong."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    y = rng.standard_normal((32, 32)).astype(np.float32)
    (out,) = run_and_compare(FUSION_DOT_BITCAST, [x, y], pipeline)
    np.testing.assert_allclose(out, x.T.astype(np.float64) @ y, rtol=1e-4, atol=1e-4)


FUSION_DOT_BITCAST_TRANSPOSE = """
HloModule fusion_dot_bitcast_transpose

fc {
  p = f32[32,32]{1,0} parameter(0)
  q = f32[32,32]{1,0} parameter(1)
  t = f32[32,32]{1,0} transpose(p), dimensions={1,0}
  b = f32[32,32]{0,1} bitcast(t)
  ROOT d = f32[32,32]{1,0} dot(b, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY e {
  x = f32[32,32]{1,0} parameter(0)
  y = f32[32,32]{1,0} parameter(1)
  ROOT f = f32[32,32]{1,0} fusion(x, y), kind=kOutput, calls=fc
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_fusion_dot_of_bitcast_of_transpose(pipeline):
    """bitcast(transpose(p)): the transpose is row-major, so the bitcast's bytes are not
    p's bytes; bitcast to {0,1} of transpose(p) is p itself."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    y = rng.standard_normal((32, 32)).astype(np.float32)
    (out,) = run_and_compare(FUSION_DOT_BITCAST_TRANSPOSE, [x, y], pipeline)
    np.testing.assert_allclose(out, x.astype(np.float64) @ y, rtol=1e-4, atol=1e-4)


CALL_BITCAST = """
HloModule call_bitcast

f {
  p = f32[3,4]{1,0} parameter(0)
  b = f32[4,3]{0,1} bitcast(p)
  ROOT n = f32[4,3]{1,0} negate(b)
}

ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  t = f32[3,4]{0,1} copy(x)
  ROOT c = f32[4,3]{1,0} call(t), to_apply=f
}
"""

GTE_BITCAST = """
HloModule gte_bitcast

ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  t = f32[3,4]{0,1} copy(x)
  tp = (f32[3,4]{1,0}) tuple(t)
  g = f32[3,4]{1,0} get-tuple-element(tp), index=0
  b = f32[4,3]{0,1} bitcast(g)
  ROOT n = f32[4,3]{1,0} negate(b)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("text", [CALL_BITCAST, GTE_BITCAST], ids=["call", "tuple"])
def test_bitcast_reads_boundary_value_in_declared_layout(text, pipeline):
    """A bitcast of a call parameter / a get-tuple-element declared row-major, whose value
    was made {0,1}: the bitcast to f32[4,3]{0,1} is x transposed."""
    x = distinct((3, 4))
    (out,) = run_and_compare(text, [x], pipeline)
    np.testing.assert_array_equal(out, -x.T)


# --- tuples and get-tuple-element --------------------------------------------------------------

NESTED_TUPLES = """
HloModule nested_tuples

ENTRY e {
  x = $D parameter(0)
  t = $S copy(x)
  n = $D negate(x)
  inner = ($D, $S) tuple(t, n)
  outer = (($S, $D), $D, $S) tuple(inner, x, t)
  g0 = ($D, $D) get-tuple-element(outer), index=0
  g00 = $S get-tuple-element(g0), index=0
  g01 = $S get-tuple-element(g0), index=1
  g1 = $D get-tuple-element(outer), index=1
  g2 = $D get-tuple-element(outer), index=2
  a = $D add(g00, g01)
  b = $S subtract(g1, g2)
  ROOT r = ($S, $D, ($D, $S)) tuple(a, b, g0)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_nested_tuples_and_get_tuple_element(pipeline):
    check_all_layouts(NESTED_TUPLES, [], pipeline)


# --- entry parameters and results -------------------------------------------------------------

ENTRY_PARAMS = """
HloModule entry_params

ENTRY e {
  p0 = $S parameter(0)
  p1 = $D parameter(1)
  a = $S add(p0, p1)
  s = $D subtract(p0, p1)
  ROOT r = ($D, $S, $S, $D, $D) tuple(a, s, p1, p0, a)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_entry_parameters_and_results(pipeline):
    for dims, layout in LAYOUTS:
        for subst in variants(dims, layout):
            text = Template(ENTRY_PARAMS).substitute(subst)
            x, y = distinct(dims, 0), distinct(dims, 1)
            out = run_and_compare(text, [x, y], pipeline, f"{subst}")
            np.testing.assert_array_equal(out[2], y)
            np.testing.assert_array_equal(out[3], x)


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_entry_root_is_a_parameter(pipeline):
    for dims, layout in LAYOUTS:
        for subst in variants(dims, layout):
            text = f"HloModule m\n\nENTRY e {{\n  ROOT p = {subst['S']} parameter(0)\n}}\n"
            x = distinct(dims)
            (out,) = run_and_compare(text, [x], pipeline, f"{subst}")
            np.testing.assert_array_equal(out, x)


# --- aliases: copy, bitcast, reshape, opt-barrier -------------------------------------------

ALIASES = """
HloModule aliases

ENTRY e {
  x = $D parameter(0)
  t = $S copy(x)
  u = $D copy(t)
  tp = ($S, $D) tuple(t, u)
  ob = ($D, $S) opt-barrier(tp)
  a = $D get-tuple-element(ob), index=0
  b = $S get-tuple-element(ob), index=1
  r = f32[$N] reshape(a)
  s = f32[$N] reshape(b)
  ROOT o = (f32[$N], f32[$N], $D) tuple(r, s, u)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_copy_reshape_opt_barrier(pipeline):
    for dims, layout in LAYOUTS:
        for subst in variants(dims, layout):
            text = Template(ALIASES).substitute(subst, N=int(np.prod(dims)))
            x = distinct(dims)
            r, s, u = run_and_compare(text, [x], pipeline, f"{subst}")
            np.testing.assert_array_equal(r, x.reshape(-1))
            np.testing.assert_array_equal(u, x)


BITCAST_TRANSPOSES = """
HloModule bitcast_transposes

ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  b = f32[4,3]{0,1} bitcast(x)
  t = (f32[4,3]{1,0}) tuple(b)
  g = f32[4,3]{1,0} get-tuple-element(t), index=0
  c = f32[4,3]{0,1} copy(g)
  d = f32[3,4]{1,0} bitcast(c)
  ROOT r = (f32[4,3]{1,0}, f32[3,4]{1,0}) tuple(g, d)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_bitcast_changing_layout_then_boundaries(pipeline):
    """A bitcast is the one alias whose layout may differ: it means its own layout."""
    x = distinct((3, 4))
    g, d = run_and_compare(BITCAST_TRANSPOSES, [x], pipeline)
    np.testing.assert_array_equal(g, x.T)
    np.testing.assert_array_equal(d, x)


DEGENERATE = """
HloModule degenerate

b0 {
  p = f32[1,4,1]{2,1,0} parameter(0)
  ROOT r = f32[1,4,1]{0,1,2} negate(p)
}

ENTRY e {
  i = s32[] parameter(0)
  x = f32[1,4,1]{2,1,0} parameter(1)
  t = f32[1,4,1]{1,2,0} copy(x)
  c = f32[1,4,1]{2,0,1} conditional(i, t), branch_computations={b0}
  ROOT tp = (f32[1,4,1]{0,2,1}) tuple(c)
}
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_layouts_differing_only_in_size_one_dimensions(pipeline):
    """Such layouts store the same bytes: no copy is needed, and none must go wrong."""
    x = distinct((1, 4, 1))
    (out,) = run_and_compare(DEGENERATE, [np.int32(0), x], pipeline)
    np.testing.assert_array_equal(out, -x)


def test_boundary_copies_only_where_layouts_differ():
    """A program whose boundaries all agree gets no relayout kernel; one that differs, one."""
    def kernels(text):
        module = hlo.parse_module(uniquify(text))
        exe = backend_cpu.compile(module, backend_cpu.CompileOptions(disk_cache=False))
        return [t for t in exe._program.thunks if hasattr(t, "kernel")]
    same = Template(COND_ARRAY_RESULT).substitute(S="f32[3,4]{1,0}", D="f32[3,4]{1,0}")
    differ = ISSUE_14
    assert not any("relayout" in t.name for t in kernels(same))
    conditional = next(t for t in backend_cpu.compile(
        hlo.parse_module(uniquify(differ)))._program.thunks if hasattr(t, "branches"))
    names = [t.name for t in conditional.branches[0].thunks if hasattr(t, "kernel")]
    assert sum("relayout" in n for n in names) == 1, names


# --- the Flax LSTM gradient (issue 14) ------------------------------------------------------

JAX_CASES = Path(__file__).parents[1] / "regressions" / "from_jax"


def test_flax_lstm_gradient_matches_jax():
    """jax.grad of nn.RNN(nn.LSTMCell) over 16 steps, JAX's unoptimized HLO (see
    tests/regressions/from_jax/make_flax_lstm_grad.py): its {2,0,1} transposes cross while
    boundaries declared {2,1,0}. Compared with JAX's own outputs."""
    text = (JAX_CASES / "flax_lstm_grad.hlo").read_text()
    module = hlo.parse_module(text)
    with np.load(JAX_CASES / "flax_lstm_grad.npz") as data:
        args = [data[f"arg{i}"] for i in range(len(module.entry.parameters))]
        expected = [data[k] for k in sorted((k for k in data.files if k.startswith("out")),
                                            key=lambda k: int(k[3:]))]
    for pipeline in PIPELINES:
        exe = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=pipeline))
        actual = exe.run(*args)
        assert len(actual) == len(expected)
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, f"pipeline={pipeline} output {i}")
