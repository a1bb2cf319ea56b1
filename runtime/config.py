"""Runtime options: thread counts, the allocator's cache bound, the collective timeout.

Every option has a default, can be set by an environment variable (read once, on
first use), and can be overridden in-process with `configure()` (which rebuilds
the process-wide pools the next time they are asked for):

    option                   environment variable           default
    intra_op_threads         XLAPY_INTRA_OP_THREADS         number of usable cores
    inter_op_threads         XLAPY_INTER_OP_THREADS         number of usable cores
    allocator_cache_bytes    XLAPY_ALLOCATOR_CACHE_BYTES    1 GiB (or a quarter of RAM
                                                            if that is smaller)
    collective_timeout       XLAPY_COLLECTIVE_TIMEOUT       60 (seconds)

`intra_op_threads` is how many threads run the partitions of ONE kernel launch
(1 = every launch runs on the thread that issues it, no worker threads at all).
`inter_op_threads` is how many streams may execute at the same time
(1 = streams take turns on a single worker). Byte counts accept a plain integer
or a suffix: `512M`, `2G`, `64K`. `collective_timeout` is how long a device waits in
a collective for its peers before it gives up with a `CollectiveError` (communicator.py).
"""
from __future__ import annotations

import dataclasses
import os

_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def usable_cores() -> int:
    """Cores this process may run on (respects taskset / cgroup affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _default_cache_bytes() -> int:
    ram = _physical_memory_bytes()
    one_gib = 1 << 30
    return one_gib if ram is None else min(one_gib, ram // 4)


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
    """The knobs of the runtime; see the module docstring for their meaning."""
    intra_op_threads: int
    inter_op_threads: int
    allocator_cache_bytes: int
    collective_timeout: float = 60.0

    def __post_init__(self):
        for name in ("intra_op_threads", "inter_op_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"runtime option {name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.allocator_cache_bytes, int) or self.allocator_cache_bytes < 0:
            raise ValueError("runtime option allocator_cache_bytes must be an integer >= 0, "
                             f"got {self.allocator_cache_bytes!r}")
        timeout = self.collective_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError("runtime option collective_timeout must be a number of seconds > 0, "
                             f"got {timeout!r}")


def parse_count(text: str, variable: str) -> int:
    """Parses a thread count from an environment variable's text."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{variable}={text!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"{variable}={text!r} must be at least 1")
    return value


def parse_bytes(text: str, variable: str) -> int:
    """Parses a byte count such as `1073741824`, `512M` or `2G`."""
    stripped = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = 1
    if stripped and stripped[-1] in _SUFFIXES:
        scale, stripped = _SUFFIXES[stripped[-1]], stripped[:-1]
    try:
        value = int(float(stripped) * scale)
    except ValueError:
        raise ValueError(f"{variable}={text!r} is not a byte count (e.g. 536870912, 512M, 2G)") \
            from None
    if value < 0:
        raise ValueError(f"{variable}={text!r} must not be negative")
    return value


def parse_seconds(text: str, variable: str) -> float:
    """Parses a positive duration in seconds: `60`, `2.5`, `90s`."""
    stripped = text.strip().lower().removesuffix("s")
    try:
        value = float(stripped)
    except ValueError:
        raise ValueError(f"{variable}={text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{variable}={text!r} must be a finite number of seconds > 0")
    return value


def options_from_env(environ=None) -> RuntimeOptions:
    """The options given by the environment, defaults for the variables that are unset."""
    env = os.environ if environ is None else environ
    cores = usable_cores()

    def read(variable, parse, default):
        text = env.get(variable)
        return default if text is None or not text.strip() else parse(text, variable)

    return RuntimeOptions(
        intra_op_threads=read("XLAPY_INTRA_OP_THREADS", parse_count, cores),
        inter_op_threads=read("XLAPY_INTER_OP_THREADS", parse_count, cores),
        allocator_cache_bytes=read("XLAPY_ALLOCATOR_CACHE_BYTES", parse_bytes,
                                   _default_cache_bytes()),
        collective_timeout=read("XLAPY_COLLECTIVE_TIMEOUT", parse_seconds, 60.0),
    )


_options: RuntimeOptions | None = None
# Called with the new options whenever `configure` changes them (the pool and
# allocator modules register here, so config.py needs to import neither).
_listeners: list = []


def get_options() -> RuntimeOptions:
    """The current options (read from the environment on first use)."""
    global _options
    if _options is None:
        _options = options_from_env()
    return _options


def configure(**changes) -> RuntimeOptions:
    """Overrides options in-process, e.g. `configure(intra_op_threads=1)`.

    Process-wide pools are rebuilt lazily with the new sizes; work already running on
    the old pools finishes there.
    """
    global _options
    unknown = set(changes) - {f.name for f in dataclasses.fields(RuntimeOptions)}
    if unknown:
        raise TypeError(f"configure: unknown runtime option(s) {sorted(unknown)}")
    _options = dataclasses.replace(get_options(), **changes)
    for listener in list(_listeners):
        listener(_options)
    return _options


def on_configure(listener) -> None:
    """Registers `listener(options)` to be called after every `configure`."""
    _listeners.append(listener)
