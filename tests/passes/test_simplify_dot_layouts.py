"""An elementwise op reading dot(a, b) through a transpose into the dot's own layout
reads dot(b, a) instead (passes/simplify_dot_layouts.py): the LSTM backward scan's
kernel-gradient sums. Same numbers as the evaluator; the cases that must stay (the dot
read elsewhere too, a non-elementwise reader, a reader in another layout, a transpose
that does not swap the free dimensions) stay."""
from __future__ import annotations

import pytest

from xlapy.passes import DCE, AlgebraicSimplifier

from tests.passes.helpers import assert_same_results, opcodes, parse

GRAD = """
HloModule m
ENTRY e {{
  dy = f32[16,8]{{1,0}} parameter(0)
  x = f32[16,4]{{1,0}} parameter(1)
  g = f32[4,8]{{1,0}} parameter(2)
  d = f32[8,4]{{1,0}} dot(dy, x), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}
  t = f32[4,8]{{{t_layout}}} transpose(d), dimensions={{1,0}}
  {body}
}}"""


def grad(body="ROOT s = f32[4,8]{1,0} add(g, t)", t_layout="0,1"):
    return GRAD.format(body=body, t_layout=t_layout)


def test_the_sum_reads_the_swapped_dot_row_major():
    text = grad()
    module = parse(text)
    assert AlgebraicSimplifier().run(module)
    DCE().run(module)
    assert "transpose" not in opcodes(module.entry)
    dot = next(i for i in module.entry.instructions if i.opcode == "dot")
    assert [o.name for o in dot.operands] == ["x", "dy"]
    assert dot.shape.dims == (4, 8) and dot.shape.has_default_layout()
    assert module.entry.root.operands[1] is dot
    assert_same_results(text, module)


def test_batched_dots_swap_too():
    text = """
    HloModule m
    ENTRY e {
      a = f32[3,16,8]{2,1,0} parameter(0)
      b = f32[3,16,4]{2,1,0} parameter(1)
      g = f32[3,4,8]{2,1,0} parameter(2)
      d = f32[3,8,4]{2,1,0} dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1}
      t = f32[3,4,8]{1,2,0} transpose(d), dimensions={0,2,1}
      ROOT s = f32[3,4,8]{2,1,0} multiply(g, t)
    }"""
    module = parse(text)
    assert AlgebraicSimplifier().run(module)
    DCE().run(module)
    assert "transpose" not in opcodes(module.entry)
    assert_same_results(text, module)


@pytest.mark.parametrize("body", [
    # the dot is read twice: swapping would compute it twice
    """s = f32[4,8]{1,0} add(g, t)
  ROOT r = (f32[4,8]{1,0}, f32[8,4]{1,0}) tuple(s, d)""",
    # the reader is not elementwise
    """z = f32[] constant(0)
  ROOT r = f32[4]{0} reduce(t, z), dimensions={1}, to_apply=sum""",
    # the reader's result is in the transpose's layout: it reads t in order already
    "ROOT s = f32[4,8]{0,1} add(g, t)",
])
def test_other_readers_keep_the_transpose(body):
    text = grad(body)
    if "to_apply=sum" in text:
        text = text.replace("ENTRY e {", "sum {\n  a = f32[] parameter(0)\n  b = f32[] "
                            "parameter(1)\n  ROOT s = f32[] add(a, b)\n}\nENTRY e {")
    module = parse(text)
    AlgebraicSimplifier().run(module)
    DCE().run(module)
    assert "transpose" in opcodes(module.entry)
    assert_same_results(text, module)


def test_a_transpose_that_keeps_the_free_dimensions_in_order_stays():
    text = """
    HloModule m
    ENTRY e {
      a = f32[3,16,8]{2,1,0} parameter(0)
      b = f32[3,16,4]{2,1,0} parameter(1)
      g = f32[8,3,4]{2,1,0} parameter(2)
      d = f32[3,8,4]{2,1,0} dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1}
      t = f32[8,3,4]{2,0,1} transpose(d), dimensions={1,0,2}
      ROOT s = f32[8,3,4]{2,1,0} add(g, t)
    }"""
    module = parse(text)
    AlgebraicSimplifier().run(module)
    DCE().run(module)
    assert "transpose" in opcodes(module.entry)
    assert_same_results(text, module)
