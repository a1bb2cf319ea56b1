"""Complex numbers (c64, c128) computed by compiled kernels agree with the evaluator.

backend_cpu/elemental/complex_ops.py computes them as LLVM structs {re, im}: every
elementwise op it has, converts, compares, select, reduce, reduce-window, dot, the
movement ops (bytes of 8 and 16 per element), fused and not. Inputs cross special
parts (0, -0, +-inf, NaN, tiny and huge values) with each other and add random ones.
What stays on the host (fft, power, ...) still agrees, and is the only host thunk.
complex_jax/ holds two JAX programs with XLA's results (complex math on c64; an FFT
filter on f64/c128), checked as JAX wrote them and as XLA's pipeline fused them.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo
from xlapy.backend_cpu import CompileOptions, compile
from xlapy.backend_cpu.elemental.complex_ops import ELEMENTWISE, why_not_compiled
from xlapy.hlo.opcodes import OPCODES
from tests.corpus_util import assert_close

RNG = np.random.default_rng(1717)
DTYPES = {"c64": np.complex64, "c128": np.complex128}
PART = {"c64": "f32", "c128": "f64"}
PART_DTYPES = {"c64": np.float32, "c128": np.float64}


def specials(etype: str, n_random: int = 64) -> np.ndarray:
    """Every pair of special parts (re, im), then random values of several scales.
    Denormal parts read as zero in kernels (DAZ) and in the evaluator alike."""
    huge, denormal = (1e30, 3e-39) if etype == "c64" else (1e300, 3e-309)
    parts = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-3, 7e3, huge, -huge, np.inf, -np.inf, np.nan,
             denormal]
    grid = np.array([complex(r, i) for r, i in itertools.product(parts, parts)])
    scale = np.exp(RNG.uniform(-4, 4, n_random))
    rand = (RNG.standard_normal(n_random) + 1j * RNG.standard_normal(n_random)) * scale
    return np.concatenate([grid, rand]).astype(DTYPES[etype])


def random(etype: str, shape) -> np.ndarray:
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(DTYPES[etype])


def host_thunks(executable) -> int:
    """How many instructions run on the host (library_ops.py), called computations too."""
    return sum(c.chosen.startswith("host_") for c in executable.kernel_strategies())


def run_both(text: str, args, pipelines=(None, "default"), host: int = 0):
    """Compiles `text` with and without the default pipeline, runs it, compares every
    output with the evaluator; asserts how many host thunks the executable has."""
    module = hlo.parse_module(text)
    expected = hlo.evaluate(module, list(args))
    for pipeline in pipelines:
        executable = compile(module, CompileOptions(pipeline=pipeline, disk_cache=False))
        assert host_thunks(executable) == host, executable.kernel_strategies()
        got = executable.run(*args)
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            e = np.asarray(e)
            if e.dtype.kind in "iub":
                np.testing.assert_array_equal(g, e)
            else:
                assert_close(g, e, f"pipeline={pipeline} output {k}", {"x": args[0]})
    return expected


# --- elementwise -------------------------------------------------------------------------

# Every unary op the kernels compute on complex numbers (complex_ops.ELEMENTWISE).
UNARY = sorted(op for op in ELEMENTWISE if OPCODES[op].kind == "unary")


@pytest.mark.parametrize("etype", DTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_unary(op, etype):
    x = specials(etype)
    out = PART[etype] if op in ("abs", "real", "imag") else etype
    n = x.size
    run_both(f"""HloModule m
ENTRY e {{
  x = {etype}[{n}] parameter(0)
  ROOT y = {out}[{n}] {op}(x)
}}""", [x], pipelines=(None,))


@pytest.mark.parametrize("etype", DTYPES)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_binary(op, etype):
    s = specials(etype, n_random=0)
    x, y = (a.reshape(-1) for a in np.meshgrid(s, s))
    both = np.concatenate([x, random(etype, 64)]), np.concatenate([y, random(etype, 64)])
    n = both[0].size
    text = f"""HloModule m
ENTRY e {{
  x = {etype}[{n}] parameter(0)
  y = {etype}[{n}] parameter(1)
  ROOT z = {etype}[{n}] {op}(x, y)
}}"""
    if op != "multiply":
        run_both(text, list(both), pipelines=(None,))
        return
    # Whether numpy fuses the multiply-add (an FMA host) decides the last bits of a
    # cancelling ar br - ai bi: each part is within a rounding of the products' size.
    module = hlo.parse_module(text)
    (got,) = compile(module, CompileOptions(disk_cache=False)).run(*both)
    (expected,) = hlo.evaluate(module, list(both))
    x, y = both
    eps = np.finfo(PART_DTYPES[etype]).eps
    for part, size in ((np.real, abs(x.real * y.real) + abs(x.imag * y.imag)),
                       (np.imag, abs(x.real * y.imag) + abs(x.imag * y.real))):
        g, e = part(got).astype(np.float64), part(expected).astype(np.float64)
        with np.errstate(invalid="ignore"):
            slack = 2 * eps * size.astype(np.float64)
        assert_close(np.where(np.isfinite(slack) & (np.abs(g - e) <= slack), e, g), e,
                     f"{op} {part.__name__}")


@pytest.mark.parametrize("etype", DTYPES)
def test_complex_compare_select_conj(etype):
    """complex(re, im), conj as JAX writes it (complex(real, negate(imag))), compare
    EQ/NE with NaN parts, select of whole complex values."""
    x = specials(etype)
    y = x.copy()
    y[::3] = random(etype, y[::3].shape)
    n, p = x.size, PART[etype]
    run_both(f"""HloModule m
ENTRY e {{
  x = {etype}[{n}] parameter(0)
  y = {etype}[{n}] parameter(1)
  re = {p}[{n}] real(x)
  im = {p}[{n}] imag(x)
  ni = {p}[{n}] negate(im)
  conj = {etype}[{n}] complex(re, ni)
  eq = pred[{n}] compare(x, y), direction=EQ
  ne = pred[{n}] compare(conj, y), direction=NE
  s = {etype}[{n}] select(eq, conj, y)
  ROOT t = ({etype}[{n}], pred[{n}], pred[{n}], {etype}[{n}]) tuple(conj, eq, ne, s)
}}""", [x, y])


@pytest.mark.parametrize("src,dst", [("c64", "c128"), ("c128", "c64"), ("f32", "c64"),
                                     ("f64", "c64"), ("f32", "c128"), ("s32", "c64"),
                                     ("pred", "c128"), ("f16", "c64"), ("c64", "f32"),
                                     ("c128", "f32"), ("c64", "f64"), ("c128", "f16")])
def test_convert(src, dst):
    n = 200
    if src in DTYPES:
        x = specials(src)[:n]
        if dst == "f16":
            x = x / 1e4       # inside f16's range
    elif src == "pred":
        x = RNG.random(n) < 0.5
    elif src == "s32":
        x = RNG.integers(-2**31, 2**31, n, dtype=np.int32)
    else:
        x = specials("c128").real[:n].astype({"f16": np.float16, "f32": np.float32,
                                              "f64": np.float64}[src])
    n = x.size
    with np.errstate(over="ignore"):
        run_both(f"""HloModule m
ENTRY e {{
  x = {src}[{n}] parameter(0)
  ROOT y = {dst}[{n}] convert(x)
}}""", [x], pipelines=(None,))


def test_fused_elementwise_chain():
    """A chain JAX would fuse: the default pipeline makes one loop kernel of it."""
    x, y = random("c64", (16, 33)), random("c64", (16, 33))
    run_both("""HloModule m
ENTRY e {
  x = c64[16,33] parameter(0)
  y = c64[16,33] parameter(1)
  m = c64[16,33] multiply(x, y)
  e = c64[16,33] exponential(m)
  d = c64[16,33] divide(e, y)
  s = c64[16,33] sqrt(d)
  a = f32[16,33] abs(s)
  c = c64[16,33] convert(a)
  ROOT r = c64[16,33] add(s, c)
}""", [x, y])


# --- reductions and dot --------------------------------------------------------------------

@pytest.mark.parametrize("etype", DTYPES)
@pytest.mark.parametrize("reducer", ["add", "multiply", "written"])
def test_reduce(etype, reducer):
    """Sum and product over rows and columns; `written`: a reducer that is not one
    instruction (a + b * 1), computed by applying the computation."""
    body = "ROOT r = T[] multiply(a, b)" if reducer == "multiply" else "ROOT r = T[] add(a, b)"
    if reducer == "written":
        body = ("one = T[] constant((1, 0))\n  bb = T[] multiply(b, one)\n"
                "  ROOT r = T[] add(a, bb)")
    init = "(1, 0)" if reducer == "multiply" else "(0.5, -1)"
    x = random(etype, (6, 40))
    if reducer == "multiply":
        x = (x / np.abs(x)).astype(x.dtype)       # unit modulus: the product stays finite
    x[2, 3] = complex(np.nan, 1)
    if reducer == "add":     # (the order of a product or of a written reducer may turn
        x[4, 7] = complex(np.inf, 0)        # inf * z into NaN or not: XLA leaves it open)
    text = f"""HloModule m
red {{
  a = T[] parameter(0)
  b = T[] parameter(1)
  {body}
}}
ENTRY e {{
  x = T[6,40] parameter(0)
  init = T[] constant({init})
  rows = T[6] reduce(x, init), dimensions={{1}}, to_apply=red
  cols = T[40] reduce(x, init), dimensions={{0}}, to_apply=red
  all = T[] reduce(x, init), dimensions={{0,1}}, to_apply=red
  ROOT t = (T[6], T[40], T[]) tuple(rows, cols, all)
}}""".replace("T[", f"{etype}[")
    run_both(text, [x])


def test_reduce_window_sum():
    x = random("c128", (9, 7))
    run_both("""HloModule m
add {
  a = c128[] parameter(0)
  b = c128[] parameter(1)
  ROOT r = c128[] add(a, b)
}
ENTRY e {
  x = c128[9,7] parameter(0)
  z = c128[] constant((0, 0))
  ROOT w = c128[5,4] reduce-window(x, z), window={size=3x2 stride=2x2 pad=1_1x1_1}, to_apply=add
}""", [x])


@pytest.mark.parametrize("etype", DTYPES)
def test_dot(etype):
    """Matrix products (batched, transposed operands), a dot fused with a consumer, and a
    mixed f32 x f32 -> c64 free of the real GEMM path."""
    a, b = random(etype, (3, 5, 7)), random(etype, (3, 7, 4))
    v = random(etype, (7,))
    a[1, 2, 3] = complex(np.nan, 0)
    run_both(f"""HloModule m
ENTRY e {{
  a = T[3,5,7] parameter(0)
  b = T[3,7,4] parameter(1)
  v = T[7] parameter(2)
  d = T[3,5,4] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
  t = T[3,4,5] dot(b, a), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{1}}, rhs_contracting_dims={{2}}
  mv = T[3,5] dot(a, v), lhs_contracting_dims={{2}}, rhs_contracting_dims={{0}}
  n = T[3,5] negate(mv)
  ROOT r = (T[3,5,4], T[3,4,5], T[3,5]) tuple(d, t, n)
}}""".replace("T[", f"{etype}["), [a, b, v])


def test_real_gemm_is_unchanged():
    """An f32 matrix product next to complex code still takes the packed GEMM."""
    text = """HloModule m
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = c64[64,64] convert(d)
  ROOT s = c64[64,64] negate(c)
}"""
    # Small terms: the GEMM sums in its own order, so the absolute error of a dot of 64
    # products is what DESIGN.md's atol must cover.
    a = (RNG.standard_normal((64, 64)) / 4).astype(np.float32)
    b = (RNG.standard_normal((64, 64)) / 4).astype(np.float32)
    run_both(text, [a, b], pipelines=(None,))
    executable = compile(hlo.parse_module(text), CompileOptions(disk_cache=False))
    assert [c.chosen for c in executable.kernel_strategies()] == ["gemm", "loop_nest", "loop_nest"]


# --- movement: 8- and 16-byte elements ---------------------------------------------------------

@pytest.mark.parametrize("etype", DTYPES)
def test_movement_ops_move_whole_elements(etype):
    x = random(etype, (4, 6, 5))
    x[0, 0, 0] = complex(np.nan, -np.inf)
    x[1, 2, 3] = complex(1e-40 if etype == "c64" else 1e-310, -0.0)    # denormal: moved as is
    small = random(etype, (3,))
    run_both(f"""HloModule m
ENTRY e {{
  x = T[4,6,5] parameter(0)
  s = T[3] parameter(1)
  i = s32[] constant(2)
  tr = T[5,4,6] transpose(x), dimensions={{2,0,1}}
  sl = T[2,3,5] slice(x), slice={{[1:4:2], [0:6:2], [0:5]}}
  cat = T[4,6,10] concatenate(x, x), dimensions={{2}}
  rs = T[24,5] reshape(x)
  bc = T[3,4] broadcast(s), dimensions={{0}}
  rv = T[4,6,5] reverse(x), dimensions={{1}}
  cp = T[4,6,5]{{0,1,2}} copy(x)
  pz = T[] constant((9, -9))
  pd = T[6,8,5] pad(x, pz), padding=1_1x0_2x0_0
  ds = T[2,2,2] dynamic-slice(x, i, i, i), dynamic_slice_sizes={{2,2,2}}
  up = T[2,2,2] negate(ds)
  dus = T[4,6,5] dynamic-update-slice(x, up, i, i, i)
  ROOT t = (T[5,4,6], T[2,3,5], T[4,6,10], T[24,5], T[3,4], T[4,6,5], T[4,6,5]{{0,1,2}}, T[6,8,5], T[4,6,5]) tuple(tr, sl, cat, rs, bc, rv, cp, pd, dus)
}}""".replace("T[", f"{etype}["), [x, small])


def test_large_transpose_and_copy_of_c128():
    """Large enough for the block-transpose and streaming rows, which decline complex."""
    x = random("c128", (96, 80))
    run_both("""HloModule m
ENTRY e {
  x = c128[96,80] parameter(0)
  t = c128[80,96] transpose(x), dimensions={1,0}
  ROOT c = c128[80,96]{0,1} copy(t)
}""", [x])


def test_zero_size_arrays():
    x = np.zeros((0, 3), np.complex64)
    run_both("""HloModule m
add {
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT r = c64[] add(a, b)
}
ENTRY e {
  x = c64[0,3] parameter(0)
  e = c64[0,3] exponential(x)
  z = c64[] constant((2, 3))
  s = c64[3] reduce(e, z), dimensions={0}, to_apply=add
  d = c64[3,3] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (c64[0,3], c64[3], c64[3,3]) tuple(e, s, d)
}""", [x])


def test_c128_parameter_aligned_to_8_bytes():
    """numpy aligns complex128 to 8 bytes, not 16: kernels must not assume more."""
    raw = np.zeros(2 * 33 + 1, np.float64)[1:]          # 8 bytes past a 16-byte boundary
    x = raw.view(np.complex128)
    x[:] = random("c128", (33,))
    run_both("""HloModule m
ENTRY e {
  x = c128[33] parameter(0)
  ROOT y = c128[33] multiply(x, x)
}""", [x])


def test_evaluator_complex_keeps_infinite_parts():
    """complex(0, inf) is (0, inf): the evaluator once formed re + 1j * im, whose
    1j * inf made the real part NaN."""
    module = hlo.parse_module("""HloModule m
ENTRY e {
  re = f32[3] parameter(0)
  im = f32[3] parameter(1)
  ROOT z = c64[3] complex(re, im)
}""")
    re = np.array([0, 1, np.nan], np.float32)
    im = np.array([np.inf, -np.inf, 2], np.float32)
    (z,) = hlo.evaluate(module, [re, im])
    np.testing.assert_array_equal(z.real, re)
    np.testing.assert_array_equal(z.imag, im)


def test_denormal_parts_read_as_zero_as_in_xla():
    """XLA's CPU kernels flush complex parts like floats (DAZ/FTZ); the numbers below are
    what JAX's jit gave (jax 0.10.2, CPU). numpy alone keeps the denormals (b / a would
    be 3.3e38 in the last lane)."""
    a = np.array([1e-40 + 1j, 1 + 1e-40j, 3e-39 + 0j], np.complex64)
    b = np.array([1 + 0j, 1e-40 + 0j, 1 + 0j], np.complex64)
    text = """HloModule m
ENTRY e {
  a = c64[3] parameter(0)
  b = c64[3] parameter(1)
  s = c64[3] add(a, b)
  m = c64[3] multiply(a, b)
  d = c64[3] divide(b, a)
  n = f32[3] abs(a)
  q = pred[3] compare(a, b), direction=EQ
  ROOT t = (c64[3], c64[3], c64[3], f32[3], pred[3]) tuple(s, m, d, n, q)
}"""
    xla = [np.array([1 + 1j, 1 + 0j, 1 + 0j], np.complex64),
           np.array([1j, 0, 0], np.complex64),
           np.array([-1j, 0, complex(np.inf, np.nan)], np.complex64),
           np.array([1, 1, 0], np.float32), np.array([False, False, False])]
    for k, (got, want) in enumerate(zip(run_both(text, [a, b]), xla)):
        assert_close(np.asarray(got), want, f"evaluator output {k}")


# --- what stays on the host -------------------------------------------------------------------

def test_fft_stays_on_the_host_and_power_compiles_and_they_agree():
    x = random("c64", (4, 8))
    run_both("""HloModule m
ENTRY e {
  x = c64[4,8] parameter(0)
  f = c64[4,8] fft(x), fft_type=FFT, fft_length={8}
  p = c64[4,8] power(f, x)
  ROOT s = c64[4,8] add(p, x)
}""", [x], pipelines=(None,), host=1)


def test_why_not_compiled_names_the_instruction():
    module = hlo.parse_module("""HloModule m
ENTRY e {
  x = c64[4] parameter(0)
  y = c64[4] parameter(1)
  p = c64[4] maximum(x, y)
  a = c64[4] add(x, y)
  c = pred[4] compare(x, y), direction=LT, type=TOTALORDER
  i = s32[4] convert(x)
  ROOT t = (c64[4], c64[4], pred[4], s32[4]) tuple(p, a, c, i)
}""")
    by_name = {i.name: i for i in module.entry.instructions}
    assert why_not_compiled(by_name["p"]) == "maximum on complex"
    assert why_not_compiled(by_name["a"]) is None
    assert why_not_compiled(by_name["c"]) == "an ordered compare of complex numbers"
    assert why_not_compiled(by_name["i"]) == "convert from complex to s32"


# --- generated code, per target ---------------------------------------------------------------

@pytest.mark.parametrize("etype", DTYPES)
def test_complex_kernels_compile_for_every_target(isa, etype):
    """Every target computes complex kernels (the multiply's fused multiply-adds are
    emulated where the target has no FMA): no host thunk, and where the host runs the
    target, the evaluator's numbers."""
    text = f"""HloModule m
ENTRY e {{
  x = T[64] parameter(0)
  y = T[64] parameter(1)
  d = T[64] divide(x, y)
  m = T[64] multiply(d, y)
  l = T[64] log(m)
  s = T[64] sqrt(l)
  ROOT r = T[64] exponential(s)
}}""".replace("T[", f"{etype}[")
    module = hlo.parse_module(text)
    executable = isa.compile(module, disk_cache=False, cache=False)
    assert host_thunks(executable) == 0
    ir_text = executable.as_llvm_ir()
    assert "fdiv" in ir_text
    if isa.runs:
        x, y = random(etype, (64,)), random(etype, (64,))
        (got,) = executable.run(x, y)
        assert_close(got, np.asarray(hlo.evaluate(module, [x, y])[0]), isa.level)


def test_row_and_column_sums_fused_with_their_users():
    """The pipeline fuses reduces with their users (a normalization by the row sum, a
    mean over the columns): the hoisting and column-reduce paths keep complex correct."""
    x = random("c128", (12, 70))
    run_both("""HloModule m
add {
  a = c128[] parameter(0)
  b = c128[] parameter(1)
  ROOT r = c128[] add(a, b)
}
ENTRY e {
  x = c128[12,70] parameter(0)
  z = c128[] constant((0, 0))
  e = c128[12,70] exponential(x)
  s = c128[12] reduce(e, z), dimensions={1}, to_apply=add
  b = c128[12,70] broadcast(s), dimensions={0}
  n = c128[12,70] divide(e, b)
  c = c128[70] reduce(x, z), dimensions={0}, to_apply=add
  k = c128[] constant((12, 0))
  kb = c128[70] broadcast(k), dimensions={}
  m = c128[70] divide(c, kb)
  ROOT t = (c128[12,70], c128[70]) tuple(n, m)
}""", [x])


def test_fusion_reading_a_dot_inside():
    """A fusion as XLA may write it, with a dot read inside: the dot goes to scratch
    memory once (materialize_inner), then the consumer reads it."""
    a, b = random("c64", (5, 6)), random("c64", (6, 4))
    run_both("""HloModule m
fused {
  p0 = c64[5,6] parameter(0)
  p1 = c64[6,4] parameter(1)
  d = c64[5,4] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT l = c64[5,4] log(d)
}
ENTRY e {
  a = c64[5,6] parameter(0)
  b = c64[6,4] parameter(1)
  ROOT f = c64[5,4] fusion(a, b), kind=kLoop, calls=fused
}""", [a, b])


def test_complex_through_a_while_loop():
    """Loop state of c128 (relayout copies at the boundary of another layout)."""
    x = random("c128", (4, 3))
    run_both("""HloModule m
cond {
  s = (s32[], c128[4,3]{0,1}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], c128[4,3]{0,1}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = c128[4,3]{0,1} get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = c128[4,3]{0,1} multiply(v, v)
  h = c128[] constant((0.5, 0.25))
  hb = c128[4,3]{0,1} broadcast(h), dimensions={}
  u = c128[4,3]{0,1} multiply(w, hb)
  ROOT t = (s32[], c128[4,3]{0,1}) tuple(j, u)
}
ENTRY e {
  x = c128[4,3] parameter(0)
  z = s32[] constant(0)
  t = (s32[], c128[4,3]{0,1}) tuple(z, x)
  r = (s32[], c128[4,3]{0,1}) while(t), condition=cond, body=body
  ROOT v = c128[4,3]{0,1} get-tuple-element(r), index=1
}""", [x])


# --- XLA's own numbers (complex_jax/, written by JAX) -----------------------------------------

JAX_CASES = Path(__file__).parent / "complex_jax"


@pytest.mark.parametrize("case", ["complex_math_c64", "spectral_filter_c128"])
@pytest.mark.parametrize("optimized", [False, True], ids=["jax", "xla_opt"])
def test_matches_xla(case, optimized):
    """JAX's module (with and without our pipeline) and XLA's optimized one (its fusions
    compiled as they are) against XLA's results; the only host thunks are the ffts."""
    text = (JAX_CASES / f"{case}{'.opt' if optimized else ''}.hlo").read_text()
    with np.load(JAX_CASES / f"{case}.npz") as data:
        args = [data[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in data.files))]
        outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    module = hlo.parse_module(text)
    ffts = sum(i.opcode == "fft" for c in module.computations_post_order()
               for i in c.instructions)
    for pipeline in (None,) if optimized else (None, "default"):
        executable = compile(module, CompileOptions(pipeline=pipeline, disk_cache=False))
        assert host_thunks(executable) == ffts, executable.kernel_strategies()
        got = executable.run(*args)
        assert len(got) == len(outs)
        for k, (g, e) in enumerate(zip(got, outs)):
            assert_close(g, e, f"{case} pipeline={pipeline} output {k}")


def test_complex_constants_and_the_disk_cache(tmp_path, monkeypatch):
    """An array constant of c128 read by a kernel; the executable stored on disk and
    loaded back computes the same numbers."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    text = """HloModule m_complex_disk_cache
ENTRY e {
  x = c128[3] parameter(0)
  k = c128[3] constant({(1, 2), (3, -4), (0, 0.5)})
  m = c128[3] multiply(x, k)
  ROOT s = c128[3] sqrt(m)
}"""
    module = hlo.parse_module(text)
    x = random("c128", (3,))
    expected = hlo.evaluate(module, [x])[0]
    first = compile(module, CompileOptions(cache=False)).run(x)[0]
    assert list(tmp_path.rglob("*")), "nothing was stored"
    again = compile(module, CompileOptions(cache=False)).run(x)[0]
    assert_close(first, np.asarray(expected), "compiled")
    np.testing.assert_array_equal(again, first)
