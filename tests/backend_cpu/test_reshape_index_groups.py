"""A fused reshape maps indices group by group (elemental/generators.remap_reshape):
runs of dimensions whose sizes multiply to the same count on both sides. Every
element must come from where one row-major (or, for a bitcast, physical)
linearization puts it, for groups of one and several dimensions on either side,
size-1 dimensions anywhere, and layouts that are not row-major."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from tests.corpus_util import assert_all_close


def run(text: str, arg: np.ndarray):
    exe = backend_cpu.compile(hlo.parse_module(text),
                              backend_cpu.CompileOptions(pipeline="default", cache=False,
                                                         disk_cache=False))
    got = exe.run(arg)
    want = hlo.evaluate(hlo.parse_module(text), [arg])
    assert_all_close(got, want, "compiled vs evaluator")
    return got


def shape_text(dims) -> str:
    return f"f32[{','.join(map(str, dims))}]"


@pytest.mark.parametrize("src,dst", [
    ((48, 96), (4, 12, 3, 2, 16)),       # groups (4,12)-(48) and (3,2,16)-(96)
    ((4, 12, 3, 2, 16), (48, 96)),       # the other way: divisions inside a group
    ((6, 1, 20), (2, 3, 4, 5)),          # a size-1 dimension between groups
    ((2, 3, 4, 5), (6, 20, 1)),
    ((10, 12), (12, 10)),                # one group of everything
    ((3, 4, 5), (3, 20)),                # a direct group, then a merged one
    ((7,), (1, 7, 1)),                   # only size-1 dimensions come and go
])
def test_fused_reshapes_keep_row_major_order(src, dst):
    # exp() keeps the reshape inside a loop fusion; the transpose after it reads the
    # reshaped value out of order, so every index of it is remapped.
    perm = tuple(reversed(range(len(dst))))
    tdims = tuple(dst[p] for p in perm)
    text = f"""HloModule m
ENTRY e {{
  x = {shape_text(src)} parameter(0)
  e = {shape_text(src)} exponential(x)
  r = {shape_text(dst)} reshape(e)
  ROOT t = {shape_text(tdims)} transpose(r), dimensions={{{','.join(map(str, perm))}}}
}}"""
    arg = np.random.default_rng(0).standard_normal(src).astype(np.float32)
    got = run(text, arg)
    np.testing.assert_allclose(np.asarray(got if not isinstance(got, (list, tuple)) else got[0]),
                               np.exp(arg).reshape(dst).transpose(perm), rtol=1e-6)


def test_a_bitcast_between_layouts_follows_memory_order():
    # f32[4,6]{0,1} (column-major) bitcast to f32[3,2,4]{2,1,0}: element order is memory order.
    text = """HloModule m
ENTRY e {
  x = f32[4,6]{0,1} parameter(0)
  n = f32[4,6]{0,1} negate(x)
  b = f32[3,2,4]{2,1,0} bitcast(n)
  ROOT t = f32[4,2,3]{2,1,0} transpose(b), dimensions={2,1,0}
}"""
    arg = np.arange(24, dtype=np.float32).reshape(4, 6)
    run(text, arg)
