"""runtime: a StreamExecutor-style runtime for the host CPU over a thread pool.

Knows nothing about HLO; the CPU backend compiles kernels and hands them here.

    Kernel(address, name)            a JIT function `void k(void** bufs, i64 begin, i64 end)`
    LaunchDims(total, partitions)    how a launch cuts [0, total) into parallel slices
    launch(kernel, dims, buffers)    run it now, partitions on the intra-op pool
    ThreadPool(n).parallel_for(n, fn), default_thread_pool(), inter_op_thread_pool()
    get_platform().executor()        the host StreamExecutor: allocate, memcpy, streams
    Stream, Event                    in-order queues of work and the order between them
    DeviceMemory                     an aligned buffer, `as_array(dtype, shape)` zero-copy
    empty(shape, dtype)              a numpy array from the caching allocator
    empty_with_address(shape, dtype) the same and its data address (lean call paths)
    configure(...), get_options()    thread counts, the allocator's cache bound, timeouts
    Communicator                     collectives between devices (communicator.py):
      InProcessCommunicator(n)       n devices in this process, a thread each
      mpi_communicator.MpiCommunicator()  a device per MPI rank (needs mpi4py: xlapy[mpi])
    CollectiveError                  a peer failed, timed out or called something else
    profiler                         trace recording (Chrome trace-event JSON), summaries

Environment variables (read once, on first use; `configure()` overrides them in-process):
    XLAPY_INTRA_OP_THREADS       threads per kernel launch, caller included (default:
                                 usable cores; 1 = fully sequential, no worker threads)
    XLAPY_INTER_OP_THREADS       streams executing at the same time (default: cores)
    XLAPY_ALLOCATOR_CACHE_BYTES  bound on freed memory kept for reuse (default: 1 GiB
                                 or a quarter of RAM; accepts 512M, 2G; 0 = no cache)
    XLAPY_COLLECTIVE_TIMEOUT     seconds a device waits for its peers in a collective
                                 before it fails with CollectiveError (default 60)
"""
from .allocator import (CachingAllocator, Lease, default_allocator, empty,
                               empty_with_address)
from .communicator import (REDUCE_OPS, CollectiveError, Communicator,
                           PendingCollective)
from .collective_util import set_native_folds
from .config import RuntimeOptions, configure, get_options
from .inprocess_communicator import InProcessCommunicator
from .executor import (DeviceDescription, Platform, StreamExecutor, describe_host,
                              get_platform)
from .kernel import KERNEL_SIGNATURE, Kernel, LaunchDims, launch, make_buffer_table
from . import profiler
from .memory import DeviceMemory
from .stream import Event, Stream
from .thread_pool import ThreadPool, default_thread_pool, inter_op_thread_pool

__all__ = [
    "REDUCE_OPS", "CollectiveError", "Communicator", "InProcessCommunicator",
    "PendingCollective", "CachingAllocator", "DeviceDescription", "DeviceMemory", "Event", "KERNEL_SIGNATURE",
    "Kernel", "LaunchDims", "Lease", "Platform", "RuntimeOptions", "Stream", "StreamExecutor",
    "ThreadPool", "configure", "default_allocator", "default_thread_pool", "describe_host",
    "empty", "empty_with_address", "get_options", "get_platform", "inter_op_thread_pool", "launch",
    "make_buffer_table", "profiler",
]
