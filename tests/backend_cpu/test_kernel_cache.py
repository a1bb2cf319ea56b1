"""The kernel-level cache (backend_cpu/kernel_cache.py): a kernel's body is named by
its own content and compiled once -- once for the N identical layers of a model,
once across modules (memory), once across processes (the disk cache) -- and the
numbers stay the evaluator's."""
from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from xlapy.backend_cpu import kernel_cache
from xlapy.runtime import profiler
from tests.corpus_util import assert_close

ROOT = Path(__file__).resolve().parents[2]


def layers_module(n: int, name: str = "layers", width: int = 64) -> str:
    """n identical layers h = tanh(h @ w_i + b_i) * s_i, then a softmax-like tail."""
    params = ["  x = f32[32,%d] parameter(0)" % width]
    body, h = [], "x"
    for i in range(n):
        params.append(f"  w{i} = f32[{width},{width}] parameter({1 + 3 * i})")
        params.append(f"  b{i} = f32[{width}] parameter({2 + 3 * i})")
        params.append(f"  s{i} = f32[32,{width}] parameter({3 + 3 * i})")
        body += [f"  d{i} = f32[32,{width}] dot({h}, w{i}), lhs_contracting_dims={{1}}, "
                 f"rhs_contracting_dims={{0}}",
                 f"  bb{i} = f32[32,{width}] broadcast(b{i}), dimensions={{1}}",
                 f"  a{i} = f32[32,{width}] add(d{i}, bb{i})",
                 f"  t{i} = f32[32,{width}] tanh(a{i})",
                 f"  h{i} = f32[32,{width}] multiply(t{i}, s{i})"]
        h = f"h{i}"
    tail = ["  zero = f32[] constant(0)",
            f"  e = f32[32,{width}] exponential({h})",
            "  r = f32[32] reduce(e, zero), dimensions={1}, to_apply=add",
            "  ROOT out = (f32[32,%d], f32[32]) tuple(%s, r)" % (width, h)]
    return "\n".join([f"HloModule {name}", "add {", "  p = f32[] parameter(0)",
                      "  q = f32[] parameter(1)", "  ROOT s = f32[] add(p, q)", "}",
                      "ENTRY e {", *params, *body, *tail, "}"])


def layer_args(n: int, width: int = 64, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((32, width)).astype(np.float32)]
    for _ in range(n):
        args += [(rng.standard_normal((width, width)) / 8).astype(np.float32),
                 rng.standard_normal(width).astype(np.float32),
                 rng.uniform(0.5, 1.5, (32, width)).astype(np.float32)]
    return args


def compile_traced(text: str, **options):
    """(executable, the "LLVM compile" span's args, bodies compiled meanwhile)."""
    before = Counter(kernel_cache.compile_counts())
    rec = profiler.start()
    try:
        exe = backend_cpu.compile(hlo.parse_module(text), backend_cpu.CompileOptions(
            **{"pipeline": "default", "disk_cache": False, **options}))
    finally:
        profiler.stop()
    (span,) = [e for e in rec.events if e.name == "LLVM compile"]
    compiled = Counter(kernel_cache.compile_counts())
    compiled.subtract(before)
    return exe, span.args, {s: c for s, c in compiled.items() if c}


def check(exe, text: str, args) -> None:
    got = exe.run(*args)
    expected = hlo.evaluate(hlo.parse_module(text), args)
    for g, e in zip(got, expected):
        assert_close(g, e, "f32")


def test_four_identical_layers_compile_each_distinct_kernel_once():
    texts = {n: layers_module(n, f"layers{n}") for n in (2, 4)}
    infos = {}
    for n in (2, 4):
        kernel_cache.clear_memory()
        exe, infos[n], compiled = compile_traced(texts[n], cache=False)
        # each body compiled once, however many kernels call it
        assert all(count == 1 for count in compiled.values()), compiled
        assert infos[n]["compiled"] == infos[n]["kernels"] == len(compiled)
        check(exe, texts[n], layer_args(n))
    # (the last layer fuses with the tail: 2 layers already have every distinct kernel)
    assert infos[4]["kernels"] == infos[2]["kernels"]
    # and each distinct kernel's IR was emitted once (the others replayed on their slots)
    assert infos[4]["emitted"] == infos[2]["emitted"] == infos[4]["kernels"]
    assert infos[4]["kernel_thunks"] == infos[2]["kernel_thunks"] + 4 > infos[4]["kernels"] + 4


def test_a_second_module_takes_its_kernels_from_memory():
    kernel_cache.clear_memory()
    first_text, second_text = layers_module(2, "first"), layers_module(3, "second")
    compile_traced(first_text, cache=True)
    exe, info, compiled = compile_traced(second_text, cache=True)
    assert info["memory"] == info["kernels"] and info["compiled"] == 0 and not compiled
    check(exe, second_text, layer_args(3, seed=1))
    # without the in-memory cache, everything is compiled again (same numbers)
    again, info, compiled = compile_traced(second_text, cache=False)
    assert info["memory"] == 0 and info["compiled"] == info["kernels"] == len(compiled)
    check(again, second_text, layer_args(3, seed=1))


def test_the_same_body_on_other_slots_computes_on_its_own_buffers():
    """Two kernels of one body, reading and writing different slots (the wrappers'
    tables), and a body whose slot numbers differ from the other module's."""
    text = """HloModule twice
ENTRY e {
  a = f32[100] parameter(0)
  b = f32[100] parameter(1)
  c = f32[100] parameter(2)
  x = f32[100] subtract(a, b)
  y = f32[100] subtract(c, x)
  z = f32[100] subtract(y, a)
  ROOT t = (f32[100], f32[100], f32[100]) tuple(x, y, z)
}"""
    kernel_cache.clear_memory()
    exe, info, _ = compile_traced(text, cache=False, pipeline=None)    # three kernels
    assert info["kernels"] == 1 and info["kernel_thunks"] == 3
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(100).astype(np.float32) for _ in range(3)]
    got = exe.run(*args)
    x = args[0] - args[1]
    y = args[2] - x
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], y)
    np.testing.assert_array_equal(got[2], y - args[0])


def test_the_target_and_pipeline_are_part_of_the_key():
    kernel_cache.clear_memory()
    text = layers_module(1, "keyed")
    _, first, _ = compile_traced(text, cache=True, max_isa="sse4.2")
    _, other, _ = compile_traced(text, cache=True, max_isa="avx2")
    assert first["compiled"] == first["kernels"] and other["compiled"] == other["kernels"]


_CHILD = """
import sys
sys.path.insert(0, {root!r})
from tests.backend_cpu.test_kernel_cache import compile_traced, check, layers_module, layer_args
text = layers_module({n}, "process{n}")
exe, info, compiled = compile_traced(text, cache=True, disk_cache=True)
check(exe, text, layer_args({n}))
print(info["kernels"], info["compiled"], info["disk"])
"""


def test_a_second_process_takes_the_kernels_from_the_disk_cache(tmp_path):
    """A module of 3 layers in a fresh process after one of 2: every body comes from the
    disk cache (the module itself is another: not cached whole)."""
    env = {**os.environ, "XLAPY_CACHE_DIR": str(tmp_path), "XLAPY_DISABLE_DISK_CACHE": "0"}

    def run(n: int) -> list[int]:
        code = _CHILD.format(root=str(ROOT), n=n)
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        return [int(v) for v in out.stdout.split()[-3:]]
    kernels, compiled, disk = run(2)
    assert compiled == kernels and disk == 0
    kernels, compiled, disk = run(3)
    assert disk == kernels and compiled == 0


MIXED = """HloModule mixed
fused_t {
  x = f32[260,260] parameter(0)
  t = f32[260,260] transpose(x), dimensions={1,0}
  ROOT o = f32[260,260] add(t, x)
}
fused_e {
  p = f32[260,260] parameter(0)
  q = f32[260,260] parameter(1)
  e = f32[260,260] maximum(p, q)
  ROOT m = f32[260,260] multiply(e, q)
}
ENTRY main {
  a = f32[260,260] parameter(0)
  f = f32[260,260] fusion(a), kind=kLoop, calls=fused_t
  ROOT g = f32[260,260] fusion(a, f), kind=kLoop, calls=fused_e
}"""


def test_the_light_pipeline_is_chosen_per_kernel(monkeypatch):
    """A kernel whose loops are all on vectors (streamed: every output large enough) takes
    the light pipeline even beside one that leaves a loop to LLVM's vectorizer (a
    transpose), which takes O3."""
    from xlapy.backend_cpu.emitters import streaming
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 1)
    kernel_cache.clear_memory()
    exe, info, _ = compile_traced(MIXED, cache=False, pipeline=None)
    assert info["kernels"] == 2 and info["light"] == 1
    assert exe._light_modules == [True, False, True] and not exe._light_pipeline
    a = np.random.default_rng(5).standard_normal((260, 260)).astype(np.float32) / 4
    check(exe, MIXED, [a])
    assert "define" in exe.as_llvm_ir()       # the modules, each optimized as compiled


ALIASED = """HloModule aliased
fused1 {
  p0 = f32[64] parameter(0)
  p1 = f32[64] parameter(1)
  ROOT s = f32[64] subtract(p0, p1)
}
fused2 {
  q0 = f32[64] parameter(0)
  q1 = f32[64] parameter(1)
  ROOT s = f32[64] subtract(q0, q1)
}
ENTRY main {
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  c = f32[64] bitcast(a)
  %s
  ROOT t = (f32[64], f32[64]) tuple(f1, f2)
}"""


@pytest.mark.parametrize("order", ["shared first", "distinct first"])
def test_a_kernel_is_not_replayed_on_operands_that_share_a_slot_differently(order):
    """fusion(a, bitcast(a)) reads one slot twice (one entry of its body's table) and
    fusion(a, b) two: the same fused computation, but neither may be made from the
    other's emission."""
    shared = "f1 = f32[64] fusion(a, c), kind=kLoop, calls=fused1"
    distinct = "f2 = f32[64] fusion(a, b), kind=kLoop, calls=fused2"
    lines = [shared, distinct] if order == "shared first" else [distinct, shared]
    text = ALIASED % "\n  ".join(lines)
    exe, info, _ = compile_traced(text, cache=False, pipeline=None)
    assert info["emitted"] == 2
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    f1, f2 = exe.run(a, b)
    np.testing.assert_array_equal(f1, np.zeros(64, np.float32))
    np.testing.assert_array_equal(f2, a - b)


def test_a_replayed_record_names_its_own_kernel_as_a_whole_word():
    """compiler._renamed skips the regex where the old name is absent (issue 19: it ran
    two substitutions on every reason of every replayed kernel); whole names only."""
    from xlapy.backend_cpu import compiler, strategies
    choice = strategies.Choice("fusion.3", "loop_nest", (
        ("gemm", "fusion.3 holds no dot"),
        ("row_normalize", "fusion.31 and fusion.3.1 are other kernels; (fusion.3) is this"),
        ("column_normalize", "nothing named here"),
    ))
    renamed = compiler._renamed(choice, "fusion.3", "fusion.7")
    assert renamed == strategies.Choice("fusion.7", "loop_nest", (
        ("gemm", "fusion.7 holds no dot"),
        ("row_normalize", "fusion.31 and fusion.3.1 are other kernels; (fusion.7) is this"),
        ("column_normalize", "nothing named here"),
    ))
    assert compiler._renamed(choice, "absent", "x") == choice


def test_the_glue_text_calls_one_body_on_each_wrappers_slots():
    """kernel_cache.Glue writes its wrappers as text, compiled with the quick code
    generator: two wrappers of one body (declared once) and one without slots."""
    import ctypes
    from xlapy.backend_cpu.llvm import machine_code
    body = """define void @"xk_t"(ptr %t, i64 %b, i64 %e) {
  %p0 = load ptr, ptr %t, align 8
  %g = getelementptr inbounds ptr, ptr %t, i64 1
  %p1 = load ptr, ptr %g, align 8
  %v = load double, ptr %p0, align 8
  %w = fadd double %v, 1.0
  store double %w, ptr %p1, align 8
  ret void
}
define void @"xk_none"(ptr %t, i64 %b, i64 %e) {
  ret void
}"""
    glue = kernel_cache.Glue("g")
    glue.add("w1", "xk_t", [2, 0])
    glue.add("w2", "xk_t", [0, 1])
    glue.add("w3", "xk_none", [])
    text = glue.text()
    assert text.count('declare void @"xk_t"') == 1
    codes = machine_code.compile_objects([text, body], light=True, quick=[True, False],
                                         threads=1)
    jit = machine_code.jit_object(codes)
    values = (ctypes.c_double * 3)(0.0, 0.0, 5.0)
    base = ctypes.addressof(values)
    table = (ctypes.c_void_p * 3)(base, base + 8, base + 16)
    kernel = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    for name in ("w1", "w2", "w3"):
        kernel(jit.lookup(name))(ctypes.addressof(table), 0, 1)
    assert list(values) == [6.0, 7.0, 5.0]


def test_the_glue_skips_the_optimizer_which_did_not_change_its_code(monkeypatch):
    """Quick modules (the glue) go straight to the opt-level-0 code generator: the light
    pipeline left the wrappers' object code byte for byte as it was (measured on the
    12-layer GPT step's 551 wrappers, and checked here on a small glue; a kernel's table
    names each slot once, LocalSlotsKernelIR.local)."""
    import llvmlite.binding as llvm
    from xlapy.backend_cpu import target as targets
    from xlapy.backend_cpu.llvm import machine_code
    glue = kernel_cache.Glue("g")
    glue.add("w1", "xk_a", [5, 0, 3])
    glue.add("w2", "xk_b", [])
    glue.add("w3", "xk_a", [1, 7, 2])
    text = glue.text()
    target = targets.current()
    tm = machine_code._machine(target, quick=True)
    module = machine_code._parse(text, llvm.create_context())
    module.triple, module.data_layout = tm.triple, str(tm.target_data)
    machine_code._optimize(module, tm, light=True)
    optimized = machine_code._emit(module, tm)
    ran = []
    monkeypatch.setattr(machine_code, "_optimize", lambda *a: ran.append(a))
    (code,) = machine_code.compile_objects([text], light=True, quick=True, threads=1)
    assert ran == [] and code == optimized


def test_replayed_kernels_describe_themselves_as_emitted_ones_do(monkeypatch):
    """A replayed kernel's strategy record (renamed when asked) and its thunk's profile
    (flops, bytes: the cost of the kernel it repeats) are what emitting it afresh gives."""
    from xlapy.backend_cpu import compiler
    text = layers_module(4, "described")

    def described(exe):
        thunks = [t for t in exe._program.thunks if hasattr(t, "kernel")]
        return exe.kernel_strategies(), [(t.name, t.profile) for t in thunks]
    replayed, info, _ = compile_traced(text, cache=False)
    assert info["emitted"] < info["kernel_thunks"]
    monkeypatch.setattr(compiler, "_emission_key", lambda instr, reads: None)
    fresh, info, _ = compile_traced(text, cache=False)
    assert info["emitted"] == info["kernel_thunks"]
    assert described(replayed) == described(fresh)
