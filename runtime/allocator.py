"""A caching allocator: output buffers come from memory that is already paged in.

A fresh multi-megabyte buffer from malloc is backed by pages the kernel has not
mapped yet; the first write to each 4 KiB page faults (~25 ms per 64 MB on this
machine) -- a cost XLA's CPU backend pays on every call. This allocator keeps
freed blocks in per-size-class free lists and hands them out again, so after
the first call a kernel writes into memory that is resident and warm.

- Size classes: multiples of 64 bytes up to 1 KiB, then four classes per power of
  two (at most 25% slack), so a block serves every request of its class.
- Storage: small blocks live in a zero-filled ctypes buffer (zeroing touches it),
  large ones (>= 256 KiB) in an anonymous mmap, advised to use transparent huge
  pages and touched once page by page when created.
- Alignment: every block starts on a 64-byte boundary; mmap blocks on a page.
- `lease(nbytes)` returns a `Lease`, a small object that owns the block. When the
  lease is garbage-collected its finalizer returns the block to the free list.
  `empty(shape, dtype)` builds a numpy array whose `base` is a lease (via
  `__array_interface__`), so the block comes back when the array and every view
  of it are gone.
- The cache is bounded (`max_cached_bytes`): returning a block beyond the bound
  evicts the least recently freed blocks, whose memory goes back to the OS.
- Thread-safe. A finalizer may fire in any thread, even in the middle of an
  allocator call on the same thread (garbage collection runs anywhere), so it
  never blocks on the lock: if the lock is busy the block is parked on a deque
  that the next allocator call drains.
"""
from __future__ import annotations

import collections
import ctypes
import math
import mmap
import os
import threading

import numpy as np

from . import config

PAGE_SIZE = mmap.PAGESIZE
MIN_ALIGNMENT = 64
MMAP_THRESHOLD = 256 * 1024
_HUGE_PAGE = 2 * 1024 * 1024


def size_class(nbytes: int) -> int:
    """The block size that serves a request of `nbytes` (>= nbytes, <= 1.25 * nbytes)."""
    if nbytes <= 1024:
        return max(MIN_ALIGNMENT, -(-nbytes // MIN_ALIGNMENT) * MIN_ALIGNMENT)
    step = 1 << (nbytes.bit_length() - 3)       # a quarter of the power of two below
    return -(-nbytes // step) * step


class Block:
    """A piece of memory owned by the allocator: `address`, `size` and what backs it."""
    __slots__ = ("address", "size", "key", "_storage")

    def __init__(self, address: int, size: int, key: tuple, storage):
        self.address, self.size, self.key, self._storage = address, size, key, storage


def _new_block(size: int, alignment: int) -> Block:
    """Creates a block of `size` bytes, aligned and with every page already touched."""
    key = (size, alignment)
    if size >= MMAP_THRESHOLD or alignment > MIN_ALIGNMENT:
        # Private and anonymous (Python's default is shared, i.e. shmem, which gets no
        # transparent huge pages); page aligned and not yet paged in.
        try:
            mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except OSError as e:                     # ENOMEM: say so as Python does
            raise MemoryError(f"runtime: cannot allocate {size} bytes: {e.strerror}") from None
        if size >= _HUGE_PAGE and hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                mm.madvise(mmap.MADV_HUGEPAGE)   # fewer faults and TLB misses; advice only
            except OSError:
                pass
        np.frombuffer(mm, np.uint8)[::PAGE_SIZE] = 0   # one write per page maps it in
        anchor = ctypes.c_char.from_buffer(mm)
        address = ctypes.addressof(anchor)
        del anchor                               # the address stays valid while mm lives
        return Block(address, size, key, mm)
    storage = ctypes.create_string_buffer(size + MIN_ALIGNMENT)   # zero-filled: touched
    base = ctypes.addressof(storage)
    address = -(-base // MIN_ALIGNMENT) * MIN_ALIGNMENT
    return Block(address, size, key, storage)


class Lease:
    """Ownership of one block; the block returns to its allocator when this dies.

    `empty()` sets `__array_interface__` so numpy can wrap the memory with the
    lease as the array's base object.
    """
    __slots__ = ("__array_interface__", "block", "_allocator", "__weakref__")

    def __init__(self, block: Block, allocator: "CachingAllocator"):
        self.block, self._allocator = block, allocator

    @property
    def address(self) -> int:
        return self.block.address

    @property
    def size(self) -> int:
        return self.block.size

    def __del__(self):
        allocator = self._allocator
        if allocator is not None:
            self._allocator = None
            allocator._give_back(self.block)


class CachingAllocator:
    """Size-class free lists of touched, aligned blocks, bounded by `max_cached_bytes`."""

    def __init__(self, max_cached_bytes: int | None = None):
        if max_cached_bytes is None:
            max_cached_bytes = config.get_options().allocator_cache_bytes
        self.max_cached_bytes = max_cached_bytes
        self._lock = threading.Lock()
        # key -> {id(block): block}; dicts keep insertion order, so popitem() is LIFO
        # (the most recently freed block, likely still in cache) ...
        self._free: dict[tuple, dict[int, Block]] = {}
        # ... while this one, oldest first, picks eviction victims.
        self._lru: collections.OrderedDict[int, Block] = collections.OrderedDict()
        self._parked: collections.deque[Block] = collections.deque()
        self.cached_bytes = 0
        self.in_use_bytes = 0
        self.hits = self.misses = self.evictions = 0
        self._specs: dict = {}                    # (shape, dtype) -> (block key, interface)

    def lease(self, nbytes: int, alignment: int = MIN_ALIGNMENT) -> Lease:
        """A block of at least `nbytes` bytes aligned to `alignment`, as a `Lease`."""
        if not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"allocate: nbytes must be an integer >= 0, got {nbytes!r}")
        if alignment > PAGE_SIZE or alignment & (alignment - 1):
            raise ValueError(f"allocate: alignment must be a power of two <= {PAGE_SIZE}, "
                             f"got {alignment!r}")
        page_aligned = alignment > MIN_ALIGNMENT
        return Lease(self._checkout((size_class(int(nbytes)),
                                     PAGE_SIZE if page_aligned else MIN_ALIGNMENT)), self)

    def _checkout(self, key: tuple) -> Block:
        """A block for `key` = (size class, alignment): from the cache, else a new one."""
        with self._lock:
            evicted = self._drain_parked() if self._parked else None
            bucket = self._free.get(key)
            if bucket:
                block = bucket.popitem()[1]
                del self._lru[id(block)]
                self.cached_bytes -= block.size
                self.hits += 1
            else:
                block = None
                self.misses += 1
            self.in_use_bytes += key[0]
        del evicted
        if block is None:
            try:
                block = _new_block(*key)          # outside the lock: touching pages is slow
            except BaseException:
                with self._lock:
                    self.in_use_bytes -= key[0]
                raise
        return block

    def _give_back(self, block: Block) -> None:
        if not self._lock.acquire(blocking=False):
            self._parked.append(block)            # deque.append is atomic; drained later
            return
        try:
            evicted = self._cache(block)
            if self._parked:
                evicted += self._drain_parked()
        finally:
            self._lock.release()
        del evicted                               # unmapping happens here, outside the lock

    def _drain_parked(self) -> list[Block]:
        evicted = []
        while self._parked:
            evicted += self._cache(self._parked.popleft())
        return evicted

    def _cache(self, block: Block) -> list[Block]:
        """Puts `block` on its free list, evicting old blocks to respect the bound.

        Called with the lock held; returns the evicted blocks so that the caller can
        drop them (and unmap their memory) after releasing the lock.
        """
        self.in_use_bytes -= block.size
        if block.size > self.max_cached_bytes:
            self.evictions += 1
            return [block]
        evicted = []
        while self.cached_bytes + block.size > self.max_cached_bytes:
            evicted.append(self._evict_oldest())
        self._free.setdefault(block.key, {})[id(block)] = block
        self._lru[id(block)] = block
        self.cached_bytes += block.size
        return evicted

    def _evict_oldest(self) -> Block:
        _, victim = self._lru.popitem(last=False)
        del self._free[victim.key][id(victim)]
        self.cached_bytes -= victim.size
        self.evictions += 1
        return victim

    def trim(self, max_cached_bytes: int | None = None) -> None:
        """Evicts cached blocks down to `max_cached_bytes` (default: the bound; 0 = all)."""
        limit = self.max_cached_bytes if max_cached_bytes is None else max_cached_bytes
        with self._lock:
            evicted = self._drain_parked()
            while self.cached_bytes > limit:
                evicted.append(self._evict_oldest())
        del evicted

    def stats(self) -> dict:
        """Counters: bytes in use and cached, cache hits, misses and evictions."""
        with self._lock:
            evicted = self._drain_parked()
            result = {"in_use_bytes": self.in_use_bytes, "cached_bytes": self.cached_bytes,
                      "cached_blocks": len(self._lru), "hits": self.hits,
                      "misses": self.misses, "evictions": self.evictions,
                      "max_cached_bytes": self.max_cached_bytes}
        del evicted
        return result

    def empty(self, shape, dtype=np.float32) -> np.ndarray:
        """An uninitialized C-contiguous numpy array in a block from this allocator."""
        return self.empty_with_address(shape, dtype)[0]

    def empty_with_address(self, shape, dtype=np.float32) -> tuple[np.ndarray, int]:
        """`empty(shape, dtype)` and the array's data address (saves `a.ctypes.data`)."""
        try:
            key, interface = self._specs[(shape, dtype)]
        except (KeyError, TypeError):             # new, or unhashable (a list shape)
            key, interface = self._array_spec(shape, dtype)
        block = self._checkout(key)
        lease = Lease(block, self)
        interface = dict(interface)
        interface["data"] = (block.address, False)
        lease.__array_interface__ = interface
        array = np.asarray(lease)
        if array.dtype != dtype:       # carried as bytes (_typestr): the same bytes, viewed
            array = array.view(dtype)
        return array, block.address

    def _array_spec(self, shape, dtype) -> tuple[tuple, dict]:
        """Validates (shape, dtype) once; caches the block key and array interface."""
        np_dtype = np.dtype(dtype)
        dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
        if any(d < 0 for d in dims):
            raise ValueError(f"empty: negative dimension in shape {dims}")
        nbytes = math.prod(dims) * np_dtype.itemsize
        interface = {"shape": dims, "typestr": _typestr(np_dtype), "version": 3}
        if np_dtype.fields is not None:
            interface["descr"] = np_dtype.descr
        spec = ((size_class(nbytes), MIN_ALIGNMENT), interface)
        try:
            if len(self._specs) >= 4096:          # a program has few distinct output shapes
                self._specs.clear()
            self._specs[(shape, dtype)] = spec
        except TypeError:
            pass
        return spec


def _typestr(dtype: np.dtype) -> str:
    """The array-interface type string for `dtype`, or, for a dtype the interface cannot
    spell (ml_dtypes' bfloat16 is "<V2", float8_e5m2 "<f1", which numpy reads as void
    bytes or not at all), unsigned integers of its size, viewed as `dtype` afterwards."""
    try:
        if np.dtype(dtype.str) == dtype:
            return dtype.str
    except TypeError:
        pass
    return f"|u{dtype.itemsize}" if dtype.itemsize in (1, 2, 4, 8) else f"|V{dtype.itemsize}"


_default_allocator: CachingAllocator | None = None
_default_lock = threading.Lock()


def default_allocator() -> CachingAllocator:
    """The process-wide allocator, bounded by the `allocator_cache_bytes` option."""
    global _default_allocator
    allocator = _default_allocator
    if allocator is None:
        with _default_lock:
            if _default_allocator is None:
                _default_allocator = CachingAllocator()
            allocator = _default_allocator
    return allocator


def empty(shape, dtype=np.float32) -> np.ndarray:
    """`numpy.empty` with memory from the process-wide caching allocator."""
    return default_allocator().empty_with_address(shape, dtype)[0]


def empty_with_address(shape, dtype=np.float32) -> tuple[np.ndarray, int]:
    """`empty(shape, dtype)` and its data address, for building buffer tables cheaply."""
    return default_allocator().empty_with_address(shape, dtype)


def _apply_options(options) -> None:
    if _default_allocator is not None:
        _default_allocator.max_cached_bytes = options.allocator_cache_bytes
        _default_allocator.trim()


def _reset_lock_in_child() -> None:
    # Another thread may have held the lock at fork time; it never releases it here.
    if _default_allocator is not None:
        _default_allocator._lock = threading.Lock()


config.on_configure(_apply_options)
os.register_at_fork(after_in_child=_reset_lock_in_child)
