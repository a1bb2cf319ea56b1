"""Fusion passes and `control-predecessors` (issue 14, item 4).

Instruction fusion once moved an instruction into a fused computation together
with its control predecessors, which stayed outside: `sort_topologically` of the
fused computation found no order (`AssertionError: cycle in fused_computation`);
a fused instruction that was someone's control predecessor left a dangling edge.
Now a fusion takes over the control edges of what it absorbs and the passes never
fuse where that would close a cycle. Every test checks: the module verifies (no
cycle, edges inside one computation), no fused computation keeps a control edge,
every original edge still orders the instructions holding its two ends, and the
numbers do not change (evaluator, and the CPU backend after the default pipeline).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import passes
from tests import hlo_strategies as hs
from tests.robustness.compare import assert_same_numbers, output_types

BASE = """HloModule cp
ENTRY e {{
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  a = f32[8] add(x, y){a}
  b = f32[8] multiply(a, y){b}
  c = f32[8] exponential(x){c}
  d = f32[8] subtract(b, c){d}
  n = f32[8] negate(y){n}
  ROOT t = (f32[8], f32[8]) tuple(d, n){t}
}}
"""

# Which instruction waits for which: {instruction: [its control predecessors]}.
EDGES = {
    "consumer_after_unrelated": {"d": ["n"]},
    "producer_after_unrelated": {"a": ["n"]},
    "unrelated_after_producer": {"n": ["a"]},
    "chain_through_unrelated": {"n": ["a"], "d": ["n"]},
    "consumer_after_its_producer": {"b": ["a"]},
    "sibling_after_sibling": {"c": ["b"]},
    "root_after": {"t": ["c"]},
    "after_parameters": {"a": ["y"], "c": ["x", "y"]},
    "several": {"c": ["a"], "n": ["c"], "d": ["n"], "t": ["b"]},
}

SOFTMAX = """HloModule sm
sum {{
  sx = f32[] parameter(0)
  sy = f32[] parameter(1)
  ROOT sr = f32[] add(sx, sy)
}}
max {{
  mx = f32[] parameter(0)
  my = f32[] parameter(1)
  ROOT mr = f32[] maximum(mx, my)
}}
ENTRY e {{
  x = f32[4,16] parameter(0)
  ninf = f32[] constant(-inf)
  zero = f32[] constant(0)
  m = f32[4] reduce(x, ninf), dimensions={{1}}, to_apply=max{m}
  mb = f32[4,16] broadcast(m), dimensions={{0}}
  s = f32[4,16] subtract(x, mb){s}
  ex = f32[4,16] exponential(s){ex}
  z = f32[4] reduce(ex, zero), dimensions={{1}}, to_apply=sum{z}
  zb = f32[4,16] broadcast(z), dimensions={{0}}
  q = f32[4,16] divide(ex, zb){q}
  col = f32[16] reduce(x, zero), dimensions={{0}}, to_apply=sum{col}
  ROOT t = (f32[4,16], f32[16]) tuple(q, col)
}}
"""

SOFTMAX_EDGES = {
    "row_member_before_outside": {"col": ["s"]},
    "row_member_after_outside": {"ex": ["col"]},
    "row_root_after_outside": {"q": ["col"]},
    "reduce_after_reduce": {"z": ["m"], "col": ["z"]},
}

WHILE = """HloModule wl
cond {
  cs = (s32[], f32[8]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one), control-predecessors={w}
  h = f32[8] constant({0.5, 1, 2, 4, 8, 16, 32, 64})
  u = f32[8] multiply(v, h)
  w = f32[8] add(u, v)
  ROOT r = (s32[], f32[8]) tuple(j, w), control-predecessors={u}
}
ENTRY e {
  p = f32[8] parameter(0)
  z = s32[] constant(0)
  s0 = (s32[], f32[8]) tuple(z, p)
  ROOT loop = (s32[], f32[8]) while(s0), condition=cond, body=body
}
"""


def _with_edges(template: str, names: str, edges: dict) -> str:
    fill = {k: "" for k in names}
    for instr, preds in edges.items():
        fill[instr] = ", control-predecessors={" + ", ".join(preds) + "}"
    return template.format(**fill)


CASES = {f"elementwise/{k}": _with_edges(BASE, ["a", "b", "c", "d", "n", "t"], v)
         for k, v in EDGES.items()}
CASES.update({f"softmax/{k}": _with_edges(SOFTMAX, ["m", "s", "ex", "z", "q", "col"], v)
              for k, v in SOFTMAX_EDGES.items()})
CASES["while_body"] = WHILE

PASSES = {
    "instruction-fusion": ["instruction-fusion"],
    "multi-output-fusion": ["instruction-fusion", "multi-output-fusion"],
    "horizontal-fusion": ["horizontal-fusion"],
    "fused-then-horizontal": ["instruction-fusion", "horizontal-fusion"],
    "row-fusion": ["row-fusion", "instruction-fusion", "multi-output-fusion"],
}


def _edges(module: hlo.HloModule) -> list[tuple[str, str, str]]:
    """(computation, predecessor, successor) names of every control edge."""
    return [(c.name, p.name, i.name) for c in module.computations
            for i in c.instructions for p in i.control_predecessors]


def _holders(comp: hlo.HloComputation, name: str) -> list[hlo.HloInstruction]:
    """The top-level instructions of `comp` that are, or (through fusions) contain, `name`."""
    def contains(instr):
        if instr.name == name:
            return True
        return instr.opcode == "fusion" and any(contains(i)
                                                for i in instr.fused_computation.instructions)
    return [i for i in comp.instructions if contains(i)]


def _depends(comp: hlo.HloComputation, later, earlier) -> bool:
    """True if `later` (transitively) waits for `earlier`, through data or control edges."""
    stack, seen = [later], set()
    while stack:
        instr = stack.pop()
        for o in instr.operands + instr.control_predecessors:
            if o is earlier:
                return True
            if id(o) not in seen:
                seen.add(id(o))
                stack.append(o)
    return False


def check_edges_kept(before: list, module: hlo.HloModule) -> None:
    comps = {c.name: c for c in module.computations}
    for comp in module.computations:
        if comp.is_fusion_computation:
            assert not any(i.control_predecessors for i in comp.instructions), \
                f"a control edge inside {comp.name}"
    for comp_name, pred, succ in before:
        comp = comps[comp_name]
        for p in _holders(comp, pred):
            for s in _holders(comp, succ):
                assert p is s or _depends(comp, s, p), \
                    f"{succ} no longer runs after {pred} ({s.name} vs {p.name})"


def _args(module, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.shape.dims).astype(hlo.numpy_dtype(p.shape.element_type))
            for p in module.entry.parameters]


@pytest.mark.parametrize("pipeline", sorted(PASSES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_fusion_passes_keep_control_edges(case, pipeline):
    text = CASES[case]
    module = hlo.parse_module(text)
    hlo.verify(module)
    before = _edges(module)
    args = _args(module)
    expected = hlo.evaluate(module, args)
    for name in PASSES[pipeline]:
        passes.make_pass(name).run(module)
        hlo.verify(module)
        check_edges_kept(before, module)
    printed = hlo.print_module(module)
    assert hlo.print_module(hlo.parse_module(printed)) == printed
    assert_same_numbers(hlo.evaluate(module, args), expected, output_types(module), case,
                        exact=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_pipeline_and_backend(case):
    text = CASES[case]
    module = hlo.parse_module(text)
    before = _edges(module)
    args = _args(module)
    expected = hlo.evaluate(module, args)
    passes.cpu_pipeline(verify_each=True).run(module)
    check_edges_kept(before, module)
    assert_same_numbers(hlo.evaluate(module, args), expected, output_types(module), case,
                        exact=True)
    actual = backend_cpu.compile(module).run(*args)
    assert_same_numbers(actual, expected, output_types(module), case)


def test_producer_ordered_before_another_stays_unfused():
    """a must run before n, and d (which reads a through b) after n: fusing a into d's
    fusion would make it run both before and after n."""
    module = hlo.parse_module(CASES["elementwise/chain_through_unrelated"])
    fusion = passes.make_pass("instruction-fusion")
    consumer = next(i for i in module.entry.instructions if i.name == "b")
    assert "control edge" in fusion.explain(consumer)[0]
    fusion.run(module)
    assert any(i.name == "a" for i in module.entry.instructions)


def test_edges_between_fused_members_disappear():
    module = hlo.parse_module(CASES["elementwise/consumer_after_its_producer"])
    passes.make_pass("instruction-fusion").run(module)
    hlo.verify(module)
    assert not any(i.control_predecessors for c in module.computations for i in c.instructions)


@st.composite
def ordered_modules(draw):
    """A random module with random control edges that agree with its post order."""
    module = draw(hs.hlo_modules(hs.GenOptions(max_instructions=16, control_flow=False,
                                               transcendental=False, dtypes=("f32", "s32"))))
    order = module.entry.post_order()
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(order) - 1))
        j = draw(st.integers(0, len(order) - 1))
        if i == j:
            continue
        first, then = order[min(i, j)], order[max(i, j)]
        if not any(p is first for p in then.control_predecessors):
            then.control_predecessors.append(first)
    return hlo.print_module(module)


@given(text=ordered_modules(), seed=st.integers(0, 2**16))
def test_random_control_edges_through_the_pipeline(text, seed):
    module = hlo.parse_module(text)
    hlo.verify(module)
    before = _edges(module)
    args = _args(module, seed)
    expected = hlo.evaluate(module, args)
    passes.cpu_pipeline(verify_each=True).run(module)
    check_edges_kept(before, module)
    assert_same_numbers(hlo.evaluate(module, args), expected, output_types(module), "pipeline",
                        exact=True)
