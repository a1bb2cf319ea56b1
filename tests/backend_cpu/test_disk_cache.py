"""The persistent compilation cache: a second compile (as in a second process) loads
the executable from disk instead of compiling; disabled by an environment variable."""
from __future__ import annotations

import numpy as np

import backend_cpu
import hlo

TEXT = """HloModule cached
ENTRY e {
  x = f32[64] parameter(0)
  ROOT y = f32[64] exponential(x)
}"""
NO_MEMORY = backend_cpu.CompileOptions(cache=False)


def test_second_compile_loads_from_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    first = backend_cpu.compile(hlo.parse_module(TEXT), NO_MEMORY)
    entries = list(tmp_path.glob("*.pkl"))
    assert len(entries) == 1
    second = backend_cpu.compile(hlo.parse_module(TEXT), NO_MEMORY)
    assert second is not first
    np.testing.assert_array_equal(second.run(x)[0], first.run(x)[0])
    assert second.as_llvm_ir() == first.as_llvm_ir()
    assert second.compile_seconds < first.compile_seconds


def test_corrupt_entry_is_recompiled(tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    backend_cpu.compile(hlo.parse_module(TEXT), NO_MEMORY)
    (entry,) = tmp_path.glob("*.pkl")
    entry.write_bytes(b"not a pickle")
    executable = backend_cpu.compile(hlo.parse_module(TEXT), NO_MEMORY)
    np.testing.assert_allclose(executable.run(np.zeros(64, np.float32))[0], 1.0)


def test_disabled_by_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("XLAPY_DISABLE_DISK_CACHE", "1")
    backend_cpu.compile(hlo.parse_module(TEXT), NO_MEMORY)
    assert list(tmp_path.iterdir()) == []


def test_old_entries_are_evicted(tmp_path, monkeypatch):
    from backend_cpu import disk_cache
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    monkeypatch.setattr(disk_cache, "MAX_ENTRIES", 10)
    monkeypatch.setattr(disk_cache, "EVICT_CHECK_EVERY", 1)
    monkeypatch.setattr(disk_cache, "_writes_until_check", 0)
    for i in range(12):
        disk_cache.store(f"k{i}", {"program": None})
    assert len(list(tmp_path.glob("*.pkl"))) <= 10


def test_eviction_lists_the_folder_only_every_few_writes(tmp_path, monkeypatch):
    from backend_cpu import disk_cache
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    monkeypatch.setattr(disk_cache, "MAX_ENTRIES", 4)
    monkeypatch.setattr(disk_cache, "EVICT_CHECK_EVERY", 5)
    monkeypatch.setattr(disk_cache, "_writes_until_check", 0)
    for i in range(5):            # the first write checks (1 entry), the next 4 do not
        disk_cache.store(f"k{i}", {"program": None})
    assert len(list(tmp_path.glob("*.pkl"))) == 5
    disk_cache.store("k5", {"program": None})       # the 6th write checks again
    assert len(list(tmp_path.glob("*.pkl"))) <= 4


def test_the_thread_count_is_part_of_the_key(tmp_path, monkeypatch):
    """Kernels cut their work units for the intra-op thread count: a module compiled
    for one thread is not what a two-thread process should load (nor get from memory)."""
    import runtime
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    saved = runtime.get_options().intra_op_threads
    try:
        runtime.configure(intra_op_threads=1)
        one = backend_cpu.compile(hlo.parse_module(TEXT))
        runtime.configure(intra_op_threads=2)
        two = backend_cpu.compile(hlo.parse_module(TEXT))
        assert two is not one
        assert len(list(tmp_path.glob("*.pkl"))) == 2
        runtime.configure(intra_op_threads=1)
        assert backend_cpu.compile(hlo.parse_module(TEXT)) is one
    finally:
        runtime.configure(intra_op_threads=saved)
