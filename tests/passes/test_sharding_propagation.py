"""sharding-propagation: forward and backward through each op kind, the user's annotations
kept, Shardy's form read, conflicts resolved as the pass's docstring says."""
import glob
import os

import pytest

from xlapy import hlo, passes
from xlapy.hlo import parse_sharding

CORPUS = os.path.join(os.path.dirname(__file__), "..", "corpus_devices")
S22 = "{devices=[2,2]<=[4]}"
ROWS = "{devices=[4,1]<=[4]}"
COLS = "{devices=[1,4]<=[4]}"


def propagate(body: str, header="num_partitions=4"):
    m = hlo.parse_module(f"HloModule m, {header}\n{body}")
    passes.make_pass("sharding-propagation").run(m)
    hlo.verify(m)
    return {i.name: i.attrs["sharding"] for i in m.entry.instructions}


def same(s, text):
    return s == parse_sharding(text)


@pytest.mark.parametrize("op, out_shape, expect", [
    ("negate(p)", "f32[8,4]", S22),
    ("transpose(p), dimensions={1,0}", "f32[4,8]", "{devices=[2,2]<=[2,2]T(1,0)}"),
    # the split of 4 carries to the major 2 of (2, 2) (passes/spmd_reshape.py)
    ("reshape(p)", "f32[8,2,2]", "{devices=[2,2,1]<=[4]}"),
    ("reshape(p)", "f32[32]", "{replicated}"),       # two splits in one merged group
    ("reshape(p)", "f32[2,4,4]", "{devices=[2,1,2]<=[4]}"),
    ("slice(p), slice={[0:4], [0:4]}", "f32[4,4]", S22),
    ("reduce(p, z), dimensions={0}, to_apply=add", "f32[4]",
     "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    ("broadcast(p), dimensions={0,2}", "f32[8,3,4]", "{devices=[2,1,2]<=[4]}"),
    ("pad(p, z), padding=0_1x0_0", "f32[9,4]", S22),
    ("concatenate(p, p), dimensions={1}", "f32[8,8]",
     "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
])
def test_forward(op, out_shape, expect):
    got = propagate(f"""add {{ a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b) }}
ENTRY e {{
  p = f32[8,4] parameter(0), sharding={S22}
  z = f32[] constant(0)
  ROOT r = {out_shape} {op}
}}
""")
    assert same(got["r"], expect), got["r"]
    assert got["z"].is_replicated


def test_dot_forward_batch_and_free_dims():
    got = propagate(f"""ENTRY e {{
  a = f32[4,6,8] parameter(0), sharding={{devices=[4,1,1]<=[4]}}
  b = f32[4,8,2] parameter(1)
  ROOT d = f32[4,6,2] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
}}
""")
    assert same(got["d"], "{devices=[4,1,1]<=[4]}")
    assert same(got["b"], "{devices=[4,1,1]<=[4]}")     # backward from the dot


def test_backward_reaches_unannotated_operands():
    got = propagate(f"""ENTRY e {{
  p = f32[8,4] parameter(0)
  q = f32[4,8] parameter(1)
  t = f32[8,4] transpose(q), dimensions={{1,0}}
  ROOT r = f32[8,4] add(p, t), sharding={ROWS}
}}
""")
    assert same(got["p"], ROWS)
    assert same(got["q"], COLS)


def test_user_annotation_wins_and_more_tiled_preferred():
    got = propagate(f"""ENTRY e {{
  p = f32[8,4] parameter(0), sharding={{devices=[2,1,2]<=[4] last_tile_dim_replicate}}
  q = f32[8,4] parameter(1), sharding={S22}
  a = f32[8,4] add(p, q)
  ROOT n = f32[8,4] negate(a), sharding={{replicated}}
}}
""")
    assert same(got["a"], S22)              # more tiles than p's
    assert got["n"].is_replicated           # user's choice kept


def test_operands_win_over_users():
    got = propagate(f"""ENTRY e {{
  p = f32[8,4] parameter(0), sharding={ROWS}
  a = f32[8,4] exponential(p)
  ROOT n = f32[8,4] negate(a), sharding={COLS}
}}
""")
    assert same(got["a"], ROWS)


def test_broadcast_scalar_takes_users_sharding():
    got = propagate(f"""ENTRY e {{
  p = f32[8,4] parameter(0), sharding={ROWS}
  c = f32[] constant(2)
  b = f32[8,4] broadcast(c), dimensions={{}}
  ROOT m = f32[8,4] multiply(p, b)
}}
""")
    assert same(got["b"], ROWS) and same(got["m"], ROWS)


def test_tuple_gte_while():
    got = propagate(f"""cond {{ cs = (f32[8,4]) parameter(0)
  ROOT f = pred[] constant(false) }}
body {{ bs = (f32[8,4]) parameter(0)
  bg = f32[8,4] get-tuple-element(bs), index=0
  ROOT bt = (f32[8,4]) tuple(bg) }}
ENTRY e {{
  p = f32[8,4] parameter(0), sharding={ROWS}
  t = (f32[8,4]) tuple(p)
  w = (f32[8,4]) while(t), condition=cond, body=body
  ROOT g = f32[8,4] get-tuple-element(w), index=0
}}
""")
    assert same(got["g"], ROWS)


def test_module_without_shardings_untouched():
    m = hlo.parse_module("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
                         "  ROOT n = f32[4] negate(p)\n}\n")
    assert not passes.make_pass("sharding-propagation").run(m)
    assert "sharding" not in m.entry.root.attrs


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(CORPUS, "auto_*.global.hlo"))))
def test_corpus_global_modules(path):
    """JAX's text: Shardy annotation calls become annotated copies, everything sharded."""
    m = hlo.parse_module(open(path).read())
    passes.make_pass("sharding-propagation").run(m)
    hlo.verify(m)
    for i in m.entry.instructions:
        assert "sharding" in i.attrs, i.name
        assert i.opcode != "custom-call"
