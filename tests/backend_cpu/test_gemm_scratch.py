"""The GEMM's packing scratch comes from the host, never from the generated code.

Dots and convolutions on the packed GEMM take their packing buffers from a scratch
slot of their kernel (one region per work unit, so threads never share one): the
optimized IR calls no allocator, so running out of memory is the host's MemoryError
when it allocates the arena, never a crash inside a kernel.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import runtime
from xlapy.backend_cpu import executable as executable_module
from xlapy.backend_cpu.gemm.packed_gemm import gemm_scratch_bytes
from tests.backend_cpu.helpers import compiled

# Shapes whose packing buffers outgrow the stack (> 64 KiB), so the scratch slot is used.
DOT = """HloModule dot_scratch
ENTRY e {
  a = f32[132,160] parameter(0)
  b = f32[160,200] parameter(1)
  ROOT d = f32[132,200] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
BATCHED = """HloModule batched_scratch
ENTRY e {
  a = f32[3,100,160] parameter(0)
  b = f32[3,160,200] parameter(1)
  ROOT d = f32[3,100,200] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
}
"""
CONV = """HloModule conv_scratch
ENTRY e {
  x = f32[2,20,20,32] parameter(0)
  k = f32[3,3,32,64] parameter(1)
  ROOT c = f32[2,20,20,64] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""


def _conv_reference(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros(x.shape[:3] + (k.shape[-1],))
    for i in range(3):
        for j in range(3):
            out += padded[:, i:i + 20, j:j + 20, :] @ k[i, j].astype(np.float64)
    return out


CASES = {
    "dot": (DOT, [(132, 160), (160, 200)], lambda a, b: a.astype(np.float64) @ b),
    "batched": (BATCHED, [(3, 100, 160), (3, 160, 200)], lambda a, b: a.astype(np.float64) @ b),
    "conv": (CONV, [(2, 20, 20, 32), (3, 3, 32, 64)], _conv_reference),
}


def test_shapes_need_host_scratch():
    assert gemm_scratch_bytes(lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32",
                              m=132, n=200, k=160) > 64 * 1024
    assert gemm_scratch_bytes(lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32",
                              m=8, n=8, k=8) == 0                       # on the stack
    assert gemm_scratch_bytes(lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32",
                              m=1, n=4096, k=4096) == 0                 # no packing


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_code_allocates_nothing_and_is_right(name):
    text, shapes, reference = CASES[name]
    _, exe = compiled(text)
    llvm_ir = exe.as_llvm_ir()
    assert "_gemm" in llvm_ir
    for allocator in ("aligned_alloc", "malloc", "calloc", "posix_memalign"):
        assert f"@{allocator}(" not in llvm_ir, f"{name}: kernel calls {allocator}"
    assert exe.memory_stats()["arena_bytes"] > 64 * 1024        # the packing scratch
    rng = np.random.default_rng(0)
    args = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    expected = reference(*args)
    for _ in range(2):          # a second call reuses the (now paged-in) arena
        (got,) = exe.run(*args)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_partitions_get_their_own_scratch():
    """With two threads the dot runs as two units at once: each packs into its own region
    (a shared one would corrupt the other's panels)."""
    if runtime.get_options().intra_op_threads < 2:
        pytest.skip("needs two intra-op threads")
    _, exe = compiled(DOT)
    (kernel,) = [t for t in exe._program.thunks if hasattr(t, "kernel")]
    assert kernel.dims.partitions == 2
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (132, 160)).astype(np.float32), \
        rng.uniform(-1, 1, (160, 200)).astype(np.float32)
    for _ in range(5):
        np.testing.assert_allclose(exe.run(a, b)[0], a.astype(np.float64) @ b,
                                   rtol=1e-4, atol=1e-4)


def test_out_of_memory_is_a_python_error(monkeypatch):
    """Scratch is part of the arena the host allocates: failing there is a MemoryError."""
    _, exe = compiled(DOT)

    def no_memory(dims, dtype, nbytes):
        raise MemoryError(f"cannot allocate {nbytes} bytes")
    monkeypatch.setattr(executable_module, "_allocate", no_memory)
    a, b = np.ones((132, 160), np.float32), np.ones((160, 200), np.float32)
    with pytest.raises(MemoryError):
        exe.run(a, b)
