"""Parallel scatter and select-and-scatter (backend_cpu/emitters/scatter.py).

A kernel that may split reports a partition extent above 1; the tests then run it
with every unit of that extent as a partition of its own (the most cuts it can
get), on a pool of 2 threads and of 1, and compare with the reference evaluator:
within DESIGN.md's tolerances for floats and exactly for integers, with duplicate
and out-of-bounds indices (dropped, as XLA does) and every kind of combiner,
including a non-commutative one (the last update wins) that pins the order.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import runtime
from xlapy.backend_cpu.thunks import KernelThunk
from tests.backend_cpu.helpers import uniquify
from tests.corpus_util import assert_close

FRESH = backend_cpu.CompileOptions(cache=False, disk_cache=False)

COMBINERS = {
    "add": "ROOT r = {t}[] add(a, b)",
    "multiply": "ROOT r = {t}[] multiply(a, b)",
    "maximum": "ROOT r = {t}[] maximum(a, b)",
    "minimum": "ROOT r = {t}[] minimum(a, b)",
    "replace": "ROOT r = {t}[] copy(b)",          # jnp's .at[].set: the last update wins
}


def combiner(name: str, t: str, comp: str = "combine") -> str:
    return f"""{comp} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  {COMBINERS[name].format(t=t)}
}}"""


@functools.lru_cache(maxsize=None)
def compiled(text: str):
    module = hlo.parse_module(uniquify(text))
    return module, backend_cpu.compile(module, FRESH)


def kernel_thunks(exe) -> list[KernelThunk]:
    return [t for t in exe._program.thunks if isinstance(t, KernelThunk)]


@contextmanager
def split_every_unit(exe):
    """Inside: every kernel launches as one partition per unit of its extent."""
    saved = [(t, t.dims, t._single) for t in kernel_thunks(exe)]
    for t, _, _ in saved:
        t.dims = runtime.LaunchDims(t.extent, max(t.extent, 1))
        t._single = None
    try:
        yield
    finally:
        for t, dims, single in saved:
            t.dims, t._single = dims, single


@pytest.fixture(params=[2, 1], ids=["2threads", "1thread"])
def threads(request):
    previous = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=request.param)
    yield request.param
    runtime.configure(intra_op_threads=previous)


def evaluate(module, args) -> list[np.ndarray]:
    result = hlo.evaluate(module, list(args))
    return [np.asarray(r) for r in (result if isinstance(result, (list, tuple)) else [result])]


def check(text: str, args, min_extent: int = 2) -> None:
    """The kernel splits into at least `min_extent` units (1: it must stay serial) and
    gives the evaluator's result as linked (tiny: one partition) and split at every unit."""
    module, exe = compiled(text)
    extents = [t.extent for t in kernel_thunks(exe)]
    if min_extent > 1:
        assert max(extents) >= min_extent, extents
    else:
        assert max(extents) == 1, extents
    expected = evaluate(module, args)
    for i, (got, want) in enumerate(zip(exe.run(*args), expected)):
        assert_close(got, want, f"output {i}")          # as linked: tiny, one partition
    with split_every_unit(exe):
        for i, (got, want) in enumerate(zip(exe.run(*args), expected)):
            assert_close(got, want, f"output {i}, split at every unit")


# --- scatter --------------------------------------------------------------------------------------
def embedding_text(v: int, d: int, n: int, comb: str, t: str = "f32") -> str:
    """Rows of [n, d] updates into a [v, d] table at n row ids (D is a whole window)."""
    return f"""HloModule emb
{combiner(comb, t)}
ENTRY e {{
  x = {t}[{v},{d}] parameter(0)
  i = s32[{n}] parameter(1)
  u = {t}[{n},{d}] parameter(2)
  ROOT s = {t}[{v},{d}] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=combine
}}"""


def values(rng, shape, t: str):
    if t.startswith("s"):
        return rng.integers(-50, 50, shape).astype(hlo.numpy_dtype(t))
    return (rng.standard_normal(shape) * 3).astype(hlo.numpy_dtype(t))


# Duplicates (3 appears three times) and out-of-bounds ids (-1, v, 100), all dropped.
def row_ids(v: int, n: int, rng) -> np.ndarray:
    ids = rng.integers(0, v, n).astype(np.int32)
    ids[:6] = [3, -1, 3, v, 100, 3][:n]
    return ids


@pytest.mark.parametrize("comb,t", [("add", "f32"), ("multiply", "f32"), ("maximum", "s32"),
                                    ("minimum", "f32"), ("replace", "f32"), ("add", "s32"),
                                    ("maximum", "f64")])
def test_embedding_scatter_splits_rows(threads, comb, t):
    rng = np.random.default_rng(len(comb))
    v, d, n = 7, 37, 23           # D = 37 f32: three lines, the last one partial
    x, u = values(rng, (v, d), t), values(rng, (n, d), t)
    if t == "f32":
        u[2, 5] = np.nan          # NaN-propagating max/min, NaN sums
    check(embedding_text(v, d, n, comb, t), [x, row_ids(v, n, rng), u])


def test_scatter_over_columns_splits_the_major_dim(threads):
    """update_window_dims={0}: whole columns into [8, 30] at column ids."""
    text = f"""HloModule cols
{combiner("add", "f32")}
ENTRY e {{
  x = f32[8,30] parameter(0)
  i = s32[11,1] parameter(1)
  u = f32[8,11] parameter(2)
  ROOT s = f32[8,30] scatter(x, i, u), update_window_dims={{0}}, inserted_window_dims={{1}}, scatter_dims_to_operand_dims={{1}}, index_vector_dim=1, to_apply=combine
}}"""
    rng = np.random.default_rng(1)
    ids = rng.integers(-2, 32, (11, 1)).astype(np.int32)
    check(text, [values(rng, (8, 30), "f32"), ids, values(rng, (8, 11), "f32")], min_extent=8)


def test_scatter_with_index_vectors_into_rank3(threads):
    """Two coordinates per update, a whole minor window of 33 s32."""
    text = f"""HloModule r3
{combiner("replace", "s32")}
ENTRY e {{
  x = s32[4,5,33] parameter(0)
  i = s64[9,2] parameter(1)
  u = s32[9,33] parameter(2)
  ROOT s = s32[4,5,33] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0,1}}, scatter_dims_to_operand_dims={{0,1}}, index_vector_dim=1, to_apply=combine
}}"""
    rng = np.random.default_rng(2)
    ids = np.array([[1, 2], [1, 2], [0, 4], [3, 5], [-1, 0], [3, 0], [1, 2], [2, 2], [0, 0]],
                   np.int64)
    check(text, [values(rng, (4, 5, 33), "s32"), ids, values(rng, (9, 33), "s32")])


def test_addressed_whole_window_fits_only_at_zero(threads):
    """Both coordinates come from the indices; a row window fits only at column 0, so
    updates with another column start are dropped, in every partition alike."""
    text = f"""HloModule at0
{combiner("add", "f32")}
ENTRY e {{
  x = f32[5,20] parameter(0)
  i = s32[8,2] parameter(1)
  u = f32[8,20] parameter(2)
  ROOT s = f32[5,20] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0,1}}, index_vector_dim=1, to_apply=combine
}}"""
    rng = np.random.default_rng(12)
    ids = np.array([[0, 0], [4, 0], [2, 1], [2, 0], [1, -1], [3, 0], [5, 0], [2, 0]], np.int32)
    check(text, [values(rng, (5, 20), "f32"), ids, values(rng, (8, 20), "f32")])


def test_variadic_scatter_splits_both_outputs(threads):
    text = """HloModule var
combine {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  s = f32[] add(a, c)
  m = s32[] maximum(b, d)
  ROOT r = (f32[], s32[]) tuple(s, m)
}
ENTRY e {
  x = f32[6,40] parameter(0)
  y = s32[6,40] parameter(1)
  i = s32[10] parameter(2)
  u = f32[10,40] parameter(3)
  w = s32[10,40] parameter(4)
  ROOT s = (f32[6,40], s32[6,40]) scatter(x, y, i, u, w), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=combine
}"""
    rng = np.random.default_rng(3)
    check(text, [values(rng, (6, 40), "f32"), values(rng, (6, 40), "s32"), row_ids(6, 10, rng),
                 values(rng, (10, 40), "f32"), values(rng, (10, 40), "s32")])


def test_scatter_into_a_fused_operand(threads):
    """The default pipeline may fuse the zeros into the scatter: the fill is a generator."""
    text = f"""HloModule zeros
{combiner("add", "f32")}
ENTRY e {{
  z = f32[] constant(0)
  x = f32[5,48] broadcast(z), dimensions={{}}
  i = s32[12] parameter(0)
  u = f32[12,48] parameter(1)
  ROOT s = f32[5,48] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=combine
}}"""
    module = hlo.parse_module(uniquify(text))
    exe = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline="default", cache=False,
                                                                 disk_cache=False))
    rng = np.random.default_rng(4)
    args = [row_ids(5, 12, rng), values(rng, (12, 48), "f32")]
    with split_every_unit(exe):
        assert_close(exe.run(*args)[0], evaluate(module, args)[0], "fused zeros")


def test_scatter_without_a_whole_window_stays_serial(threads):
    text = f"""HloModule scalars
{combiner("add", "f32")}
ENTRY e {{
  x = f32[50] parameter(0)
  i = s32[20,1] parameter(1)
  u = f32[20] parameter(2)
  ROOT s = f32[50] scatter(x, i, u), update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=combine
}}"""
    rng = np.random.default_rng(5)
    ids = rng.integers(-3, 53, (20, 1)).astype(np.int32)
    check(text, [values(rng, (50,), "f32"), ids, values(rng, (20,), "f32")], min_extent=1)


@settings(max_examples=15)
@given(v=st.sampled_from([1, 3, 6]), d=st.sampled_from([1, 16, 21]),
       comb=st.sampled_from(["add", "maximum", "replace"]), seed=st.integers(0, 2 ** 16))
def test_embedding_scatter_random(v, d, comb, seed):
    rng = np.random.default_rng(seed)
    n = 9
    ids = rng.integers(-2, v + 2, n).astype(np.int32)
    module, exe = compiled(embedding_text(v, d, n, comb))
    args = [values(rng, (v, d), "f32"), ids, values(rng, (n, d), "f32")]
    with split_every_unit(exe):
        assert_close(exe.run(*args)[0], evaluate(module, args)[0], "random scatter")


# --- select-and-scatter ---------------------------------------------------------------------------
def pool_grad_text(shape, window: str, source, select: str = "GE", t: str = "f32",
                   scatter: str = "add") -> str:
    dims = lambda s: ",".join(map(str, s))     # noqa: E731
    return f"""HloModule pool
select {{
  p = {t}[] parameter(0)
  q = {t}[] parameter(1)
  ROOT c = pred[] compare(p, q), direction={select}
}}
{combiner(scatter, t, "combine_fn")}
ENTRY e {{
  x = {t}[{dims(shape)}] parameter(0)
  g = {t}[{dims(source)}] parameter(1)
  z = {t}[] constant(0)
  ROOT r = {t}[{dims(shape)}] select-and-scatter(x, g, z), window={{{window}}}, select=select, scatter=combine_fn
}}"""


def test_max_pool_gradient_splits_batch(threads):
    """3x3 stride 2, padded like SAME; small integer values make ties (the first wins)."""
    text = pool_grad_text((9, 9, 9, 20), "size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0",
                          (9, 5, 5, 20))
    rng = np.random.default_rng(6)
    x = rng.integers(-3, 4, (9, 9, 9, 20)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    check(text, [x, values(rng, (9, 5, 5, 20), "f32")], min_extent=9)


def test_min_pool_gradient_splits_channels(threads):
    """Batch 1: the channels (minor, 40 s32 = 3 lines) are what splits; exact in s32."""
    text = pool_grad_text((1, 7, 6, 40), "size=1x2x3x1 stride=1x2x1x1", (1, 3, 4, 40),
                          select="LE", t="s32", scatter="maximum")
    rng = np.random.default_rng(7)
    check(text, [values(rng, (1, 7, 6, 40), "s32"), values(rng, (1, 3, 4, 40), "s32")],
          min_extent=3)


def test_select_and_scatter_with_no_pointwise_dim_stays_serial(threads):
    text = pool_grad_text((8, 9), "size=2x3 stride=2x3", (4, 3))
    rng = np.random.default_rng(8)
    check(text, [values(rng, (8, 9), "f32"), values(rng, (4, 3), "f32")], min_extent=1)


def test_overlapping_windows_sum_in_order(threads):
    """Stride 1 windows overlap, so many sources land on one element."""
    text = pool_grad_text((3, 10, 17), "size=1x4x1 stride=1x1x1", (3, 7, 17))
    rng = np.random.default_rng(9)
    check(text, [values(rng, (3, 10, 17), "f32"), values(rng, (3, 7, 17), "f32")],
          min_extent=3)


def test_long_rows_choose_in_blocks(threads):
    """Rows of 300 sources (blocks of SELECT_BLOCK and a partial one), split by lines."""
    text = pool_grad_text((2, 4, 300), "size=1x2x1 stride=1x2x1", (2, 2, 300))
    rng = np.random.default_rng(10)
    check(text, [rng.integers(-2, 3, (2, 4, 300)).astype(np.float32),
                 values(rng, (2, 2, 300), "f32")], min_extent=19)


def test_global_pooling_window_loops(threads):
    """A 9 x 8 window (more elements than are unrolled) with padding on one side."""
    text = pool_grad_text((2, 9, 8, 3), "size=1x9x8x1 stride=1x9x8x1 pad=0_0x0_0x2_6x0_0",
                          (2, 1, 2, 3), select="GT", scatter="maximum")
    rng = np.random.default_rng(11)
    check(text, [values(rng, (2, 9, 8, 3), "f32"), values(rng, (2, 1, 2, 3), "f32")],
          min_extent=2)


def test_column_major_layouts(threads):
    """Layouts {0,1} and {0,1,2,3}: the partition dimension is then the physical major
    one (D, C), split by single indices, and for the pooling filled slice by slice."""
    scatter = f"""HloModule cm
{combiner("add", "f32")}
ENTRY e {{
  x = f32[7,37]{{0,1}} parameter(0)
  i = s32[23] parameter(1)
  u = f32[23,37]{{0,1}} parameter(2)
  ROOT s = f32[7,37]{{0,1}} scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=combine
}}"""
    rng = np.random.default_rng(13)
    check(scatter, [values(rng, (7, 37), "f32"), row_ids(7, 23, rng), values(rng, (23, 37), "f32")],
          min_extent=37)
    pool = pool_grad_text((3, 6, 6, 20), "size=1x2x2x1 stride=1x2x2x1", (3, 3, 3, 20))
    pool = pool.replace("f32[3,6,6,20] parameter", "f32[3,6,6,20]{0,1,2,3} parameter") \
        .replace("f32[3,3,3,20] parameter", "f32[3,3,3,20]{0,1,2,3} parameter") \
        .replace("ROOT r = f32[3,6,6,20]", "ROOT r = f32[3,6,6,20]{0,1,2,3}")
    check(pool, [rng.integers(-2, 3, (3, 6, 6, 20)).astype(np.float32),
                 values(rng, (3, 3, 3, 20), "f32")], min_extent=20)


def test_scalar_select_and_scatter():
    """Rank 0: the one source element lands on the one operand element (init + source),
    on the backend and on the evaluator (whose windows once failed on a scalar)."""
    module, exe = compiled(pool_grad_text((), "", ()))
    for x, g in [(2.0, 3.0), (np.nan, -1.5)]:
        args = [np.float32(x), np.float32(g)]
        (got,) = exe.run(*args)
        assert got == np.float32(0) + np.float32(g)
        assert hlo.evaluate(module, args)[0] == got
