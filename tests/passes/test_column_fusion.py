"""Row fusion's column form (issue 19): a normalization over a dimension that is not the
minor one (softmax over axis 0, a layernorm over axis 1 of [B, S, D]) becomes ONE row
fusion tagged with its reduced dimension, `{"fusion_kind":"row","row_dim":a}`."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo, passes
from xlapy.frontend import jit_compile, ops
from xlapy.passes.fusion_utils import fusion_kind, row_dim
from xlapy.passes.row_fusion import RowFusion
from tests.corpus_util import assert_close

# HLO text as JAX 0.10.2 writes these functions of x: f32[6,10] (jax.jit(f).lower(x)
# .compiler_ir("hlo")): jax.nn.softmax(x, axis=0), jax.nn.log_softmax(x, axis=0),
# a layernorm (x - mean) * rsqrt(var + 1e-5) and an rmsnorm over axis 0 with
# jnp.mean(..., keepdims=True).
JAX_FORMS = {
    "softmax": """HloModule jit__lambda
region_0.1 {
  reduce_max.3 = f32[] parameter(0)
  reduce_max.4 = f32[] parameter(1)
  ROOT reduce_max.5 = f32[] maximum(reduce_max.3, reduce_max.4)
}
region_1.2 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}
ENTRY main.3 {
  x.1 = f32[6,10]{1,0} parameter(0)
  constant.5 = f32[] constant(-inf)
  reduce_max.7 = f32[10]{0} reduce(x.1, constant.5), dimensions={0}, to_apply=region_0.1
  constant.3 = f32[] constant(-inf)
  broadcast.1 = f32[10]{0} broadcast(constant.3), dimensions={}
  max.1 = f32[10]{0} maximum(reduce_max.7, broadcast.1)
  broadcast_in_dim.2 = f32[1,10]{1,0} reshape(max.1)
  sub.4 = f32[1,10]{1,0} broadcast(broadcast_in_dim.2), dimensions={0,1}
  sub.5 = f32[10]{0} reshape(sub.4)
  sub.6 = f32[6,10]{1,0} broadcast(sub.5), dimensions={1}
  sub.7 = f32[6,10]{1,0} subtract(x.1, sub.6)
  exp.1 = f32[6,10]{1,0} exponential(sub.7)
  constant.4 = f32[] constant(0)
  reduce_sum.7 = f32[10]{0} reduce(exp.1, constant.4), dimensions={0}, to_apply=region_1.2
  broadcast_in_dim.3 = f32[1,10]{1,0} reshape(reduce_sum.7)
  div.4 = f32[1,10]{1,0} broadcast(broadcast_in_dim.3), dimensions={0,1}
  div.5 = f32[10]{0} reshape(div.4)
  div.6 = f32[6,10]{1,0} broadcast(div.5), dimensions={1}
  ROOT div.7 = f32[6,10]{1,0} divide(exp.1, div.6)
}""",
    "log_softmax": """HloModule jit__lambda
region_0.1 {
  reduce_max.3 = f32[] parameter(0)
  reduce_max.4 = f32[] parameter(1)
  ROOT reduce_max.5 = f32[] maximum(reduce_max.3, reduce_max.4)
}
region_1.2 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}
log_softmax.3 {
  Arg_0.1 = f32[6,10]{1,0} parameter(0)
  constant.5 = f32[] constant(-inf)
  reduce_max.7 = f32[10]{0} reduce(Arg_0.1, constant.5), dimensions={0}, to_apply=region_0.1
  constant.3 = f32[] constant(-inf)
  broadcast.1 = f32[10]{0} broadcast(constant.3), dimensions={}
  max.1 = f32[10]{0} maximum(reduce_max.7, broadcast.1)
  broadcast_in_dim.2 = f32[1,10]{1,0} reshape(max.1)
  sub.8 = f32[1,10]{1,0} broadcast(broadcast_in_dim.2), dimensions={0,1}
  sub.9 = f32[10]{0} reshape(sub.8)
  sub.10 = f32[6,10]{1,0} broadcast(sub.9), dimensions={1}
  sub.11 = f32[6,10]{1,0} subtract(Arg_0.1, sub.10)
  exp.1 = f32[6,10]{1,0} exponential(sub.11)
  constant.4 = f32[] constant(0)
  reduce_sum.7 = f32[10]{0} reduce(exp.1, constant.4), dimensions={0}, to_apply=region_1.2
  broadcast_in_dim.3 = f32[1,10]{1,0} reshape(reduce_sum.7)
  log.1 = f32[1,10]{1,0} log(broadcast_in_dim.3)
  sub.12 = f32[1,10]{1,0} broadcast(log.1), dimensions={0,1}
  sub.13 = f32[10]{0} reshape(sub.12)
  sub.14 = f32[6,10]{1,0} broadcast(sub.13), dimensions={1}
  ROOT sub.15 = f32[6,10]{1,0} subtract(sub.11, sub.14)
}
ENTRY main.4 {
  x.1 = f32[6,10]{1,0} parameter(0)
  ROOT jit_log_softmax_.1 = f32[6,10]{1,0} call(x.1), to_apply=log_softmax.3
}""",
    "layernorm": """HloModule jit__lambda
region_0.1 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}
region_1.2 {
  reduce_sum.10 = f32[] parameter(0)
  reduce_sum.11 = f32[] parameter(1)
  ROOT reduce_sum.12 = f32[] add(reduce_sum.10, reduce_sum.11)
}
ENTRY main.3 {
  x.1 = f32[6,10]{1,0} parameter(0)
  constant.5 = f32[] constant(0)
  reduce_sum.14 = f32[10]{0} reduce(x.1, constant.5), dimensions={0}, to_apply=region_0.1
  broadcast_in_dim.2 = f32[1,10]{1,0} reshape(reduce_sum.14)
  constant.4 = f32[] constant(6)
  broadcast.3 = f32[1,10]{1,0} broadcast(constant.4), dimensions={}
  div.2 = f32[1,10]{1,0} divide(broadcast_in_dim.2, broadcast.3)
  sub.12 = f32[1,10]{1,0} broadcast(div.2), dimensions={0,1}
  sub.13 = f32[10]{0} reshape(sub.12)
  sub.14 = f32[6,10]{1,0} broadcast(sub.13), dimensions={1}
  sub.15 = f32[6,10]{1,0} subtract(x.1, sub.14)
  sub.8 = f32[1,10]{1,0} broadcast(div.2), dimensions={0,1}
  sub.9 = f32[10]{0} reshape(sub.8)
  sub.10 = f32[6,10]{1,0} broadcast(sub.9), dimensions={1}
  sub.11 = f32[6,10]{1,0} subtract(x.1, sub.10)
  integer_pow.1 = f32[6,10]{1,0} multiply(sub.11, sub.11)
  reduce_sum.15 = f32[10]{0} reduce(integer_pow.1, constant.5), dimensions={0}, to_apply=region_1.2
  broadcast_in_dim.3 = f32[1,10]{1,0} reshape(reduce_sum.15)
  div.3 = f32[1,10]{1,0} divide(broadcast_in_dim.3, broadcast.3)
  constant.3 = f32[] constant(1e-05)
  broadcast.2 = f32[1,10]{1,0} broadcast(constant.3), dimensions={}
  add.1 = f32[1,10]{1,0} add(div.3, broadcast.2)
  rsqrt.1 = f32[1,10]{1,0} rsqrt(add.1)
  mul.4 = f32[1,10]{1,0} broadcast(rsqrt.1), dimensions={0,1}
  mul.5 = f32[10]{0} reshape(mul.4)
  mul.6 = f32[6,10]{1,0} broadcast(mul.5), dimensions={1}
  ROOT mul.7 = f32[6,10]{1,0} multiply(sub.15, mul.6)
}""",
    "rmsnorm": """HloModule jit__lambda
region_0.1 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}
ENTRY main.2 {
  x.1 = f32[6,10]{1,0} parameter(0)
  mul.5 = f32[6,10]{1,0} multiply(x.1, x.1)
  constant.5 = f32[] constant(0)
  reduce_sum.7 = f32[10]{0} reduce(mul.5, constant.5), dimensions={0}, to_apply=region_0.1
  broadcast_in_dim.1 = f32[1,10]{1,0} reshape(reduce_sum.7)
  constant.4 = f32[] constant(6)
  broadcast.3 = f32[1,10]{1,0} broadcast(constant.4), dimensions={}
  div.1 = f32[1,10]{1,0} divide(broadcast_in_dim.1, broadcast.3)
  constant.3 = f32[] constant(1e-06)
  broadcast.2 = f32[1,10]{1,0} broadcast(constant.3), dimensions={}
  add.1 = f32[1,10]{1,0} add(div.1, broadcast.2)
  rsqrt.1 = f32[1,10]{1,0} rsqrt(add.1)
  mul.6 = f32[1,10]{1,0} broadcast(rsqrt.1), dimensions={0,1}
  mul.7 = f32[10]{0} reshape(mul.6)
  mul.8 = f32[6,10]{1,0} broadcast(mul.7), dimensions={1}
  ROOT mul.9 = f32[6,10]{1,0} multiply(x.1, mul.8)
}""",
}

FORMS = ("softmax", "log_softmax", "layernorm", "rmsnorm")


def normalization_hlo(form: str, dims: tuple, axis: int, etype: str = "f32",
                      keepdims: bool = True) -> str:
    """HLO text of `form` over `axis` of x:<etype>[dims], in JAX's shape: row scalars
    go through the keepdims form [.., 1, ..] and back by reshapes when `keepdims`."""
    rank = len(dims)
    kept = [d for d in range(rank) if d != axis]
    row = f"{etype}[{','.join(map(str, dims))}]"
    scal = f"{etype}[{','.join(str(dims[d]) for d in kept)}]"
    keep = f"{etype}[{','.join('1' if d == axis else str(dims[d]) for d in range(rank))}]"
    bdims = "{" + ",".join(map(str, kept)) + "}"
    lines = [f"x = {row} parameter(0)"]
    n = [0]

    def name(prefix):
        n[0] += 1
        return f"{prefix}{n[0]}"

    def reduce(value, init, reducer):
        r = name("r")
        c = name("c")
        lines.append(f"{c} = {etype}[] constant({init})")
        lines.append(f"{r} = {scal} reduce({value}, {c}), dimensions={{{axis}}}, "
                     f"to_apply={reducer}")
        if keepdims:        # JAX's keepdims form and back
            k = name("k")
            s = name("s")
            lines.append(f"{k} = {keep} reshape({r})")
            lines.append(f"{s} = {scal} reshape({k})")
            return s
        return r

    def scalar_op(op, a, constant=None):
        out = name("v")
        if constant is None:
            lines.append(f"{out} = {scal} {op}({a})")
            return out
        c = name("c")
        cb = name("cb")
        lines.append(f"{c} = {etype}[] constant({constant})")
        lines.append(f"{cb} = {scal} broadcast({c}), dimensions={{}}")
        lines.append(f"{out} = {scal} {op}({a}, {cb})")
        return out

    def back(value):
        out = name("b")
        lines.append(f"{out} = {row} broadcast({value}), dimensions={bdims}")
        return out

    def op(kind, *args):
        out = name("e")
        lines.append(f"{out} = {row} {kind}({', '.join(args)})")
        return out

    if form in ("softmax", "log_softmax"):
        m = reduce("x", "-inf", "max")
        d = op("subtract", "x", back(m))
        e = op("exponential", d)
        s = reduce(e, "0", "add")
        root = op("divide", e, back(s)) if form == "softmax" else \
            op("subtract", d, back(scalar_op("log", s)))
    elif form == "layernorm":
        mean = scalar_op("divide", reduce("x", "0", "add"), dims[axis])
        c = op("subtract", "x", back(mean))
        var = scalar_op("divide", reduce(op("multiply", c, c), "0", "add"), dims[axis])
        root = op("multiply", c, back(scalar_op("rsqrt", scalar_op("add", var, "1e-05"))))
    elif form == "rmsnorm":
        ms = scalar_op("divide", reduce(op("multiply", "x", "x"), "0", "add"), dims[axis])
        root = op("multiply", "x", back(scalar_op("rsqrt", scalar_op("add", ms, "1e-06"))))
    else:
        raise ValueError(form)
    lines[-1] = "ROOT " + lines[-1]
    body = "\n  ".join(lines)
    return f"""HloModule {form}_{axis}
max {{
  a = {etype}[] parameter(0)
  b = {etype}[] parameter(1)
  ROOT m = {etype}[] maximum(a, b)
}}
add {{
  a = {etype}[] parameter(0)
  b = {etype}[] parameter(1)
  ROOT s = {etype}[] add(a, b)
}}
ENTRY e {{
  {body}
}}"""


def fusions(module) -> list:
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def optimized(text: str):
    module = hlo.parse_module(text)
    passes.cpu_pipeline().run(module)
    return module


def assert_one_column_fusion(module, axis: int) -> None:
    kernels = [i for i in module.entry.instructions if i.opcode not in ("parameter",)]
    assert len(kernels) == 1, hlo.print_module(module)
    fusion = kernels[0]
    assert fusion.opcode == "fusion" and fusion_kind(fusion) == "row"
    assert row_dim(fusion) == axis


@pytest.mark.parametrize("form", FORMS)
def test_jax_forms_over_axis_0_are_one_fusion(form):
    assert_one_column_fusion(optimized(JAX_FORMS[form]), 0)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dims,axis", [((6, 10), 0), ((4, 5, 8), 1), ((4, 5, 8), 0),
                                       ((2, 3, 4, 5), 2), ((2, 3, 4, 5), 0), ((1, 7), 0),
                                       ((7, 1), 0)])
@pytest.mark.parametrize("keepdims", [True, False])
def test_forms_over_any_non_minor_axis_are_one_fusion(form, dims, axis, keepdims):
    module = optimized(normalization_hlo(form, dims, axis, keepdims=keepdims))
    if dims[axis] == 1:      # the simplifier removes a reduce over one element: a loop
        assert len([i for i in module.entry.instructions if i.opcode != "parameter"]) == 1
        return
    assert_one_column_fusion(module, axis)


def test_frontend_softmax_over_axis_0_is_one_kernel():
    x = np.zeros((256, 512), np.float32)
    f = jit_compile(lambda v: ops.nn.softmax(v, axis=0))
    module = hlo.parse_module(f.lower(x).compile().as_hlo_text())
    assert_one_column_fusion(module, 0)


def test_the_minor_axis_keeps_the_plain_row_tag():
    module = optimized(normalization_hlo("softmax", (6, 10), 1))
    (fusion,) = fusions(module)
    assert fusion_kind(fusion) == "row" and row_dim(fusion) is None
    assert fusion.attrs["backend_config"].text == '{"fusion_kind":"row"}'


def test_the_tag_survives_printing_and_parsing():
    module = optimized(normalization_hlo("layernorm", (4, 5, 8), 1))
    again = hlo.parse_module(hlo.print_module(module))
    (fusion,) = fusions(again)
    assert fusion_kind(fusion) == "row" and row_dim(fusion) == 1
    assert '"row_dim":1' in hlo.print_module(again)


@pytest.mark.parametrize("etype", ["f16", "bf16"])
def test_narrow_reduces_keep_todays_kernels(etype):
    module = optimized(normalization_hlo("softmax", (6, 10), 0, etype))
    assert all(row_dim(f) is None for f in fusions(module))
    assert len(fusions(module)) > 1


def test_a_root_in_another_layout_is_copied_to_row_major_inside_the_column_form():
    text = normalization_hlo("softmax", (6, 10), 0, keepdims=False)
    text = text.replace("f32[6,10] divide(", "f32[6,10]{0,1} divide(")
    module = optimized(text)
    # The entry's results are row-major (passes/result_layouts.py): the divide in
    # {0,1} is read by a copy to the default layout, and the whole softmax, copy
    # included, is one column form whose root is in the default layout.
    root = module.entry.root
    assert root.opcode == "fusion" and root.shape.has_default_layout()
    assert root.fused_computation.root.opcode == "copy"
    x = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
    assert_close(np.asarray(hlo.evaluate(module, [x])[0]),
                 np.asarray(hlo.evaluate(hlo.parse_module(text), [x])[0]), "softmax")


def test_a_sum_broadcast_along_the_rows_stays_out():
    # x / broadcast(sum over 0) along dimension 0 of a square matrix: not a column
    # normalization (the sum of column j divides row j).
    text = normalization_hlo("softmax", (8, 8), 0, keepdims=False)
    wrong = text.replace("b8 = f32[8,8] broadcast(r6), dimensions={1}",
                         "b8 = f32[8,8] broadcast(r6), dimensions={0}")
    assert wrong != text
    text = wrong
    module = optimized(text)
    for f in fusions(module):
        reduces = [i for i in f.fused_computation.instructions if i.opcode == "reduce"]
        broadcasts = [i for i in f.fused_computation.instructions if i.opcode == "broadcast"
                      and i.operands[0] in reduces]
        assert all(b.dims() == (1,) for b in broadcasts)
    # the result is still right
    x = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    expected = hlo.evaluate(hlo.parse_module(text), [x])[0]
    got = hlo.evaluate(module, [x])[0]
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-6)


def test_explain_notes_the_column_form():
    module = hlo.parse_module(normalization_hlo("softmax", (6, 10), 0))
    row_fusion = RowFusion()
    log = []
    row_fusion.explain_log = log
    assert row_fusion.run(module)
    text = "\n".join(str(entry) for entry in log)
    assert "column form, reducing dimension 0" in text
