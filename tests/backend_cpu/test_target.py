"""The compile target (backend_cpu/target.py): ISA levels, named CPUs, other
architectures, the environment variable, cache keys, and code for targets the
host cannot run (compiled and printed, never executed)."""
from __future__ import annotations

import dataclasses
import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.backend_cpu import target as targets
from tests.targets import ISA_LEVELS, IsaCase

ADD_ONE = """HloModule add_one
ENTRY e {
  x = f32[4096] parameter(0)
  one = f32[] constant(1)
  b = f32[4096] broadcast(one), dimensions={}
  ROOT r = f32[4096] add(x, b)
}"""
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("level,bits,feature,absent", [
    ("sse4.2", 128, "sse4.2", "avx"), ("avx2", 256, "avx2", "avx512f"),
    ("avx512", 512, "avx512f", None)])
def test_each_level_has_its_width_and_features(level, bits, feature, absent):
    t = targets.resolve(max_isa=level)
    assert (t.isa, t.vector_bits, t.vector_bytes) == (level, bits, bits // 8)
    assert t.vector_registers == (32 if bits == 512 else 16)
    assert t.has(feature)
    if absent:
        assert not t.has(absent)
    assert t.lanes(4) == bits // 32 and t.lanes(8) == bits // 64
    assert t.runs_on_host == (level in targets.levels_on_host())


def test_levels_below_the_host_keep_its_cpu_and_run():
    host = targets.host()
    for level in targets.levels_on_host():
        t = targets.resolve(max_isa=level)
        assert t.cpu == host.cpu and t.runs_on_host and t.triple == host.triple


def test_the_host_and_its_caps_share_its_l2_and_other_cpus_take_the_default():
    host = targets.host()
    assert host.l2 >= 128 * 1024
    for level in targets.levels_on_host():
        assert targets.resolve(max_isa=level).l2 == host.l2
    assert targets.resolve(cpu="znver4", max_isa="avx2").l2 == targets.DEFAULT_L2_BYTES
    assert targets.resolve(triple="aarch64-linux-gnu").l2 == targets.DEFAULT_L2_BYTES


def test_the_l2_size_is_part_of_the_fingerprint():
    # It sizes the GEMM's blocks, so machine code compiled for one L2 is not reused
    # (from the disk cache) on a machine with another.
    target = targets.resolve(max_isa="sse4.2")
    other = dataclasses.replace(target, l2_bytes=target.l2 * 2)
    assert other.fingerprint() != target.fingerprint()


def test_levels_above_the_host_compile_for_the_generic_cpu_of_the_level():
    for level in ISA_LEVELS:
        if level not in targets.levels_on_host():
            t = targets.resolve(max_isa=level)
            assert t.cpu.startswith("x86-64-v") and not t.runs_on_host


def test_a_named_cpu_and_a_cap_take_the_lower_level():
    t = targets.resolve(cpu="znver4", max_isa="avx2")
    assert (t.cpu, t.isa, t.vector_bits) == ("znver4", "avx2", 256)
    assert not t.has("avx512f")
    assert targets.resolve(cpu="haswell").isa == "avx2"


@pytest.mark.parametrize("kwargs,message", [
    ({"max_isa": "avx3"}, "unknown ISA level 'avx3'"),
    ({"cpu": "pentium"}, "unknown CPU 'pentium'"),
    ({"triple": "nonsense-arch-none"}, "LLVM has no target"),
    ({"triple": "aarch64-linux-gnu", "max_isa": "avx2"}, "applies to x86 targets")])
def test_bad_targets_are_one_clear_error(kwargs, message):
    with pytest.raises(targets.TargetError, match=message):
        targets.resolve(**kwargs)


def test_environment_variable_caps_the_default(monkeypatch):
    monkeypatch.setenv(targets.ENV_MAX_ISA, "sse4.2")
    assert targets.default().isa == "sse4.2"
    exe = backend_cpu.compile(hlo.parse_module(ADD_ONE))
    assert exe.target.isa == "sse4.2"
    monkeypatch.setenv(targets.ENV_MAX_ISA, "avx-9")
    with pytest.raises(targets.TargetError, match="XLAPY_CPU_MAX_ISA='avx-9'"):
        targets.default()


def test_the_target_is_part_of_the_cache_key(isa):
    """Each level compiles its own executable (the in-memory cache keys on the
    target), and the code is the level's."""
    module = hlo.parse_module(ADD_ONE)
    exe = isa.compile(module)
    assert exe.target == isa.target
    others = [IsaCase(level).compile(module) for level in ISA_LEVELS if level != isa.level]
    assert all(other is not exe for other in others)
    assert isa.compile(module) is exe
    assert isa.vector_type("f32") in exe.as_llvm_ir()
    if isa.runs:
        x = np.arange(4096, dtype=np.float32)
        np.testing.assert_array_equal(exe.run(x)[0], x + 1)


def test_code_for_another_architecture_is_printed_not_run():
    exe = backend_cpu.compile(hlo.parse_module(ADD_ONE),
                              backend_cpu.CompileOptions(triple="aarch64-linux-gnu"))
    asm = exe.as_asm()
    assert "FPCR" in asm                       # flush-to-zero, the AArch64 way
    assert not re.search(r"%[re]?[abcd]x|xmm|ymm|zmm", asm)
    assert "llvm.x86" not in exe.as_llvm_ir()
    with pytest.raises(RuntimeError, match="cannot execute"):
        exe.run(np.zeros(4096, np.float32))


def _corpus_modules():
    return sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "*.hlo")))


def test_every_corpus_case_compiles_for_aarch64():
    """The backend has a portable form of everything: no x86 intrinsic without a
    fallback (compile only: there is no ARM machine here)."""
    options = backend_cpu.CompileOptions(pipeline="default", triple="aarch64-linux-gnu",
                                         cache=False, disk_cache=False)
    kernels = 0
    for path in _corpus_modules():
        if path.endswith(".opt.hlo"):
            continue                    # the unoptimized twin goes through the same paths
        with open(path) as f:
            exe = backend_cpu.compile(hlo.parse_module(f.read()), options)
        assert "llvm.x86" not in exe.as_llvm_ir(), path
        asm = exe.as_asm()
        assert not re.search(r"%(r[a-z0-9]+|xmm\d|ymm\d|zmm\d)", asm), path
        kernels += asm.count("\tret")
    assert kernels > 100


def test_hlo_opt_emits_assembly_for_a_target(tmp_path):
    path = tmp_path / "add_one.hlo"
    path.write_text(ADD_ONE)
    hlo_opt = [sys.executable, "-c", "from xlapy.frontend.hlo_opt import main; raise SystemExit(main())"]
    done = subprocess.run(hlo_opt + [str(path), "--emit=asm", "--target-triple=aarch64-linux-gnu"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "FPCR" in done.stdout
    done = subprocess.run(hlo_opt + [str(path), "--run", "--target-triple=aarch64-linux-gnu"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "cannot execute" in done.stderr
    done = subprocess.run(hlo_opt + [str(path), "--emit=asm", "--cpu=pentium"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0 and done.stderr.startswith("hlo-opt: error: unknown CPU")


def test_jit_compile_takes_a_level(isa):
    from xlapy.frontend import jit_compile, ops
    f = jit_compile(lambda x: ops.exp(x) * 2.0, max_isa=isa.level)
    x = np.linspace(-3, 3, 4096, dtype=np.float32)
    compiled = f.lower(x).compile()
    assert isa.uses_full_vectors(compiled.as_asm())
    if isa.runs:
        np.testing.assert_allclose(f(x), np.exp(x) * 2, rtol=2e-6)
    with pytest.raises(targets.TargetError):
        jit_compile(lambda x: x, max_isa="mmx")


def test_gemm_library_routines_are_compiled_per_target():
    """The process-wide GEMM routines carry the target in their names: a dot compiled
    for AVX2 never calls the micro-kernel compiled for AVX-512, or the reverse."""
    import re as _re
    text = """HloModule dot_per_target
ENTRY e {
  a = f32[96,128] parameter(0)
  b = f32[128,80] parameter(1)
  ROOT d = f32[96,80] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (96, 128)).astype(np.float32)
    b = rng.uniform(-1, 1, (128, 80)).astype(np.float32)
    called = {}
    for level in ISA_LEVELS:
        case = IsaCase(level)
        exe = case.compile(hlo.parse_module(text))
        called[level] = set(_re.findall(r"declare void @\"?(xlapy\.gemm\.[\w.]+)", exe.as_llvm_ir()))
        assert called[level] and all(case.target.tag in name for name in called[level])
        if case.runs:
            np.testing.assert_allclose(exe.run(a, b)[0], a @ b, rtol=1e-5, atol=1e-5)
    assert not called["avx2"] & called["avx512"]


def test_the_target_is_part_of_the_disk_cache_key():
    from xlapy.backend_cpu import disk_cache
    keys = set()
    for level in ISA_LEVELS:
        with targets.using(targets.resolve(max_isa=level)):
            keys.add(disk_cache.key(ADD_ONE, "pipeline=None"))
    assert len(keys) == len(ISA_LEVELS)
