"""distribute.pipeline: GPipe and 1F1B on 2 and 4 in-process stages (and 2 MPI ranks)
give one device's loss and gradients on the whole batch (f32 tolerance); 1F1B keeps
at most S - s microbatch inputs alive on stage s; the bubble is reported beside
(S-1)/(M+S-1)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy import ops
from xlapy.frontend import distribute

from tests.frontend.test_mesh import mpirun_command

ROOT = Path(__file__).resolve().parents[2]
TOL = dict(rtol=2e-5, atol=1e-6)
D = 8


def first(p, batch):
    x, y = batch
    return ops.tanh(x @ p["w"] + p["b"]), y          # the int labels ride along


def middle(p, act):
    h, y = act
    return ops.relu(h @ p["w"]) + h, y


def last(p, act):
    h, y = act
    return ops.reduce_mean(ops.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                          logits=h @ p["w"]))


def model(num_stages, seed=0):
    rng = np.random.default_rng(seed)
    params = [{"w": rng.standard_normal((6, D)).astype(np.float32) * 0.5,
               "b": rng.standard_normal(D).astype(np.float32) * 0.1}]
    params += [{"w": rng.standard_normal((D, D)).astype(np.float32) * 0.5}
               for _ in range(num_stages - 2)]
    params.append({"w": rng.standard_normal((D, 3)).astype(np.float32) * 0.5})
    stages = [first] + [middle] * (num_stages - 2) + [last]
    x = rng.standard_normal((16, 6)).astype(np.float32)
    y = rng.integers(0, 3, 16).astype(np.int32)
    return stages, params, (x, y)


def single_device(stages, params, batch):
    def whole(ps, batch):
        a = batch
        for fn, p in zip(stages, ps):
            a = fn(p, a)
        return a
    return xlapy.value_and_grad(whole)(params, batch)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("num_stages, num_microbatches", [(2, 4), (4, 8), (4, 2), (2, 1)])
def test_pipeline_equals_single_device(schedule, num_stages, num_microbatches):
    stages, params, batch = model(num_stages)
    want_loss, want = single_device(stages, params, batch)
    pipe = distribute.pipeline(stages, num_microbatches, schedule=schedule)
    loss, grads = pipe.value_and_grad(params, batch)
    np.testing.assert_allclose(loss, want_loss, **TOL)
    for g, w in zip(grads, want):
        assert sorted(g) == sorted(w)
        for k in w:
            np.testing.assert_allclose(g[k], w[k], **TOL)
    stats = pipe.stats
    S, M = num_stages, num_microbatches
    assert stats["ideal_bubble"] == pytest.approx((S - 1) / (M + S - 1))
    assert 0.0 <= stats["bubble"] < 1.0 and len(stats["busy"]) == S
    live = stats["max_live_activations"]
    if schedule == "1f1b":
        assert all(n <= min(S - s, M) for s, n in enumerate(live)), live
    else:
        assert live == [M] * S


def test_activation_bound_under_1f1b_vs_gpipe():
    stages, params, batch = model(4)
    gpipe = distribute.pipeline(stages, 8, schedule="gpipe")
    onef = distribute.pipeline(stages, 8, schedule="1f1b")
    gpipe.value_and_grad(params, batch)
    loss, _ = onef.value_and_grad(params, batch)
    assert max(onef.stats["max_live_activations"]) <= 4 < gpipe.stats["max_live_activations"][0]
    assert onef.stats["max_live_activations"] == [4, 3, 2, 1]
    # a second step reuses the compiled stages
    loss2, _ = onef.value_and_grad(params, batch)
    assert loss2 == loss


def test_dict_activations_and_a_training_loop():
    def s0(p, batch):
        return {"h": ops.tanh(batch["x"] @ p), "t": batch["t"]}

    def s1(p, a):
        return ops.reduce_mean(ops.square(a["h"] @ p - a["t"]))
    rng = np.random.default_rng(3)
    params = [rng.standard_normal((4, 5)).astype(np.float32),
              rng.standard_normal((5, 2)).astype(np.float32)]
    batch = {"x": rng.standard_normal((8, 4)).astype(np.float32),
             "t": rng.standard_normal((8, 2)).astype(np.float32)}
    pipe = distribute.pipeline([s0, s1], 4, schedule="1f1b")
    ref = [p.copy() for p in params]
    for _ in range(3):
        loss, grads = pipe.value_and_grad(params, batch)
        want_loss, want = single_device([s0, s1], ref, batch)
        np.testing.assert_allclose(loss, want_loss, **TOL)
        params = [p - 0.1 * g for p, g in zip(params, grads)]
        ref = [p - 0.1 * g for p, g in zip(ref, want)]
    for p, r in zip(params, ref):
        np.testing.assert_allclose(p, r, **TOL)


def test_errors():
    stages, params, batch = model(2)
    with pytest.raises(ValueError, match="schedule"):
        distribute.pipeline(stages, 2, schedule="interleaved")
    with pytest.raises(ValueError, match="num_microbatches"):
        distribute.pipeline(stages, 0)
    with pytest.raises(ValueError, match="cannot be split into 3"):
        distribute.pipeline(stages, 3).value_and_grad(params, batch)
    with pytest.raises(ValueError, match="1 params for 2 stages"):
        distribute.pipeline(stages, 2).value_and_grad(params[:1], batch)
    with pytest.raises(TypeError, match="float scalar"):
        distribute.pipeline([first, lambda p, a: a[0] @ p["w"]], 2).value_and_grad(params, batch)


@pytest.mark.skipif(mpirun_command() is None, reason="mpirun or mpi4py missing "
                    "(pip install 'xlapy[mpi]')")
def test_pipeline_under_mpirun():
    env = dict(os.environ, XLAPY_COLLECTIVE_TIMEOUT="60")
    done = subprocess.run([*mpirun_command(), "-n", "2", sys.executable,
                           str(Path(__file__).with_name("mpi_pipeline_worker.py"))],
                          capture_output=True, text=True, env=env, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0 ok" in done.stdout and "rank 1 ok" in done.stdout, done.stdout
