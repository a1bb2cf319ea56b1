"""Every frontend.ops function with a TensorFlow name takes TensorFlow's parameters.

The table is written by hand from TF's Python API documentation (TF 2.x; TF is not a
dependency): for each function, its parameters in order with their defaults
(REQUIRED for none). The function's leading positional parameters must be exactly
those names, in that order, with those defaults, so positional and keyword calls
written for TF work unchanged; any parameter of our own must come after them as
keyword-only. Defaults that are TF dtypes are written as their names and compared
as dtypes. `*args` / `**kwargs` are spelled "*inputs" / "**kwargs".

A second table lists the `ops` functions that are not TF's (ours, or helpers); a
test checks that every public `ops` function is in one of the two.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from xlapy.frontend import ops
from xlapy.frontend.elementwise_table import BINARY_ROWS, UNARY_ROWS

REQUIRED = inspect.Parameter.empty
R = REQUIRED
_REDUCE = [("input_tensor", R), ("axis", None), ("keepdims", False), ("name", None)]
_XY = [("x", R), ("y", R), ("name", None)]
_X = [("x", R), ("name", None)]
_FEATURES = [("features", R), ("name", None)]
_CUM = [("x", R), ("axis", 0), ("exclusive", False), ("reverse", False), ("name", None)]
_SCATTER = [("tensor", R), ("indices", R), ("updates", R), ("name", None)]
_SEGMENT = [("data", R), ("segment_ids", R), ("name", None)]
_UNSORTED = [("data", R), ("segment_ids", R), ("num_segments", R), ("name", None)]
_ARG = [("input", R), ("axis", None), ("output_type", "int64"), ("name", None)]

TF = {
    # --- tf / tf.math: elementwise ---------------------------------------------------------
    # every binary row is a tf.math function of (x, y, name=None), but atan2
    **{row.function: _XY for row in BINARY_ROWS},
    "atan2": [("y", R), ("x", R), ("name", None)],
    **{f: _XY for f in (
        "truediv", "floordiv", "floormod", "mod", "truncatediv", "divide_no_nan",
        "squared_difference", "xlogy", "xlog1py", "math.add", "math.divide",
        "math.truediv", "math.floormod", "math.maximum")},
    "logical_xor": [("x", R), ("y", R), ("name", "LogicalXor")],
    # every row of the unary table is a tf.math function of (x, name=None)
    **{row.function: _X for row in UNARY_ROWS},
    **{f: _X for f in (
        "square", "logical_not", "is_nan", "is_inf", "reciprocal", "atan", "asin",
        "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc", "erfinv", "lgamma",
        "digamma", "log_sigmoid", "math.exp", "math.is_finite", "math.reciprocal",
        "math.erfinv", "math.lgamma", "math.digamma", "math.log_sigmoid")},
    "cast": [("x", R), ("dtype", R), ("name", None)],
    "clip_by_value": [("t", R), ("clip_value_min", R), ("clip_value_max", R), ("name", None)],
    "clip_by_norm": [("t", R), ("clip_norm", R), ("axes", None), ("name", None)],
    "clip_by_global_norm": [("t_list", R), ("clip_norm", R), ("use_norm", None),
                            ("name", None)],
    "where": [("condition", R), ("x", None), ("y", None), ("name", None)],
    # --- reductions and scans ----------------------------------------------------------------
    **{f: _REDUCE for f in (
        "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_mean", "reduce_all",
        "reduce_any", "reduce_logsumexp", "reduce_variance", "reduce_std",
        "reduce_euclidean_norm", "math.reduce_sum", "math.reduce_variance",
        "math.reduce_std", "math.reduce_euclidean_norm", "math.reduce_logsumexp")},
    "argmax": _ARG, "argmin": _ARG, "math.argmax": _ARG,
    "count_nonzero": [("input", R), ("axis", None), ("keepdims", None), ("dtype", "int64"),
                      ("name", None)],
    "cumsum": _CUM, "cumprod": _CUM, "math.cumulative_logsumexp": _CUM,
    "math.cumsum": _CUM, "math.cumprod": _CUM,
    # --- segments, sorting, searching ----------------------------------------------------------
    "math.segment_sum": _SEGMENT, "math.segment_mean": _SEGMENT, "math.segment_max": _SEGMENT,
    "math.unsorted_segment_sum": _UNSORTED, "math.unsorted_segment_max": _UNSORTED,
    "math.unsorted_segment_min": _UNSORTED,
    "sort": [("values", R), ("axis", -1), ("direction", "ASCENDING"), ("name", None)],
    "argsort": [("values", R), ("axis", -1), ("direction", "ASCENDING"), ("stable", False),
                ("name", None)],
    "math.top_k": [("input", R), ("k", 1), ("sorted", True), ("index_type", "int32"),
                   ("name", None)],
    "math.in_top_k": [("targets", R), ("predictions", R), ("k", R), ("name", None)],
    "searchsorted": [("sorted_sequence", R), ("values", R), ("side", "left"),
                     ("out_type", "int32"), ("name", None)],
    "math.bincount": [("arr", R), ("weights", None), ("minlength", None), ("maxlength", None),
                      ("dtype", "int32"), ("name", None), ("axis", None),
                      ("binary_output", False)],
    # --- shapes and indexing ---------------------------------------------------------------
    "identity": [("input", R), ("name", None)],
    "stop_gradient": [("input", R), ("name", None)],
    "reshape": [("tensor", R), ("shape", R), ("name", None)],
    "transpose": [("a", R), ("perm", None), ("conjugate", False), ("name", "transpose")],
    "expand_dims": [("input", R), ("axis", R), ("name", None)],
    "squeeze": [("input", R), ("axis", None), ("name", None)],
    "broadcast_to": [("input", R), ("shape", R), ("name", None)],
    "concat": [("values", R), ("axis", R), ("name", "concat")],
    "stack": [("values", R), ("axis", 0), ("name", "stack")],
    "unstack": [("value", R), ("num", None), ("axis", 0), ("name", "unstack")],
    "split": [("value", R), ("num_or_size_splits", R), ("axis", 0), ("num", None),
              ("name", "split")],
    "slice": [("input_", R), ("begin", R), ("size", R), ("name", None)],
    "strided_slice": [("input_", R), ("begin", R), ("end", R), ("strides", None),
                      ("begin_mask", 0), ("end_mask", 0), ("ellipsis_mask", 0),
                      ("new_axis_mask", 0), ("shrink_axis_mask", 0), ("var", None),
                      ("name", None)],
    "pad": [("tensor", R), ("paddings", R), ("mode", "CONSTANT"), ("constant_values", 0),
            ("name", None)],
    "tile": [("input", R), ("multiples", R), ("name", None)],
    "reverse": [("tensor", R), ("axis", R), ("name", None)],
    "roll": [("input", R), ("shift", R), ("axis", R), ("name", None)],
    "repeat": [("input", R), ("repeats", R), ("axis", None), ("name", None)],
    "gather": [("params", R), ("indices", R), ("validate_indices", None), ("axis", None),
               ("batch_dims", 0), ("name", None)],
    "gather_nd": [("params", R), ("indices", R), ("batch_dims", 0), ("name", None)],
    "scatter_nd": [("indices", R), ("updates", R), ("shape", R), ("name", None)],
    "tensor_scatter_nd_update": _SCATTER, "tensor_scatter_nd_add": _SCATTER,
    "tensor_scatter_nd_sub": _SCATTER, "tensor_scatter_nd_max": _SCATTER,
    "tensor_scatter_nd_min": _SCATTER,
    "one_hot": [("indices", R), ("depth", R), ("on_value", None), ("off_value", None),
                ("axis", None), ("dtype", None), ("name", None)],
    "sequence_mask": [("lengths", R), ("maxlen", None), ("dtype", "bool"), ("name", None)],
    "meshgrid": [("*args", R), ("**kwargs", R)],
    # --- tensors from nothing ------------------------------------------------------------------
    "constant": [("value", R), ("dtype", None), ("shape", None), ("name", "Const")],
    "fill": [("dims", R), ("value", R), ("name", None)],
    "zeros": [("shape", R), ("dtype", "float32"), ("name", None)],
    "ones": [("shape", R), ("dtype", "float32"), ("name", None)],
    "zeros_like": [("input", R), ("dtype", None), ("name", None)],
    "ones_like": [("input", R), ("dtype", None), ("name", None)],
    "range": [("start", R), ("limit", None), ("delta", 1), ("dtype", None),
              ("name", "range")],
    "linspace": [("start", R), ("stop", R), ("num", R), ("name", None), ("axis", 0)],
    "eye": [("num_rows", R), ("num_columns", None), ("batch_shape", None),
            ("dtype", "float32"), ("name", None)],
    # --- linear algebra ------------------------------------------------------------------------
    "matmul": [("a", R), ("b", R), ("transpose_a", False), ("transpose_b", False),
               ("adjoint_a", False), ("adjoint_b", False), ("a_is_sparse", False),
               ("b_is_sparse", False), ("output_type", None), ("grad_a", False),
               ("grad_b", False), ("name", None)],
    "einsum": [("equation", R), ("*inputs", R), ("**kwargs", R)],
    "norm": [("tensor", R), ("ord", "euclidean"), ("axis", None), ("keepdims", None),
             ("name", None)],
    "linalg.band_part": [("input", R), ("num_lower", R), ("num_upper", R), ("name", None)],
    "linalg.eye": [("num_rows", R), ("num_columns", None), ("batch_shape", None),
                   ("dtype", "float32"), ("name", None)],
    "linalg.norm": [("tensor", R), ("ord", "euclidean"), ("axis", None), ("keepdims", None),
                    ("name", None)],
    "linalg.matmul": [("a", R), ("b", R), ("transpose_a", False), ("transpose_b", False),
                      ("adjoint_a", False), ("adjoint_b", False), ("a_is_sparse", False),
                      ("b_is_sparse", False), ("output_type", None), ("grad_a", False),
                      ("grad_b", False), ("name", None)],
    "linalg.batch_matmul": [("x", R), ("y", R), ("adj_x", False), ("adj_y", False),
                            ("name", None)],       # tf.raw_ops.BatchMatMulV2
    # --- tf.nn ------------------------------------------------------------------------------------
    **{f: _FEATURES for f in ("relu", "relu6", "elu", "selu", "softplus", "nn.softsign")},
    "silu": [("features", R), ("beta", 1.0), ("name", None)],
    "swish": [("features", R), ("beta", 1.0), ("name", None)],
    "leaky_relu": [("features", R), ("alpha", 0.2), ("name", None)],
    "gelu": [("features", R), ("approximate", False), ("name", None)],
    "nn.crelu": [("features", R), ("axis", -1), ("name", None)],
    "softmax": [("logits", R), ("axis", None), ("name", None)],
    "log_softmax": [("logits", R), ("axis", None), ("name", None)],
    "bias_add": [("value", R), ("bias", R), ("data_format", None), ("name", None)],
    "softmax_cross_entropy_with_logits": [("labels", R), ("logits", R), ("axis", -1),
                                          ("name", None)],
    "sparse_softmax_cross_entropy_with_logits": [("labels", R), ("logits", R),
                                                 ("name", None)],
    "nn.sigmoid_cross_entropy_with_logits": [("labels", None), ("logits", None),
                                             ("name", None)],
    "nn.weighted_cross_entropy_with_logits": [("labels", R), ("logits", R),
                                              ("pos_weight", R), ("name", None)],
    "nn.moments": [("x", R), ("axes", R), ("shift", None), ("keepdims", False),
                   ("name", None)],
    "nn.batch_normalization": [("x", R), ("mean", R), ("variance", R), ("offset", R),
                               ("scale", R), ("variance_epsilon", R), ("name", None)],
    # tf.compat.v1.nn.fused_batch_norm
    "nn.fused_batch_norm": [("x", R), ("scale", R), ("offset", R), ("mean", None),
                            ("variance", None), ("epsilon", 0.001), ("data_format", "NHWC"),
                            ("is_training", True), ("name", None),
                            ("exponential_avg_factor", 1.0)],
    "nn.l2_normalize": [("x", R), ("axis", None), ("epsilon", 1e-12), ("name", None),
                        ("dim", None)],
    "nn.embedding_lookup": [("params", R), ("ids", R), ("max_norm", None), ("name", None)],
    "conv2d": [("input", R), ("filters", R), ("strides", R), ("padding", R),
               ("data_format", "NHWC"), ("dilations", None), ("name", None)],
    "depthwise_conv2d": [("input", R), ("filter", R), ("strides", R), ("padding", R),
                         ("data_format", None), ("dilations", None), ("name", None)],
    "nn.conv1d": [("input", R), ("filters", R), ("stride", R), ("padding", R),
                  ("data_format", "NWC"), ("dilations", None), ("name", None)],
    "nn.conv2d_transpose": [("input", R), ("filters", R), ("output_shape", R),
                            ("strides", R), ("padding", "SAME"), ("data_format", "NHWC"),
                            ("dilations", None), ("name", None)],
    "nn.conv3d": [("input", R), ("filters", R), ("strides", R), ("padding", R),
                  ("data_format", "NDHWC"), ("dilations", None), ("name", None)],
    "nn.separable_conv2d": [("input", R), ("depthwise_filter", R), ("pointwise_filter", R),
                            ("strides", R), ("padding", R), ("data_format", None),
                            ("dilations", None), ("name", None)],
    **{f: [("input", R), ("ksize", R), ("strides", R), ("padding", R),
           ("data_format", "NHWC"), ("name", None)] for f in ("max_pool2d", "avg_pool2d")},
    **{f: [("input", R), ("ksize", R), ("strides", R), ("padding", R),
           ("data_format", "NWC"), ("name", None)] for f in ("nn.max_pool1d",
                                                             "nn.avg_pool1d")},
    **{f: [("input", R), ("ksize", R), ("strides", R), ("padding", R),
           ("data_format", "NDHWC"), ("name", None)] for f in ("nn.max_pool3d",
                                                               "nn.avg_pool3d")},
    # --- complex numbers and tf.signal ------------------------------------------------------------
    "complex": [("real", R), ("imag", R), ("name", None)],
    **{f: [("input", R), ("name", None)] for f in ("math.real", "math.imag", "math.angle")},
    "math.conj": [("x", R), ("name", None)],
    **{f"signal.{f}{d}": [("input", R), ("name", None)] for f in ("fft", "ifft")
       for d in ("", "2d", "3d")},
    **{f"signal.{f}{d}": [("input_tensor", R), ("fft_length", None), ("name", None)]
       for f in ("rfft", "irfft") for d in ("", "2d", "3d")},
    # --- tf.image -----------------------------------------------------------------------------------
    "image.resize": [("images", R), ("size", R), ("method", "bilinear"),
                     ("preserve_aspect_ratio", False), ("antialias", False), ("name", None)],
}

# Public ops functions that are not TF's: ours (layer_norm, rms_norm: Keras layers' math
# under names TF does not have), the tracing helpers, numpy-style aliases.
NOT_TF = {"apply", "apply_multi", "promote", "to_tensor", "getitem", "layer_norm", "rms_norm",
          "neg", "select", "with_sharding_constraint", "batch_matmul", "unary_function",
          "binary_function", "dropout"}


def _function(path: str):
    obj = ops
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _same_default(got, want) -> bool:
    if isinstance(want, str) and isinstance(got, str) and want != got:
        try:
            return np.dtype(got) == np.dtype(want)
        except TypeError:
            return False
    return type(got) is type(want) and got == want if want is not None else got is None


def _spelled(p: inspect.Parameter) -> str:
    return {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name


# Functions of the table that frontend.ops does not have yet (see the list).
NOT_YET: set[str] = set()


@pytest.mark.parametrize("path", sorted(TF))
def test_signature_is_tensorflows(path):
    fn = _function(path)
    if fn is None:
        assert path in NOT_YET, f"ops.{path} is missing"
        pytest.skip(f"ops.{path} is not implemented yet")
    params = list(inspect.signature(fn).parameters.values())
    want = TF[path]
    ours = [p for p in params if p.kind != p.KEYWORD_ONLY]
    got = [(_spelled(p), p.default) for p in ours]
    assert [n for n, _ in got] == [n for n, _ in want], \
        f"ops.{path}{inspect.signature(fn)}: TF's parameters are {[n for n, _ in want]}"
    for (name, default), (_, tf_default) in zip(got, want):
        if name.startswith("*"):
            continue
        assert _same_default(default, tf_default), \
            f"ops.{path}: {name}={default!r}, TF's default is {tf_default!r}"


def test_the_table_lists_no_function_twice_and_not_yet_is_honest():
    assert not NOT_YET & {p for p in TF if _function(p) is not None}, "now implemented"


@pytest.mark.parametrize("module", ["", "math", "nn", "linalg", "image", "signal"])
def test_every_public_ops_function_is_in_a_table(module):
    mod = _function(module) if module else ops
    if mod is None:
        pytest.skip(f"ops.{module} does not exist yet")
    prefix = f"{module}." if module else ""
    names = [n for n in dir(mod) if not n.startswith("_") and inspect.isfunction(
        getattr(mod, n))]
    unlisted = []
    for n in names:
        fn = getattr(mod, n)
        if n in NOT_TF or fn.__module__.endswith((".random", ".collective", ".sharding")):
            continue
        if module and fn.__module__ != mod.__name__:
            continue                      # imported helpers (to_float, user_error, ...)
        if prefix + n not in TF and not (module and n in TF):
            # a function of a submodule may be listed under its top-level name
            if not any(_function(p) is fn for p in TF):
                unlisted.append(prefix + n)
    assert unlisted == [], f"not in the TF table (nor in NOT_TF): {unlisted}"
