"""The pipeline reads the machine's facts from one object (passes/target_facts.py):
`cpu_pipeline(facts=...)` changes what fuses, the default is TargetFacts(), and
passes/ keeps no threshold of its own."""
from __future__ import annotations

import ast
import os
from textwrap import dedent

from xlapy import hlo, passes
from xlapy.passes.hlo_utils import count_kernels
from xlapy.passes.target_facts import DEFAULT, TargetFacts

PASSES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "passes")

SIBLINGS = dedent("""
    HloModule m
    ENTRY e {
      p = f32[64,64] parameter(0)
      q = f32[32] parameter(1)
      a = f32[64,64] abs(p)
      n = f32[32] negate(q)
      ROOT t = (f32[64,64], f32[32]) tuple(a, n)
    }""")

TRANSPOSE = dedent("""
    HloModule m
    ENTRY e {
      p = f32[256,256] parameter(0)
      a = f32[256,256] abs(p)
      ROOT t = f32[256,256] transpose(a), dimensions={1,0}
    }""")


def _kernels(text: str, facts: TargetFacts | None = None) -> int:
    module = hlo.parse_module(text)
    pipeline = passes.cpu_pipeline(verify_each=True) if facts is None \
        else passes.cpu_pipeline(facts, verify_each=True)
    pipeline.run(module)
    return count_kernels(module)


def test_the_default_facts_are_host_independent():
    assert passes.cpu_pipeline.__defaults__ == (DEFAULT,)
    assert DEFAULT == TargetFacts()


def test_horizontal_fusion_merges_up_to_the_parallel_work_threshold():
    # Kernels reading and writing 32 KiB and 256 bytes: merged by default (128 KiB),
    # apart when 32 KiB is above the threshold.
    assert _kernels(SIBLINGS) == 1
    assert _kernels(SIBLINGS, TargetFacts(parallel_min_bytes=32 * 1024)) == 1
    assert _kernels(SIBLINGS, TargetFacts(parallel_min_bytes=32 * 1024 - 1)) == 2


def test_a_small_output_of_a_large_reduction_is_not_merged_horizontally():
    # 4 KiB of output from 4 MiB of input: the work is the input. Merged with a small
    # neighbour it ran one loop per output element on one thread (a GPT step's bias
    # gradients: 230 of 400 ms).
    text = """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[1024,1024] parameter(0)
  q = f32[32] parameter(1)
  z = f32[] constant(0)
  r = f32[1024] reduce(p, z), dimensions={0}, to_apply=add
  c = f32[] constant(0.01)
  b = f32[1024] broadcast(c), dimensions={}
  m = f32[1024] multiply(r, b)
  n = f32[32] negate(q)
  ROOT t = (f32[1024], f32[32]) tuple(m, n)
}"""
    assert _kernels(text) == 2


def test_a_transpose_is_large_from_the_targets_threshold():
    # 256 KiB: below the default 1 MiB it fuses with its producer; at 256 KiB it does not.
    assert _kernels(TRANSPOSE) == 1
    assert _kernels(TRANSPOSE, TargetFacts(large_transpose_bytes=256 * 1024)) == 2


def _numbers(node) -> int | None:
    """The value of a constant integer expression (1 << 20, 128 * 1024), else None."""
    try:
        value = eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}})
    except Exception:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def test_passes_keep_no_threshold_of_their_own():
    """Module-level size constants belong in TargetFacts (a copy of a backend constant
    drifts: horizontal fusion's cap was the backend's PARALLEL_MIN_BYTES written again)."""
    found = []
    for name in sorted(os.listdir(PASSES)):
        if not name.endswith(".py") or name == "target_facts.py":
            continue
        with open(os.path.join(PASSES, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                value = _numbers(node.value)
                if value is not None and value >= 1024:
                    found.append(f"{name}:{node.lineno}")
    assert found == []
