"""Platform and StreamExecutor: the host CPU seen as a device.

StreamExecutor's shape, reduced to one device: a `Platform` ("Host") owns one
`StreamExecutor` (ordinal 0) which describes the CPU, allocates DeviceMemory
from the caching allocator, copies between host and device (on the host both
are plain memory, so the "device" side of a copy can also be a view) and
creates streams. `synchronize()` waits for every stream it created.
"""
from __future__ import annotations

import dataclasses
import threading
import weakref

import numpy as np

from . import config
from .allocator import MIN_ALIGNMENT, CachingAllocator, default_allocator
from .memory import DeviceMemory, copy_bytes
from .stream import Stream


@dataclasses.dataclass(frozen=True)
class DeviceDescription:
    """What the backend needs to know about the CPU: name, cores, SIMD width, flags."""
    name: str
    cores: int
    vector_width_bits: int
    features: frozenset[str] = dataclasses.field(repr=False)

    @property
    def vector_width_bytes(self) -> int:
        return self.vector_width_bits // 8

    def has(self, feature: str) -> bool:
        return feature in self.features


def vector_width_from_flags(flags) -> int:
    """The widest SIMD register the CPU flags (as in /proc/cpuinfo) promise, in bits."""
    flags = set(flags)
    if "avx512f" in flags:
        return 512
    if "avx" in flags or "avx2" in flags:
        return 256
    if flags & {"sse2", "asimd", "neon"}:
        return 128
    return 64


def describe_host(cpuinfo_path: str = "/proc/cpuinfo") -> DeviceDescription:
    """Reads the CPU's model name and flags from /proc/cpuinfo (the first processor)."""
    name, flags = "", set()
    try:
        with open(cpuinfo_path) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not name:
                    name = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
                if not line.strip() and name and flags:
                    break                         # first processor block is enough
    except OSError:
        pass
    return DeviceDescription(name=name or "unknown CPU", cores=config.usable_cores(),
                             vector_width_bits=vector_width_from_flags(flags),
                             features=frozenset(flags))


class StreamExecutor:
    """The host device: memory, copies and streams (device ordinal 0)."""

    def __init__(self, ordinal: int = 0, allocator: CachingAllocator | None = None):
        self.ordinal = ordinal
        self._allocator = allocator
        self._description: DeviceDescription | None = None
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        self._streams_lock = threading.Lock()

    @property
    def description(self) -> DeviceDescription:
        if self._description is None:
            self._description = describe_host()
        return self._description

    @property
    def allocator(self) -> CachingAllocator:
        return self._allocator or default_allocator()

    # ----------------------------------------------------------------- memory
    def allocate(self, nbytes: int, alignment: int = MIN_ALIGNMENT) -> DeviceMemory:
        """`nbytes` of touched memory aligned to `alignment`, from the caching allocator."""
        lease = self.allocator.lease(nbytes, alignment)
        return DeviceMemory.from_lease(lease, nbytes)

    def deallocate(self, memory: DeviceMemory) -> None:
        """Releases `memory`; its block is reused once no numpy view of it is left."""
        if not isinstance(memory, DeviceMemory):
            raise TypeError(f"deallocate: expected DeviceMemory, got {type(memory).__name__}")
        memory.release()

    def memcpy_host_to_device(self, dst: DeviceMemory, src: np.ndarray) -> None:
        """Copies a contiguous numpy array into `dst` (synchronous)."""
        src = np.ascontiguousarray(src)
        copy_bytes(dst, src, src.nbytes)

    def memcpy_device_to_host(self, dst: np.ndarray, src: DeviceMemory) -> None:
        """Copies `src` into a contiguous numpy array (synchronous)."""
        copy_bytes(dst, src, dst.nbytes)

    def memcpy_host_to_device_async(self, stream: Stream, dst: DeviceMemory,
                                    src: np.ndarray) -> None:
        """Enqueues the copy on `stream`; `src` must not change until it has run."""
        src = np.ascontiguousarray(src)
        stream.memcpy(dst, src, src.nbytes)

    def memcpy_device_to_host_async(self, stream: Stream, dst: np.ndarray,
                                    src: DeviceMemory) -> None:
        stream.memcpy(dst, src, dst.nbytes)

    # ----------------------------------------------------------------- streams
    def create_stream(self, *, inline: bool = False) -> Stream:
        """A new stream on this device (see `Stream` for `inline`)."""
        stream = Stream(self, inline=inline)
        with self._streams_lock:
            self._streams.add(stream)
        return stream

    def synchronize(self) -> None:
        """Blocks until all work on this executor's streams is done.

        Every stream is drained even if one fails; then the first error is raised.
        """
        with self._streams_lock:
            streams = list(self._streams)
        first_error = None
        for stream in streams:
            try:
                stream.block_host_until_done()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                first_error = first_error or exc
        if first_error is not None:
            raise first_error

    def __repr__(self):
        return f"StreamExecutor(host:{self.ordinal}, {self.description.name!r})"


class Platform:
    """The host platform: one StreamExecutor over the CPU."""
    name = "Host"

    def __init__(self):
        self._executor = StreamExecutor(0)

    @property
    def device_count(self) -> int:
        return 1

    def executor(self, ordinal: int = 0) -> StreamExecutor:
        if ordinal != 0:
            raise ValueError(f"Platform Host: no device {ordinal} (only device 0 exists)")
        return self._executor


_platform: Platform | None = None
_platform_lock = threading.Lock()


def get_platform() -> Platform:
    """The process-wide host platform."""
    global _platform
    if _platform is None:
        with _platform_lock:
            if _platform is None:
                _platform = Platform()
    return _platform
