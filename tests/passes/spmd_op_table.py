"""Op kinds for the SPMD partitioner's correctness tests (tests/passes/test_spmd_fallbacks.py):
each one a module body over parameters p f32[M,K] (and more where the op needs them),
with what the inputs may hold. Mostly ops the partitioner does not handle natively
(fallback: gather the operands, compute whole, slice to the result's sharding) and
native ops on the dimensions they change."""
from __future__ import annotations

import numpy as np

COMPUTATIONS = """add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b) }
mul { ma = f32[] parameter(0)
  mb = f32[] parameter(1)
  ROOT ms = f32[] multiply(ma, mb) }
lt { la = f32[] parameter(0)
  lb = f32[] parameter(1)
  ROOT lc = pred[] compare(la, lb), direction=LT }
lt2 { xa = f32[] parameter(0)
  xb = f32[] parameter(1)
  ia = s32[] parameter(2)
  ib = s32[] parameter(3)
  ROOT xc = pred[] compare(xa, xb), direction=LT }
gt { ga = f32[] parameter(0)
  gb = f32[] parameter(1)
  ROOT gc = pred[] compare(ga, gb), direction=GT }
argmax { va = f32[] parameter(0)
  ja = s32[] parameter(1)
  vb = f32[] parameter(2)
  jb = s32[] parameter(3)
  big = pred[] compare(va, vb), direction=GE
  v = f32[] select(big, va, vb)
  j = s32[] select(big, ja, jb)
  ROOT vj = (f32[], s32[]) tuple(v, j) }
"""


class Kind:
    """`params`: extra parameters after p (HLO type text, how to draw them: "f32", or
    ("int", lo, hi) for integers in [lo, hi)); `body`: instructions ending in `r` (the
    value the module returns, through a negate so that it can carry a sharding);
    `out`: r's type; all with {M}, {K} and friends to fill in."""

    def __init__(self, params, body, out, tuple_out=False):
        self.params, self.body, self.out, self.tuple_out = params, body, out, tuple_out


def fill(text, M, K):
    return text.format(M=M, K=K, MK=M * K, M2=2 * M, K2=K * 2, Mh=(M + 1) // 2, K1=K - 1,
                       M1=M - 1, Kh=(K + 1) // 2, Mp=2 * ((M + 1) // 2) - M)


KINDS = {
    # reshapes that merge or split a dimension (unevenly when M, K are odd)
    "reshape_merge": Kind([], "r = f32[{MK}] reshape(p)", "f32[{MK}]"),
    "reshape_split": Kind([], "f = f32[{MK}] reshape(p)\n  r = f32[{K},{M}] reshape(f)",
                          "f32[{K},{M}]"),
    "reshape_3d": Kind([], "r = f32[{M},1,{K}] reshape(p)", "f32[{M},1,{K}]"),
    "gather_rows": Kind([("s32[3]", ("int", 0, "M"))],
                        "r = f32[3,{K}] gather(p, q), offset_dims={{1}}, collapsed_slice_dims={{0}}, "
                        "start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{K}}}",
                        "f32[3,{K}]"),
    "gather_cols": Kind([("s32[2,1]", ("int", 0, "K"))],
                        "r = f32[{M},2] gather(p, q), offset_dims={{0}}, collapsed_slice_dims={{1}}, "
                        "start_index_map={{1}}, index_vector_dim=1, slice_sizes={{{M},1}}",
                        "f32[{M},2]"),
    "scatter_add": Kind([("s32[2,1]", ("int", 0, "M")), ("f32[2,{K}]", "f32")],
                        "r = f32[{M},{K}] scatter(p, q, u), update_window_dims={{1}}, "
                        "inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, "
                        "index_vector_dim=1, to_apply=add", "f32[{M},{K}]"),
    "sort_dim0": Kind([], "r = f32[{M},{K}] sort(p), dimensions={{0}}, to_apply=lt",
                      "f32[{M},{K}]"),
    "sort_dim1_kv": Kind([], "i = s32[{M},{K}] iota(), iota_dimension=1\n"
                         "  st = (f32[{M},{K}], s32[{M},{K}]) sort(p, i), dimensions={{1}}, to_apply=lt2\n"
                         "  si = s32[{M},{K}] get-tuple-element(st), index=1\n"
                         "  r = f32[{M},{K}] convert(si)", "f32[{M},{K}]"),
    "dynamic_slice": Kind([("s32[]", ("int", -1, "M")), ("s32[]", ("int", 0, "K+2"))],
                          "r = f32[2,{K1}] dynamic-slice(p, q, u), dynamic_slice_sizes={{2,{K1}}}",
                          "f32[2,{K1}]"),
    "dynamic_update_slice": Kind([("f32[2,3]", "f32"), ("s32[]", ("int", -1, "M")),
                                  ("s32[]", ("int", 0, "K"))],
                                 "r = f32[{M},{K}] dynamic-update-slice(p, q, u, v)",
                                 "f32[{M},{K}]"),
    "iota": Kind([], "i = s32[{M},{K}] iota(), iota_dimension=0\n"
                 "  f = f32[{M},{K}] convert(i)\n  r = f32[{M},{K}] add(f, p)", "f32[{M},{K}]"),
    "topk": Kind([], "t = (f32[{M},2], s32[{M},2]) custom-call(p), custom_call_target=\"TopK\", "
                 "to_apply=gt\n  r = f32[{M},2] get-tuple-element(t), index=0", "f32[{M},2]"),
    "argmax": Kind([], "i = s32[{M},{K}] iota(), iota_dimension=1\n"
                   "  ninf = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
                   "  t = (f32[{M}], s32[{M}]) reduce(p, i, ninf, z), dimensions={{1}}, to_apply=argmax\n"
                   "  ti = s32[{M}] get-tuple-element(t), index=1\n  r = f32[{M}] convert(ti)",
                   "f32[{M}]"),
    "reduce_prod": Kind([], "one = f32[] constant(1)\n"
                        "  r = f32[{K}] reduce(p, one), dimensions={{0}}, to_apply=mul", "f32[{K}]"),
    "reduce_init3": Kind([], "c = f32[] constant(3)\n"
                         "  r = f32[{M}] reduce(p, c), dimensions={{1}}, to_apply=add", "f32[{M}]"),
    "cumsum": Kind([], "z = f32[] constant(0)\n"
                   "  r = f32[{M},{K}] reduce-window(p, z), window={{size=1x{K} pad=0_0x{K1}_0}}, "
                   "to_apply=add", "f32[{M},{K}]"),
    "reduce_window_init": Kind([], "c = f32[] constant(1)\n"
                               "  r = f32[{M},{K1}] reduce-window(p, c), window={{size=1x2}}, "
                               "to_apply=add", "f32[{M},{K1}]"),
    "select_and_scatter": Kind([("f32[{Mh},{K}]", "f32")],
                               "z = f32[] constant(0)\n"
                               "  r = f32[{M},{K}] select-and-scatter(p, q, z), "
                               "window={{size=2x1 stride=2x1 pad=0_{Mp}x0_0}}, select=gt, scatter=add",
                               "f32[{M},{K}]"),
    "conv_lhs_dilate": Kind([("f32[2,1,1,2]", "f32")],
                            "a = f32[1,{M},{K},1] reshape(p)\n"
                            "  c = f32[1,{M2},{K},2] convolution(a, q), window={{size=2x1 pad=1_1x0_0 lhs_dilate=2x1}}, "
                            "dim_labels=b01f_01io->b01f\n  r = f32[{M2},{K},2] reshape(c)",
                            "f32[{M2},{K},2]"),
    "conv_reversal": Kind([("f32[3,1,1,2]", "f32")],
                          "a = f32[1,{M},{K},1] reshape(p)\n"
                          "  c = f32[1,{M},{K},2] convolution(a, q), window={{size=3x1 pad=1_1x0_0 rhs_reversal=1x0}}, "
                          "dim_labels=b01f_01io->b01f\n  r = f32[{M},{K},2] reshape(c)",
                          "f32[{M},{K},2]"),
    "conv_batch_groups": Kind([("f32[{M},1,1,{K}]", "f32")],
                              "a = f32[{M},1,1,{K}] reshape(p)\n"
                              "  c = f32[1,{M},1,1] convolution(a, q), window={{size=1x{K}}}, "
                              "dim_labels=bf01_oi01->bf01, batch_group_count={M}\n"
                              "  r = f32[{M}] reshape(c)", "f32[{M}]"),
    "conv_feature_groups": Kind([("f32[2,1,1,{K}]", "f32")],
                                "a = f32[1,{M},1,{K}] reshape(p)\n"
                                "  c = f32[1,{M1},1,{K}] convolution(a, q), window={{size=2x1}}, "
                                "dim_labels=b01f_01io->b01f, feature_group_count={K}\n"
                                "  r = f32[{M1},{K}] reshape(c)", "f32[{M1},{K}]"),
    "pad_interior": Kind([], "c = f32[] constant(2)\n"
                         "  r = f32[{M},{K2}] pad(p, c), padding=0_0x1_0_1", "f32[{M},{K2}]"),
    "pad_negative": Kind([], "c = f32[] constant(2)\n"
                         "  r = f32[{M1},{K}] pad(p, c), padding=-1_0x1_-1", "f32[{M1},{K}]"),
    "slice_strided": Kind([], "r = f32[{Mh},{Kh}] slice(p), slice={{[0:{M}:2], [0:{K}:2]}}",
                          "f32[{Mh},{Kh}]"),
    "concat_sharded": Kind([], "n = f32[{M},{K}] negate(p)\n"
                           "  r = f32[{M},{K2}] concatenate(p, n), dimensions={{1}}",
                           "f32[{M},{K2}]"),
    "reverse_both": Kind([], "r = f32[{M},{K}] reverse(p), dimensions={{0,1}}", "f32[{M},{K}]"),
    "clamp_scalar": Kind([], "lo = f32[] constant(-0.5)\n  hi = f32[] constant(0.5)\n"
                         "  r = f32[{M},{K}] clamp(lo, p, hi)", "f32[{M},{K}]"),
    "bitcast_convert": Kind([], "b = s32[{M},{K}] bitcast-convert(p)\n"
                            "  c = s32[] constant(1)\n  cb = s32[{M},{K}] broadcast(c), dimensions={{}}\n"
                            "  s = s32[{M},{K}] add(b, cb)\n  r = f32[{M},{K}] bitcast-convert(s)",
                            "f32[{M},{K}]"),
    "map": Kind([], "r = f32[{M},{K}] map(p, p), dimensions={{0,1}}, to_apply=mul", "f32[{M},{K}]"),
    "dot_two_contractions": Kind([("f32[{M},{K},3]", "f32")],
                                 "r = f32[3] dot(p, q), lhs_contracting_dims={{0,1}}, "
                                 "rhs_contracting_dims={{0,1}}", "f32[3]"),
    "transpose_dot": Kind([("f32[{M},3]", "f32")],
                          "t = f32[{K},{M}] transpose(p), dimensions={{1,0}}\n"
                          "  r = f32[{K},3] dot(t, q), lhs_contracting_dims={{1}}, "
                          "rhs_contracting_dims={{0}}", "f32[{K},3]"),
}


def draw(spec, shape_dims, M, K, rng):
    """An input for a parameter of `shape_dims` drawn as `spec` says."""
    if spec == "f32":
        return rng.standard_normal(shape_dims).astype(np.float32)
    _, lo, hi = spec
    env = {"M": M, "K": K}
    hi = eval(hi, {}, env) if isinstance(hi, str) else hi
    return rng.integers(lo, hi, size=shape_dims).astype(np.int32)
