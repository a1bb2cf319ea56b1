"""What machine code needs from the process, checked before it is loaded.

MCJIT binds a symbol it cannot find to address zero, and the first call through
it crashes the process. Code generation can add calls the IR never declared (a
compiler-runtime routine for an instruction the target lacks: `__truncsfhf2`
for f16 on SSE4.2), so the check reads the object file itself: every undefined
symbol of its ELF symbol table must resolve -- to a symbol published with
`llvm.add_symbol` (libm, the GEMM library), to the process's own, or to one of
our runtime routines (half_runtime.py), which are then compiled. Anything else
is a clear compile-time error, never a crash.
"""
from __future__ import annotations

import ctypes
import functools
import struct

from llvmlite import binding as llvm

from . import half_runtime


def _symbols(object_code: bytes):
    """(name, section index, binding) of each named symbol of an ELF64 little-endian
    relocatable object (what the backend's x86-64 and AArch64 targets produce);
    nothing for other formats."""
    if object_code[:4] != b"\x7fELF" or object_code[4] != 2 or object_code[5] != 1:
        return
    (shoff,) = struct.unpack_from("<Q", object_code, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", object_code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", object_code, shoff + i * shentsize)
                for i in range(shnum)]
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 2 or not entsize:             # SHT_SYMTAB
            continue
        strtab = sections[link]
        strings = object_code[strtab[4]:strtab[4] + strtab[5]]
        for at in range(offset + entsize, offset + size, entsize):    # entry 0 is null
            st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", object_code, at)
            if st_name:
                end = strings.index(b"\0", st_name)
                yield strings[st_name:end].decode(), st_shndx, st_info >> 4


def undefined_symbols(object_code: bytes) -> list[str]:
    """The undefined symbols of an ELF object ([] for other formats)."""
    return [name for name, section, _ in _symbols(object_code) if section == 0]  # SHN_UNDEF


def defined_symbols(object_code: bytes) -> list[str]:
    """The global (or weak) symbols an ELF object defines ([] for other formats): what
    other objects loaded into the same engine may call."""
    return [name for name, section, binding in _symbols(object_code)
            if section != 0 and binding in (1, 2)]          # STB_GLOBAL, STB_WEAK


@functools.lru_cache(maxsize=None)
def _process() -> ctypes.CDLL:
    return ctypes.CDLL(None)


def _resolvable(name: str) -> bool:
    return bool(llvm.address_of_symbol(name)) or hasattr(_process(), name)


def ensure_resolvable(object_code: bytes, provided=()) -> None:
    """Makes every symbol the object needs available, or raises NotImplementedError
    naming the first one that cannot be. `provided`: names that objects loaded into
    the same engine define."""
    for name in undefined_symbols(object_code):
        if name in provided or _resolvable(name):
            continue
        if name in half_runtime.ROUTINES:
            half_runtime.ensure()
            continue
        raise NotImplementedError(f"backend_cpu: kernels call {name}, which is not "
                                  f"available in this process")
