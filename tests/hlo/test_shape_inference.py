"""Shape inference: tables of (opcode, operand shapes, attrs, hint) -> shape or error.

The shapes and attributes of many rows are taken from the corpus (XLA's own
output), the rest are edge cases of XLA's rules.
"""
from __future__ import annotations

import pytest

from xlapy.hlo import OPCODES, PadDim, ReplicaGroups, SliceDim, infer_shape
from xlapy.hlo.ir import RawAttr
from xlapy.hlo.shape_inference import ShapeError

from .shape_helpers import (S, argmax_reducer, const_fn, identity_fn, make_window, scalar_fn,
                            unary_fn)

ADD_F32 = scalar_fn("add", ["f32", "f32"], "add_f32")


def _scan_step():
    """(x: f32[3], c: f32[3]) -> (x + c, x + c): a running sum over rows of 3."""
    from xlapy.hlo import parse_module
    return parse_module("""HloModule m
step {
  x = f32[3] parameter(0)
  c = f32[3] parameter(1)
  s = f32[3] add(x, c)
  ROOT t = (f32[3], f32[3]) tuple(s, s)
}
ENTRY e {
  ROOT p = f32[] parameter(0)
}""").computation("step")


SCAN_STEP = _scan_step()
ADD_S32 = scalar_fn("add", ["s32", "s32"], "add_s32")
LT_F32 = scalar_fn("compare", ["f32", "f32"], "lt_f32")
LT_F32_S64 = scalar_fn("compare", ["f32", "f32", "s64", "s64"], "lt_f32_s64")
ARGMAX = argmax_reducer()
W = make_window


def slices(*triples):
    return tuple(SliceDim(*t) for t in triples)


def pads(*triples):
    return tuple(PadDim(*t) for t in triples)


def dims(**kw):
    return {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in kw.items()}


# (id, opcode, operand shapes, attrs, hint, expected shape)
OK = [
    ("add", "add", ["f32[4,5]", "f32[4,5]"], {}, None, "f32[4,5]"),
    ("add-scalars", "add", ["s32[]", "s32[]"], {}, None, "s32[]"),
    ("and-pred", "and", ["pred[50]", "pred[50]"], {}, None, "pred[50]"),
    ("shift-u32", "shift-right-logical", ["u32[64]", "u32[64]"], {}, None, "u32[64]"),
    ("complex", "complex", ["f64[3]", "f64[3]"], {}, None, "c128[3]"),
    ("exp", "exponential", ["f16[8]"], {}, None, "f16[8]"),
    ("is-finite", "is-finite", ["f32[16]"], {}, None, "pred[16]"),
    ("popcnt", "popcnt", ["s32[64]"], {}, None, "s32[64]"),
    ("not-pred", "not", ["pred[5]"], {}, None, "pred[5]"),
    ("abs-complex", "abs", ["c64[2]"], {}, None, "f32[2]"),
    ("real", "real", ["c128[2]"], {}, None, "f64[2]"),
    ("imag-of-real", "imag", ["f32[2]"], {}, None, "f32[2]"),
    ("copy-tuple", "copy", ["(f32[2], s32[])"], {}, None, "(f32[2], s32[])"),
    ("compare", "compare", ["f32[64]", "f32[64]"], {"direction": "LT"}, None, "pred[64]"),
    ("compare-totalorder", "compare", ["f32[]", "f32[]"],
     {"direction": "GT", "type": "TOTALORDER"}, None, "pred[]"),
    ("compare-unsigned", "compare", ["u32[2]", "u32[2]"],
     {"direction": "GE", "type": "UNSIGNED"}, None, "pred[2]"),
    ("select", "select", ["pred[8,16]", "f32[8,16]", "f32[8,16]"], {}, None, "f32[8,16]"),
    ("select-scalar-pred", "select", ["pred[]", "s32[3]", "s32[3]"], {}, None, "s32[3]"),
    ("clamp-scalar-bounds", "clamp", ["f32[]", "f32[8,16]", "f32[]"], {}, None, "f32[8,16]"),
    ("clamp-array-bounds", "clamp", ["s32[3]", "s32[3]", "s32[3]"], {}, None, "s32[3]"),
    ("convert", "convert", ["f32[100]"], {}, "s32[100]", "s32[100]"),
    ("bitcast-convert", "bitcast-convert", ["f32[32]"], {}, "u32[32]", "u32[32]"),
    ("bitcast-convert-narrow", "bitcast-convert", ["f32[4]"], {}, "u8[4,4]", "u8[4,4]"),
    ("bitcast-convert-wide", "bitcast-convert", ["u16[3,2]"], {}, "f32[3]", "f32[3]"),
    # --- movement ---
    ("broadcast", "broadcast", ["f32[32]"], dims(dimensions=[0]), "f32[32,100]", "f32[32,100]"),
    ("broadcast-scalar", "broadcast", ["f32[]"], dims(dimensions=[]), "f32[3,4]", "f32[3,4]"),
    ("broadcast-transposing", "broadcast", ["f32[3,5]"], dims(dimensions=[2, 0]),
     "f32[5,4,3]", "f32[5,4,3]"),
    ("reshape", "reshape", ["f32[2,3,4]"], {}, "f32[6,4]", "f32[6,4]"),
    ("reshape-zero-size", "reshape", ["f32[0,3]"], {}, "f32[3,0]", "f32[3,0]"),
    ("bitcast-layout", "bitcast", ["f32[2,16,32]"], {}, "f32[32,32]", "f32[32,32]"),
    ("bitcast-type", "bitcast", ["f32[]"], {}, "s32[]", "s32[]"),
    ("transpose", "transpose", ["f32[2,3,4]"], dims(dimensions=[2, 0, 1]), None, "f32[4,2,3]"),
    ("slice-strided", "slice", ["f32[20,30]"], {"slice": slices((2, 14, 2), (1, 29, 4))},
     None, "f32[6,7]"),
    ("slice-empty", "slice", ["f32[5]"], {"slice": slices((3, 3, 1))}, None, "f32[0]"),
    ("pad-negative-interior", "pad", ["f32[5,6]", "f32[]"],
     {"padding": pads((-1, 2, 1), (-2, -1, 0))}, None, "f32[10,3]"),
    ("pad-interior", "pad", ["f32[5,6]", "f32[]"], {"padding": pads((0, 2, 1), (0, 0, 0))},
     None, "f32[11,6]"),
    ("pad-empty-operand", "pad", ["f32[0]", "f32[]"], {"padding": pads((1, 2, 3))}, None, "f32[3]"),
    ("concatenate", "concatenate", ["f32[4,3]", "f32[4,5]", "f32[4,1]"], dims(dimensions=[1]),
     None, "f32[4,9]"),
    ("reverse", "reverse", ["f32[3,4,5]"], dims(dimensions=[0, 2]), None, "f32[3,4,5]"),
    ("iota", "iota", [], {"iota_dimension": 1}, "s32[6,8]", "s32[6,8]"),
    ("dynamic-slice", "dynamic-slice", ["f32[10,20]", "s32[]", "s32[]"],
     dims(dynamic_slice_sizes=[3, 5]), None, "f32[3,5]"),
    ("dynamic-slice-s64", "dynamic-slice", ["f32[10,4,8]", "s64[]", "s64[]", "s64[]"],
     dims(dynamic_slice_sizes=[1, 4, 8]), None, "f32[1,4,8]"),
    ("dynamic-update-slice", "dynamic-update-slice",
     ["f32[10,20]", "f32[2,4]", "s32[]", "s32[]"], {}, None, "f32[10,20]"),
    # --- gather / scatter (corpus) ---
    ("gather-rows", "gather", ["f32[50,8]", "s32[12,1]"],
     dims(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
          slice_sizes=[1, 8]), None, "f32[12,8]"),
    ("gather-implicit-vector", "gather", ["f32[50,8]", "s32[12]"],
     dims(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
          slice_sizes=[1, 8]), None, "f32[12,8]"),
    ("gather-points", "gather", ["f32[20,30]", "s32[15,2]"],
     dims(offset_dims=[1, 2], collapsed_slice_dims=[], start_index_map=[0, 1],
          index_vector_dim=1, slice_sizes=[1, 1]), None, "f32[15,1,1]"),
    ("gather-batching", "gather", ["f32[6,10]", "s32[6,3,1]"],
     dims(offset_dims=[], collapsed_slice_dims=[1], start_index_map=[1],
          operand_batching_dims=[0], start_indices_batching_dims=[0], index_vector_dim=2,
          slice_sizes=[1, 1]), None, "f32[6,3]"),
    ("gather-offset-first", "gather", ["f32[5,7]", "s32[4,1]"],
     dims(offset_dims=[0], collapsed_slice_dims=[1], start_index_map=[1], index_vector_dim=1,
          slice_sizes=[5, 1]), None, "f32[5,4]"),
    ("scatter-rows", "scatter", ["f32[10,4]", "s32[8,1]", "f32[8,1,4]"],
     dims(update_window_dims=[1, 2], inserted_window_dims=[], scatter_dims_to_operand_dims=[0],
          index_vector_dim=1, to_apply=ADD_F32), None, "f32[10,4]"),
    ("scatter-batching", "scatter", ["f32[10,3]", "s32[10,1,1]", "f32[10,1]"],
     dims(update_window_dims=[], inserted_window_dims=[1], scatter_dims_to_operand_dims=[1],
          input_batching_dims=[0], scatter_indices_batching_dims=[0], index_vector_dim=2,
          to_apply=ADD_F32), None, "f32[10,3]"),
    ("scatter-variadic", "scatter", ["f32[10]", "s32[10]", "s32[3,1]", "f32[3]", "s32[3]"],
     dims(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
          index_vector_dim=1, to_apply=argmax_reducer("f32", "s32")),
     None, "(f32[10], s32[10])"),
    # --- reductions ---
    ("reduce", "reduce", ["f32[8,16,32]", "f32[]"], dims(dimensions=[0, 2], to_apply=ADD_F32),
     None, "f32[16]"),
    ("reduce-all", "reduce", ["s32[5,4]", "s32[]"], dims(dimensions=[0, 1], to_apply=ADD_S32),
     None, "s32[]"),
    ("reduce-argmax", "reduce", ["f32[16,50]", "s64[16,50]", "f32[]", "s64[]"],
     dims(dimensions=[1], to_apply=ARGMAX), None, "(f32[16], s64[16])"),
    ("reduce-window-pool", "reduce-window", ["f32[2,8,8,3]", "f32[]"],
     {"window": W([1, 2, 2, 1], [1, 2, 2, 1]), "to_apply": ADD_F32}, None, "f32[2,4,4,3]"),
    ("reduce-window-padded", "reduce-window", ["f32[32,100]", "f32[]"],
     {"window": W([1, 32], [1, 32], [(0, 0), (14, 14)]), "to_apply": ADD_F32}, None, "f32[32,4]"),
    ("reduce-window-dilated", "reduce-window", ["f32[5]", "f32[]"],
     {"window": W([3], base_dilation=[2], window_dilation=[2]), "to_apply": ADD_F32},
     None, "f32[5]"),
    ("reduce-window-too-big", "reduce-window", ["f32[2]", "f32[]"],
     {"window": W([3]), "to_apply": ADD_F32}, None, "f32[0]"),
    ("select-and-scatter", "select-and-scatter", ["f32[1,7,7,2]", "f32[1,3,3,2]", "f32[]"],
     {"window": W([1, 3, 3, 1], [1, 2, 2, 1]), "select": scalar_fn("compare", ["f32", "f32"]),
      "scatter": ADD_F32}, None, "f32[1,7,7,2]"),
    ("sort", "sort", ["f32[64]"], dims(dimensions=[0], to_apply=LT_F32), None, "f32[64]"),
    ("sort-variadic", "sort", ["f32[8,10]", "s64[8,10]"],
     dims(dimensions=[1], is_stable=True, to_apply=LT_F32_S64), None, "(f32[8,10], s64[8,10])"),
    # --- dot / convolution (corpus) ---
    ("dot-matmul", "dot", ["f32[64,128]", "f32[128,96]"],
     dims(lhs_contracting_dims=[1], rhs_contracting_dims=[0]), None, "f32[64,96]"),
    ("dot-matvec", "dot", ["f32[50,40]", "f32[40]"],
     dims(lhs_contracting_dims=[1], rhs_contracting_dims=[0]), None, "f32[50]"),
    ("dot-vecvec", "dot", ["f32[40]", "f32[40]"],
     dims(lhs_contracting_dims=[0], rhs_contracting_dims=[0]), None, "f32[]"),
    ("dot-batched", "dot", ["f32[4,8,16]", "f32[4,16,8]"],
     dims(lhs_batch_dims=[0], lhs_contracting_dims=[2], rhs_batch_dims=[0],
          rhs_contracting_dims=[1]), None, "f32[4,8,8]"),
    ("dot-general", "dot", ["f32[2,3,8,16]", "f32[2,3,10,16]"],
     dims(lhs_batch_dims=[0, 1], lhs_contracting_dims=[3], rhs_batch_dims=[0, 1],
          rhs_contracting_dims=[3]), None, "f32[2,3,8,10]"),
    ("dot-transposed", "dot", ["f32[9,5]", "f32[9,4]"],
     dims(lhs_contracting_dims=[0], rhs_contracting_dims=[0]), None, "f32[5,4]"),
    ("dot-s8-to-s32", "dot", ["s8[8,32]", "s8[32,4]"],
     dims(lhs_contracting_dims=[1], rhs_contracting_dims=[0]), "s32[8,4]", "s32[8,4]"),
    ("conv-nhwc-stride2-same", "convolution", ["f32[2,16,16,3]", "f32[3,3,3,8]"],
     {"window": W([3, 3], [2, 2], [(0, 1), (0, 1)]), "dim_labels": "b01f_01io->b01f"},
     None, "f32[2,8,8,8]"),
    ("conv-nchw-dilated", "convolution", ["f32[1,4,12,12]", "f32[6,4,3,3]"],
     {"window": W([3, 3], window_dilation=[2, 2]), "dim_labels": "bf01_oi01->bf01"},
     None, "f32[1,6,8,8]"),
    ("conv-1d", "convolution", ["f32[2,32,4]", "f32[5,4,6]"],
     {"window": W([5], padding=[(2, 2)]), "dim_labels": "b0f_0io->b0f"}, None, "f32[2,32,6]"),
    ("conv-depthwise", "convolution", ["f32[1,10,10,4]", "f32[3,3,1,4]"],
     {"window": W([3, 3], padding=[(1, 1), (1, 1)]), "dim_labels": "b01f_01io->b01f",
      "feature_group_count": 4}, None, "f32[1,10,10,4]"),
    ("conv-batch-groups", "convolution", ["f32[2,6,6,4]", "f32[2,6,6,4]"],
     {"window": W([6, 6], padding=[(1, 1), (1, 1)]), "dim_labels": "f01b_i01o->01bf",
      "batch_group_count": 2}, None, "f32[3,3,2,4]"),
    ("conv-lhs-dilated", "convolution", ["f32[2,4,4,4]", "f32[3,3,4,3]"],
     {"window": W([3, 3], padding=[(2, 1), (2, 1)], base_dilation=[2, 2]),
      "dim_labels": "b01f_01io->b01f"}, None, "f32[2,8,8,3]"),
    # --- leaves, tuples, control flow ---
    ("parameter", "parameter", [], {}, "(f32[2], s32[])", "(f32[2], s32[])"),
    ("constant", "constant", [], {}, "f32[3]", "f32[3]"),
    ("tuple", "tuple", ["f32[2]", "s32[]"], {}, None, "(f32[2], s32[])"),
    ("empty-tuple", "tuple", [], {}, None, "()"),
    ("gte", "get-tuple-element", ["(f32[2], s32[])"], {"index": 1}, None, "s32[]"),
    ("call", "call", ["f32[4]"], {"to_apply": unary_fn(S("f32[4]"), "negate")}, None, "f32[4]"),
    ("fusion", "fusion", ["f32[4]"],
     {"kind": "kLoop", "calls": unary_fn(S("f32[4]"), "is-finite")}, None, "pred[4]"),
    ("ragged-dot-non-contracting", "ragged-dot", ["bf16[64,9]", "bf16[2,9,8]", "s64[2]"],
     {**dims(lhs_contracting_dims=[1], rhs_contracting_dims=[1]), "lhs_ragged_dims": (0,),
      "rhs_group_dims": (0,)}, None, "bf16[64,8]"),
    ("ragged-dot-contracting", "ragged-dot", ["f32[2,11,5]", "f32[2,5,7]", "s32[2,3]"],
     {**dims(lhs_contracting_dims=[2], rhs_contracting_dims=[1], lhs_batch_dims=[0],
             rhs_batch_dims=[0]), "lhs_ragged_dims": (2,)}, None, "f32[3,2,11,7]"),
    ("sinh", "sinh", ["bf16[3,5]"], {}, None, "bf16[3,5]"),
    ("shuffle-rotate", "shuffle", ["f32[3,5]"],
     {"dimensions": (1,), "mode": "rotate", "shifts": (2,)}, None, "f32[3,5]"),
    ("sinh-complex", "sinh", ["c64[2]"], {}, None, "c64[2]"),
    ("scan", "scan", ["f32[3,5]", "f32[3]"],
     {"dimensions": (1,), "num_carries": 1, "to_apply": SCAN_STEP}, None,
     "(f32[3,5], f32[3])"),
    ("while", "while", ["(s32[], f32[8])"],
     {"condition": const_fn(S("(s32[], f32[8])"), True, "pred"),
      "body": identity_fn(S("(s32[], f32[8])"))}, None, "(s32[], f32[8])"),
    ("conditional-pred", "conditional", ["pred[]", "f32[5]", "f32[5]"],
     {"true_computation": unary_fn(S("f32[5]"), "negate"),
      "false_computation": identity_fn(S("f32[5]"))}, None, "f32[5]"),
    ("conditional-index", "conditional", ["s32[]", "f32[6]", "f32[6]", "f32[6]"],
     {"branch_computations": (unary_fn(S("f32[6]"), "sine"), unary_fn(S("f32[6]"), "cosine"),
                              identity_fn(S("f32[6]")))}, None, "f32[6]"),
    ("opt-barrier", "opt-barrier", ["(f32[16], s32[])"], {}, None, "(f32[16], s32[])"),
    ("custom-call", "custom-call", ["f32[3]"], {"custom_call_target": "foo"}, "f32[7]", "f32[7]"),
    ("partition-id", "partition-id", [], {}, None, "u32[]"),
    ("replica-id", "replica-id", [], {}, None, "u32[]"),
    ("after-all", "after-all", ["token[]", "token[]"], {}, None, "token[]"),
    # XLA's verifier takes any operand: an ordering edge from a value into a token chain.
    ("after-all-value", "after-all", ["f32[]", "token[]"], {}, None, "token[]"),
    ("send", "send", ["f32[4]", "token[]"], {"channel_id": 1}, None, "(f32[4], u32[], token[])"),
    ("send-done", "send-done", ["(f32[4], u32[], token[])"], {}, None, "token[]"),
    ("recv", "recv", ["token[]"], {}, "(f32[4], u32[], token[])", "(f32[4], u32[], token[])"),
    ("recv-done", "recv-done", ["(f32[4], u32[], token[])"], {}, None, "(f32[4], token[])"),
    ("infeed", "infeed", ["token[]"], {}, "((u32[3], pred[]), token[])",
     "((u32[3], pred[]), token[])"),
    ("outfeed", "outfeed", ["(u32[3], pred[])", "token[]"], {}, None, "token[]"),
    ("rng", "rng", ["f32[]", "f32[]"], {"distribution": "rng_uniform"}, "f32[3,4]", "f32[3,4]"),
    ("rng-bit-generator", "rng-bit-generator", ["u64[2]"], {}, "(u64[2], u32[8])",
     "(u64[2], u32[8])"),
    ("rng-get-and-update-state", "rng-get-and-update-state", [], {}, None, "u64[2]"),
    # --- issue 17: library ops, map, scheduling wrappers ---
    ("reduce-precision", "reduce-precision", ["f32[4]"], {"exponent_bits": 5, "mantissa_bits": 10},
     None, "f32[4]"),
    ("map", "map", ["f32[4,3]", "f32[4,3]"], dims(dimensions=[0, 1], to_apply=ADD_F32), None,
     "f32[4,3]"),
    ("stochastic-convert", "stochastic-convert", ["f32[8]", "u32[8]"], {}, "s8[8]", "s8[8]"),
    ("topk", "topk", ["f32[3,9]"], {"k": 4, "largest": True}, None, "(f32[3,4], s32[3,4])"),
    ("cholesky", "cholesky", ["f64[2,5,5]"], {"lower": True}, None, "f64[2,5,5]"),
    ("triangular-solve", "triangular-solve", ["f32[5,5]", "f32[3,5]"],
     {"left_side": False, "lower": True, "transpose_a": "TRANSPOSE"}, None, "f32[3,5]"),
    ("fft", "fft", ["c64[4,8]"], {"fft_type": "FFT", "fft_length": (8,)}, None, "c64[4,8]"),
    ("rfft", "fft", ["f64[4,8]"], {"fft_type": "RFFT", "fft_length": (8,)}, None, "c128[4,5]"),
    ("irfft", "fft", ["c64[4,5]"], {"fft_type": "IRFFT", "fft_length": (9,)}, None, "f32[4,9]"),
    ("batch-norm-training", "batch-norm-training", ["f32[2,3,4]", "f32[3]", "f32[3]"],
     {"epsilon": RawAttr("0.001"), "feature_index": 1}, None, "(f32[2,3,4], f32[3], f32[3])"),
    ("batch-norm-inference", "batch-norm-inference", ["f32[2,3]"] + ["f32[3]"] * 4,
     {"epsilon": RawAttr("0.001"), "feature_index": 1}, None, "f32[2,3]"),
    ("batch-norm-grad", "batch-norm-grad", ["f32[2,3]"] + ["f32[3]"] * 3 + ["f32[2,3]"],
     {"epsilon": RawAttr("0.001"), "feature_index": 1}, None, "(f32[2,3], f32[3], f32[3])"),
    ("add-dependency", "add-dependency", ["f32[3]", "token[]"], {}, None, "f32[3]"),
    ("domain", "domain", ["f32[3]"], {}, None, "f32[3]"),
    ("async-start", "async-start", ["f32[5]"], {"calls": identity_fn(S("f32[5]"))},
     "((f32[5]), f32[5], s32[])", "((f32[5]), f32[5], s32[])"),
    ("async-update", "async-update", ["((f32[5]), f32[5], s32[])"], {}, None,
     "((f32[5]), f32[5], s32[])"),
    ("async-done", "async-done", ["((f32[5]), f32[5], s32[])"], {}, None, "f32[5]"),
    ("copy-start", "copy-start", ["f32[5]"], {}, None, "(f32[5], f32[5], u32[])"),
    ("copy-done", "copy-done", ["(f32[5], f32[5], u32[])"], {}, None, "f32[5]"),
    # --- collectives (shapes as XLA prints them) ---
    ("all-reduce", "all-reduce", ["f32[8,2]"], {"to_apply": ADD_F32, "channel_id": 1,
     "replica_groups": ReplicaGroups(((0, 1, 2, 3),))}, None, "f32[8,2]"),
    ("all-reduce-variadic", "all-reduce", ["s32[3]", "s32[]"], {"to_apply": ADD_S32}, None,
     "(s32[3], s32[])"),
    ("all-reduce-zero-size", "all-reduce", ["f32[0,4]"], {"to_apply": ADD_F32}, None, "f32[0,4]"),
    ("all-reduce-start", "all-reduce-start", ["f32[8]"], {"to_apply": ADD_F32}, None, "f32[8]"),
    ("all-reduce-done", "all-reduce-done", ["f32[8]"], {}, None, "f32[8]"),
    ("all-gather", "all-gather", ["f32[8,2]"], dims(dimensions=[0]), "f32[32,2]", "f32[32,2]"),
    ("all-gather-variadic", "all-gather", ["f32[1,2]", "s32[3]"], dims(dimensions=[0]),
     "(f32[4,2], s32[12])", "(f32[4,2], s32[12])"),
    ("all-gather-start", "all-gather-start", ["f32[1,8,4]"], dims(dimensions=[0]),
     "(f32[1,8,4], f32[8,8,4])", "(f32[1,8,4], f32[8,8,4])"),
    ("all-gather-start-variadic", "all-gather-start", ["f32[1,8]", "s32[1,5]"],
     dims(dimensions=[0]), "((f32[1,8], s32[1,5]), (f32[8,8], s32[8,5]))",
     "((f32[1,8], s32[1,5]), (f32[8,8], s32[8,5]))"),
    ("all-gather-done", "all-gather-done", ["(f32[1,8,4], f32[8,8,4])"], {}, None, "f32[8,8,4]"),
    ("reduce-scatter", "reduce-scatter", ["f32[8,2]"], {**dims(dimensions=[0]),
     "to_apply": ADD_F32}, "f32[2,2]", "f32[2,2]"),
    ("all-to-all-split", "all-to-all", ["f32[8,2]"], dims(dimensions=[0]), None, "f32[8,2]"),
    ("all-to-all-tuple", "all-to-all", ["f32[2,2]"] * 4, {}, None,
     "(f32[2,2], f32[2,2], f32[2,2], f32[2,2])"),
    ("collective-permute", "collective-permute", ["f32[8,2]"],
     {"source_target_pairs": ((0, 1), (1, 0))}, None, "f32[8,2]"),
    ("ragged-all-to-all", "ragged-all-to-all",
     ["bf16[8,2]", "bf16[12,2]", "s32[4]", "s64[4]", "s32[4]", "s32[4]"], {}, None,
     "bf16[12,2]"),
    ("collective-permute-in-place", "collective-permute",
     ["f32[4,6]", "f32[16,8]", "(s32[], s32[])", "(s64[], s64[])"],
     {"source_target_pairs": ((0, 1),), "slice_sizes": ((4, 6),)}, None, "f32[16,8]"),
    ("collective-permute-combined", "collective-permute", ["u32[8,8]", "u32[16]"],
     {"source_target_pairs": ((0, 1),)}, None, "(u32[8,8], u32[16])"),
    ("collective-permute-start", "collective-permute-start", ["f32[4]"],
     {"source_target_pairs": ((0, 1),)}, None, "(f32[4], f32[4], u32[], u32[])"),
    ("collective-permute-start-no-context", "collective-permute-start", ["f32[4]"],
     {"source_target_pairs": ((0, 1),)}, "(f32[4], f32[4])", "(f32[4], f32[4])"),
    ("collective-permute-done", "collective-permute-done", ["(f32[4], f32[4], u32[], u32[])"],
     {}, None, "f32[4]"),
    ("collective-broadcast", "collective-broadcast", ["bf16[3]"], {}, None, "bf16[3]"),
]


@pytest.mark.parametrize("opcode,operands,attrs,hint,expected",
                         [row[1:] for row in OK], ids=[row[0] for row in OK])
def test_infer_shape(opcode, operands, attrs, hint, expected):
    shape = infer_shape(opcode, [S(s) for s in operands], attrs,
                        S(hint) if hint is not None else None)
    assert shape == S(expected)


BAD_REDUCER = scalar_fn("add", ["s32", "s32"], "bad")

# (id, opcode, operand shapes, attrs, hint, fragment of the error message)
ERRORS = [
    ("send-no-token", "send", ["f32[4]", "f32[]"], {}, None, "operand 1 must be a token"),
    ("recv-result", "recv", ["token[]"], {}, "(f32[4], token[])", "must be (data, u32[], token[])"),
    ("recv-done-operand", "recv-done", ["(f32[4], token[])"], {}, None,
     "must be (data, u32[], token[])"),
    ("infeed-result", "infeed", ["token[]"], {}, "f32[4]", "must be (data, token[])"),
    ("outfeed-shape", "outfeed", ["f32[4]", "token[]"], {"outfeed_shape": S("f32[3]")}, None,
     "outfeed_shape f32[3] differs from the operand f32[4]"),
    ("add-dims", "add", ["f32[4]", "f32[5]"], {}, None, "add: operand shapes f32[4] and f32[5] differ"),
    ("add-types", "add", ["f32[4]", "s32[4]"], {}, None, "differ in element type"),
    ("add-no-implicit-broadcast", "add", ["f32[4]", "f32[]"], {}, None, "differ"),
    ("add-tuple", "add", ["(f32[4])", "f32[4]"], {}, None, "must be an array"),
    ("arity", "add", ["f32[4]"] * 3, {}, None, "add: expects 2 operands, got 3"),
    ("exp-int", "exponential", ["s32[4]"], {}, None, "exponential: operand type s32 not allowed"),
    ("is-finite-int", "is-finite", ["s32[4]"], {}, None, "not allowed"),
    ("popcnt-float", "popcnt", ["f32[4]"], {}, None, "not allowed"),
    ("shift-float", "shift-left", ["f32[4]", "f32[4]"], {}, None, "not allowed"),
    ("and-float", "and", ["f32[4]", "f32[4]"], {}, None, "not allowed"),
    ("negate-pred", "negate", ["pred[4]"], {}, None, "not allowed"),
    ("compare-no-direction", "compare", ["f32[4]", "f32[4]"], {}, None, "direction"),
    ("compare-type-attr", "compare", ["s32[4]", "s32[4]"], {"direction": "LT", "type": "FLOAT"},
     None, "type=FLOAT does not fit s32 operands (use SIGNED)"),
    ("compare-type-unknown", "compare", ["f32[4]", "f32[4]"], {"direction": "LT", "type": "FAST"},
     None, "type=FAST does not fit f32"),
    ("compare-types", "compare", ["f32[4]", "s32[4]"], {"direction": "EQ"}, None, "differ"),
    ("select-pred-type", "select", ["s32[2]", "f32[2]", "f32[2]"], {}, None, "predicate must be pred"),
    ("select-pred-dims", "select", ["pred[3]", "f32[2]", "f32[2]"], {}, None, "does not match"),
    ("clamp-bound", "clamp", ["f32[2]", "f32[3]", "f32[]"], {}, None, "min f32[2] must be a scalar"),
    ("convert-no-hint", "convert", ["f32[3]"], {}, None, "pass result_hint"),
    ("convert-dims", "convert", ["f32[3]"], {}, "s32[4]", "must keep the operand dims"),
    ("bitcast-convert-dims", "bitcast-convert", ["f32[4]"], {}, "u8[4]", "does not fit"),
    ("broadcast-dim-size", "broadcast", ["f32[3]"], dims(dimensions=[0]), "f32[2,3]",
     "maps to result dim 0"),
    ("broadcast-rank", "broadcast", ["f32[3]"], dims(dimensions=[]), "f32[2,3]", "one entry per"),
    ("broadcast-type", "broadcast", ["f32[3]"], dims(dimensions=[0]), "s32[3]", "differ"),
    ("reshape-count", "reshape", ["f32[2,3]"], {}, "f32[7]", "element counts"),
    ("bitcast-size", "bitcast", ["f32[4]"], {}, "f16[4]", "different sizes"),
    ("transpose-perm", "transpose", ["f32[2,3]"], dims(dimensions=[0, 0]), None, "not a permutation"),
    ("slice-bounds", "slice", ["f32[5]"], {"slice": slices((0, 6, 1))}, None, "out of bounds"),
    ("slice-rank", "slice", ["f32[5,2]"], {"slice": slices((0, 5, 1))}, None, "one [start:limit:stride]"),
    ("slice-stride", "slice", ["f32[5]"], {"slice": slices((0, 5, 0))}, None, "stride 0"),
    ("pad-interior", "pad", ["f32[5]", "f32[]"], {"padding": pads((0, 0, -1))}, None, "interior"),
    ("pad-too-negative", "pad", ["f32[2]", "f32[]"], {"padding": pads((-2, -1, 0))}, None, "gives -1"),
    ("pad-value", "pad", ["f32[5]", "f32[2]"], {"padding": pads((0, 0, 0))}, None, "must be a scalar"),
    ("concat-dims", "concatenate", ["f32[4,3]", "f32[5,3]"], dims(dimensions=[1]), None,
     "does not match"),
    ("concat-range", "concatenate", ["f32[4,3]"], dims(dimensions=[2]), None, "out of range"),
    ("reverse-range", "reverse", ["f32[3]"], dims(dimensions=[1]), None, "out of range"),
    ("iota-dim", "iota", [], {"iota_dimension": 1}, "s32[10]", "iota_dimension 1 out of range"),
    ("dynamic-slice-size", "dynamic-slice", ["f32[10,20]", "s32[]", "s32[]"],
     dims(dynamic_slice_sizes=[11, 5]), None, "does not fit"),
    ("dynamic-slice-float-index", "dynamic-slice", ["f32[10]", "f32[]"],
     dims(dynamic_slice_sizes=[1]), None, "integer scalar"),
    ("dynamic-slice-index-count", "dynamic-slice", ["f32[10,20]", "s32[]"],
     dims(dynamic_slice_sizes=[1, 1]), None, "needs 2 start indices"),
    ("dus-too-big", "dynamic-update-slice", ["f32[10,20]", "f32[11,4]", "s32[]", "s32[]"], {},
     None, "does not fit"),
    ("gather-slice-size", "gather", ["f32[50,8]", "s32[12,1]"],
     dims(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
          slice_sizes=[1, 9]), None, "does not fit in 8"),
    ("gather-collapse-big", "gather", ["f32[50,8]", "s32[12,1]"],
     dims(offset_dims=[1], collapsed_slice_dims=[1], start_index_map=[0], index_vector_dim=1,
          slice_sizes=[1, 8]), None, "slice size is 8"),
    ("gather-index-map", "gather", ["f32[50,8]", "s32[12,2]"],
     dims(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
          slice_sizes=[1, 8]), None, "index vector has 2"),
    ("gather-batch-size", "gather", ["f32[6,10]", "s32[5,3,1]"],
     dims(offset_dims=[], collapsed_slice_dims=[1], start_index_map=[1],
          operand_batching_dims=[0], start_indices_batching_dims=[0], index_vector_dim=2,
          slice_sizes=[1, 1]), None, "differ"),
    ("scatter-updates", "scatter", ["f32[10,4]", "s32[8,1]", "f32[7,1,4]"],
     dims(update_window_dims=[1, 2], inserted_window_dims=[], scatter_dims_to_operand_dims=[0],
          index_vector_dim=1, to_apply=ADD_F32), None, "do not match the index batch dims"),
    ("scatter-window", "scatter", ["f32[10,4]", "s32[8,1]", "f32[8,1,5]"],
     dims(update_window_dims=[1, 2], inserted_window_dims=[], scatter_dims_to_operand_dims=[0],
          index_vector_dim=1, to_apply=ADD_F32), None, "exceeds operand dim 1"),
    ("scatter-reducer", "scatter", ["f32[10,4]", "s32[8,1]", "f32[8,1,4]"],
     dims(update_window_dims=[1, 2], inserted_window_dims=[], scatter_dims_to_operand_dims=[0],
          index_vector_dim=1, to_apply=BAD_REDUCER), None, "to_apply computation bad takes"),
    ("reduce-reducer", "reduce", ["f32[8]", "f32[]"], dims(dimensions=[0], to_apply=BAD_REDUCER),
     None, "reduce: to_apply computation bad takes (s32[], s32[]), expected (f32[], f32[])"),
    ("reduce-dims", "reduce", ["f32[8]", "f32[]"], dims(dimensions=[1], to_apply=ADD_F32),
     None, "out of range"),
    ("reduce-init", "reduce", ["f32[8]", "f32[2]"], dims(dimensions=[0], to_apply=ADD_F32),
     None, "init value 0 must be a scalar"),
    ("reduce-odd", "reduce", ["f32[8]", "f32[8]", "f32[]"], dims(dimensions=[0], to_apply=ADD_F32),
     None, "N inputs and N init values"),
    ("reduce-variadic-dims", "reduce", ["f32[16,50]", "s64[16,5]", "f32[]", "s64[]"],
     dims(dimensions=[1], to_apply=ARGMAX), None, "differ in dims"),
    ("reduce-window-rank", "reduce-window", ["f32[2,8]", "f32[]"],
     {"window": W([2]), "to_apply": ADD_F32}, None, "window has 1 dimensions"),
    ("select-and-scatter-source", "select-and-scatter", ["f32[1,7,7,2]", "f32[1,4,4,2]", "f32[]"],
     {"window": W([1, 3, 3, 1], [1, 2, 2, 1]), "select": scalar_fn("compare", ["f32", "f32"]),
      "scatter": ADD_F32}, None, "window positions"),
    ("select-and-scatter-select", "select-and-scatter", ["f32[4]", "f32[2]", "f32[]"],
     {"window": W([2], [2]), "select": ADD_F32, "scatter": ADD_F32}, None,
     "select computation add_f32 returns f32[], expected pred[]"),
    ("sort-comparator", "sort", ["f32[8,10]", "s64[8,10]"],
     dims(dimensions=[1], to_apply=LT_F32), None, "comparator computation lt_f32 takes"),
    ("sort-dims", "sort", ["f32[8]", "f32[9]"], dims(dimensions=[0], to_apply=LT_F32), None,
     "differ in dims"),
    ("dot-contracting", "dot", ["f32[64,128]", "f32[127,96]"],
     dims(lhs_contracting_dims=[1], rhs_contracting_dims=[0]), None, "contracting dims"),
    ("dot-batch", "dot", ["f32[4,8,16]", "f32[3,16,8]"],
     dims(lhs_batch_dims=[0], lhs_contracting_dims=[2], rhs_batch_dims=[0],
          rhs_contracting_dims=[1]), None, "batch dims"),
    ("dot-mixed-no-hint", "dot", ["s8[8,32]", "f32[32,4]"],
     dims(lhs_contracting_dims=[1], rhs_contracting_dims=[0]), None, "mixed precision"),
    ("conv-features", "convolution", ["f32[2,16,16,3]", "f32[3,3,4,8]"],
     {"window": W([3, 3]), "dim_labels": "b01f_01io->b01f"}, None, "input features 3"),
    ("conv-labels", "convolution", ["f32[2,16,16,3]", "f32[3,3,3,8]"],
     {"window": W([3, 3]), "dim_labels": "b01f_01xo->b01f"}, None, "dim_labels"),
    ("conv-window", "convolution", ["f32[2,16,16,3]", "f32[3,3,3,8]"],
     {"window": W([5, 3]), "dim_labels": "b01f_01io->b01f"}, None, "kernel size 3"),
    ("conv-batch-groups", "convolution", ["f32[3,6,6,4]", "f32[6,6,4,4]"],
     {"window": W([6, 6]), "dim_labels": "b01f_01io->b01f", "batch_group_count": 2}, None,
     "batch_group_count"),
    ("parameter-no-hint", "parameter", [], {}, None, "parameter: result shape cannot be inferred"),
    ("gte-range", "get-tuple-element", ["(f32[2], s32[])"], {"index": 2}, None, "index 2 out of range"),
    ("gte-array", "get-tuple-element", ["f32[2]"], {"index": 0}, None, "not a tuple"),
    ("call-params", "call", ["f32[5]"], {"to_apply": unary_fn(S("f32[4]"), "negate", "neg4")},
     None, "call: to_apply computation neg4 parameter 0 is f32[4], operand is f32[5]"),
    ("call-missing", "call", ["f32[5]"], {}, None, "missing to_apply"),
    ("fusion-kind", "fusion", ["f32[4]"],
     {"kind": "kFast", "calls": identity_fn(S("f32[4]"))}, None, "kind must be one of"),
    ("scan-carries", "scan", ["f32[3,5]", "f32[3]"],
     {"dimensions": (1,), "num_carries": 2, "to_apply": SCAN_STEP}, None,
     "num_carries must be a count from 0 to 1"),
    ("scan-dimension", "scan", ["f32[5,3]", "f32[3]"],
     {"dimensions": (2,), "num_carries": 1, "to_apply": SCAN_STEP}, None,
     "input 0 f32[5,3] has no dimension 2 to scan"),
    ("scan-slice-shape", "scan", ["f32[3,5]", "f32[3]"],
     {"dimensions": (0,), "num_carries": 1, "to_apply": SCAN_STEP}, None, "to_apply"),
    ("while-body", "while", ["(s32[], f32[8])"],
     {"condition": const_fn(S("(s32[], f32[8])"), True, "pred"),
      "body": const_fn(S("(s32[], f32[8])"), 0, "s32", "step")}, None,
     "body step returns s32[], expected the state"),
    ("while-condition", "while", ["f32[8]"],
     {"condition": unary_fn(S("f32[8]"), "negate", "cond"), "body": identity_fn(S("f32[8]"))},
     None, "condition cond returns f32[8], expected pred[]"),
    ("conditional-selector", "conditional", ["f32[]", "f32[5]", "f32[5]"],
     {"branch_computations": (identity_fn(S("f32[5]")), identity_fn(S("f32[5]")))}, None,
     "pred[] or s32[]"),
    ("conditional-results", "conditional", ["s32[]", "f32[5]", "f32[5]"],
     {"branch_computations": (identity_fn(S("f32[5]")), unary_fn(S("f32[5]"), "is-finite"))},
     None, "branch 1"),
    ("conditional-count", "conditional", ["s32[]", "f32[5]"],
     {"branch_computations": (identity_fn(S("f32[5]")), identity_fn(S("f32[5]")))}, None,
     "2 branches but 1 branch operands"),
    # --- collectives ---
    ("all-reduce-reducer-type", "all-reduce", ["s32[4]"], {"to_apply": ADD_F32}, None,
     "to_apply computation add_f32 takes (f32[], f32[]), expected (s32[], s32[])"),
    ("all-reduce-mixed-types", "all-reduce", ["f32[4]", "s32[4]"], {"to_apply": ADD_F32}, None,
     "share an element type"),
    ("all-reduce-no-reducer", "all-reduce", ["f32[4]"], {}, None, "missing to_apply"),
    ("all-reduce-tuple-operand", "all-reduce", ["(f32[4])"], {"to_apply": ADD_F32}, None,
     "operand 0 must be an array"),
    ("all-reduce-groups-type", "all-reduce", ["f32[4]"],
     {"to_apply": ADD_F32, "replica_groups": ((0, 1),)}, None, "must be a ReplicaGroups"),
    ("all-gather-no-hint", "all-gather", ["f32[4]"], dims(dimensions=[0]), None,
     "cannot be inferred"),
    ("all-gather-two-dims", "all-gather", ["f32[4,4]"], dims(dimensions=[0, 1]), "f32[8,8]",
     "exactly one dimension"),
    ("all-gather-not-multiple", "all-gather", ["f32[4]"], dims(dimensions=[0]), "f32[6]",
     "6 is not a multiple of 4"),
    ("all-gather-other-dim", "all-gather", ["f32[4,3]"], dims(dimensions=[0]), "f32[8,6]",
     "with only dimension 0 changed"),
    ("all-gather-shard-counts", "all-gather", ["f32[4]", "f32[2]"], dims(dimensions=[0]),
     "(f32[8], f32[8])", "disagree on the shard count"),
    ("all-gather-start-element-0", "all-gather-start", ["f32[4]"], dims(dimensions=[0]),
     "(f32[8], f32[8])", "element 0 of the result must be the operand(s) f32[4]"),
    ("reduce-scatter-not-divisible", "reduce-scatter", ["f32[6]"],
     {**dims(dimensions=[0]), "to_apply": ADD_F32}, "f32[4]", "6 is not a multiple of 4"),
    ("all-to-all-two-operands-split", "all-to-all", ["f32[4]", "f32[4]"], dims(dimensions=[0]),
     None, "takes one operand"),
    ("all-to-all-tuple-shapes", "all-to-all", ["f32[4]", "f32[2]"], {}, None, "one shape"),
    ("ragged-all-to-all-types", "ragged-all-to-all",
     ["f32[8,2]", "bf16[12,2]", "s32[4]", "s32[4]", "s32[4]", "s32[4]"], {}, None,
     "must have one element type"),
    ("ragged-all-to-all-scalar", "ragged-all-to-all",
     ["f32[]", "f32[]", "s32[4]", "s32[4]", "s32[4]", "s32[4]"], {}, None,
     "must have one rank (at least 1)"),
    ("collective-permute-no-pairs", "collective-permute", ["f32[4]"], {}, None,
     "needs source_target_pairs"),
    ("collective-permute-start-context", "collective-permute-start", ["f32[4]"],
     {"source_target_pairs": ((0, 1),)}, "(f32[4], f32[4], s32[])", "must be u32[]"),
    ("all-gather-done-not-tuple", "all-gather-done", ["f32[4]"], {}, None,
     "the tuple a -start returns"),
]


@pytest.mark.parametrize("opcode,operands,attrs,hint,fragment",
                         [row[1:] for row in ERRORS], ids=[row[0] for row in ERRORS])
def test_infer_shape_error(opcode, operands, attrs, hint, fragment):
    with pytest.raises(ShapeError) as info:
        infer_shape(opcode, [S(s) for s in operands], attrs, S(hint) if hint is not None else None)
    message = str(info.value)
    assert fragment in message
    assert message.startswith(f"{opcode}:")
    assert "\n" not in message


def test_shape_error_is_a_value_error():
    assert issubclass(ShapeError, ValueError)


def test_unknown_opcode():
    with pytest.raises(ShapeError, match="unknown opcode 'frobnicate'"):
        infer_shape("frobnicate", [], {})


def test_malformed_attribute_is_a_clean_error():
    # `slice` given as a list of ints instead of SliceDims: one line, not a crash.
    with pytest.raises(ShapeError, match="^slice: "):
        infer_shape("slice", [S("f32[5]")], {"slice": (1, 2)})


def test_layout_does_not_matter():
    from xlapy.hlo import Shape
    a = Shape("f32", (2, 3), layout=(0, 1))
    assert infer_shape("negate", [a], {}) == S("f32[2,3]")


def test_every_elementwise_unary_op_keeps_the_shape_of_floats():
    for name, info in OPCODES.items():
        if info.kind == "unary" and name not in ("not", "popcnt", "count-leading-zeros"):
            expected = "pred[3,2]" if name == "is-finite" else "f32[3,2]"
            attrs = {"exponent_bits": 8, "mantissa_bits": 7} if name == "reduce-precision" else {}
            assert infer_shape(name, [S("f32[3,2]")], attrs) == S(expected), name


def test_every_elementwise_binary_op_keeps_the_shape():
    for name, info in OPCODES.items():
        if info.kind != "binary":
            continue
        bits = name in ("and", "or", "xor") or name.startswith("shift")
        operand = S("s32[2,5]") if bits else S("f32[2,5]")
        expected = S("c64[2,5]") if name == "complex" else operand
        assert infer_shape(name, [operand, operand], {}) == expected, name
        with pytest.raises(ShapeError, match=f"^{name}: operand shapes"):
            infer_shape(name, [operand, operand.with_dims((5, 2))], {})
