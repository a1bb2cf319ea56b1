"""Dots whose operand dimensions do not merge into one strided GEMM dimension
(emitters/dot.py `_plan`, issue 19): JAX's attention gradients contract a transposed
[B, S, H, D] operand over (B, S) with S minor, or keep (B, S) free around (H, D). Such
an operand is copied into the GEMM's row-major order in scratch memory and the dot runs
on the packed GEMM (it was the generic dot, ~50x slower); the numbers agree with the
evaluator for each operand and dimension group that fails to merge, both at once, f32
and f64, one and several intra-op threads."""
from __future__ import annotations

import re

import numpy as np
import pytest

from xlapy import backend_cpu, hlo, runtime
from tests.corpus_util import assert_close

DTYPES = {"f32": np.float32, "f64": np.float64}

# name -> (lhs shape and transpose into the dot, rhs, dot attributes, output shape).
# The transposes keep their operand's memory order (layouts as JAX writes them), so the
# dot reads a strided view whose dimension groups are not contiguous.
CASES = {
    # lhs [B,S,H,D] laid out as [B][H][D][S]: contract (B, S), free (H, D).
    "lhs_contracting": ("{t}[8,4,16,32]{{3,2,1,0}}", "{t}[8,32,4,16]{{1,3,2,0}}",
                        "dimensions={{0,3,1,2}}", "{t}[8,32,128]{{2,1,0}}",
                        "lhs_contracting_dims={{0,1}}, rhs_contracting_dims={{0,1}}",
                        "{t}[4,16,128]{{2,1,0}}"),
    # the same operand, contracted over (H, D): free (B, S) not contiguous.
    "lhs_free": ("{t}[8,4,16,32]{{3,2,1,0}}", "{t}[8,32,4,16]{{1,3,2,0}}",
                 "dimensions={{0,3,1,2}}", "{t}[4,16,128]{{2,1,0}}",
                 "lhs_contracting_dims={{2,3}}, rhs_contracting_dims={{0,1}}",
                 "{t}[8,32,128]{{2,1,0}}"),
}


def case_text(name: str, t: str, swap: bool) -> str:
    """The module of CASES[name]; `swap`: the strided operand is the rhs instead."""
    src, view, perm, other, dims, out = (s.format(t=t) for s in CASES[name])
    if swap:
        dims = dims.replace("lhs_", "@").replace("rhs_", "lhs_").replace("@", "rhs_")
        other_dims = other.split("[")[1].split("]")[0].split(",")
        view_dims = view.split("[")[1].split("]")[0].split(",")
        lc = [int(x) for x in dims.split("rhs_contracting_dims={")[1].split("}")[0].split(",")]
        oc = [int(x) for x in dims.split("lhs_contracting_dims={")[1].split("}")[0].split(",")]
        free = [other_dims[i] for i in range(len(other_dims)) if i not in oc] + \
            [view_dims[i] for i in range(len(view_dims)) if i not in lc]
        out = f"{t}[{','.join(free)}]{{{','.join(str(i) for i in reversed(range(len(free))))}}}"
        operands = "o, v"
    else:
        operands = "v, o"
    return f"""HloModule relayout
ENTRY e {{
  s = {src} parameter(0)
  o = {other} parameter(1)
  v = {view} transpose(s), {perm}
  ROOT d = {out} dot({operands}), {dims}
}}
"""


def shapes_of(text: str) -> list[tuple]:
    module = hlo.parse_module(text)
    return [tuple(p.shape.dims) for p in module.entry.parameters]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("swap", [False, True], ids=["strided_lhs", "strided_rhs"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_strided_operand_runs_on_the_gemm(name, swap, dtype, threads):
    text = case_text(name, dtype, swap)
    rng = np.random.default_rng(7)
    # Multiples of 1/8 up to 1/2: every product and partial sum is exact, so any
    # summation order gives the evaluator's numbers.
    args = [(rng.integers(-4, 5, s) / 8).astype(DTYPES[dtype]) for s in shapes_of(text)]
    before = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=threads)
    try:
        executable = backend_cpu.compile(hlo.parse_module(text),
                                         backend_cpu.CompileOptions(pipeline="default"))
        actual = executable.run(*args)[0]
    finally:
        runtime.configure(intra_op_threads=before)
    chosen = [c.chosen for c in executable.kernel_strategies()]
    assert "gemm" in chosen, [c.lines() for c in executable.kernel_strategies()]
    expected = np.asarray(hlo.evaluate(hlo.parse_module(text), args)[0])
    assert_close(actual, expected, f"{name} {dtype} swap={swap} threads={threads}")


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_both_operands_strided(dtype):
    """Both operands are [B, S, H, D] views contracted over (B, S), S minor in memory:
    out[h, d, h', d'] = sum over b, s (both copied)."""
    text = """HloModule both
ENTRY e {
  a = {t}[8,8,16,32]{3,2,1,0} parameter(0)
  c = {t}[8,8,16,32]{3,2,1,0} parameter(1)
  va = {t}[8,32,8,16]{1,3,2,0} transpose(a), dimensions={0,3,1,2}
  vc = {t}[8,32,8,16]{1,3,2,0} transpose(c), dimensions={0,3,1,2}
  ROOT d = {t}[8,16,8,16]{3,2,1,0} dot(va, vc), lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}
}
""".replace("{t}", dtype)
    rng = np.random.default_rng(3)
    args = [(rng.integers(-4, 5, (8, 8, 16, 32)) / 8).astype(DTYPES[dtype]) for _ in range(2)]
    executable = backend_cpu.compile(hlo.parse_module(text),
                                     backend_cpu.CompileOptions(pipeline="default"))
    assert "gemm" in [c.chosen for c in executable.kernel_strategies()]
    expected = np.asarray(hlo.evaluate(hlo.parse_module(text), args)[0])
    assert_close(executable.run(*args)[0], expected, f"both strided, {dtype}")


def test_the_copy_is_optimized(isa):
    """The kernel around the GEMM driver is left unoptimized (llvm/ir_policy.py); the
    copy is a function of its own that LLVM optimizes: its contiguous rows become block
    copies or full vectors of the target (it ran as spilled scalar code, ~8 ns per
    element)."""
    text = case_text("lhs_contracting", "f32", swap=False)
    executable = isa.compile(hlo.parse_module(text), pipeline="default")
    llvm = executable.as_llvm_ir()
    start = re.search(r"define [^\n]*_relayout_lhs\(", llvm).start()
    body = llvm[start:llvm.index("\n}", start)]
    assert "@llvm.memcpy" in body or isa.vector_type("s32") in body, body[:2000]


WHILE_BODY_DOT = """HloModule loop
body {
  p = (s32[], f32[8,4,16,32], f32[8,32,128]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  s = f32[8,4,16,32] get-tuple-element(p), index=1
  o = f32[8,32,128] get-tuple-element(p), index=2
  v = f32[8,32,4,16]{1,3,2,0} transpose(s), dimensions={0,3,1,2}
  d = f32[4,16,128] dot(v, o), lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}
  c = f32[] constant(0.001)
  cb = f32[4,16,128] broadcast(c), dimensions={}
  dd = f32[4,16,128] multiply(d, cb)
  t = f32[8,32,128] slice(o), slice={[0:8], [0:32], [0:128]}
  r = f32[128] reduce(dd, c), dimensions={0,1}, to_apply=add
  rb = f32[8,32,128] broadcast(r), dimensions={2}
  o2 = f32[8,32,128] add(t, rb)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT q = (s32[], f32[8,4,16,32], f32[8,32,128]) tuple(i2, s, o2)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
cond {
  p = (s32[], f32[8,4,16,32], f32[8,32,128]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  s = f32[8,4,16,32] parameter(0)
  o = f32[8,32,128] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[8,4,16,32], f32[8,32,128]) tuple(z, s, o)
  w = (s32[], f32[8,4,16,32], f32[8,32,128]) while(init), condition=cond, body=body
  ROOT out = f32[8,32,128] get-tuple-element(w), index=2
}
"""


def test_inside_a_while_body():
    """The relayout's scratch buffers in a loop body's kernel (three iterations, each
    dot reading the state the previous one wrote)."""
    rng = np.random.default_rng(1)
    args = [(rng.integers(-4, 5, (8, 4, 16, 32)) / 8).astype(np.float32),
            (rng.integers(-4, 5, (8, 32, 128)) / 8).astype(np.float32)]
    executable = backend_cpu.compile(hlo.parse_module(WHILE_BODY_DOT),
                                     backend_cpu.CompileOptions(pipeline="default"))
    assert "gemm" in [c.chosen for c in executable.kernel_strategies()]
    expected = np.asarray(hlo.evaluate(hlo.parse_module(WHILE_BODY_DOT), args)[0])
    assert_close(executable.run(*args)[0], expected, "dot with a relayout in a while body")
