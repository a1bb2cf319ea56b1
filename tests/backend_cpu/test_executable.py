"""The executable's contract: argument checks, the compile cache, buffer assignment,
introspection (IR, assembly, HLO), partitioned launches and compile-time errors."""
from __future__ import annotations

import re

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import runtime
from tests.backend_cpu.helpers import compiled

ELEMENTWISE = """HloModule ew
ENTRY e {
  x = f32[64,256] parameter(0)
  y = f32[64,256] parameter(1)
  a = f32[64,256] add(x, y)
  m = f32[64,256] multiply(a, x)
  ROOT n = f32[64,256] negate(m)
}"""

CHAIN = """HloModule chain
ENTRY e {
  x = f32[128,128] parameter(0)
  a = f32[128,128] exponential(x)
  b = f32[128,128] negate(a)
  c = f32[128,128] abs(b)
  d = f32[128,128] sqrt(c)
  ROOT f = f32[128,128] add(d, x)
}"""


def test_run_checks_argument_count_dtype_and_shape():
    _, exe = compiled(ELEMENTWISE)
    x = np.ones((64, 256), np.float32)
    with pytest.raises(TypeError, match="expected 2 arguments"):
        exe.run(x)
    with pytest.raises(TypeError, match=r"parameter 1 \(y.*float32"):
        exe.run(x, x.astype(np.float64))
    with pytest.raises(ValueError, match=r"parameter 0 \(x.*\(64, 256\)"):
        exe.run(np.ones((64, 255), np.float32), x)


def test_non_contiguous_and_unaligned_inputs_are_copied():
    _, exe = compiled(ELEMENTWISE)
    rng = np.random.default_rng(0)
    big = rng.standard_normal((256, 64)).astype(np.float32)
    x = big.T                                          # a transposed view
    raw = np.zeros(64 * 256 * 4 + 1, np.uint8)[1:]      # misaligned by one byte
    y = raw.view(np.float32).reshape(64, 256)
    y[...] = 2.0
    (out,) = exe.run(x, y)
    np.testing.assert_allclose(out, -((x + y) * x), rtol=1e-6)


def test_compiling_the_same_module_twice_is_free():
    module = hlo.parse_module(ELEMENTWISE)
    first = backend_cpu.compile(module)
    again = backend_cpu.compile(hlo.parse_module(ELEMENTWISE))
    assert again is first
    uncached = backend_cpu.compile(module, backend_cpu.CompileOptions(cache=False))
    assert uncached is not first


def test_temporaries_share_the_arena():
    """Four 64 KiB temporaries in a chain live two at a time: the arena holds two."""
    _, exe = compiled(CHAIN)
    stats = exe.memory_stats()
    one = 128 * 128 * 4
    assert stats["num_kernels"] == 5
    assert stats["arena_bytes"] == 2 * one
    x = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    (out,) = exe.run(x)
    np.testing.assert_allclose(out, np.sqrt(np.abs(-np.exp(x))) + x, rtol=2e-5, atol=1e-6)


def test_aliases_cost_no_kernel_and_results_are_fresh():
    text = """HloModule alias
ENTRY e {
  x = f32[4,6] parameter(0)
  r = f32[24] reshape(x)
  b = f32[6,4] bitcast(x)
  ROOT t = (f32[24], f32[6,4], f32[4,6]) tuple(r, b, x)
}"""
    _, exe = compiled(text)
    assert exe.memory_stats()["num_kernels"] == 0
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    r, b, same = exe.run(x)
    np.testing.assert_array_equal(r, x.reshape(24))
    np.testing.assert_array_equal(b, x.reshape(6, 4))
    np.testing.assert_array_equal(same, x)
    r[0] = 100
    assert x[0, 0] == 0 and same[0, 0] == 0       # outputs never alias inputs or each other


def test_elementwise_kernel_uses_full_width_vectors(isa):
    _, exe = compiled(ELEMENTWISE, isa.level)
    assert isa.vector_type("f32") in exe.as_llvm_ir()
    assert isa.uses_full_vectors(exe.as_asm())
    if isa.runs:
        x = np.linspace(-2, 2, 64 * 256, dtype=np.float32).reshape(64, 256)
        np.testing.assert_array_equal(exe.run(x, x)[0], -((x + x) * x))


@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("t", ["f32", "s32"])
def test_row_reduction_is_vectorized(op, t, isa):
    """The reduction loop keeps a full-width vector of partial results (a whole
    register of the target)."""
    _, exe = compiled(f"""HloModule rowreduce
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] {op}(a, b)
}}
ENTRY e {{
  x = {t}[64,1024] parameter(0)
  one = {t}[] constant(1)
  ROOT r = {t}[64] reduce(x, one), dimensions={{1}}, to_apply=red
}}""", isa.level)
    assert isa.vector_type(t) in exe.as_llvm_ir()
    assert isa.uses_full_vectors(exe.as_asm())
    if not isa.runs:
        return
    x = np.random.default_rng(2).integers(-3, 4, (64, 1024)).astype(t.replace("f", "float").replace("s", "int"))
    if op == "multiply":
        x = np.where(np.abs(x) > 1, 1, x).astype(x.dtype)
    reference = {"add": lambda v: v.sum(1) + 1, "multiply": lambda v: v.prod(1),
                 "maximum": lambda v: np.maximum(v.max(1), 1),
                 "minimum": lambda v: np.minimum(v.min(1), 1)}[op](x)
    np.testing.assert_array_equal(exe.run(x)[0], reference.astype(x.dtype))


def test_as_hlo_text_round_trips():
    module, exe = compiled(ELEMENTWISE)
    assert hlo.parse_module(exe.as_hlo_text()).to_text() == module.to_text()


def test_partitioned_launch_matches_single_partition():
    """A large kernel is split over the intra-op pool; the result does not change."""
    text = """HloModule big
ENTRY e {
  x = f32[512,1024] parameter(0)
  ROOT t = f32[512,1024] tanh(x)
}"""
    x = np.random.default_rng(3).standard_normal((512, 1024)).astype(np.float32)
    _, exe = compiled(text)
    kernel_thunks = [t for t in exe._program.thunks if hasattr(t, "dims")]
    assert kernel_thunks[0].dims.total == 512
    parallel = exe.run(x)[0]
    saved = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=1)
    try:
        single = backend_cpu.compile(hlo.parse_module(text),
                                     backend_cpu.CompileOptions(cache=False)).run(x)[0]
    finally:
        runtime.configure(intra_op_threads=saved)
    np.testing.assert_array_equal(parallel, single)


def test_unsupported_opcode_fails_at_compile_time():
    module = hlo.parse_module("""HloModule rng_state
ENTRY e {
  ROOT r = u64[2] rng-get-and-update-state(), delta=4
}""")
    with pytest.raises(NotImplementedError,
                       match="backend_cpu: no emitter for rng-get-and-update-state"):
        backend_cpu.compile(module)


def test_non_default_entry_layouts_take_and_return_logical_arrays():
    """Arrays cross the API in logical row-major form whatever the physical layout."""
    _, exe = compiled("""HloModule layouts
ENTRY e {
  x = f32[3,4]{0,1} parameter(0)
  n = f32[3,4]{0,1} negate(x)
  c = f32[3,4]{1,0} copy(x)
  ROOT t = (f32[3,4]{0,1}, f32[3,4]{1,0}, f32[3,4]{0,1}) tuple(n, c, x)
}""")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    negated, copied, same = exe.run(x)
    np.testing.assert_array_equal(negated, -x)
    np.testing.assert_array_equal(copied, x)
    np.testing.assert_array_equal(same, x)


@pytest.mark.parametrize("t,shape,perm", [("f32", (64, 48), (1, 0)), ("f64", (3, 16, 24), (0, 2, 1)),
                                          ("s8", (40, 16), (1, 0)), ("f16", (8, 8), (1, 0)),
                                          ("f32", (16, 8, 24), (2, 0, 1)), ("u32", (12, 20), (1, 0)),
                                          ("s32", (2, 32, 48), (0, 2, 1)), ("f32", (48, 24), (1, 0))])
def test_transposes(t, shape, perm, isa):
    """Register-block transposes (8 x 8 shuffles, or 16 x 16 where 16 elements fill one
    register of the target) where the sizes allow, tiled loops elsewhere."""
    out = tuple(shape[p] for p in perm)
    _, exe = compiled(f"""HloModule tr
ENTRY e {{
  x = {t}[{",".join(map(str, shape))}] parameter(0)
  ROOT r = {t}[{",".join(map(str, out))}] transpose(x), dimensions={{{",".join(map(str, perm))}}}
}}""", isa.level)
    if isa.runs:
        x = (np.arange(np.prod(shape)) % 251).astype(hlo.numpy_dtype(t)).reshape(shape)
        np.testing.assert_array_equal(exe.run(x)[0], x.transpose(perm))
    blocked = shape[perm[-1]] % 8 == 0 and out[-2] % 8 == 0 and perm[-1] == len(shape) - 2
    assert ("shufflevector" in exe.as_llvm_ir()) == blocked
    wide = blocked and np.dtype(hlo.numpy_dtype(t)).itemsize == 4 and shape[perm[-1]] % 16 == 0 \
        and out[-2] % 16 == 0 and isa.lanes(4) == 16
    assert bool(re.search(r"shufflevector <16 x (float|i32)>", exe.as_llvm_ir())) == wide


def test_memory_cache_is_a_bounded_lru(monkeypatch):
    from xlapy.backend_cpu import compiler
    monkeypatch.setattr(compiler, "CACHE_CAPACITY", 3)
    texts = [f"HloModule lru{k}\nENTRY e {{\n  x = f32[2] parameter(0)\n  c = f32[] constant({k})\n"
             f"  b = f32[2] broadcast(c), dimensions={{}}\n  ROOT r = f32[2] add(x, b)\n}}\n"
             for k in range(5)]
    first = backend_cpu.compile(hlo.parse_module(texts[0]))
    for text in texts[1:3]:
        backend_cpu.compile(hlo.parse_module(text))
    assert backend_cpu.compile(hlo.parse_module(texts[0])) is first     # a hit refreshes it
    for text in texts[3:]:
        backend_cpu.compile(hlo.parse_module(text))
    assert len(compiler._cache) <= 3
    assert backend_cpu.compile(hlo.parse_module(texts[0])) is first     # still recently used


def test_deep_fused_chains_compile():
    """A fusion of thousands of chained ops (generators nest one call per op) compiles,
    also off the main thread."""
    import threading
    n = 2000
    body = ["  p = f32[16] parameter(0)"] + [
        f"  v{i} = f32[16] negate({'p' if i == 0 else f'v{i - 1}'})" for i in range(n - 1)]
    body.append(f"  ROOT v{n - 1} = f32[16] negate(v{n - 2})")
    text = ("HloModule deep\nfused {\n" + "\n".join(body) + "\n}\nENTRY e {\n"
            "  x = f32[16] parameter(0)\n  ROOT f = f32[16] fusion(x), kind=kLoop, calls=fused\n}\n")
    results = []
    thread = threading.Thread(target=lambda: results.append(
        backend_cpu.compile(hlo.parse_module(text)).run(np.arange(16, dtype=np.float32))[0]))
    thread.start()
    thread.join()
    np.testing.assert_array_equal(results[0], np.arange(16, dtype=np.float32))


@pytest.mark.parametrize("pipeline", [None, "default"])
def test_tuple_shaped_constants_compile_without_passes_too(pipeline):
    """A tuple constant is one constant slot per leaf (no pipeline used to raise
    KeyError 'tuple' in the compiler)."""
    module = hlo.parse_module("""HloModule tuple_constant
ENTRY e {
  x = f32[2] parameter(0)
  c = ((f32[2], s32[]), pred[3]) constant((({1, 2}, 3), {1, 0, 1}))
  t = (f32[2], s32[]) get-tuple-element(c), index=0
  g = f32[2] get-tuple-element(t), index=0
  i = s32[] get-tuple-element(t), index=1
  p = pred[3] get-tuple-element(c), index=1
  a = f32[2] add(g, x)
  ROOT r = (f32[2], s32[], pred[3], (f32[2], s32[])) tuple(a, i, p, t)
}""")
    x = np.float32([10, 20])
    got = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=pipeline)).run(x)
    expected = hlo.evaluate(module, [x])          # tuple results flattened, as run's
    assert len(got) == len(expected) == 5
    for a, e in zip(got, expected):
        np.testing.assert_array_equal(a, np.asarray(e))


@pytest.mark.parametrize("src,dst,values", [
    ("pred", "u8", [True, False, True, True]), ("pred", "s8", [False, True, False, True]),
    ("u8", "pred", [0, 1, 2, 255]), ("s8", "pred", [0, -1, 2, -128])])
def test_bitcast_convert_of_pred_and_bytes(src, dst, values):
    """pred is one byte: to u8/s8 it is 0 or 1; a byte read as pred is true when nonzero."""
    module = hlo.parse_module(f"""HloModule bitcast_pred
ENTRY e {{
  x = {src}[4] parameter(0)
  y = {dst}[4] bitcast-convert(x)
  ROOT t = ({dst}[4], {dst}[4]) tuple(y, {dst}[4] bitcast-convert(x))
}}""".replace(f"{dst}[4] bitcast-convert(x))", "y)"))
    x = np.array(values, hlo.numpy_dtype(src))
    expected = hlo.evaluate(module, [x])
    for pipeline in (None, "default"):
        got = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=pipeline)).run(x)
        for a, e in zip(got, expected):
            np.testing.assert_array_equal(a, np.asarray(e))
