"""Compiled.memory_analysis(): JAX's field names, sizes that follow from the program."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import jit_compile, ops


def test_fields_follow_the_program():
    n = 64

    def f(x, b):
        h = ops.matmul(x, x)                       # an intermediate the result needs
        return ops.matmul(h, x) + b, ops.reduce_sum(b)

    x = np.ones((n, n), np.float32)
    b = np.ones(n, np.float32)
    stats = jit_compile(f).lower(x, b).compile().memory_analysis()
    assert stats.argument_size_in_bytes == x.nbytes + b.nbytes
    assert stats.output_size_in_bytes == n * n * 4 + 4
    assert stats.temp_size_in_bytes >= n * n * 4  # h lives in the arena
    assert stats.alias_size_in_bytes == 0
    assert stats.generated_code_size_in_bytes > 0
    assert stats.peak_memory_in_bytes == (stats.argument_size_in_bytes
                                          + stats.output_size_in_bytes
                                          + stats.temp_size_in_bytes
                                          + stats.constant_size_in_bytes)
    assert stats.host_temp_size_in_bytes == 0


def test_a_parameter_returned_as_is_is_an_output_copy():
    def f(x):
        return x, x * 2.0

    x = np.ones(100, np.float32)
    stats = jit_compile(f).lower(x).compile().memory_analysis()
    assert stats.argument_size_in_bytes == 400
    assert stats.output_size_in_bytes == 800


def test_the_interpreter_has_no_compiled_program():
    compiled = jit_compile(lambda x: x + 1.0, backend="interpreter").lower(
        np.ones(3, np.float32)).compile()
    with pytest.raises(NotImplementedError, match="memory_analysis: the interpreter backend"):
        compiled.memory_analysis()
