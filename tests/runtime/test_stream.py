"""Streams and events: in-order execution, cross-stream ordering, error propagation."""
import threading
import time

import numpy as np
import pytest

from xlapy import runtime
from xlapy.runtime import Event, Kernel, LaunchDims, Stream, ThreadPool, make_buffer_table
from tests.runtime.llvm_kernels import add_one_kernel


@pytest.fixture
def executor():
    return runtime.get_platform().executor()


def sleeper(log, tag, seconds=0.0):
    def callback():
        if seconds:
            time.sleep(seconds)
        log.append(tag)
    return callback


@pytest.mark.parametrize("inline", [False, True])
def test_one_stream_runs_work_in_order(executor, inline):
    stream = executor.create_stream(inline=inline)
    log = []
    for i in range(50):
        stream.then_host_callback(sleeper(log, i, 0.002 if i % 10 == 0 else 0))
    stream.block_host_until_done()
    assert log == list(range(50))
    assert stream.query()


def test_launches_on_one_stream_see_each_others_results(executor):
    # x -> +1 -> +1 -> +1, each launch reading the previous one's output.
    stream = executor.create_stream()
    a = np.zeros(1000, np.float32)
    b = np.empty_like(a)
    forward = make_buffer_table([a.ctypes.data, b.ctypes.data])
    back = make_buffer_table([b.ctypes.data, a.ctypes.data])
    for i in range(10):
        stream.launch(add_one_kernel(), LaunchDims(1000, 3), forward if i % 2 == 0 else back)
    stream.block_host_until_done()
    assert (a == 10).all()


def test_stream_runs_work_off_the_host_thread(executor):
    stream = executor.create_stream()
    started, release, where = threading.Event(), threading.Event(), []
    stream.then_host_callback(lambda: (started.set(), release.wait(5)))
    stream.then_host_callback(lambda: where.append(threading.current_thread()))
    assert started.wait(5)                   # running while the host goes on
    assert not stream.query()
    release.set()
    stream.block_host_until_done()
    assert where and where[0] is not threading.current_thread()


def test_event_orders_work_across_streams(executor):
    producer, consumer = executor.create_stream(), executor.create_stream()
    log, event = [], Event()
    gate = threading.Event()
    producer.then_host_callback(lambda: gate.wait(5))
    producer.then_host_callback(sleeper(log, "produce"))
    producer.record_event(event)
    consumer.wait_event(event)
    consumer.then_host_callback(sleeper(log, "consume"))
    time.sleep(0.02)
    assert log == [] and not event.query()    # the consumer waits for the producer
    gate.set()
    consumer.block_host_until_done()
    assert log == ["produce", "consume"]
    event.wait()
    assert event.query()


def test_waits_do_not_hold_a_worker_even_with_one_inter_op_thread():
    # With a single worker, a blocked stream must give it back, or the producer that
    # would release it never runs.
    pool = ThreadPool(1, workers=1, name="one-worker")
    consumer = Stream(inter_op_pool=pool)
    producer = Stream(inter_op_pool=pool)
    event, log = Event(), []
    producer.record_event(event)             # recorded, but the wait below is enqueued first
    consumer.wait_event(event)
    consumer.then_host_callback(sleeper(log, "after"))
    consumer.block_host_until_done()
    producer.block_host_until_done()
    assert log == ["after"]


def test_waiting_on_an_unrecorded_event_is_a_no_op(executor):
    stream = executor.create_stream()
    stream.wait_event(Event())
    stream.block_host_until_done()
    Event().wait()


def test_error_in_a_kernel_surfaces_at_sync_and_the_stream_recovers(executor):
    stream = executor.create_stream()
    boom = RuntimeError("kernel exploded")

    def bad_kernel(buffers, begin, end):
        if begin == 0:
            raise boom

    skipped = []
    stream.launch(Kernel.from_callable(bad_kernel), LaunchDims(8, 4), None)
    stream.then_host_callback(lambda: skipped.append("ran"))   # after the error: skipped
    with pytest.raises(RuntimeError) as info:
        stream.block_host_until_done()
    assert info.value is boom
    assert skipped == []
    stream.block_host_until_done()                              # reported once
    x = np.arange(16, dtype=np.float32)
    y = np.zeros_like(x)
    stream.launch(add_one_kernel(), LaunchDims(16, 2), make_buffer_table([x.ctypes.data,
                                                                          y.ctypes.data]))
    stream.block_host_until_done()
    assert (y == x + 1).all()


@pytest.mark.parametrize("inline", [False, True])
def test_error_in_a_host_callback_surfaces_at_sync(executor, inline):
    stream = executor.create_stream(inline=inline)
    stream.then_host_callback(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        stream.block_host_until_done()
    log = []
    stream.then_host_callback(sleeper(log, "ok"))
    stream.block_host_until_done()
    assert log == ["ok"]


def test_error_travels_through_an_event(executor):
    failing, waiting = executor.create_stream(), executor.create_stream()
    event = Event()
    failing.then_host_callback(lambda: {}["missing"])
    failing.record_event(event)
    waiting.wait_event(event)
    with pytest.raises(KeyError):
        waiting.block_host_until_done()
    with pytest.raises(KeyError):
        event.wait()
    with pytest.raises(KeyError):
        failing.block_host_until_done()


def test_work_enqueued_after_a_sync_point_is_not_poisoned(executor):
    stream = executor.create_stream()
    gate = threading.Event()
    stream.then_host_callback(lambda: gate.wait(5))
    stream.then_host_callback(lambda: 1 / 0)
    errors = []

    def sync():
        try:
            stream.block_host_until_done()
        except ZeroDivisionError as exc:
            errors.append(exc)

    syncer = threading.Thread(target=sync)
    syncer.start()
    time.sleep(0.02)
    log = []
    stream.then_host_callback(sleeper(log, "later"))          # after the sync marker
    gate.set()
    syncer.join(5)
    stream.block_host_until_done()
    assert len(errors) == 1 and log == ["later"]


def test_two_streams_run_at_the_same_time(executor):
    if runtime.get_options().inter_op_threads < 2:
        pytest.skip("needs two inter-op threads")
    barrier = threading.Barrier(2, timeout=5)
    streams = [executor.create_stream() for _ in range(2)]
    for s in streams:
        s.then_host_callback(barrier.wait)   # both must be running for either to pass
    for s in streams:
        s.block_host_until_done()


def test_memcpy_on_a_stream_and_executor_synchronize(executor):
    stream = executor.create_stream()
    src = np.arange(1 << 21, dtype=np.float32)                # 8 MiB: a parallel copy
    device = executor.allocate(src.nbytes)
    back = np.zeros_like(src)
    executor.memcpy_host_to_device_async(stream, device, src)
    executor.memcpy_device_to_host_async(stream, back, device)
    executor.synchronize()
    np.testing.assert_array_equal(back, src)
    with pytest.raises(TypeError, match="memcpy"):
        stream.memcpy("dst", src)


def test_bad_launch_arguments_are_rejected_at_enqueue(executor):
    stream = executor.create_stream()
    with pytest.raises(TypeError, match="Kernel"):
        stream.launch(lambda *a: None, LaunchDims(1), None)
    with pytest.raises(TypeError, match="LaunchDims"):
        stream.launch(add_one_kernel(), (4, 2), None)
    with pytest.raises(TypeError, match="expected a runtime.Event"):
        stream.wait_event(threading.Event())


@pytest.mark.parametrize("inline", [False, True])
def test_synchronizing_a_stream_from_its_own_work_is_an_error_not_a_hang(executor, inline):
    stream = executor.create_stream(inline=inline)
    stream.then_host_callback(stream.block_host_until_done)
    with pytest.raises(RuntimeError, match="wait for itself"):
        stream.block_host_until_done()


def test_streams_work_in_a_forked_child(executor):
    import os
    stream = executor.create_stream()
    stream.then_host_callback(lambda: None)
    stream.block_host_until_done()              # the parent's pools are running
    pid = os.fork()
    if pid == 0:                                 # child: fresh pools, or this would hang
        try:
            child_stream = runtime.get_platform().executor().create_stream()
            log = []
            child_stream.then_host_callback(lambda: log.append(1))
            event = Event()
            child_stream.record_event(event)
            event.wait(timeout=5)                # needs a worker: no host-side stealing
            runtime.empty(1000)
            os._exit(0 if log == [1] else 1)
        except BaseException:                    # noqa: BLE001
            os._exit(2)
    deadline = time.time() + 10
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    pytest.fail("the forked child hung")
