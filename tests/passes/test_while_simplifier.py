"""The while-loop simplifier (passes/while_loop_simplifier.py): constant pass-through
leaves are sunk into cond and body, dead leaves (read by nobody but their own next
value) are dropped, and what the loop computes does not change; leaves read outside,
by the cond, or feeding a side effect or another leaf stay."""
from __future__ import annotations

import pytest

from xlapy.passes import WhileLoopSimplifier

from tests.passes.helpers import assert_same_results, parse


def loop(trips: int = 3, extra_body: str = "", root_extra: str = "",
         entry_root: str = "ROOT x = f32[4] get-tuple-element(w), index=1") -> str:
    """State (i: s32, x: f32[4], k: f32[4] constant pass-through, d: u32[2] dead
    counter, n: s32[] limit pass-through)."""
    return f"""
    HloModule m
    cond {{
      p = (s32[], f32[4], f32[4], u32[2], s32[]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      n = s32[] get-tuple-element(p), index=4
      ROOT lt = pred[] compare(i, n), direction=LT
    }}
    body {{
      p = (s32[], f32[4], f32[4], u32[2], s32[]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      x = f32[4] get-tuple-element(p), index=1
      k = f32[4] get-tuple-element(p), index=2
      x1 = f32[4] multiply(x, k)
      d = u32[2] get-tuple-element(p), index=3
      d1 = u32[2] add(d, d)
      n = s32[] get-tuple-element(p), index=4
      {extra_body}
      ROOT r = (s32[], f32[4], f32[4], u32[2], s32[]) tuple(i1, x1, k, d1{root_extra}, n)
    }}
    ENTRY e {{
      x0 = f32[4] parameter(0)
      d0 = u32[2] parameter(1)
      z = s32[] constant(0)
      k0 = f32[4] constant({{1.5, -2, 0.25, 3}})
      n0 = s32[] constant({trips})
      init = (s32[], f32[4], f32[4], u32[2], s32[]) tuple(z, x0, k0, d0, n0)
      w = (s32[], f32[4], f32[4], u32[2], s32[]) while(init), condition=cond, body=body
      {entry_root}
    }}"""


def state_of(module) -> list[str]:
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    return [s.to_text(with_layout=False) for s in loop.shape.tuple_shapes]


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_constants_sink_and_dead_leaves_go(trips):
    text = loop(trips)
    module = parse(text)
    assert WhileLoopSimplifier().run(module)
    # k (a constant pass-through), n (the limit, read by the cond only) and d (dead)
    # are gone: the state is (i, x)
    assert state_of(module) == ["s32[]", "f32[4]"]
    body = module.computation("body")
    assert sum(i.opcode == "constant" for i in body.instructions) == 2    # one, k
    assert_same_results(text, module)
    assert not WhileLoopSimplifier().run(module)


def test_leaves_read_outside_stay():
    text = loop(entry_root="ROOT d = u32[2] get-tuple-element(w), index=3")
    module = parse(text)
    assert WhileLoopSimplifier().run(module)
    assert "u32[2]" in state_of(module)
    assert_same_results(text, module)


def test_a_leaf_feeding_another_or_a_side_effect_stays():
    # d feeds x's next value: not dead
    feeding = loop(extra_body="""dc = f32[2] convert(d)
      ds = f32[] reduce(dc, fz), dimensions={0}, to_apply=sum
      db = f32[4] broadcast(ds), dimensions={}
      x1b = f32[4] add(x1, db)""").replace("tuple(i1, x1, k", "tuple(i1, x1b, k").replace(
        "HloModule m\n", "HloModule m\n    sum {\n      a = f32[] parameter(0)\n"
        "      b = f32[] parameter(1)\n      ROOT s = f32[] add(a, b)\n    }\n").replace(
        "one = s32[] constant(1)", "one = s32[] constant(1)\n      fz = f32[] constant(0)")
    module = parse(feeding)
    WhileLoopSimplifier().run(module)
    assert "u32[2]" in state_of(module)
    assert_same_results(feeding, module)
    # d is sent to an outfeed each trip: not dead
    effect = loop(extra_body="""tok = token[] after-all()
      o = token[] outfeed(d, tok)""")
    module = parse(effect)
    WhileLoopSimplifier().run(module)
    assert "u32[2]" in state_of(module)


def test_a_root_while_keeps_its_state():
    text = loop(entry_root="ROOT w2 = (s32[], f32[4], f32[4], u32[2], s32[]) copy(w)")
    module = parse(text)
    assert WhileLoopSimplifier().run(module)            # the constants still sink
    assert len(state_of(module)) == 5
    assert_same_results(text, module)


def test_a_config_naming_a_leaf_by_index_is_dropped_with_the_leaves():
    # XLA's optimized HLO names the induction variable by its tuple index: once leaves
    # before it go, the index would name another leaf
    text = loop().replace(
        "condition=cond, body=body",
        'condition=cond, body=body, backend_config={"known_trip_count":{"n":"3"},'
        '"known_induction_variable":{"tuple_index":"0"}}')
    module = parse(text)
    assert WhileLoopSimplifier().run(module)
    assert "tuple_index" not in module.to_text()
    assert_same_results(text, module)


def test_a_constant_in_another_layout_is_read_in_the_leaf_s():
    # the init constant is column-major, the leaf row-major; the body reinterprets the
    # leaf's bytes with a bitcast, so the sunk constant must be laid out as the leaf
    text = """
    HloModule m
    cond {
      p = (s32[], f32[3,2]{1,0}, f32[2,3]{1,0}) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      c = s32[] constant(2)
      ROOT lt = pred[] compare(i, c), direction=LT
    }
    body {
      p = (s32[], f32[3,2]{1,0}, f32[2,3]{1,0}) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      x = f32[3,2]{1,0} get-tuple-element(p), index=1
      k = f32[2,3]{1,0} get-tuple-element(p), index=2
      kb = f32[3,2]{1,0} bitcast(k)
      x1 = f32[3,2]{1,0} add(x, kb)
      ROOT r = (s32[], f32[3,2]{1,0}, f32[2,3]{1,0}) tuple(i1, x1, k)
    }
    ENTRY e {
      x0 = f32[3,2]{1,0} parameter(0)
      z = s32[] constant(0)
      k0 = f32[2,3]{0,1} constant({{1, 2, 3}, {4, 5, 6}})
      init = (s32[], f32[3,2]{1,0}, f32[2,3]{1,0}) tuple(z, x0, k0)
      w = (s32[], f32[3,2]{1,0}, f32[2,3]{1,0}) while(init), condition=cond, body=body
      ROOT x = f32[3,2]{1,0} get-tuple-element(w), index=1
    }"""
    module = parse(text)
    assert WhileLoopSimplifier().run(module)
    assert_same_results(text, module)
