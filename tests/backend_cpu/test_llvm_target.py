"""backend_cpu.llvm.target_machine: target machine, O3 pipeline, JIT engines, libm symbols."""
import ctypes
import gc

import llvmlite.binding as llvm
import pytest

from xlapy.backend_cpu.llvm import target_machine

SQUARE = """
define double @square(double %x) {
  %y = fmul double %x, %x
  ret double %y
}
"""

# A plain scalar loop: O3 with loop vectorization must turn it into vector code.
SAXPY = """
define void @saxpy(ptr noalias %x, ptr noalias %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr float, ptr %x, i64 %i
  %py = getelementptr float, ptr %y, i64 %i
  %vx = load float, ptr %px
  %vy = load float, ptr %py
  %r = call float @llvm.fma.f32(float %vx, float 2.0, float %vy)
  store float %r, ptr %py
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
declare float @llvm.fma.f32(float, float, float)
"""

CALLS_SIN = """
declare double @sin(double)
define double @f(double %x) {
  %y = call double @sin(double %x)
  ret double %y
}
"""


def _call_square(jit, x: float) -> float:
    fn = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(jit.lookup("square"))
    return fn(x)


def test_initialize_is_idempotent():
    target_machine.initialize()
    target_machine.initialize()


def test_host_target_machine_is_cached_and_for_this_cpu():
    tm = target_machine.host_target_machine()
    assert tm is target_machine.host_target_machine()
    assert tm.triple == llvm.get_process_triple()
    module = target_machine.parse_and_verify(SQUARE)
    assert module.triple == tm.triple and module.data_layout == str(tm.target_data)


def test_jit_compile_unpacks_and_runs():
    engine, lookup = target_machine.jit_compile(SQUARE)
    assert isinstance(engine, llvm.ExecutionEngine)
    assert ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(lookup("square"))(3.0) == 9.0


def test_engines_can_be_freed_and_created_again():
    """Each engine owns its TargetMachine: freeing one must not break the next."""
    for i in range(4):
        jit = target_machine.jit_compile(SQUARE)
        assert _call_square(jit, float(i)) == float(i * i)
        del jit
        gc.collect()
    assert target_machine.host_target_machine().triple   # the shared machine still works


def test_lookup_of_unknown_function_is_a_clear_error():
    jit = target_machine.jit_compile(SQUARE)
    with pytest.raises(KeyError, match="no function named 'cube'"):
        jit.lookup("cube")


def test_optimize_vectorizes_loops_for_the_target(isa):
    """LLVM's loop vectorizer uses the target's full width (also on CPUs whose
    scheduling model prefers 256-bit vectors: the target says -prefer-256-bit)."""
    module = target_machine.parse_and_verify(SAXPY, isa.target)
    target_machine.optimize(module, target=isa.target)
    assert isa.uses_full_vectors(target_machine.assembly(module, target=isa.target))


def test_libm_symbols_resolve_to_the_c_library():
    target_machine.initialize()
    assert llvm.address_of_symbol("sin") and llvm.address_of_symbol("erf")
    jit = target_machine.jit_compile(CALLS_SIN)
    fn = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(jit.lookup("f"))
    assert abs(fn(1.0) - 0.8414709848078965) < 1e-15


def test_parse_error_is_reported():
    with pytest.raises(RuntimeError, match="parsing error"):
        target_machine.parse_and_verify("define nonsense")


def _heap_bytes_in_use() -> int:
    """Bytes the C allocator has handed out and not got back (glibc's mallinfo2)."""
    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]
    mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    mallinfo2.restype = MallInfo2
    info = mallinfo2()
    return info.uordblks + info.hblkhd


def test_optimize_frees_its_pass_manager():
    """llvmlite 0.50 never deletes a ModulePassManager on close() (about 68 KiB a
    run was lost); optimize() deletes it itself. What stays is the pass builder's
    instrumentation object, about 1.5 KiB, which llvmlite gives no way to free."""
    def run_once():
        module = target_machine.parse_and_verify(SAXPY)
        target_machine.optimize(module)
        module.close()
    for _ in range(20):
        run_once()
    gc.collect()
    before = _heap_bytes_in_use()
    runs = 200
    for _ in range(runs):
        run_once()
    gc.collect()
    per_run = (_heap_bytes_in_use() - before) / runs
    assert per_run < 8 * 1024, f"optimize() keeps {per_run / 1024:.1f} KiB of native memory a run"
