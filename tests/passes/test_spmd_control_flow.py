"""Sharding propagation and SPMD partitioning through while, conditional and call: the
called computations are partitioned with the shardings their parameters arrive with
(no gathering around the loop), and the per-device programs on 1, 2 and 4 devices
give hlo.evaluate's numbers on the whole arrays."""
import numpy as np
import pytest

from xlapy import hlo, passes
from xlapy.hlo import parse_sharding
from tests.passes.test_spmd_partitioner import shard, unshard

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute")

ADD = """add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b) }
"""


def partition(text, n):
    m = hlo.parse_module(text)
    passes.make_pass("sharding-propagation").run(m)
    params = [p.attrs.get("sharding") for p in m.entry.parameters]
    root_s = m.entry.root.attrs.get("sharding")
    passes.SpmdPartitioner(num_partitions=n).run(m)
    hlo.verify(m)
    for i in m.instructions():
        assert "sharding" not in i.attrs, i.name
    return m, params, root_s


def check(text, n, inputs, rtol=1e-5):
    """Partition on n devices, run, reassemble, compare with the whole module."""
    expect = hlo.evaluate(hlo.parse_module(text), inputs)
    m, in_s, root_s = partition(text, n)
    per_device = [[shard(w, s, n)[d] for w, s in zip(inputs, in_s)] for d in range(n)]
    outs = hlo.evaluate_devices(m, per_device)
    shape = hlo.parse_module(text).entry.root.shape
    if shape.is_tuple:
        for k, es in enumerate(shape.tuple_shapes):
            got = unshard([o[k] for o in outs], root_s.element(k), es.dims)
            np.testing.assert_allclose(got, expect[k], rtol=rtol, atol=1e-5)
    else:
        got = unshard([o[0] for o in outs], root_s, shape.dims)
        np.testing.assert_allclose(got, expect[0], rtol=rtol, atol=1e-5)
    return m


def ops_in(comp):
    return [i.opcode for i in comp.instructions]


def rand(*dims, seed=0):
    return np.random.default_rng(seed).standard_normal(dims).astype(np.float32)


SH = {1: ["{replicated}"],
      2: ["{devices=[2,1]<=[2]}", "{devices=[1,2]<=[2]}", "{replicated}"],
      4: ["{devices=[2,2]<=[4]}", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}",
          "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{devices=[2,2]<=[2,2]T(1,0)}"]}
CASES = [(n, s) for n in (1, 2, 4) for s in SH[n]]


def while_module(n, s, M, K, inner=""):
    """A loop of three steps whose body reduces along the state's columns, takes a dot
    that contracts them and adds both back (collectives inside the body)."""
    return f"""HloModule m, num_partitions={n}
{ADD}cond {{ cs = (f32[{M},{K}], s32[]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=1
  three = s32[] constant(3)
  ROOT lt = pred[] compare(ci, three), direction=LT }}
body {{ bs = (f32[{M},{K}], s32[]) parameter(0)
  bx = f32[{M},{K}] get-tuple-element(bs), index=0
  bi = s32[] get-tuple-element(bs), index=1
  one = s32[] constant(1)
  bj = s32[] add(bi, one)
  z = f32[] constant(0)
  r = f32[{M}] reduce(bx, z), dimensions={{1}}, to_apply=add
  rb = f32[{M},{K}] broadcast(r), dimensions={{0}}
  gram = f32[{M},{M}] dot(bx, bx), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
  g2 = f32[{M},{K}] dot(gram, bx), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t = f32[{M},{K}] tanh(bx){inner}
  s1 = f32[{M},{K}] add(t, rb)
  by = f32[{M},{K}] add(s1, g2)
  sc = f32[{M},{K}] broadcast(z), dimensions={{}}
  ROOT bt = (f32[{M},{K}], s32[]) tuple(by, bj) }}
ENTRY e {{
  p = f32[{M},{K}] parameter(0), sharding={s}
  zero = s32[] constant(0)
  t = (f32[{M},{K}], s32[]) tuple(p, zero)
  w = (f32[{M},{K}], s32[]) while(t), condition=cond, body=body
  ROOT g = f32[{M},{K}] get-tuple-element(w), index=0
}}
"""


@pytest.mark.parametrize("M, K", [(4, 8), (5, 6)])
@pytest.mark.parametrize("n, s", CASES)
def test_while_body_partitioned(n, s, M, K):
    x = rand(M, K) * 0.3
    m = check(while_module(n, s, M, K), n, [x], rtol=1e-4)
    if n > 1 and "devices" in s:
        # the state stays sharded around the loop: nothing gathered in the entry
        assert not set(ops_in(m.entry)) & set(COLLECTIVES), ops_in(m.entry)
        loop = next(i for i in m.entry.instructions if i.opcode == "while")
        local = loop.shape.tuple_shapes[0].dims
        assert local == parse_sharding(s).tile_shape((M, K))


@pytest.mark.parametrize("n, s", [(2, "{devices=[2,1]<=[2]}"), (4, "{devices=[2,2]<=[4]}")])
def test_while_with_annotation_inside_body(n, s):
    # the body asks for another sharding in the middle (with_sharding_constraint)
    text = while_module(n, s, 4, 8, inner=", sharding={devices=[1,%d]<=[%d]}" % (n, n))
    check(text, n, [rand(4, 8) * 0.3], rtol=1e-4)


def test_while_state_sharding_from_body_root():
    """The user annotates the body's root only: the loop state, the entry's parameter and
    the result take it (a fixed point over body parameter, root and the while)."""
    text = while_module(2, "{replicated}", 4, 8).replace(
        "p = f32[4,8] parameter(0), sharding={replicated}", "p = f32[4,8] parameter(0)").replace(
        "ROOT bt = (f32[4,8], s32[]) tuple(by, bj)",
        "ROOT bt = (f32[4,8], s32[]) tuple(by, bj), sharding={{devices=[2,1]<=[2]}, {replicated}}")
    m = hlo.parse_module(text)
    passes.make_pass("sharding-propagation").run(m)
    rows = parse_sharding("{devices=[2,1]<=[2]}")
    body = m.computation("body")
    assert body.parameters[0].attrs["sharding"].elements[0] == rows
    assert m.entry.instruction("w").attrs["sharding"].elements[0] == rows
    assert m.entry.instruction("p").attrs["sharding"] == rows
    assert m.entry.root.attrs["sharding"] == rows
    assert m.computation("cond").parameters[0].attrs["sharding"].elements[0] == rows
    check(text, 2, [rand(4, 8) * 0.3], rtol=1e-4)


def conditional_module(n, s, M, K, pred_form=False):
    branches = (f"""b0 {{ x0 = f32[{M},{K}] parameter(0)
  ROOT n0 = f32[{M},{K}] negate(x0) }}
b1 {{ x1 = f32[{M},{K}] parameter(0)
  z1 = f32[] constant(0)
  r1 = f32[{M}] reduce(x1, z1), dimensions={{1}}, to_apply=add
  ROOT o1 = f32[{M},{K}] broadcast(r1), dimensions={{0}} }}
b2 {{ x2 = f32[{K},{M}] parameter(0)
  ROOT o2 = f32[{M},{K}] transpose(x2), dimensions={{1,0}} }}
""")
    if pred_form:
        head = "  i = pred[] parameter(1)\n"
        call = (f"  ROOT c = f32[{M},{K}] conditional(i, p, p), true_computation=b0, "
                f"false_computation=b1\n")
    else:
        head = "  i = s32[] parameter(1)\n"
        call = (f"  q = f32[{K},{M}] transpose(p), dimensions={{1,0}}\n"
                f"  ROOT c = f32[{M},{K}] conditional(i, p, p, q), "
                f"branch_computations={{b0, b1, b2}}\n")
    return (f"HloModule m, num_partitions={n}\n{ADD}{branches}ENTRY e {{\n"
            f"  p = f32[{M},{K}] parameter(0), sharding={s}\n{head}{call}}}\n")


@pytest.mark.parametrize("M, K", [(4, 8), (5, 6)])
@pytest.mark.parametrize("n, s", CASES)
def test_conditional_branches_partitioned(n, s, M, K):
    x = rand(M, K)
    for b in (0, 1, 2, 7, -1):          # out of range runs the last branch
        check(conditional_module(n, s, M, K), n, [x, np.int32(b)])
    for b in (True, False):
        check(conditional_module(n, s, M, K, pred_form=True), n, [x, np.bool_(b)])


def test_conditional_propagation():
    rows = "{devices=[4,1]<=[4]}"
    m = hlo.parse_module(conditional_module(4, rows, 8, 8))
    passes.make_pass("sharding-propagation").run(m)
    for b in ("b0", "b1"):
        assert m.computation(b).parameters[0].attrs["sharding"] == parse_sharding(rows)
    # the transposed operand arrives split along its columns
    assert m.computation("b2").parameters[0].attrs["sharding"] == \
        parse_sharding("{devices=[1,4]<=[4]}")
    assert m.entry.root.attrs["sharding"] == parse_sharding(rows)
    assert m.entry.instruction("i").attrs["sharding"].is_replicated
    m2, *_ = partition(conditional_module(4, rows, 8, 8), 4)
    assert not set(ops_in(m2.entry)) & set(COLLECTIVES), ops_in(m2.entry)


def test_conditional_result_from_annotated_branch_root():
    text = conditional_module(2, "{replicated}", 4, 6).replace(
        "ROOT n0 = f32[4,6] negate(x0)", "ROOT n0 = f32[4,6] negate(x0), sharding={devices=[1,2]<=[2]}")
    m = hlo.parse_module(text)
    passes.make_pass("sharding-propagation").run(m)
    assert m.entry.root.attrs["sharding"] == parse_sharding("{devices=[1,2]<=[2]}")
    for b in (0, 1, 2):
        check(text, 2, [rand(4, 6), np.int32(b)])


CALL = """HloModule m, num_partitions={n}
f {{ a = f32[{M},{K}] parameter(0)
  b = f32[{K},3] parameter(1)
  d = f32[{M},3] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT t = f32[{M},3] tanh(d) }}
ENTRY e {{
  p = f32[{M},{K}] parameter(0), sharding={s}
  w = f32[{K},3] parameter(1)
  c = f32[{M},3] call(p, w), to_apply=f
  ROOT r = f32[{M},3] negate(c)
}}
"""


@pytest.mark.parametrize("M, K", [(4, 8), (5, 6)])
@pytest.mark.parametrize("n, s", CASES)
def test_call_partitioned(n, s, M, K):
    text = CALL.format(n=n, s=s, M=M, K=K)
    m = check(text, n, [rand(M, K), rand(K, 3, seed=1)])
    assert any(i.opcode == "call" for i in m.entry.instructions)


def test_call_propagation_backward_from_callee_parameter():
    text = CALL.format(n=2, s="{replicated}", M=4, K=8).replace(
        "a = f32[4,8] parameter(0)", "a = f32[4,8] parameter(0), sharding={devices=[2,1]<=[2]}").replace(
        "p = f32[4,8] parameter(0), sharding={replicated}", "p = f32[4,8] parameter(0)")
    m = hlo.parse_module(text)
    passes.make_pass("sharding-propagation").run(m)
    rows = parse_sharding("{devices=[2,1]<=[2]}")
    assert m.entry.instruction("p").attrs["sharding"] == rows
    assert m.entry.instruction("c").attrs["sharding"] == rows     # from the callee's root
    check(text, 2, [rand(4, 8), rand(8, 3, seed=1)])


@pytest.mark.parametrize("n, s", [(2, "{devices=[1,2]<=[2]}"), (4, "{devices=[2,2]<=[4]}")])
def test_conditional_inside_while(n, s):
    text = f"""HloModule m, num_partitions={n}
{ADD}b0 {{ x0 = f32[4,6] parameter(0)
  ROOT n0 = f32[4,6] negate(x0) }}
b1 {{ x1 = f32[4,6] parameter(0)
  z1 = f32[] constant(0)
  r1 = f32[4] reduce(x1, z1), dimensions={{1}}, to_apply=add
  ROOT o1 = f32[4,6] broadcast(r1), dimensions={{0}} }}
cond {{ cs = (f32[4,6], s32[]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=1
  four = s32[] constant(4)
  ROOT lt = pred[] compare(ci, four), direction=LT }}
body {{ bs = (f32[4,6], s32[]) parameter(0)
  bx = f32[4,6] get-tuple-element(bs), index=0
  bi = s32[] get-tuple-element(bs), index=1
  two = s32[] constant(2)
  k = s32[] remainder(bi, two)
  c = f32[4,6] conditional(k, bx, bx), branch_computations={{b0, b1}}
  one = s32[] constant(1)
  bj = s32[] add(bi, one)
  ROOT bt = (f32[4,6], s32[]) tuple(c, bj) }}
ENTRY e {{
  p = f32[4,6] parameter(0), sharding={s}
  zero = s32[] constant(0)
  t = (f32[4,6], s32[]) tuple(p, zero)
  w = (f32[4,6], s32[]) while(t), condition=cond, body=body
  ROOT g = f32[4,6] get-tuple-element(w), index=0
}}
"""
    m = check(text, n, [rand(4, 6) * 0.1])
    assert not set(ops_in(m.entry)) & set(COLLECTIVES), ops_in(m.entry)


@pytest.mark.parametrize("n, s", [(2, "{devices=[2,1]<=[2]}"), (2, "{devices=[1,2]<=[2]}"),
                                  (4, "{devices=[2,2]<=[4]}")])
def test_scan_like_loop(n, s):
    """A loop that reads and rewrites row i of a sharded buffer (dynamic-slice and
    dynamic-update-slice at the counter: computed whole inside the body)."""
    text = f"""HloModule m, num_partitions={n}
cond {{ cs = (f32[5,6], s32[]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=1
  five = s32[] constant(5)
  ROOT lt = pred[] compare(ci, five), direction=LT }}
body {{ bs = (f32[5,6], s32[]) parameter(0)
  bx = f32[5,6] get-tuple-element(bs), index=0
  bi = s32[] get-tuple-element(bs), index=1
  zero = s32[] constant(0)
  row = f32[1,6] dynamic-slice(bx, bi, zero), dynamic_slice_sizes={{1,6}}
  t = f32[1,6] tanh(row)
  c = f32[1,6] add(t, t)
  nx = f32[5,6] dynamic-update-slice(bx, c, bi, zero)
  one = s32[] constant(1)
  bj = s32[] add(bi, one)
  ROOT bt = (f32[5,6], s32[]) tuple(nx, bj) }}
ENTRY e {{
  p = f32[5,6] parameter(0), sharding={s}
  z = s32[] constant(0)
  t = (f32[5,6], s32[]) tuple(p, z)
  w = (f32[5,6], s32[]) while(t), condition=cond, body=body
  ROOT g = f32[5,6] get-tuple-element(w), index=0
}}
"""
    check(text, n, [rand(5, 6)])
