"""Sharded jit_compile through control flow, end to end on the CPU backend: a fori_loop and
a cond whose operands carry PartitionSpecs run partitioned (the loop state stays split,
the collectives run inside the loop body) and give the one-device results."""
import numpy as np
import pytest

import xlapy
from xlapy import ops
from xlapy.frontend.distribute import Mesh, PartitionSpec as P


def loop(x, w):
    def body(i, h):
        return ops.tanh(ops.matmul(h, w)) + ops.reduce_sum(h, axis=1, keepdims=True) * 0.01
    return xlapy.fori_loop(0, 3, body, x)


def branch(x, w, flag):
    return xlapy.cond(flag, lambda a, b: ops.matmul(a, b), lambda a, b: ops.tanh(a) * 2.0,
                      (x, w))


@pytest.mark.parametrize("x_spec, w_spec", [(P(None, "model"), P("model", None)),
                                            (P("model", None), None)])
def test_fori_loop_partitioned(x_spec, w_spec):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = (rng.standard_normal((6, 6)) * 0.5).astype(np.float32)
    f = xlapy.jit_compile(loop, mesh=Mesh(np.arange(2), ("model",)),
                          in_shardings=(x_spec, w_spec), out_shardings=x_spec)
    np.testing.assert_allclose(f(x, w), xlapy.jit_compile(loop)(x, w), rtol=1e-5, atol=1e-5)
    text = f.compile(x, w).as_hlo_text()          # the per-device program
    state = [line for line in text.splitlines() if " while(" in line]
    assert state and ("f32[4,3]" in state[0] or "f32[2,6]" in state[0]), state


@pytest.mark.parametrize("flag", [True, False])
def test_cond_partitioned(flag):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal((6, 6)).astype(np.float32)
    f = xlapy.jit_compile(branch, mesh=Mesh(np.arange(2), ("model",)),
                          in_shardings=(P("model", None), None, None))
    np.testing.assert_allclose(f(x, w, np.bool_(flag)),
                               xlapy.jit_compile(branch)(x, w, np.bool_(flag)),
                               rtol=1e-5, atol=1e-5)
