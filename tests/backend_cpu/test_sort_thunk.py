"""The numpy sort thunk (backend_cpu/sort_thunk.py) against the reference evaluator.

Every result must be bit-identical to `hlo.evaluate`: sorts are exact, and the
permutation (stability, the place of -0/+0 and NaNs) is part of the answer.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xlapy import hlo
from xlapy.backend_cpu.sort_thunk import SortThunk, match_sort, stable_order
from tests.backend_cpu.helpers import compiled, edge_values

# Comparators: (name, HLO body over parameters a, b [, c, d]) for element type T.
PLAIN = "ROOT r = pred[] compare(a, b), direction={dir}"
TOTAL = "ROOT r = pred[] compare(a, b), direction={dir}, type=TOTALORDER"
# JAX's canonicalizing comparator: -0 -> +0, NaN -> +NaN, then a TOTALORDER compare.
JAX = """
  zero = T[] constant(0)
  qnan = T[] constant(nan)
  eqa = pred[] compare(a, zero), direction=EQ
  sa = T[] select(eqa, zero, a)
  nea = pred[] compare(a, a), direction=NE
  ka = T[] select(nea, qnan, sa)
  eqb = pred[] compare(b, zero), direction=EQ
  sb = T[] select(eqb, zero, b)
  neb = pred[] compare(b, b), direction=NE
  kb = T[] select(neb, qnan, sb)
  ROOT r = pred[] compare(ka, kb), direction={dir}, type=TOTALORDER"""


def _module(etype: str, dims: tuple, dim: int, body: str, direction: str = "LT",
            with_iota: bool = False, layout: str = "") -> str:
    shape = f"{etype}[{','.join(map(str, dims))}]{layout}"
    index = f"s32[{','.join(map(str, dims))}]"
    params = f"a = {etype}[] parameter(0)\n  b = {etype}[] parameter(1)"
    if with_iota:
        params += "\n  c = s32[] parameter(2)\n  d = s32[] parameter(3)"
    body = body.replace("{dir}", direction).replace("T[]", f"{etype}[]")
    if with_iota:
        entry = (f"  x = {shape} parameter(0)\n  io = {index} iota(), iota_dimension={dim}\n"
                 f"  ROOT s = ({shape}, {index}) sort(x, io), dimensions={{{dim}}}, "
                 f"is_stable=true, to_apply=cmp")
    else:
        entry = (f"  x = {shape} parameter(0)\n"
                 f"  ROOT s = {shape} sort(x), dimensions={{{dim}}}, is_stable=true, to_apply=cmp")
    return f"HloModule m\n\ncmp {{\n  {params}\n  {body}\n}}\n\nENTRY e {{\n{entry}\n}}\n"


def _check_exact(text: str, args) -> list[np.ndarray]:
    module, executable = compiled(text)
    actual = executable.run(*args)
    expected = hlo.evaluate(module, list(args))
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        e = np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape, f"output {i}"
        assert a.tobytes() == e.tobytes(), f"output {i} differs:\n{a}\nexpected\n{e}"
    return actual


def _sort_thunks(text: str) -> list[SortThunk]:
    _, executable = compiled(text)
    return [t for t in executable._program.thunks if isinstance(t, SortThunk)]


def _float_row(dtype, n: int, seed: int, nan: bool) -> np.ndarray:
    """Ties, signed zeros, infinities and (optionally) NaNs of both signs."""
    rng = np.random.default_rng(seed)
    pool = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, np.inf, -np.inf, 1e-40, -1e-40, 3.0]
    x = np.array(rng.choice(pool, n), dtype=dtype)
    if nan and n:
        neg_nan = np.copysign(np.array(np.nan, dtype), dtype(-1))
        x[rng.integers(0, n, 3)] = np.nan
        x[rng.integers(0, n, 2)] = neg_nan
    return x


@pytest.mark.parametrize("etype", ["f16", "f32", "f64"])
@pytest.mark.parametrize("body", ["plain", "total", "jax"])
@pytest.mark.parametrize("direction", ["LT", "GT"])
@pytest.mark.parametrize("nan", [False, True])
def test_floats_bit_exact(etype, body, direction, nan):
    text = _module(etype, (3, 37), 1, {"plain": PLAIN, "total": TOTAL, "jax": JAX}[body],
                   direction, with_iota=True)
    dtype = hlo.numpy_dtype(etype).type
    x = np.stack([_float_row(dtype, 37, seed, nan) for seed in range(3)])
    _check_exact(text, [x])
    (thunk,) = _sort_thunks(text)
    before = thunk.reference_runs
    _check_exact(text, [x])
    # Only a NaN under a plain compare needs the reference merge sort to decide.
    assert thunk.reference_runs - before == (1 if nan and body == "plain" else 0)


@pytest.mark.parametrize("etype", ["s8", "s32", "s64", "u8", "u16", "u64", "pred"])
@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_integers_and_pred(etype, direction):
    text = _module(etype, (50,), 0, PLAIN, direction, with_iota=True)
    x = edge_values(etype, 50, seed=3)
    x[20:30] = x[:10]                      # ties: stability decides the iota output
    _check_exact(text, [x])
    assert len(_sort_thunks(text)) == 1


@pytest.mark.parametrize("dims,dim", [((7,), 0), ((4, 6), 0), ((4, 6), 1), ((2, 3, 5), 1),
                                      ((2, 3, 5), 2), ((3, 0), 1), ((0, 4), 1), ((5, 1), 1),
                                      ((1, 5), 0)])
def test_ranks_dims_and_empty(dims, dim):
    text = _module("f32", dims, dim, TOTAL, "GT", with_iota=True)
    x = np.random.default_rng(1).integers(-3, 3, dims).astype(np.float32)   # many ties
    _check_exact(text, [x])


def test_column_major_layout():
    text = _module("s32", (5, 6), 0, PLAIN, "LT", with_iota=True, layout="{0,1}")
    x = np.random.default_rng(2).integers(0, 4, (5, 6)).astype(np.int32)
    _check_exact(text, [x])


def test_key_is_second_operand_and_swapped_compare():
    text = """HloModule m

cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT r = pred[] compare(d, c), direction=LT
}

ENTRY e {
  i = s32[40] parameter(0)
  v = f32[40] parameter(1)
  ROOT s = (s32[40], f32[40]) sort(i, v), dimensions={0}, is_stable=true, to_apply=cmp
}
"""
    v = np.random.default_rng(4).integers(0, 5, 40).astype(np.float32)
    _check_exact(text, [np.arange(40, dtype=np.int32), v])
    key = match_sort(compiled(text)[0].entry.root)
    assert (key.index, key.descending) == (1, True)


def test_corpus_comparators_are_recognized():
    """JAX's canonicalizing comparator and XLA's integer rewrite of it (.opt.hlo)."""
    from tests.corpus_util import CORPUS
    for name in ("sort_nan_f32_f16.hlo", "sort_nan_f32_f16.opt.hlo", "argsort_2d.opt.hlo",
                 "sort_s32_desc.opt.hlo"):
        module = hlo.parse_module((CORPUS / name).read_text())
        sorts = [i for c in module.computations for i in c.instructions if i.opcode == "sort"]
        assert sorts and all(match_sort(s) is not None for s in sorts), name


def test_unrecognized_comparator_uses_the_kernel():
    """Two keys combined with select: the LLVM merge sort alone."""
    text = """HloModule m

cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  lt2 = pred[] compare(c, d), direction=GT
  ROOT r = pred[] select(eq, lt2, lt)
}

ENTRY e {
  x = s32[30] parameter(0)
  y = s32[30] parameter(1)
  ROOT s = (s32[30], s32[30]) sort(x, y), dimensions={0}, to_apply=cmp
}
"""
    rng = np.random.default_rng(5)
    args = [rng.integers(0, 4, 30).astype(np.int32), rng.integers(0, 9, 30).astype(np.int32)]
    _check_exact(text, args)
    assert _sort_thunks(text) == []


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_stable_order_is_a_stable_argsort(dtype, axis):
    """The packed (key, index) sort against numpy's own stable argsort."""
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    key = rng.choice(np.array([0, 1, info.max // 2, info.max - 1, info.max], dtype), (9, 13, 11))
    np.testing.assert_array_equal(stable_order(key, axis), np.argsort(key, axis, kind="stable"))


@given(st.sampled_from(["f16", "f32", "f64", "s8", "u16", "s64", "pred"]),
       st.sampled_from(["plain", "total", "jax"]), st.sampled_from(["LT", "GT"]),
       st.integers(1, 3), st.integers(0, 40), st.integers(0, 2**31))
def test_random_sorts_match_the_evaluator(etype, body, direction, rows, n, seed):
    """Any key type, comparator form and direction; values drawn with many ties and,
    for floats, signed zeros, infinities, denormals and NaNs of both signs."""
    if body == "jax" and not etype.startswith("f"):
        body = "plain"
    text = _module(etype, (rows, n), 1, {"plain": PLAIN, "total": TOTAL, "jax": JAX}[body],
                   direction, with_iota=True)
    dtype = hlo.numpy_dtype(etype)
    if dtype.kind == "f":
        rng = np.random.default_rng(seed)
        x = np.stack([_float_row(dtype.type, n, seed + r, nan=bool(rng.integers(0, 2)))
                      for r in range(rows)]).reshape(rows, n)
    else:
        x = edge_values(etype, rows * n, seed=seed % 1000).reshape(rows, n)
        x[:, n // 2:] = x[:, :n - n // 2].copy()      # ties
    _check_exact(text, [x])


def test_comparator_sides_may_differ_in_metadata():
    text = """HloModule m

cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  na = f32[] negate(a), metadata={op_name="neg" stack_frame_id=1}
  nb = f32[] negate(b), metadata={op_name="neg" stack_frame_id=2}
  ROOT r = pred[] compare(na, nb), direction=LT, type=TOTALORDER
}

ENTRY e {
  x = f32[30] parameter(0)
  ROOT s = f32[30] sort(x), dimensions={0}, to_apply=cmp
}
"""
    x = np.random.default_rng(9).integers(-4, 4, 30).astype(np.float32)
    actual = _check_exact(text, [x])
    assert len(_sort_thunks(text)) == 1
    assert (np.diff(actual[0]) <= 0).all()          # negated key: descending


def test_rows_sorted_on_several_threads():
    """Enough rows to be split between threads; one row has a NaN (the reference)."""
    from xlapy import runtime
    text = _module("f32", (300, 256), 1, PLAIN, "GT", with_iota=True)
    x = np.random.default_rng(8).integers(-20, 20, (300, 256)).astype(np.float32)
    x[123, 7] = np.nan
    _check_exact(text, [x])
    (thunk,) = _sort_thunks(text)
    assert len(thunk._blocks) == min(2, runtime.get_options().intra_op_threads)
    assert thunk.reference_runs >= 1


def test_large_sort_takes_the_fast_path():
    """200k elements: the merge kernel needs ~0.2 s, numpy a few ms."""
    text = _module("f32", (200_000,), 0, JAX, "LT", with_iota=True)
    x = np.random.default_rng(6).standard_normal(200_000).astype(np.float32)
    _, executable = compiled(text)
    (thunk,) = _sort_thunks(text)
    start = time.perf_counter()
    values, order = executable.run(x)
    elapsed = time.perf_counter() - start
    assert thunk.reference_runs == 0
    np.testing.assert_array_equal(order, np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(values, np.sort(x))
    assert elapsed < 0.1, f"{elapsed:.3f} s"
