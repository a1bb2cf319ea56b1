"""A multi-output fusion whose outputs share dims but not layouts (JAX's AdamW update
of a transposed gradient writes the new moments in {0,1} and the parameter in {1,0};
issue 19) is one loop nest, tiled against the other layout (emitters/loop_nest.py
`emit_tuple_together`), not one serial nest per output; the numbers agree with the
evaluator for rank 2 and 3, sizes that are not multiples of the tile, and a
transposed input."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from tests.corpus_util import assert_close

ADAM_LIKE = """HloModule adam
fused {
  p = f32[@D]@L parameter(0)
  g = f32[@G]{1,0} parameter(1)
  m = f32[@D]@L parameter(2)
  gt = f32[@D]@O transpose(g), dimensions={1,0}
  c9 = f32[] constant(0.9)
  c1 = f32[] constant(0.1)
  b9 = f32[@D]@L broadcast(c9), dimensions={}
  b1 = f32[@D]@L broadcast(c1), dimensions={}
  gm = f32[@D]@O multiply(gt, b1)
  mm = f32[@D]@L multiply(m, b9)
  m2 = f32[@D]@O add(gm, mm)
  v2 = f32[@D]@O multiply(gt, gt)
  s = f32[@D]@O sqrt(v2)
  u = f32[@D]@O divide(m2, s)
  p2 = f32[@D]@L subtract(p, u)
  ROOT t = (f32[@D]@L, f32[@D]@O, f32[@D]@O) tuple(p2, m2, v2)
}

ENTRY e {
  p = f32[@D]@L parameter(0)
  g = f32[@G]{1,0} parameter(1)
  m = f32[@D]@L parameter(2)
  ROOT f = (f32[@D]@L, f32[@D]@O, f32[@D]@O) fusion(p, g, m), kind=kLoop, calls=fused
}
"""


@pytest.mark.parametrize("rows,cols", [(256, 1024), (70, 130), (3, 200)])
def test_rank2_mixed_layouts_one_nest(rows, cols):
    text = (ADAM_LIKE.replace("@D", f"{rows},{cols}").replace("@G", f"{cols},{rows}")
            .replace("@L", "{1,0}").replace("@O", "{0,1}"))
    rng = np.random.default_rng(5)
    args = [rng.standard_normal((rows, cols)).astype(np.float32),
            rng.standard_normal((cols, rows)).astype(np.float32) + 3,
            rng.standard_normal((rows, cols)).astype(np.float32)]
    check(text, args)


def test_rank3_three_layouts_one_nest():
    text = """HloModule three
fused {
  a = f32[6,70,33]{2,1,0} parameter(0)
  b = f32[6,70,33]{1,2,0} parameter(1)
  x = f32[6,70,33]{1,2,0} add(a, b)
  y = f32[6,70,33]{0,1,2} multiply(a, b)
  z = f32[6,70,33]{2,1,0} subtract(a, b)
  w = f32[6,70,33]{0,1,2} negate(b)
  ROOT t = (f32[6,70,33]{1,2,0}, f32[6,70,33]{0,1,2}, f32[6,70,33]{2,1,0}, f32[6,70,33]{0,1,2}) tuple(x, y, z, w)
}

ENTRY e {
  a = f32[6,70,33]{2,1,0} parameter(0)
  b = f32[6,70,33]{1,2,0} parameter(1)
  ROOT f = (f32[6,70,33]{1,2,0}, f32[6,70,33]{0,1,2}, f32[6,70,33]{2,1,0}, f32[6,70,33]{0,1,2}) fusion(a, b), kind=kLoop, calls=fused
}
"""
    rng = np.random.default_rng(6)
    check(text, [rng.standard_normal((6, 70, 33)).astype(np.float32) for _ in range(2)])


def check(text, args):
    executable = backend_cpu.compile(hlo.parse_module(text))
    assert [c.chosen for c in executable.kernel_strategies()] == ["loop_nest"], \
        [c.lines() for c in executable.kernel_strategies()]
    expected = hlo.evaluate(hlo.parse_module(text), args)
    actual = executable.run(*args)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, np.asarray(e), f"out{i}")
