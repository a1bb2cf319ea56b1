"""Multi-output fusion merges siblings for the operand they share only where that
operand is a fair part of what they read (multi_output_fusion.SHARED_READ_SHARE): two
reductions of their own large inputs that also read one small vector stay two kernels
(chained through such vectors, a deep model's updates became one huge kernel), while
two reductions of one large input still merge."""
from __future__ import annotations

import pytest

from xlapy import passes
from xlapy.passes import MultiOutputFusion
from xlapy.passes import multi_output_fusion as mof
from tests.passes.helpers import assert_same_results, parse

SUM = """
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def updates(rows: int, layers: int) -> str:
    """`layers` bias updates p_i - reduce(g_i) * v and a loop reading each p_i with the
    next one's: every pair of updates is linked through a small shared vector."""
    params, body, outs = [], [], []
    n = 0
    for i in range(layers):
        params += [f"  p{i} = f32[64] parameter({n})", f"  g{i} = f32[{rows},64] parameter({n + 1})"]
        n += 2
        body += [f"  r{i} = f32[64] reduce(g{i}, z), dimensions={{0}}, to_apply=sum",
                 f"  u{i} = f32[64] subtract(p{i}, r{i})"]
        outs.append(f"u{i}")
    for i in range(layers - 1):
        body += [f"  n{i} = f32[64] negate(p{i})",
                 f"  m{i} = f32[64] multiply(n{i}, p{i + 1})"]
        outs.append(f"m{i}")
    shapes = ", ".join("f32[64]" for _ in outs)
    return "\n".join(["HloModule upd", SUM, "ENTRY e {", *params, "  z = f32[] constant(0)",
                      *body, f"  ROOT t = ({shapes}) tuple({', '.join(outs)})", "}"])


def fusions(module) -> list:
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def most_reduces(module) -> int:
    """The most reduces one fusion of the entry computes."""
    return max(sum(i.opcode == "reduce" for i in f.fused_computation.instructions)
               for f in fusions(module))


def run_fusion(text: str):
    module = parse(text)
    passes.pipeline_from_text("instruction-fusion,multi-output-fusion").run(module)
    return module


@pytest.mark.parametrize("layers", [2, 5])
def test_updates_linked_by_small_vectors_stay_apart(layers):
    text = updates(512, layers)
    module = run_fusion(text)
    assert most_reduces(module) == 1, module.to_text()
    assert_same_results(text, module)


def test_the_rule_is_what_keeps_them_apart(monkeypatch):
    monkeypatch.setattr(mof, "SHARED_READ_SHARE", 10 ** 12)    # any shared read merges
    module = run_fusion(updates(512, 5))
    assert most_reduces(module) > 1


def test_small_reads_alike_still_merge():
    """Where the private reads are as small as the shared one, siblings merge as before."""
    text = updates(2, 3)
    module = run_fusion(text)
    assert most_reduces(module) > 1
    assert_same_results(text, module)


def test_two_reductions_of_one_large_input_merge():
    text = """HloModule two
""" + SUM + """
ENTRY e {
  x = f32[512,64] parameter(0)
  z = f32[] constant(0)
  s = f32[64] reduce(x, z), dimensions={0}, to_apply=sum
  q = f32[512,64] multiply(x, x)
  t = f32[64] reduce(q, z), dimensions={0}, to_apply=sum
  ROOT o = (f32[64], f32[64]) tuple(s, t)
}"""
    merged = run_fusion(text)
    assert len(fusions(merged)) == 1 and len(fusions(merged)[0].shape.leaves()) == 2
    assert MultiOutputFusion().run(merged) is False
    assert_same_results(text, merged)
