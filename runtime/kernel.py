"""Kernels, launch dimensions, and the launch itself.

The kernel ABI shared with the CPU backend is one C signature for every kernel:

    void kernel(void** buffers, int64_t begin, int64_t end)

`buffers` is the array of buffer addresses the kernel reads and writes (its
parameters, outputs and temporaries, in the order the backend assigned), and
`[begin, end)` is this call's share of the kernel's outermost parallel
dimension. A launch with `LaunchDims(total, partitions)` cuts `[0, total)` into
`partitions` contiguous, near-equal slices and calls the kernel once per
non-empty slice, the slices running in parallel on the intra-op thread pool.
"""
from __future__ import annotations

import ctypes

from .thread_pool import ThreadPool, default_thread_pool

# ctypes drops the GIL for the duration of a foreign call, which is what lets
# several partitions (and several streams) run native code at the same time.
KERNEL_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class Kernel:
    """A JIT-compiled function with the kernel ABI, callable from Python.

    `Kernel(address, name)` wraps a function pointer (e.g. from the JIT's symbol
    lookup); whoever owns the JIT engine must keep it alive as long as the kernel.
    `Kernel.from_callable(fn)` wraps a Python function with the same arguments
    instead: tests and host-side fallbacks use it, and an exception it raises
    propagates like any Python exception (a ctypes callback would swallow it).
    """
    __slots__ = ("address", "name", "_call")

    def __init__(self, address: int, name: str = ""):
        if not isinstance(address, int) or address <= 0:
            raise ValueError(f"Kernel {name!r}: address must be a positive int, got {address!r}")
        self.address = address
        self.name = name
        self._call = KERNEL_SIGNATURE(address)

    @classmethod
    def from_callable(cls, fn, name: str = "") -> "Kernel":
        """A kernel whose body is `fn(buffers_address, begin, end)`, run as Python."""
        if not callable(fn):
            raise TypeError(f"Kernel.from_callable {name!r}: {fn!r} is not callable")
        kernel = cls.__new__(cls)
        kernel.address = 0
        kernel.name = name or getattr(fn, "__name__", "")
        kernel._call = fn
        return kernel

    def __call__(self, buffers: int, begin: int, end: int) -> None:
        self._call(buffers, begin, end)

    def __repr__(self):
        where = f"0x{self.address:x}" if self.address else "python"
        return f"Kernel({self.name or '?'} at {where})"


class LaunchDims:
    """How one launch is cut: `partitions` contiguous slices of `[0, total)`.

    Slice i is `[total * i // partitions, total * (i + 1) // partitions)`, so sizes
    differ by at most one. Empty slices (more partitions than work) are dropped;
    `slices` is computed once, so relaunching with the same dims costs nothing.
    """
    __slots__ = ("total", "partitions", "slices")

    def __init__(self, total: int, partitions: int = 1):
        if not isinstance(total, int) or total < 0:
            raise ValueError(f"LaunchDims: total must be an integer >= 0, got {total!r}")
        if not isinstance(partitions, int) or partitions < 1:
            raise ValueError(f"LaunchDims: partitions must be an integer >= 1, got {partitions!r}")
        self.total = total
        self.partitions = partitions
        bounds = [total * i // partitions for i in range(partitions + 1)]
        self.slices = tuple((b, e) for b, e in zip(bounds, bounds[1:]) if e > b)

    def __eq__(self, other):
        return (isinstance(other, LaunchDims)
                and (self.total, self.partitions) == (other.total, other.partitions))

    def __hash__(self):
        return hash((self.total, self.partitions))

    def __repr__(self):
        return f"LaunchDims(total={self.total}, partitions={self.partitions})"


def buffers_address(buffers) -> int:
    """The address of a `void*` array: a ctypes array/pointer, an int, or None (no buffers)."""
    if isinstance(buffers, int):
        return buffers
    if buffers is None:
        return 0
    if isinstance(buffers, ctypes.Array):
        return ctypes.addressof(buffers)
    if isinstance(buffers, (ctypes._Pointer, ctypes.c_void_p)):
        return ctypes.cast(buffers, ctypes.c_void_p).value or 0
    raise TypeError(f"launch: buffers must be a ctypes array of void*, a pointer or an int "
                    f"address, got {type(buffers).__name__}")


def make_buffer_table(addresses) -> ctypes.Array:
    """A ctypes `void*[n]` holding `addresses` (ints), ready to pass as `buffers`."""
    addresses = list(addresses)
    return (ctypes.c_void_p * len(addresses))(*addresses)


def launch(kernel: Kernel, dims: LaunchDims, buffers, pool: ThreadPool | None = None) -> None:
    """Runs `kernel` over all slices of `dims` and returns when every slice is done.

    One slice runs right here on the calling thread, with no pool involved: tiny
    kernels pay only the ctypes call. Several slices go to the intra-op pool (the
    default one unless `pool` is given); the first exception is re-raised.
    """
    address = buffers_address(buffers)
    slices = dims.slices
    if len(slices) == 1:
        begin, end = slices[0]
        kernel(address, begin, end)
        return
    if not slices:
        return
    if pool is None:
        pool = default_thread_pool()
    call = kernel._call
    pool.parallel_for(len(slices), lambda i: call(address, *slices[i]))
