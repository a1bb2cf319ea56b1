"""Non-elementwise opcodes on the CPU backend vs the reference evaluator.

Each case is a small HLO module chosen for an edge the backend must get right:
clamped dynamic starts, out-of-bounds gather and scatter indices, negative and
interior padding, window padding and dilation, NaNs in sorts and max reductions,
column reductions in every dtype, row fusions whose reductions are hoisted.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_cpu.helpers import check_against_evaluator, edge_values

REDUCERS = """
add_{t} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] add(a, b)
}}
max_{t} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] maximum(a, b)
}}
"""


def _rand(shape, t="f32", seed=0):
    return edge_values(t, int(np.prod(shape)), seed).reshape(shape)


@pytest.mark.parametrize("t", ["f32", "f64", "s32", "u8", "s64", "f16"])
@pytest.mark.parametrize("dims", ["{0}", "{1}", "{2}", "{0,2}", "{0,1,2}"])
def test_reduce_any_axes(t, dims):
    """Row reductions (minor dim reduced) and streaming column reductions (minor kept)."""
    kept = [d for d in range(3) if str(d) not in dims]
    shape = [6, 5, 33]
    out = ",".join(str(shape[d]) for d in kept)
    text = f"""HloModule red
{REDUCERS.format(t=t)}
ENTRY e {{
  x = {t}[6,5,33] parameter(0)
  z = {t}[] constant(0)
  s = {t}[{out}] reduce(x, z), dimensions={dims}, to_apply=add_{t}
  m = {t}[{out}] reduce(x, z), dimensions={dims}, to_apply=max_{t}
  ROOT r = ({t}[{out}], {t}[{out}]) tuple(s, m)
}}"""
    x = _rand(shape, t, seed=3)
    if t in ("f16", "f32", "f64"):
        # Exact sums in any order: quarters (f32, f64), small integers (f16).
        x = np.nan_to_num(x.astype(np.float64), nan=1.0).clip(-1e3, 1e3)
        x = np.round(x.clip(-2, 2)) if t == "f16" else np.round(x * 4) / 4
        x = x.astype(_np(t))
    check_against_evaluator(text, [x], f"{t} {dims}")


def _np(t):
    from xlapy import hlo
    return hlo.numpy_dtype(t)


ARGMAX = """HloModule argmax
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  nan = pred[] compare(v0, v0), direction=NE
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  k0 = pred[] or(gt, nan)
  keep = pred[] or(k0, tie)
  v = f32[] select(keep, v0, v1)
  i = s32[] select(keep, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[7,9] parameter(0)
  io = s32[7,9] iota(), iota_dimension=DIM
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[OUT], s32[OUT]) reduce(x, io, ninf, zero), dimensions={DIM}, to_apply=argmax
}"""


@pytest.mark.parametrize("dim,out", [(1, "7"), (0, "9")])
def test_variadic_argmax_row_and_column(dim, out):
    x = np.random.default_rng(4).integers(-3, 3, (7, 9)).astype(np.float32)
    x[2, 4] = np.nan
    text = ARGMAX.replace("DIM", str(dim)).replace("OUT", out)
    check_against_evaluator(text, [x])


SOFTMAX_FUSION = """HloModule row
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  x = f32[12,70] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[12] reduce(x, ninf), dimensions={1}, to_apply=max
  mb = f32[12,70] broadcast(mx), dimensions={0}
  d = f32[12,70] subtract(x, mb)
  ex = f32[12,70] exponential(d)
  z = f32[] constant(0)
  sm = f32[12] reduce(ex, z), dimensions={1}, to_apply=add
  r1 = f32[12,1] reshape(sm)
  r2 = f32[12] reshape(r1)
  sb = f32[12,70] broadcast(r2), dimensions={0}
  ROOT r = f32[12,70] divide(ex, sb)
}
ENTRY e {
  x = f32[12,70] parameter(0)
  ROOT f = f32[12,70] fusion(x), kind=kLoop, calls=fused
}"""


def test_row_fusion_hoists_its_reductions():
    from tests.backend_cpu.helpers import compiled
    from tests.targets import ISA_LEVELS, IsaCase
    x = np.random.default_rng(5).standard_normal((12, 70)).astype(np.float32) * 5
    x[3, :] = -np.inf
    x[3, 7] = 1.0
    check_against_evaluator(SOFTMAX_FUSION, [x])
    # Hoisted: the element loop no longer contains a reduction loop, so it vectorizes:
    # to whole registers on AVX2 and AVX-512 (on SSE4.2, whose f32 exp computes its
    # fused multiply-adds in f64, LLVM picks two lanes).
    for isa in ISA_LEVELS:
        ir_text = compiled(SOFTMAX_FUSION, isa)[1].as_llvm_ir()
        expected = "x float>" if isa == "sse4.2" else IsaCase(isa).vector_type("f32")
        assert expected in ir_text, isa


CASES = {
    "dynamic_slice_clamped": ("""HloModule ds
ENTRY e {
  x = f32[10,20] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ROOT r = f32[3,5] dynamic-slice(x, i, j), dynamic_slice_sizes={3,5}
}""", lambda: [_rand((10, 20)), np.int32(9), np.int32(-4)]),
    "dynamic_update_slice_clamped": ("""HloModule dus
ENTRY e {
  x = f32[10,20] parameter(0)
  u = f32[2,4] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT r = f32[10,20] dynamic-update-slice(x, u, i, j)
}""", lambda: [_rand((10, 20)), _rand((2, 4), seed=1), np.int32(100), np.int32(-7)]),
    "pad_negative_interior": ("""HloModule pad
ENTRY e {
  x = s32[5,6] parameter(0)
  c = s32[] constant(-9)
  ROOT r = s32[10,8] pad(x, c), padding=1_0_1x-2_-1_1
}""", lambda: [_rand((5, 6), "s32")]),
    "concatenate_reverse": ("""HloModule cr
ENTRY e {
  a = u16[3,4] parameter(0)
  b = u16[3,2] parameter(1)
  c = u16[3,6] concatenate(a, b), dimensions={1}
  ROOT r = u16[3,6] reverse(c), dimensions={0,1}
}""", lambda: [_rand((3, 4), "u16"), _rand((3, 2), "u16", 1)]),
    "gather_out_of_bounds": ("""HloModule g
ENTRY e {
  x = f32[50,8] parameter(0)
  i = s32[6,1] parameter(1)
  ROOT r = f32[6,8] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}
}""", lambda: [_rand((50, 8)), np.array([[0], [49], [50], [-1], [1000], [-2**31]], np.int32)]),
    "scatter_drops_out_of_bounds": ("""HloModule s
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[10,4] parameter(0)
  i = s32[5] parameter(1)
  u = f32[5,4] parameter(2)
  ROOT r = f32[10,4] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}""", lambda: [np.zeros((10, 4), np.float32), np.array([1, 1, 10, -1, 9], np.int32),
               np.ones((5, 4), np.float32)]),
    "reduce_window_padded_dilated": ("""HloModule rw
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[2,9,9,3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2,9,5,3] reduce-window(x, z), window={size=1x3x3x1 stride=1x1x2x1 pad=0_0x2_2x1_1x0_0 rhs_dilate=1x2x1x1}, to_apply=add
}""", lambda: [np.round(_rand((2, 9, 9, 3)).clip(-100, 100)).astype(np.float32)]),
    "sort_nan_last_stable": ("""HloModule sort
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
ENTRY e {
  x = f32[4,25] parameter(0)
  io = s32[4,25] iota(), iota_dimension=1
  ROOT r = (f32[4,25], s32[4,25]) sort(x, io), dimensions={1}, is_stable=true, to_apply=lt
}""", lambda: [np.nan_to_num(_rand((4, 25)), nan=np.nan).round()]),
    "transpose_3d_and_copy_layout": ("""HloModule t
ENTRY e {
  x = f64[4,33,40] parameter(0)
  t = f64[40,4,33] transpose(x), dimensions={2,0,1}
  ROOT c = f64[40,4,33]{0,1,2} copy(t)
}""", lambda: [_rand((4, 33, 40), "f64")]),
    "convolution_grouped": ("""HloModule conv
ENTRY e {
  x = f32[1,7,7,4] parameter(0)
  k = f32[3,3,2,6] parameter(1)
  ROOT c = f32[1,4,4,6] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2
}""", lambda: [np.round(_rand((1, 7, 7, 4)).clip(-9, 9)), np.round(_rand((3, 3, 2, 6), seed=2).clip(-9, 9))]),
    "convolution_gemm_strided_dilated": ("""HloModule convg
ENTRY e {
  x = f32[2,11,11,8] parameter(0)
  k = f32[3,3,8,16] parameter(1)
  ROOT c = f32[2,11,8,16] convolution(x, k), window={size=3x3 stride=2x1 pad=1_2x0_1 lhs_dilate=2x1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f
}""", lambda: [np.nan_to_num(np.round(_rand((2, 11, 11, 8)).clip(-9, 9))),
               np.nan_to_num(np.round(_rand((3, 3, 8, 16), seed=2).clip(-9, 9)))]),
    "select_and_scatter": ("""HloModule sas
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[1,7,7,2] parameter(0)
  s = f32[1,3,3,2] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[1,7,7,2] select-and-scatter(x, s, z), window={size=1x3x3x1 stride=1x2x2x1}, select=ge, scatter=add
}""", lambda: [np.round(_rand((1, 7, 7, 2)).clip(-5, 5)), _rand((1, 3, 3, 2), seed=1)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_case(name):
    text, make_args = CASES[name]
    args = [np.asarray(a) for a in make_args()]
    with np.errstate(all="ignore"):
        check_against_evaluator(text, args, name)


def test_convolution_takes_the_gemm_path():
    from tests.backend_cpu.helpers import compiled
    text, _ = CASES["convolution_gemm_strided_dilated"]
    assert "_gemm" in compiled(text)[1].as_llvm_ir()


def test_while_and_conditional():
    text = """HloModule loop
cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[8] add(x, x)
  ROOT t = (s32[], f32[8]) tuple(j, y)
}
neg {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
ident {
  p = f32[8] parameter(0)
  ROOT c = f32[8] copy(p)
}
ENTRY e {
  x = f32[8] parameter(0)
  k = s32[] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  r = f32[8] get-tuple-element(w), index=1
  ROOT c = f32[8] conditional(k, r, r), branch_computations={neg, ident}
}"""
    x = np.arange(8, dtype=np.float32)
    for k in (0, 1, 7, -3):               # out-of-range branch indices run the last branch
        (out,) = check_against_evaluator(text, [x, np.int32(k)], f"k={k}")
        np.testing.assert_array_equal(out, (-32 * x) if k == 0 else 32 * x)
