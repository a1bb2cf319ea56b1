"""bitcast-convert to and from the 2- and 4-bit types (s2/s4/u2/u4) in the CPU backend.

XLA's rule (shape inference and its CPU backend): a narrower result adds a minor
dimension of src_bits/dst_bits elements, a wider one consumes it; the pieces are
taken lowest bits first, so s8[n] -> s4[n,2] is each byte's low nibble, then its
high one, and a 2-bit element is a quarter of a byte. Our s2/s4/u2/u4 are held one
per byte in the low bits (llvm/types.py). The backend once emitted `bitcast i4 ...
to i8` for these (an LLVM parse error, reported as an internal error).

XLA_CASES are XLA's own outputs (jax 0.10.2, jax.lax.bitcast_convert_type on the CPU,
random bits): each is checked against the evaluator and the backend. The random
tests then compare the backend with the evaluator bit for bit over random bits of
every sub-byte pairing with the 8/16/32-bit integer and float types (bf16, f8*),
unfused and fused, with both pipelines.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.hlo.dtypes import dtype as hlo_dtype, numpy_dtype

RNG = np.random.default_rng(2417)
SUB_BYTE = ("s2", "s4", "u2", "u4")

# (operand type, dims, operand bits, result type, dims, result bits), from XLA.
XLA_CASES = [
    ("s8", [3], [171, 206, 5], "s4", [3, 2], [11, 10, 14, 12, 5, 0]),
    ("u8", [3], [206, 120, 131], "u2", [3, 4], [2, 3, 0, 3, 0, 2, 3, 1, 3, 0, 0, 2]),
    ("s8", [2], [161, 73], "s2", [2, 4], [1, 0, 2, 2, 1, 2, 0, 1]),
    ("bf16", [2], [64194, 3534], "u4", [2, 4], [2, 12, 10, 15, 14, 12, 13, 0]),
    ("f8e4m3fn", [3], [71, 98, 146], "s4", [3, 2], [7, 4, 2, 6, 2, 9]),
    ("s32", [1], [1754379058], "u4", [1, 8], [2, 3, 3, 11, 1, 9, 8, 6]),
    ("f32", [1], [562902478], "s2", [1, 16], [2, 3, 0, 3, 1, 1, 3, 0, 1, 3, 0, 2, 1, 0, 2, 0]),
    ("s4", [2, 2], [0, 0, 0, 2], "u8", [2], [0, 32]),
    ("u2", [2, 4], [3, 0, 2, 3, 0, 1, 1, 1], "s8", [2], [227, 84]),
    ("u4", [2, 4], [15, 2, 14, 12, 13, 1, 6, 10], "bf16", [2], [52783, 42525]),
    ("s2", [1, 4], [1, 2, 2, 2], "f8e5m2", [1], [169]),
    ("u4", [1, 8], [0, 15, 8, 14, 4, 5, 14, 2], "s32", [1], [777316592]),
]


def width(t: str) -> int:
    return hlo_dtype(t).bits


def from_bits(t: str, raw, dims) -> np.ndarray:
    """An array of type t whose elements have the bits `raw` (sub-byte: the low bits)."""
    raw = np.asarray(raw, np.uint64).reshape(dims)
    container = np.dtype(f"u{max(1, width(t) // 8)}")
    return raw.astype(container).view(numpy_dtype(t))


def to_bits(t: str, x: np.ndarray) -> np.ndarray:
    """The bits of each element (a sub-byte element's low bits, the rest of its byte
    ignored, as ml_dtypes reads it)."""
    x = np.ascontiguousarray(x)
    bits = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    return bits & np.uint64((1 << width(t)) - 1) if width(t) < 8 else bits


def random_bits(t: str, dims) -> np.ndarray:
    n = int(np.prod(dims, dtype=np.int64))
    raw = RNG.integers(0, 1 << min(width(t), 63), size=n, dtype=np.uint64)
    return from_bits(t, raw, dims)


def result_dims(src: str, dims: tuple, dst: str) -> tuple:
    a, b = width(src), width(dst)
    if a > b:
        return tuple(dims) + (a // b,)
    if a < b:
        return tuple(dims[:-1])
    return tuple(dims)


def operand_dims(src: str, dst: str, outer=(3, 5)) -> tuple:
    a, b = width(src), width(dst)
    return tuple(outer) + ((b // a,) if a < b else ())


def shape(t: str, dims) -> str:
    return f"{t}[{','.join(map(str, dims))}]"


def plain(src, dims, dst) -> str:
    return (f"HloModule m\n\nENTRY e {{\n  p = {shape(src, dims)} parameter(0)\n"
            f"  ROOT r = {shape(dst, result_dims(src, dims, dst))} bitcast-convert(p)\n}}\n")


def compiled_bits(text, args, dst) -> list[np.ndarray]:
    """The result bits of the backend with no pipeline and with the default one, after
    checking they agree with each other."""
    outs = []
    for pipeline in (None, "default"):
        exe = backend_cpu.compile(hlo.parse_module(text),
                                  backend_cpu.CompileOptions(pipeline=pipeline, disk_cache=False))
        (got,) = exe.run(*args)
        assert got.dtype == numpy_dtype(dst)
        outs.append(to_bits(dst, got))
    np.testing.assert_array_equal(outs[0], outs[1])
    return outs[0]


@pytest.mark.parametrize("src,dims,raw,dst,out_dims,want", XLA_CASES,
                         ids=[f"{c[0]}_to_{c[3]}" for c in XLA_CASES])
def test_bits_equal_xla(src, dims, raw, dst, out_dims, want):
    text = plain(src, dims, dst)
    m = hlo.parse_module(text)
    hlo.verify(m)
    assert m.entry.root.shape.dims == tuple(out_dims)
    x = from_bits(src, raw, dims)
    want = np.asarray(want, np.uint64).reshape(out_dims)
    (ev,) = hlo.evaluate(m, [x])
    np.testing.assert_array_equal(to_bits(dst, ev), want)
    np.testing.assert_array_equal(compiled_bits(text, [x], dst), want)


OTHERS = ("s8", "u8", "s16", "u16", "s32", "u32", "s64", "f16", "bf16", "f32", "f64",
          "f8e4m3fn", "f8e5m2", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e8m0fnu")
PAIRS = sorted({(a, b) for a in SUB_BYTE for b in SUB_BYTE + OTHERS if a != b}
               | {(b, a) for a in SUB_BYTE for b in OTHERS})


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{a}_to_{b}" for a, b in PAIRS])
def test_random_bits_backend_equals_evaluator(src, dst):
    dims = operand_dims(src, dst)
    text = plain(src, dims, dst)
    x = random_bits(src, dims)
    (ev,) = hlo.evaluate(hlo.parse_module(text), [x])
    np.testing.assert_array_equal(compiled_bits(text, [x], dst), to_bits(dst, ev))


@pytest.mark.parametrize("wide,narrow", [("s8", "s4"), ("u8", "u2"), ("s32", "s4"),
                                         ("bf16", "u4"), ("f8e4m3fn", "s2"), ("f64", "u4")])
def test_narrow_then_widen_gives_back_the_bits(wide, narrow):
    dims = (4, 6)
    mid = result_dims(wide, dims, narrow)
    text = (f"HloModule m\n\nENTRY e {{\n  p = {shape(wide, dims)} parameter(0)\n"
            f"  n = {shape(narrow, mid)} bitcast-convert(p)\n"
            f"  ROOT r = {shape(wide, dims)} bitcast-convert(n)\n}}\n")
    x = random_bits(wide, dims)
    np.testing.assert_array_equal(compiled_bits(text, [x], wide), to_bits(wide, x))


def test_fused_with_arithmetic_on_the_pieces():
    # The nibbles of each byte, widened to s32 and summed with the byte's own value:
    # bitcast-convert, convert, reduce and add in one pipeline's fusions.
    text = """HloModule m

add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}

ENTRY e {
  p = s8[16,8] parameter(0)
  n = s4[16,8,2] bitcast-convert(p)
  w = s32[16,8,2] convert(n)
  zero = s32[] constant(0)
  s = s32[16,8] reduce(w, zero), dimensions={2}, to_apply=add
  q = u4[16,8,2] bitcast-convert(p)
  back = s8[16,8] bitcast-convert(q)
  b32 = s32[16,8] convert(back)
  ROOT r = s32[16,8] add(s, b32)
}
"""
    x = random_bits("s8", (16, 8))
    (ev,) = hlo.evaluate(hlo.parse_module(text), [x])
    nib = x.view(np.uint8).astype(np.int64)
    lo, hi = nib & 15, nib >> 4
    signed = lambda v: np.where(v >= 8, v - 16, v)               # noqa: E731
    np.testing.assert_array_equal(ev, signed(lo) + signed(hi) + x.astype(np.int64))
    np.testing.assert_array_equal(compiled_bits(text, [x], "s32"), to_bits("s32", ev))


def test_zero_size():
    text = plain("u8", (0,), "u2")
    x = np.zeros((0,), np.uint8)
    assert compiled_bits(text, [x], "u2").shape == (0, 4)
