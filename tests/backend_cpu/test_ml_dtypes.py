"""The narrow element types in the CPU backend (bf16 held natively, the 8-bit floats,
s2/s4/u2/u4): buffers of ml_dtypes arrays, converts emitted on the bits
(elemental/narrow_convert.py), arithmetic in the compute type
(passes/narrow_types.py). Compared with the evaluator, which is itself checked
against XLA's bits in tests/hlo/test_ml_dtypes.py: converts and exact operations
bit for bit (any NaN matching any NaN), transcendental ones within a step of the type.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from xlapy.hlo.dtypes import DTYPES, dtype
from tests.hlo.test_ml_dtypes import REFERENCE, assert_same_bits, from_reference

# f4e2m1fn is refused by the backend (tests/hlo/test_ml_dtypes.py checks that).
NARROW_FLOATS = [n for n, d in DTYPES.items() if d.is_narrow and d.is_float and n != "f4e2m1fn"]
NARROW_INTS = [n for n, d in DTYPES.items() if d.is_narrow and not d.is_float]
WIDE = ["pred", "s8", "s32", "u8", "u64", "f16", "f32", "f64"]


def run_both(text: str, *args, pipeline=None):
    module = hlo.parse_module(text)
    got = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=pipeline)).run(*args)
    want = hlo.evaluate(module, list(args))
    return got, want


def check(text: str, *args, approximate=(), pipeline=None):
    """Backend == evaluator on every output; outputs in `approximate` within one step."""
    got, want = run_both(text, *args, pipeline=pipeline)
    leaves = hlo.parse_module(text).entry.root.shape.leaves()
    for i, (g, w, s) in enumerate(zip(got, want, leaves)):
        assert g.dtype == w.dtype == dtype(s.element_type).numpy, f"output {i}"
        if i in approximate:
            step = 2.0 ** -max(dtype(s.element_type).mantissa_bits, 1)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=step, equal_nan=True, err_msg=f"output {i}")
        else:
            assert_same_bits(g, w, s.element_type, f"output {i} ({s.element_type})")
    return got


def source_values(name: str) -> np.ndarray:
    if f"src/{name}" in REFERENCE.files:
        return from_reference(name, REFERENCE[f"src/{name}"])
    if name == "pred":
        return np.array([True, False] * 8)
    values = REFERENCE["src/s32"]
    with np.errstate(all="ignore"):
        return values.astype(dtype(name).numpy)


@pytest.mark.parametrize("src", NARROW_FLOATS + NARROW_INTS + WIDE)
def test_convert_every_pair_equals_the_evaluator(src):
    """One module per source type: converts to every narrow type (and, from a narrow
    type, to every type), over special values: NaN, inf, max, subnormals, ties."""
    x = source_values(src)
    n = x.size
    narrow_src = dtype(src).is_narrow
    targets = [t for t in NARROW_FLOATS + NARROW_INTS + (WIDE if narrow_src else []) if t != src]
    lines = [f"  r{i} = {t}[{n}] convert(p)" for i, t in enumerate(targets)]
    text = (f"HloModule m\nENTRY e {{\n  p = {src}[{n}] parameter(0)\n" + "\n".join(lines) +
            f"\n  ROOT t = ({', '.join(f'{t}[{n}]' for t in targets)}) "
            f"tuple({', '.join(f'r{i}' for i in range(len(targets)))})\n}}\n")
    check(text, x)


@pytest.mark.parametrize("pipeline", [None, "default"])
@pytest.mark.parametrize("t", NARROW_FLOATS)
def test_float_arithmetic_equals_the_evaluator(t, pipeline):
    """As written (a kernel per instruction) and through the CPU pipeline (one fused,
    vectorized loop with the converts inside)."""
    a = source_values(t)
    b = a[::-1].copy()
    n = a.size
    text = f"""HloModule m
ENTRY e {{
  p = {t}[{n}] parameter(0)
  q = {t}[{n}] parameter(1)
  add = {t}[{n}] add(p, q)
  mul = {t}[{n}] multiply(p, q)
  div = {t}[{n}] divide(p, q)
  max = {t}[{n}] maximum(p, q)
  neg = {t}[{n}] negate(p)
  lt = pred[{n}] compare(p, q), direction=LT
  sel = {t}[{n}] select(lt, p, q)
  cl = {t}[{n}] clamp(q, p, q)
  ex = {t}[{n}] exponential(p)
  tn = {t}[{n}] tanh(q)
  ROOT r = ({t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}], pred[{n}], {t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}]) tuple(add, mul, div, max, neg, lt, sel, cl, ex, tn)
}}
"""
    check(text, a, b, approximate=(8, 9), pipeline=pipeline)


@pytest.mark.parametrize("t", NARROW_INTS)
def test_integer_arithmetic_equals_the_evaluator_and_xla(t):
    a, b = (from_reference(t, v) for v in REFERENCE[f"pairs/{t}"])
    n = a.size
    ops = ["add", "multiply", "subtract", "maximum"]
    lines = "\n".join(f"  {o} = {t}[{n}] {o}(p, q)" for o in ops)
    text = (f"HloModule m\nENTRY e {{\n  p = {t}[{n}] parameter(0)\n  q = {t}[{n}] parameter(1)\n"
            f"{lines}\n  sh = {t}[{n}] shift-left(p, q)\n"
            f"  ROOT r = ({', '.join([f'{t}[{n}]'] * 5)}) tuple({', '.join(ops)}, sh)\n}}\n")
    got = check(text, a, b)
    for o, g in zip(ops, got):
        np.testing.assert_array_equal(g.astype(np.int8),
                                      from_reference(t, REFERENCE[f"op/{o}/{t}"]).astype(np.int8))


@pytest.mark.parametrize("pipeline", [None, "default"])
@pytest.mark.parametrize("t", ["bf16", "f8e4m3fn", "f8e5m2", "f8e8m0fnu"])
def test_reduce_dot_and_movement(t, pipeline):
    rng = np.random.default_rng(5)
    np_t = dtype(t).numpy
    x = rng.uniform(0.25, 2, (6, 40)).astype(np.float32).astype(np_t)
    text = f"""HloModule m
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] add(a, b)
}}
ENTRY e {{
  p = {t}[6,40] parameter(0)
  z = {t}[] constant(0.5)
  r = {t}[6] reduce(p, z), dimensions={{1}}, to_apply=add
  d = {t}[6,6] dot(p, p), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
  f = f32[6,6] dot(p, p), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
  t = {t}[40,6] transpose(p), dimensions={{1,0}}
  s = {t}[3,40] slice(p), slice={{[0:6:2], [0:40]}}
  c = {t}[9,40] concatenate(p, s), dimensions={{0}}
  pd = {t}[8,42] pad(p, z), padding=1_1x1_1
  bc = {t}[6,40,2] broadcast(p), dimensions={{0,1}}
  ROOT o = ({t}[6], {t}[6,6], f32[6,6], {t}[40,6], {t}[9,40], {t}[8,42], {t}[6,40,2]) tuple(r, d, f, t, c, pd, bc)
}}
"""
    check(text, x, approximate=(0, 1, 2), pipeline=pipeline)


@pytest.mark.parametrize("t", NARROW_FLOATS + NARROW_INTS)
def test_bitcast_convert_and_constants(t):
    d = dtype(t)
    bits_type = {16: "u16", 8: "u8"}.get(d.bits, "u4" if d.bits == 4 else "u2")
    other = {16: "s16", 8: "s8"}.get(d.bits, "s4" if d.bits == 4 else "s2")
    if d.is_float:
        x = np.arange(1 << d.bits, dtype=np.uint16 if d.bits == 16 else np.uint8)[::7 if d.bits == 16 else 1]
        x = np.ascontiguousarray(x).view(d.numpy)
    else:
        lo, hi = d.int_range
        x = np.arange(lo, hi + 1).astype(d.numpy)
    n = x.size
    c = "{1, 0}" if t != "f8e8m0fnu" else "{1, 2}"
    text = f"""HloModule m
ENTRY e {{
  p = {t}[{n}] parameter(0)
  u = {bits_type}[{n}] bitcast-convert(p)
  s = {other}[{n}] bitcast-convert(p)
  back = {t}[{n}] bitcast-convert(s)
  k = {t}[2] constant({c})
  one = {t}[] constant(1)
  kb = {t}[2] broadcast(one), dimensions={{}}
  ROOT r = ({bits_type}[{n}], {other}[{n}], {t}[{n}], {t}[2], {t}[2]) tuple(u, s, back, k, kb)
}}
"""
    got = check(text, x)
    if d.bits >= 8:
        np.testing.assert_array_equal(got[0], x.view(got[0].dtype))
    np.testing.assert_array_equal(got[2].view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("t", ["bf16", "f8e4m3fn", "s4", "u2"])
def test_zero_size(t):
    text = f"""HloModule m
ENTRY e {{
  p = {t}[0,5] parameter(0)
  a = {t}[0,5] maximum(p, p)
  c = f32[0,5] convert(a)
  ROOT r = ({t}[0,5], f32[0,5]) tuple(a, c)
}}
"""
    a, c = check(text, np.zeros((0, 5), dtype(t).numpy))
    assert a.shape == (0, 5) and c.shape == (0, 5)


def test_bf16_end_to_end_is_two_bytes_and_rounds_each_op():
    x = np.array([1 + 2**-7, 3e38, -1e-39, 1.5], ml_dtypes.bfloat16)
    text = """HloModule m
ENTRY e {
  p = bf16[4] parameter(0)
  a = bf16[4] add(p, p)
  m = bf16[4] multiply(a, p)
  u = u16[4] bitcast-convert(m)
  ROOT r = (bf16[4], u16[4]) tuple(m, u)
}
"""
    m, u = check(text, x)
    assert m.dtype == ml_dtypes.bfloat16 and m.nbytes == 8
    np.testing.assert_array_equal(u, m.view(np.uint16))
    # 2 * (1 + 2^-7) * (1 + 2^-7) = 2 + 2^-5 + 2^-13 -> bf16 2 + 2^-5 (rounded per op)
    assert float(m[0]) == 2 + 2**-5 and np.isinf(float(m[1])) and float(m[2]) == 0.0


def test_wrong_argument_dtype_is_a_clear_error():
    module = hlo.parse_module("HloModule m\nENTRY e {\n  p = bf16[2] parameter(0)\n"
                              "  ROOT r = bf16[2] negate(p)\n}\n")
    with pytest.raises(TypeError, match="must have dtype bfloat16"):
        backend_cpu.compile(module).run(np.zeros(2, np.float32))
