"""Hypothesis: random small fused programs (shapes, dtypes, ops, layouts) agree with the
reference evaluator. Each example is one fusion: a binary op of a transposed operand
and a broadcast one, then a reduction over a random set of dimensions."""
from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from tests.backend_cpu.helpers import check_against_evaluator, edge_values

TYPES = ["s8", "s32", "u16", "u64", "f16", "f32", "f64"]
OPS = ["add", "subtract", "multiply", "maximum", "minimum", "divide", "remainder"]


@st.composite
def programs(draw):
    t = draw(st.sampled_from(TYPES))
    op = draw(st.sampled_from(OPS))
    rank = draw(st.integers(1, 3))
    dims = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    perm = draw(st.permutations(range(rank)))
    kept = sorted(draw(st.sets(st.integers(0, rank - 1))))
    reduced = draw(st.sets(st.integers(0, rank - 1)))
    layout = draw(st.permutations(range(rank)))
    return t, op, dims, list(perm), kept, sorted(reduced), list(layout)


def _text(t, op, dims, perm, kept, reduced, layout):
    shape = ",".join(map(str, dims))
    src = ",".join(map(str, _source_dims(dims, perm)))
    small = ",".join(str(dims[d]) for d in kept)
    out = ",".join(str(dims[d]) for d in range(len(dims)) if d not in reduced)
    lay = ",".join(map(str, layout))
    return f"""HloModule random
add_r {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
fused {{
  x = {t}[{src}] parameter(0)
  y = {t}[{small}] parameter(1)
  tx = {t}[{shape}]{{{lay}}} transpose(x), dimensions={{{",".join(map(str, perm))}}}
  by = {t}[{shape}] broadcast(y), dimensions={{{",".join(map(str, kept))}}}
  e = {t}[{shape}] {op}(tx, by)
  z = {t}[] constant(0)
  ROOT r = {t}[{out}] reduce(e, z), dimensions={{{",".join(map(str, reduced))}}}, to_apply=add_r
}}
ENTRY main {{
  x = {t}[{src}] parameter(0)
  y = {t}[{small}] parameter(1)
  ROOT f = {t}[{out}] fusion(x, y), kind=kLoop, calls=fused
}}
"""


def _source_dims(dims, perm):
    """transpose(x, perm) has dims[j] = x.dims[perm[j]]: x's dims from the result's."""
    return [dims[perm.index(k)] for k in range(len(perm))]


@given(programs())
def test_random_fused_program(program):
    t, op, dims, perm, kept, reduced, layout = program
    text = _text(t, op, dims, perm, kept, reduced, layout)
    src_dims = _source_dims(dims, perm)
    x = edge_values(t, int(np.prod(src_dims)), seed=7).reshape(src_dims)
    y = edge_values(t, int(np.prod([dims[d] for d in kept])), seed=8).reshape(
        [dims[d] for d in kept])
    if t.startswith("f"):            # keep float sums exact in any order
        x = np.nan_to_num(np.round(x.astype(np.float64).clip(-8, 8)), posinf=8, neginf=-8).astype(x.dtype)
        y = np.nan_to_num(np.round(y.astype(np.float64).clip(-8, 8)), posinf=8, neginf=-8).astype(y.dtype)
        y = np.asarray(np.where(y == 0, 1, y), dtype=x.dtype)
    with np.errstate(all="ignore"):
        check_against_evaluator(text, [x, y], text)
