"""The caching allocator gives arrays of the dtype asked for, ml_dtypes' types included.

`runtime.empty` builds its arrays through the array interface, whose type string cannot
name bfloat16, the float8 types or int4/int2 (numpy spells them "<V2", "|V1"): such an
array came back as void bytes. The CPU backend takes outputs of 64 KiB and more from this
allocator, so a bf16[2,2,128,128] dot returned dtype |V2 (found by running XLA's oneDNN
matmul test modules through the backend).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy import backend_cpu, hlo, runtime

NARROW = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4,
          ml_dtypes.uint4, ml_dtypes.int2]


@pytest.mark.parametrize("dtype", NARROW + [np.float32, np.int8, np.complex64])
def test_empty_keeps_the_dtype(dtype):
    for dims in [(3,), (1 << 17,), (2, 1 << 16)]:          # small and large blocks
        array = runtime.empty(dims, dtype)
        assert array.dtype == np.dtype(dtype) and array.shape == dims
        array[...] = np.zeros(dims, dtype)                    # writable, the right size
        assert array.nbytes == int(np.prod(dims)) * np.dtype(dtype).itemsize


@pytest.mark.parametrize("pipeline", [None, "default"])
def test_large_bf16_output_of_a_compiled_dot(pipeline):
    text = """HloModule m

ENTRY e {
  a = bf16[2,2,128,64] parameter(0)
  b = bf16[2,2,64,128] parameter(1)
  ROOT d = bf16[2,2,128,128] dot(a, b), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
}
"""
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(p.shape.dims).astype(ml_dtypes.bfloat16)
            for p in hlo.parse_module(text).entry.parameters]
    expected = hlo.evaluate(hlo.parse_module(text), args)[0]
    got = backend_cpu.compile(hlo.parse_module(text),
                              backend_cpu.CompileOptions(pipeline=pipeline,
                                                         disk_cache=False)).run(*args)[0]
    assert got.dtype == ml_dtypes.bfloat16 and got.shape == (2, 2, 128, 128)
    np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32),
                               rtol=1e-2, atol=1e-2)
