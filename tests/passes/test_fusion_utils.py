"""Fusion building blocks: create, fuse (move/clone), multi-output, sibling merge, kinds."""
from xlapy import hlo
from xlapy.passes.fusion_utils import (INPUT, LOOP, ROW, add_output, create_fusion, fuse_producer,
                                 fusion_kind, merge_siblings, output_groups, outputs, row_reduces)
from tests.passes.helpers import assert_same_results, opcodes, parse

CHAIN = """
HloModule chain
ENTRY e {
  p = f32[4,8] parameter(0)
  q = f32[8] parameter(1)
  qb = f32[4,8] broadcast(q), dimensions={1}
  a = f32[4,8] add(p, qb)
  n = f32[4,8] negate(a)
  m = f32[4,8] multiply(n, a)
  ROOT t = (f32[4,8], f32[4,8]) tuple(m, n)
}
"""


def test_create_fusion_takes_the_place_of_the_instruction():
    module = parse(CHAIN)
    entry = module.entry
    fusion = create_fusion(entry.instruction("m"), LOOP)
    assert fusion.opcode == "fusion" and fusion_kind(fusion) == "loop"
    body = fusion.fused_computation
    assert body.is_fusion_computation and body.root.name == "m"
    assert [op.name for op in fusion.operands] == ["n", "a"]
    assert sorted(opcodes(body)) == ["multiply", "parameter", "parameter"]
    assert entry.root.operands[0] is fusion
    assert_same_results(CHAIN, module)


def test_fuse_producer_moves_a_sole_user_producer_and_clones_a_shared_one():
    module = parse(CHAIN)
    entry = module.entry
    fusion = create_fusion(entry.instruction("m"), LOOP)
    a = entry.instruction("a")
    fuse_producer(fusion, a)                 # `a` is also read by `n`: cloned
    assert a.parent is entry and len(a.users) == 1
    qb = entry.instruction("qb")
    fuse_producer(fusion, qb)                # the original `a` still reads it: cloned
    assert qb.parent is entry and [u.name for u in qb.users] == ["a"]
    n = entry.instruction("n")
    fuse_producer(fusion, n)                 # `n` is also a tuple element: cloned
    assert_same_results(CHAIN, module)
    # Parameters are renumbered densely and named after their numbers.
    numbers = [p.parameter_number for p in fusion.fused_computation.parameters]
    assert numbers == list(range(len(fusion.operands)))
    assert all(p.name.split(".")[0] == f"param_{p.parameter_number}"
               for p in fusion.fused_computation.parameters)


def test_fuse_producer_moves_when_the_fusion_is_the_only_user():
    module = parse(CHAIN)
    entry = module.entry
    fusion = create_fusion(entry.instruction("m"), LOOP)
    n = entry.instruction("n")
    fuse_producer(fusion, n, keep_output=True)  # multi-output: n stays visible
    assert n.parent is fusion.fused_computation
    assert fusion.shape.is_tuple and len(outputs(fusion)) == 2
    assert {u.opcode for u in fusion.users} == {"get-tuple-element"}
    a = entry.instruction("a")
    fuse_producer(fusion, a)                    # now only the fusion reads `a`: moved
    assert a.parent is fusion.fused_computation and "add" not in opcodes(entry)
    assert_same_results(CHAIN, module)


def test_add_output_on_a_root_fusion_keeps_the_root_value():
    text = """
    HloModule root
    ENTRY e {
      p = f32[4] parameter(0)
      a = f32[4] abs(p)
      ROOT n = f32[4] negate(a)
    }
    """
    module = parse(text)
    fusion = create_fusion(module.entry.instruction("n"), LOOP)
    fuse_producer(fusion, module.entry.instruction("a"))
    index = add_output(fusion, fusion.fused_computation.instruction("a"))
    assert index == 1
    root = module.entry.root
    assert root.opcode == "get-tuple-element" and root.attrs["index"] == 0
    assert_same_results(text, module)


SIBLINGS = """
HloModule siblings
sum {
  sx = f32[] parameter(0)
  sy = f32[] parameter(1)
  ROOT sr = f32[] add(sx, sy)
}
ENTRY e {
  p = f32[4,8] parameter(0)
  q = f32[3] parameter(1)
  z = f32[] constant(0)
  s = f32[4] reduce(p, z), dimensions={1}, to_apply=sum
  n = f32[4,8] negate(p)
  e = f32[3] exponential(q)
  ROOT t = (f32[4], f32[4,8], f32[3]) tuple(s, n, e)
}
"""


def test_merge_siblings_makes_one_multi_output_fusion():
    module = parse(SIBLINGS)
    entry = module.entry
    loop = create_fusion(entry.instruction("n"), LOOP)
    other = create_fusion(entry.instruction("e"), LOOP)
    merged = merge_siblings(loop, other)
    assert merged is loop and other.parent is None
    assert [v.name for v in outputs(merged)] == ["n", "e"]
    assert output_groups(merged) == [[0], [1]]      # two shapes: two loop nests
    assert sum(1 for i in entry.instructions if i.opcode == "fusion") == 1
    assert_same_results(SIBLINGS, module)
    assert len(module.computations) == 3            # sum, one fused body, entry


def test_merge_siblings_with_a_multi_output_fusion():
    module = parse(SIBLINGS)
    entry = module.entry
    a = create_fusion(entry.instruction("n"), LOOP)
    b = create_fusion(entry.instruction("e"), LOOP)
    merge_siblings(a, b)
    c = create_fusion(entry.instruction("s"), INPUT)
    merged = merge_siblings(c, a)
    assert [v.opcode for v in outputs(merged)] == ["reduce", "negate", "exponential"]
    assert_same_results(SIBLINGS, module)


def test_row_kind_is_marked_in_backend_config():
    text = """
    HloModule row
    sum {
      sx = f32[] parameter(0)
      sy = f32[] parameter(1)
      ROOT sr = f32[] add(sx, sy)
    }
    ENTRY e {
      p = f32[4,8] parameter(0)
      z = f32[] constant(0)
      s = f32[4] reduce(p, z), dimensions={1}, to_apply=sum
      sb = f32[4,8] broadcast(s), dimensions={0}
      ROOT d = f32[4,8] divide(p, sb)
    }
    """
    module = parse(text)
    entry = module.entry
    fusion = create_fusion(entry.root, ROW)
    fuse_producer(fusion, entry.instruction("sb"))
    fuse_producer(fusion, entry.instruction("s"))
    assert fusion_kind(fusion) == "row"
    assert fusion.attrs["kind"] == "kCustom"
    assert [r.name for r in row_reduces(fusion)] == ["s"]
    printed = hlo.print_module(module)
    assert 'kind=kCustom, backend_config={"fusion_kind":"row"}' in printed
    assert fusion_kind(hlo.parse_module(printed).entry.root) == "row"
    assert_same_results(text, module)


def test_fuse_producer_merges_a_producer_fusion_into_its_consumer():
    text = """
    HloModule merge
    ENTRY e {
      p = f32[4] parameter(0)
      q = f32[4] parameter(1)
      a = f32[4] abs(p)
      s = f32[4] sqrt(a)
      ROOT m = f32[4] multiply(s, q)
    }
    """
    module = parse(text)
    entry = module.entry
    producer = create_fusion(entry.instruction("s"), LOOP)
    fuse_producer(producer, entry.instruction("a"))
    consumer = create_fusion(entry.instruction("m"), LOOP)
    value = fuse_producer(consumer, producer)
    assert value.name == "s" and value.parent is consumer.fused_computation
    assert opcodes(entry) == ["parameter", "parameter", "fusion"]
    assert sorted(opcodes(consumer.fused_computation)) == [
        "abs", "multiply", "parameter", "parameter", "sqrt"]
    assert producer.fused_computation not in module.computations
    assert_same_results(text, module)
