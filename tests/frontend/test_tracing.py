"""Tracing, the registry and dtype rules: trace-time errors name the op, the shapes
and the user's line; unknown ops list close names; custom kernels plug in; the
graph records what a gradient registry needs; promotion follows numpy."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import (Graph, XlaOpKernel, jit_compile, lookup, ops, register_xla_op,
                      registered_ops, tracing)
from xlapy.frontend import dtypes
from xlapy.frontend.lowering import lower_graph

from .util import interpret


def test_shape_error_names_op_shapes_and_user_line():
    def model(x, y):
        return x + y           # the offending line

    with pytest.raises(ValueError) as info:
        interpret(model, np.ones((2, 3), np.float32), np.ones((4,), np.float32))
    message = str(info.value)
    assert message.startswith("Add: shapes [2, 3] and [4] cannot be broadcast together")
    assert "float32[2,3], float32[4]" in message
    assert "test_tracing.py" in message and "return x + y" in message


@pytest.mark.parametrize("fn, args, kind, pattern", [
    (lambda x: ops.reshape(x, [5, -1]), [np.ones((2, 3))], ValueError, "Reshape: cannot reshape 6"),
    (lambda x: ops.transpose(x, [0, 0]), [np.ones((2, 3))], ValueError, "Transpose: perm"),
    (lambda x: ops.reduce_sum(x, axis=2), [np.ones((2, 3))], ValueError,
     "Sum: axis 2 is out of range for rank 2"),
    (lambda x: ops.squeeze(x, 1), [np.ones((2, 3))], ValueError, "Squeeze: cannot squeeze axis 1"),
    (lambda x: x[0, 0, 0], [np.ones((2, 3))], IndexError,
     "StridedSlice: too many indices(.|\n)*test_tracing"),
    (lambda x: x[5], [np.ones((2, 3))], IndexError, "index 5 is out of bounds"),
    (lambda x, y: ops.concat([x, y], 0), [np.ones((2, 3)), np.ones((2, 4))], ValueError,
     "ConcatV2: dims other than axis 0 must agree"),
    (lambda x: ops.matmul(x, x), [np.ones((2, 3))], ValueError, "MatMul: contracting dims"),
    (lambda x: ops.split(x, 4, axis=1), [np.ones((2, 3))], ValueError, "split:"),
    (lambda x: ops.gather(x, x), [np.ones((2, 3))], TypeError, "gather: indices must be int"),
    (lambda x: ops.bias_add(x, x), [np.ones((2, 3))], ValueError, "BiasAdd: bias must be 1-D"),
])
def test_trace_time_errors(fn, args, kind, pattern):
    args = [a.astype(np.float32) for a in args]
    with pytest.raises(kind, match=pattern):
        interpret(fn, *args)


def test_ops_level_errors_carry_the_source_line():
    with pytest.raises(ValueError, match=r"split: dim 1 of float32\[2,3\](.|\n)*test_tracing.py"):
        interpret(lambda x: ops.split(x, 2, axis=1), np.ones((2, 3), np.float32))


def test_unknown_op_lists_close_names():
    with pytest.raises(KeyError, match="did you mean.*Softmax") as info:
        lookup("Sofmax")
    assert str(info.value).startswith("no kernel registered for op 'Sofmax'")
    g = Graph("g")
    with tracing(g):
        x = g.parameter((2,), np.float32)
        with pytest.raises(KeyError, match="no kernel registered for op 'Reluu'.*Relu"):
            ops.apply("Reluu", [x])


def test_registry_covers_the_issue_op_list():
    issue_ops = """Add Sub Mul Div FloorDiv FloorMod Pow Maximum Minimum Neg Abs Sign Exp Log
        Log1p Expm1 Sqrt Rsqrt Square Tanh Sigmoid Erf Sin Cos Floor Ceil Round Relu Relu6
        LeakyRelu Elu Selu Gelu Silu Softplus Softmax LogSoftmax BiasAdd MatMul BatchMatMul
        Einsum Sum Mean Max Min Prod All Any ArgMax ArgMin Reshape Transpose ExpandDims
        Squeeze ConcatV2 Split Slice StridedSlice Pad Tile Cast Select Equal NotEqual Less
        LessEqual Greater GreaterEqual LogicalAnd LogicalOr LogicalNot ClipByValue OneHot
        Range Fill ZerosLike OnesLike GatherV2 Cumsum LayerNorm RMSNorm
        SoftmaxCrossEntropyWithLogits SparseSoftmaxCrossEntropyWithLogits Conv2D
        DepthwiseConv2dNative MaxPool AvgPool""".split()
    assert not set(issue_ops) - set(registered_ops())


def test_custom_kernel_registration():
    name = "TestOnlyCube"
    if name not in registered_ops():
        @register_xla_op(name)
        class Cube(XlaOpKernel):
            def compile(self, ctx):
                b, x = ctx.builder, ctx.input(0)
                ctx.set_output(0, b.multiply(b.multiply(x, x), x))
    with pytest.raises(ValueError, match="already registered"):
        register_xla_op(name)(type("Again", (XlaOpKernel,), {}))
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(interpret(lambda t: ops.apply(name, [t]), x), x ** 3)


def test_graph_records_nodes_for_a_gradient_walk():
    g = Graph("g")
    with tracing(g):
        x = g.parameter((2, 3), np.float32)
        y = ops.reduce_sum(ops.relu(x) * 2.0, axis=1)
        dead = ops.exp(x)        # noqa: F841  (not an output)
    ops_in_order = [n.op for n in g.nodes]
    assert ops_in_order == ["Relu", "Const", "Mul", "Sum", "Exp"]
    total = g.nodes[3]
    assert total.attrs == {"axis": 1, "keepdims": False}
    assert total.outputs == [y] and y.node is total and total.inputs[0].node.op == "Mul"
    assert [n.op for n in g.reachable_nodes([y])] == ["Relu", "Const", "Mul", "Sum"]
    module = lower_graph(g, [y])
    assert "exponential" not in module.to_text()


def test_graph_text():
    g = Graph("g")
    with tracing(g):
        x = g.parameter((2, 3), np.float32)
        ops.reduce_sum(ops.relu(x) * 2.0, axis=1)
    assert g.to_text().splitlines() == [
        "graph g(%arg0: float32[2,3])",
        "  %0 = Relu(%arg0)  : float32[2,3]",
        "  %1 = Const() {value=2.0}  : float32[]",
        "  %2 = Mul(%0, %1)  : float32[2,3]",
        "  %3 = Sum(%2) {axis=1, keepdims=False}  : float32[2]"]


def test_operators_record_the_same_ops_as_functions():
    def fn(x, y):
        return (x + y, x - y, x * y, x / y, x // y, x % y, x ** 2, -x, abs(x),
                x < y, x <= y, x > y, x >= y, x == y, x != y, 2 - x, 1 / x)

    x = np.array([1.5, -2.0, 3.0], np.float32)
    y = np.array([2.0, 0.5, -1.0], np.float32)
    got = interpret(fn, x, y)
    want = fn(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("a, b, want", [
    (np.float16, np.float32, np.float32), (np.int8, np.int32, np.int32),
    (np.int32, np.float16, np.float16), (np.bool_, np.int8, np.int8),
    (np.int8, np.uint8, np.int16), (np.uint8, np.uint32, np.uint32),
    (np.float64, np.float32, np.float64)])
def test_promotion(a, b, want):
    assert dtypes.result_type(a, b) == want
    assert dtypes.result_type(b, a) == want
    if np.dtype(a).kind == np.dtype(b).kind:
        assert np.result_type(a, b) == want          # numpy's rule for same-kind inputs


def test_promotion_in_a_trace():
    f = jit_compile(lambda x, y: x + y, backend="interpreter")
    out = f(np.ones(2, np.int8), np.ones(2, np.float16))
    assert out.dtype == np.float16
    assert f(np.ones(2, np.int8), np.ones(2, np.uint8)).dtype == np.int16


def test_dtype_names():
    assert dtypes.canonical("f32") == np.float32 and dtypes.canonical("float64") == np.float64
    assert dtypes.hlo_name(np.int8) == "s8"
    with pytest.raises(TypeError, match="unknown dtype"):
        dtypes.canonical("float128x")
