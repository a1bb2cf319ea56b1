"""Horizontal fusion packs independent small loops into groups of at most
horizontal_fusion.MAX_GROUP_INSTRUCTIONS fused instructions: a deep model's per-layer
small results make several alike kernels (one body compiled once) rather than one
kernel whose body grows with the depth."""
from __future__ import annotations

import pytest

from xlapy import passes
from xlapy.passes import horizontal_fusion as hf
from tests.passes.helpers import assert_same_results, parse


def stats_module(layers: int) -> str:
    """Per layer: a small statistics chain (mean, centred square, scale) of its input."""
    params, body, outs = [], [], []
    for i in range(layers):
        params.append(f"  x{i} = f32[8,16] parameter({i})")
        body += [f"  c{i} = f32[] constant({i + 1})",
                 f"  b{i} = f32[8,16] broadcast(c{i}), dimensions={{}}",
                 f"  s{i} = f32[8,16] subtract(x{i}, b{i})",
                 f"  q{i} = f32[8,16] multiply(s{i}, s{i})",
                 f"  e{i} = f32[8,16] exponential(q{i})",
                 f"  r{i} = f32[8,16] divide(e{i}, b{i})",
                 f"  t{i} = f32[8,16] tanh(r{i})",
                 f"  o{i} = f32[8,16] add(t{i}, s{i})"]
        outs.append(f"o{i}")
    shapes = ", ".join("f32[8,16]" for _ in outs)
    return "\n".join(["HloModule stats", "ENTRY e {", *params, *body,
                      f"  n = f32[8,16] negate(x0)",
                      f"  ROOT t = ({shapes}, f32[8,16]) tuple({', '.join(outs)}, n)", "}"])


def groups(module) -> list:
    return [i for i in module.entry.instructions
            if i.opcode == "fusion" and i.shape.is_tuple]


def fused(text: str):
    module = parse(text)
    passes.pipeline_from_text("instruction-fusion,horizontal-fusion").run(module)
    return module


@pytest.mark.parametrize("layers", [3, 12])
def test_groups_stay_within_the_size(layers):
    text = stats_module(layers)
    module = fused(text)
    sizes = [hf._size(g) for g in groups(module)]
    assert sizes and max(sizes) <= hf.MAX_GROUP_INSTRUCTIONS, sizes
    # every layer's result is in some group (none left alone but the last)
    assert sum(len(g.shape.leaves()) for g in groups(module)) >= layers - 1
    assert_same_results(text, module)


def test_without_the_size_one_group_holds_every_layer(monkeypatch):
    monkeypatch.setattr(hf, "MAX_GROUP_INSTRUCTIONS", 10 ** 9)
    module = fused(stats_module(12))
    assert max(len(g.shape.leaves()) for g in groups(module)) >= 12


def test_an_expensive_op_counts_as_several():
    """rsqrt of each of 20 small statistics (the layer norms' scale): a vecmath routine
    per output, so fewer of them share a group."""
    params = [f"  v{i} = f32[8,256] parameter({i})" for i in range(20)]
    body = [f"  r{i} = f32[8,256] rsqrt(v{i})" for i in range(20)]
    outs = ", ".join(f"r{i}" for i in range(20))
    shapes = ", ".join("f32[8,256]" for _ in range(20))
    text = "\n".join(["HloModule norms", "ENTRY e {", *params, *body,
                      "  n = f32[8,256] negate(v0)",
                      f"  ROOT t = ({shapes}, f32[8,256]) tuple({outs}, n)", "}"])
    module = fused(text)
    per_group = [sum(i.opcode == "rsqrt" for i in g.fused_computation.instructions)
                 for g in groups(module)]
    assert per_group and max(per_group) <= hf.MAX_GROUP_INSTRUCTIONS // hf.EXPENSIVE_SIZE
    assert sum(per_group) == 20
    assert_same_results(text, module)
