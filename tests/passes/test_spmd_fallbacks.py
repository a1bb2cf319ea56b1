"""The SPMD partitioner's fallbacks and the ops it partitions on the dimensions they
change (tests/passes/spmd_op_table.py: uneven reshapes, gather, scatter, sort, dynamic
slices, iota, TopK, variadic and non-identity reduces, reduce-window with a non-identity
init, select-and-scatter, convolutions with lhs dilation / kernel reversal / batch or
feature groups, interior and negative padding, strided slices, ...): on 2 and 4 devices,
for the operands and the result sharded in every way drawn, the partitioned program
gives hlo.evaluate's numbers on the whole arrays. A table (each kind, fixed draws) and
hypothesis over the same kinds with a resharded operand in front."""
import re
import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlapy import hlo, passes
from tests.passes.spmd_op_table import COMPUTATIONS, KINDS, draw, fill
from tests.passes.test_spmd_partitioner import shard, unshard


def shardings(rank: int, n: int) -> list[str]:
    """Shardings of a rank-`rank` array on n devices: each dimension split over all
    devices (two device orders), over half of them with the rest replicating, 2x2."""
    if rank == 0:
        return [None]
    out = ["{replicated}"]
    for d in range(rank):
        t = [1] * rank
        t[d] = n
        dims = ",".join(map(str, t))
        out.append(f"{{devices=[{dims}]<=[{n}]}}")
        out.append(f"{{devices=[{dims}]{','.join(map(str, reversed(range(n))))}}}")
        if n == 4:
            t[d] = 2
            out.append(f"{{devices=[{','.join(map(str, t))},2]<=[4] last_tile_dim_replicate}}")
    if n == 4 and rank >= 2:
        t = ",".join(map(str, [2, 2] + [1] * (rank - 2)))
        out += [f"{{devices=[{t}]<=[4]}}", f"{{devices=[{t}]<=[2,2]T(1,0)}}"]
    return out


def _dims(type_text: str) -> tuple[int, ...]:
    inner = re.match(r"\w+\[([\d,]*)\]", type_text).group(1)
    return tuple(int(x) for x in inner.split(",") if x)


def build(kind: str, M: int, K: int, n: int, param_s, result_s, pre_s=None) -> str:
    """The module of one kind; `pre_s`: p goes through tanh resharded to it first."""
    k = KINDS[kind]
    lines = [f"  p0 = f32[{M},{K}] parameter(0)" + (f", sharding={param_s[0]}" if param_s[0] else "")]
    if pre_s is not None:
        lines.append(f"  p = f32[{M},{K}] tanh(p0), sharding={pre_s}")
    else:
        lines.append(f"  p = f32[{M},{K}] copy(p0)")
    for i, (t, _) in enumerate(k.params):
        s = param_s[i + 1]
        lines.append(f"  {'quv'[i]} = {fill(t, M, K)} parameter({i + 1})" +
                     (f", sharding={s}" if s else ""))
    lines.append("  " + fill(k.body, M, K))
    lines.append(f"  ROOT o = {fill(k.out, M, K)} negate(r)" +
                 (f", sharding={result_s}" if result_s else ""))
    return (f"HloModule m, num_partitions={n}\n{COMPUTATIONS}ENTRY e {{\n" + "\n".join(lines)
            + "\n}\n")


def inputs_for(kind, M, K, rng):
    k = KINDS[kind]
    return [draw("f32", (M, K), M, K, rng)] + [draw(spec, _dims(fill(t, M, K)), M, K, rng)
                                               for t, spec in k.params]


def check(text, n, inputs):
    expect = hlo.evaluate(hlo.parse_module(text), inputs)[0]
    m = hlo.parse_module(text)
    passes.make_pass("sharding-propagation").run(m)
    in_s = [p.attrs.get("sharding") for p in m.entry.parameters]
    root_s, dims = m.entry.root.attrs.get("sharding"), m.entry.root.shape.dims
    passes.SpmdPartitioner(num_partitions=n).run(m)
    hlo.verify(m)
    per_device = [[shard(w, s, n)[d] for w, s in zip(inputs, in_s)] for d in range(n)]
    outs = hlo.evaluate_devices(m, per_device)
    got = unshard([o[0] for o in outs], root_s, dims)
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-4, err_msg=text)


def _types(kind, M, K):
    return [f"f32[{M},{K}]"] + [fill(t, M, K) for t, _ in KINDS[kind].params]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("M, K", [(4, 6), (5, 7)])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_kind(kind, M, K, n):
    rng = np.random.default_rng(zlib.crc32(f"{kind} {M} {K} {n}".encode()))
    types = _types(kind, M, K)
    out_opts = shardings(len(_dims(fill(KINDS[kind].out, M, K))), n)
    for draw_i in range(3):
        ps = []
        for t in types:
            opts = shardings(len(_dims(t)), n)
            ps.append(opts[(draw_i * 3 + 1) % len(opts)] if draw_i else opts[-1])
        rs = [None, out_opts[-1], out_opts[1 % len(out_opts)]][draw_i]
        check(build(kind, M, K, n, ps, rs), n, inputs_for(kind, M, K, rng))


@st.composite
def cases(draw_):
    kind = draw_(st.sampled_from(sorted(KINDS)))
    M, K = draw_(st.integers(3, 6)), draw_(st.integers(3, 6))
    n = draw_(st.sampled_from([2, 4]))
    ps = [draw_(st.sampled_from(shardings(len(_dims(t)), n))) for t in _types(kind, M, K)]
    out_opts = shardings(len(_dims(fill(KINDS[kind].out, M, K))), n)
    rs = draw_(st.sampled_from(out_opts + [None]))
    pre = draw_(st.sampled_from(shardings(2, n) + [None]))
    return kind, M, K, n, ps, rs, pre, draw_(st.integers(0, 2**16))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_random_annotated_modules(case):
    kind, M, K, n, ps, rs, pre, seed = case
    check(build(kind, M, K, n, ps, rs, pre), n, inputs_for(kind, M, K, np.random.default_rng(seed)))


def test_fallbacks_are_named_in_the_explain_log():
    text = build("sort_dim0", 4, 6, 2, ["{devices=[1,2]<=[2]}"], "{devices=[1,2]<=[2]}")
    m = hlo.parse_module(text)
    passes.make_pass("sharding-propagation").run(m)
    p = passes.SpmdPartitioner(num_partitions=2)
    p.explain_log = []
    p.run(m)
    assert any("not partitioned natively" in str(note) for note in p.explain_log)
