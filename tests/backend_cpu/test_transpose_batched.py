"""Batched transposes (backend_cpu/emitters/transpose.py): register blocks over batch x block-row
units, and row shuffles that keep the minor dimension (attention's head shuffle).

Large outputs store non-temporally; the tests lower streaming.STREAM_MIN_BYTES to
reach that path on small shapes (compiling without the caches, which do not know
the threshold), check the `vmovnt` stores in the assembly, and run every kernel as
one partition per unit of its extent on pools of 2 threads and of 1: the values
must be numpy's transpose exactly.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import runtime
from xlapy.backend_cpu.emitters import streaming
from xlapy.backend_cpu.thunks import KernelThunk

# Every test here inspects code: once per ISA level (tests/targets.py).
pytestmark = pytest.mark.usefixtures("isa_env")

FRESH = backend_cpu.CompileOptions(cache=False, disk_cache=False)
STREAM_ALWAYS, STREAM_NEVER = 256, 1 << 62


def transpose_text(dims, perm, t: str = "f32") -> str:
    fmt = lambda ds: ",".join(map(str, ds))     # noqa: E731
    out = [dims[p] for p in perm]
    return f"""HloModule t
ENTRY e {{
  x = {t}[{fmt(dims)}] parameter(0)
  ROOT y = {t}[{fmt(out)}] transpose(x), dimensions={{{fmt(perm)}}}
}}"""


def compile_with_threshold(text: str, threshold: int):
    saved = streaming.STREAM_MIN_BYTES
    streaming.STREAM_MIN_BYTES = threshold
    try:
        return backend_cpu.compile(hlo.parse_module(text), FRESH)
    finally:
        streaming.STREAM_MIN_BYTES = saved


def the_kernel(exe) -> KernelThunk:
    (kernel,) = [t for t in exe._program.thunks if isinstance(t, KernelThunk)]
    return kernel


@contextmanager
def split_every_unit(kernel: KernelThunk):
    saved = kernel.dims, kernel._single
    kernel.dims, kernel._single = runtime.LaunchDims(kernel.extent, kernel.extent), None
    try:
        yield
    finally:
        kernel.dims, kernel._single = saved


@pytest.fixture(params=[2, 1], ids=["2threads", "1thread"])
def threads(request):
    previous = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=request.param)
    yield request.param
    runtime.configure(intra_op_threads=previous)


def check(dims, perm, t: str, threshold: int, extent: int) -> str:
    """Compiles, checks the extent and the values (as linked and split at every unit);
    returns the assembly."""
    exe = compile_with_threshold(transpose_text(dims, perm, t), threshold)
    kernel = the_kernel(exe)
    assert kernel.extent == extent
    rng = np.random.default_rng(sum(dims))
    dtype = hlo.numpy_dtype(t)
    x = rng.integers(-128, 128, dims).astype(dtype) if np.issubdtype(dtype, np.integer) \
        else (rng.standard_normal(dims) * 100).astype(dtype)
    expected = np.ascontiguousarray(x.transpose(perm))
    if exe.target.runs_on_host:       # else a level this host cannot run: inspected only
        np.testing.assert_array_equal(exe.run(x)[0], expected)
        with split_every_unit(kernel):
            np.testing.assert_array_equal(exe.run(x)[0], expected)
    return exe.as_asm()


@pytest.mark.parametrize("threshold", [STREAM_ALWAYS, STREAM_NEVER], ids=["large", "small"])
def test_batched_minor_swap_splits_batch_and_rows(threads, threshold, isa_env):
    """3 matrices of 64 x 48: 16 x 16 blocks where 16 f32 fill a register, else 8 x 8;
    in pairs (large: 64 / 32 or 64 / 16 units per matrix) or one at a time (small)."""
    n = 16 if isa_env.lanes(4) == 16 else 8
    per_matrix = 64 // (2 * n) if threshold == STREAM_ALWAYS else 64 // n
    asm = check((3, 48, 64), (0, 2, 1), "f32", threshold, extent=3 * per_matrix)
    assert ("movntps" in asm) == (threshold == STREAM_ALWAYS)


def test_batch_dims_permuted_too(threads):
    """[2,3,32,16] -> [3,2,16,32]: the batch offsets follow the input's strides (16 block
    rows per matrix: one step of 16 x 16 blocks, or of a pair of 8 x 8 ones)."""
    asm = check((2, 3, 32, 16), (1, 0, 3, 2), "f32", STREAM_ALWAYS, extent=6 * 1)
    assert "movntps" in asm


def test_batched_f64_blocks(threads):
    check((2, 16, 24), (0, 2, 1), "f64", STREAM_ALWAYS, extent=2 * 3)


@pytest.mark.parametrize("dims,t", [((2, 24, 3, 16), "f32"), ((3, 5, 2, 32), "f16"),
                                    ((2, 4, 3, 128), "s8")])
def test_head_shuffle_streams_whole_rows(threads, dims, t):
    """[B,S,H,D] -> [B,H,S,D] with rows of one line (24 or 5 rows: a partial unit)."""
    b, s, h, _ = dims
    asm = check(dims, (0, 2, 1, 3), t, STREAM_ALWAYS, extent=b * h * -(-s // 16))
    assert "movnt" in asm and "sfence" in asm


def test_row_shuffle_of_long_rows(threads):
    """Rows of 8 lines (loop of 2 steps of 4 lines), a rank-3 shuffle."""
    check((20, 3, 128), (1, 0, 2), "f32", STREAM_ALWAYS, extent=3 * 2)


def test_small_head_shuffle_keeps_the_loop_nest(threads):
    """Below the threshold, or with rows that are not whole lines, no streaming."""
    for dims, threshold in [((2, 24, 3, 16), STREAM_NEVER), ((2, 8, 3, 12), STREAM_ALWAYS)]:
        exe = compile_with_threshold(transpose_text(dims, (0, 2, 1, 3)), threshold)
        assert "movnt" not in exe.as_asm()
        x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
        if not exe.target.runs_on_host:
            return                  # a level this host cannot run: compiled and inspected only
        np.testing.assert_array_equal(exe.run(x)[0], x.transpose(0, 2, 1, 3))
