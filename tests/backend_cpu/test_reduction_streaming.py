"""The streaming column reduce (elemental/reduction.py): several input rows per step.

A column reduce (the input's minor dimension kept) adds R rows per step into the
accumulator row, R chosen by the cost of an input element, then the remaining
rows one at a time. These tests pin the row counts that exercise the steps and
the rest (fewer rows than R, a multiple of R, R*k + 7), reducers that are not
one simple op (argmax applied row by row), inputs computed by a fusion, layouts
whose rows are not the major dimension, and that the sums do not depend on the
number of threads (the partitions split the kept dimension, never the rows).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import runtime
from xlapy.backend_cpu.emitters import column_reduce as reduction
from tests.backend_cpu.helpers import check_against_evaluator, compiled, uniquify

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
"""


def _column_sum(rows: int, cols: int) -> str:
    return f"""HloModule colsum
{ADD}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[{cols}] reduce(x, z), dimensions={{0}}, to_apply=add
}}"""


def _reduce_root(text: str):
    return hlo.parse_module(text).entry.root


def _quarters(shape, seed: int) -> np.ndarray:
    """Multiples of 1/4 in [-8, 8]: every summation order gives the same exact sum."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-32, 33, shape) / 4).astype(np.float32)


@pytest.mark.parametrize("rows", [1, 3, 8, 16, 23, 64 + 7])
def test_column_sum_any_row_count(rows):
    """Whole steps, a partial last step, and fewer rows than one step."""
    x = _quarters((rows, 37), seed=rows)
    out = check_against_evaluator(_column_sum(rows, 37), [x], f"rows={rows}")[0]
    np.testing.assert_array_equal(out, x.sum(axis=0, dtype=np.float64).astype(np.float32))


@pytest.mark.parametrize("t,reducer", [("f32", "maximum"), ("f32", "multiply"),
                                       ("s32", "add"), ("f16", "add"), ("f64", "minimum")])
def test_column_reduce_other_reducers_and_types(t, reducer):
    text = f"""HloModule col
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {reducer}(a, b)
}}
ENTRY e {{
  x = {t}[19,33] parameter(0)
  z = {t}[] constant(1)
  ROOT s = {t}[33] reduce(x, z), dimensions={{0}}, to_apply=red
}}"""
    rng = np.random.default_rng(7)
    if reducer == "multiply":
        x = rng.choice(np.array([0.5, 1.0, 2.0, -1.0], np.float32), (19, 33))
    elif t == "s32":
        x = rng.integers(-1000, 1000, (19, 33)).astype(np.int32)
    else:
        x = np.round(rng.standard_normal((19, 33)) * 4).astype(hlo.numpy_dtype(t))
    x[3, 5] = np.nan if t in ("f32", "f64") else x[3, 5]
    check_against_evaluator(text, [x], f"{t} {reducer}")


def test_rank3_middle_and_outer_dims_reduced_with_a_layout():
    """Reduced dims {0,1} of a {2,1,0} input, and dim {1} of a {2,0,1} input (the rows
    are then the major-most dimension in memory)."""
    text = f"""HloModule r3
{ADD}
ENTRY e {{
  x = f32[5,11,24] parameter(0)
  y = f32[6,13,24]{{2,0,1}} parameter(1)
  z = f32[] constant(0)
  a = f32[24] reduce(x, z), dimensions={{0,1}}, to_apply=add
  b = f32[6,24] reduce(y, z), dimensions={{1}}, to_apply=add
  ROOT t = (f32[24], f32[6,24]) tuple(a, b)
}}"""
    check_against_evaluator(text, [_quarters((5, 11, 24), 1), _quarters((6, 13, 24), 2)])


def test_fused_input_expression():
    """An input computed in the kernel (exp(x) * y) is evaluated once per element."""
    text = f"""HloModule fused
{ADD}
fc {{
  x = f32[21,40] parameter(0)
  y = f32[21,40] parameter(1)
  e = f32[21,40] exponential(x)
  m = f32[21,40] multiply(e, y)
  z = f32[] constant(0)
  ROOT s = f32[40] reduce(m, z), dimensions={{0}}, to_apply=add
}}
ENTRY e {{
  x = f32[21,40] parameter(0)
  y = f32[21,40] parameter(1)
  ROOT f = f32[40] fusion(x, y), kind=kInput, calls=fc
}}"""
    rng = np.random.default_rng(5)
    x, y = (rng.standard_normal((21, 40)).astype(np.float32) for _ in range(2))
    check_against_evaluator(text, [x, y])


def test_variadic_argmax_over_many_rows():
    """A reducer of two values is applied row by row, in row order (ties: lowest index)."""
    text = """HloModule argmax
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, v0, v1)
  i = s32[] select(keep, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[29,17] parameter(0)
  io = s32[29,17] iota(), iota_dimension=0
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[17], s32[17]) reduce(x, io, ninf, zero), dimensions={0}, to_apply=argmax
}"""
    x = np.random.default_rng(9).integers(-3, 3, (29, 17)).astype(np.float32)
    values, where = check_against_evaluator(text, [x])
    np.testing.assert_array_equal(where, np.argmax(x, axis=0))


def test_rows_per_step_follows_the_cost_of_an_input_element():
    plain = _reduce_root(_column_sum(64, 64))
    assert reduction.rows_per_step(plain) == reduction.ROWS_PER_STEP
    module = hlo.parse_module(uniquify(f"""HloModule c
{ADD}
ENTRY e {{
  x = f32[64,64] parameter(0)
  sq = f32[64,64] multiply(x, x)
  ex = f32[64,64] exponential(x)
  z = f32[] constant(0)
  a = f32[64] reduce(sq, z), dimensions={{0}}, to_apply=add
  b = f32[64] reduce(ex, z), dimensions={{0}}, to_apply=add
  ROOT t = (f32[64], f32[64]) tuple(a, b)
}}"""))
    a, b = module.entry.root.operands
    assert reduction.rows_per_step(a) == reduction.ROWS_PER_STEP_COMPUTED
    assert reduction.rows_per_step(b) == reduction.ROWS_PER_STEP_EXPENSIVE


def _vector_blocks(llvm_ir: str) -> list[tuple[int, int]]:
    """(vector loads, vector stores) of each basic block of optimized IR that has loads."""
    blocks, loads, stores = [], 0, 0
    for line in llvm_ir.splitlines() + ["end:"]:
        if re.match(r"^[\w.]+:", line):
            if loads:
                blocks.append((loads, stores))
            loads = stores = 0
        loads += " load <" in line
        stores += line.lstrip().startswith("store <")
    return blocks


def test_one_accumulator_store_per_step_of_rows():
    """Each vectorized loop body of the walk loads a whole step of rows (and the
    accumulator) per store of the accumulator (2048 columns: not a small kernel
    optimized for size). (The loops that combine blocks of rows pairwise load at most
    two rows per store: elemental/pairwise_sum.py.)"""
    _, exe = compiled(_column_sum(4096, 2048))
    blocks = [(loads, stores) for loads, stores in _vector_blocks(exe.as_llvm_ir())
              if stores and loads > 2 * stores]
    assert blocks
    for loads, stores in blocks:
        assert loads == (reduction.ROWS_PER_STEP + 1) * stores, blocks


def _compile_on(text: str, threads: int):
    """(executable linked for `threads` intra-op threads, its kernel's slices)."""
    saved = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=threads)
    try:
        exe = backend_cpu.compile(hlo.parse_module(uniquify(text)),
                                  backend_cpu.CompileOptions(cache=False, disk_cache=False))
    finally:
        runtime.configure(intra_op_threads=saved)
    kernel = [t for t in exe._program.thunks if hasattr(t, "dims")][0]
    return exe, kernel.dims.slices


def test_sums_do_not_depend_on_the_thread_count():
    """Random (inexact) sums are bitwise equal on one and on two partitions."""
    rows, cols = 1037, 96                    # 398 KB: large enough to be split
    text = _column_sum(rows, cols)
    x = np.random.default_rng(11).standard_normal((rows, cols)).astype(np.float32)
    (one, slices1), (two, slices2) = _compile_on(text, 1), _compile_on(text, 2)
    assert (len(slices1), len(slices2)) == (1, 2)
    np.testing.assert_array_equal(one.run(x)[0], two.run(x)[0])
    exact = x.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(one.run(x)[0], exact, rtol=0, atol=2e-4)


@pytest.mark.parametrize("cols,blocks", [(10, 1), (100, 7), (2048, 128)])
def test_partitions_split_the_output_at_cache_lines(cols, blocks):
    """[begin, end) counts 16-element blocks of f32 output (64 bytes): the threads never
    store to one cache line, and an output narrower than two lines is not split."""
    rows = 65536 // cols * 4
    text = _column_sum(rows, cols)
    exe, slices = _compile_on(text, 2)
    assert slices[-1][1] == blocks
    assert len(slices) == min(2, blocks)
    x = _quarters((rows, cols), seed=cols)
    np.testing.assert_array_equal(exe.run(x)[0],
                                  x.sum(axis=0, dtype=np.float64).astype(np.float32))


def test_a_leading_dimension_of_size_one_is_not_the_split_one():
    text = f"""HloModule lead
{ADD}
ENTRY e {{
  x = f32[1,300,256] parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[1,256] reduce(x, z), dimensions={{1}}, to_apply=add
}}"""
    exe, slices = _compile_on(text, 2)
    assert len(slices) == 2 and slices[-1][1] == 256 // 16
    x = _quarters((1, 300, 256), seed=3)
    np.testing.assert_array_equal(exe.run(x)[0],
                                  x.sum(axis=1, dtype=np.float64).astype(np.float32))


def test_a_major_output_dimension_is_split_by_elements():
    """Output f32[40,33]: the split dimension (40) is not the minor one, so the
    partitions count its elements; each writes whole rows of 33."""
    text = f"""HloModule major
{ADD}
ENTRY e {{
  x = f32[40,50,33] parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[40,33] reduce(x, z), dimensions={{1}}, to_apply=add
}}"""
    exe, slices = _compile_on(text, 2)
    assert len(slices) == 2 and slices[-1][1] == 40
    x = _quarters((40, 50, 33), seed=4)
    np.testing.assert_array_equal(exe.run(x)[0],
                                  x.sum(axis=1, dtype=np.float64).astype(np.float32))


MULTI = f"""HloModule multi
{ADD}
fc {{
  x = f32[ROWS,37] parameter(0)
  sq = f32[ROWS,37] multiply(x, x)
  z = f32[] constant(0)
  s = f32[37] reduce(x, z), dimensions={{0}}, to_apply=add
  q = f32[37] reduce(sq, z), dimensions={{0}}, to_apply=add
  ROOT t = (f32[37], f32[37]) tuple(s, q)
}}
ENTRY e {{
  x = f32[ROWS,37] parameter(0)
  ROOT f = (f32[37], f32[37]) fusion(x), kind=kInput, calls=fc
}}"""


@pytest.mark.parametrize("rows", [5, 8 * 4 + 3])
def test_sibling_column_reduces_share_one_walk(rows):
    """Sum and sum of squares of one input (a mean and a variance): one kernel whose
    vector loop reads each input element once for both outputs."""
    text = MULTI.replace("ROWS", str(rows))
    x = _quarters((rows, 37), seed=rows)
    s, q = check_against_evaluator(text, [x])
    np.testing.assert_array_equal(s, x.sum(axis=0, dtype=np.float64).astype(np.float32))
    np.testing.assert_array_equal(q, (x.astype(np.float64) ** 2).sum(axis=0).astype(np.float32))


def test_sibling_walk_loads_the_input_once_per_row():
    _, exe = compiled(MULTI.replace("ROWS", "4096").replace("37", "2048"))
    # (The loops combining blocks of rows pairwise load at most two rows per store.)
    blocks = [(loads, stores) for loads, stores in _vector_blocks(exe.as_llvm_ir())
              if stores and loads > 2 * stores]
    assert blocks
    per_step = reduction.ROWS_PER_STEP_COMPUTED      # x * x costs one multiply
    for loads, stores in blocks:
        assert stores == 2 and loads == per_step + 2, blocks


def test_a_tuple_with_other_elements_is_not_one_walk():
    """A column reduce next to an elementwise output: each element gets its own nest."""
    text = f"""HloModule mixed
{ADD}
fc {{
  x = f32[9,16] parameter(0)
  y = f32[16] parameter(1)
  z = f32[] constant(0)
  s = f32[16] reduce(x, z), dimensions={{0}}, to_apply=add
  n = f32[16] negate(y)
  ROOT t = (f32[16], f32[16]) tuple(s, n)
}}
ENTRY e {{
  x = f32[9,16] parameter(0)
  y = f32[16] parameter(1)
  ROOT f = (f32[16], f32[16]) fusion(x, y), kind=kInput, calls=fc
}}"""
    root = hlo.parse_module(uniquify(text)).entry.root.fused_computation.root
    assert not all(e.opcode == "reduce" for e in root.operands)
    check_against_evaluator(text, [_quarters((9, 16), 1), _quarters((16,), 2)])


def _epilogue_module(rows: int, cols: int, body: str, out: str) -> str:
    return f"""HloModule epi
{ADD}
fc {{
  x = f32[{rows},{cols}] parameter(0)
  y = f32[{cols}] parameter(1)
  z = f32[] constant(0)
  s = f32[{cols}] reduce(x, z), dimensions={{0}}, to_apply=add
{body}
}}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  y = f32[{cols}] parameter(1)
  ROOT f = {out} fusion(x, y), kind=kLoop, calls=fc
}}"""


EPILOGUES = {
    # name: (fused body after `s`, root shape, numpy of the column sums s and y)
    "mean": ("""  n = f32[] constant(4)
  nb = f32[COLS] broadcast(n), dimensions={}
  ROOT m = f32[COLS] divide(s, nb)""", "f32[COLS]", lambda s, y: s / 4),
    "keepdims": ("  ROOT k = f32[1,COLS] reshape(s)", "f32[1,COLS]", lambda s, y: s[None, :]),
    "bias_f16": ("""  a = f32[COLS] add(s, y)
  ROOT h = f16[COLS] convert(a)""", "f16[COLS]", lambda s, y: (s + y).astype(np.float16)),
}


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_pointwise_epilogue_of_a_column_reduce(name):
    """mean = sum / n, a keepdims reshape, a bias and a convert: the reduce streams into
    a scratch row and each of two partitions maps its own slice of it."""
    body, out, expect = EPILOGUES[name]
    rows, cols = 700, 100                        # 280 KB: split over two threads
    text = _epilogue_module(rows, cols, body.replace("COLS", str(cols)),
                            out.replace("COLS", str(cols)))
    root = hlo.parse_module(uniquify(text)).entry.root.fused_computation
    assert reduction.plan_stages(root) is not None
    exe, slices = _compile_on(text, 2)
    assert len(slices) == 2
    x, y = _quarters((rows, cols), 1), _quarters((cols,), 2)
    got = exe.run(x, y)[0]
    np.testing.assert_array_equal(got, expect(x.sum(axis=0, dtype=np.float64), y)
                                  .astype(got.dtype))
    check_against_evaluator(text, [x, y])


def test_a_reduce_broadcast_back_is_not_an_epilogue():
    """x - sum(x, 0) needs every column sum at every row: not pointwise, declined (and
    still computed correctly by the generic nest)."""
    body = """  sb = f32[COLS,COLS] broadcast(s), dimensions={1}
  ROOT d = f32[COLS,COLS] subtract(x, sb)""".replace("COLS", "8")
    text = _epilogue_module(8, 8, body, "f32[8,8]")
    root = hlo.parse_module(uniquify(text)).entry.root.fused_computation
    assert reduction.plan_stages(root) is None
    check_against_evaluator(text, [_quarters((8, 8), 3), _quarters((8,), 4)])


def test_a_tuple_of_pointwise_epilogues_shares_one_walk():
    """Moments: the sums of x and x*x in one walk, outputs mixing a reduce itself, a
    variance-like q/n - m*m with m from another input, and a keepdims reshape."""
    rows, cols = 700, 100
    text = f"""HloModule moments
{ADD}
fc {{
  x = f32[{rows},{cols}] parameter(0)
  y = f32[{cols}] parameter(1)
  z = f32[] constant(0)
  sq = f32[{rows},{cols}] multiply(x, x)
  s = f32[{cols}] reduce(x, z), dimensions={{0}}, to_apply=add
  q = f32[{cols}] reduce(sq, z), dimensions={{0}}, to_apply=add
  n = f32[] constant(4)
  nb = f32[{cols}] broadcast(n), dimensions={{}}
  m = f32[{cols}] divide(y, nb)
  mm = f32[{cols}] multiply(m, m)
  qn = f32[{cols}] divide(q, nb)
  v = f32[{cols}] subtract(qn, mm)
  k = f32[1,{cols}] reshape(q)
  ROOT t = (f32[{cols}], f32[{cols}], f32[1,{cols}]) tuple(s, v, k)
}}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  y = f32[{cols}] parameter(1)
  ROOT f = (f32[{cols}], f32[{cols}], f32[1,{cols}]) fusion(x, y), kind=kLoop, calls=fc
}}"""
    fused = hlo.parse_module(uniquify(text)).entry.root.fused_computation
    assert [len(stage) for stage in reduction.plan_stages(fused)] == [2]
    exe, slices = _compile_on(text, 2)
    assert len(slices) == 2
    x, y = _quarters((rows, cols), 5), _quarters((cols,), 6)
    s, v, k = exe.run(x, y)
    q = (x.astype(np.float64) ** 2).sum(axis=0)
    np.testing.assert_array_equal(s, x.sum(axis=0, dtype=np.float64).astype(np.float32))
    np.testing.assert_array_equal(k, q[None, :].astype(np.float32))
    np.testing.assert_allclose(v, q / 4 - (y / 4.0) ** 2, rtol=1e-6)
    check_against_evaluator(text, [x, y])


def test_a_reduce_reading_an_earlier_one_runs_in_a_later_walk():
    """A variance sum((x - sum(x)/n)^2)/n in one fusion: the mean's walk fills its
    scratch row, then the second walk reads it broadcast back over the rows (each
    partition only its own columns)."""
    rows, cols = 700, 100
    text = f"""HloModule variance
{ADD}
fc {{
  x = f32[{rows},{cols}] parameter(0)
  z = f32[] constant(0)
  n = f32[] constant({rows})
  nb = f32[{cols}] broadcast(n), dimensions={{}}
  s = f32[{cols}] reduce(x, z), dimensions={{0}}, to_apply=add
  m = f32[{cols}] divide(s, nb)
  mb = f32[{rows},{cols}] broadcast(m), dimensions={{1}}
  d = f32[{rows},{cols}] subtract(x, mb)
  d2 = f32[{rows},{cols}] multiply(d, d)
  q = f32[{cols}] reduce(d2, z), dimensions={{0}}, to_apply=add
  ROOT v = f32[{cols}] divide(q, nb)
}}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  ROOT f = f32[{cols}] fusion(x), kind=kLoop, calls=fc
}}"""
    fused = hlo.parse_module(uniquify(text)).entry.root.fused_computation
    assert [len(stage) for stage in reduction.plan_stages(fused)] == [1, 1]
    exe, slices = _compile_on(text, 2)
    assert len(slices) == 2
    x = np.random.default_rng(8).standard_normal((rows, cols)).astype(np.float32)
    np.testing.assert_allclose(exe.run(x)[0], x.astype(np.float64).var(axis=0), rtol=1e-5)
    check_against_evaluator(text, [x])


def test_a_broadcast_over_other_dimensions_is_not_a_stage():
    """sum(x * broadcast(sum(x)) over the wrong dimension): a partition would read row
    elements of the other partition, so the fusion is left to the generic nest."""
    text = f"""HloModule cross
{ADD}
fc {{
  x = f32[16,16] parameter(0)
  z = f32[] constant(0)
  s = f32[16] reduce(x, z), dimensions={{0}}, to_apply=add
  sb = f32[16,16] broadcast(s), dimensions={{0}}
  p = f32[16,16] multiply(x, sb)
  ROOT q = f32[16] reduce(p, z), dimensions={{0}}, to_apply=add
}}
ENTRY e {{
  x = f32[16,16] parameter(0)
  ROOT f = f32[16] fusion(x), kind=kLoop, calls=fc
}}"""
    fused = hlo.parse_module(uniquify(text)).entry.root.fused_computation
    assert reduction.plan_stages(fused) is None
    check_against_evaluator(text, [_quarters((16, 16), 9)])
