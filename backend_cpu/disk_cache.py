"""A persistent on-disk cache of compiled executables, shared between processes.

A second process compiling the same module skips the pass pipeline, IR
emission, LLVM optimization and code generation: it loads the `Program`
(slots, thunks, constants) and the machine code object, and links.

    location   $XLAPY_CACHE_DIR, else $XDG_CACHE_HOME/xlapy/compiled,
               else ~/.cache/xlapy/compiled (created with mode 0700)
    disable    XLAPY_DISABLE_DISK_CACHE=1, or CompileOptions(disk_cache=False)

An entry is object code plus plain data (cache_format.py: JSON for the program,
thunks, slots and texts, raw bytes for constants and code, a SHA-256 of the
whole file checked first). Nothing on the load path unpickles or otherwise
runs code chosen by the file's contents -- but the object code itself is
machine code that the process runs, so an entry is only as trustworthy as
whoever could write it. Hence:

- entries are loaded only from a folder owned by the current user that group
  and others cannot write (nothing is stored in any other), and only if the
  entry file is owned by the current user and writable by no one else.
  Anything else is ignored, and the module compiled, with one warning per
  folder and cause per process;
- a corrupt, truncated, foreign (another key's) or other-format entry is
  recompiled, never executed.

Loading the object code into an engine is llvm/machine_code.py's (`jit_object`).

The key hashes the module text, the compile options, the target
(`_target_fingerprint`), the llvmlite and numpy versions and the compiler's
own source files (every .py below hlo/, passes/, backend_cpu/: path, size, mtime),
so a changed compiler never loads stale code. Entries are written atomically
(temp file + rename); beyond MAX_ENTRIES entries the oldest are deleted
(checked on a process's first write, then every EVICT_CHECK_EVERY writes).
Only pipelines named by value (None, "default") are cached: a callable's
behaviour is not part of the key.

Two kinds of entries live in sub-folders of their own (same checks, same format,
evicted apart): `kernels` (kernel_cache.py: one kernel body's object code each,
shared by every module that has that kernel) and `gemm` (gemm/library.py: one
GEMM library routine's object code each, shared by every module that calls it).
`Folder(name)` is such a sub-folder, with the same `key`, `load` and `store`.
"""
from __future__ import annotations

import functools
import hashlib
import os
import stat
import tempfile
import threading
import warnings
from pathlib import Path

import llvmlite
import numpy

from . import cache_format, target as targets

FORMAT = "xlapy-compiled-3"   # 3: plain data (cache_format.py) instead of pickles
SUFFIX = ".xlc"
_LEGACY_SUFFIXES = (".pkl",)  # entries of older formats, never read: evicted first
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


def _target_fingerprint() -> str:
    """The target the cached code is generated for (target.py: the current compile's,
    its triple, CPU name and exact feature string), for every key (of modules and of
    GEMM library routines)."""
    return targets.current().fingerprint()


def _compiler_sources() -> tuple[Path, list[Path]]:
    """The folder holding the compiler's packages, and every .py file of them
    (hlo/, passes/, backend_cpu/, their subpackages included), in a stable order."""
    root = Path(__file__).resolve().parent.parent
    return root, [path for package in ("hlo", "passes", "backend_cpu")
                  for path in sorted((root / package).rglob("*.py"))]


@functools.lru_cache(maxsize=None)
def _compiler_fingerprint() -> str:
    """Hash of the compiler's own source and of the library versions."""
    digest = hashlib.sha256(f"{FORMAT} llvmlite {llvmlite.__version__} "
                            f"numpy {numpy.__version__}".encode())
    root, paths = _compiler_sources()
    for path in paths:
        # Size and modification time stand for the content: any edit changes them,
        # and a stat is ten times cheaper than reading the file (this runs per process).
        info = path.stat()
        digest.update(f"{path.relative_to(root)}:{info.st_size}:{info.st_mtime_ns};".encode())
    return digest.hexdigest()


def key(module_text: str, options_fingerprint: str) -> str:
    digest = hashlib.sha256(_compiler_fingerprint().encode())
    digest.update(_target_fingerprint().encode())
    digest.update(options_fingerprint.encode())
    digest.update(module_text.encode())
    return digest.hexdigest()


# --- who may have written the folder and its entries -------------------------------------

_warned: set = set()
_warned_lock = threading.Lock()


def _warn_once(folder: Path, cause: str, message: str) -> None:
    with _warned_lock:
        if (str(folder), cause) in _warned:
            return
        _warned.add((str(folder), cause))
    warnings.warn(f"xlapy disk cache: {message}", RuntimeWarning, stacklevel=2)


def _only_owner_writes(info: os.stat_result) -> bool:
    """True unless group or others may write the file or folder `info` describes."""
    return not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


_UNSAFE_FOLDER = ("; compiled code is neither loaded from nor stored there (use a folder "
                  "only you can write, or set XLAPY_DISABLE_DISK_CACHE=1)")


def _trusted_folder(folder: Path, info: os.stat_result) -> bool:
    """True if only the current user can put files in the folder `info` describes.
    Warns once per folder when it is someone else's or shared."""
    if not stat.S_ISDIR(info.st_mode):
        return False
    if info.st_uid != os.getuid():
        _warn_once(folder, "owner", f"{folder} belongs to uid {info.st_uid}, not to you "
                                    f"(uid {os.getuid()}){_UNSAFE_FOLDER}")
        return False
    if not _only_owner_writes(info):
        _warn_once(folder, "mode", f"{folder} is writable by group or others "
                                   f"(mode {stat.S_IMODE(info.st_mode):o}){_UNSAFE_FOLDER}")
        return False
    return True


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
    | getattr(os, "O_NONBLOCK", 0)     # a FIFO must not hang the load


def _read_entry(folder: Path, name: str) -> bytes | None:
    """The bytes of entry `name` if the folder and the file pass the checks (see the
    module docstring), else None. The checks are made on the open folder and file
    (fstat), so renaming either between check and read does not get around them."""
    try:
        folder_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                            | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None                          # no folder yet: nothing to load
    try:
        if not _trusted_folder(folder, os.fstat(folder_fd)):
            return None
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=folder_fd)
        except OSError:
            return None                      # missing (the usual miss), or a symlink
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            if info.st_uid != os.getuid() or not _only_owner_writes(info):
                _warn_once(folder, "entry", f"ignored {name} in {folder}: it belongs to uid "
                                            f"{info.st_uid} (you are uid {os.getuid()}) or "
                                            f"others can write it (mode "
                                            f"{stat.S_IMODE(info.st_mode):o}); the module is "
                                            f"compiled again")
                return None
            return f.read()
    finally:
        os.close(folder_fd)


def load(entry_key: str, sub: str | None = None) -> dict | None:
    """The payload stored under `entry_key` (in sub-folder `sub`), or None (missing,
    untrusted, corrupt, another format or key: the caller compiles)."""
    folder = cache_dir()
    if folder is None:
        return None
    if sub is not None:
        folder = folder / sub
    data = _read_entry(folder, f"{entry_key}{SUFFIX}")
    if data is None:
        return None
    try:
        return cache_format.loads(data, key=entry_key, format=FORMAT)
    except Exception:        # corrupt, truncated, tampered with: recompile
        return None


def _writable_folder(folder: Path) -> bool:
    """Creates the folder (mode 0700, whatever the umask) if missing; True if it is
    one only the current user can write."""
    try:
        folder.mkdir(mode=0o700, parents=True)
        os.chmod(folder, 0o700)
    except FileExistsError:
        pass
    return _trusted_folder(folder, os.stat(folder))


def store(entry_key: str, payload: dict, sub: str | None = None) -> None:
    """Writes `payload` under `entry_key` (in sub-folder `sub`). A payload that is not
    plain data raises cache_format.FormatError (a bug to fix: a new field or thunk
    kind); a read-only or full disk only costs the next compile."""
    folder = cache_dir()
    if folder is None:
        return
    if sub is not None:
        if not _writable_folder(folder):      # the parent is checked and made private too
            return
        folder = folder / sub
    data = cache_format.dumps(payload, key=entry_key, format=FORMAT)
    try:
        if not _writable_folder(folder):
            return
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")     # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, folder / f"{entry_key}{SUFFIX}")
        except BaseException:
            _unlink(tmp)
            raise
        _evict(folder)
    except OSError:
        pass


def _unlink(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# Listing the folder costs ~10 ms at a thousand entries: a process lists it on its
# first write and then once every EVICT_CHECK_EVERY writes, not on every write.
EVICT_CHECK_EVERY = 50
_writes_until_check = 0


def _evict(folder: Path) -> None:
    """Keeps about MAX_ENTRIES entries (checked every EVICT_CHECK_EVERY writes of this
    process, whichever folder they went to): the least recently written go first."""
    global _writes_until_check
    if _writes_until_check > 0:
        _writes_until_check -= 1
        return
    _writes_until_check = EVICT_CHECK_EVERY - 1
    with os.scandir(folder) as it:
        entries = [e for e in it if e.name.endswith((SUFFIX,) + _LEGACY_SUFFIXES)]
    if len(entries) <= MAX_ENTRIES:
        return
    # Legacy entries first (never read again), then the oldest.
    entries.sort(key=lambda e: (not e.name.endswith(_LEGACY_SUFFIXES), e.stat().st_mtime))
    for entry in entries[:len(entries) - MAX_ENTRIES * 9 // 10]:
        _unlink(entry.path)


class Folder:
    """A sub-folder of the cache for one kind of entry (see the module docstring), with
    the module-level `key`, `load` and `store`."""

    def __init__(self, name: str):
        self.name = name

    @staticmethod
    def key(text: str, options_fingerprint: str) -> str:
        return key(text, options_fingerprint)

    def load(self, entry_key: str) -> dict | None:
        return load(entry_key, self.name)

    def store(self, entry_key: str, payload: dict) -> None:
        store(entry_key, payload, self.name)


kernels = Folder("kernels")
gemm = Folder("gemm")
