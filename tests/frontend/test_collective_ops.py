"""frontend.ops.collective: TF's collective ops in one SPMD program.

The HLO they lower to (groups, reducers, the module's replica_count), their numbers
against numpy for 1..4 replicas on the reference evaluator (hlo.evaluate_devices,
through a MirroredStrategy with backend="interpreter"), and TF's argument checks.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from xlapy.frontend import distribute, fori_loop, jit_compile, ops, value_and_grad
from xlapy.frontend.autodiff import NoGradientError
from xlapy.frontend.ops import collective

from .util import assert_close

MERGE = {"Add": np.add, "Mul": np.multiply, "Min": np.minimum, "Max": np.maximum}


def strategy(n):
    return distribute.MirroredStrategy(num_replicas=n, backend="interpreter")


def per_replica_inputs(n, shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        values = [rng.uniform(-2, 2, shape).astype(dtype) for _ in range(n)]
    elif np.dtype(dtype).kind == "u":
        values = [rng.integers(0, 4, shape).astype(dtype) for _ in range(n)]
    else:
        values = [rng.integers(-4, 5, shape).astype(dtype) for _ in range(n)]
    return values


def expected_reduce(values, n, g, merge, final):
    out = []
    for r in range(n):
        members = values[(r // g) * g:(r // g) * g + g]
        acc = members[0]
        for m in members[1:]:
            acc = MERGE[merge](acc, m)
        if final == "Div":
            if np.dtype(acc.dtype).kind == "f":
                acc = acc / acc.dtype.type(g)
            else:                                   # truncation toward zero, as HLO divides
                acc = (np.sign(acc) * (np.abs(acc) // g)).astype(acc.dtype)
        out.append(acc.astype(values[0].dtype))
    return out


# --- lowering --------------------------------------------------------------------------

def test_lowering_has_cross_replica_collectives_with_consecutive_groups():
    s = strategy(4)

    def f(x):
        a = collective.all_reduce(x, 4, group_key=1, instance_key=1)
        b = collective.all_reduce(x, 2, group_key=2, instance_key=1, merge_op="Max",
                                  final_op="Div")
        c = collective.all_gather(x, 2, group_key=2, instance_key=2)
        d = collective.broadcast_send(x, x.shape, x.dtype, 4, group_key=1, instance_key=2)
        return a, b, c, d

    text = s.lower(f, args=(np.zeros((2, 3), np.float32),)).as_hlo_text()
    assert text.startswith("HloModule f, replica_count=4")
    assert re.search(r"all-reduce\(%arg0\), to_apply=%add_f32, replica_groups=\{\{0,1,2,3\}\}",
                     text)
    assert re.search(r"all-reduce\(%arg0\), to_apply=%maximum_f32, "
                     r"replica_groups=\{\{0,1\},\{2,3\}\}", text)
    assert re.search(r"f32\[4,3\] all-gather\(%arg0\), dimensions=\{0\}, "
                     r"replica_groups=\{\{0,1\},\{2,3\}\}", text)
    assert "collective-broadcast(%arg0), replica_groups={{0,1,2,3}}" in text
    assert "divide(" in text and "channel_id" not in text


def test_plain_jit_is_one_replica():
    @jit_compile(backend="interpreter")
    def f(x):
        return collective.all_reduce(x, 1, 1, 1)
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(f(x), x)
    assert "replica_count" not in f.lower(x).as_hlo_text()


# --- numbers -----------------------------------------------------------------------------

@pytest.mark.parametrize("n, g", [(1, 1), (2, 1), (2, 2), (3, 3), (3, 1), (4, 2), (4, 4)])
@pytest.mark.parametrize("merge", list(MERGE))
@pytest.mark.parametrize("final", ["Id", "Div"])
def test_all_reduce_numbers(n, g, merge, final):
    values = per_replica_inputs(n, (2, 3), np.float32, seed=n * 10 + g)

    def f(x):
        return collective.all_reduce(x, g, 7, 1, merge_op=merge, final_op=final)
    out = strategy(n).run(f, args=(distribute.PerReplica(values),))
    for r, (got, want) in enumerate(zip(out.values, expected_reduce(values, n, g, merge,
                                                                    final))):
        assert_close(got, want, what=f"replica {r}")


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64, np.uint8,
                                   np.int8])
@pytest.mark.parametrize("merge, final", [("Add", "Id"), ("Max", "Id"), ("Add", "Div"),
                                          ("Mul", "Id")])
def test_all_reduce_dtypes(dtype, merge, final):
    n = 4
    values = per_replica_inputs(n, (5,), dtype, seed=3)
    out = strategy(n).run(lambda x: collective.all_reduce(x, 4, 1, 1, merge, final),
                          args=(distribute.PerReplica(values),))
    for got, want in zip(out.values, expected_reduce(values, n, 4, merge, final)):
        assert got.dtype == np.dtype(dtype)
        assert_close(got, want)


@pytest.mark.parametrize("n, g", [(1, 1), (2, 2), (3, 3), (4, 2), (4, 4), (4, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_all_gather_numbers(n, g, dtype):
    values = [np.arange(6).reshape(3, 2).astype(dtype) * (r + 1) for r in range(n)]
    out = strategy(n).run(lambda x: collective.all_gather(x, g, 1, 1),
                          args=(distribute.PerReplica(values),))
    for r, got in enumerate(out.values):
        start = (r // g) * g
        np.testing.assert_array_equal(got, np.concatenate(values[start:start + g], axis=0))


@pytest.mark.parametrize("n, g", [(1, 1), (2, 2), (3, 3), (4, 2), (4, 4)])
def test_broadcast_send_and_recv_give_the_roots_value(n, g):
    values = per_replica_inputs(n, (2, 2), np.float64, seed=5)

    def f(x):
        sent = collective.broadcast_send(x, (2, 2), "float64", g, 3, 1)
        received = collective.broadcast_recv((2, 2), np.float64, g, 3, 1)
        return sent, received
    sent, received = strategy(n).run(f, args=(distribute.PerReplica(values),))
    for r in range(n):
        root = values[(r // g) * g]
        np.testing.assert_array_equal(sent.values[r], root)
        np.testing.assert_array_equal(received.values[r], root)


def test_zero_size_arrays():
    n = 2
    values = [np.zeros((0, 3), np.float32)] * n

    def f(x):
        return (collective.all_reduce(x, 2, 1, 1), collective.all_gather(x, 2, 1, 2),
                collective.broadcast_send(x, (0, 3), "float32", 2, 1, 3))
    for out in strategy(n).run(f, args=(distribute.PerReplica(values),)):
        for got in out.values:
            assert got.size == 0 and got.shape[1] == 3


def test_collectives_in_a_loop_meet_once_per_iteration():
    n = 3
    values = [np.full((2,), r + 1, np.float32) for r in range(n)]

    def f(x):
        # each iteration is one all-reduce over the replicas: x <- sum(x) (the same op,
        # executed 3 times, one instance per iteration as in a TF while loop)
        return fori_loop(0, 3, lambda i, v: collective.all_reduce(v, 3, 1, 1), x)
    out = strategy(n).run(f, args=(distribute.PerReplica(values),))
    for got in out.values:
        np.testing.assert_array_equal(got, np.full((2,), 6 * 9, np.float32))


# --- errors --------------------------------------------------------------------------------

def run_error(fn, n=4, x=None):
    x = np.zeros((2, 3), np.float32) if x is None else x
    strategy(n).lower(fn, args=(x,))


@pytest.mark.parametrize("fn, kind, message", [
    (lambda x: collective.all_reduce(x, 4, 1, 1, merge_op="Sum"), ValueError,
     "merge_op must be one of Add, Mul, Min, Max, got 'Sum'"),
    (lambda x: collective.all_reduce(x, 4, 1, 1, final_op="Mean"), ValueError,
     "final_op must be one of Id, Div, got 'Mean'"),
    (lambda x: collective.all_reduce(x, 3, 1, 1), ValueError,
     "group_size 3 does not divide the 4 replicas"),
    (lambda x: collective.all_reduce(x, 0, 1, 1), ValueError,
     "group_size must be at least 1"),
    (lambda x: (collective.all_reduce(x, 4, 1, 1), collective.all_reduce(x, 2, 1, 2)),
     ValueError, "group_key 1 has group_size 4 in this function, got 2"),
    (lambda x: (collective.all_reduce(x, 4, 1, 1), collective.all_gather(x, 4, 1, 1)),
     ValueError, "instance_key 1 of group_key 1 is already used by an all_reduce"),
    (lambda x: collective.broadcast_recv((2, 3), "float32", 4, 1, 1), ValueError,
     "no broadcast_send with group_key 1 and instance_key 1 came before it"),
    (lambda x: (collective.broadcast_send(x, (2, 3), "float32", 4, 1, 1),
                collective.broadcast_recv((3, 2), "float32", 4, 1, 1)), ValueError,
     "broadcast_recv: shape [3, 2] differs from the sent tensor's shape [2, 3]"),
    (lambda x: (collective.broadcast_send(x, (2, 3), "float32", 4, 1, 1),
                collective.broadcast_recv((2, 3), "int32", 4, 1, 1)), TypeError,
     "broadcast_recv: dtype int32 differs from the sent tensor's dtype float32"),
    (lambda x: collective.broadcast_send(x, (2, 2), "float32", 4, 1, 1), ValueError,
     "broadcast_send: shape [2, 2] differs from t's shape [2, 3]"),
    (lambda x: collective.all_reduce(x > 0, 4, 1, 1), TypeError,
     "all_reduce: t must be a floating-point or integer tensor, got bool[2,3]"),
    (lambda x: collective.all_gather(x[0, 0], 4, 1, 1), ValueError,
     "all_gather: t must have at least one dimension"),
    (lambda x: collective.all_reduce(x, 4, ops.constant(1), 1), TypeError,
     "group_key must be a Python int known at trace time"),
    (lambda x: collective.all_reduce(x, 4.0, 1, 1), TypeError,
     "group_size must be an int, got 4.0"),
])
def test_bad_arguments_are_one_line_errors(fn, kind, message):
    with pytest.raises(kind) as info:
        run_error(fn)
    first_line = str(info.value).splitlines()[0]
    assert message in first_line


def test_group_larger_than_one_outside_a_strategy_says_what_to_do():
    @jit_compile(backend="interpreter")
    def f(x):
        return collective.all_reduce(x, 2, 1, 1)
    with pytest.raises(ValueError, match="does not divide the 1 replica this function runs "
                                         "on .*run it with a strategy"):
        f(np.zeros(3, np.float32))


def test_no_gradient_through_a_collective():
    def loss(x):
        return ops.reduce_sum(collective.all_reduce(x, 2, 1, 1))

    def f(x):
        return value_and_grad(loss)(x)
    with pytest.raises(NoGradientError, match="differentiate the per-replica loss"):
        strategy(2).lower(f, args=(np.zeros(3, np.float32),))
