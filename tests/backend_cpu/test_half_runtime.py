"""f16 on targets without F16C: the conversions LLVM turns into runtime calls
(llvm/half_runtime.py) give the same bits as numpy, and an object that needs a symbol
nobody provides is refused at compile time instead of crashing the process
(llvm/native_symbols.py)."""
from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.backend_cpu.llvm import target_machine, machine_code, native_symbols

CONVERT = """HloModule halves
ENTRY e {{
  h = f16[{n}] parameter(0)
  f = f32[{n}] parameter(1)
  d = f64[{n}] parameter(2)
  hf = f32[{n}] convert(h)
  fh = f16[{n}] convert(f)
  dh = f16[{n}] convert(d)
  s = f16[{n}] add(h, h)
  ROOT t = (f32[{n}], f16[{n}], f16[{n}], f16[{n}]) tuple(hf, fh, dh, s)
}}"""


def _inputs(n: int):
    rng = np.random.default_rng(11)
    halves = np.arange(n, dtype=np.uint32).astype(np.uint16).view(np.float16)  # every pattern
    edges = [65504.0, 65519.99, 65520.0, 65536.0, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25,
             3 * 2.0 ** -26, 2.0 ** -25 + 2.0 ** -40, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11,
             1 + 2.0 ** -11 + 2.0 ** -40, np.inf, -np.inf, np.nan, -0.0, 1e-30, -6.1e-5]
    doubles = np.concatenate([edges, -np.array(edges),
                              rng.standard_normal(n) * np.exp(rng.uniform(-25, 12, n))])[:n]
    floats = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    floats[:len(edges) * 2] = doubles[:len(edges) * 2]
    return halves, floats, doubles


@pytest.mark.parametrize("level", ["sse4.2", "avx2"])
def test_f16_conversions_match_numpy_bit_for_bit(level):
    """SSE4.2 converts through half_runtime's routines, AVX2 with F16C: both must give
    numpy's bits (round to nearest even, once, from f32 and from f64)."""
    n = 65536
    module = hlo.parse_module(CONVERT.format(n=n))
    exe = backend_cpu.compile(module, backend_cpu.CompileOptions(max_isa=level))
    assert ("__truncsfhf2" in exe.as_asm()) == (level == "sse4.2")
    if not exe.target.runs_on_host:
        return
    h, f, d = _inputs(n)
    hf, fh, dh, s = exe.run(h, f, d)
    expected = hlo.evaluate(module, [h, f, d])
    with np.errstate(all="ignore"):
        # The kernels run with denormals flushed (DESIGN.md): the evaluator models it.
        for got, want in zip((hf, fh, dh, s), expected):
            want = np.asarray(want)
            same = (got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")) \
                | (np.isnan(got) & np.isnan(want))
            assert same.all(), (level, got.dtype, np.flatnonzero(~same)[:5])
        normal = np.abs(d) >= 2.0 ** -14
        # Where no flushing is involved the bits are numpy's own conversion's.
        assert np.array_equal(dh[normal].view(np.uint16), d[normal].astype(np.float16).view(np.uint16))


def test_a_symbol_nobody_provides_is_refused_not_called():
    module = ir.Module()
    missing = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "xlapy_no_such_routine")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "caller")
    b = ir.IRBuilder(fn.append_basic_block())
    b.call(missing, [])
    b.ret_void()
    ref = target_machine.parse_and_verify(str(module))
    code = machine_code.object_code(ref)
    assert "xlapy_no_such_routine" in native_symbols.undefined_symbols(code)
    with pytest.raises(NotImplementedError, match="xlapy_no_such_routine"):
        machine_code.jit_object(code)


def test_undefined_symbols_of_a_compiled_module():
    exe = backend_cpu.compile(hlo.parse_module("""HloModule sines
ENTRY e {
  x = f64[64] parameter(0)
  ROOT r = f64[64] remainder(x, x)
}"""))
    names = native_symbols.undefined_symbols(exe._jit.object_code)
    assert all(native_symbols._resolvable(name) for name in names)
