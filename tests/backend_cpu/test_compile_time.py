"""What the compile driver skips to keep the first call short (issue 9): the garbage
collector is paused, the caller may supply the module's copy, loops are not runtime-unrolled,
the optimized LLVM IR is printed only on demand, and modules that only stream large outputs
skip loop strength reduction."""
from __future__ import annotations

import gc
import re

import llvmlite.ir as ir
import numpy as np

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.backend_cpu import compiler
from xlapy.backend_cpu.llvm import ir_policy

TEXT = """HloModule compile_time
ENTRY e {
  x = f32[256] parameter(0)
  one = f32[] constant(1)
  ones = f32[256] broadcast(one), dimensions={}
  a = f32[256] add(x, ones)
  ROOT m = f32[256] multiply(a, a)
}"""
FRESH = backend_cpu.CompileOptions(pipeline="default", cache=False, disk_cache=False)


def test_gc_is_paused_during_a_compile_and_restored_after():
    seen = []

    def pipeline(module):
        seen.append(gc.isenabled())
    assert gc.isenabled()
    backend_cpu.compile(hlo.parse_module(TEXT),
                        backend_cpu.CompileOptions(pipeline=pipeline, cache=False,
                                                   disk_cache=False))
    assert seen == [False]
    assert gc.isenabled()


def test_nested_pauses_restore_the_collector_once_and_only_if_it_was_on():
    with compiler.paused_gc():
        with compiler.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()          # the outer pause is still running
    assert gc.isenabled()
    gc.disable()
    try:
        with compiler.paused_gc():
            pass
        assert not gc.isenabled()          # the user's choice is kept
    finally:
        gc.enable()


def test_gc_is_restored_when_a_compile_fails():
    def broken(module):
        raise RuntimeError("broken pass")
    options = backend_cpu.CompileOptions(pipeline=broken, cache=False, disk_cache=False)
    try:
        backend_cpu.compile(hlo.parse_module(TEXT), options)
    except RuntimeError as e:
        assert "broken pass" in str(e)
    else:
        raise AssertionError("the pipeline's error was swallowed")
    assert gc.isenabled()


def test_the_pipeline_works_on_a_copy_the_caller_may_supply():
    module = hlo.parse_module(TEXT)
    before = module.to_text()
    x = np.arange(256, dtype=np.float32)
    kept = backend_cpu.compile(module, FRESH)            # default: a clone
    assert module.to_text() == before
    copies = []

    def copy():
        copies.append(hlo.parse_module(before))
        return copies[-1]
    supplied = backend_cpu.compile(module, FRESH, copy=copy)
    assert module.to_text() == before and len(copies) == 1
    assert "fusion" in copies[0].to_text()               # the pipeline rewrote the copy
    np.testing.assert_array_equal(supplied.run(x)[0], kept.run(x)[0])
    np.testing.assert_array_equal(kept.run(x)[0], (x + 1) * (x + 1))
    # A cache hit compiles nothing, so it asks for no copy.
    cached = backend_cpu.CompileOptions(pipeline="default", disk_cache=False)
    assert backend_cpu.compile(module, cached, copy=copy) is \
        backend_cpu.compile(module, cached, copy=copy)
    assert len(copies) == 2


def test_the_compiled_module_is_printed_only_when_asked(monkeypatch):
    """A compile prints its input once (the cache key), and the module it compiled only
    when someone asks (as_hlo_text, the MPI fingerprint, the disk cache's store); the
    caller's own module, compiled as given, is the text printed for the key, whatever
    the caller does to the module afterwards."""
    from xlapy.hlo.ir import HloModule
    printed = []
    to_text = HloModule.to_text
    monkeypatch.setattr(HloModule, "to_text", lambda self: printed.append(self) or to_text(self))
    module = hlo.parse_module(TEXT)
    exe = backend_cpu.compile(module, FRESH)
    assert printed == [module]
    text = exe.as_hlo_text()
    assert len(printed) == 2 and "fusion" in text and exe.as_hlo_text() is text
    assert exe.fingerprint == backend_cpu.compile(hlo.parse_module(TEXT), FRESH).fingerprint
    plain = backend_cpu.CompileOptions(cache=False, disk_cache=False)
    given = hlo.parse_module(TEXT)
    exe = backend_cpu.compile(given, plain)
    given.entry.root.name = "renamed_after"
    assert exe.as_hlo_text() == to_text(hlo.parse_module(TEXT))
    x = np.arange(256, dtype=np.float32)
    np.testing.assert_array_equal(exe.run(x)[0], (x + 1) * (x + 1))


def test_a_disabled_disk_cache_costs_nothing(monkeypatch):
    """XLAPY_DISABLE_DISK_CACHE=1 with the disk cache asked for (the default options): no
    key is hashed, nothing is looked up, and the compiled module is not printed for a
    store that would do nothing."""
    from xlapy.backend_cpu import disk_cache
    from xlapy.hlo.ir import HloModule
    monkeypatch.setenv("XLAPY_DISABLE_DISK_CACHE", "1")

    def refuse(*args, **kwargs):
        raise AssertionError("the disabled disk cache was asked")
    for name in ("key", "load", "store"):
        monkeypatch.setattr(disk_cache, name, refuse)
    printed = []
    to_text = HloModule.to_text
    monkeypatch.setattr(HloModule, "to_text", lambda self: printed.append(self) or to_text(self))
    module = hlo.parse_module(TEXT)
    exe = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline="default",
                                                                 cache=False))
    assert printed == [module]
    x = np.arange(256, dtype=np.float32)
    np.testing.assert_array_equal(exe.run(x)[0], (x + 1) * (x + 1))


def _counting_loop(module: ir.Module, name: str, hinted: bool) -> ir.Function:
    """for (i = 0; i < n; i++) p[i] = 0 -- a loop with a run-time trip count."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType(), ir.IntType(64)]),
                     name)
    entry, header, body, done = (fn.append_basic_block(n) for n in ("entry", "h", "b", "done"))
    b = ir.IRBuilder(entry)
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(ir.IntType(64))
    i.add_incoming(ir.Constant(ir.IntType(64), 0), entry)
    b.cbranch(b.icmp_signed("<", i, fn.args[1]), body, done)
    b.position_at_end(body)
    b.store(ir.Constant(ir.FloatType(), 0), b.gep(fn.args[0], [i], source_etype=ir.FloatType()))
    nxt = b.add(i, ir.Constant(ir.IntType(64), 1))
    i.add_incoming(nxt, body)
    latch = b.branch(header)
    if hinted:
        latch.set_metadata("llvm.loop", module.add_metadata([ir.MetaDataString(module, "mine")]))
    b.position_at_end(done)
    b.ret_void()
    return fn


def test_loops_without_hints_get_no_runtime_unrolling():
    module = ir.Module(name="loops")
    plain = _counting_loop(module, "plain", hinted=False)
    hinted = _counting_loop(module, "hinted", hinted=True)
    ir_policy.no_runtime_unrolling(module)
    text = str(module)
    assert "llvm.loop.unroll.runtime.disable" in text
    latch = plain.blocks[2].terminator
    assert "llvm.loop" in latch.metadata
    # A forward branch is no latch; an emitter's own hints are left alone.
    assert "llvm.loop" not in plain.blocks[0].terminator.metadata
    assert "llvm.loop" not in plain.blocks[1].terminator.metadata
    assert '"mine"' in str(hinted.blocks[2].terminator.metadata["llvm.loop"])
    # The loop ID is self-referential (unique to its loop) and LLVM accepts it.
    from xlapy.backend_cpu.llvm import target_machine
    target_machine.parse_and_verify(text)


def test_llvm_ir_is_optimized_on_demand_and_is_what_was_compiled():
    # Large enough not to be a tiny kernel (optimized for size: not vectorized on SSE4.2).
    executable = backend_cpu.compile(hlo.parse_module(TEXT.replace("256", "4096")), FRESH)
    assert executable._llvm_ir is None               # nothing printed by the compile
    text = executable.as_llvm_ir()
    assert re.search(r"<(4|8|16) x float>", text)     # vectorized: optimized IR
    assert executable.as_llvm_ir() is text           # printed once
    assert "ret void" in executable.as_asm() or "ret" in executable.as_asm()


def test_a_kernel_that_only_calls_the_gemm_driver_is_not_optimized():
    text = """HloModule gemm_driver
ENTRY e {
  a = f32[64,96] parameter(0)
  b = f32[96,80] parameter(1)
  ROOT d = f32[64,80] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    executable = backend_cpu.compile(hlo.parse_module(text), FRESH)
    ir_text = executable.as_llvm_ir()
    drivers = [line for line in ir_text.splitlines()
               if line.startswith("define") and "_gemm(" in line]
    # the kernel's body (backend_cpu/kernel_cache.py: its wrapper only passes the slots on)
    kernels = [line for line in ir_text.splitlines()
               if line.startswith("define") and "_gemm(" not in line and "xk_" in line]
    assert drivers and kernels
    attributes = {m.split()[1]: m for m in ir_text.splitlines() if m.startswith("attributes #")}
    for line in kernels + drivers:
        group = line.split(")")[-1].split()[-2]          # e.g. "#0" before "{"
        assert "optnone" in attributes[group], line
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((96, 80)).astype(np.float32)
    np.testing.assert_allclose(executable.run(a, b)[0], a @ b, rtol=1e-4, atol=1e-4)


def test_kernels_with_arithmetic_are_optimized():
    module = ir.Module(name="work")
    fn = _counting_loop(module, "work", hinted=False)
    assert not ir_policy.only_drives_unoptimized_routines(fn)


ROW_LOOP = """
define void @rows(ptr noalias %x, ptr noalias %y, i64 %n, i64 %m) {
entry:
  br label %outer
outer:
  %i = phi i64 [0, %entry], [%inext, %outer.latch]
  br label %inner
inner:
  %j = phi i64 [0, %outer], [%jnext, %inner]
  %k = mul i64 %i, %m
  %idx = add i64 %k, %j
  %px = getelementptr float, ptr %x, i64 %idx
  %py = getelementptr float, ptr %y, i64 %idx
  %vx = load float, ptr %px
  %r = fmul float %vx, 3.0
  store float %r, ptr %py
  %jnext = add i64 %j, 1
  %jd = icmp eq i64 %jnext, %m
  br i1 %jd, label %outer.latch, label %inner
outer.latch:
  %inext = add i64 %i, 1
  %id = icmp eq i64 %inext, %n
  br i1 %id, label %exit, label %outer
exit:
  ret void
}
"""


def test_strength_reduction_is_switched_off_for_one_emission_only():
    from xlapy.backend_cpu.llvm import target_machine

    def emit(strength_reduction):
        module = target_machine.parse_and_verify(ROW_LOOP)
        target_machine.optimize(module)
        return target_machine.emit_object(module, strength_reduction=strength_reduction)
    before, without, after = emit(True), emit(False), emit(True)
    assert without != before              # the switch changes this loop's code
    assert after == before                # and the process-wide option is back on


def test_modules_that_only_stream_are_generated_without_strength_reduction():
    from xlapy.backend_cpu.llvm import target_machine
    from tests.backend_cpu.test_streaming_stores import CHAIN, _compile
    _, streamed = _compile(CHAIN.format(n=4099), threshold=4096)
    _, ordinary = _compile(CHAIN.format(n=4099))
    for executable, strength_reduction in ((streamed, False), (ordinary, True)):
        module = target_machine.parse_and_verify(executable.as_llvm_ir())
        assert executable.as_asm() == target_machine.assembly(
            module, strength_reduction=strength_reduction)
    assert "movntps" in streamed.as_asm() and "movntps" not in ordinary.as_asm()
    module = target_machine.parse_and_verify(streamed.as_llvm_ir())
    assert streamed.as_asm() != target_machine.assembly(module, strength_reduction=True)
