"""spmd-partitioner: the per-device program, run by hlo.evaluate_devices on each device's
tiles, reassembled, equals hlo.evaluate of the annotated module on the whole arrays.
Every resharding pair of a 2-D array on 2x2 (and 4x1) grids, each op kind on 1, 2 and
4 devices, even and uneven sizes, random modules (hypothesis), JAX's auto_* corpus."""
import itertools
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlapy import hlo, passes
from xlapy.hlo import parse_sharding
from xlapy.passes.spmd_reshard import collective_bytes

CORPUS = os.path.join(os.path.dirname(__file__), "..", "corpus_devices")


def shard(whole, s, n):
    """Each device's (zero-padded) tile of `whole` under sharding `s`."""
    out = []
    for d in range(n):
        if s is None or s.kind != "tiled":
            out.append(whole)
            continue
        t, o = s.tile_shape(whole.shape), s.tile_offsets(whole.shape, d)
        piece = whole[tuple(slice(a, a + b) for a, b in zip(o, t))]
        out.append(np.pad(piece, [(0, b - c) for b, c in zip(t, piece.shape)]))
    return out


def unshard(pieces, s, dims):
    if s is None or s.kind != "tiled":
        for p in pieces[1:]:
            np.testing.assert_array_equal(p, pieces[0])   # replicas agree
        return pieces[0]
    whole = np.zeros(dims, pieces[0].dtype)
    for d, p in enumerate(pieces):
        o, lim = s.tile_offsets(dims, d), s.tile_limits(dims, d)
        region = tuple(slice(a, b) for a, b in zip(o, lim))
        got = p[tuple(slice(0, b - a) for a, b in zip(o, lim))]
        whole[region] = got
    return whole


def check(text, n, seed=0, rtol=1e-5):
    """Partition `text` on n devices and compare with the whole evaluation."""
    m = hlo.parse_module(text)
    rng = np.random.default_rng(seed)
    params = m.entry.parameters
    whole = [rng.standard_normal(p.shape.dims).astype(np.float32) for p in params]
    expect = hlo.evaluate(m, whole)
    in_s = [p.attrs.get("sharding") for p in params]
    root_s = m.entry.root.attrs.get("sharding")
    root_shape = m.entry.root.shape
    passes.make_pass("sharding-propagation").run(m)
    if root_s is None:
        root_s = m.entry.root.attrs.get("sharding")
    passes.SpmdPartitioner(num_partitions=n).run(m)
    hlo.verify(m)
    per_device = [[shard(w, s, n)[d] for w, s in zip(whole, in_s)] for d in range(n)]
    outs = hlo.evaluate_devices(m, per_device)
    if root_shape.is_tuple:
        for k, es in enumerate(root_shape.tuple_shapes):
            got = unshard([o[k] for o in outs], root_s.element(k) if root_s else None, es.dims)
            np.testing.assert_allclose(got, expect[k], rtol=rtol, atol=1e-5)
    else:
        got = unshard([o[0] for o in outs], root_s, root_shape.dims)
        np.testing.assert_allclose(got, expect[0], rtol=rtol, atol=1e-5)
    return m


SHARDINGS_2X2 = [
    "{replicated}", "{devices=[2,2]<=[4]}", "{devices=[2,2]<=[2,2]T(1,0)}",
    "{devices=[2,2]3,1,2,0}", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}",
    "{devices=[4,1]3,2,1,0}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
    "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}", "{maximal device=1}",
]


@pytest.mark.parametrize("dims", [(8, 4), (5, 7)])
@pytest.mark.parametrize("src, dst", list(itertools.product(SHARDINGS_2X2, repeat=2)))
def test_reshard_every_pair_2x2(src, dst, dims):
    shape = f"f32[{dims[0]},{dims[1]}]"
    check(f"HloModule m, num_partitions=4\nENTRY e {{\n  p = {shape} parameter(0), "
          f"sharding={src}\n  ROOT c = {shape} copy(p), sharding={dst}\n}}\n", 4)


def test_reshard_uses_the_cheap_collectives():
    def ops(src, dst):
        m = check(f"HloModule m, num_partitions=4\nENTRY e {{\n  p = f32[8,8] parameter(0), "
                  f"sharding={src}\n  ROOT c = f32[8,8] copy(p), sharding={dst}\n}}\n", 4)
        return sorted({i.opcode for i in m.entry.instructions} &
                      {"all-gather", "all-to-all", "collective-permute", "dynamic-slice"})
    assert ops("{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}") == ["all-to-all"]
    assert ops("{devices=[4,1]<=[4]}", "{devices=[4,1]3,2,1,0}") == ["collective-permute"]
    assert ops("{replicated}", "{devices=[2,2]<=[4]}") == ["dynamic-slice"]
    assert ops("{devices=[2,2]<=[4]}", "{replicated}") == ["all-gather"]


SH = {1: ["{replicated}"],
      2: ["{devices=[2,1]<=[2]}", "{devices=[1,2]<=[2]}", "{replicated}"],
      4: ["{devices=[2,2]<=[4]}", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}",
          "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"]}

ADD = """add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b) }
mx { a2 = f32[] parameter(0)
  b2 = f32[] parameter(1)
  ROOT s2 = f32[] maximum(a2, b2) }
"""

OPS = {
    "elementwise": ("f32[{M},{K}]", "f32[{M},{K}]", "t = f32[{M},{K}] exponential(p)\n"
                    "  ROOT r = f32[{M},{K}] add(t, q)"),
    "dot": ("f32[{M},{K}]", "f32[{K},{M}]", "ROOT r = f32[{M},{M}] dot(p, q), "
            "lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"),
    "dot_tn": ("f32[{M},{K}]", "f32[{M},{K}]", "ROOT r = f32[{K},{K}] dot(p, q), "
               "lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}"),
    "reduce_sum": ("f32[{M},{K}]", "f32[{M},{K}]", "z = f32[] constant(0)\n"
                   "  e = f32[{M},{K}] exponential(q)\n"
                   "  ROOT r = f32[{K}] reduce(e, z), dimensions={{0}}, to_apply=add"),
    "reduce_max_all": ("f32[{M},{K}]", "f32[{M},{K}]", "z = f32[] constant(-inf)\n"
                       "  ROOT r = f32[] reduce(p, z), dimensions={{0,1}}, to_apply=mx"),
    "reduce_init5": ("f32[{M},{K}]", "f32[{M},{K}]", "z = f32[] constant(5)\n"
                     "  ROOT r = f32[{M}] reduce(p, z), dimensions={{1}}, to_apply=add"),
    "broadcast": ("f32[{M},{K}]", "f32[{M},{K}]", "ROOT r = f32[{M},3,{K}] broadcast(p), "
                  "dimensions={{0,2}}"),
    "transpose": ("f32[{M},{K}]", "f32[{M},{K}]", "ROOT r = f32[{K},{M}] transpose(p), "
                  "dimensions={{1,0}}"),
    "slice": ("f32[{M},{K}]", "f32[{M},{K}]", "ROOT r = f32[{M},2] slice(p), "
              "slice={{[0:{M}], [1:3]}}"),
    "pad": ("f32[{M},{K}]", "f32[{M},{K}]", "z = f32[] constant(1)\n"
            "  ROOT r = f32[{M},{K2}] pad(p, z), padding=0_0x1_1"),
    "concatenate": ("f32[{M},{K}]", "f32[{M},{K}]", "ROOT r = f32[{M2},{K}] concatenate(p, q), "
                    "dimensions={{0}}"),
    "reshape_fallback": ("f32[{M},{K}]", "f32[{M},{K}]", "ROOT r = f32[{MK}] reshape(p)"),
    "reverse": ("f32[{M},{K}]", "f32[{M},{K}]", "ROOT r = f32[{M},{K}] reverse(p), "
                "dimensions={{0}}"),
}


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("M, K", [(4, 8), (5, 6)])
def test_op_kinds(op, n, M, K):
    ps, qs, body = OPS[op]
    fmt = dict(M=M, K=K, K2=K + 2, M2=2 * M, MK=M * K)
    for a, b in itertools.product(SH[n], repeat=2):
        text = (f"HloModule m, num_partitions={n}\n{ADD}ENTRY e {{\n"
                f"  p = {ps.format(**fmt)} parameter(0), sharding={a}\n"
                f"  q = {qs.format(**fmt)} parameter(1), sharding={b}\n"
                f"  {body.format(**fmt)}\n}}\n")
        check(text, n)


def test_dot_on_contracting_dim_is_local_dot_plus_all_reduce():
    m = check("HloModule m, num_partitions=4\nENTRY e {\n"
              "  p = f32[8,16] parameter(0), sharding={devices=[1,4]<=[4]}\n"
              "  q = f32[16,4] parameter(1), sharding={devices=[4,1]<=[4]}\n"
              "  ROOT r = f32[8,4] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
              " sharding={replicated}\n}\n", 4)
    ops = [i.opcode for i in m.entry.instructions]
    assert ops.count("all-reduce") == 1 and "all-gather" not in ops


def test_dot_on_batch_dim_needs_no_communication():
    m = check("HloModule m, num_partitions=4\nENTRY e {\n"
              "  p = f32[4,3,5] parameter(0), sharding={devices=[4,1,1]<=[4]}\n"
              "  q = f32[4,5,2] parameter(1), sharding={devices=[4,1,1]<=[4]}\n"
              "  ROOT r = f32[4,3,2] dot(p, q), lhs_batch_dims={0}, rhs_batch_dims={0}, "
              "lhs_contracting_dims={2}, rhs_contracting_dims={1}, "
              "sharding={devices=[4,1,1]<=[4]}\n}\n", 4)
    assert collective_bytes(m) == 0


def test_fallback_ops_and_explain_log():
    # lhs dilation: not a halo exchange (passes/spmd_halo.py), computed whole
    text = ("HloModule m, num_partitions=4\nENTRY e {\n"
            "  p = f32[1,8,8,2] parameter(0), sharding={devices=[1,2,2,1]<=[4]}\n"
            "  w = f32[3,3,2,4] parameter(1)\n"
            "  ROOT c = f32[1,15,8,4] convolution(p, w), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x1}, "
            "dim_labels=b01f_01io->b01f, sharding={devices=[1,2,2,1]<=[4]}\n}\n")
    check(text, 4, rtol=1e-4)
    m = hlo.parse_module(text)
    p = passes.SpmdPartitioner()
    p.explain_log = []
    p.run(m)
    assert any("not partitioned natively" in str(note) for note in p.explain_log)


def test_while_state_sharded():
    check("HloModule m, num_partitions=2\n"
          "cond { cs = (f32[4,4], s32[]) parameter(0)\n  ci = s32[] get-tuple-element(cs), index=1\n"
          "  three = s32[] constant(3)\n  ROOT lt = pred[] compare(ci, three), direction=LT }\n"
          "body { bs = (f32[4,4], s32[]) parameter(0)\n  bx = f32[4,4] get-tuple-element(bs), index=0\n"
          "  bi = s32[] get-tuple-element(bs), index=1\n  one = s32[] constant(1)\n"
          "  bj = s32[] add(bi, one)\n  by = f32[4,4] multiply(bx, bx)\n"
          "  ROOT bt = (f32[4,4], s32[]) tuple(by, bj) }\n"
          "ENTRY e {\n  p = f32[4,4] parameter(0), sharding={devices=[2,1]<=[2]}\n"
          "  z = s32[] constant(0)\n  t = (f32[4,4], s32[]) tuple(p, z)\n"
          "  w = (f32[4,4], s32[]) while(t), condition=cond, body=body\n"
          "  ROOT g = f32[4,4] get-tuple-element(w), index=0, sharding={devices=[2,1]<=[2]}\n}\n",
          2, rtol=1e-4)


def test_tuple_root_follows_its_sharding():
    check("HloModule m, num_partitions=4\nENTRY e {\n"
          "  p = f32[8,4] parameter(0), sharding={devices=[4,1]<=[4]}\n"
          "  n = f32[8,4] negate(p)\n"
          "  ROOT t = (f32[8,4], f32[8,4]) tuple(n, p), "
          "sharding={{devices=[1,4]<=[4]}, {replicated}}\n}\n", 4)


def test_needs_a_device_count():
    m = hlo.parse_module("HloModule m\nENTRY e {\n  ROOT p = f32[4] parameter(0), "
                         "sharding={replicated}\n}\n")
    with pytest.raises(passes.PassError, match="num_partitions"):
        passes.make_pass("spmd-partitioner").run(m)


def test_manual_is_refused():
    m = hlo.parse_module("HloModule m, num_partitions=2\nENTRY e {\n  ROOT p = f32[4] "
                         "parameter(0), sharding={manual}\n}\n")
    with pytest.raises(passes.PassError, match="manual"):
        passes.make_pass("spmd-partitioner").run(m)


# --- random modules ------------------------------------------------------------------------

_SH_ANY = SH[4] + ["{replicated}", "{devices=[2,2]<=[2,2]T(1,0)}", "{devices=[4,1]3,1,0,2}"]


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(_SH_ANY), st.sampled_from(_SH_ANY), st.sampled_from(_SH_ANY + [None]),
       st.sampled_from(["add", "multiply", "dot", "reduce", "maximum"]),
       st.integers(3, 6), st.integers(3, 6))
def test_random_modules(sa, sb, sr, op, M, K):
    if op == "dot":
        q, body = f"f32[{K},{M}]", f"r = f32[{M},{M}] dot(ta, q), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
    elif op == "reduce":
        q, body = f"f32[{M},{K}]", f"z = f32[] constant(0)\n  sm = f32[{M},{K}] add(ta, q)\n  r = f32[{K}] reduce(sm, z), dimensions={{0}}, to_apply=add"
    else:
        q, body = f"f32[{M},{K}]", f"r = f32[{M},{K}] {op}(ta, q)"
    rs = "" if sr is None or op == "reduce" else f", sharding={sr}"
    check(f"HloModule m, num_partitions=4\n{ADD}ENTRY e {{\n"
          f"  p = f32[{M},{K}] parameter(0), sharding={sa}\n"
          f"  q = {q} parameter(1), sharding={sb}\n"
          f"  ta = f32[{M},{K}] tanh(p)\n  {body}\n  ROOT o = {('f32[%d]' % K) if op == 'reduce' else ('f32[%d,%d]' % ((M, M) if op == 'dot' else (M, K)))} negate(r){rs}\n}}\n", 4)


# --- JAX's automatically partitioned programs ----------------------------------------------

@pytest.mark.parametrize("name", ["auto_matmul", "auto_matmul_chain_2x2", "auto_reduce_2x2",
                                  "auto_reshard"])
def test_corpus_auto(name):
    m = hlo.parse_module(open(os.path.join(CORPUS, f"{name}.global.hlo")).read())
    passes.make_pass("sharding-propagation").run(m)
    passes.make_pass("spmd-partitioner").run(m)
    hlo.verify(m)
    z = np.load(os.path.join(CORPUS, f"{name}.npz"))
    n = m.num_partitions
    args = [[z[f"d{d}_arg{i}"] for i in range(len(m.entry.parameters))] for d in range(n)]
    outs = hlo.evaluate_devices(m, args)
    for d in range(n):
        for j, o in enumerate(outs[d]):
            np.testing.assert_allclose(o, z[f"d{d}_out{j}"], rtol=1e-5, atol=1e-5)
    xla = hlo.parse_module(open(os.path.join(CORPUS, f"{name}.hlo")).read())
    print(f"{name}: collective bytes per device: xlapy {collective_bytes(m)}, "
          f"XLA {collective_bytes(xla)}")
