"""`hlo.evaluate_devices` against numpy computed by hand (issue 16).

Every collective on 1, 2, 3 and 4 devices, groups of several shapes (uneven ones
for all-reduce), cross-replica (replica_count=R), cross-partition and flattened-id
modes, variadic and tuple forms, the async pairs, collectives inside loops, the
dtypes the evaluator has, zero-size arrays; and the errors: argument counts and
shapes, a device that raises, devices that never meet.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy import hlo
from xlapy.hlo import collectives

REDUCERS = """
add {
  add.a = f32[] parameter(0)
  add.b = f32[] parameter(1)
  ROOT add.s = f32[] add(add.a, add.b)
}
"""


def reducer(name: str, op: str, t: str) -> str:
    return (f"{name} {{\n  {name}.a = {t}[] parameter(0)\n  {name}.b = {t}[] parameter(1)\n"
            f"  ROOT {name}.r = {t}[] {op}({name}.a, {name}.b)\n}}\n")


def build(body: str, header: str, comps: str = REDUCERS) -> hlo.HloModule:
    module = hlo.parse_module(f"HloModule m, {header}\n{comps}\nENTRY e {{\n{body.strip()}\n}}\n")
    hlo.verify(module)
    return module


def inputs(n: int, shape, dtype=np.float32, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return [rng.integers(0, 2, shape).astype(bool) for _ in range(n)]
    if np.dtype(dtype).kind in "iu":
        return [rng.integers(-50 if np.dtype(dtype).kind == "i" else 0, 50, shape).astype(dtype)
                for _ in range(n)]
    return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def run(module, xs) -> list[np.ndarray]:
    """Each device's single output for per-device single arguments."""
    return [out[0] for out in hlo.evaluate_devices(module, [[x] for x in xs])]


# --- all-reduce --------------------------------------------------------------------------

# (R, P, attributes, groups of devices): groups written out by hand.
ALL_REDUCE_GROUPS = [
    (1, 1, "replica_groups={}", [[0]]),
    (2, 1, "replica_groups={}", [[0, 1]]),
    (3, 1, "replica_groups={}", [[0, 1, 2]]),
    (4, 1, "replica_groups={{0,1},{2,3}}", [[0, 1], [2, 3]]),
    (4, 1, "replica_groups={{0},{1,2,3}}", [[0], [1, 2, 3]]),        # uneven: allowed
    (2, 2, "replica_groups={}", [[0, 2], [1, 3]]),                   # cross-replica
    (1, 2, "channel_id=1, replica_groups={}", [[0, 1]]),
    (1, 3, "channel_id=1, replica_groups={{0,1,2}}, use_global_device_ids=true", [[0, 1, 2]]),
    (1, 4, "channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true",
     [[0, 2], [1, 3]]),
    (1, 4, "channel_id=1, replica_groups={{3},{0,2,1}}, use_global_device_ids=true",
     [[3], [0, 2, 1]]),
    (2, 2, "channel_id=1, replica_groups={{0},{1}}", [[0, 1], [2, 3]]),   # replicas x partitions
]


@pytest.mark.parametrize("R,P,attrs,groups", ALL_REDUCE_GROUPS,
                         ids=[f"{c[0]}x{c[1]}:{c[2]}" for c in ALL_REDUCE_GROUPS])
def test_all_reduce_sum(R, P, attrs, groups):
    m = build(f"  x = f32[5,3] parameter(0)\n"
              f"  ROOT r = f32[5,3] all-reduce(x), {attrs}, to_apply=add",
              f"replica_count={R}, num_partitions={P}")
    xs = inputs(R * P, (5, 3))
    got = run(m, xs)
    for g in groups:
        want = np.sum([xs[d].astype(np.float64) for d in g], axis=0).astype(np.float32)
        for d in g:
            np.testing.assert_allclose(got[d], want, rtol=2e-7, atol=0)
            assert got[d].dtype == np.float32


@pytest.mark.parametrize("t,op,dtype,combine", [
    ("f64", "add", np.float64, lambda v: np.sum(v, axis=0)),
    ("s32", "maximum", np.int32, lambda v: np.max(v, axis=0)),
    ("s32", "add", np.int32, lambda v: np.sum(v, axis=0, dtype=np.int32)),
    ("u8", "multiply", np.uint8, lambda v: np.prod(v, axis=0, dtype=np.uint8)),
    ("pred", "or", np.bool_, lambda v: np.any(v, axis=0)),
    ("pred", "and", np.bool_, lambda v: np.all(v, axis=0)),
    ("f16", "add", np.float16, lambda v: np.sum(np.array(v, np.float64), axis=0).astype(np.float16)),
    ("f32", "minimum", np.float32, lambda v: np.min(v, axis=0)),
])
def test_all_reduce_dtypes(t, op, dtype, combine):
    m = build(f"  x = {t}[7] parameter(0)\n"
              f"  ROOT r = {t}[7] all-reduce(x), channel_id=1, replica_groups={{{{0,1,2}}}}, "
              f"use_global_device_ids=true, to_apply=red",
              "num_partitions=3", reducer("red", op, t))
    xs = inputs(3, (7,), dtype, seed=1)
    want = combine(np.stack(xs))
    for got in run(m, xs):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)


def test_all_reduce_bf16_rounds_the_sum_to_bf16():
    m = build("  x = bf16[4] parameter(0)\n"
              "  ROOT r = bf16[4] all-reduce(x), replica_groups={}, to_apply=red",
              "replica_count=2", reducer("red", "add", "bf16"))
    xs = [np.array([1, 2, 3, 4], np.float32), np.array([2 ** -8, 0.5, 256, -4], np.float32)]
    for got in run(m, xs):
        # 1 + 2^-8 rounds to 1 in bf16 (8 significant bits); 256 + 3 = 259 rounds to 260.
        np.testing.assert_array_equal(got, [1, 2.5, 260, 0])


def test_all_reduce_with_an_unrecognized_reducer_folds_in_rank_order():
    """to_apply = a - b is not a numpy reduction: ((x_r0 - x_r1) - x_r2)."""
    m = build("  x = s32[3] parameter(0)\n"
              "  ROOT r = s32[3] all-reduce(x), channel_id=1, replica_groups={{2,0,1}}, "
              "use_global_device_ids=true, to_apply=sub",
              "num_partitions=3", reducer("sub", "subtract", "s32"))
    xs = inputs(3, (3,), np.int32)
    want = (xs[2] - xs[0]) - xs[1]
    for got in run(m, xs):
        np.testing.assert_array_equal(got, want)


def test_all_reduce_max_propagates_nan_and_orders_zeros():
    m = build("  x = f32[3] parameter(0)\n"
              "  ROOT r = f32[3] all-reduce(x), replica_groups={}, to_apply=mx",
              "replica_count=2", reducer("mx", "maximum", "f32"))
    xs = [np.array([np.nan, -0.0, 1], np.float32), np.array([1, 0.0, -np.inf], np.float32)]
    got = run(m, xs)[1]
    assert np.isnan(got[0]) and got[1] == 0 and not np.signbit(got[1]) and got[2] == 1


def test_variadic_all_reduce_gives_a_tuple():
    m = build("  x = f32[4,2] parameter(0)\n  y = f32[] parameter(1)\n"
              "  ROOT r = (f32[4,2], f32[]) all-reduce(x, y), channel_id=1, "
              "replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add",
              "num_partitions=4")
    xs, ys = inputs(4, (4, 2)), inputs(4, (), seed=3)
    outs = hlo.evaluate_devices(m, [[x, y] for x, y in zip(xs, ys)])
    for out in outs:
        np.testing.assert_allclose(out[0], np.sum(xs, axis=0), rtol=1e-6)
        np.testing.assert_allclose(out[1], np.sum(ys), rtol=1e-6)


# --- all-gather, reduce-scatter, all-to-all -------------------------------------------------

@pytest.mark.parametrize("n,dim,attrs,groups", [
    (1, 0, "replica_groups={{0}}, use_global_device_ids=true", [[0]]),
    (2, 0, "replica_groups={{0,1}}, use_global_device_ids=true", [[0, 1]]),
    (3, 1, "replica_groups={{2,0,1}}, use_global_device_ids=true", [[2, 0, 1]]),
    (4, 1, "replica_groups={{0,2},{1,3}}, use_global_device_ids=true", [[0, 2], [1, 3]]),
    (4, 0, "replica_groups=[2,2]<=[4], use_global_device_ids=true", [[0, 1], [2, 3]]),
])
def test_all_gather(n, dim, attrs, groups):
    size = len(groups[0])
    out = [3, 2]
    out[dim] *= size
    m = build(f"  x = s32[3,2] parameter(0)\n"
              f"  ROOT r = s32[{out[0]},{out[1]}] all-gather(x), channel_id=1, {attrs}, "
              f"dimensions={{{dim}}}", f"num_partitions={n}")
    xs = inputs(n, (3, 2), np.int32)
    got = run(m, xs)
    for g in groups:
        for d in g:
            np.testing.assert_array_equal(got[d], np.concatenate([xs[s] for s in g], axis=dim))


def test_all_gather_cross_replica_per_partition():
    m = build("  x = f32[2] parameter(0)\n"
              "  ROOT r = f32[4] all-gather(x), replica_groups={{1,0}}, dimensions={0}",
              "replica_count=2, num_partitions=2")
    xs = inputs(4, (2,))
    got = run(m, xs)
    # replicas 1 then 0 of the same partition: devices (2, 0) and (3, 1)
    for d, (a, b) in {0: (2, 0), 2: (2, 0), 1: (3, 1), 3: (3, 1)}.items():
        np.testing.assert_array_equal(got[d], np.concatenate([xs[a], xs[b]]))


@pytest.mark.parametrize("n,dim,groups", [(1, 0, [[0]]), (2, 0, [[0, 1]]), (3, 1, [[0, 1, 2]]),
                                          (4, 0, [[1, 0], [3, 2]])])
def test_reduce_scatter(n, dim, groups):
    size = len(groups[0])
    shape = [6, 3 * size]
    out = list(shape)
    out[dim] //= size
    text = "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"
    m = build(f"  x = f32[{shape[0]},{shape[1]}] parameter(0)\n"
              f"  ROOT r = f32[{out[0]},{out[1]}] reduce-scatter(x), channel_id=1, "
              f"replica_groups={text}, use_global_device_ids=true, dimensions={{{dim}}}, "
              f"to_apply=add", f"num_partitions={n}")
    xs = inputs(n, tuple(shape))
    got = run(m, xs)
    for g in groups:
        total = np.sum([xs[d].astype(np.float64) for d in g], axis=0).astype(np.float32)
        parts = np.split(total, size, axis=dim)
        for rank, d in enumerate(g):
            np.testing.assert_allclose(got[d], parts[rank], rtol=2e-7)


@pytest.mark.parametrize("n,dim,attrs,groups", [
    (1, 0, "channel_id=1, replica_groups={{0}}", [[0]]),
    (2, 0, "channel_id=1, replica_groups={{0,1}}", [[0, 1]]),
    (3, 1, "channel_id=1, replica_groups={{0,1,2}}", [[0, 1, 2]]),
    (4, 0, "channel_id=1, replica_groups={{0,3},{2,1}}", [[0, 3], [2, 1]]),
])
def test_all_to_all_split_dimension(n, dim, attrs, groups):
    size = len(groups[0])
    shape = (2 * size, 3) if dim == 0 else (2, 3 * size)
    m = build(f"  x = s32[{shape[0]},{shape[1]}] parameter(0)\n"
              f"  ROOT r = s32[{shape[0]},{shape[1]}] all-to-all(x), {attrs}, dimensions={{{dim}}}",
              f"num_partitions={n}")
    xs = inputs(n, shape, np.int32)
    got = run(m, xs)
    for g in groups:
        for rank, d in enumerate(g):
            want = np.concatenate([np.split(xs[s], size, axis=dim)[rank] for s in g], axis=dim)
            np.testing.assert_array_equal(got[d], want)


def test_all_to_all_tuple_form():
    m = build("  x = f32[2] parameter(0)\n  y = f32[2] parameter(1)\n"
              "  ROOT r = (f32[2], f32[2]) all-to-all(x, y), channel_id=1, "
              "replica_groups={{0,1},{2,3}}", "num_partitions=4")
    xs, ys = inputs(4, (2,)), inputs(4, (2,), seed=5)
    outs = hlo.evaluate_devices(m, [[x, y] for x, y in zip(xs, ys)])
    sent = [(x, y) for x, y in zip(xs, ys)]
    for g in ([0, 1], [2, 3]):
        for rank, d in enumerate(g):
            # result j comes from member j: its operand number `rank`
            for j, src in enumerate(g):
                np.testing.assert_array_equal(outs[d][j], sent[src][rank])


def test_all_to_all_cross_replica():
    m = build("  x = f32[4] parameter(0)\n"
              "  ROOT r = f32[4] all-to-all(x), replica_groups={}, dimensions={0}",
              "replica_count=2, num_partitions=2")
    xs = inputs(4, (4,))
    got = run(m, xs)
    for g in ([0, 2], [1, 3]):           # replicas of one partition
        for rank, d in enumerate(g):
            want = np.concatenate([xs[s][2 * rank:2 * rank + 2] for s in g])
            np.testing.assert_array_equal(got[d], want)


# --- collective-permute and collective-broadcast ------------------------------------------

@pytest.mark.parametrize("n,pairs", [
    (1, [(0, 0)]), (2, [(0, 1), (1, 0)]), (3, [(0, 1), (1, 2), (2, 0)]),
    (4, [(0, 1), (1, 2)]),                    # devices 0 and 3 receive nothing: zeros
    (4, [(3, 0)]), (3, []),
])
def test_collective_permute(n, pairs):
    text = "{" + ",".join(f"{{{s},{t}}}" for s, t in pairs) + "}"
    m = build(f"  x = f32[2,3] parameter(0)\n"
              f"  ROOT r = f32[2,3] collective-permute(x), channel_id=1, "
              f"source_target_pairs={text}", f"num_partitions={n}")
    xs = inputs(n, (2, 3))
    got = run(m, xs)
    source = {t: s for s, t in pairs}
    for d in range(n):
        want = xs[source[d]] if d in source else np.zeros((2, 3), np.float32)
        np.testing.assert_array_equal(got[d], want)


def test_collective_permute_cross_replica_moves_replicas_in_each_partition():
    m = build("  x = s32[] parameter(0)\n"
              "  ROOT r = s32[] collective-permute(x), source_target_pairs={{0,1}}",
              "replica_count=2, num_partitions=2")
    got = run(m, [np.int32(v) for v in (10, 11, 12, 13)])
    assert [int(v) for v in got] == [0, 0, 10, 11]


def test_collective_permute_with_replica_and_partition_ids():
    """A ring over partitions inside each replica, fed with replica*10 + partition."""
    m = build("  r = u32[] replica-id()\n  p = u32[] partition-id()\n"
              "  ten = u32[] constant(10)\n  rt = u32[] multiply(r, ten)\n"
              "  v = u32[] add(rt, p)\n"
              "  ROOT c = u32[] collective-permute(v), channel_id=1, "
              "source_target_pairs={{0,1},{1,2},{2,0}}", "replica_count=2, num_partitions=3")
    outs = hlo.evaluate_devices(m, [[]] * 6)
    assert [int(o[0]) for o in outs] == [2, 0, 1, 12, 10, 11]


@pytest.mark.parametrize("n,groups,roots", [
    (1, "{{0}}", [0]), (2, "{{1,0}}", [1, 1]), (3, "{{2,0,1}}", [2, 2, 2]),
    (4, "{{1,0},{3,2}}", [1, 1, 3, 3]),
])
def test_collective_broadcast_sends_the_first_of_each_group(n, groups, roots):
    m = build("  x = s32[3] parameter(0)\n"
              f"  ROOT r = s32[3] collective-broadcast(x), channel_id=1, replica_groups={groups}",
              f"num_partitions={n}")
    xs = inputs(n, (3,), np.int32)
    got = run(m, xs)
    for d, root in enumerate(roots):
        np.testing.assert_array_equal(got[d], xs[root])


@pytest.mark.parametrize("t,dtype", [("f64", np.float64), ("s32", np.int32), ("pred", np.bool_),
                                     ("f16", np.float16), ("bf16", ml_dtypes.bfloat16),
                                     ("u64", np.uint64)])
def test_data_movement_collectives_keep_every_dtype(t, dtype):
    m = build(f"""
  x = {t}[4] parameter(0)
  g = {t}[8] all-gather(x), channel_id=1, replica_groups={{{{0,1}}}}, dimensions={{0}}, use_global_device_ids=true
  a = {t}[4] all-to-all(x), channel_id=2, replica_groups={{{{0,1}}}}, dimensions={{0}}
  p = {t}[4] collective-permute(x), channel_id=3, source_target_pairs={{{{1,0}}}}
  b = {t}[4] collective-broadcast(x), channel_id=4, replica_groups={{{{1,0}}}}
  ROOT r = ({t}[8], {t}[4], {t}[4], {t}[4]) tuple(g, a, p, b)""", "num_partitions=2")
    xs = inputs(2, (4,), dtype, seed=7)
    if t == "bf16":
        # few significant bits: exact in bf16
        xs = [(np.round(x.astype(np.float32) * 4) / 4).astype(dtype) for x in xs]
    outs = hlo.evaluate_devices(m, [[x] for x in xs])
    for d, (g, a, p, b) in enumerate(outs):
        for value in (g, a, p, b):
            assert value.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(g, np.concatenate(xs))
        np.testing.assert_array_equal(a, np.concatenate([xs[0][2 * d:2 * d + 2],
                                                         xs[1][2 * d:2 * d + 2]]))
        np.testing.assert_array_equal(p, xs[1] if d == 0 else np.zeros(4, dtype))
        np.testing.assert_array_equal(b, xs[1])


# --- async pairs, loops, zero sizes ------------------------------------------------------

def test_async_pairs_give_what_the_sync_ops_give():
    m = build("""
  x = f32[4] parameter(0)
  ars = f32[4] all-reduce-start(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  ard = f32[4] all-reduce-done(ars)
  ags = (f32[4], f32[8]) all-gather-start(x), channel_id=2, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
  agd = f32[8] all-gather-done(ags)
  cps = (f32[4], f32[4], u32[], u32[]) collective-permute-start(x), channel_id=3, source_target_pairs={{0,1},{1,0}}
  cpd = f32[4] collective-permute-done(cps)
  ROOT t = (f32[4], f32[8], f32[4]) tuple(ard, agd, cpd)""", "num_partitions=2")
    xs = inputs(2, (4,))
    outs = hlo.evaluate_devices(m, [[x] for x in xs])
    for d in range(2):
        np.testing.assert_allclose(outs[d][0], xs[0] + xs[1], rtol=1e-6)
        np.testing.assert_array_equal(outs[d][1], np.concatenate(xs))
        np.testing.assert_array_equal(outs[d][2], xs[1 - d])


def test_collectives_inside_a_while_loop_meet_once_per_iteration():
    body_comps = REDUCERS + """
cond {
  c.s = (s32[], f32[3]) parameter(0)
  c.i = s32[] get-tuple-element(c.s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(c.i, three), direction=LT
}

body {
  b.s = (s32[], f32[3]) parameter(0)
  b.i = s32[] get-tuple-element(b.s), index=0
  b.x = f32[3] get-tuple-element(b.s), index=1
  one = s32[] constant(1)
  j = s32[] add(b.i, one)
  y = f32[3] all-reduce(b.x), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
  z = f32[3] collective-permute(y), channel_id=2, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT t = (s32[], f32[3]) tuple(j, z)
}
"""
    m = build("  x = f32[3] parameter(0)\n  zero = s32[] constant(0)\n"
              "  init = (s32[], f32[3]) tuple(zero, x)\n"
              "  w = (s32[], f32[3]) while(init), condition=cond, body=body\n"
              "  ROOT out = f32[3] get-tuple-element(w), index=1", "num_partitions=4", body_comps)
    xs = [np.full(3, d + 1, np.float32) for d in range(4)]
    for got in run(m, xs):
        np.testing.assert_array_equal(got, np.full(3, 10 * 4 * 4, np.float32))


def test_zero_size_arrays():
    m = build("""
  x = f32[0,3] parameter(0)
  r = f32[0,3] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  g = f32[0,6] all-gather(r), channel_id=2, replica_groups={{0,1}}, dimensions={1}, use_global_device_ids=true
  t = f32[0,6] all-to-all(g), channel_id=3, replica_groups={{0,1}}, dimensions={1}
  rs = f32[0,3] reduce-scatter(t), channel_id=4, replica_groups={{0,1}}, use_global_device_ids=true, dimensions={1}, to_apply=add
  ROOT p = f32[0,3] collective-permute(rs), channel_id=5, source_target_pairs={{0,1}}""",
              "num_partitions=2")
    for got in run(m, [np.zeros((0, 3), np.float32)] * 2):
        assert got.shape == (0, 3) and got.dtype == np.float32


# --- the single-device evaluator ----------------------------------------------------------

def test_evaluate_runs_a_one_device_module_as_replica_0_partition_0():
    m = build("  x = f32[2] parameter(0)\n"
              "  r = f32[2] all-reduce(x), replica_groups={}, to_apply=add\n"
              "  i = u32[] replica-id()\n"
              "  ROOT t = (f32[2], u32[]) tuple(r, i)", "replica_count=1")
    x = np.array([1.5, -2], np.float32)
    r, i = hlo.evaluate(m, [x])
    np.testing.assert_array_equal(r, x)
    assert i == 0 and i.dtype == np.uint32


def test_evaluate_refuses_a_module_with_collectives_on_several_devices():
    m = build("  x = f32[2] parameter(0)\n"
              "  ROOT r = f32[2] all-reduce(x), replica_groups={}, to_apply=add", "replica_count=2")
    with pytest.raises(hlo.EvaluationError, match=r"module m runs on 2 devices \(replica_count=2, "
                       r"num_partitions=1\) and %r is a all-reduce: evaluate it with "
                       r"hlo.evaluate_devices"):
        hlo.evaluate(m, [np.zeros(2, np.float32)])


def test_evaluate_runs_a_several_device_module_without_collectives():
    m = build("  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)", "num_partitions=4")
    np.testing.assert_array_equal(hlo.evaluate(m, [np.ones(2, np.float32)])[0], [-1, -1])


# --- errors --------------------------------------------------------------------------------

PSUM4 = ("  x = f32[2] parameter(0)\n"
         "  ROOT r = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1,2,3}}, "
         "use_global_device_ids=true, to_apply=add")


def test_wrong_number_of_devices():
    m = build(PSUM4, "num_partitions=4")
    with pytest.raises(hlo.EvaluationError, match=r"module m runs on 4 devices \(replica_count=1, "
                       r"num_partitions=4\), got arguments for 2"):
        hlo.evaluate_devices(m, [[np.zeros(2, np.float32)]] * 2)


def test_a_device_with_wrong_arguments_is_named():
    m = build(PSUM4, "num_partitions=4")
    args = [[np.zeros(2, np.float32)]] * 4
    args[2] = [np.zeros(3, np.float32)]
    with pytest.raises(hlo.EvaluationError, match=r"device 2: argument 0 \(x\): expected shape "
                       r"\(2,\)"):
        hlo.evaluate_devices(m, args)
    args[2] = []
    with pytest.raises(hlo.EvaluationError, match="device 2: e takes 1 arguments, got 0"):
        hlo.evaluate_devices(m, args)


def test_groups_that_do_not_fit_the_devices_fail_before_running():
    m = hlo.parse_module(f"HloModule m, num_partitions=2\n{REDUCERS}\nENTRY e {{\n{PSUM4}\n}}\n")
    with pytest.raises(hlo.EvaluationError, match=r"%r \(all-reduce\): replica_groups names "
                       r"device 2, but the module has 2 devices"):
        hlo.evaluate_devices(m, [[np.zeros(2, np.float32)]] * 2)


BRANCHES = REDUCERS + """
with_psum {
  x1 = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(x1), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}

with_other_psum {
  x2 = f32[2] parameter(0)
  ROOT r2 = f32[2] all-reduce(x2), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}

without {
  ROOT x3 = f32[2] parameter(0)
}

failing {
  x4 = f32[2] parameter(0)
  ROOT boom = f32[2] custom-call(x4), custom_call_target="boom"
}
"""


def diverging(second_branch: str, timeout: float = 10.0):
    """Device 0 runs `with_psum`, device 1 `second_branch`."""
    m = build(f"""
  x = f32[2] parameter(0)
  p = u32[] partition-id()
  p32 = s32[] convert(p)
  ROOT c = f32[2] conditional(p32, x, x), branch_computations={{with_psum, {second_branch}}}""",
              "num_partitions=2", BRANCHES)
    return hlo.evaluate_devices(m, [[np.ones(2, np.float32)]] * 2, timeout=timeout)


def test_a_device_that_finishes_without_the_collective_is_reported_at_once():
    with pytest.raises(hlo.EvaluationError) as info:
        diverging("without")
    assert str(info.value) == (
        "device 0: %r (all-reduce) execution 1: device 1 finished the program "
        "without taking part (devices 0, 1 must all run it the same number of times)")


def test_a_device_that_raises_fails_the_others_and_is_named():
    with pytest.raises(hlo.EvaluationError) as info:
        diverging("failing")
    assert str(info.value) == "device 1: boom: unsupported custom-call target 'boom'"


def test_devices_waiting_on_different_collectives_time_out():
    # Whichever device gives up first is reported; the other then fails at once.
    with pytest.raises(hlo.EvaluationError, match=r"^device (0: %r |1: %r2 )"
                       r"\(all-reduce\) execution 1: timed out after 0.3 s waiting for device "
                       r"[01]$"):
        diverging("with_other_psum", timeout=0.3)


def test_outputs_are_independent_arrays():
    m = build(PSUM4.replace("all-reduce(x), channel_id=1, replica_groups={{0,1,2,3}}, "
                            "use_global_device_ids=true, to_apply=add",
                            "collective-broadcast(x), channel_id=1, replica_groups={{0,1,2,3}}"),
              "num_partitions=4")
    got = run(m, inputs(4, (2,)))
    got[1][0] = 123
    assert got[0][0] != 123 and got[2][0] != 123


def test_device_groups_are_what_the_evaluator_uses():
    """The API the backend builds on agrees with the reference on a 2x2 module:
    replicas 1 then 0, every partition of each (cross-replica-and-partition)."""
    m = build("  x = f32[2] parameter(0)\n"
              "  ROOT r = f32[8] all-gather(x), channel_id=1, replica_groups={{1,0}}, "
              "dimensions={0}", "replica_count=2, num_partitions=2")
    assert collectives.device_groups(m.entry.root, 2, 2) == ((2, 3, 0, 1),)
    xs = inputs(4, (2,))
    for got in run(m, xs):
        np.testing.assert_array_equal(got, np.concatenate([xs[2], xs[3], xs[0], xs[1]]))
