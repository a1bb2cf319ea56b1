"""A persistent on-disk cache of compiled executables, shared between processes.

A second process compiling the same module skips the pass pipeline, IR
emission, LLVM optimization and code generation: it loads the pickled
`Program` (slots, thunks, constants) and the machine code object, and links.

    location   $XLAPY_CACHE_DIR, else $XDG_CACHE_HOME/xlapy/compiled,
               else ~/.cache/xlapy/compiled
    disable    XLAPY_DISABLE_DISK_CACHE=1, or CompileOptions(disk_cache=False)

The key hashes the module text, the compile options, the host CPU (name and
features), the llvmlite and numpy versions and the compiler's own source files
(hlo/, passes/, backend_cpu/: name, size, modification time), so a changed
compiler never loads stale code. Entries are written atomically
(temp file + rename); an unreadable entry is ignored and recompiled; beyond
MAX_ENTRIES entries the oldest are deleted (checked on a process's first write,
then every EVICT_CHECK_EVERY writes). Only
pipelines named by value (None, "default") are cached: a callable's behaviour
is not part of the key.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

import llvmlite.binding as llvm

from . import llvm_target

FORMAT = "xlapy-compiled-2"       # 2: the payload keeps the LLVM IR before optimization
MAX_ENTRIES = 1000       # entries kept on disk (the oldest are evicted beyond this)


def cache_dir() -> Path | None:
    """The cache folder, or None when the disk cache is disabled."""
    if os.environ.get("XLAPY_DISABLE_DISK_CACHE", "") not in ("", "0"):
        return None
    explicit = os.environ.get("XLAPY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "xlapy" / "compiled"


@functools.lru_cache(maxsize=None)
def _compiler_fingerprint() -> str:
    """Hash of the compiler's own source and of the host CPU."""
    import llvmlite
    import numpy
    digest = hashlib.sha256(f"{FORMAT} llvmlite {llvmlite.__version__} "
                            f"numpy {numpy.__version__}".encode())
    root = Path(__file__).resolve().parent.parent
    for package in ("hlo", "passes", "backend_cpu"):
        for path in sorted((root / package).glob("*.py")):
            # Size and modification time stand for the content: any edit changes them,
            # and a stat is ten times cheaper than reading the file (this runs per process).
            info = path.stat()
            digest.update(f"{path.name}:{info.st_size}:{info.st_mtime_ns};".encode())
    llvm_target.initialize()
    digest.update(llvm.get_host_cpu_name().encode())
    digest.update(llvm.get_host_cpu_features().flatten().encode())
    return digest.hexdigest()


def key(module_text: str, options_fingerprint: str) -> str:
    digest = hashlib.sha256(_compiler_fingerprint().encode())
    digest.update(options_fingerprint.encode())
    digest.update(module_text.encode())
    return digest.hexdigest()


def load(entry_key: str) -> dict | None:
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with open(folder / f"{entry_key}.pkl", "rb") as f:
            payload = pickle.load(f)
        return payload if payload.get("format") == FORMAT else None
    except Exception:      # missing, truncated or from another version: recompile
        return None


def store(entry_key: str, payload: dict) -> None:
    folder = cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(dict(payload, format=FORMAT), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, folder / f"{entry_key}.pkl")
        _evict(folder)
    except OSError:
        pass               # a read-only or full disk only costs the next compile


# Listing the folder costs ~10 ms at a thousand entries: a process lists it on its
# first write and then once every EVICT_CHECK_EVERY writes, not on every write.
EVICT_CHECK_EVERY = 50
_writes_until_check = 0


def _evict(folder: Path) -> None:
    """Keeps about MAX_ENTRIES entries (checked every EVICT_CHECK_EVERY writes of this
    process): the least recently written go first."""
    global _writes_until_check
    if _writes_until_check > 0:
        _writes_until_check -= 1
        return
    _writes_until_check = EVICT_CHECK_EVERY - 1
    with os.scandir(folder) as it:
        entries = [e for e in it if e.name.endswith(".pkl")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime)
    for entry in entries[:len(entries) - MAX_ENTRIES * 9 // 10]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass


class Jit:
    """JIT-compiled machine code: `lookup(name) -> address`; `object_code` is its bytes."""

    def __init__(self, engine, object_code: bytes | None):
        self.engine = engine
        self.object_code = object_code

    def lookup(self, name: str) -> int:
        address = self.engine.get_function_address(name)
        if not address:
            raise KeyError(f"backend_cpu: no function named {name!r} in the compiled code")
        return address


def _engine_target_machine():
    # MCJIT takes ownership of its TargetMachine and frees it with the engine: every
    # engine needs a fresh one, never llvm_target's cached machine.
    return llvm_target._new_host_target_machine()


def object_code(module_ref, strength_reduction: bool = True) -> bytes:
    """The object code of an optimized module, for `jit_object` and the cache
    (emitting does not take ownership of the target machine: the shared one serves)."""
    return llvm_target.emit_object(module_ref, strength_reduction=strength_reduction)


def jit_module(module_ref, strength_reduction: bool = True) -> Jit:
    """JIT-compiles an optimized module; keeps its object code for the cache.

    Code generation runs once, to an object file, which the engine then loads
    (llvmlite's object-cache hook cannot be used: its engine crashes on disposal).
    """
    return jit_object(object_code(module_ref, strength_reduction))


def jit_object(object_code: bytes) -> Jit:
    """Loads object code into a fresh engine (no LLVM optimization or codegen)."""
    engine = llvm.create_mcjit_compiler(llvm_target.parse_and_verify(""),
                                        _engine_target_machine())
    object_file = llvm.ObjectFileRef.from_data(object_code)
    engine.add_object_file(object_file)
    engine.finalize_object()
    jit = Jit(engine, object_code)
    jit._object_file = object_file      # lives as long as the engine that loaded it
    return jit
