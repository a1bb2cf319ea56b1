"""Non-temporal stores for large outputs (emitters/streaming.py).

A kernel whose output is at least STREAM_MIN_BYTES writes its vector loop with
`vmovntps` and ends with an `sfence`; a small one does neither. Streaming only
changes how values reach memory, so a streamed build must give bit-identical
results to an ordinary one, whatever the alignment of rows and partitions: the
tests lower the threshold to reach the head, chunk and tail paths on small,
odd shapes (and compile without the caches, which do not know the threshold).
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.backend_cpu.emitters import streaming
from tests.backend_cpu.helpers import uniquify
from tests.corpus_util import assert_close

# Every test here inspects code: once per ISA level (tests/targets.py).
pytestmark = pytest.mark.usefixtures("isa_env")

FRESH = backend_cpu.CompileOptions(cache=False, disk_cache=False)

CHAIN = """HloModule chain
fused {{
  x = f32[{n}] parameter(0)
  c = f32[] constant(1.5)
  cb = f32[{n}] broadcast(c), dimensions={{}}
  m = f32[{n}] multiply(x, cb)
  a = f32[{n}] abs(m)
  ROOT s = f32[{n}] subtract(a, x)
}}
ENTRY main {{
  p = f32[{n}] parameter(0)
  ROOT f = f32[{n}] fusion(p), kind=kLoop, calls=fused
}}
"""

# out = x[1:] * 3 - x[:-1] on a row-major matrix: two unaligned reads of one input.
SLICED = """HloModule sliced
fused {{
  x = {t}[{r},{c1}] parameter(0)
  lo = {t}[{r},{c}] slice(x), slice={{[0:{r}], [1:{c1}]}}
  hi = {t}[{r},{c}] slice(x), slice={{[0:{r}], [0:{c}]}}
  k = {t}[] constant(3)
  kb = {t}[{r},{c}] broadcast(k), dimensions={{}}
  m = {t}[{r},{c}] multiply(lo, kb)
  ROOT s = {t}[{r},{c}] subtract(m, hi)
}}
ENTRY main {{
  p = {t}[{r},{c1}] parameter(0)
  ROOT f = {t}[{r},{c}] fusion(p), kind=kLoop, calls=fused
}}
"""

SOFTMAX = """HloModule softmax
max {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
fused {{
  x = f32[{r},{c}] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[{r}] reduce(x, ninf), dimensions={{1}}, to_apply=max
  mb = f32[{r},{c}] broadcast(mx), dimensions={{0}}
  d = f32[{r},{c}] subtract(x, mb)
  ex = f32[{r},{c}] exponential(d)
  z = f32[] constant(0)
  sm = f32[{r}] reduce(ex, z), dimensions={{1}}, to_apply=add
  sb = f32[{r},{c}] broadcast(sm), dimensions={{0}}
  ROOT o = f32[{r},{c}] divide(ex, sb)
}}
ENTRY main {{
  p = f32[{r},{c}] parameter(0)
  ROOT f = f32[{r},{c}] fusion(p), kind=kCustom, calls=fused
}}
"""


def _compile(text: str, threshold: int | None = None):
    """A fresh executable of `text`; with `threshold`, as if it were STREAM_MIN_BYTES."""
    saved = streaming.STREAM_MIN_BYTES
    if threshold is not None:
        streaming.STREAM_MIN_BYTES = threshold
    try:
        module = hlo.parse_module(uniquify(text))
        return module, backend_cpu.compile(module, FRESH)
    finally:
        streaming.STREAM_MIN_BYTES = saved


def test_large_output_streams_and_small_does_not():
    n_large = streaming.STREAM_MIN_BYTES // 4 + 13      # just above the threshold, odd
    _, large = _compile(CHAIN.format(n=n_large))
    _, small = _compile(CHAIN.format(n=1000))
    large_asm, small_asm = large.as_asm(), small.as_asm()
    assert "movntps" in large_asm and "sfence" in large_asm
    assert "movnt" not in small_asm and "sfence" not in small_asm


def test_wants_streaming_needs_one_large_output_with_long_rows():
    from xlapy.hlo.shape import Shape

    class Out:
        def __init__(self, shape):
            self.shape = shape
    big = Shape("f32", (4096, 4096))
    assert streaming.wants_streaming(big, [Out(big)])
    assert not streaming.wants_streaming(big, [Out(big), Out(big)])        # multi-output
    narrow = Shape("f32", (1 << 22, 3))
    assert not streaming.wants_streaming(narrow, [Out(narrow)])            # 12-byte rows
    bytes_ = Shape("u8", (1 << 25,))
    assert not streaming.wants_streaming(bytes_, [Out(bytes_)])            # 1-byte elements


@pytest.mark.parametrize("n", [1000, 1024, 4099])
@pytest.mark.parametrize("offset", [0, 1, 7])
def test_streamed_elementwise_is_bit_identical(n, offset):
    """Odd sizes, and inputs that start off a cache line (a numpy slice of a larger array)."""
    text = CHAIN.format(n=n)
    module, streamed = _compile(text, threshold=256)
    assert "movntps" in streamed.as_asm()
    base = np.random.default_rng(n + offset).standard_normal(n + offset).astype(np.float32)
    x = base[offset:]
    if not streamed.target.runs_on_host:
        return                  # a level this host cannot run: compiled and inspected only
    (actual,) = streamed.run(x)
    (expected,) = hlo.evaluate(module, [x])
    np.testing.assert_array_equal(actual, np.asarray(expected))


@pytest.mark.parametrize("etype", ["f32", "f64"])
@pytest.mark.parametrize("rows,cols", [(5, 333), (8, 512), (3, 1031)])
def test_streamed_sliced_rows_are_bit_identical(etype, rows, cols):
    """Rows whose length is no multiple of a cache line: each row has its own head
    and tail; the fused slices read the input one element apart."""
    text = SLICED.format(t=etype, r=rows, c=cols, c1=cols + 1)
    module, streamed = _compile(text, threshold=256)
    assert "movnt" in streamed.as_asm()
    x = np.random.default_rng(cols).standard_normal((rows, cols + 1)).astype(hlo.numpy_dtype(etype))
    if not streamed.target.runs_on_host:
        return                  # a level this host cannot run: compiled and inspected only
    (actual,) = streamed.run(x)
    (expected,) = hlo.evaluate(module, [x])
    np.testing.assert_array_equal(actual, np.asarray(expected))


@pytest.mark.parametrize("rows,cols", [(6, 1027), (4, 2048)])
def test_streamed_softmax_matches_ordinary_stores(rows, cols):
    """The row normalization's last pass streams. A streamed row is also summed on
    vectors (elemental/vector_gen.py), in another order than LLVM's vectorizer: equal within
    DESIGN.md's tolerance, not bit for bit."""
    text = SOFTMAX.format(r=rows, c=cols)
    _, streamed = _compile(text, threshold=256)
    _, ordinary = _compile(text, threshold=1 << 62)
    assert "movntps" in streamed.as_asm() and "movnt" not in ordinary.as_asm()
    x = np.random.default_rng(rows).standard_normal((rows, cols)).astype(np.float32) * 5
    if not streamed.target.runs_on_host:
        return                  # a level this host cannot run: compiled and inspected only
    assert_close(streamed.run(x)[0], ordinary.run(x)[0], "streamed softmax")


TRANSPOSE = """HloModule transpose
ENTRY main {{
  p = f32[{a},{b}] parameter(0)
  ROOT t = f32[{b},{a}] transpose(p), dimensions={{1,0}}
}}
"""


@pytest.mark.parametrize("a,b", [(48, 64), (512, 256), (80, 48)])
def test_block_transpose_streams_whole_lines(a, b):
    """Large transposes stream (and walk pairs of blocks when the rows allow it:
    512 x 256 also runs as two partitions)."""
    text = TRANSPOSE.format(a=a, b=b)
    _, streamed = _compile(text, threshold=256)
    _, ordinary = _compile(text, threshold=1 << 62)
    assert "movntps" in streamed.as_asm() and "sfence" in streamed.as_asm()
    assert "movnt" not in ordinary.as_asm()
    x = np.random.default_rng(a).standard_normal((a, b)).astype(np.float32)
    if not streamed.target.runs_on_host:
        return                  # a level this host cannot run: compiled and inspected only
    np.testing.assert_array_equal(streamed.run(x)[0], x.T)


CENTER = """HloModule center
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
fused {{
  x = f32[{r},{c}] parameter(0)
  z = f32[] constant(0)
  sm = f32[{r}] reduce(x, z), dimensions={{1}}, to_apply=add
  sb = f32[{r},{c}] broadcast(sm), dimensions={{0}}
  ROOT o = f32[{r},{c}] subtract(x, sb)
}}
ENTRY main {{
  p = f32[{r},{c}] parameter(0)
  ROOT f = f32[{r},{c}] fusion(p), kind=kLoop, calls=fused
}}
"""


@pytest.mark.parametrize("rows,cols", [(7, 1000), (4, 1024)])
def test_hoisted_row_kernel_prefetches_the_next_row(rows, cols):
    """A row kernel that reads its input in several passes prefetches the next row
    while it streams the current one out; the values are those of ordinary stores
    (within tolerance: the streamed row sums on vectors, in another order)."""
    text = CENTER.format(r=rows, c=cols)
    _, streamed = _compile(text, threshold=256)
    _, ordinary = _compile(text, threshold=1 << 62)
    assert "prefetcht0" in streamed.as_asm() and "movntps" in streamed.as_asm()
    assert "prefetch" not in ordinary.as_asm()
    x = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32)
    # x - sum(x) cancels: the two sums differ by a few roundings of the row's size.
    slack = 4 * np.finfo(np.float32).eps * np.abs(x).sum(axis=1).max()
    if not streamed.target.runs_on_host:
        return                  # a level this host cannot run: compiled and inspected only
    np.testing.assert_allclose(streamed.run(x)[0], ordinary.run(x)[0], rtol=1e-6, atol=slack)


INT_CHAIN = """HloModule int_chain
fused {{
  x = {t}[{n}] parameter(0)
  k = {t}[] constant(3)
  kb = {t}[{n}] broadcast(k), dimensions={{}}
  m = {t}[{n}] multiply(x, kb)
  ROOT s = {t}[{n}] xor(m, x)
}}
ENTRY main {{
  p = {t}[{n}] parameter(0)
  ROOT f = {t}[{n}] fusion(p), kind=kLoop, calls=fused
}}
"""


@pytest.mark.parametrize("etype", ["s32", "u64"])
def test_streamed_integers_are_exact(etype):
    text = INT_CHAIN.format(t=etype, n=2053)
    module, streamed = _compile(text, threshold=256)
    assert "movnt" in streamed.as_asm()
    info = np.iinfo(hlo.numpy_dtype(etype))
    x = np.random.default_rng(1).integers(info.min, info.max, 2053, dtype=hlo.numpy_dtype(etype))
    if not streamed.target.runs_on_host:
        return                  # a level this host cannot run: compiled and inspected only
    (actual,) = streamed.run(x)
    (expected,) = hlo.evaluate(module, [x])
    np.testing.assert_array_equal(actual, np.asarray(expected))
