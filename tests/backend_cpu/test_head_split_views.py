"""Attention's head split as JAX and the frontend write it: a row-major [B*S, H*D] array
reshaped to [B, S, H, D] and transposed to [B, H, S, D]. Between row-major arrays the
reshape is a bitcast, so the transpose reads the parameter in place and moves whole rows
(row_shuffle, cached stores below the streaming size) instead of a loop nest that
computes each element's source with divisions (0.3 s of LLVM for the GPT block's
f32[8,256,8,64], against 14 ms). A dot reading such a reshape sees it in place too."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo

SPLIT = """HloModule heads
ENTRY e {{
  x = f32[{bs},{hd}] parameter(0)
  r = f32[{b},{s},{h},{d}] reshape(x)
  ROOT t = f32[{b},{h},{s},{d}] transpose(r), dimensions={{0,2,1,3}}
}}"""


@pytest.mark.parametrize("b,s,h,d", [(2, 64, 4, 64), (1, 40, 3, 160), (8, 256, 8, 64)])
def test_head_split_of_a_reshaped_parameter_moves_rows(b, s, h, d):
    text = SPLIT.format(bs=b * s, hd=h * d, b=b, s=s, h=h, d=d)
    exe = backend_cpu.compile(hlo.parse_module(text),
                              backend_cpu.CompileOptions(pipeline="default", disk_cache=False))
    assert [c.chosen for c in exe.kernel_strategies()] == ["row_shuffle"]
    x = np.random.default_rng(0).standard_normal((b * s, h * d)).astype(np.float32)
    (got,) = exe.run(x)
    np.testing.assert_array_equal(got, x.reshape(b, s, h, d).transpose(0, 2, 1, 3))


def test_a_reshape_in_another_layout_is_not_read_in_place():
    # The operand stored column-major: the reshape is no bitcast, the loop nest computes it.
    text = """HloModule heads
ENTRY e {
  x = f32[128,256]{0,1} parameter(0)
  r = f32[2,64,4,64] reshape(x)
  ROOT t = f32[2,4,64,64] transpose(r), dimensions={0,2,1,3}
}"""
    module = hlo.parse_module(text)
    exe = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline="default",
                                                                 disk_cache=False))
    x = np.random.default_rng(1).standard_normal((128, 256)).astype(np.float32)
    (got,) = exe.run(x)
    (want,) = hlo.evaluate(hlo.parse_module(text), [x])
    np.testing.assert_array_equal(got, want)


def test_a_dot_of_a_reshaped_parameter():
    text = """HloModule dot_reshape
ENTRY e {
  x = f32[64,96] parameter(0)
  w = f32[32,16] parameter(1)
  r = f32[64,3,32] reshape(x)
  ROOT d = f32[64,3,16] dot(r, w), lhs_contracting_dims={2}, rhs_contracting_dims={0}
}"""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    exe = backend_cpu.compile(hlo.parse_module(text),
                              backend_cpu.CompileOptions(pipeline="default", disk_cache=False))
    (got,) = exe.run(x, w)
    np.testing.assert_allclose(got, x.reshape(64, 3, 32) @ w, rtol=1e-5, atol=1e-5)
