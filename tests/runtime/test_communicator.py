"""The in-process communicator: every collective against numpy, for 1-4 devices, groups of
several shapes, every dtype, zero-size buffers, asynchronous starts, and failures (a device
that raises, never arrives or calls something else) that end every device with a clear
error instead of a hang."""
from __future__ import annotations

import functools
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from xlapy import runtime
from xlapy.backend_cpu import collective_fold
from xlapy.runtime import CollectiveError, InProcessCommunicator
from xlapy.runtime import inprocess_communicator
from xlapy.runtime.inprocess_communicator import BLOCK_BYTES, SMALL_BYTES

JOIN = 60.0         # seconds a test waits for its device threads: a hang fails, never stalls

DTYPES = ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64", "complex64", "complex128"]
# Element counts: empty, one, odd, above the one-meeting all-reduce, several blocks.
SIZES = [0, 1, 7, SMALL_BYTES // 4 + 3, 3 * BLOCK_BYTES // 8 + 5]
UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
         "and": np.bitwise_and, "or": np.bitwise_or}

# Partitions of the devices into groups, per device count (order inside a group matters).
PARTITIONS = {
    1: [[(0,)]],
    2: [[(0, 1)], [(1, 0)], [(0,), (1,)]],
    3: [[(0, 1, 2)], [(2, 0, 1)], [(0,), (1, 2)], [(0, 2), (1,)]],
    4: [[(0, 1, 2, 3)], [(0, 1), (2, 3)], [(0, 2), (1, 3)], [(3, 1), (2, 0)],
        [(0,), (1, 2, 3)], [(1,), (0,), (3,), (2,)]],
}
CASES = [(n, p) for n, parts in PARTITIONS.items() for p in parts]


def case_id(case):
    n, partition = case
    return f"{n}dev-" + "|".join(",".join(map(str, g)) for g in partition)


def group_of(partition, device):
    return next(g for g in partition if device in g)


def make(dtype, size, seed, positive=False):
    """Values that keep sums and products exact enough to compare (small magnitudes)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == bool:
        return rng.random(size) < 0.5
    if dtype.kind in "iu":
        low = 1 if positive else (0 if dtype.kind == "u" else -3)
        return rng.integers(low, 4, size).astype(dtype)
    values = rng.integers(1, 4, size) * (1 if positive else rng.choice([-1, 1], size))
    if dtype.kind == "c":
        return (values + 1j * rng.integers(-2, 3, size)).astype(dtype)
    return (values * 0.5).astype(dtype)


def run(comm, fn):
    return comm.run(fn, timeout=JOIN)


def fold(op, arrays):
    combine = op if callable(op) else UFUNC[op]
    return functools.reduce(lambda a, b: combine(a, b), arrays)


@pytest.fixture(params=["native", "native-nontemporal", "numpy"])
def fold_path(request, monkeypatch):
    """The all-reduce's three ways to fold: backend_cpu's native one-pass fold (cached
    stores, or non-temporal ones from the first byte), and numpy's two passes."""
    if request.param == "numpy":
        runtime.set_native_folds(None)
    elif request.param == "native-nontemporal":
        monkeypatch.setattr(inprocess_communicator, "NONTEMPORAL_BYTES", 0)
    yield request.param
    runtime.set_native_folds(collective_fold.provide)


# --- every collective against numpy ------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_all_reduce_groups(case, op):
    n, partition = case
    comm = InProcessCommunicator(n)
    sends = [make("float32", 1000, d) for d in range(n)]

    def device(d):
        recv = np.empty_like(sends[d])
        comm.all_reduce(d, group_of(partition, d), sends[d], recv, op)
        return recv

    results = run(comm, device)
    for d in range(n):
        expected = fold(op, [sends[m] for m in group_of(partition, d)])
        np.testing.assert_array_equal(results[d], expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_all_reduce_dtypes_and_sizes(dtype, size, fold_path):
    ops = ["sum", "prod", "min", "max", "and", "or"]
    if np.dtype(dtype).kind == "f":
        ops.remove("and"), ops.remove("or")
    if np.dtype(dtype).kind == "c":
        ops = ["sum", "prod"]
    n = 3
    comm = InProcessCommunicator(n)
    sends = [make(dtype, size, d) for d in range(n)]

    def device(d):
        out = {}
        for op in ops:
            out[op] = np.full(size, 99, dtype) if dtype != "bool" else np.zeros(size, bool)
            comm.all_reduce(d, (0, 1, 2), sends[d], out[op], op)
        return out

    results = run(comm, device)
    for op in ops:
        # numpy folds in the same order, so results are bit-identical, also in float16.
        expected = fold(op, sends)
        for d in range(n):
            assert results[d][op].dtype == np.dtype(dtype)
            np.testing.assert_array_equal(results[d][op], expected, err_msg=f"{op} on {d}")


@pytest.mark.parametrize("size", [5, SMALL_BYTES // 4 + 3, 3 * BLOCK_BYTES // 4 + 1])
def test_all_reduce_in_place(size, fold_path):
    n = 4
    comm = InProcessCommunicator(n)
    sends = [make("float64", size, d) for d in range(n)]
    buffers = [s.copy() for s in sends]

    def device(d):
        comm.all_reduce(d, None, buffers[d], buffers[d], "sum")

    run(comm, device)
    for d in range(n):
        np.testing.assert_array_equal(buffers[d], fold("sum", sends))


@pytest.mark.parametrize("size", [SMALL_BYTES // 4 + 3, 3 * BLOCK_BYTES // 4 + 1])
def test_all_reduce_some_members_in_place(size, fold_path):
    # Each member writes its reduced chunk into every member's recv: a member whose recv is
    # its send must not see its send change before every member has read it.
    n = 3
    comm = InProcessCommunicator(n)
    sends = [make("float64", size, d) for d in range(n)]
    buffers = [s.copy() for s in sends]
    outs = [np.full(size, np.nan) for _ in range(n)]

    def device(d):
        recv = buffers[d] if d == 1 else outs[d]
        comm.all_reduce(d, None, buffers[d], recv, "sum")
        return recv

    results = run(comm, device)
    for d in range(n):
        np.testing.assert_array_equal(results[d], fold("sum", sends), err_msg=f"device {d}")
    for d in (0, 2):
        np.testing.assert_array_equal(buffers[d], sends[d])     # sends left alone


def test_all_reduce_results_are_bit_identical_across_members(fold_path):
    # Rounding differs with the order of a float sum: every member must get the same bits.
    n = 3
    comm = InProcessCommunicator(n)
    rng = np.random.default_rng(1)
    sends = [(rng.standard_normal(200_001) * 10.0 ** rng.integers(-8, 8, 200_001))
             .astype(np.float32) for _ in range(n)]

    def device(d):
        recv = np.empty_like(sends[d])
        comm.all_reduce(d, None, sends[d], recv)
        return recv

    results = run(comm, device)
    assert all(np.array_equal(r.view(np.uint32), results[0].view(np.uint32)) for r in results)
    np.testing.assert_array_equal(results[0], (sends[0] + sends[1]) + sends[2])


@pytest.mark.parametrize("op", ["max", "min"])
def test_all_reduce_max_min_propagate_nan(op):
    comm = InProcessCommunicator(2)
    sends = [np.array([np.nan, 1.0, 2.0, -0.0], np.float32),
             np.array([1.0, np.nan, 3.0, 0.0], np.float32)]

    def device(d):
        recv = np.empty(4, np.float32)
        comm.all_reduce(d, None, sends[d], recv, op)
        return recv

    for result in run(comm, device):
        assert np.isnan(result[:2]).all()
        assert result[2] == (3.0 if op == "max" else 2.0)


@pytest.mark.parametrize("op", ["max", "min"])
def test_large_all_reduce_max_min_propagate_nan(op, fold_path):
    # Above SMALL_BYTES, where the native fold runs: numpy's minimum/maximum semantics.
    n, size = 3, SMALL_BYTES // 4 + 77
    comm = InProcessCommunicator(n)
    sends = [make("float32", size, d) for d in range(n)]
    sends[0][::5] = np.nan
    sends[2][3::7] = np.nan
    sends[1][1::9] = -0.0
    sends[2][1::9] = 0.0

    def device(d):
        recv = np.empty(size, np.float32)
        comm.all_reduce(d, None, sends[d], recv, op)
        return recv

    expected = fold(op, sends)
    for result in run(comm, device):
        assert result.tobytes() == expected.tobytes()


@pytest.mark.parametrize("offsets", [(1, 1, 1), (0, 1, 3), (3, 0, 0)])
def test_all_reduce_into_buffers_at_any_alignment(offsets, fold_path):
    # The native fold stores 64-byte vectors; non-temporal stores need every recv aligned
    # alike, else the fold falls back to cached stores. Both must give the same bits.
    n, size = 3, SMALL_BYTES // 8 + 13
    comm = InProcessCommunicator(n)
    sends = [make("float64", size + 8, d)[offsets[d]:offsets[d] + size] for d in range(n)]
    recvs = [np.full(size + 8, np.nan)[offsets[d]:offsets[d] + size] for d in range(n)]

    def device(d):
        comm.all_reduce(d, None, sends[d], recvs[d], "sum")

    run(comm, device)
    for d in range(n):
        np.testing.assert_array_equal(recvs[d], fold("sum", sends), err_msg=f"device {d}")


def test_the_native_fold_is_the_default_with_backend_cpu(monkeypatch):
    # Importing xlapy installs backend_cpu's folds; a large sum takes the one-pass path.
    calls = []
    real = inprocess_communicator.run_native_fold
    monkeypatch.setattr(inprocess_communicator, "run_native_fold",
                        lambda *a: (calls.append(a[4]), real(*a)))
    comm = InProcessCommunicator(2)
    size = SMALL_BYTES // 2                 # int32: twice the one-meeting size
    sends = [make("int32", size, d) for d in range(2)]

    def device(d):
        recv = np.empty_like(sends[d])
        comm.all_reduce(d, None, sends[d], recv)
        return recv

    for result in run(comm, device):
        np.testing.assert_array_equal(result, sends[0] + sends[1])
    assert sorted(calls) == [0, size // 2]                  # each member its chunk


def test_all_reduce_with_a_callable_reducer():
    # A reducer no engine has: combine(a, b) is called on pieces, from several threads.
    def logaddexp(a, b):
        return np.logaddexp(a, b)

    n = 4
    comm = InProcessCommunicator(n)
    sends = [make("float64", 100_003, d) for d in range(n)]

    def device(d):
        recv = np.empty_like(sends[d])
        comm.all_reduce(d, (0, 1, 2, 3), sends[d], recv, logaddexp)
        return recv

    expected = fold(np.logaddexp, sends)
    for result in run(comm, device):
        np.testing.assert_array_equal(result, expected)


def test_multidimensional_buffers_are_flat():
    comm = InProcessCommunicator(2)
    sends = [np.arange(12, dtype=np.int32).reshape(3, 4) * (d + 1) for d in range(2)]

    def device(d):
        summed = np.empty((3, 4), np.int32)
        comm.all_reduce(d, None, sends[d], summed)
        gathered = np.empty((2, 3, 4), np.int32)
        comm.all_gather(d, None, sends[d], gathered)
        return summed, gathered

    for summed, gathered in run(comm, device):
        np.testing.assert_array_equal(summed, sends[0] + sends[1])
        np.testing.assert_array_equal(gathered, np.stack(sends))


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtype", ["bool", "int16", "float16", "complex128"])
def test_all_gather(case, dtype):
    n, partition = case
    comm = InProcessCommunicator(n)
    sends = [make(dtype, 5, d) for d in range(n)]
    empty = [make(dtype, 0, d) for d in range(n)]

    def device(d):
        group = group_of(partition, d)
        recv = np.empty(5 * len(group), dtype)
        comm.all_gather(d, group, sends[d], recv)
        nothing = np.empty(0, dtype)
        comm.all_gather(d, group, empty[d], nothing)
        return recv

    results = run(comm, device)
    for d in range(n):
        np.testing.assert_array_equal(
            results[d], np.concatenate([sends[m] for m in group_of(partition, d)]))


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtype,op", [("int32", "sum"), ("float64", "prod"), ("bool", "or"),
                                      ("uint8", "max"), ("float16", "sum")])
def test_reduce_scatter(case, dtype, op):
    n, partition = case
    comm = InProcessCommunicator(n)
    chunk = 6
    sends = {d: make(dtype, chunk * len(group_of(partition, d)), d) for d in range(n)}

    def device(d):
        recv = np.empty(chunk, dtype)
        comm.reduce_scatter(d, group_of(partition, d), sends[d], recv, op)
        return recv

    results = run(comm, device)
    for d in range(n):
        group = group_of(partition, d)
        i = group.index(d)
        expected = fold(op, [sends[m] for m in group])[i * chunk:(i + 1) * chunk]
        np.testing.assert_array_equal(results[d], expected)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_all_to_all(case):
    n, partition = case
    comm = InProcessCommunicator(n)

    def chunk_for(source, target):   # what `source` sends to `target`
        return np.array([source * 10 + target, source, target], np.int64)

    def device(d):
        group = group_of(partition, d)
        sends = [chunk_for(d, t) for t in group]
        recvs = [np.empty(3, np.int64) for _ in group]
        comm.all_to_all(d, group, sends, recvs)
        return recvs

    results = run(comm, device)
    for d in range(n):
        for k, source in enumerate(group_of(partition, d)):
            np.testing.assert_array_equal(results[d][k], chunk_for(source, d))


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("pattern", ["shift", "swap_pairs", "partial", "self"])
def test_permute(n, pattern):
    if pattern == "shift":
        target = {d: (d + 1) % n for d in range(n)}
    elif pattern == "swap_pairs":
        target = {d: d ^ 1 for d in range(n) if d ^ 1 < n}
    elif pattern == "partial":          # only device 0 sends, to the last device
        target = {0: n - 1}
    else:
        target = {d: d for d in range(n)}
    source = {t: s for s, t in target.items()}
    comm = InProcessCommunicator(n)
    sends = [np.full(4, d + 1, np.float32) for d in range(n)]

    def device(d):
        recv = np.full(4, -7, np.float32)
        for _ in range(3):          # repeated sends between the same pair stay in order
            comm.permute(d, target.get(d), source.get(d), sends[d], recv)
        return recv

    results = run(comm, device)
    for d in range(n):
        expected = sends[source[d]] if d in source else np.full(4, -7, np.float32)
        np.testing.assert_array_equal(results[d], expected)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_broadcast(case):
    n, partition = case
    comm = InProcessCommunicator(n)
    roots = {g: g[-1] for g in partition}       # the last member: not always group[0]

    def device(d):
        group = group_of(partition, d)
        buf = np.full(9, d, np.complex64)
        comm.broadcast(d, group, roots[group], buf)
        return buf

    results = run(comm, device)
    for d in range(n):
        np.testing.assert_array_equal(results[d],
                                      np.full(9, roots[group_of(partition, d)], np.complex64))


def test_barrier_holds_every_device_until_all_arrive():
    n = 3
    comm = InProcessCommunicator(n)
    arrived, seen = [], {}

    def device(d):
        time.sleep(0.05 * d)
        arrived.append(d)
        comm.barrier(d)
        seen[d] = len(arrived)

    run(comm, device)
    assert seen == {0: 3, 1: 3, 2: 3}


def test_check_same_program():
    comm = InProcessCommunicator(3)
    run(comm, lambda d: comm.check_same_program(d, "module-abc"))

    comm = InProcessCommunicator(3)
    with pytest.raises(CollectiveError) as info:
        run(comm, lambda d: comm.check_same_program(d, "module-xyz" if d == 1 else "module-abc"))
    message = str(info.value)
    assert "different programs" in message
    assert "devices 0, 2: 'module-abc'" in message and "device 1: 'module-xyz'" in message


def test_bfloat16_if_installed():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    comm = InProcessCommunicator(2)
    sends = [np.arange(10).astype(bf16) * (d + 1) for d in range(2)]

    def device(d):
        recv = np.empty(10, bf16)
        comm.all_reduce(d, None, sends[d], recv, "sum")
        gathered = np.empty(20, bf16)
        comm.all_gather(d, None, sends[d], gathered)
        return recv, gathered

    for recv, gathered in run(comm, device):
        np.testing.assert_array_equal(recv.astype(np.float32),
                                      (sends[0] + sends[1]).astype(np.float32))
        np.testing.assert_array_equal(gathered.astype(np.float32),
                                      np.concatenate(sends).astype(np.float32))


# --- asynchronous starts -------------------------------------------------------------------

def test_started_collectives_overlap_the_caller_and_keep_program_order():
    n = 2
    comm = InProcessCommunicator(n)
    sends = [make("float32", 50_000, d) for d in range(n)]

    def device(d):
        summed = np.empty_like(sends[d])
        pending = comm.start_all_reduce(d, None, sends[d], summed, "sum")
        maxed = np.empty_like(sends[d])
        second = comm.start_all_reduce(d, None, sends[d], maxed, "max")
        gathered = np.empty(2 * 3, np.float32)
        # A blocking call issued while two are outstanding runs after them.
        comm.all_gather(d, None, sends[d][:3], gathered)
        assert pending.done() and second.done()
        pending.wait()
        second.wait()
        return summed, maxed, gathered

    for summed, maxed, gathered in run(comm, device):
        np.testing.assert_array_equal(summed, sends[0] + sends[1])
        np.testing.assert_array_equal(maxed, np.maximum(sends[0], sends[1]))
        np.testing.assert_array_equal(gathered, np.concatenate([s[:3] for s in sends]))


def test_every_collective_can_be_started():
    n = 2
    comm = InProcessCommunicator(n)

    def device(d):
        x = np.full(4, d + 1, np.int32)
        out = {name: np.zeros(size, np.int32) for name, size in
               [("ar", 4), ("ag", 8), ("rs", 2), ("pm", 4)]}
        a2a = [np.zeros(2, np.int32) for _ in range(n)]
        bc = x.copy()
        started = [comm.start_all_reduce(d, None, x, out["ar"]),
                   comm.start_all_gather(d, None, x, out["ag"]),
                   comm.start_reduce_scatter(d, None, x, out["rs"]),
                   comm.start_all_to_all(d, None, [x[:2], x[2:]], a2a),
                   comm.start_permute(d, 1 - d, 1 - d, x, out["pm"]),
                   comm.start_broadcast(d, None, 1, bc)]
        for pending in started:
            pending.wait()
        return out, a2a, bc

    (out0, a2a0, bc0), (out1, a2a1, bc1) = run(comm, device)
    np.testing.assert_array_equal(out0["ar"], [3] * 4)
    np.testing.assert_array_equal(out1["ag"], [1] * 4 + [2] * 4)
    np.testing.assert_array_equal(out1["rs"], [3, 3])
    np.testing.assert_array_equal(out0["pm"], [2] * 4)
    np.testing.assert_array_equal(a2a1[0], [1, 1])
    np.testing.assert_array_equal(bc0, [2] * 4)


# --- failures: clear errors, never a hang ------------------------------------------------------

def collect(comm, fn):
    """Runs fn on every device; returns (results, errors) without raising."""
    n = comm.num_devices
    results, errors = [None] * n, [None] * n

    def body(d):
        try:
            results[d] = fn(d)
        except BaseException as exc:  # noqa: BLE001
            errors[d] = exc
            comm.abort(d, exc)

    threads = [threading.Thread(target=body, args=(d,), daemon=True) for d in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN)
    assert not any(t.is_alive() for t in threads), "a device hangs"
    return results, errors


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_device_that_raises_fails_every_other_device_naming_it(n):
    comm = InProcessCommunicator(n, timeout=JOIN)
    failing = n - 1

    def device(d):
        x = np.ones(100_000, np.float32)
        comm.all_reduce(d, None, x, np.empty_like(x))
        if d == failing:
            raise ValueError("boom in the kernel")
        comm.all_reduce(d, None, x, np.empty_like(x))   # the others wait here
        comm.barrier(d)

    start = time.monotonic()
    _, errors = collect(comm, device)
    assert time.monotonic() - start < JOIN / 2       # the abort ends the wait, not the timeout
    assert isinstance(errors[failing], ValueError)
    for d in range(n - 1):
        assert isinstance(errors[d], CollectiveError)
        assert errors[d].device == failing
        assert f"device {failing} failed: ValueError: boom in the kernel" in str(errors[d])
        assert isinstance(errors[d].cause, ValueError)


def test_run_reraises_the_failing_devices_own_error():
    comm = InProcessCommunicator(3)

    def device(d):
        if d == 1:
            raise KeyError("missing input")
        comm.barrier(d)

    with pytest.raises(KeyError, match="missing input"):
        comm.run(device, timeout=JOIN)
    # The communicator stays failed.
    with pytest.raises(CollectiveError, match="device 1 failed: KeyError"):
        comm.barrier(0)


def test_a_device_that_never_arrives_times_out_naming_it():
    comm = InProcessCommunicator(3, timeout=0.3)

    def device(d):
        if d == 2:
            return                       # skips the collective: a bug, not a crash
        x = np.ones(8, np.float64)
        comm.all_reduce(d, None, x, np.empty_like(x))

    start = time.monotonic()
    _, errors = collect(comm, device)
    assert time.monotonic() - start < 10
    assert errors[2] is None
    for d in (0, 1):
        assert isinstance(errors[d], CollectiveError)
        assert "for device(s) 2" in str(errors[d]) and "0.3 s" in str(errors[d])


def test_the_timeout_comes_from_the_runtime_option(monkeypatch):
    monkeypatch.setenv("XLAPY_COLLECTIVE_TIMEOUT", "12.5")
    monkeypatch.setattr(runtime.config, "_options", None)
    assert InProcessCommunicator(2).timeout == 12.5
    monkeypatch.setattr(runtime.config, "_options", None)


def test_a_permute_nobody_answers_times_out():
    comm = InProcessCommunicator(2, timeout=0.2)

    def device(d):
        if d == 0:
            comm.permute(0, None, 1, None, np.empty(3, np.float32))

    _, errors = collect(comm, device)
    assert isinstance(errors[0], CollectiveError) and "for device(s) 1" in str(errors[0])


def test_devices_calling_different_collectives_fail_with_both_calls_named():
    comm = InProcessCommunicator(2, timeout=JOIN)

    def device(d):
        x = np.ones(6, np.float32)
        if d == 0:
            comm.all_reduce(d, None, x, np.empty_like(x))
        else:
            comm.all_gather(d, None, x, np.empty(12, np.float32))

    _, errors = collect(comm, device)
    assert all(isinstance(e, CollectiveError) for e in errors)
    message = str(errors[0])
    assert "disagree" in message and "all_reduce(float32[6], sum)" in message
    assert "all_gather(float32[6])" in message


def test_mismatched_sizes_fail_every_member():
    comm = InProcessCommunicator(2, timeout=JOIN)

    def device(d):
        x = np.ones(6 + d, np.float32)
        comm.all_reduce(d, None, x, np.empty_like(x))

    _, errors = collect(comm, device)
    assert all(isinstance(e, CollectiveError) for e in errors)
    assert "float32[6]" in str(errors[0]) and "float32[7]" in str(errors[0])


def test_a_reducer_that_raises_fails_the_others():
    comm = InProcessCommunicator(2, timeout=JOIN)

    def reducer(a, b):
        if threading.current_thread().name.endswith("-1"):
            raise ArithmeticError("reducer broke")
        return a + b

    def device(d):
        x = np.ones(SMALL_BYTES, np.float32)
        comm.all_reduce(d, None, x, np.empty_like(x), reducer)

    threads_named = comm.run  # device threads are named xlapy-device-<d>
    with pytest.raises(ArithmeticError, match="reducer broke"):
        threads_named(device, timeout=JOIN)
    assert "device 1 failed: ArithmeticError: reducer broke" in str(comm.failure)


@pytest.mark.parametrize("call,message", [
    (lambda c, x: c.all_reduce(0, (1, 2), x, x.copy()), "does not contain device 0"),
    (lambda c, x: c.all_reduce(0, (0, 0), x, x.copy()), "names a device twice"),
    (lambda c, x: c.all_reduce(0, (0, 5), x, x.copy()), r"device\(s\) \[5\] out of range"),
    (lambda c, x: c.all_reduce(0, "ab", x, x.copy()), "sequence of device ids"),
    (lambda c, x: c.all_reduce(7, None, x, x.copy()), "device 7 is not run by this process"),
    (lambda c, x: c.all_reduce(0, None, x, x.astype(np.float64)), "differ"),
    (lambda c, x: c.all_reduce(0, None, x, x.copy(), "and"), "needs bool or integer"),
    (lambda c, x: c.all_reduce(0, None, x, x.copy(), "mean"), "unknown reduction 'mean'"),
    (lambda c, x: c.all_reduce(0, None, x[::2], x[:2].copy()), "C-contiguous"),
    (lambda c, x: c.all_reduce(0, None, x, x[1:]), "differ"),
    (lambda c, x: c.all_reduce(0, None, x[1:], x[:-1]), "overlap"),
    (lambda c, x: c.all_reduce(0, None, x.tolist(), x), "must be a numpy array"),
    (lambda c, x: c.all_gather(0, None, x, x.copy()), "must hold 3 x send"),
    (lambda c, x: c.reduce_scatter(0, None, x, x.copy()), "must hold 3 x recv"),
    (lambda c, x: c.all_to_all(0, None, [x], [x.copy()]), "needs 3 send and recv chunks"),
    (lambda c, x: c.permute(0, 3, None, x, x.copy()), "send_to must be a device id"),
    (lambda c, x: c.broadcast(0, (0, 1), 2, x), "root 2 is not in group"),
    (lambda c, x: c.all_reduce(0, None, np.ones(2, complex), np.ones(2, complex), "max"),
     "not defined for complex"),
])
def test_bad_arguments_are_one_line_errors(call, message):
    comm = InProcessCommunicator(3)
    x = np.arange(4, dtype=np.float32)
    with pytest.raises((ValueError, TypeError), match=message) as info:
        call(comm, x)
    assert "\n" not in str(info.value)
    assert comm.failure is None           # bad arguments are the caller's error, nothing broke


def test_bad_construction():
    with pytest.raises(ValueError, match="num_devices must be an integer >= 1"):
        InProcessCommunicator(0)
    with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
        InProcessCommunicator(2, timeout=0)


def test_the_module_imports_without_mpi4py_until_used():
    # runtime must import where mpi4py is absent: only MpiCommunicator() needs it.
    script = ("import sys; sys.modules['mpi4py'] = None\n"
              "from xlapy.runtime import mpi_communicator\n"
              "try:\n    mpi_communicator.MpiCommunicator()\n"
              "except ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert "MpiCommunicator needs mpi4py: pip install 'xlapy[mpi]'" in done.stdout, done.stderr
