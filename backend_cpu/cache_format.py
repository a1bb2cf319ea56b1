"""The disk cache's entry format: plain data only, so reading an entry runs no code.

An entry is one file:

    MAGIC (8 bytes) | SHA-256 of the rest, magic included (32) | JSON length (8, little-endian)
    | JSON (UTF-8) | binary blobs, back to back

The JSON holds the format, the entry's key, the lengths of the blobs, a table
of HLO module texts, and the payload. Reading checks the magic, the exact
file length, the checksum, the format and the key before it decodes anything;
any mismatch raises `FormatError` (the disk cache then recompiles).

Values are encoded by type, never by a name chosen by the file:

    None, bool, int, str, finite float     themselves
    list                                   a JSON list
    tuple, dict, non-finite float          {"$tuple": [...]}, {"$dict": [[k, v], ...]}, {"$float": "nan"}
    bytes                                  {"$bytes": blob}
    numpy array                            {"$array": blob, "dtype": "<f4", "shape": [...], "order": "C"}
    numpy dtype / scalar                   {"$dtype": "<f4"}, {"$scalar": "<f4", "hex": "..."}
    HloComputation / its instructions      {"$hlo": i}, {"$hlo_instruction": [i, position]}
    an object of a REGISTERED class        {"$obj": "KernelThunk", "state": {field: value}}

Only numeric and bool dtypes are accepted (no object arrays), and only the
classes in `_registry()` (the program, every thunk kind, slots, shapes, GEMM
routines) are ever built: with `cls.__new__` and their stored fields, then
the class's `after_load` step (e.g. the Program's ctypes table). An object's
fields are all its attributes (`vars(obj)`), so a field added to a thunk is
stored without anyone touching this file -- unless its value is of a type
not listed above, in which case *storing* fails loudly with a `FormatError`
naming the class and field: register the new class, or list the field as
transient (rebuilt by `link`) in `_registry()`. A new thunk kind that is not
registered fails the same way (and tests/backend_cpu/test_disk_cache.py
checks that every class with `link` and `run` in backend_cpu is registered).

HLO computations (a sort thunk's comparator) are stored as the text of a
module whose entry is the computation, parsed back on load; an instruction
is stored as its computation and its position in it.

Values are stored as trees: an object reachable twice is loaded as two equal
copies (numpy arrays and HLO computations excepted, which stay shared). Slots
are referred to by index, so nothing in a program relies on sharing today.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import struct
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..hlo.dtypes import DTYPES
from ..hlo.ir import HloComputation, HloInstruction, callees_first
from ..hlo.parser import parse_module
from ..hlo.printer import print_computation
from ..hlo.shape import Shape

from . import collective_thunks as ct, library_ops, sort_thunk
from .buffer_assignment import Slot
from .executable import Program
from .gemm.library import Routine
from .gemm.microkernel import MicroTile
from .gemm.packing import PackLayout
from .thunks import CallThunk, ConditionalThunk, CopyThunk, KernelThunk, WhileThunk

MAGIC = b"XLAPYC\x00\x03"
_DIGEST = 32
_HEADER = len(MAGIC) + _DIGEST + 8
# Element kinds an array or scalar may have: bool, signed, unsigned, float, complex.
_KINDS = frozenset("biufc")


class FormatError(TypeError):
    """An object that cannot be stored, or an entry that must not be loaded."""


@dataclass(frozen=True)
class _Kind:
    cls: type
    transient: dict          # field -> a function giving its value after loading
    after_load: Callable | None = None


def _program_after_load(program) -> None:
    program._build_template()


@functools.lru_cache(maxsize=None)
def _registry() -> dict[str, _Kind]:
    """Every class an entry may hold, by its stored name.

    `transient`: fields that are not stored (machine-code bindings, ctypes tables,
    counters), each with the value it has after loading; `link` rebuilds them."""
    none = lambda: None        # noqa: E731
    kinds = [
        _Kind(Program, {"_table_type": none, "_template": none, "_linked": lambda: False,
                        "_stream_plan": none, "_lean": none, "_trace_rows": none},
               _program_after_load),
        _Kind(KernelThunk, {"kernel": none, "dims": none, "_single": none}),
        _Kind(CopyThunk, {}),
        _Kind(CallThunk, {}),
        _Kind(WhileThunk, {"_native": none, "loop": none, "host_reason": none,
                           "trips": none}),
        _Kind(ConditionalThunk, {}),
        _Kind(sort_thunk.SortThunk, {"_blocks": lambda: [()], "reference_runs": lambda: 0}),
        _Kind(sort_thunk.SortKey, {}),
        *[_Kind(cls, {"op": none}) for cls in (ct.AllReduceThunk, ct.ReduceScatterThunk)],
        *[_Kind(cls, {}) for cls in (ct.CollectiveThunk, ct.AlongDimThunk, ct.AllGatherThunk,
                                     ct.AllToAllThunk, ct.PermuteThunk, ct.BroadcastThunk,
                                     ct.RaggedAllToAllThunk,
                                     ct.DeviceIdThunk, ct.StartThunk, ct.DoneThunk, ct.Buffer)],
        _Kind(sort_thunk._Layout, {}),
        _Kind(library_ops.HostOpThunk, {}),
        _Kind(library_ops.HostLayout, {}),
        _Kind(Slot, {}),
        _Kind(Shape, {}),
        _Kind(Routine, {}),
        _Kind(MicroTile, {}),
        _Kind(PackLayout, {}),
    ]
    registry = {k.cls.__qualname__: k for k in kinds}
    assert len(registry) == len(kinds), "two registered classes share a name"
    return registry


def registered_classes() -> list[type]:
    return [k.cls for k in _registry().values()]


# --- writing -----------------------------------------------------------------------------

def dumps(payload, *, key: str, format: str) -> bytes:
    """The bytes of one entry holding `payload`; FormatError (naming the class and
    field) if something in it cannot be stored as plain data."""
    writer = _Writer()
    try:
        body = writer.encode(payload)
    except FormatError as e:
        raise FormatError(f"disk cache: cannot store {e}") from None
    header = {"format": format, "key": key, "blobs": [len(b) for b in writer.blobs],
              "hlo": writer.hlo_texts, "payload": body}
    text = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    rest = struct.pack("<Q", len(text)) + text + b"".join(writer.blobs)
    return MAGIC + hashlib.sha256(MAGIC + rest).digest() + rest


class _Writer:
    def __init__(self):
        self.blobs: list[bytes] = []
        self.hlo_texts: list[str] = []
        self._arrays: dict[int, tuple] = {}     # id(array) -> (array, its encoding)
        self._hlo: dict[int, int] = {}          # id(computation) -> index in hlo_texts

    def blob(self, data: bytes) -> int:
        self.blobs.append(data)
        return len(self.blobs) - 1

    def encode(self, value):
        t = type(value)
        if value is None or t is bool or t is int or t is str:
            return value
        if t is float:
            return value if math.isfinite(value) else {"$float": repr(value)}
        if t is list:
            return [self.encode(v) for v in value]
        if t is tuple:
            return {"$tuple": [self.encode(v) for v in value]}
        if t is dict:
            return {"$dict": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        if t is bytes:
            return {"$bytes": self.blob(value)}
        if t is np.ndarray:
            return self.array(value)
        if isinstance(value, np.dtype):
            return {"$dtype": _dtype_text(value)}
        if isinstance(value, np.generic):
            return {"$scalar": _dtype_text(value.dtype), "hex": value.tobytes().hex()}
        name = t.__qualname__
        kind = _registry().get(name)
        if kind is not None and kind.cls is t:
            return self.object(value, kind, name)
        if t is HloComputation:
            return {"$hlo": self.computation(value)}
        if t is HloInstruction:
            comp = value.parent
            if comp is None:
                raise FormatError(f"instruction {value.name} belongs to no computation")
            return {"$hlo_instruction": [self.computation(comp),
                                         comp.instructions.index(value)]}
        raise FormatError(f"a {t.__module__}.{name} cannot be stored as plain data (register "
                          f"the class, or list the field as transient, in "
                          f"backend_cpu/cache_format.py)")

    def object(self, value, kind: _Kind, name: str) -> dict:
        try:
            fields = vars(value)
        except TypeError:
            raise FormatError(f"a {name} has no attribute dict") from None
        state = {}
        for field, v in fields.items():
            if field not in kind.transient:
                try:
                    state[field] = self.encode(v)
                except FormatError as e:
                    raise FormatError(f"{name}.{field}: {e}") from None
        return {"$obj": name, "state": state}

    def array(self, value: np.ndarray) -> dict:
        hit = self._arrays.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        dtype = _dtype_text(value.dtype)
        if value.flags.c_contiguous:
            order = "C"
        elif value.flags.f_contiguous:
            order = "F"
        else:
            # A slot's bytes are read in memory order: a strided view has no one order.
            raise FormatError("a non-contiguous array cannot be stored")
        encoded = {"$array": self.blob(value.tobytes(order=order)), "dtype": dtype,
                   "shape": list(value.shape), "order": order}
        self._arrays[id(value)] = (value, encoded)
        return encoded

    def computation(self, comp) -> int:
        index = self._hlo.get(id(comp))
        if index is None:
            blocks = [f"HloModule cached_{comp.name}"]
            blocks += [print_computation(c, is_entry=c is comp) for c in callees_first([comp])]
            self.hlo_texts.append("\n\n".join(blocks) + "\n")
            index = self._hlo[id(comp)] = len(self.hlo_texts) - 1
        return index


# The narrow element types' ml_dtypes dtypes (bf16, f8..., s4, ...) by HLO name: numpy
# cannot spell them (float8's str is '<f1', bfloat16's '<V2').
_NARROW = {d.numpy: name for name, d in DTYPES.items() if d.is_narrow}


def _dtype_text(dtype: np.dtype) -> str:
    if dtype in _NARROW:
        return _NARROW[dtype]
    if dtype.kind not in _KINDS or dtype.hasobject or dtype.fields is not None:
        raise FormatError(f"dtype {dtype} is not a plain numeric type")
    return dtype.str


# --- reading -----------------------------------------------------------------------------

def loads(data: bytes, *, key: str, format: str):
    """The payload of one entry; FormatError unless the entry is intact, of this
    `format` and stored under `key`. Runs no code of the entry's choosing."""
    if len(data) < _HEADER or data[:len(MAGIC)] != MAGIC:
        raise FormatError("not an xlapy cache entry")
    digest = data[len(MAGIC):len(MAGIC) + _DIGEST]
    rest = data[len(MAGIC) + _DIGEST:]
    if hashlib.sha256(MAGIC + rest).digest() != digest:
        raise FormatError("the entry's checksum does not match")
    (length,) = struct.unpack_from("<Q", rest)
    if 8 + length > len(rest):
        raise FormatError("the entry is truncated")
    header = json.loads(rest[8:8 + length].decode())
    if type(header) is not dict or header.get("format") != format or header.get("key") != key:
        raise FormatError("the entry has another format or key")
    lengths = header.get("blobs")
    if type(lengths) is not list or not all(type(n) is int and n >= 0 for n in lengths):
        raise FormatError("bad blob table")
    if 8 + length + sum(lengths) != len(rest):
        raise FormatError("the entry's length does not match its blobs")
    blobs, offset = [], 8 + length
    view = memoryview(rest)
    for n in lengths:
        blobs.append(view[offset:offset + n])
        offset += n
    texts = header.get("hlo", [])
    if type(texts) is not list or not all(type(t) is str for t in texts):
        raise FormatError("bad HLO table")
    return _Reader(blobs, texts).decode(header.get("payload"))


class _Reader:
    def __init__(self, blobs: list, hlo_texts: list[str]):
        self.blobs = blobs
        self.hlo_texts = hlo_texts
        self._hlo: dict[int, object] = {}       # index in hlo_texts -> entry computation

    def blob(self, index) -> memoryview:
        if type(index) is not int or not 0 <= index < len(self.blobs):
            raise FormatError("bad blob index")
        return self.blobs[index]

    def decode(self, value):
        t = type(value)
        if value is None or t is bool or t is int or t is str or t is float:
            return value
        if t is list:
            return [self.decode(v) for v in value]
        tags = [k for k in value if k.startswith("$")] if t is dict else []
        if len(tags) != 1:
            raise FormatError(f"unexpected {t.__name__} in an entry")
        tag = tags[0]
        arg = value[tag]
        if tag == "$tuple":
            return tuple(self.decode(v) for v in _list(arg))
        if tag == "$dict":
            return {self.decode(k): self.decode(v) for k, v in (_pair(p) for p in _list(arg))}
        if tag == "$float":
            if arg not in ("nan", "inf", "-inf"):
                raise FormatError("bad float")
            return float(arg)
        if tag == "$bytes":
            return bytes(self.blob(arg))
        if tag == "$array":
            return self.array(value)
        if tag == "$dtype":
            return _dtype(arg)
        if tag == "$scalar":
            dtype = _dtype(arg)
            raw = bytes.fromhex(_str(value.get("hex")))
            if len(raw) != dtype.itemsize:
                raise FormatError("bad scalar")
            return np.frombuffer(raw, dtype)[0]
        if tag == "$obj":
            return self.object(arg, value.get("state"))
        if tag == "$hlo":
            return self.computation(arg)
        if tag == "$hlo_instruction":
            index, position = _pair(arg)
            instructions = self.computation(index).instructions
            if type(position) is not int or not 0 <= position < len(instructions):
                raise FormatError("bad instruction position")
            return instructions[position]
        raise FormatError(f"unknown tag {tag[:40]!r} in an entry")

    def object(self, name, state):
        kind = _registry().get(name) if type(name) is str else None
        if kind is None or type(state) is not dict:
            raise FormatError(f"an entry names an unknown class {str(name)[:40]!r}")
        obj = kind.cls.__new__(kind.cls)
        for field, v in state.items():
            if not field.isidentifier() or field.startswith("__") or field in kind.transient:
                raise FormatError(f"bad field name {field[:40]!r}")
            object.__setattr__(obj, field, self.decode(v))
        for field, make in kind.transient.items():
            object.__setattr__(obj, field, make())
        if kind.after_load is not None:
            kind.after_load(obj)
        return obj

    def array(self, value: dict) -> np.ndarray:
        dtype = _dtype(value.get("dtype"))
        shape = _list(value.get("shape"))
        order = value.get("order")
        if not all(type(d) is int and d >= 0 for d in shape) or order not in ("C", "F"):
            raise FormatError("bad array")
        raw = self.blob(value["$array"])
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise FormatError("an array's bytes do not match its shape")
        # A copy: numpy-aligned, writable memory of its own, like a compiled constant's.
        return np.frombuffer(raw, dtype).reshape(shape, order=order).copy(order="K")

    def computation(self, index):
        if type(index) is not int or not 0 <= index < len(self.hlo_texts):
            raise FormatError("bad HLO index")
        comp = self._hlo.get(index)
        if comp is None:
            comp = self._hlo[index] = parse_module(self.hlo_texts[index]).entry
        return comp


def _dtype(text) -> np.dtype:
    if type(text) is not str or len(text) > 16:
        raise FormatError("bad dtype")
    if text in DTYPES and DTYPES[text].is_narrow:
        return DTYPES[text].numpy
    dtype = np.dtype(text)
    if dtype.kind not in _KINDS or dtype.hasobject or dtype.fields is not None:
        raise FormatError(f"dtype {text!r} is not a plain numeric type")
    return dtype


def _list(value) -> list:
    if type(value) is not list:
        raise FormatError("expected a list in an entry")
    return value


def _str(value) -> str:
    if type(value) is not str:
        raise FormatError("expected a string in an entry")
    return value


def _pair(value) -> list:
    if type(value) is not list or len(value) != 2:
        raise FormatError("expected a pair in an entry")
    return value
