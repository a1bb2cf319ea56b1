"""The opcodes of issue 17 in the CPU backend agree with the evaluator.

reduce-precision and map are kernels (element generators); topk, cholesky,
triangular-solve, fft, the batch norms, rng, rng-bit-generator and
stochastic-convert are host thunks (backend_cpu/library_ops.py); complex
elementwise ops, reduce, dot and convert are kernels (more in test_complex.py);
the scheduling wrappers bind slots. Inputs hold NaN, inf,
denormals and zero-size arrays; layouts other than the default go through the
host thunks' views. Both with and without the default pipeline.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo
from xlapy.backend_cpu import CompileOptions, compile
from xlapy.backend_cpu.library_ops import HostOpThunk
from tests.corpus_util import assert_close

RNG = np.random.default_rng(17)


def special(shape, dtype):
    """Random values with NaN, +-inf, +-0 and denormals mixed in."""
    x = RNG.standard_normal(shape).astype(dtype) * dtype(3)
    flat = x.reshape(-1)
    if flat.size >= 8:
        tiny = np.finfo(dtype).tiny
        picks = RNG.choice(flat.size, size=min(8, flat.size), replace=False)
        flat[picks] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, tiny / 4, -tiny / 8,
                                np.finfo(dtype).max], dtype)[:len(picks)]
    return x


def run_both(text, args, pipelines=(None, "default")):
    module = hlo.parse_module(text)
    expected = hlo.evaluate(module, args)
    for pipeline in pipelines:
        got = compile(module, CompileOptions(pipeline=pipeline, disk_cache=False)).run(*args)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            if e.dtype.kind in "iub":
                np.testing.assert_array_equal(g, e)
            else:
                assert_close(g, e, what=f"pipeline={pipeline}")
    return expected


@pytest.mark.parametrize("etype,dtype,e,m", [("f32", np.float32, 5, 10), ("f32", np.float32, 8, 7),
                                             ("f32", np.float32, 4, 0), ("f16", np.float16, 3, 2),
                                             ("f64", np.float64, 8, 23), ("f64", np.float64, 11, 52)])
def test_reduce_precision_kernel_is_bit_exact(etype, dtype, e, m):
    text = f"""HloModule m
ENTRY e {{
  x = {etype}[64] parameter(0)
  r = {etype}[64] reduce-precision(x), exponent_bits={e}, mantissa_bits={m}
  ROOT n = {etype}[64] negate(r)
}}"""
    x = special((64,), dtype)
    expected = run_both(text, [x], pipelines=(None,))
    got = compile(hlo.parse_module(text), CompileOptions(pipeline="default",
                                                         disk_cache=False)).run(x)[0]
    assert got.tobytes() == expected[0].tobytes()    # bits, NaN payloads included


def test_map_inlines_its_computation():
    text = """HloModule m
mul_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] constant(2)
  m = f32[] multiply(a, c)
  ROOT s = f32[] add(m, b)
}
ENTRY e {
  x = f32[5,7] parameter(0)
  y = f32[5,7] parameter(1)
  ROOT r = f32[5,7] map(x, y), dimensions={0,1}, to_apply=mul_add
}"""
    run_both(text, [special((5, 7), np.float32), special((5, 7), np.float32)])


@pytest.mark.parametrize("dims,k,largest", [((3, 9), 4, "true"), ((17,), 17, "false"),
                                            ((2, 0), 0, "true"), ((4, 6), 0, "true")])
def test_topk(dims, k, largest):
    shape = ",".join(map(str, dims))
    out = ",".join(map(str, dims[:-1] + (k,)))
    text = f"""HloModule m
ENTRY e {{
  x = f32[{shape}] parameter(0)
  ROOT t = (f32[{out}], s32[{out}]) topk(x), k={k}, largest={largest}
}}"""
    x = special(dims, np.float32)
    if x.size:
        x.reshape(-1)[1] = x.reshape(-1)[0]            # a tie
    run_both(text, [x])


def test_custom_call_topk_and_layouts():
    text = """HloModule m
ENTRY e {
  x = f32[6,5]{0,1} parameter(0)
  ROOT t = (f32[6,3]{1,0}, s32[6,3]{0,1}) custom-call(x), custom_call_target="TopK"
}"""
    run_both(text, [special((6, 5), np.float32)], pipelines=(None,))


def test_unsupported_custom_call_target_is_one_line_at_compile_time():
    module = hlo.parse_module("""HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT y = f32[4] custom-call(x), custom_call_target="my_kernel"
}""")
    with pytest.raises(NotImplementedError, match="unsupported custom-call target 'my_kernel'"):
        compile(module, CompileOptions(disk_cache=False))
    with pytest.raises(hlo.EvaluationError, match="unsupported custom-call target 'my_kernel'"):
        hlo.evaluate(module, [np.zeros(4, np.float32)])


def _spd(batch, n, dtype):
    a = RNG.standard_normal(batch + (n, n)).astype(dtype)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=dtype)).astype(dtype)


@pytest.mark.parametrize("lower", ["true", "false"])
def test_cholesky_and_triangular_solve(lower):
    text = f"""HloModule m
ENTRY e {{
  a = f64[3,6,6] parameter(0)
  b = f64[3,6,4] parameter(1)
  l = f64[3,6,6] cholesky(a), lower={lower}
  ROOT x = f64[3,6,4] triangular-solve(l, b), left_side=true, lower={lower}, transpose_a=NO_TRANSPOSE
}}"""
    a = _spd((3,), 6, np.float64)
    a[1, 2, 2] = -50.0                                   # not positive definite: NaN matrix
    run_both(text, [a, RNG.standard_normal((3, 6, 4))])


@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
def test_triangular_solve_right_side_layouts(transpose):
    text = f"""HloModule m
ENTRY e {{
  a = f32[5,5]{{0,1}} parameter(0)
  b = f32[3,5] parameter(1)
  ROOT x = f32[3,5] triangular-solve(a, b), left_side=false, lower=false, unit_diagonal=true, transpose_a={transpose}
}}"""
    a = RNG.standard_normal((5, 5)).astype(np.float32)
    run_both(text, [a, RNG.standard_normal((3, 5)).astype(np.float32)])


@pytest.mark.parametrize("kind,in_t,in_dims,out_t,out_dims,lengths", [
    ("FFT", "c64", (4, 8), "c64", (4, 8), (8,)),
    ("IFFT", "c128", (2, 4, 6), "c128", (2, 4, 6), (4, 6)),
    ("RFFT", "f32", (3, 10), "c64", (3, 6), (10,)),
    ("IRFFT", "c64", (3, 6), "f32", (3, 10), (10,)),
    ("FFT", "c64", (0, 8), "c64", (0, 8), (8,)),
])
def test_fft(kind, in_t, in_dims, out_t, out_dims, lengths):
    text = f"""HloModule m
ENTRY e {{
  x = {in_t}[{",".join(map(str, in_dims))}] parameter(0)
  ROOT y = {out_t}[{",".join(map(str, out_dims))}] fft(x), fft_type={kind}, fft_length={{{",".join(map(str, lengths))}}}
}}"""
    x = RNG.standard_normal(in_dims)
    if in_t.startswith("c"):
        x = x + 1j * RNG.standard_normal(in_dims)
    dtype = {"c64": np.complex64, "c128": np.complex128, "f32": np.float32}[in_t]
    run_both(text, [x.astype(dtype)])


def test_batch_norms():
    text = """HloModule m
ENTRY e {
  x = f32[4,3,5] parameter(0)
  scale = f32[3] parameter(1)
  offset = f32[3] parameter(2)
  g = f32[4,3,5] parameter(3)
  t = (f32[4,3,5], f32[3], f32[3]) batch-norm-training(x, scale, offset), epsilon=0.001, feature_index=1
  mean = f32[3] get-tuple-element(t), index=1
  var = f32[3] get-tuple-element(t), index=2
  i = f32[4,3,5] batch-norm-inference(x, scale, offset, mean, var), epsilon=0.001, feature_index=1
  d = (f32[4,3,5], f32[3], f32[3]) batch-norm-grad(x, scale, mean, var, g), epsilon=0.001, feature_index=1
  y = f32[4,3,5] get-tuple-element(t), index=0
  dx = f32[4,3,5] get-tuple-element(d), index=0
  ds = f32[3] get-tuple-element(d), index=1
  ROOT r = (f32[4,3,5], f32[4,3,5], f32[3], f32[3], f32[4,3,5], f32[3]) tuple(y, i, mean, var, dx, ds)
}"""
    f = np.float32
    run_both(text, [RNG.standard_normal((4, 3, 5)).astype(f), RNG.standard_normal(3).astype(f),
                    RNG.standard_normal(3).astype(f), RNG.standard_normal((4, 3, 5)).astype(f)])


@pytest.mark.parametrize("etype,dist", [("f32", "rng_uniform"), ("f64", "rng_normal"),
                                        ("s32", "rng_uniform"), ("f32", "rng_normal")])
def test_rng_is_deterministic_given_the_module(etype, dist):
    text = f"""HloModule m
ENTRY e {{
  a = {etype}[] constant(-3)
  b = {etype}[] constant(7)
  ROOT r = {etype}[33,3] rng(a, b), distribution={dist}
}}"""
    first = run_both(text, [])[0]
    again = compile(hlo.parse_module(text), CompileOptions(disk_cache=False, cache=False)).run()[0]
    assert first.tobytes() == again.tobytes()
    if dist == "rng_uniform":
        assert first.min() >= -3 and first.max() < 7


def test_stochastic_convert():
    text = """HloModule m
ENTRY e {
  x = f32[64] parameter(0)
  r = u32[64] parameter(1)
  ROOT y = s8[64] stochastic-convert(x, r)
}"""
    with np.errstate(over="ignore"):
        x = special((64,), np.float32) * np.float32(40)
    run_both(text, [x, RNG.integers(0, 2**32, 64, dtype=np.uint32)])


def test_complex_elementwise_reduce_dot_convert():
    text = """HloModule m
add_c {
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT s = c64[] add(a, b)
}
ENTRY e {
  x = c64[4,3] parameter(0)
  y = c64[4,3] parameter(1)
  s = c64[4,3] add(x, y)
  m = c64[4,3] multiply(s, y)
  d = c64[4,3] divide(m, x)
  n = c64[4,3] negate(d)
  c = c64[4,3] copy(n)
  re = f32[4,3] real(c)
  im = f32[4,3] imag(c)
  ab = f32[4,3] abs(c)
  z = c64[4,3] complex(re, ab)
  zero = c64[] constant((0, 0))
  red = c64[4] reduce(z, zero), dimensions={1}, to_apply=add_c
  dt = c64[4,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  w = c128[4,3] convert(x)
  ROOT t = (f32[4,3], c64[4], c64[4,4], c128[4,3]) tuple(im, red, dt, w)
}"""
    x = (RNG.standard_normal((4, 3)) + 1j * RNG.standard_normal((4, 3))).astype(np.complex64)
    y = (RNG.standard_normal((4, 3)) + 1j * RNG.standard_normal((4, 3))).astype(np.complex64)
    run_both(text, [x, y])


def test_async_wrappers_copy_start_tokens():
    text = """HloModule m
wrapped {
  p = f32[8] parameter(0)
  ROOT e = f32[8] exponential(p)
}
ENTRY e {
  x = f32[8] parameter(0)
  s = ((f32[8]), f32[8], s32[]) async-start(x), calls=wrapped
  u = ((f32[8]), f32[8], s32[]) async-update(s)
  d = f32[8] async-done(u)
  cs = (f32[8], f32[8], u32[]) copy-start(d)
  c = f32[8] copy-done(cs)
  tok = token[] after-all()
  a = f32[8] add-dependency(c, tok)
  dm = f32[8] domain(a), domain={kind="sharding", entry={maximal device=0}, exit={maximal device=0}}
  ROOT r = f32[8] add(dm, x)
}"""
    run_both(text, [special((8,), np.float32)])


def test_host_thunks_survive_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    text = """HloModule m_disk_cache_host_ops
ENTRY e {
  s = u64[2] parameter(0)
  g = (u64[2], u32[3,5]) rng-bit-generator(s), algorithm=rng_philox
  b = u32[3,5] get-tuple-element(g), index=1
  x = f32[3,5] convert(b)
  t = (f32[3,2], s32[3,2]) topk(x), k=2, largest=true
  ROOT r = f32[3,2] get-tuple-element(t), index=0
}"""
    module = hlo.parse_module(text)
    state = np.array([5, 6], np.uint64)
    first = compile(module, CompileOptions(cache=False)).run(state)
    assert list(tmp_path.rglob("*")), "nothing was stored"
    again = compile(module, CompileOptions(cache=False))          # loaded from disk
    assert sum(isinstance(t, HostOpThunk) for t in again._program.thunks) == 2
    np.testing.assert_array_equal(again.run(state)[0], first[0])
    np.testing.assert_array_equal(first[0], hlo.evaluate(module, [state])[0])
