"""Reductions and buffer checks shared by the communicators (communicator.py).

Named reductions are numpy ufuncs (the in-process path and MPI's ring apply them to
pieces of buffers); a callable reducer is applied as `combine(a, b)`. Buffers are seen
flat: a C-contiguous array of any shape is its elements in memory order.

Native folds. numpy folds two arrays per call, so an all-reduce over N buffers reads the
running result N-1 times and then copies it to every member: on a host whose cores share
one memory bus, that traffic is the time. A layer above that compiles code (backend_cpu)
may offer, through `set_native_folds(provider)`, one-pass folds:

    provider(op, dtype, parts, outs, nontemporal) -> fold | None
    fold(part_addresses, out_addresses, begin, vbegin, vend, end)   (ctypes: no GIL)

which read element i of `parts` buffers, combine them in order ((p0 op p1) op p2 ...,
the same bits as numpy's fold) and store the result into `outs` buffers, for i in
[begin, end). [vbegin, vend) is the middle part run in 64-byte vectors; with
`nontemporal` its stores bypass the cache and need every out at vbegin aligned to 64
bytes (`fold_span` chooses the bounds). The runtime itself compiles nothing: without a
provider, or for a reduction the provider declines, the numpy path runs.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

REDUCE_OPS = ("sum", "prod", "min", "max", "and", "or")

_UFUNCS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
           "and": np.bitwise_and, "or": np.bitwise_or}


def describe_error(exc: BaseException) -> str:
    """`ValueError: boom`, on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Reduction:
    """A reduction resolved for one dtype: a named op (with its numpy ufunc) or a callable."""
    __slots__ = ("name", "ufunc", "combine")

    def __init__(self, name: str | None, ufunc, combine):
        self.name, self.ufunc, self.combine = name, ufunc, combine

    def apply(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        """out = a op b (out may be a or b)."""
        if self.ufunc is not None:
            self.ufunc(a, b, out=out)
            return
        result = self.combine(a, b)
        if result is not out:
            result = np.asarray(result)
            if result.shape != out.shape:
                raise ValueError(f"the reducer returned shape {result.shape} for operands of "
                                 f"shape {out.shape}: it must be elementwise")
            np.copyto(out, result, casting="same_kind")


def resolve_reduction(op, dtype: np.dtype) -> Reduction:
    """Checks `op` for `dtype`; a one-line ValueError for a combination that has no meaning."""
    if callable(op) and not isinstance(op, str):
        return Reduction(None, None, op)
    if op not in _UFUNCS:
        raise ValueError(f"unknown reduction {op!r}: expected one of {', '.join(REDUCE_OPS)} "
                         "or a callable combine(a, b)")
    kind = dtype.kind
    if op in ("and", "or") and kind not in "biu":
        raise ValueError(f"reduction {op!r} needs bool or integer buffers, not {dtype}")
    if op in ("min", "max") and kind == "c":
        raise ValueError(f"reduction {op!r} is not defined for complex buffers ({dtype})")
    return Reduction(op, _UFUNCS[op], None)


_native_provider = None
_native_cache: dict = {}
_native_lock = threading.Lock()
VECTOR_BYTES = 64           # the folds' vector: non-temporal stores start on such a line


def set_native_folds(provider) -> None:
    """Installs (or, with None, removes) the provider of native folds (module docstring)."""
    global _native_provider
    with _native_lock:
        _native_provider = provider
        _native_cache.clear()


def native_fold(op, dtype: np.dtype, parts: int, outs: int, nontemporal: bool):
    """The provider's fold for this combination, or None (decided once per process: every
    device of a collective gets the same answer)."""
    if _native_provider is None or not isinstance(op, str):
        return None
    key = (op, np.dtype(dtype).str, parts, outs, nontemporal)
    fold = _native_cache.get(key, False)
    if fold is False:
        with _native_lock:
            fold = _native_cache.get(key, False)
            if fold is False:
                try:
                    fold = _native_provider(op, np.dtype(dtype), parts, outs, nontemporal)
                except Exception:  # noqa: BLE001 - a fold that cannot be built: numpy's path
                    fold = None
                _native_cache[key] = fold
    return fold


def run_native_fold(fold, fold_nt, parts: list, outs: list, begin: int, end: int) -> None:
    """Runs a native fold over elements [begin, end) of flat arrays: the non-temporal one
    (`fold_nt`, may be None) when every out has the same offset from a 64-byte line, so
    that one vector start aligns them all; else `fold`."""
    if end <= begin:
        return
    itemsize = outs[0].itemsize
    lanes = VECTOR_BYTES // itemsize
    out_addresses = [o.ctypes.data for o in outs]
    offset = (out_addresses[0] + begin * itemsize) % VECTOR_BYTES
    if fold_nt is not None and offset % itemsize == 0 and \
            all((a - out_addresses[0]) % VECTOR_BYTES == 0 for a in out_addresses):
        vbegin = min(end, begin + ((VECTOR_BYTES - offset) % VECTOR_BYTES) // itemsize)
        chosen = fold_nt
    else:
        vbegin, chosen = begin, fold
    vend = vbegin + (end - vbegin) // lanes * lanes
    chosen((ctypes.c_void_p * len(parts))(*[p.ctypes.data for p in parts]),
           (ctypes.c_void_p * len(outs))(*out_addresses), begin, vbegin, vend, end)


def flat(array: np.ndarray, what: str) -> np.ndarray:
    """A 1-d view of a C-contiguous numpy array (a ValueError for anything else)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{what} must be a numpy array, not {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous")
    return array.reshape(-1)


def check_writable(array: np.ndarray, what: str) -> None:
    if not array.flags.writeable:
        raise ValueError(f"{what} must be writable")


def same_memory(a: np.ndarray, b: np.ndarray, what: str) -> bool:
    """True when a and b are the same buffer (in place); an error if they overlap otherwise."""
    if a.size == 0 or b.size == 0:
        return False
    if a.ctypes.data == b.ctypes.data and a.nbytes == b.nbytes:
        return True
    if np.may_share_memory(a, b):
        raise ValueError(f"{what}: send and recv overlap without being the same buffer")
    return False


def chunk_bounds(size: int, parts: int, index: int) -> tuple[int, int]:
    """[lo, hi) of chunk `index` when `size` elements are cut into `parts` near-equal chunks."""
    return size * index // parts, size * (index + 1) // parts


def describe_mismatch(values: dict, noun: str = "device") -> str:
    """'devices 0, 2: 'abc'; device 1: 'xyz'' for {0: 'abc', 1: 'xyz', 2: 'abc'}."""
    by_value: dict = {}
    for who, value in sorted(values.items()):
        by_value.setdefault(value, []).append(who)
    parts = []
    for value, whos in by_value.items():
        shown = value if len(value) <= 40 else value[:37] + "..."
        label = noun + ("s " if len(whos) > 1 else " ") + ", ".join(map(str, whos))
        parts.append(f"{label}: {shown!r}")
    return "; ".join(parts)
