"""bitcast-convert between element types of different widths (issue 14, item 1).

A narrower result adds a minor dimension (u64[2] -> u32[2,2]), a wider one consumes
it (u32[2,2] -> u64[2], as JAX's `rbg` PRNG emits for its key). Such an op is not
elementwise: fusion once handed a rank-1 index into a rank-2 concatenate (IndexError)
and the unfused emitter refused "different widths". Each module goes through parse ->
verify -> evaluate -> compile (no pipeline and the default one) and must give exactly
the bytes numpy's `view` gives.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import passes
from tests.backend_cpu.helpers import edge_values


def _run_everywhere(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """The evaluator's outputs, after checking the backend (both pipelines) gives the same bytes."""
    module = hlo.parse_module(text)
    hlo.verify(module)
    assert hlo.print_module(hlo.parse_module(hlo.print_module(module))) == hlo.print_module(module)
    expected = [np.asarray(e) for e in hlo.evaluate(module, args)]
    for pipeline in (None, "default"):
        executable = backend_cpu.compile(hlo.parse_module(text),
                                         backend_cpu.CompileOptions(pipeline=pipeline))
        actual = executable.run(*args)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert a.dtype == e.dtype and a.shape == e.shape, (pipeline, a.dtype, e.dtype)
            np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), e.reshape(-1).view(np.uint8),
                                          err_msg=str(pipeline))
    return expected


def _dims(dims) -> str:
    return ",".join(map(str, dims))


# (operand type, operand dims, result type, result dims)
RESIZING = [
    ("u64", (2,), "u32", (2, 2)),
    ("u32", (2, 2), "u64", (2,)),
    ("f32", (4,), "u8", (4, 4)),
    ("u8", (3, 5, 4), "f32", (3, 5)),
    ("f64", (3,), "u32", (3, 2)),
    ("u32", (3, 2), "f64", (3,)),
    ("f64", (2, 3), "s16", (2, 3, 4)),
    ("s16", (7, 4), "f64", (7,)),
    ("f16", (5,), "s8", (5, 2)),
    ("s8", (5, 2), "f16", (5,)),
    ("u16", (6, 2), "f32", (6,)),
    ("f32", (), "u8", (4,)),
    ("u8", (4,), "f32", ()),
    ("s32", (0,), "u8", (0, 4)),
]


@pytest.mark.parametrize("src,src_dims,dst,dst_dims", RESIZING,
                         ids=[f"{s}{list(a)}->{d}{list(b)}" for s, a, d, b in RESIZING])
def test_resizing_bitcast_convert_alone(src, src_dims, dst, dst_dims):
    text = (f"HloModule bc\nENTRY e {{\n  x = {src}[{_dims(src_dims)}] parameter(0)\n"
            f"  ROOT r = {dst}[{_dims(dst_dims)}] bitcast-convert(x)\n}}\n")
    x = edge_values(src, int(np.prod(src_dims)), seed=3).reshape(src_dims)
    (result,) = _run_everywhere(text, [x])
    # The evaluator itself against numpy's reinterpretation of the same bytes.
    expected = np.ascontiguousarray(x).reshape(-1).view(hlo.numpy_dtype(dst)) if x.size else \
        np.zeros(dst_dims, hlo.numpy_dtype(dst))
    np.testing.assert_array_equal(result.reshape(-1).view(np.uint8),
                                  expected.reshape(-1).view(np.uint8))
    assert result.shape == dst_dims


@pytest.mark.parametrize("src,src_dims,dst,dst_dims", RESIZING[:11],
                         ids=[f"{s}{list(a)}->{d}{list(b)}" for s, a, d, b in RESIZING[:11]])
def test_resizing_bitcast_convert_between_fused_ops(src, src_dims, dst, dst_dims):
    """Producers and consumers around it are fused: the generator remaps the index."""
    sd, dd = _dims(src_dims), _dims(dst_dims)
    text = f"""HloModule bc
ENTRY e {{
  x = {src}[{sd}] parameter(0)
  y = {src}[{sd}] parameter(1)
  s = {src}[{sd}] maximum(x, y)
  r = {dst}[{dd}] bitcast-convert(s)
  n = {dst}[{dd}] negate(r)
  ROOT t = ({dst}[{dd}], {src}[{sd}]) tuple(n, s)
}}
"""
    n = int(np.prod(src_dims))
    x = edge_values(src, n, seed=1).reshape(src_dims)
    y = edge_values(src, n, seed=2).reshape(src_dims)
    _run_everywhere(text, [x, y])


def test_rbg_key_concatenate_then_widen():
    """The reported case: the 4-word rbg key is joined and widened to u64[2] (fusion
    gave the concatenate a rank-1 index: IndexError)."""
    text = """HloModule rbg
ENTRY e {
  a = u32[2,1] parameter(0)
  b = u32[2,1] parameter(1)
  c = u32[2,2] concatenate(a, b), dimensions={1}
  w = u64[2] bitcast-convert(c)
  one = u64[] constant(1)
  ones = u64[2] broadcast(one), dimensions={}
  ROOT s = u64[2] add(w, ones)
}
"""
    a = np.array([[1], [0xFFFFFFF0]], np.uint32)
    b = np.array([[7], [0x80000000]], np.uint32)
    (result,) = _run_everywhere(text, [a, b])
    np.testing.assert_array_equal(result, np.concatenate([a, b], 1).view(np.uint64).ravel() + 1)
    module = hlo.parse_module(text)
    passes.cpu_pipeline().run(module)
    fused = [i.opcode for c in module.computations for i in c.instructions]
    assert fused.count("fusion") == 1 and "concatenate" in fused and "bitcast-convert" in fused


def test_rbg_key_reshape_then_widen():
    """As JAX prints it before optimization: u32[4] -> reshape u32[2,2] -> u64[2]."""
    text = """HloModule rbg
ENTRY e {
  k = u32[4] parameter(0)
  r = u32[2,2] reshape(k)
  w = u64[2] bitcast-convert(r)
  n = u32[2,2] bitcast-convert(w)
  ROOT t = (u64[2], u32[2,2]) tuple(w, n)
}
"""
    k = np.array([0, 42, 0xDEADBEEF, 0xFFFFFFFF], np.uint32)
    wide, back = _run_everywhere(text, [k])
    np.testing.assert_array_equal(wide, k.view(np.uint64))
    np.testing.assert_array_equal(back, k.reshape(2, 2))


def test_narrowing_feeds_a_reduce_and_a_slice():
    text = """HloModule bc
ENTRY e {
  x = f32[8,3] parameter(0)
  r = u8[8,3,4] bitcast-convert(x)
  c = u32[8,3,4] convert(r)
  zero = u32[] constant(0)
  sum = u32[8,3] reduce(c, zero), dimensions={2}, to_apply=add
  top = u8[8,3,1] slice(r), slice={[0:8], [0:3], [3:4]}
  ROOT t = (u32[8,3], u8[8,3,1]) tuple(sum, top)
}

add {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
  ROOT s = u32[] add(a, b)
}
"""
    x = edge_values("f32", 24, seed=5).reshape(8, 3)
    total, top = _run_everywhere(text, [x])
    np.testing.assert_array_equal(total, x.view(np.uint8).reshape(8, 3, 4).astype(np.uint32).sum(2))
    np.testing.assert_array_equal(top[..., 0], (x.view(np.uint32) >> 24).astype(np.uint8))


def test_resizing_bitcast_convert_is_not_elementwise():
    module = hlo.parse_module("""HloModule bc
ENTRY e {
  x = f32[4] parameter(0)
  same = u32[4] bitcast-convert(x)
  narrow = u8[4,4] bitcast-convert(x)
  ROOT t = (u32[4], u8[4,4]) tuple(same, narrow)
}
""")
    by_name = {i.name: i for i in module.entry.instructions}
    assert by_name["same"].info.is_elementwise
    assert not by_name["narrow"].info.is_elementwise
    assert by_name["narrow"].info.ref is by_name["same"].info.ref


@pytest.mark.parametrize("text,shape", [
    ("u8[3,2] parameter(0)", "bf16[3]"),
    ("bf16[3] parameter(0)", "u8[3,2]"),
    ("f32[3] parameter(0)", "bf16[3,2]"),
])
def test_evaluator_bf16_resizing(text, shape):
    module = hlo.parse_module(f"HloModule bc\nENTRY e {{\n  x = {text}\n"
                              f"  ROOT r = {shape} bitcast-convert(x)\n}}\n")
    hlo.verify(module)
    param = module.entry.parameters[0].shape
    if param.element_type == "u8":
        x = np.array([[0x80, 0x3F], [0, 0xC0], [0x80, 0x7F]], np.uint8)     # 1.0, -2.0, inf
        (r,) = hlo.evaluate(module, [x])
        np.testing.assert_array_equal(r, np.array([1.0, -2.0, np.inf], np.float32))
    elif param.element_type == "bf16":
        (r,) = hlo.evaluate(module, [np.array([1.0, -2.0, np.inf], np.float32)])
        np.testing.assert_array_equal(r, [[0x80, 0x3F], [0, 0xC0], [0x80, 0x7F]])
    else:
        x = np.array([1.0, -2.0, 3.5], np.float32)
        (r,) = hlo.evaluate(module, [x])
        halves = x.view(np.uint16).reshape(3, 2).astype(np.uint32) << 16
        np.testing.assert_array_equal(r, halves.view(np.float32))
