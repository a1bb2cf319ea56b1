"""DeviceMemory: a buffer the kernels read and write, viewable as numpy without copies.

On the host, "device memory" is ordinary memory with an alignment guarantee. A
DeviceMemory either owns a block of the caching allocator (`StreamExecutor.
allocate`) or wraps memory someone else owns, such as a numpy input array bound
zero-copy (`DeviceMemory.from_array`). Views from `as_array` keep the memory
alive: deallocating a DeviceMemory only drops its own reference, and an owned
block goes back to the allocator's cache when the last view is gone too.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .thread_pool import default_thread_pool


class DeviceMemory:
    """`size` bytes at `address`; `owner` is whatever keeps them alive."""
    __slots__ = ("address", "size", "_owner", "_bytes", "__weakref__")

    def __init__(self, address: int, size: int, owner=None):
        self.address = int(address)
        self.size = int(size)
        self._owner = owner
        self._bytes: np.ndarray | None = None

    @classmethod
    def from_lease(cls, lease, size: int) -> "DeviceMemory":
        """Memory owned by an allocator `Lease` (`size` may be below the block size)."""
        return cls(lease.address, size, lease)

    @classmethod
    def from_array(cls, array: np.ndarray) -> "DeviceMemory":
        """Binds a C-contiguous numpy array zero-copy (the array stays alive with it)."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"DeviceMemory.from_array: expected a numpy array, "
                            f"got {type(array).__name__}")
        if not array.flags.c_contiguous:
            raise ValueError("DeviceMemory.from_array: the array must be C-contiguous "
                             "(use numpy.ascontiguousarray first)")
        return cls(array.ctypes.data, array.nbytes, array)

    @property
    def is_null(self) -> bool:
        return self._owner is None and self.address == 0

    @property
    def opaque(self) -> ctypes.c_void_p:
        """The address as a ctypes pointer."""
        return ctypes.c_void_p(self.address)

    def _byte_view(self) -> np.ndarray:
        if self._bytes is None:
            if self.address == 0:
                raise ValueError("DeviceMemory: this memory has been deallocated")
            if isinstance(self._owner, np.ndarray):
                whole = self._owner.reshape(-1).view(np.uint8)
            else:
                # The view's base is this holder, which keeps `_owner` alive.
                whole = np.asarray(_ArrayWindow(self.address, self.size, self._owner))
            self._bytes = whole
        return self._bytes

    def as_array(self, dtype, shape) -> np.ndarray:
        """A numpy view of the first `prod(shape) * itemsize` bytes; no copy."""
        dtype = np.dtype(dtype)
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if nbytes > self.size:
            raise ValueError(f"DeviceMemory.as_array: {shape} of {dtype} needs {nbytes} bytes, "
                             f"the buffer has {self.size}")
        return self._byte_view()[:nbytes].view(dtype).reshape(shape)

    def release(self) -> None:
        """Drops this object's hold on the memory (views keep it alive on their own)."""
        self._owner = None
        self._bytes = None
        self.address = 0

    def __repr__(self):
        return f"DeviceMemory(0x{self.address:x}, {self.size} bytes)"


class _ArrayWindow:
    """Exposes raw memory to numpy through `__array_interface__`, holding its owner."""
    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address: int, size: int, owner):
        self.owner = owner
        self.__array_interface__ = {"data": (address, False), "shape": (size,),
                                    "typestr": "|u1", "version": 3}


def address_of(obj) -> int:
    """The address of a DeviceMemory, a C-contiguous numpy array, or an int address."""
    if isinstance(obj, DeviceMemory):
        if obj.address == 0 and obj.size:
            raise ValueError("memcpy: the DeviceMemory has been deallocated")
        return obj.address
    if isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            raise ValueError("memcpy: numpy arrays must be C-contiguous")
        return obj.ctypes.data
    if isinstance(obj, int):
        return obj
    raise TypeError(f"memcpy: expected DeviceMemory, numpy array or int address, "
                    f"got {type(obj).__name__}")


def size_of(obj) -> int | None:
    """The byte size of a DeviceMemory or array (None for a bare address)."""
    if isinstance(obj, DeviceMemory):
        return obj.size
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    return None


# Below this, splitting a copy across threads costs more than it saves.
_PARALLEL_COPY_BYTES = 4 << 20


def copy_bytes(dst, src, nbytes: int | None = None, pool=None) -> None:
    """Copies `nbytes` (default: the smaller known size) from `src` to `dst`.

    Large copies are cut into one contiguous chunk per thread of `pool` (the
    intra-op pool by default): one core cannot saturate DRAM bandwidth alone.
    """
    if nbytes is None:
        sizes = [s for s in (size_of(dst), size_of(src)) if s is not None]
        if not sizes:
            raise ValueError("memcpy: nbytes is required when both sides are bare addresses")
        nbytes = min(sizes)
    for side, obj in (("destination", dst), ("source", src)):
        size = size_of(obj)
        if size is not None and nbytes > size:
            raise ValueError(f"memcpy: {nbytes} bytes do not fit the {side} ({size} bytes)")
    dst_address, src_address = address_of(dst), address_of(src)
    if nbytes <= 0:
        return
    if pool is None and nbytes >= _PARALLEL_COPY_BYTES:
        pool = default_thread_pool()
    if pool is None or pool.num_threads == 1 or nbytes < _PARALLEL_COPY_BYTES:
        ctypes.memmove(dst_address, src_address, nbytes)
        return
    chunks = pool.num_threads
    bounds = [nbytes * i // chunks // 64 * 64 for i in range(chunks)] + [nbytes]
    pool.parallel_for(chunks, lambda i: ctypes.memmove(
        dst_address + bounds[i], src_address + bounds[i], bounds[i + 1] - bounds[i]))
