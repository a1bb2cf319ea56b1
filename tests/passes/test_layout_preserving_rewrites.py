"""Rewrites that put one value where another was declared keep the declared layout.

A `bitcast` means "these bytes, read as my shape and layout": its value depends on the
physical layout of its operand. When a pass replaces an instruction I (layout L_I) by a
value V stored in another layout L_V -- gte(tuple(v)) -> v, a callee parameter bound to
its argument, a fused parameter replaced by the fused producer, a fusion's root exposed
through a get-tuple-element -- a bitcast reading I must still read L_I's bytes
(issue 14). Each case below reads such a boundary through a bitcast to a flat f32[N],
for value / declared layouts over {0,1}, {1,0}, {2,0,1}, {0,2,1}, {2,1,0} (every pair of
one rank), runs the pass(es), and checks that the evaluator gives the same numbers
before and after, that the rewrite happened, and that the CPU backend compiling the
pass's output (no further passes) agrees with the evaluator. Where all layouts are the
default (HLO from JAX), no pass may add a copy.
"""
from __future__ import annotations

from itertools import product
from string import Template
from textwrap import dedent

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.passes import HloPassFix, pipeline_from_text
from xlapy.passes.fusion_utils import add_output, fuse_producer, merge_siblings
from tests.corpus_util import assert_close

GROUPS = [((3, 4), [(0, 1), (1, 0)]),
          ((2, 3, 4), [(2, 0, 1), (0, 2, 1), (2, 1, 0)])]
# (dims, S: the value's layout, D: the declared layout), every ordered pair of one rank.
VARIANTS = [(dims, s, d) for dims, layouts in GROUPS for s, d in product(layouts, layouts)]


def _layout_id(layout) -> str:
    return "{" + ",".join(map(str, layout)) + "}"


VARIANT_IDS = [f"{'x'.join(map(str, dims))}-S{_layout_id(s)}-D{_layout_id(d)}"
               for dims, s, d in VARIANTS]


def shape_text(dims, layout=None) -> str:
    layout = tuple(range(len(dims) - 1, -1, -1)) if layout is None else layout
    return f"f32[{','.join(map(str, dims))}]{_layout_id(layout)}"


def substitute(template: str, dims, s, d, **extra) -> str:
    """$S, $D: the value's and the declared layout; $X row-major; $F the flat f32[N]."""
    n = int(np.prod(dims))
    rank = len(dims)
    return Template(dedent(template)).substitute(
        S=shape_text(dims, s), D=shape_text(dims, d), X=shape_text(dims), N=n,
        F=f"f32[{n}]{{0}}", IDENTITY=_layout_id(range(rank)),
        FULL="{" + ",".join(f"[0:{k}]" for k in dims) + "}",
        NOPAD="x".join(["0_0"] * rank), **extra)


def distinct(dims, seed=0) -> np.ndarray:
    """Distinct values: an element read from the wrong place shows."""
    n = int(np.prod(dims))
    return (np.random.default_rng(seed).permutation(n) + 1).astype(np.float32).reshape(dims)


def count(module: hlo.HloModule, opcode: str) -> int:
    return sum(1 for c in module.computations for i in c.instructions if i.opcode == opcode)


def check(text: str, rewrite, dims, done=None, default=False, seed=0) -> hlo.HloModule:
    """Runs `rewrite` (pass names "a,b", or a function of the module) on `text`; the
    evaluator gives the same before and after, `done(after)` holds (the rewrite under
    test happened), the backend agrees on the rewritten module, and with `default`
    (every layout row-major) no copy was added."""
    before = hlo.parse_module(text)
    hlo.verify(before)
    after = hlo.parse_module(text)
    if isinstance(rewrite, str):
        HloPassFix(pipeline_from_text(rewrite, verify_each=True)).run(after)
    else:
        rewrite(after)
    hlo.verify(after)
    printed = hlo.print_module(after)
    if done is not None:
        assert done(after), printed
    if default:
        assert count(after, "copy") <= count(before, "copy"), printed
    args = [distinct(p.shape.dims, seed + k) for k, p in enumerate(before.entry.parameters)]
    expected = hlo.evaluate(before, args)
    actual = hlo.evaluate(after, args)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_array_equal(a, e, err_msg=f"evaluator, output {i}\n{printed}")
    compiled = backend_cpu.compile(hlo.parse_module(printed),
                                   backend_cpu.CompileOptions(pipeline=None, disk_cache=False))
    for i, (a, e) in enumerate(zip(compiled.run(*args), expected)):
        assert_close(a, np.asarray(e), f"backend, output {i}\n{printed}")
    return after


def no_opcode(opcode):
    return lambda m: count(m, opcode) == 0


# --- tuple simplifier: gte(tuple(x)) -> x ----------------------------------------------------

GTE_OF_TUPLE = """
HloModule gte_of_tuple

ENTRY e {
  x = $X parameter(0)
  t = $S copy(x)
  tp = ($D) tuple(t)
  g = $D get-tuple-element(tp), index=0
  b = $F bitcast(g)
  ROOT n = $F negate(b)
}
"""

GTE_OF_NESTED_TUPLE = """
HloModule gte_of_nested_tuple

ENTRY e {
  x = $X parameter(0)
  t = $S copy(x)
  u = $D negate(x)
  inner = ($S, $D) tuple(t, u)
  outer = (($S, $D), $X) tuple(inner, x)
  g = ($D, $S) get-tuple-element(outer), index=0
  g0 = $D get-tuple-element(g), index=0
  g1 = $S get-tuple-element(g), index=1
  b0 = $F bitcast(g0)
  b1 = $F bitcast(g1)
  ROOT r = ($F, $F) tuple(b0, b1)
}
"""

# tuple(gte(t, 0), gte(t, 1)) -> t only where t is stored as the tuple declares.
TUPLE_OF_GTES = """
HloModule tuple_of_gtes

ENTRY e {
  x = $X parameter(0)
  t = $S copy(x)
  u = $D negate(x)
  tp = ($S, $D) tuple(t, u)
  ob = ($S, $D) opt-barrier(tp)
  g0 = $S get-tuple-element(ob), index=0
  g1 = $D get-tuple-element(ob), index=1
  r = ($D, $S) tuple(g0, g1)
  h = $D get-tuple-element(r), index=0
  b = $F bitcast(h)
  ROOT o = ($F, ($D, $S)) tuple(b, r)
}
"""


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("template", [GTE_OF_TUPLE, GTE_OF_NESTED_TUPLE, TUPLE_OF_GTES],
                         ids=["gte", "nested", "tuple-of-gtes"])
def test_tuple_simplifier(template, dims, s, d):
    default = s == d == tuple(range(len(dims) - 1, -1, -1))

    def done(m):     # every get-tuple-element of a tuple instruction is forwarded
        return not any(i.opcode == "get-tuple-element" and i.operands[0].opcode == "tuple"
                       for i in m.entry.instructions)
    check(substitute(template, dims, s, d), "tuple-simplifier,dce", dims, done, default)


# --- call inliner ---------------------------------------------------------------------------

CALL_PARAMETER = """
HloModule call_parameter

f {
  p = $D parameter(0)
  b = $F bitcast(p)
  ROOT n = $F negate(b)
}

ENTRY e {
  x = $X parameter(0)
  t = $S copy(x)
  ROOT c = $F call(t), to_apply=f
}
"""

CALL_RESULT = """
HloModule call_result

f {
  p = $X parameter(0)
  ROOT t = $S copy(p)
}

ENTRY e {
  x = $X parameter(0)
  c = $D call(x), to_apply=f
  b = $F bitcast(c)
  ROOT n = $F negate(b)
}
"""

# Called twice (the callee is cloned), a tuple parameter whose elements differ.
CALL_TUPLE_CLONED = """
HloModule call_tuple_cloned

f {
  p = ($D, $S) parameter(0)
  a = $D get-tuple-element(p), index=0
  c = $S get-tuple-element(p), index=1
  ba = $F bitcast(a)
  bc = $F bitcast(c)
  s = $F subtract(ba, bc)
  ROOT fr = ($F, $D) tuple(s, a)
}

ENTRY e {
  x = $X parameter(0)
  t = $S copy(x)
  u = $D negate(x)
  tp = ($S, $D) tuple(t, u)
  tq = ($D, $S) tuple(u, t)
  c0 = ($F, $S) call(tp), to_apply=f
  c1 = ($F, $S) call(tq), to_apply=f
  g0 = $F get-tuple-element(c0), index=0
  g1 = $S get-tuple-element(c1), index=1
  g10 = $F get-tuple-element(c1), index=0
  b1 = $F bitcast(g1)
  ROOT r = ($F, $F, $F) tuple(g0, g10, b1)
}
"""


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("template", [CALL_PARAMETER, CALL_RESULT, CALL_TUPLE_CLONED],
                         ids=["parameter", "result", "tuple-cloned"])
def test_call_inliner(template, dims, s, d):
    default = s == d == tuple(range(len(dims) - 1, -1, -1))
    text = substitute(template, dims, s, d)
    check(text, "call-inliner", dims, no_opcode("call"), default)
    check(text, "call-inliner,tuple-simplifier,dce", dims, no_opcode("call"), default)


# --- instruction fusion: a producer replaces a fused parameter ------------------------------

FUSED_PARAMETER = """
HloModule fused_parameter

fc {
  p = $D parameter(0)
  b = $F bitcast(p)
  ROOT n = $F negate(b)
}

ENTRY e {
  x = $X parameter(0)
  t = $S copy(x)
  ROOT f = $F fusion(t), kind=kLoop, calls=fc
}
"""

# The producer has another user: it is cloned into the fusion.
FUSED_PARAMETER_CLONED = """
HloModule fused_parameter_cloned

fc {
  p = $D parameter(0)
  b = $F bitcast(p)
  ROOT n = $F negate(b)
}

ENTRY e {
  x = $X parameter(0)
  t = $S negate(x)
  f = $F fusion(t), kind=kLoop, calls=fc
  bt = $F bitcast(t)
  ROOT r = ($F, $F) tuple(f, bt)
}
"""

# The producer reads an operand the fusion already has, through a parameter declared
# in another layout: the moved bitcast must read the operand's bytes, not the parameter's.
FUSED_OPERAND_SHARED = """
HloModule fused_operand_shared

fc {
  p = $D parameter(0)
  q = $F parameter(1)
  b = $F bitcast(p)
  ROOT a = $F subtract(b, q)
}

ENTRY e {
  x = $S parameter(0)
  u = $F bitcast(x)
  ROOT f = $F fusion(x, u), kind=kLoop, calls=fc
}
"""


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("template", [FUSED_PARAMETER, FUSED_PARAMETER_CLONED,
                                      FUSED_OPERAND_SHARED],
                         ids=["moved", "cloned", "shared-operand"])
def test_instruction_fusion(template, dims, s, d):
    default = s == d == tuple(range(len(dims) - 1, -1, -1))

    def done(m):     # the producer went into the fusion: the fusion reads only parameters
        f = next(i for i in m.entry.instructions if i.opcode == "fusion")
        return all(op.opcode == "parameter" for op in f.operands)
    check(substitute(template, dims, s, d), "instruction-fusion", dims, done, default)


# --- multi-output and horizontal fusion -------------------------------------------------------

# A loop fusion (declared S, root D) also read by a bitcast is fused into its consumer
# (parameter declared D) and kept as an extra output.
PRODUCER_KEPT_AS_OUTPUT = """
HloModule producer_kept

fp {
  q = $X parameter(0)
  ROOT e = $D negate(q)
}

fc {
  p = $D parameter(0)
  b = $F bitcast(p)
  rs = $X reshape(b)
  ROOT n = $X abs(rs)
}

ENTRY e {
  x = $X parameter(0)
  a = $S fusion(x), kind=kLoop, calls=fp
  c = $X fusion(a), kind=kLoop, calls=fc
  ba = $F bitcast(a)
  ROOT r = ($X, $F) tuple(c, ba)
}
"""

# Siblings reading x: the second declares S, its root and parameter are D.
SIBLINGS = """
HloModule siblings

f1 {
  a1 = $X parameter(0)
  ROOT n1 = $X negate(a1)
}

f2 {
  a = $D parameter(0)
  b = $F bitcast(a)
  rs = $X reshape(b)
  ROOT n2 = $D abs(rs)
}

ENTRY e {
  x = $X parameter(0)
  s1 = $X fusion(x), kind=kLoop, calls=f1
  s2 = $S fusion(x), kind=kLoop, calls=f2
  b2 = $F bitcast(s2)
  ROOT r = ($X, $F) tuple(s1, b2)
}
"""

# Independent kernels (horizontal fusion): an unfused negate and the fusion of SIBLINGS.
INDEPENDENT = """
HloModule independent

f2 {
  a = $D parameter(0)
  b = $F bitcast(a)
  rs = $X reshape(b)
  ROOT n2 = $D abs(rs)
}

ENTRY e {
  x = $X parameter(0)
  y = $X parameter(1)
  s1 = $X negate(y)
  s2 = $S fusion(x), kind=kLoop, calls=f2
  b2 = $F bitcast(s2)
  ROOT r = ($X, $F) tuple(s1, b2)
}
"""


def _fusions(m) -> int:
    return count(m, "fusion")


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
def test_multi_output_fusion_producer_consumer(dims, s, d):
    default = s == d == tuple(range(len(dims) - 1, -1, -1))
    check(substitute(PRODUCER_KEPT_AS_OUTPUT, dims, s, d), "multi-output-fusion", dims,
          lambda m: _fusions(m) == 1, default)


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
def test_multi_output_fusion_siblings(dims, s, d):
    default = s == d == tuple(range(len(dims) - 1, -1, -1))
    check(substitute(SIBLINGS, dims, s, d), "multi-output-fusion", dims,
          lambda m: _fusions(m) == 1, default)


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
def test_horizontal_fusion(dims, s, d):
    default = s == d == tuple(range(len(dims) - 1, -1, -1))
    check(substitute(INDEPENDENT, dims, s, d), "horizontal-fusion", dims,
          lambda m: _fusions(m) == 1 and count(m, "negate") == 1, default)


# --- fusion building blocks, called directly ----------------------------------------------------

BLOCKS = """
HloModule blocks

fp {
  q = $X parameter(0)
  ROOT e = $D negate(q)
}

fc {
  p = $D parameter(0)
  b = $F bitcast(p)
  rs = $X reshape(b)
  ROOT n = $X abs(rs)
}

ENTRY e {
  x = $X parameter(0)
  a = $S fusion(x), kind=kLoop, calls=fp
  c = $X fusion(a), kind=kLoop, calls=fc
  ba = $F bitcast(a)
  bc = $F bitcast(c)
  ROOT r = ($F, $F) tuple(bc, ba)
}
"""


def _by_name(m, name):
    return m.entry.instruction(name)


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("block", ["fuse-fusion-keep-output", "add-output", "merge-siblings"])
def test_fusion_building_blocks(block, dims, s, d):
    """fuse_producer of a fusion kept as an output, add_output on a single-output
    fusion whose root is in another layout than the fusion, merge_siblings of such a
    fusion: the users of the old values read their declared layouts."""
    def rewrite(m):
        a, c = _by_name(m, "a"), _by_name(m, "c")
        if block == "fuse-fusion-keep-output":
            fuse_producer(c, a, keep_output=True)
        elif block == "add-output":
            add_output(a, a.fused_computation.root)
        else:
            merge_siblings(c, a)
    default = s == d == tuple(range(len(dims) - 1, -1, -1))
    text = substitute(BLOCKS, dims, s, d)
    if block == "merge-siblings":    # siblings: c must not read a
        text = text.replace("c = $X fusion(a)".replace("$X", shape_text(dims)),
                            f"c = {shape_text(dims)} fusion(x)")
    check(text, rewrite, dims, None, default)


# --- row fusion: parameters read in the layouts of their operands ---------------------------

SOFTMAX = """
HloModule softmax

mx {
  ma = f32[] parameter(0)
  mc = f32[] parameter(1)
  ROOT mm = f32[] maximum(ma, mc)
}

ad {
  aa = f32[] parameter(0)
  ab = f32[] parameter(1)
  ROOT as = f32[] add(aa, ab)
}

ENTRY e {
  x = $S parameter(0)
  y = $D copy(x)
  ninf = f32[] constant(-inf)
  m = $R reduce(y, ninf), dimensions={$LAST}, to_apply=mx
  mb = $D broadcast(m), dimensions={$KEEP}
  z = $D subtract(y, mb)
  ez = $D exponential(z)
  zero = f32[] constant(0)
  s = $R reduce(ez, zero), dimensions={$LAST}, to_apply=ad
  sb = $D broadcast(s), dimensions={$KEEP}
  o = $D divide(ez, sb)
  b = $F bitcast(o)
  ROOT n = $F negate(b)
}
"""


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
def test_row_fusion(dims, s, d):
    rank = len(dims)
    text = substitute(SOFTMAX, dims, s, d, R=f"f32[{','.join(map(str, dims[:-1]))}]",
                      LAST=rank - 1, KEEP=",".join(map(str, range(rank - 1))))
    before = hlo.parse_module(text)
    after = hlo.parse_module(text)
    pipeline_from_text("row-fusion", verify_each=True).run(after)
    args = [np.random.default_rng(0).standard_normal(dims).astype(np.float32)]
    for i, (a, e) in enumerate(zip(hlo.evaluate(after, args), hlo.evaluate(before, args))):
        assert_close(a, e, f"output {i}")
    compiled = backend_cpu.compile(hlo.parse_module(hlo.print_module(after)),
                                   backend_cpu.CompileOptions(pipeline=None, disk_cache=False))
    for i, (a, e) in enumerate(zip(compiled.run(*args), hlo.evaluate(before, args))):
        assert_close(a, np.asarray(e), f"backend, output {i}")


# --- fusion inliner: a fusion whose body reads a dot ------------------------------------------

READS_A_DOT = """
HloModule reads_a_dot

fd {
  p = $D parameter(0)
  wp = f32[$N,2]{1,0} parameter(1)
  b = $F bitcast(p)
  d = f32[2]{0} dot(b, wp), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT n = f32[2]{0} negate(d)
}

ENTRY e {
  x = $X parameter(0)
  w = f32[$N,2]{1,0} parameter(1)
  t = $S copy(x)
  ROOT f = f32[2]{0} fusion(t, w), kind=kOutput, calls=fd
}
"""


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
def test_fusion_inliner(dims, s, d):
    default = s == d == tuple(range(len(dims) - 1, -1, -1))
    text = substitute(READS_A_DOT, dims, s, d)
    before = hlo.parse_module(text)
    after = hlo.parse_module(text)
    pipeline_from_text("fusion-inliner", verify_each=True).run(after)
    assert count(after, "fusion") == 0
    if default:
        assert count(after, "copy") == count(before, "copy")
    args = [distinct(dims), np.random.default_rng(1).standard_normal(
        (int(np.prod(dims)), 2)).astype(np.float32)]
    expected = hlo.evaluate(before, args)
    for i, (a, e) in enumerate(zip(hlo.evaluate(after, args), expected)):
        assert_close(a, e, f"output {i}")
    compiled = backend_cpu.compile(hlo.parse_module(hlo.print_module(after)),
                                   backend_cpu.CompileOptions(pipeline=None, disk_cache=False))
    for i, (a, e) in enumerate(zip(compiled.run(*args), expected)):
        assert_close(a, np.asarray(e), f"backend, output {i}")


# --- CSE and the algebraic simplifier: forwarding only within one layout ----------------------

CSE_COPIES = """
HloModule cse_copies

ENTRY e {
  x = $X parameter(0)
  c1 = $S copy(x)
  c2 = $D copy(x)
  b1 = $F bitcast(c1)
  b2 = $F bitcast(c2)
  ROOT r = ($F, $F) tuple(b1, b2)
}
"""


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
def test_cse_keeps_instructions_of_different_layouts(dims, s, d):
    after = check(substitute(CSE_COPIES, dims, s, d), "cse,dce", dims)
    assert count(after, "copy") == (1 if s == d else 2)


# Each `c = $D <op of t>` is the identity on values; forwarding t (layout S) would make
# the bitcast read S's bytes. The simplifier forwards only when the layouts are equal.
IDENTITIES = {
    "copy": "c = $D copy(t)",
    "convert": "c = $D convert(t)",
    "reshape": "c = $D reshape(t)",
    "bitcast": "c = $D bitcast(t)",
    "transpose": "c = $D transpose(t), dimensions=$IDENTITY",
    "slice": "c = $D slice(t), slice=$FULL",
    "pad": "c = $D pad(t, zero), padding=$NOPAD",
    "concatenate": "c = $D concatenate(t), dimensions={0}",
    "broadcast": "c = $D broadcast(t), dimensions=$IDENTITY",
    "reverse": "c = $D reverse(t), dimensions={}",
    "multiply-one": "c = $D multiply(t, ones)",
    "add-minus-zero": "c = $D add(t, mzeros)",
    "negate-negate": "c = $D negate(nt)",
    "power-one": "c = $D power(t, ones)",
    "maximum-minus-inf": "c = $D maximum(t, minfs)",
}

SIMPLIFY = """
HloModule simplify

ENTRY e {
  x = $X parameter(0)
  t = $S copy(x)
  nt = $S negate(t)
  zero = f32[] constant(0)
  one = f32[] constant(1)
  ones = $S broadcast(one), dimensions={}
  mzero = f32[] constant(-0)
  mzeros = $S broadcast(mzero), dimensions={}
  minf = f32[] constant(-inf)
  minfs = $S broadcast(minf), dimensions={}
  $IDENTITY_OP
  b = $F bitcast(c)
  ROOT n = $F negate(b)
}
"""


@pytest.mark.parametrize("dims,s,d", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("op", list(IDENTITIES))
def test_algebraic_simplifier_forwards_within_one_layout(op, dims, s, d):
    text = SIMPLIFY.replace("$IDENTITY_OP", IDENTITIES[op])
    after = check(substitute(text, dims, s, d), "algebraic-simplifier,dce", dims)
    b = after.entry.instruction("b")
    if s == d:    # the identity is gone: the bitcast reads t (or x, t's copy gone too)
        assert b.operands[0].name in ("t", "x"), hlo.print_module(after)


# --- layouts that store the same bytes ----------------------------------------------------------

DEGENERATE = """
HloModule degenerate

f {
  p = f32[1,4,1]{0,1,2} parameter(0)
  b = f32[4]{0} bitcast(p)
  ROOT n = f32[4]{0} negate(b)
}

ENTRY e {
  x = f32[1,4,1]{2,1,0} parameter(0)
  t = f32[1,4,1]{2,0,1} copy(x)
  tp = (f32[1,4,1]{1,2,0}) tuple(t)
  g = f32[1,4,1]{0,2,1} get-tuple-element(tp), index=0
  ROOT c = f32[4]{0} call(g), to_apply=f
}
"""


def test_layouts_differing_in_size_one_dimensions_need_no_copy():
    after = check(DEGENERATE, "call-inliner,tuple-simplifier,dce", (1, 4, 1),
                  lambda m: count(m, "call") == 0 and count(m, "tuple") == 0)
    assert count(after, "copy") == 1      # t only
