"""LLVM on several threads (backend_cpu/llvm/machine_code.compile_objects, kernel_cache.py):
each kernel is a module of its own, optimized and code-generated on the compile
threads (CompileOptions(compile_threads=), $XLAPY_COMPILE_THREADS). The object code,
and so every result, is the same whatever the thread count."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from xlapy.backend_cpu import kernel_cache
from xlapy.backend_cpu.llvm import machine_code
from xlapy.runtime import profiler
from tests.corpus_util import assert_close

# Kernels of several kinds (elementwise, transcendental, reduction, GEMM, transpose).
TEXT = """HloModule several
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[48,40] parameter(0)
  w = f32[40,56] parameter(1)
  d = f32[48,56] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[48,56] tanh(d)
  e = f32[48,56] exponential(t)
  zero = f32[] constant(0)
  r = f32[48] reduce(e, zero), dimensions={1}, to_apply=add
  b = f32[48,56] broadcast(r), dimensions={0}
  q = f32[48,56] divide(e, b)
  tr = f32[56,48] transpose(q), dimensions={1,0}
  ROOT out = (f32[56,48], f32[48]) tuple(tr, r)
}"""


def _args():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((48, 40)).astype(np.float32),
            (rng.standard_normal((40, 56)) / 6).astype(np.float32)]


def _compile(threads: int, pipeline="default"):
    kernel_cache.clear_memory()           # compile every kernel, not take it from memory
    options = backend_cpu.CompileOptions(pipeline=pipeline, cache=False, disk_cache=False,
                                         compile_threads=threads)
    return backend_cpu.compile(hlo.parse_module(TEXT), options)


@pytest.mark.parametrize("pipeline", [None, "default"])
def test_one_and_two_threads_give_the_same_code_and_numbers(pipeline):
    one, two = _compile(1, pipeline), _compile(2, pipeline)
    assert one._jit.object_code == two._jit.object_code          # byte for byte
    args = _args()
    got1, got2 = one.run(*args), two.run(*args)
    for a, b in zip(got1, got2):
        np.testing.assert_array_equal(a, b)
    expected = hlo.evaluate(hlo.parse_module(TEXT), args)
    for g, e in zip(got1, expected):
        assert_close(g, e, "f32")


def test_compile_objects_is_independent_of_the_thread_count():
    exe = _compile(1)
    texts = list(exe._llvm_source)
    assert len(texts) > 2                  # the glue and several kernels
    one = machine_code.compile_objects(texts, threads=1)
    for threads in (2, 3):
        assert machine_code.compile_objects(texts, threads=threads) == one


def test_each_kernel_is_compiled_on_a_compile_thread_as_spans():
    rec = profiler.start()
    try:
        _compile(2)
    finally:
        profiler.stop()
    (whole,) = [e for e in rec.events if e.name == "LLVM compile"]
    assert whole.args["compiled"] == whole.args["kernels"] >= 2
    optimize = [e for e in rec.events if e.name == "LLVM optimize"]
    codegen = [e for e in rec.events if e.name == "LLVM codegen"]
    # one per module (the glue, each kernel, GEMM routines this process had not built yet),
    # inside the compile's time: started while the kernels are emitted (kernel_cache.Batch),
    # all done when the LLVM phase ends
    assert len(optimize) == len(codegen) == \
        whole.args["compiled"] + 1 + whole.args["gemm_routines"]
    (compile_,) = [e for e in rec.events if e.name.startswith("compile ")]
    assert all(compile_.start <= e.start and e.end <= whole.end for e in optimize + codegen)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_bad_thread_count_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="compile_threads must be an integer >= 1"):
        _compile(bad)


def test_the_environment_sets_the_default(monkeypatch):
    monkeypatch.setenv("XLAPY_COMPILE_THREADS", "3")
    assert machine_code.default_threads() == 3
    monkeypatch.setenv("XLAPY_COMPILE_THREADS", "many")
    with pytest.raises(ValueError, match="XLAPY_COMPILE_THREADS='many' is not an integer"):
        machine_code.default_threads()
    monkeypatch.delenv("XLAPY_COMPILE_THREADS")
    from xlapy import runtime
    assert machine_code.default_threads() == max(1, runtime.get_options().intra_op_threads)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_compiles_on_threads_of_its_own():
    """The parent's compile threads do not exist in a forked child: it must not wait
    for them (it would hang)."""
    import os
    _compile(2)                          # the parent's pool exists
    pid = os.fork()
    if pid == 0:                         # the child: compile and run, exit 0 if right
        code = 1
        try:
            exe = _compile(2)
            got = exe.run(*_args())
            expected = hlo.evaluate(hlo.parse_module(TEXT), _args())
            code = 0 if np.allclose(got[1], expected[1], rtol=1e-4) else 2
        finally:
            os._exit(code)
    for _ in range(600):                 # at most 60 s
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
            return
        __import__("time").sleep(0.1)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung compiling on 2 threads")


class _Submitted(list):
    """How many bodies were sealed at each submission; `quick`: each one's flag."""


def _submissions(monkeypatch):
    """Records, for each module handed to the compile threads during a compile, how
    many kernel bodies had been sealed by then (kernel_cache.seal)."""
    sealed, submitted, quick = [0], _Submitted(), []
    seal, submit = kernel_cache.seal, machine_code.submit

    def counting_seal(*a, **k):
        sealed[0] += 1
        return seal(*a, **k)

    def recording_submit(*a, **k):
        submitted.append(sealed[0])
        quick.append(k.get("quick", False))
        return submit(*a, **k)
    monkeypatch.setattr(kernel_cache, "seal", counting_seal)
    monkeypatch.setattr(machine_code, "submit", recording_submit)
    submitted.quick = quick
    return sealed, submitted


@pytest.mark.parametrize("threads", [1, 2])
def test_kernels_compile_while_later_ones_are_emitted(monkeypatch, threads):
    """kernel_cache.Batch on a host with a core to spare: a body goes to LLVM as soon
    as it is sealed (once a kernel that keeps strength reduction on is seen), not after
    the last kernel is emitted, and the glue on the same threads; the code is the same
    as without the overlap."""
    without = _compile(threads, None)._jit.object_code
    monkeypatch.setattr(kernel_cache, "host_cores", lambda: threads + 1)
    sealed, submitted = _submissions(monkeypatch)
    exe = _compile(threads, None)
    assert sealed[0] >= 4 and submitted
    assert submitted[0] < sealed[0]           # LLVM started before the emission ended
    assert submitted.quick[-1] and not any(submitted.quick[:-1])    # the glue, last
    assert exe._jit.object_code == without
    got = exe.run(*_args())
    for g, e in zip(got, hlo.evaluate(hlo.parse_module(TEXT), _args())):
        assert_close(g, e, "f32")


def test_without_a_core_to_spare_nothing_starts_before_the_emission_ends(monkeypatch):
    """As many compile threads as cores (or more): the emitting thread would lose its
    core to them, so the batch compiles when the emission is done."""
    for cores, threads in ((2, 2), (1, 1), (4, 8)):
        monkeypatch.setattr(kernel_cache, "host_cores", lambda: cores)
        assert not kernel_cache.overlaps(threads)
    monkeypatch.setattr(kernel_cache, "host_cores", lambda: 2)
    sealed, submitted = _submissions(monkeypatch)
    _compile(2, None)
    assert sealed[0] >= 4 and submitted == []


def test_a_module_whose_kernels_all_stream_compiles_as_one_batch(monkeypatch):
    """Kernels that all stream turn loop strength reduction off for the module, a
    process-wide switch held over one batch: nothing may start before the emission has
    seen every kernel, and the code is what one thread makes."""
    from xlapy.backend_cpu.emitters import streaming
    text = """HloModule two_streams
f1 {
  x = f32[4099] parameter(0)
  ROOT a = f32[4099] abs(x)
}
f2 {
  x = f32[4099] parameter(0)
  ROOT n = f32[4099] negate(x)
}
ENTRY main {
  p = f32[4099] parameter(0)
  a = f32[4099] fusion(p), kind=kLoop, calls=f1
  n = f32[4099] fusion(p), kind=kLoop, calls=f2
  ROOT t = (f32[4099], f32[4099]) tuple(a, n)
}"""
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 4096)
    exes = []
    for threads in (1, 2):
        sealed, submitted = _submissions(monkeypatch)
        kernel_cache.clear_memory()
        exes.append(backend_cpu.compile(hlo.parse_module(text), backend_cpu.CompileOptions(
            cache=False, disk_cache=False, compile_threads=threads)))
        assert sealed[0] == 2 and submitted == []
    assert exes[0]._strength_reduction is False
    assert exes[0]._jit.object_code == exes[1]._jit.object_code
    x = np.linspace(-2, 2, 4099, dtype=np.float32)
    a, n = exes[1].run(x)
    np.testing.assert_array_equal(a, np.abs(x))
    np.testing.assert_array_equal(n, -x)
