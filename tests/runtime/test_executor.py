"""The host platform: device description, DeviceMemory, synchronous copies."""
import gc

import numpy as np
import pytest

from xlapy import runtime
from xlapy.runtime.executor import describe_host, vector_width_from_flags
from xlapy.runtime.memory import DeviceMemory


def test_platform_has_one_host_executor():
    platform = runtime.get_platform()
    assert platform is runtime.get_platform() and platform.device_count == 1
    assert platform.executor(0) is platform.executor()
    with pytest.raises(ValueError, match="no device 1"):
        platform.executor(1)


def test_description_reads_the_cpu():
    desc = runtime.get_platform().executor().description
    assert desc.cores >= 1 and desc.name
    flags = open("/proc/cpuinfo").read()
    if " avx512f" in flags:
        assert desc.vector_width_bits == 512 and desc.has("avx512f")


@pytest.mark.parametrize("flags,bits", [({"avx512f", "avx2"}, 512), ({"avx", "sse2"}, 256),
                                        ({"sse2"}, 128), ({"asimd"}, 128), (set(), 64)])
def test_vector_width_from_flags(flags, bits):
    assert vector_width_from_flags(flags) == bits


def test_description_of_a_missing_cpuinfo_is_still_usable(tmp_path):
    desc = describe_host(str(tmp_path / "none"))
    assert desc.name == "unknown CPU" and desc.cores >= 1


def test_allocate_view_copy_and_deallocate():
    executor = runtime.get_platform().executor()
    memory = executor.allocate(4 * 100, alignment=128)
    assert memory.address % 128 == 0 and memory.size == 400
    view = memory.as_array(np.float32, (10, 10))
    executor.memcpy_host_to_device(memory, np.arange(100, dtype=np.float32).reshape(10, 10))
    assert view[3, 4] == 34                                     # the view sees the copy
    out = np.empty(100, np.float32)
    executor.memcpy_device_to_host(out, memory)
    np.testing.assert_array_equal(out, np.arange(100))
    with pytest.raises(ValueError, match="needs 404 bytes"):
        memory.as_array(np.float32, 101)
    with pytest.raises(ValueError, match="do not fit"):
        executor.memcpy_host_to_device(memory, np.zeros(101, np.float32))
    executor.deallocate(memory)
    assert view.sum() == sum(range(100))                        # the view kept it alive
    with pytest.raises(ValueError, match="deallocated"):
        memory.as_array(np.float32, 1)


def test_deallocated_memory_returns_to_the_cache_when_views_die():
    allocator = runtime.CachingAllocator(1 << 30)
    executor = runtime.StreamExecutor(allocator=allocator)
    memory = executor.allocate(1 << 20)
    view = memory.as_array(np.uint8, 1 << 20)
    executor.deallocate(memory)
    assert allocator.stats()["in_use_bytes"] > 0
    del view
    gc.collect()
    assert allocator.stats()["in_use_bytes"] == 0


def test_device_memory_binds_numpy_arrays_zero_copy():
    a = np.arange(12, dtype=np.int64)
    memory = DeviceMemory.from_array(a)
    assert memory.address == a.ctypes.data and memory.size == a.nbytes
    memory.as_array(np.int64, (3, 4))[1, 1] = -1
    assert a[5] == -1
    with pytest.raises(ValueError, match="C-contiguous"):
        DeviceMemory.from_array(a[::2])
