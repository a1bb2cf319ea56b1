"""ThreadPool: parallel_for covers every index once, uses the workers, re-raises errors."""
import threading
import time

import pytest

from xlapy.runtime import ThreadPool, default_thread_pool, inter_op_thread_pool
from xlapy.runtime import config


@pytest.fixture(scope="module")
def pool():
    pool = ThreadPool(3, name="test-pool")
    yield pool
    pool.shutdown()


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 100])
def test_parallel_for_runs_each_index_exactly_once(pool, n):
    seen = []
    lock = threading.Lock()

    def body(i):
        with lock:
            seen.append(i)

    pool.parallel_for(n, body)
    assert sorted(seen) == list(range(n))


def test_parallel_for_uses_workers_and_the_caller(pool):
    threads = set()
    barrier = threading.Barrier(3, timeout=5)

    def body(i):
        threads.add(threading.current_thread().name)
        barrier.wait()       # only passes if three threads run bodies at the same time

    pool.parallel_for(3, body)
    assert threading.current_thread().name in threads
    assert len(threads) == 3


def test_parallel_for_reraises_the_original_exception(pool):
    boom = ValueError("index 5 failed")

    def body(i):
        if i == 5:
            raise boom

    with pytest.raises(ValueError) as info:
        pool.parallel_for(20, body)
    assert info.value is boom
    pool.parallel_for(4, lambda i: None)        # still usable


def test_nested_parallel_for_on_the_same_pool_does_not_deadlock(pool):
    total = []
    lock = threading.Lock()

    def inner(j):
        with lock:
            total.append(j)

    pool.parallel_for(6, lambda i: pool.parallel_for(5, inner))
    assert len(total) == 30


def test_many_threads_share_one_pool(pool):
    results = {}

    def caller(t):
        out = [0] * 50
        for _ in range(20):
            pool.parallel_for(50, lambda i: out.__setitem__(i, out[i] + 1))
        results[t] = out

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert all(results[t] == [20] * 50 for t in range(6))


def test_one_thread_pool_is_sequential_on_the_caller():
    pool = ThreadPool(1)
    assert pool.num_workers == 0
    names = []
    pool.parallel_for(4, lambda i: names.append(threading.current_thread().name))
    assert names == [threading.current_thread().name] * 4
    ran = []
    pool.schedule(lambda: ran.append(1))          # no worker: runs right away
    assert ran == [1]


def test_schedule_runs_on_a_worker(pool):
    done = threading.Event()
    where = []
    pool.schedule(lambda: (where.append(threading.current_thread().name), done.set()))
    assert done.wait(5)
    assert where[0].startswith("test-pool")


def test_bad_thread_count_is_a_clear_error():
    with pytest.raises(ValueError, match="num_threads"):
        ThreadPool(0)


def test_configure_resizes_the_default_pools():
    before = config.get_options()
    try:
        config.configure(intra_op_threads=1, inter_op_threads=1)
        assert default_thread_pool().num_workers == 0
        assert inter_op_thread_pool().num_workers == 1
        config.configure(intra_op_threads=3)
        assert default_thread_pool().num_threads == 3
    finally:
        config.configure(intra_op_threads=before.intra_op_threads,
                         inter_op_threads=before.inter_op_threads)
    assert default_thread_pool().num_threads == before.intra_op_threads


def test_a_dropped_pool_stops_its_workers():
    pool = ThreadPool(3, name="short-lived")
    del pool
    deadline = time.time() + 5
    while any(t.name.startswith("short-lived") for t in threading.enumerate()):
        assert time.time() < deadline, "workers of a collected pool kept running"
        time.sleep(0.01)
