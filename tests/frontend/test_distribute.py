"""frontend.distribute: strategies, the replica context, bucketed all-reduce of pytrees and
gradients, and data-parallel training equal to one replica on the global batch.

Numbers are checked against numpy on the reference evaluator (backend="interpreter",
hlo.evaluate_devices); tests/frontend/test_distribute_backend.py runs the CPU backend.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from xlapy.frontend import distribute, jit_compile, ops
from xlapy.frontend.distribute import PerReplica

from .util import assert_close


def strategy(n, **options):
    return distribute.MirroredStrategy(num_replicas=n, backend="interpreter", **options)


# --- distribute_batch and run ------------------------------------------------------------

def test_distribute_batch_splits_axis_0_of_every_leaf():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    y = np.arange(6, dtype=np.int32)
    xs, ys = strategy(3).distribute_batch((x, y))
    assert isinstance(xs, PerReplica) and len(xs.values) == 3
    for r in range(3):
        np.testing.assert_array_equal(xs.values[r], x[2 * r:2 * r + 2])
        np.testing.assert_array_equal(ys.values[r], y[2 * r:2 * r + 2])


@pytest.mark.parametrize("value, message", [
    (np.zeros((10, 2)), "distribute_batch: has 10 rows on axis 0, not divisible by the 4 "
                        "replicas"),
    ((np.zeros((8, 2)), np.zeros(6)), "leaf 1 has 6 rows on axis 0, not divisible by the 4"),
    (np.float32(1), "distribute_batch: is a scalar; the batch is split along axis 0"),
])
def test_distribute_batch_errors(value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        strategy(4).distribute_batch(value)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_run_gives_each_replica_its_value_and_shares_plain_arrays(n):
    s = strategy(n)
    x = np.arange(4 * n, dtype=np.float32).reshape(n * 2, 2)
    w = np.float32(3)

    def f(x, w):
        ctx = distribute.get_replica_context()
        return {"y": x * w, "id": ctx.replica_id_in_sync_group,
                "n": ctx.num_replicas_in_sync}
    out = s.run(f, args=(s.distribute_batch(x), w))
    for r in range(n):
        np.testing.assert_array_equal(out["y"].values[r], x[2 * r:2 * r + 2] * 3)
        assert out["id"].values[r] == r and out["id"].values[r].dtype == np.int32
        assert out["n"].values[r] == n
    assert s.experimental_local_results(out["y"]) == out["y"].values


def test_run_traces_once_per_signature():
    s = strategy(2)
    calls = []

    def f(x):
        calls.append(1)
        return x + 1
    for _ in range(3):
        s.run(f, args=(s.distribute_batch(np.zeros((4, 2), np.float32)),))
    assert len(calls) == 1


def test_run_errors():
    s = strategy(2)
    with pytest.raises(ValueError, match="replica 1: .*shape \\[3\\].*same shapes and dtypes"):
        s.run(lambda x: x, args=(PerReplica([np.zeros(2), np.zeros(3)]),))
    with pytest.raises(ValueError, match="argument leaf 0 is a PerReplica of 3 values; this "
                                         "process runs 2 replicas"):
        s.run(lambda x: x, args=(PerReplica([np.zeros(2)] * 3),))
    with pytest.raises(ValueError, match="num_replicas must be a positive int, got 0"):
        distribute.MirroredStrategy(num_replicas=0)
    with pytest.raises(ValueError, match="bucket_bytes must be a non-negative int"):
        strategy(2, bucket_bytes=-1)


# --- reduce and the replica context -----------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_reduce_sum_and_mean(n):
    s = strategy(n)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((2 * n, 3)).astype(np.float32)
    xs = s.distribute_batch(x)
    parts = x.reshape(n, 2, 3)
    assert_close(s.reduce("SUM", xs), parts.sum(0))
    assert_close(s.reduce("MEAN", xs), parts.mean(0))
    assert_close(s.reduce("SUM", xs, axis=0), x.sum(0))
    assert_close(s.reduce("MEAN", xs, axis=0), x.mean(0))
    assert_close(s.reduce(distribute.ReduceOp.MEAN, xs, axis=None), parts.mean(0))
    tree = s.reduce("SUM", {"a": xs, "b": np.float32(2)})     # a plain value on every replica
    assert_close(tree["a"], parts.sum(0))
    assert_close(tree["b"], np.float32(2 * n))
    with pytest.raises(ValueError, match="reduce_op must be 'SUM' or 'MEAN', got 'MAX'"):
        s.reduce("MAX", xs)


@pytest.mark.parametrize("bucket_bytes", [0, 16, 1 << 20])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_all_reduce_of_a_pytree_packs_and_unpacks_exactly(n, bucket_bytes):
    """Mixed shapes and dtypes; integers make any packing mistake an exact mismatch."""
    s = strategy(n, bucket_bytes=bucket_bytes)
    rng = np.random.default_rng(7)

    def make(r):
        return {"a": rng.integers(-50, 50, (3, 4)).astype(np.int32),
                "b": [rng.integers(-9, 9, ()).astype(np.int32),
                      rng.standard_normal(5).astype(np.float64)],
                "c": rng.integers(0, 9, (2, 1, 3)).astype(np.int64),
                "d": np.zeros((0, 2), np.float32),
                "e": rng.integers(-50, 50, (7,)).astype(np.int32)}
    values = [make(r) for r in range(n)]
    leaves = {k: PerReplica([v[k] for v in values]) for k in ("a", "c", "d", "e")}
    b0 = PerReplica([v["b"][0] for v in values])
    b1 = PerReplica([v["b"][1] for v in values])

    def f(a, b0, b1, c, d, e):
        tree = {"a": a, "b": [b0, b1], "c": c, "d": d, "e": e}
        return (distribute.get_replica_context().all_reduce("SUM", tree),
                distribute.get_replica_context().all_reduce("MEAN", tree))
    args = (leaves["a"], b0, b1, leaves["c"], leaves["d"], leaves["e"])
    total, mean = s.run(f, args=args)
    for r in range(n):
        for key in ("a", "c", "e"):
            want = sum(v[key] for v in values)
            got = total[key].values[r]
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            # ops.divide of integers is TF's truediv: float64 for 32- and 64-bit ones
            want_type = np.float32 if want.dtype.itemsize <= 2 else np.float64
            assert mean[key].values[r].dtype == want_type
            assert_close(mean[key].values[r], (want / n).astype(want_type))
        np.testing.assert_array_equal(total["b"][0].values[r], sum(v["b"][0] for v in values))
        assert_close(total["b"][1].values[r], sum(v["b"][1] for v in values))
        assert total["d"].values[r].shape == (0, 2)
    text = s.lower(f, args=args).as_hlo_text()
    starts = re.findall(r"= (\w+)\[(\d+)\] all-reduce-start", text)
    sizes = sorted(starts)
    if bucket_bytes == 0:       # one per non-empty leaf, per all_reduce call
        assert len(starts) == 2 * 5
    elif bucket_bytes == 1 << 20:   # one per dtype, per call: s32 (12+1+7), f64 5, s64 6
        assert sizes == sorted([("s32", "20"), ("f64", "5"), ("s64", "6")] * 2)
    else:   # 16 bytes: a leaf of 8 bytes or more goes alone, unpacked; the s32 scalar
        # waits in the open bucket for the end of the call
        assert sizes == sorted([("s32", "12"), ("f64", "5"), ("s64", "6"), ("s32", "7"),
                                ("s32", "1")] * 2)
        assert "concatenate" not in text


def test_replica_context_outside_a_strategy():
    ctx = distribute.get_replica_context()
    assert ctx.num_replicas_in_sync == 1
    with pytest.raises(RuntimeError, match="inside the function given to strategy.run"):
        ctx.all_reduce("SUM", np.zeros(2))

    @jit_compile(backend="interpreter")
    def f(x):
        c = distribute.get_replica_context()
        return c.all_reduce("MEAN", x), c.replica_id_in_sync_group
    y, rid = f(np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(y, np.arange(3, dtype=np.float32))
    assert rid == 0


# --- gradients in buckets -------------------------------------------------------------------

def mlp_loss(params, x, y):
    h = ops.tanh(x @ params["w0"] + params["b0"])
    out = h @ params["w1"] + params["b1"]
    return ops.reduce_mean(ops.square(out - y))


def mlp_data(batch=8, seed=0):
    rng = np.random.default_rng(seed)
    params = {"w0": rng.standard_normal((5, 6)).astype(np.float32) * 0.5,
              "b0": rng.standard_normal(6).astype(np.float32) * 0.1,
              "w1": rng.standard_normal((6, 3)).astype(np.float32) * 0.5,
              "b1": np.zeros(3, np.float32)}
    return params, rng.standard_normal((batch, 5)).astype(np.float32), \
        rng.standard_normal((batch, 3)).astype(np.float32)


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("bucket_bytes", [0, 64, None])
def test_gradients_are_the_global_batch_gradients(n, bucket_bytes):
    params, x, y = mlp_data()
    s = strategy(n, bucket_bytes=bucket_bytes)

    def step(params, x, y):
        return distribute.value_and_grad(mlp_loss)(params, x, y)
    loss, grads = s.run(step, args=(params, *s.distribute_batch((x, y))))
    from xlapy.frontend import value_and_grad
    want_loss, want = jit_compile(value_and_grad(mlp_loss), backend="interpreter")(params, x, y)
    for r in range(n):
        for k in params:
            assert_close(grads[k].values[r], want[k], scale=4, what=k)
    local = [float(v) for v in loss.values]          # the value stays per replica
    assert_close(np.float32(np.mean(local)), want_loss)


def test_bucket_starts_land_inside_the_backward_pass():
    """With small buckets, the last layer's gradients are all-reduced before the first
    layer's gradient is computed (the -start is in the trace right after its bucket's
    last gradient); every -done comes after every -start."""
    params, x, y = mlp_data()
    s = strategy(2, bucket_bytes=64)

    def step(params, x, y):
        return distribute.grad(mlp_loss)(params, x, y)
    text = s.lower(step, args=(params, *s.distribute_batch((x, y)))).as_hlo_text()
    lines = [line.strip() for line in text.splitlines()]
    starts = [i for i, line in enumerate(lines) if "all-reduce-start(" in line]
    dones = [i for i, line in enumerate(lines) if "all-reduce-done(" in line]
    w0_grad = [i for i, line in enumerate(lines) if re.match(r"%dot\S* = f32\[5,6\] dot", line)]
    # w1 (72 B, at least half a bucket) goes alone as soon as it exists, w0 (120 B) too;
    # [b1 12 B, b0 24 B] never fills, and starts at the end
    assert len(starts) == len(dones) == 3 and len(w0_grad) == 1
    assert starts[0] < w0_grad[0]          # an early bucket overlaps the rest of backward
    assert max(starts) < min(dones)
    # the strategy's program after the CPU pipeline keeps the pairs
    compiled = s.compile(step, args=(params, *s.distribute_batch((x, y)))).as_hlo_text()
    assert compiled.count("all-reduce-start(") == len(starts)


def test_grad_errors():
    with pytest.raises(RuntimeError, match="call it inside the function given to strategy.run"):
        distribute.value_and_grad(mlp_loss)(*mlp_data())
    with pytest.raises(ValueError, match="reduce_op must be 'SUM' or 'MEAN'"):
        distribute.value_and_grad(mlp_loss, reduce_op="max")


def test_sum_gradients():
    params, x, y = mlp_data()
    s = strategy(2)

    def step(params, x, y):
        return distribute.grad(mlp_loss, reduce_op="SUM")(params, x, y)
    mean = s.run(lambda p, x, y: distribute.grad(mlp_loss)(p, x, y),
                 args=(params, *s.distribute_batch((x, y))))
    total = s.run(step, args=(params, *s.distribute_batch((x, y))))
    for k in params:
        assert_close(total[k].values[0], 2 * mean[k].values[0])


# --- training ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def example():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "examples" / "train_mlp_distributed.py"
    spec = importlib.util.spec_from_file_location("example_train_mlp_distributed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("n", [1, 2, 4])
def test_training_matches_one_replica_on_the_global_batch(example, n):
    losses, single = example.main(steps=20, backend="interpreter", replicas=n,
                                  bucket_bytes=512, verbose=False)
    assert losses[-1] < losses[0]
    np.testing.assert_allclose(losses, single, rtol=2e-5, atol=1e-6)


def test_example_prints_both_loss_curves(example, capsys):
    example.main(steps=3, backend="interpreter", replicas=2, print_every=1)
    out = capsys.readouterr().out
    assert "MirroredStrategy: 2 replicas, global batch 128 (64 per replica)" in out
    assert "loss, 2 replicas" in out and "loss, 1 replica" in out
    assert "largest relative difference of the loss curves over 3 steps" in out
