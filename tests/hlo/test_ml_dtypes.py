"""The narrow element types in hlo/: bf16 (held natively), the 8-bit floats and
s2/s4/u2/u4 -- parsing, printing, literals, and the evaluator's convert,
bitcast-convert and arithmetic.

The reference for converts and arithmetic is XLA's CPU backend itself:
tests/hlo/data/ml_dtypes_xla.npz holds what it computed (made with JAX by
tools/make_ml_dtypes_reference.py): converts of every pair of a narrow type and
another type over special values (NaN, inf, max, subnormals, nudged ties), and
add/subtract/multiply/divide/maximum/exponential of every value of each 8-bit
float (a sample of bf16) with another.
"""
from __future__ import annotations

import pathlib

import ml_dtypes
import numpy as np
import pytest

from xlapy import hlo
from xlapy.hlo.dtypes import DTYPES, dtype
from xlapy.hlo.narrow_types import cast
from xlapy.hlo.parse_errors import ParseError

REFERENCE = np.load(pathlib.Path(__file__).parent / "data" / "ml_dtypes_xla.npz")

# The byte-wide narrow floats and bf16 (the reference archive's types); f4e2m1fn has a
# test of its own at the end.
NARROW_FLOATS = [n for n, d in DTYPES.items() if d.is_narrow and d.is_float and d.bits >= 8]
NARROW_INTS = [n for n, d in DTYPES.items() if d.is_narrow and not d.is_float]
F8 = [n for n in NARROW_FLOATS if n != "bf16"]


def from_reference(name: str, stored: np.ndarray) -> np.ndarray:
    """Arrays of the npz (bits of narrow floats, int8 values of narrow ints) as `name`."""
    d = dtype(name)
    if d.is_narrow and d.is_float:
        return stored.view(d.numpy)
    if d.is_narrow:
        return stored.astype(d.numpy)
    return stored


def bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.itemsize in (1, 2) and a.dtype in [DTYPES[n].numpy for n in NARROW_FLOATS]:
        return a.view(np.uint16 if a.itemsize == 2 else np.uint8)
    if a.dtype in [DTYPES[n].numpy for n in NARROW_INTS]:
        return a.astype(np.int8)
    return a


def assert_same_bits(got, want, name: str, what: str) -> None:
    """Bit-equal, except that any NaN matches any NaN."""
    got_bits, want_bits = bits(got), bits(want)
    differ = got_bits != want_bits
    d = dtype(name)
    if d.is_float:
        with np.errstate(invalid="ignore"):
            both_nan = np.isnan(np.asarray(got).astype(np.float64)) & \
                np.isnan(np.asarray(want).astype(np.float64))
        differ &= ~both_nan
    assert not differ.any(), (f"{what}: {differ.sum()} of {differ.size} differ, first: "
                              f"{list(zip(got_bits[differ][:5], want_bits[differ][:5]))}")


def evaluate(text: str, *args):
    return hlo.evaluate(hlo.parse_module(text), list(args))


def unary_module(src: str, dst: str, op: str, n: int) -> str:
    return (f"HloModule m\nENTRY e {{\n  p = {src}[{n}] parameter(0)\n"
            f"  ROOT r = {dst}[{n}] {op}(p)\n}}\n")


# --- types -----------------------------------------------------------------------------

def test_every_narrow_type_has_its_ml_dtypes_array_type():
    assert dtype("bf16").numpy == ml_dtypes.bfloat16
    assert dtype("f8e4m3fn").numpy == ml_dtypes.float8_e4m3fn
    assert dtype("s4").numpy == ml_dtypes.int4 and dtype("u2").numpy == ml_dtypes.uint2
    assert hlo.from_numpy(ml_dtypes.bfloat16).name == "bf16"
    assert hlo.from_numpy(ml_dtypes.float8_e8m0fnu).name == "f8e8m0fnu"
    assert {n: dtype(n).compute for n in ("bf16", "f8e5m2", "f8e8m0fnu", "s4", "u2")} == \
        {"bf16": "f32", "f8e5m2": "f16", "f8e8m0fnu": "f32", "s4": "s8", "u2": "u8"}
    assert dtype("s4").int_range == (-8, 7) and dtype("u2").int_range == (0, 3)
    assert hlo.Shape("s4", (3,)).nbytes == 3          # one element per byte, unpacked


# --- parse and print ------------------------------------------------------------------

ROUND_TRIP = [
    ("bf16", "{0.1, -0, inf, -inf, nan, -nan(0x1), 3.389e+38, 9.184e-41}"),
    ("f8e5m2", "{1.5, -0, inf, -inf, nan, nan(0x1), -nan(0x2), 57344, 1.526e-05}"),
    ("f8e4m3fn", "{448, -448, 0.001953, -0, nan, -nan, 0.1}"),
    ("f8e4m3b11fnuz", "{30, -30, 0.0001221, 0, nan, 0.1016}"),
    ("f8e5m2fnuz", "{57344, 7.629e-06, 0, nan, -1.25}"),
    ("f8e4m3fnuz", "{240, 0.0004883, 0, nan, 3.5}"),
    ("f8e8m0fnu", "{1, 2, 0.5, 1.701e+38, 5.877e-39, nan}"),
    ("f8e4m3", "{240, inf, -inf, nan, nan(0x3), 0.001953, -0}"),
    ("f8e3m4", "{15.5, inf, nan, 0.01562, -0.0625}"),
    ("s4", "{-8, 7, 0, -1}"),
    ("u4", "{0, 15, 3}"),
    ("s2", "{-2, 1, 0}"),
    ("u2", "{0, 3}"),
]


@pytest.mark.parametrize("element_type,literal", ROUND_TRIP, ids=[t for t, _ in ROUND_TRIP])
def test_constants_print_and_parse_back_to_the_same_bits(element_type, literal):
    n = literal.count(",") + 1
    text = (f"HloModule m\nENTRY e {{\n  ROOT c = {element_type}[{n}] "
            f"constant({literal})\n}}\n")
    module = hlo.parse_module(text)
    hlo.verify(module)
    value = module.entry.root.literal
    assert value.dtype == dtype(element_type).numpy
    printed = hlo.print_module(module)
    again = hlo.parse_module(printed)
    assert_same_bits(again.entry.root.literal, value, element_type, "reparsed")
    assert hlo.print_module(again) == printed
    # NaN payloads and signs are kept bit for bit where the type has them.
    if "nan(0x" in literal:
        np.testing.assert_array_equal(bits(again.entry.root.literal), bits(value))


def test_literal_values_round_like_xla():
    c = lambda t, v: hlo.parse_module(   # noqa: E731
        f"HloModule m\nENTRY e {{\n  ROOT c = {t}[] constant({v})\n}}\n").entry.root.literal
    assert float(c("f8e4m3fn", "464").astype(np.float32)) == 448     # rounds down to max
    assert float(c("f8e5m2", "1.125").astype(np.float32)) == 1.0     # tie to even
    assert float(c("f8e5m2", "1.1250001").astype(np.float32)) == 1.25   # once, from the text
    assert np.isnan(c("f8e4m3fn", "inf").astype(np.float32))          # no inf: its NaN
    assert int(c("s4", "-8")) == -8 and int(c("u4", "15")) == 15
    assert float(c("f8e8m0fnu", "3").astype(np.float32)) == 4.0


@pytest.mark.parametrize("element_type,value,message", [
    ("f8e4m3fn", "500", "out of range for literal's primitive type F8E4M3FN"),
    ("f8e5m2", "65536", "out of range"),
    ("f8e4m3fnuz", "-256", "out of range"),
    ("f8e8m0fnu", "0", "out of range"),
    ("bf16", "1e39", "out of range"),
    ("s4", "8", "out of range for literal's primitive type S4 [-8, 7]"),
    ("u4", "-1", "out of range"),
    ("s2", "-3", "out of range"),
    ("u2", "4", "out of range"),
    ("f8e4m3fn", "nan(0x1)", "f8e4m3fn has no NaN payloads"),
    ("f8e5m2", "nan(0x4)", "does not fit the 2 significand bits"),
])
def test_literals_xla_rejects(element_type, value, message):
    with pytest.raises(ParseError, match=message.replace("[", r"\[").replace("(", r"\(")):
        hlo.parse_module(f"HloModule m\nENTRY e {{\n  ROOT c = {element_type}[] "
                         f"constant({value})\n}}\n")


def test_unknown_type_names_the_close_one():
    with pytest.raises(ParseError, match="f8e4m3fn"):
        hlo.parse_module("HloModule m\nENTRY e {\n  ROOT p = f8e4m3fm[2] parameter(0)\n}\n")


# --- convert: XLA's bits --------------------------------------------------------------

CONVERT_KEYS = sorted(k for k in REFERENCE.files if k.startswith("convert/"))


@pytest.mark.parametrize("key", CONVERT_KEYS)
def test_convert_equals_xla(key):
    _, src, dst = key.split("/")
    x = from_reference(src, REFERENCE[f"src/{src}"])
    (got,) = evaluate(unary_module(src, dst, "convert", x.size), x)
    want = from_reference(dst, REFERENCE[key])
    assert got.dtype == dtype(dst).numpy
    assert_same_bits(got, want, dst, key)


@pytest.mark.parametrize("dst", NARROW_FLOATS)
@pytest.mark.parametrize("src", ["f32", "f16"] + NARROW_FLOATS)
def test_convert_to_narrow_floats_equals_ml_dtypes_casts(src, dst):
    """From f32, f16 and the narrow floats, XLA's conversion is ml_dtypes' cast."""
    x = from_reference(src, REFERENCE[f"src/{src}"])
    with np.errstate(all="ignore"):
        want = x.astype(np.float32).astype(dtype(dst).numpy)
    assert_same_bits(cast(x, dst), want, dst, f"{src} -> {dst}")


def test_convert_differs_from_ml_dtypes_where_xla_does():
    # f64 -> f8: XLA rounds once; ml_dtypes goes through f32 (twice).
    x = np.array([1 + 2**-3 + 2**-30, 1 + 2**-4 + 2**-30])
    assert list(cast(x, "f8e5m2").astype(np.float32)) == [1.25, 1.0]
    assert list(cast(x, "f8e4m3fn").astype(np.float32)) == [1.125, 1.125]
    # f64 -> bf16: XLA does round twice (through f32), and the f32 step flushes denormals.
    assert float(cast(np.array([1 + 2**-8 + 2**-30]), "bf16").astype(np.float32)[0]) == 1.0
    assert float(cast(np.array([1e-39]), "bf16").astype(np.float32)[0]) == 0.0
    assert float(cast(np.array([1e-39], np.float32), "bf16").astype(np.float32)[0]) != 0.0
    # float -> s4/u4 saturates (ml_dtypes wraps); NaN -> 0; int -> s4 wraps.
    f = np.array([300, -300, np.nan, 7.9, -8.9], np.float32)
    assert list(cast(f, "s4").astype(int)) == [7, -8, 0, 7, -8]
    assert list(cast(f, "u4").astype(int)) == [15, 0, 0, 7, 0]
    assert list(cast(np.array([14, -9, 100]), "s4").astype(int)) == [-2, 7, 4]


# --- arithmetic: XLA's bits -----------------------------------------------------------

OP_KEYS = sorted(k for k in REFERENCE.files if k.startswith("op/"))


@pytest.mark.parametrize("key", OP_KEYS)
def test_elementwise_ops_equal_xla(key):
    _, op, t = key.split("/")
    if t in NARROW_INTS:
        a, b = (from_reference(t, v) for v in REFERENCE[f"pairs/{t}"])
    else:
        a = from_reference(t, REFERENCE[f"src/{t}"])
        b = a[::-1].copy()
    n = a.size
    if op == "exponential":
        text = unary_module(t, t, op, n).replace("parameter(0)", "parameter(0)\n  q = "
                                                 f"{t}[{n}] parameter(1)")
    else:
        text = (f"HloModule m\nENTRY e {{\n  p = {t}[{n}] parameter(0)\n  q = {t}[{n}] "
                f"parameter(1)\n  ROOT r = {t}[{n}] {op}(p, q)\n}}\n")
    (got,) = evaluate(text, a, b)
    want = from_reference(t, REFERENCE[key])
    if op == "exponential":
        # XLA's exp approximation and the evaluator's exact one may round differently
        # at a tie of the compute type: allow one step of the type, nowhere else.
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(all="ignore"):
            near = np.isclose(g, w, rtol=2.0 ** -dtype(t).mantissa_bits, atol=0)
        mismatch = ~near & ~(np.isnan(g) & np.isnan(w)) & (g != w)
        assert not mismatch.any(), f"{key}: {list(zip(g[mismatch][:5], w[mismatch][:5]))}"
        return
    assert_same_bits(got, want, t, key)


def test_f8_arithmetic_goes_through_f16():
    # e5m2: 1.25 * 1.25 = 1.5625 is exact in f16 and a tie to 1.5 in e5m2 (even).
    (r,) = evaluate("HloModule m\nENTRY e {\n  p = f8e5m2[1] parameter(0)\n"
                    "  ROOT r = f8e5m2[1] multiply(p, p)\n}\n",
                    np.array([1.25], ml_dtypes.float8_e5m2))
    assert r.dtype == ml_dtypes.float8_e5m2 and float(r.astype(np.float32)[0]) == 1.5


def test_bf16_arithmetic_flushes_denormals_like_f32():
    x = np.array([0x0001, 0x0040, 0x8001], np.uint16).view(ml_dtypes.bfloat16)
    (r,) = evaluate("HloModule m\nENTRY e {\n  p = bf16[3] parameter(0)\n"
                    "  ROOT r = bf16[3] add(p, p)\n}\n", x)
    assert list(r.view(np.uint16)) == [0, 0, 0x8000]      # XLA: [0, 0, 32768]
    (c,) = evaluate(unary_module("bf16", "f32", "convert", 3), x)
    assert list(c.view(np.uint32)) == [0x10000, 0x400000, 0x80010000]   # kept by convert
    (p,) = evaluate(unary_module("bf16", "pred", "convert", 3), x)
    assert p.tolist() == [True, True, True]                            # XLA: not flushed
    (f,) = evaluate(unary_module("f32", "pred", "convert", 2), np.array([1e-40, -1e-40], np.float32))
    assert f.tolist() == [False, False]                                # XLA: flushed


# --- bitcast-convert ------------------------------------------------------------------

def test_bitcast_convert_of_native_bf16_and_f8():
    x = np.array([1.0, -2.0, np.inf, np.nan], ml_dtypes.bfloat16)
    (u,) = evaluate(unary_module("bf16", "u16", "bitcast-convert", 4), x)
    np.testing.assert_array_equal(u, x.view(np.uint16))
    (back,) = evaluate(unary_module("u16", "bf16", "bitcast-convert", 4), u)
    np.testing.assert_array_equal(back.view(np.uint16), x.view(np.uint16))
    (pairs,) = evaluate("HloModule m\nENTRY e {\n  p = bf16[4] parameter(0)\n"
                        "  ROOT r = u8[4,2] bitcast-convert(p)\n}\n", x)
    np.testing.assert_array_equal(pairs, x.view(np.uint8).reshape(4, 2))
    (f,) = evaluate("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"
                    "  ROOT r = bf16[2,2] bitcast-convert(p)\n}\n", np.array([1.5, -3], np.float32))
    np.testing.assert_array_equal(f.view(np.uint16), np.array([1.5, -3], np.float32)
                                  .view(np.uint16).reshape(2, 2))
    for t in F8:
        all_bits = np.arange(256, dtype=np.uint8)
        (v,) = evaluate(unary_module("u8", t, "bitcast-convert", 256), all_bits)
        np.testing.assert_array_equal(v.view(np.uint8), all_bits)
        (s,) = evaluate(unary_module(t, "s8", "bitcast-convert", 256), v)
        np.testing.assert_array_equal(s, all_bits.view(np.int8))


def test_bitcast_convert_of_sub_byte_integers():
    # s8[2] -> s4[2,2]: the low nibble first.
    (n,) = evaluate("HloModule m\nENTRY e {\n  p = u8[2] parameter(0)\n"
                    "  ROOT r = s4[2,2] bitcast-convert(p)\n}\n", np.array([0x1F, 0x80], np.uint8))
    assert n.tolist() == [[-1, 1], [0, -8]]
    (back,) = evaluate("HloModule m\nENTRY e {\n  p = s4[2,2] parameter(0)\n"
                       "  ROOT r = u8[2] bitcast-convert(p)\n}\n", n)
    assert back.tolist() == [0x1F, 0x80]
    (u,) = evaluate(unary_module("s4", "u4", "bitcast-convert", 3), np.array([-1, -8, 7], ml_dtypes.int4))
    assert u.dtype == ml_dtypes.uint4 and u.astype(int).tolist() == [15, 8, 7]
    (q,) = evaluate("HloModule m\nENTRY e {\n  p = u8[1] parameter(0)\n"
                    "  ROOT r = u2[1,4] bitcast-convert(p)\n}\n", np.array([0b11100100], np.uint8))
    assert q.astype(int).tolist() == [[0, 1, 2, 3]]


# --- reductions, dots, called computations, zero-size ------------------------------------

def test_reduce_and_dot_compute_in_the_compute_type_and_round_once():
    rng = np.random.default_rng(3)
    for t in ("bf16", "f8e4m3fn", "f8e5m2"):
        np_t = dtype(t).numpy
        x = rng.uniform(-2, 2, (4, 64)).astype(np.float32).astype(np_t)
        (s,) = evaluate(f"""HloModule m
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] add(a, b)
}}
ENTRY e {{
  p = {t}[4,64] parameter(0)
  z = {t}[] constant(0)
  ROOT r = {t}[4] reduce(p, z), dimensions={{1}}, to_apply=add
}}
""", x)
        want = x.astype(np.float64).sum(axis=1)
        assert s.dtype == np_t
        np.testing.assert_allclose(s.astype(np.float64), want.astype(np.float32).astype(np_t)
                                   .astype(np.float64), rtol=2.0 ** -dtype(t).mantissa_bits)
        (d,) = evaluate(f"""HloModule m
ENTRY e {{
  p = {t}[4,64] parameter(0)
  ROOT r = {t}[4,4] dot(p, p), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
}}
""", x)
        wide = x.astype(np.float64)
        np.testing.assert_allclose(d.astype(np.float64), (wide @ wide.T).astype(np.float32)
                                   .astype(np_t).astype(np.float64),
                                   rtol=2.0 ** -dtype(t).mantissa_bits)


def test_called_computations_of_a_widened_op_keep_the_compute_type():
    # The reducer's f8 ops are not rounded to f8 between steps: 16 ones sum to 16, and
    # 64 ones to 64, where per-step e4m3fn rounding would stop at 16 + 1 -> 16.
    x = np.ones(64, ml_dtypes.float8_e4m3fn)
    (s,) = evaluate("""HloModule m
add {
  a = f8e4m3fn[] parameter(0)
  b = f8e4m3fn[] parameter(1)
  one = f8e4m3fn[] constant(1)
  ab = f8e4m3fn[] add(a, b)
  ROOT c = f8e4m3fn[] multiply(ab, one)
}
ENTRY e {
  p = f8e4m3fn[64] parameter(0)
  z = f8e4m3fn[] constant(0)
  ROOT r = f8e4m3fn[] reduce(p, z), dimensions={0}, to_apply=add
}
""", x)
    assert float(s.astype(np.float32)) == 64


@pytest.mark.parametrize("t", NARROW_FLOATS + NARROW_INTS)
def test_zero_size_arrays(t):
    text = f"""HloModule m
ENTRY e {{
  p = {t}[0,3] parameter(0)
  a = {t}[0,3] maximum(p, p)
  c = f32[0,3] convert(a)
  b = {t}[0,3] convert(c)
  t = {t}[3,0] transpose(b), dimensions={{1,0}}
  ROOT r = ({t}[0,3], f32[0,3], {t}[3,0]) tuple(a, c, t)
}}
"""
    a, c, tr = evaluate(text, np.zeros((0, 3), dtype(t).numpy))
    assert a.dtype == dtype(t).numpy and a.shape == (0, 3)
    assert c.dtype == np.float32 and tr.shape == (3, 0) and tr.dtype == dtype(t).numpy


def test_movement_keeps_every_bit():
    # NaN payloads and signs survive movement ops (they run on the native arrays).
    x = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e5m2).reshape(16, 16)
    (r,) = evaluate("""HloModule m
ENTRY e {
  p = f8e5m2[16,16] parameter(0)
  t = f8e5m2[16,16] transpose(p), dimensions={1,0}
  s = f8e5m2[8,16] slice(t), slice={[0:16:2], [0:16]}
  c = f8e5m2[24,16] concatenate(s, t), dimensions={0}
  ROOT r = f8e5m2[24,16] reverse(c), dimensions={0}
}
""", x)
    want = np.concatenate([x.T[0:16:2], x.T])[::-1]
    np.testing.assert_array_equal(r.view(np.uint8), want.view(np.uint8))


def test_float32_arguments_for_bf16_parameters_are_rounded():
    (r,) = evaluate(unary_module("bf16", "bf16", "negate", 2),
                    np.array([1 + 2**-8, 1 + 3 * 2**-8], np.float32))
    assert r.dtype == ml_dtypes.bfloat16
    assert r.astype(np.float32).tolist() == [-1.0, -(1 + 2**-6)]


def test_f4e2m1fn_reads_computes_and_is_refused_by_the_backend():
    """The 4-bit float of XLA's newer tests (comparison_expander_test): parsed, printed,
    evaluated in its compute type f16 and rounded back with ml_dtypes' conversion (XLA's:
    no inf or NaN, so large values saturate to 6 and NaN becomes -0); the CPU backend
    refuses it by name (its converts read 8-bit floats only)."""
    import ml_dtypes
    import pytest
    from xlapy import backend_cpu, hlo
    text = """HloModule m
ENTRY e {
  a = f4e2m1fn[6] parameter(0)
  b = f4e2m1fn[6] parameter(1)
  s = f4e2m1fn[6] add(a, b)
  lt = pred[6] compare(a, b), direction=LT, order=WEAK
  big = f4e2m1fn[2] constant({100, -0.25})
  ROOT t = (f4e2m1fn[6], pred[6], f4e2m1fn[2]) tuple(s, lt, big)
}"""
    m = hlo.parse_module(text)
    hlo.verify(m)
    printed = hlo.print_module(m)
    assert hlo.print_module(hlo.parse_module(printed)) == printed
    f4 = ml_dtypes.float4_e2m1fn
    a = np.array([0, 0.5, -1.5, 4, 6, -6], np.float32).astype(f4)
    b = np.array([0.5, 0.5, 1, 3, 6, -0.5], np.float32).astype(f4)
    s, lt, big = hlo.evaluate(m, [a, b])
    want = (a.astype(np.float16) + b.astype(np.float16)).astype(f4)
    np.testing.assert_array_equal(s.astype(np.float32), want.astype(np.float32))
    np.testing.assert_array_equal(s.astype(np.float32), [0.5, 1, -0.5, 6, 6, -6])
    np.testing.assert_array_equal(lt, a.astype(np.float32) < b.astype(np.float32))
    np.testing.assert_array_equal(big.astype(np.float32), [6, -0.0])
    with pytest.raises(NotImplementedError, match="f4e2m1fn is parsed and evaluated but not "
                                                  "compiled"):
        backend_cpu.compile(hlo.parse_module(text))
