"""Block transposes whose block rows are not the output's second-minor dimension
(backend_cpu/emitters/transpose.py, `_row_dim`): out[c, h, w, n] = in[n, h, w, c], the layout
change of a convolution's weight gradient. The blocks' rows run along the output
dimension the input is contiguous in, every other non-minor dimension is a batch
dimension; such transposes never stream (their block rows are not whole lines of one
matrix); a dimension shorter than a block makes one partial block. The values must be
numpy's transpose exactly, also split at every unit.
"""
from __future__ import annotations

import pytest

from tests.backend_cpu.test_transpose_batched import STREAM_ALWAYS, check, threads  # noqa: F401

# Every test here inspects code: once per ISA level (tests/targets.py).
pytestmark = pytest.mark.usefixtures("isa_env")


@pytest.mark.parametrize("dims,perm,t,extent", [
    ((8, 16, 16, 32), (3, 1, 2, 0), "f32", 16 * 16 * 4),   # 8 x 8 blocks, 256 batches
    ((16, 3, 8), (2, 1, 0), "f32", 3),                      # batch dim between them
    ((16, 2, 16), (2, 1, 0), "f64", 2 * 2),                 # f64: 8 x 8 blocks
    ((32, 2, 16), (2, 1, 0), "f32", None),                  # 16 x 16 blocks (or 8 x 8)
    ((16, 3, 8, 8), (3, 1, 2, 0), "f32", 3 * 8),            # two batch dims, out [8,3,8,16]
    ((16, 4, 4, 3), (3, 1, 2, 0), "f32", 4 * 4),            # 3 rows: one partial block
    ((16, 4, 5), (2, 1, 0), "f64", 4),                      # 5 rows of f64
    ((16, 5), (1, 0), "f32", 1),                            # a matrix of 5 rows
])
def test_rows_along_an_outer_dimension(threads, dims, perm, t, extent, isa_env):  # noqa: F811
    if extent is None:      # 2 batches of one 16-row block, or of two 8-row blocks
        extent = 2 if isa_env.lanes(4) == 16 else 4
    asm = check(dims, perm, t, STREAM_ALWAYS, extent)
    assert "movnt" not in asm
    assert "gather" not in asm        # whole-vector loads, not the loop nest's gathers


def test_unsuitable_sizes_keep_the_loop_nest(threads):  # noqa: F811
    """Block rows of 12 (neither a multiple of 8 nor shorter): the generic loop nest."""
    from tests.backend_cpu.test_transpose_batched import compile_with_threshold, transpose_text
    import numpy as np
    exe = compile_with_threshold(transpose_text((12, 3, 8), (2, 1, 0)), STREAM_ALWAYS)
    x = np.arange(12 * 3 * 8, dtype=np.float32).reshape(12, 3, 8)
    if not exe.target.runs_on_host:
        return                  # a level this host cannot run: compiled and inspected only
    np.testing.assert_array_equal(exe.run(x)[0], x.transpose(2, 1, 0))
