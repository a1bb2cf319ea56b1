"""Instruction fusion copies a cheap producer with other users into a consumer only if
the copy reads no more than the producer's value does: at most one array of its size
that the consumer does not read already (instruction_fusion._widens_reads). A residual
stream r_i = r_(i-1) + d_i read by each layer was otherwise copied, whole, into every
layer's kernel: layer i's kernel read all i earlier arrays again."""
from __future__ import annotations

import pytest

from xlapy import passes
from xlapy.passes import instruction_fusion as inf
from tests.passes.helpers import assert_same_results, parse


def residual(layers: int) -> str:
    lines = ["HloModule residual", "ENTRY e {", "  r0 = f32[32,64] parameter(0)"]
    outs = []
    for i in range(1, layers + 1):
        lines += [f"  d{i} = f32[32,64] parameter({i})",
                  f"  r{i} = f32[32,64] add(r{i - 1}, d{i})",
                  f"  f{i} = f32[32,64] tanh(r{i})"]
        outs.append(f"f{i}")
    shapes = ", ".join("f32[32,64]" for _ in outs)
    lines += [f"  ROOT t = ({shapes}, f32[32,64]) tuple({', '.join(outs)}, r{layers})", "}"]
    return "\n".join(lines)


def widest_read(module) -> int:
    """The most distinct full-size arrays one kernel of the entry reads."""
    return max(len({id(o) for o in i.operands if o.shape.numel == 32 * 64})
               for i in module.entry.instructions if i.opcode != "tuple")


def fused(text: str):
    module = parse(text)
    passes.pipeline_from_text("instruction-fusion").run(module)
    return module


@pytest.mark.parametrize("layers", [3, 8])
def test_a_residual_stream_is_read_not_recomputed(layers):
    text = residual(layers)
    module = fused(text)
    assert widest_read(module) <= 3, module.to_text()
    assert_same_results(text, module)


def test_without_the_rule_the_stream_is_copied_into_every_layer(monkeypatch):
    monkeypatch.setattr(inf, "_widens_reads", lambda consumer, producer: False)
    assert widest_read(fused(residual(8))) > 4


def test_a_bias_add_is_still_copied_into_each_consumer():
    """x + broadcast(b) read by two consumers: each copy reads x, as the value would."""
    text = """HloModule bias
ENTRY e {
  x = f32[32,64] parameter(0)
  b = f32[64] parameter(1)
  bb = f32[32,64] broadcast(b), dimensions={1}
  a = f32[32,64] add(x, bb)
  t = f32[32,64] tanh(a)
  n = f32[32,64] negate(a)
  ROOT o = (f32[32,64], f32[32,64]) tuple(t, n)
}"""
    module = fused(text)
    assert [i.opcode for i in module.entry.instructions].count("fusion") == 2
    assert not any(i.opcode == "add" for i in module.entry.instructions)
    assert_same_results(text, module)
