"""The persistent compilation cache (backend_cpu/disk_cache.py, cache_format.py).

A second compile (as in a second process) loads the executable from disk
instead of compiling, and gives the same numbers. Entries are plain data:
nothing in an entry can run code while it is read, and an entry someone else
could have written -- a foreign owner, a folder others can write, a flipped
byte, a truncated file, a pickle -- is recompiled, never executed.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import pickle
import pkgutil
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.backend_cpu import cache_format, compiler, disk_cache
from tests.backend_cpu.helpers import uniquify
from tests.corpus_util import assert_close

ROOT = Path(__file__).resolve().parents[2]
TEXT = """HloModule cached
ENTRY e {
  x = f32[64] parameter(0)
  ROOT y = f32[64] exponential(x)
}"""
NO_MEMORY = backend_cpu.CompileOptions(cache=False)
X = np.linspace(-3, 3, 64, dtype=np.float32)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A cache folder of this test's own (not created yet), the disk cache switched on."""
    path = tmp_path / "cache"
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(path))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    return path


class Compiles:
    """Counts real compiles (cache misses) of backend_cpu.compile."""

    def __init__(self, monkeypatch):
        self.count = 0
        real = compiler._compile_module

        def counting(*args, **kwargs):
            self.count += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(compiler, "_compile_module", counting)


@pytest.fixture
def compiles(monkeypatch):
    return Compiles(monkeypatch)


def compile_text(text: str):
    return backend_cpu.compile(hlo.parse_module(text), NO_MEMORY)


def entries(path: Path) -> list[Path]:
    return sorted(path.glob(f"*{disk_cache.SUFFIX}"))


def only_entry(path: Path) -> Path:
    (entry,) = entries(path)
    return entry


# --- round trips of several module kinds ---------------------------------------------------

MODULES = {
    "while": ("""HloModule loop
cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  w = f32[8] multiply(v, hb)
  t = f32[8] tanh(w)
  ROOT r = (s32[], f32[8]) tuple(j, t)
}
ENTRY e {
  x = f32[8] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[8]) tuple(z, x)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  ROOT out = f32[8] get-tuple-element(w), index=1
}""", [np.linspace(-4, 4, 8, dtype=np.float32)]),
    "conditional_pred": ("""HloModule cond_pred
yes {
  a = f32[4] parameter(0)
  ROOT n = f32[4] negate(a)
}
no {
  b = f32[4] parameter(0)
  ROOT e = f32[4] exponential(b)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[4] parameter(1)
  ROOT c = f32[4] conditional(p, x, x), true_computation=yes, false_computation=no
}""", [np.array(False), np.array([0, 1, -1, 2], np.float32)]),
    "conditional_index": ("""HloModule cond_index
b0 {
  a = s32[3] parameter(0)
  ROOT n = s32[3] negate(a)
}
b1 {
  a = s32[3] parameter(0)
  ROOT m = s32[3] multiply(a, a)
}
b2 {
  a = s32[3] parameter(0)
  ROOT c = s32[3] copy(a)
}
ENTRY e {
  i = s32[] parameter(0)
  x = s32[3] parameter(1)
  ROOT c = s32[3] conditional(i, x, x, x), branch_computations={b0, b1, b2}
}""", [np.array(1, np.int32), np.array([3, -4, 5], np.int32)]),
    "call": ("""HloModule called
f {
  a = f32[6] parameter(0)
  b = f32[6] parameter(1)
  s = f32[6] add(a, b)
  ROOT l = f32[6] log(s)
}
ENTRY e {
  x = f32[6] parameter(0)
  y = f32[6] parameter(1)
  ROOT c = f32[6] call(x, y), to_apply=f
}""", [np.arange(1, 7, dtype=np.float32), np.full(6, 0.5, np.float32)]),
    # The key is f(x) = -x (the comparator's steps are HLO instructions), a value
    # rides along: a numpy sort thunk (sort_thunk.py).
    "sort": ("""HloModule sorted
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  na = f32[] negate(a)
  nb = f32[] negate(b)
  ROOT lt = pred[] compare(na, nb), direction=LT
}
ENTRY e {
  k = f32[4,16] parameter(0)
  v = s32[4,16] parameter(1)
  ROOT s = (f32[4,16], s32[4,16]) sort(k, v), dimensions={1}, to_apply=cmp
}""", [np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32),
       np.arange(64, dtype=np.int32).reshape(4, 16)]),
    "gemm": ("""HloModule gemm
ENTRY e {
  a = f32[40,96] parameter(0)
  b = f32[96,80] parameter(1)
  ROOT d = f32[40,80] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", [np.random.default_rng(2).uniform(-1, 1, (40, 96)).astype(np.float32),
       np.random.default_rng(3).uniform(-1, 1, (96, 80)).astype(np.float32)]),
    "conv": ("""HloModule conv
ENTRY e {
  x = f32[2,10,10,8] parameter(0)
  k = f32[3,3,8,16] parameter(1)
  ROOT c = f32[2,10,10,16] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}""", [np.random.default_rng(4).standard_normal((2, 10, 10, 8)).astype(np.float32),
       np.random.default_rng(5).standard_normal((3, 3, 8, 16)).astype(np.float32)]),
    # Constants of several dtypes, one with a column-major layout, and a tuple result.
    "constants_tuple": ("""HloModule constants
ENTRY e {
  h = f16[4] parameter(0)
  ch = f16[4] constant({0.5, -1.5, 65504, 0.000061})
  sh = f16[4] add(h, ch)
  m = pred[4] constant({1, 0, 0, 1})
  hz = f16[4] constant({0, 0, 0, 0})
  sel = f16[4] select(m, sh, hz)
  i = s8[3] parameter(1)
  ci = s8[3] constant({-128, 7, 127})
  xi = s8[3] xor(i, ci)
  d = f64[2,3] parameter(2)
  cd = f64[2,3]{0,1} constant({{1e-300, 2, 3}, {4, 5, 1e300}})
  md = f64[2,3] multiply(d, cd)
  u = u32[2] constant({4294967295, 1})
  b = pred[4] constant({0, 1, 1, 0})
  ROOT t = (f16[4], s8[3], f64[2,3], u32[2], pred[4]) tuple(sel, xi, md, u, b)
}""", [np.array([1, 2, 3, 4], np.float16), np.array([1, 2, 3], np.int8),
       np.arange(6, dtype=np.float64).reshape(2, 3)]),
}
# Long sums (in another order than the evaluator's): the GEMM tests' tolerance.
SUMS = ("gemm", "conv")
MODULES = {kind: (uniquify(text), args) for kind, (text, args) in MODULES.items()}


@pytest.mark.parametrize("kind", sorted(MODULES))
def test_round_trip_loads_from_disk_and_gives_the_same_numbers(kind, folder, compiles):
    text, args = MODULES[kind]
    first = compile_text(text)
    assert compiles.count == 1
    assert entries(folder)          # the module (and maybe GEMM library routines)
    second = compile_text(text)
    assert compiles.count == 1, "the second compile did not load from disk"
    assert second is not first
    expected = hlo.evaluate(hlo.parse_module(text), list(args))
    a, b = first.run(*args), second.run(*args)
    assert len(a) == len(b) == len(expected)
    for i, (x, y, e) in enumerate(zip(a, b, expected)):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y, err_msg=f"{kind} output {i}")
        if kind in SUMS:
            np.testing.assert_allclose(y, e, rtol=1e-4, atol=1e-4, err_msg=kind)
        else:
            assert_close(y, np.asarray(e), f"{kind} output {i}")
    assert second.as_hlo_text() == first.as_hlo_text()
    assert second.memory_stats() == first.memory_stats()


def test_the_loaded_sort_keeps_its_comparator(folder, compiles):
    from xlapy.backend_cpu.sort_thunk import SortThunk
    text, args = MODULES["sort"]
    compile_text(text)
    loaded = compile_text(text)
    (thunk,) = [t for t in loaded._program.thunks if isinstance(t, SortThunk)]
    assert [s.opcode for s in thunk.key.steps] == ["parameter", "negate"]
    assert thunk.comparator.root.opcode == "compare"
    # A NaN makes the reference's merge sort order the row: the loaded comparator runs.
    keys = args[0].copy()
    keys[2, 5] = np.nan
    expected = hlo.evaluate(hlo.parse_module(text), [keys, args[1]])
    for out, e in zip(loaded.run(keys, args[1]), expected):
        assert_close(out, np.asarray(e), "sort with a NaN key")
    assert thunk.reference_runs == 1


def test_a_fresh_process_loads_everything_from_disk(tmp_path):
    """The second process neither optimizes nor generates code: the module (a while loop
    around a dot, with constants) and its GEMM library routines come from the disk."""
    text = """HloModule fresh
cond {
  s = (s32[], f32[40,80]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(2)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[40,80]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[40,80] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = f32[80,80] constant({...})
  d = f32[40,80] dot(v, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (s32[], f32[40,80]) tuple(j, d)
}
ENTRY e {
  x = f32[40,80] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[40,80]) tuple(z, x)
  w = (s32[], f32[40,80]) while(init), condition=cond, body=body
  ROOT out = f32[40,80] get-tuple-element(w), index=1
}"""
    w = np.random.default_rng(7).uniform(-0.2, 0.2, (80, 80)).astype(np.float32)
    rows = ", ".join("{" + ", ".join(repr(float(v)) for v in row) + "}" for row in w)
    text = uniquify(text).replace("{...}", "{" + rows + "}")
    child = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import numpy as np
from xlapy import backend_cpu, hlo
from xlapy.backend_cpu.llvm import machine_code, target_machine
if sys.argv[1] == "load":
    def refuse(*args, **kwargs):
        raise AssertionError("compiled instead of loading")
    machine_code.jit_module = refuse
    target_machine.optimize = refuse
exe = backend_cpu.compile(hlo.parse_module({text!r}))
x = np.random.default_rng(8).uniform(-1, 1, (40, 80)).astype(np.float32)
np.save(sys.argv[2], exe.run(x)[0])
"""
    env = {"XLAPY_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    script = tmp_path / "child.py"
    script.write_text(child)
    outputs = []
    for step in ("compile", "load"):
        out = tmp_path / f"{step}.npy"
        done = subprocess.run([sys.executable, str(script), step, str(out)], capture_output=True,
                              text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(np.load(out, allow_pickle=False))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    x = np.random.default_rng(8).uniform(-1, 1, (40, 80)).astype(np.float32)
    expected = hlo.evaluate(hlo.parse_module(text), [x])[0]
    np.testing.assert_allclose(outputs[1], expected, rtol=1e-4, atol=1e-4)


def test_second_compile_loads_from_disk(folder):
    first = compile_text(TEXT)
    second = compile_text(TEXT)
    assert second is not first
    np.testing.assert_array_equal(second.run(X)[0], first.run(X)[0])
    assert second.as_llvm_ir() == first.as_llvm_ir()
    assert second.compile_seconds < first.compile_seconds


def test_the_folder_is_created_private(folder):
    saved = os.umask(0)          # mode 0700 whatever the umask
    try:
        compile_text(TEXT)
    finally:
        os.umask(saved)
    assert folder.stat().st_mode & 0o777 == 0o700
    assert only_entry(folder).stat().st_mode & 0o777 == 0o600


def test_nothing_on_the_load_path_unpickles(folder, compiles, monkeypatch):
    compile_text(TEXT)

    def no_pickles(*args, **kwargs):
        raise AssertionError("the disk cache unpickled something")
    monkeypatch.setattr(pickle, "load", no_pickles)
    monkeypatch.setattr(pickle, "loads", no_pickles)
    monkeypatch.setattr(pickle, "Unpickler", no_pickles)
    monkeypatch.setattr(np, "load", no_pickles)
    loaded = compile_text(TEXT)
    assert compiles.count == 1
    np.testing.assert_allclose(loaded.run(X)[0], np.exp(X), rtol=2e-5, atol=1e-6)


# --- entries that must not be used ---------------------------------------------------------

def expect_recompiled(folder, compiles, before: int) -> None:
    executable = compile_text(TEXT)
    assert compiles.count == before + 1, "a bad entry was used"
    np.testing.assert_allclose(executable.run(X)[0], np.exp(X), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("where", ["magic", "digest", "length", "json", "middle", "last"])
def test_a_flipped_byte_is_recompiled(where, folder, compiles):
    compile_text(TEXT)
    entry = only_entry(folder)
    data = bytearray(entry.read_bytes())
    (json_length,) = struct.unpack_from("<Q", data, 40)
    position = {"magic": 3, "digest": 20, "length": 41, "json": 48 + json_length // 2,
                "middle": len(data) // 2, "last": len(data) - 1}[where]
    data[position] ^= 0x01
    entry.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expect_recompiled(folder, compiles, 1)
    # A corrupt entry of our own is recompiled without a warning.
    assert not [w for w in caught if "xlapy disk cache" in str(w.message)]


@pytest.mark.parametrize("keep", [0, 10, 47, "half", "all but one"])
def test_a_truncated_entry_is_recompiled(keep, folder, compiles):
    compile_text(TEXT)
    entry = only_entry(folder)
    data = entry.read_bytes()
    keep = {"half": len(data) // 2, "all but one": len(data) - 1}.get(keep, keep)
    entry.write_bytes(data[:keep])
    expect_recompiled(folder, compiles, 1)


def test_an_entry_with_trailing_bytes_is_recompiled(folder, compiles):
    compile_text(TEXT)
    entry = only_entry(folder)
    entry.write_bytes(entry.read_bytes() + b"\0")
    expect_recompiled(folder, compiles, 1)


class _Marker:
    """A pickle that creates a file when it is loaded."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _rewrite(entry: Path, edit) -> None:
    """Rewrites an entry's JSON header with `edit(header, blobs)`, keeping it well formed
    (a consistent length and a valid checksum): what a deliberate forger would write."""
    data = entry.read_bytes()
    (length,) = struct.unpack_from("<Q", data, 40)
    header = json.loads(data[48:48 + length])
    blobs, offset = [], 48 + length
    for n in header["blobs"]:
        blobs.append(data[offset:offset + n])
        offset += n
    edit(header, blobs)
    header["blobs"] = [len(b) for b in blobs]
    text = json.dumps(header).encode()
    rest = struct.pack("<Q", len(text)) + text + b"".join(blobs)
    import hashlib
    magic = cache_format.MAGIC
    entry.write_bytes(magic + hashlib.sha256(magic + rest).digest() + rest)


def _find(value, test):
    """The first dict inside a decoded JSON value for which `test` holds."""
    if isinstance(value, dict):
        if test(value):
            return value
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            hit = _find(v, test)
            if hit is not None:
                return hit
    return None


def test_a_pickle_in_place_of_an_entry_is_recompiled_and_never_loaded(folder, compiles, tmp_path):
    marker = tmp_path / "pwned"
    compile_text(TEXT)
    only_entry(folder).write_bytes(pickle.dumps({"program": _Marker(marker)}))
    expect_recompiled(folder, compiles, 1)
    assert not marker.exists()


@pytest.mark.parametrize("how", ["object_array", "unknown_tag", "unknown_class", "dunder_field"])
def test_a_well_formed_entry_smuggling_a_pickle_is_recompiled(how, folder, compiles, tmp_path):
    """A valid checksum and length do not make an entry trusted data: an object dtype,
    a tag or class the format does not know, a field like __class__: all refused."""
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Marker(marker))
    compile_text(TEXT)

    def edit(header, blobs):
        if how == "object_array":
            array = _find(header["payload"], lambda d: "$array" in d)
            if array is None:                  # no constant here: make one
                array = _find(header["payload"], lambda d: "$bytes" in d)
            blobs.append(payload)
            array.clear()
            array.update({"$array": len(blobs) - 1, "dtype": "|O", "shape": [1],
                          "order": "C"})
        elif how == "unknown_tag":
            slot = _find(header["payload"], lambda d: d.get("$obj") == "Slot")
            blobs.append(payload)
            slot["state"]["array"] = {"$pickle": len(blobs) - 1}
        elif how == "unknown_class":
            thunk = _find(header["payload"], lambda d: d.get("$obj") == "KernelThunk")
            thunk["$obj"] = "posix.system"
            thunk["state"] = {"command": f"touch {marker}"}
        else:
            thunk = _find(header["payload"], lambda d: d.get("$obj") == "KernelThunk")
            thunk["state"]["__class__"] = {"$bytes": 0}
    _rewrite(only_entry(folder), edit)
    expect_recompiled(folder, compiles, 1)
    assert not marker.exists()


def test_an_entry_that_does_not_link_is_recompiled_with_a_warning(folder, compiles):
    """A well-formed entry whose thunk names a function its object code lacks (only a
    bug could write one): a warning, and the module compiled again."""
    compile_text(TEXT)

    def edit(header, blobs):
        thunk = _find(header["payload"], lambda d: d.get("$obj") == "KernelThunk")
        thunk["state"]["name"] = "no_such_kernel"
    _rewrite(only_entry(folder), edit)
    with pytest.warns(RuntimeWarning, match="did not link"):
        expect_recompiled(folder, compiles, 1)


def test_an_entry_stored_under_another_key_is_recompiled(folder, compiles):
    """Copying module A's entry to module B's name does not make B run A's code."""
    other = TEXT.replace("exponential", "negate").replace("cached", "other")
    compile_text(other)
    (entry_a,) = entries(folder)
    compile_text(TEXT)
    (entry_b,) = [e for e in entries(folder) if e != entry_a]
    entry_b.write_bytes(entry_a.read_bytes())
    expect_recompiled(folder, compiles, 2)


def test_an_entry_of_another_format_is_recompiled(folder, compiles):
    compile_text(TEXT)

    def edit(header, blobs):
        header["format"] = "xlapy-compiled-2"
    _rewrite(only_entry(folder), edit)
    expect_recompiled(folder, compiles, 1)


def _as_foreign(monkeypatch, path: Path) -> None:
    """Makes `path` belong to uid 12345: really (as root), else by pretending the
    current user is someone else."""
    if os.getuid() == 0:
        os.chown(path, 12345, 12345)
    else:
        monkeypatch.setattr(os, "getuid", lambda: 12345)


def test_an_entry_owned_by_another_user_is_ignored_with_a_warning(folder, compiles, monkeypatch,
                                                                 tmp_path):
    compile_text(TEXT)
    _as_foreign(monkeypatch, only_entry(folder))
    with pytest.warns(RuntimeWarning, match="uid 12345"):
        expect_recompiled(folder, compiles, 1)


def test_a_folder_owned_by_another_user_is_ignored_with_a_warning(folder, compiles, monkeypatch):
    compile_text(TEXT)
    _as_foreign(monkeypatch, folder)
    with pytest.warns(RuntimeWarning, match="uid 12345"):
        expect_recompiled(folder, compiles, 1)


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o703, 0o1777])
def test_a_folder_others_can_write_is_ignored_with_one_warning(mode, folder, compiles):
    compile_text(TEXT)
    os.chmod(folder, mode)
    before = {e.name: e.stat().st_mtime_ns for e in entries(folder)}
    with pytest.warns(RuntimeWarning, match="writable by group or others") as caught:
        expect_recompiled(folder, compiles, 1)
        expect_recompiled(folder, compiles, 2)
    assert len([w for w in caught if "xlapy disk cache" in str(w.message)]) == 1
    # Nothing was stored there either.
    assert {e.name: e.stat().st_mtime_ns for e in entries(folder)} == before


def test_an_entry_others_can_write_is_ignored(folder, compiles):
    compile_text(TEXT)
    os.chmod(only_entry(folder), 0o666)
    with pytest.warns(RuntimeWarning, match="others can write it"):
        expect_recompiled(folder, compiles, 1)


def test_a_symlinked_entry_is_ignored(folder, compiles, tmp_path):
    compile_text(TEXT)
    entry = only_entry(folder)
    moved = tmp_path / "elsewhere"
    entry.rename(moved)
    entry.symlink_to(moved)
    expect_recompiled(folder, compiles, 1)


def test_a_fifo_in_place_of_an_entry_does_not_hang_the_load(folder, compiles):
    compile_text(TEXT)
    entry = only_entry(folder)
    entry.unlink()
    os.mkfifo(entry, 0o600)
    expect_recompiled(folder, compiles, 1)


def test_old_pickle_entries_are_never_read(folder, compiles, tmp_path):
    marker = tmp_path / "pwned"
    compile_text(TEXT)
    key = only_entry(folder).name[:-len(disk_cache.SUFFIX)]
    only_entry(folder).unlink()
    (folder / f"{key}.pkl").write_bytes(pickle.dumps({"program": _Marker(marker)}))
    expect_recompiled(folder, compiles, 1)
    assert not marker.exists()


def test_disabled_by_environment(folder, monkeypatch):
    monkeypatch.setenv("XLAPY_DISABLE_DISK_CACHE", "1")
    compile_text(TEXT)
    assert not folder.exists()


# --- eviction ------------------------------------------------------------------------------

def test_old_entries_are_evicted(folder, monkeypatch):
    monkeypatch.setattr(disk_cache, "MAX_ENTRIES", 10)
    monkeypatch.setattr(disk_cache, "EVICT_CHECK_EVERY", 1)
    monkeypatch.setattr(disk_cache, "_writes_until_check", 0)
    for i in range(12):
        disk_cache.store(f"k{i}", {"program": None})
    assert len(entries(folder)) <= 10


def test_eviction_lists_the_folder_only_every_few_writes(folder, monkeypatch):
    monkeypatch.setattr(disk_cache, "MAX_ENTRIES", 4)
    monkeypatch.setattr(disk_cache, "EVICT_CHECK_EVERY", 5)
    monkeypatch.setattr(disk_cache, "_writes_until_check", 0)
    for i in range(5):            # the first write checks (1 entry), the next 4 do not
        disk_cache.store(f"k{i}", {"program": None})
    assert len(entries(folder)) == 5
    disk_cache.store("k5", {"program": None})       # the 6th write checks again
    assert len(entries(folder)) <= 4


def test_eviction_removes_old_pickles_first(folder, monkeypatch):
    monkeypatch.setattr(disk_cache, "MAX_ENTRIES", 3)
    monkeypatch.setattr(disk_cache, "EVICT_CHECK_EVERY", 1)
    monkeypatch.setattr(disk_cache, "_writes_until_check", 0)
    disk_cache.store("k0", {"program": None})
    for i in range(3):
        (folder / f"old{i}.pkl").write_bytes(b"x")
    disk_cache.store("k1", {"program": None})
    assert not list(folder.glob("*.pkl"))
    assert len(entries(folder)) == 2


def test_the_thread_count_is_part_of_the_key(folder):
    """Kernels cut their work units for the intra-op thread count: a module compiled
    for one thread is not what a two-thread process should load (nor get from memory)."""
    from xlapy import runtime
    saved = runtime.get_options().intra_op_threads
    try:
        runtime.configure(intra_op_threads=1)
        one = backend_cpu.compile(hlo.parse_module(TEXT))
        runtime.configure(intra_op_threads=2)
        two = backend_cpu.compile(hlo.parse_module(TEXT))
        assert two is not one
        assert len(entries(folder)) == 2
        runtime.configure(intra_op_threads=1)
        assert backend_cpu.compile(hlo.parse_module(TEXT)) is one
    finally:
        runtime.configure(intra_op_threads=saved)


def test_the_compiler_fingerprint_covers_every_source_file_of_the_subpackages_too():
    """A change in backend_cpu/llvm/loops.py (a subpackage) must invalidate the cache as
    one in backend_cpu/compiler.py does: every .py below the packages is hashed, by its
    path (two subpackages may hold files of the same name)."""
    root, paths = disk_cache._compiler_sources()
    names = {str(p.relative_to(root)) for p in paths}
    package = Path(disk_cache.__file__).resolve().parent
    expected = {str(p.relative_to(root)) for p in package.rglob("*.py")}
    assert any(os.sep in str(p.relative_to(package)) for p in package.rglob("*.py"))
    assert expected <= names
    assert os.path.join("backend_cpu", "llvm", "loops.py") in names


def test_the_key_has_a_target_fingerprint(monkeypatch):
    base = disk_cache.key("m", "o")
    monkeypatch.setattr(disk_cache, "_target_fingerprint", lambda: "another machine")
    assert disk_cache.key("m", "o") != base


# --- the format: plain data, explicit about what it can store --------------------------------

def _round_trip(value):
    return cache_format.loads(cache_format.dumps(value, key="k", format="f"), key="k",
                              format="f")


def test_plain_values_round_trip_exactly():
    f_order = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    value = {
        "none": None, "flags": (True, False), "ints": [0, -1, 2**70], "text": "ü\n\"",
        "floats": (1.5, -0.0, float("inf"), float("-inf"), 1e-320),
        3: "int key", (1, "t"): "tuple key",
        "bytes": b"\x00\xff" * 10,
        "f16": np.array([0.5, np.inf, -65504, 6e-8], np.float16),
        "bool": np.array([[True], [False]]),
        "f_order": f_order,
        "empty": np.zeros((0, 3), np.int64),
        "c64": np.array([1 + 2j], np.complex64),
        "dtypes": (np.dtype(np.float16), np.dtype(np.bool_), np.dtype("u8")),
        "scalars": (np.float16(1.5), np.int64(-7), np.bool_(True), np.float32(np.nan)),
    }
    back = _round_trip(value)
    assert back.keys() == value.keys()
    nan = back["floats"]
    assert nan[:2] == (1.5, -0.0) and str(nan[1]) == "-0.0" and nan[2:] == value["floats"][2:]
    for name in ("f16", "bool", "f_order", "empty", "c64"):
        assert back[name].dtype == value[name].dtype and back[name].shape == value[name].shape
        np.testing.assert_array_equal(back[name], value[name])
    assert back["f_order"].flags.f_contiguous and back["f_order"].flags.writeable
    assert back["dtypes"] == value["dtypes"]
    for a, b in zip(back["scalars"], value["scalars"]):
        assert type(a) is type(b) and a.tobytes() == b.tobytes()
    assert back["bytes"] == value["bytes"] and back[3] == "int key"


def test_a_field_of_plain_data_added_to_a_thunk_is_stored():
    from xlapy.backend_cpu.thunks import KernelThunk
    thunk = KernelThunk("k", 4, 100, [0], [1])
    thunk.new_field = {"layout": (1, 0), "scale": 0.5, "names": ["a"]}
    back = _round_trip(thunk)
    assert type(back) is KernelThunk and back.new_field == thunk.new_field
    assert back.kernel is None and back.reads == [0] and back.writes == [1]


def test_a_field_the_format_cannot_store_fails_loudly_at_store_time(folder):
    from xlapy.backend_cpu.thunks import KernelThunk
    thunk = KernelThunk("k", 4, 100, [0], [1])
    thunk.callback = print
    with pytest.raises(cache_format.FormatError, match=r"KernelThunk\.callback"):
        cache_format.dumps({"program": [thunk]}, key="k", format="f")
    with pytest.raises(cache_format.FormatError, match=r"KernelThunk\.callback"):
        disk_cache.store("k", {"thunks": [thunk]})
    assert not folder.exists() or not entries(folder)


def test_an_unregistered_thunk_kind_fails_loudly():
    class NewThunk:
        def __init__(self):
            self.reads, self.writes = [0], [1]

        def link(self, lookup):
            pass

        def run(self, table, address, keep):
            pass
    with pytest.raises(cache_format.FormatError, match="NewThunk"):
        cache_format.dumps([NewThunk()], key="k", format="f")


def test_every_thunk_kind_of_the_backend_is_registered():
    """A class with `link` and `run` in backend_cpu (subpackages included) is a thunk
    kind: the disk cache must know how to store it (else every compile that uses it
    fails at store time)."""
    registered = set(cache_format.registered_classes())
    thunk_kinds = set()
    for info in pkgutil.walk_packages(backend_cpu.__path__, "xlapy.backend_cpu."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and callable(getattr(cls, "link", None)) \
                    and callable(getattr(cls, "run", None)):
                thunk_kinds.add(cls)
    assert thunk_kinds, "found no thunk classes"
    missing = sorted(c.__qualname__ for c in thunk_kinds - registered)
    assert not missing, f"not registered in backend_cpu/cache_format.py: {missing}"
