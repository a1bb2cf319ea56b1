"""jit_compile: the signature cache (shapes, dtypes, static args back and forth),
pytrees in and out, argument errors, inspection (lower/compile/cost analysis),
decorator forms and options."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

from xlapy.frontend import jit_compile, ops
from xlapy.frontend.tensor import Tensor

from .util import assert_close


def test_cache_is_keyed_by_shape_and_dtype_back_and_forth():
    @jit_compile(backend="interpreter")
    def f(x):
        return x * 2 + 1

    calls = [np.ones((2, 3), np.float32), np.ones((4,), np.float32),
             np.ones((2, 3), np.int32), np.ones((2, 3), np.float64)]
    for round_ in range(2):
        for x in calls:
            got = f(x)
            assert got.shape == x.shape and got.dtype == x.dtype
            np.testing.assert_array_equal(got, x * 2 + 1)
    assert f.trace_count == 4 and f.cache_size() == 4


def test_compiled_cache_never_stale():
    @jit_compile
    def f(x, y):
        return ops.reduce_sum(x * y, axis=0)

    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(4, dtype=np.float32)
    for _ in range(2):
        assert_close(f(a, a), (a * a).sum(0))
        assert_close(f(b, b), (b * b).sum(0))
        assert_close(f(a.astype(np.float64), a.astype(np.float64)), (a * a).sum(0))
    assert f.trace_count == 3


def test_static_argnums():
    @jit_compile(static_argnums=(1,), backend="interpreter")
    def f(x, axis):
        return ops.reduce_sum(x, axis=axis)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(f(x, 0), x.sum(0))
    np.testing.assert_array_equal(f(x, 1), x.sum(1))
    np.testing.assert_array_equal(f(x, 0), x.sum(0))
    assert f.trace_count == 2
    with pytest.raises(TypeError, match="hashable"):
        f(x, [0])


def test_pytrees_in_and_out():
    Pair = namedtuple("Pair", "a b")

    @jit_compile
    def f(params, batch, *, scale):
        h = batch["x"] @ params[0] + params[1]
        return {"y": h * scale, "parts": [h.sum(), Pair(h.max(), None)]}

    w, b = np.ones((3, 2), np.float32), np.array([1.0, -1.0], np.float32)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = f((w, b), {"x": x}, scale=2.0)
    h = x @ w + b
    assert set(out) == {"y", "parts"} and isinstance(out["parts"], list)
    assert_close(out["y"], h * 2)
    assert_close(out["parts"][0], h.sum())
    assert isinstance(out["parts"][1], Pair) and out["parts"][1].b is None
    assert_close(out["parts"][1].a, h.max())


def test_python_scalars_and_lists_in():
    f = jit_compile(lambda x, y, z: (x * y, z + 1), backend="interpreter")
    xy, z = f(2.0, [1.0, 2.0], [[1, 2], [3, 4]])
    assert xy.dtype == np.float32 and xy.tolist() == [2.0, 4.0]
    assert z.dtype == np.int32 and z.tolist() == [[2, 3], [4, 5]]


def test_weak_python_scalars_keep_the_tensor_dtype():
    f = jit_compile(lambda x: (x * 2.5, x + 1, x > 0), backend="interpreter")
    out = f(np.ones(3, np.float16))
    assert [o.dtype for o in out] == [np.float16, np.float16, np.bool_]
    out = f(np.ones(3, np.int8))
    assert [o.dtype for o in out] == [np.float32, np.int8, np.bool_]


def test_constant_and_passthrough_outputs():
    f = jit_compile(lambda x: (x, 3.0, np.arange(2)), backend="interpreter")
    x = np.ones(2, np.float32)
    a, b, c = f(x)
    np.testing.assert_array_equal(a, x)
    assert b == 3.0 and b.dtype == np.float32 and c.tolist() == [0, 1]


def test_wrong_number_of_arguments():
    f = jit_compile(lambda x, y: x + y)
    f(np.ones(2, np.float32), np.ones(2, np.float32))          # a valid call is cached
    with pytest.raises(TypeError, match="missing a required argument"):
        f(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="too many positional"):
        f(1.0, 2.0, 3.0)


def test_incompatible_shapes_and_dtypes_name_the_op():
    f = jit_compile(lambda x, y: x @ y)
    with pytest.raises(ValueError, match=r"MatMul: contracting dims differ.*float32\[2,3\]"):
        f(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    g = jit_compile(lambda x, y: x + y)
    with pytest.raises(TypeError, match=r"Add: no integer type holds both int64 and uint64"
                                        r"(.|\n)*test_jit.py"):
        g(np.ones(2, np.int64), np.ones(2, np.uint64))


def test_compiled_object_checks_its_signature():
    f = jit_compile(lambda x: x + 1, backend="interpreter")
    c = f.lower(np.ones(3, np.float32)).compile()
    with pytest.raises(ValueError, match="shape"):
        c(np.ones(4, np.float32))
    with pytest.raises(TypeError, match="dtype"):
        c(np.ones(3, np.int32))
    with pytest.raises(TypeError, match="structure"):
        c((np.ones(3, np.float32),))


def test_lower_and_compile_inspection():
    @jit_compile
    def f(x, w):
        return ops.softmax(ops.relu(x @ w))

    x, w = np.ones((4, 8), np.float32), np.ones((8, 16), np.float32)
    lowered = f.lower(x, w)
    text = lowered.as_hlo_text()
    assert "ENTRY" in text and " dot(" in text and "exponential(" in text
    assert "fusion" not in text
    assert lowered.as_hlo_module().entry.num_parameters == 2
    compiled = lowered.compile()
    assert compiled is f.lower(x, w).compile()          # cached
    assert "fusion(" in compiled.as_hlo_text()
    assert "define" in compiled.as_llvm_ir()
    assert compiled.as_asm().strip()
    assert_close(compiled(x, w), np.full((4, 16), 1 / 16, np.float32))
    cost = compiled.cost_analysis()
    assert cost["flops"] >= 2 * 4 * 8 * 16
    assert cost["transcendentals"] == 4 * 16
    # At least the parameters and the result cross memory once.
    assert cost["bytes accessed"] >= (x.nbytes + w.nbytes + 4 * 16 * 4)


def test_compiling_leaves_the_lowered_module_alone():
    # The backend's passes rewrite a fresh lowering of the graph (no copy through
    # text): it must be the same module, and the Lowered's own must stay unfused.
    @jit_compile
    def f(x):
        return ops.exp(x) * 2.0 + 1.0

    lowered = f.lower(np.ones(8, np.float32))
    before = lowered.as_hlo_text()
    assert lowered.fresh_module().to_text() == before
    compiled = lowered.compile()
    assert lowered.as_hlo_text() == before and "fusion" not in before
    assert "fusion" in compiled.as_hlo_text()
    assert_close(compiled(np.zeros(8, np.float32)), np.full(8, 3.0, np.float32))


def test_cost_analysis_counts_a_matmul_exactly():
    f = jit_compile(lambda a, b: a @ b, pipeline=None)
    a, b = np.ones((3, 5), np.float32), np.ones((5, 7), np.float32)
    cost = f.lower(a, b).compile().cost_analysis()
    assert cost == {"flops": 2 * 3 * 5 * 7, "transcendentals": 0,
                    "bytes accessed": a.nbytes + b.nbytes + 3 * 7 * 4}


def test_decorator_forms_and_options():
    @jit_compile
    def a(x):
        return x + 1

    @jit_compile(pipeline="O0", intra_op_threads=1)
    def b(x):
        return x + 1

    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(a(x), b(x))
    assert "fusion" not in b.lower(x).compile().as_hlo_text()
    assert a.__name__ == "a"
    with pytest.raises(ValueError, match="unknown pipeline"):
        jit_compile(lambda x: x, pipeline="fastest")
    with pytest.raises(ValueError, match="backend"):
        jit_compile(lambda x: x, backend="gpu")


def test_interpreter_backend_has_no_llvm():
    c = jit_compile(lambda x: x * 2, backend="interpreter").lower(np.ones(2)).compile()
    with pytest.raises(NotImplementedError, match="interpreter"):
        c.as_llvm_ir()
    assert "multiply" in c.as_hlo_text()


def test_nested_jit_inlines_into_the_outer_trace():
    inner = jit_compile(lambda x: x * 3)
    outer = jit_compile(lambda x: inner(x) + 1, backend="interpreter")
    np.testing.assert_array_equal(outer(np.ones(2, np.float32)), [4, 4])


def test_tensor_cannot_be_used_as_python_bool_or_array():
    f = jit_compile(lambda x: x if x > 0 else -x, backend="interpreter")
    with pytest.raises(TypeError, match="ops.where"):
        f(np.ones(2, np.float32))
    g = jit_compile(lambda x: np.sin(x), backend="interpreter")
    with pytest.raises(TypeError):
        g(np.ones(2, np.float32))


def test_leaked_tensor_is_an_error():
    leaked = []
    f = jit_compile(lambda x: leaked.append(x) or x, backend="interpreter")
    f(np.ones(2, np.float32))
    g = jit_compile(lambda x: x + leaked[0], backend="interpreter")
    with pytest.raises(ValueError, match="another trace"):
        g(np.ones(2, np.float32))
    assert isinstance(leaked[0], Tensor)
