"""Loops written on vectors (elemental/vector_gen.py) and the light LLVM pipeline they allow.

Kernels that stream their output compute their minor loops on vectors of
consecutive elements; a module whose kernels all do so skips LLVM's O3 pipeline.
The tests lower the streaming threshold so that small, odd shapes take those
paths: rows that are not whole vectors (the overlapping last vector, the masked
last vector of a reduction), each rule of the vector generators (broadcasts,
slices, reshapes, iota, converts, integer ops), NaN and signed zeros in row
maxima, and the computations that decline (they must keep LLVM's vectorizer).
Results are compared with the evaluator.
"""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.backend_cpu.emitters import streaming
from xlapy.backend_cpu.llvm.loops import for_range, loops_left_to_llvm, vector_loop
from tests.backend_cpu.helpers import edge_values, uniquify
from tests.corpus_util import assert_close

FRESH = backend_cpu.CompileOptions(cache=False, disk_cache=False)


def _compile(text: str):
    """A fresh executable of `text` with every output large enough to stream."""
    saved = streaming.STREAM_MIN_BYTES
    streaming.STREAM_MIN_BYTES = 1
    try:
        module = hlo.parse_module(uniquify(text))
        return module, backend_cpu.compile(module, FRESH)
    finally:
        streaming.STREAM_MIN_BYTES = saved


def _check(text: str, args) -> object:
    module, executable = _compile(text)
    actual = executable.run(*args)
    expected = hlo.evaluate(module, list(args))
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, np.asarray(e), f"output {i}")
    return executable


def _rng(seed=0):
    return np.random.default_rng(seed)


ELEMENTWISE = """HloModule ew
fused {{
  x = {t}[{r},{c}] parameter(0)
  row = {t}[{c}] parameter(1)
  col = {t}[{r}] parameter(2)
  rb = {t}[{r},{c}] broadcast(row), dimensions={{1}}
  cb = {t}[{r},{c}] broadcast(col), dimensions={{0}}
  k = {t}[] constant(0.5)
  kb = {t}[{r},{c}] broadcast(k), dimensions={{}}
  a = {t}[{r},{c}] multiply(x, rb)
  b = {t}[{r},{c}] add(a, cb)
  t = {t}[{r},{c}] tanh(b)
  e = {t}[{r},{c}] exponential(t)
  g = pred[{r},{c}] compare(x, kb), direction=GT
  s = {t}[{r},{c}] select(g, e, t)
  ROOT m = {t}[{r},{c}] maximum(s, x)
}}
ENTRY main {{
  p = {t}[{r},{c}] parameter(0)
  q = {t}[{c}] parameter(1)
  u = {t}[{r}] parameter(2)
  ROOT f = {t}[{r},{c}] fusion(p, q, u), kind=kLoop, calls=fused
}}
"""


@pytest.mark.parametrize("etype", ["f32", "f64"])
@pytest.mark.parametrize("rows,cols", [(3, 300), (2, 1000), (4, 257)])
def test_elementwise_on_vectors_matches_the_evaluator(etype, rows, cols):
    dt = np.float32 if etype == "f32" else np.float64
    x = edge_values(etype, rows * cols).reshape(rows, cols)
    row = _rng().standard_normal(cols).astype(dt)
    col = _rng(1).standard_normal(rows).astype(dt)
    executable = _check(ELEMENTWISE.format(t=etype, r=rows, c=cols), [x, row, col])
    assert executable._light_pipeline


# Integer recipes on vectors: division by zero, INT_MIN / -1, over-wide shifts.
INTEGERS = """HloModule ints
fused {{
  x = s32[{n}] parameter(0)
  y = s32[{n}] parameter(1)
  d = s32[{n}] divide(x, y)
  r = s32[{n}] remainder(x, y)
  sh = s32[{n}] shift-left(x, y)
  sa = s32[{n}] shift-right-arithmetic(d, y)
  m = s32[{n}] maximum(sh, sa)
  ROOT o = s32[{n}] add(m, r)
}}
ENTRY main {{
  p = s32[{n}] parameter(0)
  q = s32[{n}] parameter(1)
  ROOT f = s32[{n}] fusion(p, q), kind=kLoop, calls=fused
}}
"""


def test_integer_recipes_on_vectors_are_exact():
    n = 1111
    x = _rng().integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    y = _rng(1).integers(-40, 40, n).astype(np.int32)
    x[:4] = [-2**31, -2**31, 7, 0]
    y[:4] = [-1, 0, 0, 0]
    _check(INTEGERS.format(n=n), [x, y])


# Moves along and across the lanes: a slice with an offset, a transpose of a
# column vector's broadcast, a reshape adding a unit dimension, iota both ways,
# and a convert from s32.
MOVES = """HloModule moves
fused {{
  x = f32[{r},{c1}] parameter(0)
  v = s32[{r},1,{c}] parameter(1)
  sl = f32[{r},{c}] slice(x), slice={{[0:{r}], [1:{c1}]}}
  vr = s32[{r},{c}] reshape(v)
  vc = f32[{r},{c}] convert(vr)
  i1 = f32[{r},{c}] iota(), iota_dimension=1
  i0 = f32[{r},{c}] iota(), iota_dimension=0
  a = f32[{r},{c}] add(sl, vc)
  b = f32[{r},{c}] multiply(i1, i0)
  ROOT o = f32[{r},{c}] subtract(a, b)
}}
ENTRY main {{
  p = f32[{r},{c1}] parameter(0)
  q = s32[{r},1,{c}] parameter(1)
  ROOT f = f32[{r},{c}] fusion(p, q), kind=kLoop, calls=fused
}}
"""


@pytest.mark.parametrize("rows,cols", [(3, 300), (5, 263)])
def test_index_moves_on_vectors(rows, cols):
    x = _rng().standard_normal((rows, cols + 1)).astype(np.float32)
    v = _rng(1).integers(-1000, 1000, (rows, 1, cols)).astype(np.int32)
    executable = _check(MOVES.format(r=rows, c=cols, c1=cols + 1), [x, v])
    assert executable._light_pipeline


# A transpose makes the lanes stride through memory: no vector rule, LLVM's turn.
TRANSPOSED = """HloModule transposed
fused {{
  x = f32[{n},{n}] parameter(0)
  t = f32[{n},{n}] transpose(x), dimensions={{1,0}}
  ROOT o = f32[{n},{n}] add(t, x)
}}
ENTRY main {{
  p = f32[{n},{n}] parameter(0)
  ROOT f = f32[{n},{n}] fusion(p), kind=kLoop, calls=fused
}}
"""


def test_a_computation_without_vector_rules_keeps_llvms_vectorizer():
    n = 260
    x = _rng().standard_normal((n, n)).astype(np.float32)
    executable = _check(TRANSPOSED.format(n=n), [x])
    assert not executable._light_pipeline


SOFTMAX = """HloModule softmax
max {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT m = {t}[] maximum(a, b)
}}
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
fused {{
  x = {t}[{r},{c}] parameter(0)
  ninf = {t}[] constant(-inf)
  mx = {t}[{r}] reduce(x, ninf), dimensions={{1}}, to_apply=max
  mb = {t}[{r},{c}] broadcast(mx), dimensions={{0}}
  d = {t}[{r},{c}] subtract(x, mb)
  ex = {t}[{r},{c}] exponential(d)
  z = {t}[] constant(0)
  sm = {t}[{r}] reduce(ex, z), dimensions={{1}}, to_apply=add
  sb = {t}[{r},{c}] broadcast(sm), dimensions={{0}}
  ROOT o = {t}[{r},{c}] divide(ex, sb)
}}
ENTRY main {{
  p = {t}[{r},{c}] parameter(0)
  ROOT f = {t}[{r},{c}] fusion(p), kind=kCustom, calls=fused
}}
"""


@pytest.mark.parametrize("etype", ["f32", "f64"])
@pytest.mark.parametrize("rows,cols", [(3, 1000), (2, 259), (4, 256)])
def test_softmax_rows_on_vectors(etype, rows, cols):
    dt = np.float32 if etype == "f32" else np.float64
    x = (_rng().standard_normal((rows, cols)) * 5).astype(dt)
    x[0, -1] = 60.0           # the row maximum in the masked last vector
    executable = _check(SOFTMAX.format(t=etype, r=rows, c=cols), [x])
    assert executable._light_pipeline


# x - broadcast(max(x)) per row: the hoisted maximum on vectors, with NaN and
# signed zeros (XLA's maximum propagates NaN, and max(-0, +0) is +0).
ROW_MAX = """HloModule rowmax
max {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT m = {t}[] maximum(a, b)
}}
fused {{
  x = {t}[{r},{c}] parameter(0)
  init = {t}[] constant({init})
  mx = {t}[{r}] reduce(x, init), dimensions={{1}}, to_apply=max
  mb = {t}[{r},{c}] broadcast(mx), dimensions={{0}}
  ROOT d = {t}[{r},{c}] subtract(x, mb)
}}
ENTRY main {{
  p = {t}[{r},{c}] parameter(0)
  ROOT f = {t}[{r},{c}] fusion(p), kind=kLoop, calls=fused
}}
"""


def test_row_maximum_on_vectors_propagates_nan_and_orders_zeros():
    rows, cols = 4, 300
    x = -np.abs(_rng().standard_normal((rows, cols))).astype(np.float32) - 1
    x[0, 7] = np.nan              # in a whole vector
    x[1, -2] = np.nan             # in the masked last vector
    x[2, :] = -0.0
    x[2, 290] = 0.0               # +0 must win over -0
    x[3, 3] = -np.inf
    out = _check(ROW_MAX.format(t="f32", r=rows, c=cols, init="-inf"), [x]).run(x)[0]
    assert np.isnan(out[0]).all() and np.isnan(out[1]).all()
    assert np.all(np.signbit(out[2][np.signbit(x[2])]))  # -0 - (+0) = -0: the max was +0


def test_integer_row_maximum_on_vectors():
    rows, cols = 3, 517
    x = _rng().integers(-2**31, 2**31, (rows, cols), dtype=np.int64).astype(np.int32)
    x[1, -1] = 2**31 - 1          # in the masked last vector
    _check(ROW_MAX.format(t="s32", r=rows, c=cols, init="-2147483648"), [x])


# A rank-1 output splits its partitions by chunks or by elements: the last vector
# of a partition may overlap its neighbour's first (same values).
@pytest.mark.parametrize("n", [1024, 1000, 4099])
def test_vectors_of_a_partitioned_rank1_output(n):
    text = ELEMENTWISE.format(t="f32", r=1, c=n)
    x = _rng().standard_normal((1, n)).astype(np.float32)
    _check(text, [x, np.ones(n, np.float32), np.zeros(1, np.float32)])


# --- the loop bookkeeping -----------------------------------------------------------------

def _builder():
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "f")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def test_only_unhandled_innermost_loops_are_left_to_llvm():
    fn, b = _builder()
    with for_range(b, 0, 10, "outer"):
        with for_range(b, 0, 10, "inner"):          # innermost, unmarked: LLVM's
            pass
        with for_range(b, 0, 10, "tail", scalar=True):
            pass
    with for_range(b, 0, 64, "v", step=16, vectorized=True):
        pass
    b.ret_void()
    assert loops_left_to_llvm(fn) == 1


def test_vector_loop_covers_a_range_with_an_overlapping_last_vector():
    fn, b = _builder()
    starts = []
    vector_loop(b, 0, 1000, 16, lambda b, i: starts.append(i), "x")
    b.ret_void()
    # 62 whole vectors, two per iteration (two starts emitted), then the vector
    # ending at 1000, which overlaps [984, 992).
    assert [s.constant for s in starts if isinstance(s, ir.Constant)] == [984]
    assert len(starts) == 3
    assert loops_left_to_llvm(fn) == 0


# --- batch 1: leading size-1 dimensions are not what the threads split ---------------------

BATCH1 = """HloModule batch1
fused {{
  x = f32[1,{r},{c}] parameter(0)
  k = f32[] constant(2)
  kb = f32[1,{r},{c}] broadcast(k), dimensions={{}}
  ROOT m = f32[1,{r},{c}] multiply(x, kb)
}}
ENTRY main {{
  p = f32[1,{r},{c}] parameter(0)
  ROOT f = f32[1,{r},{c}] fusion(p), kind=kLoop, calls=fused
}}
"""


@pytest.mark.parametrize("rows,cols,extent", [(64, 300, 64), (1, 1000, 1000)])
def test_leading_unit_dimensions_are_not_partitioned(rows, cols, extent):
    """f32[1,64,300] splits its 64 rows; f32[1,1,1000] its 1000 elements (as f32[1000]
    would): never the batch of one, which left a whole kernel to one thread."""
    module = hlo.parse_module(uniquify(BATCH1.format(r=rows, c=cols)))
    executable = backend_cpu.compile(module, FRESH)
    assert [t.extent for t in executable._program.thunks if hasattr(t, "extent")] == [extent]
    x = _rng().standard_normal((1, rows, cols)).astype(np.float32)
    np.testing.assert_array_equal(executable.run(x)[0], 2 * x)


SOFTMAX_1D = """HloModule softmax1d
max {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
add {{
  a2 = f32[] parameter(0)
  b2 = f32[] parameter(1)
  ROOT s = f32[] add(a2, b2)
}}
fused {{
  x = f32[{n}] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[] reduce(x, ninf), dimensions={{0}}, to_apply=max
  mb = f32[{n}] broadcast(mx), dimensions={{}}
  d = f32[{n}] subtract(x, mb)
  ex = f32[{n}] exponential(d)
  z = f32[] constant(0)
  sm = f32[] reduce(ex, z), dimensions={{0}}, to_apply=add
  sb = f32[{n}] broadcast(sm), dimensions={{}}
  ROOT o = f32[{n}] divide(ex, sb)
}}
ENTRY main {{
  p = f32[{n}] parameter(0)
  ROOT f = f32[{n}] fusion(p), kind=kCustom, calls=fused
}}
"""


@pytest.mark.parametrize("etype", ["f32", "f64"])
def test_streamed_softmax_of_a_single_row(etype):
    """[1, n] rows stream split by chunks (or elements) of the row itself."""
    dt = np.float32 if etype == "f32" else np.float64
    for cols in (1024, 1000):
        x = (_rng(cols).standard_normal((1, cols)) * 5).astype(dt)
        _check(SOFTMAX.format(t=etype, r=1, c=cols), [x])


@pytest.mark.parametrize("n", [4096, 4000])
def test_streamed_softmax_of_a_vector(n):
    """A rank-1 softmax whose output streams: its partitions count chunks. (The kernel
    used to report elements, and the partitions past the first chunks wrote out of
    bounds: a crash.)"""
    x = (_rng(n).standard_normal(n) * 5).astype(np.float32)
    _check(SOFTMAX_1D.format(n=n), [x])


# --- random computations on vectors against the evaluator ----------------------------------

from hypothesis import given, strategies as st  # noqa: E402  (the property tests' own imports)

_UNARY = {"f": ["negate", "abs", "exponential", "tanh", "floor", "sign", "logistic"],
          "s": ["negate", "abs", "not", "popcnt"]}
_BINARY = {"f": ["add", "subtract", "multiply", "maximum", "minimum", "divide"],
           "s": ["add", "subtract", "multiply", "maximum", "and", "xor", "shift-left",
                 "divide", "remainder"]}
_REDUCERS = {"f": ["maximum", "minimum", "add"], "s": ["maximum", "minimum", "add"]}


def _dims(dims) -> str:
    return ",".join(map(str, dims))


@st.composite
def vector_programs(draw):
    """A fusion over an array whose minor dimension holds a vector and a chunk (the
    streamed, vector path), of rank 1 to 3 with size-1 dimensions anywhere (the
    threads split the first other one): a chain of elementwise ops on the input,
    a broadcast row along the minor dimension, a broadcast of the other dimensions,
    a constant, then maybe the difference with a hoisted reduce of each row."""
    etype = draw(st.sampled_from(["f32", "f64", "s32", "s64"]))
    kind = etype[0]
    cols = draw(st.sampled_from([256, 259, 300, 1000]))
    outer = draw(st.sampled_from([(), (1,), (2,), (3,), (1, 3), (3, 1), (1, 1), (2, 2)]))
    full, rank = (*outer, cols), len(outer) + 1
    t = lambda dims: f"{etype}[{_dims(dims)}]"          # noqa: E731
    lines = [f"  x = {t(full)} parameter(0)",
             f"  row = {t((cols,))} parameter(1)",
             f"  col = {t(outer)} parameter(2)",
             f"  rb = {t(full)} broadcast(row), dimensions={{{rank - 1}}}",
             f"  cb = {t(full)} broadcast(col), dimensions={{{_dims(range(rank - 1))}}}",
             f"  k = {etype}[] constant(3)",
             f"  kb = {t(full)} broadcast(k), dimensions={{}}"]
    values = ["x", "rb", "cb", "kb"]
    for i in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            op, args = draw(st.sampled_from(_UNARY[kind])), [draw(st.sampled_from(values))]
        else:
            op = draw(st.sampled_from(_BINARY[kind]))
            args = [draw(st.sampled_from(values)), draw(st.sampled_from(values))]
        lines.append(f"  v{i} = {t(full)} {op}({', '.join(args)})")
        values.append(f"v{i}")
    last = values[-1]
    reducer = draw(st.sampled_from([None] + _REDUCERS[kind]))
    head = ""
    if reducer is not None:
        init = {"maximum": "-inf" if kind == "f" else "-9223372036854775808" if etype == "s64"
                else "-2147483648", "minimum": "inf" if kind == "f" else "9223372036854775807"
                if etype == "s64" else "2147483647", "add": "0"}[reducer]
        head = (f"red {{\n  a = {etype}[] parameter(0)\n  b = {etype}[] parameter(1)\n"
                f"  ROOT r = {etype}[] {reducer}(a, b)\n}}\n")
        lines += [f"  i = {etype}[] constant({init})",
                  f"  m = {t(outer)} reduce({last}, i), dimensions={{{rank - 1}}}, to_apply=red",
                  f"  mb = {t(full)} broadcast(m), dimensions={{{_dims(range(rank - 1))}}}",
                  f"  ROOT o = {t(full)} subtract({last}, mb)"]
    else:
        lines.append(f"  ROOT o = {t(full)} copy({last})")
    text = (f"HloModule vp\n{head}fused {{\n" + "\n".join(lines) + "\n}\n"
            f"ENTRY main {{\n  p = {t(full)} parameter(0)\n"
            f"  q = {t((cols,))} parameter(1)\n  u = {t(outer)} parameter(2)\n"
            f"  ROOT f = {t(full)} fusion(p, q, u), kind=kLoop, calls=fused\n}}\n")
    seed = draw(st.integers(0, 2**16))
    return etype, [full, (cols,), outer], text, seed


@given(vector_programs())
def test_random_computations_on_vectors_match_the_evaluator(program):
    etype, shapes, text, seed = program
    dt = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "s64": np.int64}[etype]
    rng = _rng(seed)
    if etype[0] == "f":       # small values: sums of a row keep their precision
        args = [np.asarray(rng.uniform(-4, 4, shape), dtype=dt) for shape in shapes]
    else:
        args = [np.asarray(rng.integers(-50, 50, shape), dtype=dt) for shape in shapes]
    with np.errstate(all="ignore"):
        _check(text, args)


# Column-major input and output: the lanes run along dimension 0, the unit-stride one.
COLUMN_MAJOR = """HloModule colmajor
fused {{
  x = f32[{r},{c}]{{0,1}} parameter(0)
  col = f32[{r}] parameter(1)
  cb = f32[{r},{c}]{{0,1}} broadcast(col), dimensions={{0}}
  e = f32[{r},{c}]{{0,1}} exponential(x)
  ROOT o = f32[{r},{c}]{{0,1}} multiply(e, cb)
}}
ENTRY main {{
  p = f32[{r},{c}]{{0,1}} parameter(0)
  q = f32[{r}] parameter(1)
  ROOT f = f32[{r},{c}]{{0,1}} fusion(p, q), kind=kLoop, calls=fused
}}
"""


@pytest.mark.parametrize("rows,cols", [(300, 3), (1000, 2)])
def test_column_major_arrays_on_vectors(rows, cols):
    x = _rng().standard_normal((rows, cols)).astype(np.float32)
    col = _rng(1).standard_normal(rows).astype(np.float32)
    executable = _check(COLUMN_MAJOR.format(r=rows, c=cols), [x, col])
    assert executable._light_pipeline
