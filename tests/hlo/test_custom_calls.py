"""Custom-call targets in the evaluator (hlo/custom_calls.py), in the style of XLA's tests.

Two tables: modules whose custom-calls compute (annotations, TopK, the oneDNN matmul /
softmax / layernorm of XLA's CPU rewriters, with their backend_config as XLA prints
it), each checked against a numpy formula; and modules that must be refused with a
given one-line message. tests/backend_cpu/test_custom_calls.py compiles the same tables.
"""
from __future__ import annotations

import math
import re
import struct

import ml_dtypes
import numpy as np
import pytest

from xlapy import hlo
from xlapy.hlo.dtypes import numpy_dtype

RNG = np.random.default_rng(1717)


def f32_bits(value: float) -> int:
    """An f32's bits as an int32, as XLA's rewriters store alpha and epsilon."""
    return struct.unpack("<i", struct.pack("<f", value))[0]


def _matmul(lhs, rhs, ta=False, tb=False):
    a = np.swapaxes(lhs, -1, -2) if ta else lhs
    b = np.swapaxes(rhs, -1, -2) if tb else rhs
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


_erf = np.vectorize(math.erf)


def _expit(x):
    return 1 / (1 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _softmax(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _layernorm(x, eps, scale=None, shift=None):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    if scale is not None:
        y = y * scale
    if shift is not None:
        y = y + shift
    return y


def _conv(x, w, stride=1, pad=0, groups=1):
    """NHWC input, HWIO filter (groups split C and O), SAME-style symmetric padding."""
    x = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    w = w.astype(np.float64)
    kh, kw, ci, co = w.shape
    n, h, wd, c = x.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, oh, ow, co))
    og = co // groups
    for g in range(groups):
        xs = x[..., g * ci:(g + 1) * ci]
        for i in range(oh):
            for j in range(ow):
                patch = xs[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
                out[:, i, j, g * og:(g + 1) * og] = np.einsum(
                    "nhwc,hwco->no", patch, w[..., g * og:(g + 1) * og])
    return out


def conv_case(name, ops=(), nchw=False, groups=1, dtype="f32", alpha=None):
    """A __onednn$convolution case: 3x3 window, stride 2, padding 1, on [2,5,5,4] x
    [3,3,4/groups,6] (NHWC, or NCHW/OIHW with nchw), then `ops` (BIAS takes f32[6])."""
    x_shape = "[2,4,5,5]" if nchw else "[2,5,5,4]"
    w_shape = f"[6,{4 // groups},3,3]" if nchw else f"[3,3,{4 // groups},6]"
    out_shape = "[2,6,3,3]" if nchw else "[2,3,3,6]"
    labels = "bf01_oi01->bf01" if nchw else "b01f_01io->b01f"
    params = [f"x = {dtype}{x_shape} parameter(0)", f"w = {dtype}{w_shape} parameter(1)"]
    operands = ["x", "w"]
    if "BIAS" in ops:
        params.append("bias = f32[6] parameter(2)")
        operands.append("bias")
    fusions = ",".join(f'"{o}"' for o in ops)
    alpha_text = f',"alpha_typecast":{f32_bits(alpha)}' if alpha is not None else ""
    groups_text = f"feature_group_count={groups}, " if groups > 1 else ""
    text = module("\n".join(params),
                  f'{dtype}{out_shape} custom-call({", ".join(operands)}), '
                  f'window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels={labels}, '
                  f'{groups_text}custom_call_target="__onednn$convolution", '
                  f'backend_config={{"outer_dimension_partitions":[],"onednn_conv_config":'
                  f'{{"fusions":{{"ops":[{fusions}]{alpha_text}}}}}}}')

    def reference(x, w, *bias):
        if nchw:
            x, w = x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)
        y = _conv(x, w, 2, 1, groups)
        for op in ops:
            if op == "BIAS":
                y = y + bias[0].astype(np.float64)
            elif op == "RELU":
                y = np.maximum(y, 0)
            elif op == "LINEAR":
                y = y * np.float32(alpha)
            elif op == "GELU_TANH":
                y = _gelu_tanh(y)
        return y.transpose(0, 3, 1, 2) if nchw else y
    return (name, text, reference)


def module(params: str, root: str) -> str:
    lines = "\n".join(f"  {p}" for p in params.strip().splitlines())
    return f"HloModule m\n\nENTRY e {{\n{lines}\n  ROOT r = {root.strip()}\n}}\n"


def matmul_config(ops=(), ta=False, tb=False, alpha=None, old=False) -> str:
    fusions = ",".join(f'"{o}"' if isinstance(o, str) else str(o) for o in ops)
    inner = []
    if ta:
        inner.append('"transpose_a":true')
    if tb:
        inner.append('"transpose_b":true')
    if old:
        inner.append(f'"fused_ops":[{fusions}]')
    elif ops or alpha is not None:
        alpha_text = f',"alpha_typecast":{f32_bits(alpha)}' if alpha is not None else ""
        inner.append(f'"fusions":{{"ops":[{fusions}]{alpha_text}}}')
    return ('backend_config={"outer_dimension_partitions":[],"onednn_matmul_config":{'
            + ",".join(inner) + "}}")


def mm(name, lhs, rhs, out, extra=(), ops=(), ta=False, tb=False, alpha=None, old=False,
       formula=None):
    """A matmul case: (name, text, the numpy formula over the arguments)."""
    params = [f"lhs = {lhs} parameter(0)", f"rhs = {rhs} parameter(1)"]
    params += [f"x{i} = {s} parameter({2 + i})" for i, s in enumerate(extra)]
    operands = ", ".join(["lhs", "rhs"] + [f"x{i}" for i in range(len(extra))])
    text = module("\n".join(params), f'{out} custom-call({operands}), custom_call_target='
                  f'"__onednn$matmul", {matmul_config(ops, ta, tb, alpha, old)}')

    def reference(lhs, rhs, *extra_args):
        y = _matmul(lhs, rhs, ta, tb)
        args = [e.astype(np.float64) for e in extra_args]
        for op in ops:
            op = {1: "BIAS", 2: "RELU", 3: "TANH", 6: "BINARY_ADD"}.get(op, op)
            if op in ("BIAS", "BINARY_ADD"):
                y = y + args.pop(0)
            elif op == "RELU":
                y = np.maximum(y, 0)
            elif op == "TANH":
                y = np.tanh(y)
            elif op == "GELU_ERF":
                y = 0.5 * y * (1 + _erf(y / math.sqrt(2)))
            elif op == "GELU_TANH":
                y = _gelu_tanh(y)
            elif op == "LINEAR":
                y = y * np.float32(alpha)
            elif op == "ELU":
                y = np.where(y > 0, y, np.expm1(y))
            elif op == "RELU6":
                y = np.clip(y, 0, 6)
            elif op == "SIGMOID":
                y = _expit(y)
            elif op == "SWISH":
                y = y * _expit(y)
        return y
    return (name, text, formula or reference)


COMPUTING = [
    mm("matmul_2d", "f32[3,4]", "f32[4,5]", "f32[3,5]"),
    mm("matmul_batch_x_matrix", "f32[2,3,4]", "f32[4,5]", "f32[2,3,5]"),
    mm("matmul_batched", "f32[2,3,4]", "f32[2,4,5]", "f32[2,3,5]"),
    mm("matmul_batch_broadcast", "f32[1,3,4]", "f32[2,4,5]", "f32[2,3,5]"),
    mm("matmul_matrix_x_batch", "f32[3,4]", "f32[2,4,5]", "f32[2,3,5]"),
    mm("matmul_rank4", "f32[2,2,3,4]", "f32[2,2,4,5]", "f32[2,2,3,5]"),
    mm("matmul_transpose_a", "f32[4,3]", "f32[4,5]", "f32[3,5]", ta=True),
    mm("matmul_transpose_b", "f32[2,3,4]", "f32[2,5,4]", "f32[2,3,5]", tb=True),
    mm("matmul_transpose_both", "f32[4,3]", "f32[5,4]", "f32[3,5]", ta=True, tb=True),
    mm("matmul_bias", "f32[2,3,4]", "f32[4,5]", "f32[2,3,5]", ["f32[5]"], ["BIAS"]),
    mm("matmul_bias_rank_of_output", "f32[2,3,4]", "f32[4,5]", "f32[2,3,5]", ["f32[1,1,5]"],
       ["BIAS"]),
    mm("matmul_bias_relu", "f32[3,4]", "f32[4,5]", "f32[3,5]", ["f32[5]"], ["BIAS", "RELU"]),
    mm("matmul_enum_numbers", "f32[3,4]", "f32[4,5]", "f32[3,5]", ["f32[5]"], [1, 2]),
    mm("matmul_old_fused_ops", "f32[3,4]", "f32[4,5]", "f32[3,5]", ["f32[5]"], ["BIAS", "TANH"],
       old=True),
    mm("matmul_tanh", "f32[3,4]", "f32[4,5]", "f32[3,5]", (), ["TANH"]),
    mm("matmul_gelu_erf", "f32[3,4]", "f32[4,5]", "f32[3,5]", ["f32[5]"], ["BIAS", "GELU_ERF"]),
    mm("matmul_gelu_tanh", "f32[3,4]", "f32[4,5]", "f32[3,5]", ["f32[5]"], ["BIAS", "GELU_TANH"]),
    mm("matmul_binary_add", "f32[2,3,4]", "f32[4,5]", "f32[2,3,5]", ["f32[2,3,5]"],
       ["BINARY_ADD"]),
    mm("matmul_bias_then_add", "f32[3,4]", "f32[4,5]", "f32[3,5]", ["f32[5]", "f32[3,5]"],
       ["BIAS", "BINARY_ADD"]),
    mm("matmul_linear", "f32[3,4]", "f32[4,5]", "f32[3,5]", (), ["LINEAR"], alpha=0.125),
    mm("matmul_elu", "f32[3,4]", "f32[4,5]", "f32[3,5]", (), ["ELU"]),
    mm("matmul_relu6", "f32[3,4]", "f32[4,5]", "f32[3,5]", (), ["RELU6"]),
    mm("matmul_sigmoid", "f32[3,4]", "f32[4,5]", "f32[3,5]", (), ["SIGMOID"]),
    mm("matmul_swish", "f32[3,4]", "f32[4,5]", "f32[3,5]", (), ["SWISH"]),
    mm("matmul_bf16", "bf16[3,8]", "bf16[8,5]", "bf16[3,5]"),
    mm("matmul_bf16_to_f32", "bf16[3,8]", "bf16[8,5]", "f32[3,5]", ["f32[5]"], ["BIAS"]),
    mm("matmul_zero_contraction", "f32[3,0]", "f32[0,5]", "f32[3,5]", ["f32[5]"], ["BIAS"]),
    mm("matmul_empty_batch", "f32[0,3,4]", "f32[4,5]", "f32[0,3,5]"),
    conv_case("conv_nhwc"),
    conv_case("conv_nhwc_bias_relu", ["BIAS", "RELU"]),
    # The bias goes along the feature dimension, which is not the minor one here.
    conv_case("conv_nchw_bias", ["BIAS"], nchw=True),
    conv_case("conv_grouped_linear", ["LINEAR"], groups=2, alpha=0.5),
    conv_case("conv_bf16_gelu", ["BIAS", "GELU_TANH"], dtype="bf16"),
    ("softmax_last", module("x = f32[4,7] parameter(0)",
                            'f32[4,7] custom-call(x), custom_call_target="__onednn$softmax", '
                            'backend_config={"onednn_softmax_config":{"softmax_axis":1}}'),
     lambda x: _softmax(x, 1)),
    ("softmax_middle", module("x = f32[2,5,3] parameter(0)",
                              'f32[2,5,3] custom-call(x), custom_call_target="__onednn$softmax", '
                              'backend_config={"onednn_softmax_config":{"softmax_axis":1}}'),
     lambda x: _softmax(x, 1)),
    # proto3's JSON omits a zero field: an empty config is axis 0.
    ("softmax_axis_omitted", module("x = f32[5,3] parameter(0)",
                                    'f32[5,3] custom-call(x), custom_call_target="__onednn$softmax", '
                                    'backend_config={"onednn_softmax_config":{}}'),
     lambda x: _softmax(x, 0)),
    ("softmax_bf16", module("x = bf16[3,16] parameter(0)",
                            'bf16[3,16] custom-call(x), custom_call_target="__onednn$softmax", '
                            'backend_config={"onednn_softmax_config":{"softmax_axis":1}}'),
     lambda x: _softmax(x, 1)),
    ("layernorm_scale_and_shift", module(
        "x = f32[2,3,8] parameter(0)\ng = f32[8] parameter(1)\nb = f32[8] parameter(2)",
        'f32[2,3,8] custom-call(x, g, b), custom_call_target="__onednn$layernorm", '
        'backend_config={"onednn_layer_norm_config":{"rescale":"SCALE_AND_SHIFT",'
        f'"epsilon_typecast":{f32_bits(1e-5)}}}}}'),
     lambda x, g, b: _layernorm(x, np.float32(1e-5), g, b)),
    ("layernorm_bf16", module(
        "x = bf16[4,16] parameter(0)\ng = f32[16] parameter(1)\nb = f32[16] parameter(2)",
        'bf16[4,16] custom-call(x, g, b), custom_call_target="__onednn$layernorm", '
        f'backend_config={{"onednn_layer_norm_config":{{"rescale":3,"epsilon_typecast":'
        f'{f32_bits(1e-3)}}}}}'),
     lambda x, g, b: _layernorm(x, np.float32(1e-3), g, b)),
    ("layernorm_scale_only", module(
        "x = f32[3,6] parameter(0)\ng = f32[6] parameter(1)",
        'f32[3,6] custom-call(x, g), custom_call_target="__onednn$layernorm", '
        f'backend_config={{"onednn_layer_norm_config":{{"rescale":"SCALE","epsilon_typecast":'
        f'{f32_bits(0.5)}}}}}'),
     lambda x, g: _layernorm(x, 0.5, g)),
    ("layernorm_shift_only", module(
        "x = f32[3,6] parameter(0)\nb = f32[6] parameter(1)",
        'f32[3,6] custom-call(x, b), custom_call_target="__onednn$layernorm", '
        f'backend_config={{"onednn_layer_norm_config":{{"rescale":"SHIFT","epsilon_typecast":'
        f'{f32_bits(0.25)}}}}}'),
     lambda x, b: _layernorm(x, 0.25, None, b)),
    ("layernorm_no_config", module(
        "x = f32[3,6] parameter(0)",
        'f32[3,6] custom-call(x), custom_call_target="__onednn$layernorm"'),
     lambda x: _layernorm(x, 0.0)),
]

IDENTITY = ["Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "xla.sdy.Sharding",
            "xla.sdy.FuncResultSharding", "MoveToHost", "MoveToDevice", "PinToDevice",
            "annotate_device_placement"]

TOPK_CMP = """HloModule m

cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(%s), direction=%s
}

ENTRY e {
  x = f32[3,6] parameter(0)
  ROOT t = (f32[3,2], s32[3,2]) custom-call(x), custom_call_target="TopK", to_apply=cmp
}
"""

# (name, text, message): each must be refused by the evaluator with this message (literal).
REFUSED = [
    ("unknown_target", module("x = f32[4] parameter(0)",
                              'f32[4] custom-call(x), custom_call_target="my_kernel"'),
     "unsupported custom-call target 'my_kernel'"),
    ("onednn_convolution_without_window", module(
        "x = f32[1,4,4,1] parameter(0)\nw = f32[1,1,1,1] parameter(1)",
        'f32[1,4,4,1] custom-call(x, w), custom_call_target="__onednn$convolution"'),
     "custom-call '__onednn$convolution' needs the convolution's window= and dim_labels= "
     "attributes"),
    ("onednn_convolution_bias_missing", module(
        "x = f32[1,4,4,1] parameter(0)\nw = f32[1,1,1,2] parameter(1)",
        'f32[1,4,4,2] custom-call(x, w), window={size=1x1}, dim_labels=b01f_01io->b01f, '
        'custom_call_target="__onednn$convolution", '
        'backend_config={"onednn_conv_config":{"fusions":{"ops":["BIAS"]}}}'),
     "custom-call '__onednn$convolution': fused op BIAS needs an operand and none is left"),
    ("slice_to_dynamic", module(
        "x = f32[8] parameter(0)\nn = s32[] parameter(1)",
        'f32[<=8] custom-call(x, n), custom_call_target="SliceToDynamic"'),
     "dynamic dimensions"),
    ("pad_to_static", module(
        "x = f32[8] parameter(0)",
        '(f32[8], s32[]) custom-call(x), custom_call_target="PadToStatic"'),
     "custom-call 'PadToStatic' makes or takes dynamic dimensions"),
    ("annotation_changes_shape", module(
        "x = f32[8] parameter(0)",
        'f32[4] custom-call(x), custom_call_target="SPMDFullToShardShape"'),
     "custom-call 'SPMDFullToShardShape' changes the shape"),
    ("topk_bad_shape", module(
        "x = f32[3,6] parameter(0)",
        '(f32[3,2], s32[3,3]) custom-call(x), custom_call_target="TopK"'),
     "custom-call 'TopK' must map x"),
    ("matmul_unknown_fused_op", mm("", "f32[3,4]", "f32[4,5]", "f32[3,5]", (), ["PRELU"])[1],
     "fused op 'PRELU' is not supported"),
    ("matmul_bias_without_operand", mm("", "f32[3,4]", "f32[4,5]", "f32[3,5]", (), ["BIAS"])[1],
     "fused op BIAS needs an operand and none is left"),
    ("matmul_operand_left_over", mm("", "f32[3,4]", "f32[4,5]", "f32[3,5]", ["f32[5]"])[1],
     "1 operand(s) beyond what the fused ops"),
    ("matmul_bias_does_not_broadcast", mm("", "f32[3,4]", "f32[4,5]", "f32[3,5]", ["f32[3]"],
                                          ["BIAS"])[1],
     "the BIAS operand f32[3] does not broadcast to [3, 5]"),
    ("matmul_contracted_sizes_differ", mm("", "f32[3,4]", "f32[3,5]", "f32[3,5]")[1],
     "disagree on the contracted size"),
    ("matmul_result_shape", mm("", "f32[3,4]", "f32[4,5]", "f32[3,6]")[1],
     "the result is f32[3,6] but the operands give (3, 5)"),
    ("matmul_integer", mm("", "s32[3,4]", "s32[4,5]", "s32[3,5]")[1],
     "the result must be a floating-point array"),
    ("matmul_bad_json", module(
        "a = f32[3,4] parameter(0)\nb = f32[4,5] parameter(1)",
        'f32[3,5] custom-call(a, b), custom_call_target="__onednn$matmul", '
        'backend_config="not json"'),
     "backend_config is not JSON"),
    ("softmax_axis_out_of_range", module(
        "x = f32[4,7] parameter(0)",
        'f32[4,7] custom-call(x), custom_call_target="__onednn$softmax", '
        'backend_config={"onednn_softmax_config":{"softmax_axis":2}}'),
     "softmax_axis 2 is not a dimension of f32"),
    ("layernorm_operand_count", module(
        "x = f32[3,6] parameter(0)",
        'f32[3,6] custom-call(x), custom_call_target="__onednn$layernorm", '
        'backend_config={"onednn_layer_norm_config":{"rescale":"SCALE_AND_SHIFT"}}'),
     "with rescale SCALE_AND_SHIFT takes 3 operands, not 1"),
    ("allocate_buffer_with_operand", module(
        "x = f32[4] parameter(0)", 'f32[4] custom-call(x), custom_call_target="AllocateBuffer"'),
     "custom-call 'AllocateBuffer' takes no operands and makes arrays"),
    ("topk_comparator_not_a_compare", TOPK_CMP.replace(
        "ROOT c = pred[] compare(%s), direction=%s",
        "d = f32[] add(a, b)\n  ROOT c = pred[] compare(d, b), direction=GT"),
     "its comparator must be one compare of its two parameters"),
]


def random_args(m) -> list[np.ndarray]:
    args = []
    for p in m.entry.parameters:
        dtype = numpy_dtype(p.shape.element_type)
        args.append((RNG.standard_normal(p.shape.dims) * 2).astype(dtype))
    return args


def tolerance(text: str) -> float:
    return 2e-2 if "bf16" in text else 2e-5


@pytest.mark.parametrize("name,text,formula", COMPUTING, ids=[c[0] for c in COMPUTING])
def test_custom_call_computes_its_formula(name, text, formula):
    m = hlo.parse_module(text)
    hlo.verify(m)
    assert hlo.print_module(hlo.parse_module(hlo.print_module(m))) == hlo.print_module(m)
    args = random_args(m)
    (got,) = hlo.evaluate(m, args)
    assert got.dtype == numpy_dtype(m.entry.root.shape.element_type)
    assert got.shape == m.entry.root.shape.dims
    want = formula(*[a.astype(np.float64) if a.dtype == ml_dtypes.bfloat16 else a for a in args])
    tol = tolerance(text)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("target", IDENTITY)
def test_annotation_targets_pass_their_operand_through(target):
    text = module("x = f32[2,3]{0,1} parameter(0)",
                  f'f32[2,3]{{0,1}} custom-call(x), custom_call_target="{target}", '
                  f'sharding={{replicated}}')
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    (got,) = hlo.evaluate(hlo.parse_module(text), [x])
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("operands,direction,largest", [
    ("a, b", "GT", True), ("a, b", "GE", True), ("a, b", "LT", False),
    ("b, a", "GT", False), ("b, a", "LT", True)])
def test_topk_comparator_picks_the_end(operands, direction, largest):
    x = RNG.permutation(18).reshape(3, 6).astype(np.float32)
    values, indices = hlo.evaluate(hlo.parse_module(TOPK_CMP % (operands, direction)), [x])
    order = np.argsort(-x if largest else x, axis=-1, kind="stable")[:, :2]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, -1))


def test_topk_without_comparator_is_largest_ties_by_index():
    text = module("x = f32[2,5] parameter(0)",
                  '(f32[2,3], s32[2,3]) custom-call(x), custom_call_target="TopK"')
    x = np.array([[1, 3, 3, 0, 3], [np.nan, 1, 2, -np.inf, 2]], np.float32)
    values, indices = hlo.evaluate(hlo.parse_module(text), [x])
    np.testing.assert_array_equal(indices[0], [1, 2, 4])
    np.testing.assert_array_equal(values[0], [3, 3, 3])


ALLOCATE = module("x = f32[2,3] parameter(0)\n"
                  "b = (f32[2,3], s32[4]) custom-call(), custom_call_target=\"AllocateBuffer\"\n"
                  "y = f32[2,3] get-tuple-element(b), index=0\n"
                  "z = s32[4] get-tuple-element(b), index=1",
                  "(f32[2,3], s32[4]) tuple(add(x, y), z)")


def test_allocate_buffer_is_zeros():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    got = hlo.evaluate(hlo.parse_module(ALLOCATE), [x])
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], np.zeros(4, np.int32))


@pytest.mark.parametrize("name,text,message", REFUSED, ids=[c[0] for c in REFUSED])
def test_custom_call_refused_with_one_line(name, text, message):
    m = hlo.parse_module(text)
    hlo.verify(m)                        # the verifier takes any target: XLA's does too
    args = random_args(m) if not m.entry.root.shape.is_dynamic else []
    with pytest.raises(hlo.EvaluationError, match=re.escape(message)) as info:
        hlo.evaluate(m, args)
    assert "\n" not in str(info.value)
