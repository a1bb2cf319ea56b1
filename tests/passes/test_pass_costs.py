"""Shortcuts taken for the passes' cost on large modules (issue 19: the 12-layer GPT step)
give what the plain algorithms give.

- A computation added under a taken name gets the smallest free `name.N`, also after
  removals, a new entry and a clone (the module keeps its names and, per base name, the
  suffix below which all are taken, instead of scanning the module per name).
- CSE keys a shape by its text once per shape object: layouts still tell values apart.
- Row fusion orders each region by the places the sorted list had (the fusions before it
  took their root's place): the same region order as a walk over the list.
"""
from __future__ import annotations

import contextlib
import random
from textwrap import dedent

from xlapy import hlo, passes
from xlapy.hlo import HloComputation
from xlapy.hlo.ir import control_edge_scope
from xlapy.passes import row_fusion
from xlapy.passes.row_fusion import grow_row_region


def smallest_free(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    n = 1
    while f"{base}.{n}" in taken:
        n += 1
    return f"{base}.{n}"


def test_computation_names_are_the_smallest_free_ones():
    rng = random.Random(7)
    module = hlo.parse_module(dedent("""
        HloModule m
        ENTRY e {
          ROOT p = f32[4] parameter(0)
        }"""))
    for step in range(400):
        names = {c.name for c in module.computations}
        action = rng.random()
        removable = [c for c in module.computations if c is not module.entry]
        if action < 0.3 and removable:
            module.remove_computation(rng.choice(removable))
        elif action < 0.35:
            # a new entry: the old one leaves, its name is free again
            entry = HloComputation(rng.choice(["e", "fused", "e.2"]))
            expected = smallest_free(entry.name, names - {module.entry.name})
            module.replace_entry(entry)
            assert entry.name == expected
        elif action < 0.4:
            module = module.clone()
        else:
            base = rng.choice(["fused", "fused", "fused.3", "region", "e"])
            comp = HloComputation(base)
            module.add_computation(comp, before=module.entry if step % 2 else None)
            assert comp.name == smallest_free(base, names), step
        assert len({c.name for c in module.computations}) == len(module.computations)


def test_add_computation_before_keeps_its_place():
    module = hlo.parse_module(dedent("""
        HloModule m
        ENTRY e {
          ROOT p = f32[4] parameter(0)
        }"""))
    first = module.add_computation(HloComputation("a"), before=module.entry)
    second = module.add_computation(HloComputation("b"), before=first)
    third = module.add_computation(HloComputation("c"), before=HloComputation("gone"))
    assert [c.name for c in module.computations] == ["b", "a", "e", "c"]
    assert module.computations[0] is second and module.computations[-1] is third


def test_cse_tells_layouts_apart_and_merges_equal_shapes():
    module = hlo.parse_module(dedent("""
        HloModule m
        ENTRY e {
          p = f32[2,3]{1,0} parameter(0)
          a = f32[2,3]{0,1} copy(p)
          b = f32[2,3]{1,0} copy(p)
          c = f32[2,3]{0,1} copy(p)
          d = f32[2,3]{1,0} copy(p)
          ROOT t = (f32[2,3]{0,1}, f32[2,3]{1,0}, f32[2,3]{0,1}, f32[2,3]{1,0}) tuple(a, b, c, d)
        }"""))
    assert passes.CSE().run(module)
    root = module.entry.root
    assert [o.name for o in root.operands] == ["a", "b", "a", "b"]


def test_row_regions_ordered_by_places_equal_the_walk():
    # Three layer norms one after another: each later region is ordered by places.
    text = dedent("""
        HloModule m
        add {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          p = f32[8,16] parameter(0)
          zero = f32[] constant(0)
          n = f32[] constant(16)
          nb = f32[8] broadcast(n), dimensions={}
          s1 = f32[8] reduce(p, zero), dimensions={1}, to_apply=add
          m1 = f32[8] divide(s1, nb)
          b1 = f32[8,16] broadcast(m1), dimensions={0}
          y1 = f32[8,16] subtract(p, b1)
          e1 = f32[8,16] exponential(y1)
          s2 = f32[8] reduce(e1, zero), dimensions={1}, to_apply=add
          m2 = f32[8] divide(s2, nb)
          b2 = f32[8,16] broadcast(m2), dimensions={0}
          y2 = f32[8,16] subtract(e1, b2)
          t2 = f32[8,16] tanh(y2)
          s3 = f32[8] reduce(t2, zero), dimensions={1}, to_apply=add
          b3 = f32[8,16] broadcast(s3), dimensions={0}
          y3 = f32[8,16] multiply(t2, b3)
          ROOT out = (f32[8,16], f32[8,16], f32[8,16]) tuple(y3, e1, t2)
        }""")
    module = hlo.parse_module(text)
    comp = module.entry
    places = {id(i): n for n, i in enumerate(comp.instructions)}
    for root in reversed(list(comp.instructions)):
        walked = grow_row_region(root, parent_sorted=True)
        placed = grow_row_region(root, parent_sorted=True, places=places)
        assert (walked is None) == (placed is None)
        if walked is not None:
            assert [i.name for i in walked] == [i.name for i in placed]
    fused = hlo.parse_module(text)
    assert passes.RowFusion().run(fused)
    assert hlo.print_module(fused).count("fusion_kind") == 3
    # The pass without the places (each region ordered by a walk) makes the same module.
    plain = hlo.parse_module(text)
    real = row_fusion.grow_row_region
    row_fusion.grow_row_region = lambda *a, places=None, **k: real(*a, **k)
    try:
        assert passes.RowFusion().run(plain)
    finally:
        row_fusion.grow_row_region = real
    assert hlo.print_module(plain) == hlo.print_module(fused)


def _plain_post_order(comp) -> list:
    """post_order without the known-order shortcut."""
    saved, comp._in_order = comp._in_order, False
    try:
        return comp.post_order()
    finally:
        comp._in_order = saved


def test_known_order_is_forgotten_by_every_edit_that_can_break_it():
    text = dedent("""
        HloModule m
        ENTRY e {
          p = f32[4] parameter(0)
          a = f32[4] negate(p)
          b = f32[4] abs(p)
          c = f32[4] add(a, b)
          d = f32[4] multiply(c, a)
          ROOT r = f32[4] subtract(d, b)
        }""")
    edits = {
        # d reads a later instruction: c now reads d's operand chain through a new add
        "replace_operand": lambda comp, i: i["a"].replace_operand(0, i["b"]),
        "set_operands": lambda comp, i: i["a"].set_operands([i["c"].operands[1]]),
        "move_before": lambda comp, i: comp.move_before(i["d"], i["a"]),
        "add_instruction": lambda comp, i: i["b"].replace_operand(0, comp.add_instruction(
            hlo.HloInstruction("exponential", i["p"].shape, [i["p"]], name="x"))),
        "move_in": lambda comp, i: i["a"].replace_operand(0, _moved_in(comp, i)),
    }
    for name, edit in edits.items():
        module = hlo.parse_module(text)
        comp = module.entry
        with control_edge_scope(module):
            comp.sort_topologically()
            assert comp._in_order, name
            instrs = {x.name: x for x in comp.instructions}
            edit(comp, instrs)
            order = comp.post_order()
            assert [x.name for x in order] == [x.name for x in _plain_post_order(comp)], name
            comp.sort_topologically()
            seen = set()
            for x in comp.instructions:
                assert all(id(o) in seen for o in x.operands), name
                seen.add(id(x))
        assert not comp._in_order          # not trusted outside a pass


def _moved_in(comp, instrs):
    other = hlo.parse_module(dedent("""
        HloModule o
        ENTRY e {
          ROOT q = f32[4] parameter(0)
        }""")).entry
    q = other.instructions[0]
    x = hlo.HloInstruction("negate", q.shape, [instrs["p"]], name="moved")
    other.add_instruction(x)
    comp.move_instruction(x)
    return x


def _negate_abs():
    """p -> a = negate(p) -> b = abs(a), listed in order."""
    return hlo.parse_module(dedent("""
        HloModule m
        ENTRY e {
          p = f32[4] parameter(0)
          a = f32[4] negate(p)
          ROOT b = f32[4] abs(a)
        }"""))


def test_known_order_is_not_trusted_outside_a_pass():
    module = _negate_abs()
    comp = module.entry
    comp.sort_topologically()
    comp.instructions.reverse()         # code outside the passes may edit the list
    assert [x.name for x in comp.post_order()] == ["p", "a", "b"]
    comp.sort_topologically()
    assert [x.name for x in comp.instructions] == ["p", "a", "b"]


def test_reachability_kept_up_to_date_equals_a_fresh_one(monkeypatch):
    """Multi-output fusion keeps one Reachability across its merges (sibling and
    producer/consumer): every answer it gets equals one from a Reachability built afresh
    on the computation as it is then. Over the corpus modules that merge."""
    from pathlib import Path
    from xlapy.passes import hlo_utils, multi_output_fusion

    asked = []

    class Checked(hlo_utils.Reachability):
        def __init__(self, comp):
            super().__init__(comp)
            self._comp = comp

        def depends_on(self, a, b):
            answer = super().depends_on(a, b)
            if a.parent is self._comp and b.parent is self._comp:
                assert answer == hlo_utils.Reachability(self._comp).depends_on(a, b), \
                    (a.name, b.name)
                asked.append(a)
            return answer

    monkeypatch.setattr(multi_output_fusion, "Reachability", Checked)
    corpus = Path(__file__).parents[1] / "corpus"
    for name in ("train_step_sgd", "grad_mlp_loss", "grad_softmax_xent", "remat_mlp_grad",
                 "layernorm_f32", "reduce_mean_var_f32"):
        path = corpus / f"{name}.hlo"
        if path.exists():
            passes.cpu_pipeline().run(hlo.parse_module(path.read_text()))
    assert asked


def test_known_order_lasts_across_nested_scopes_and_ends_with_the_outermost():
    module = _negate_abs()
    comp = module.entry
    with control_edge_scope(module):
        with control_edge_scope(module):        # a pass
            body = HloComputation("made_in_a_pass")
            module.add_computation(body)
            comp.post_order()
        assert comp._in_order and comp._edge_free
        with control_edge_scope(module):        # the next pass marks the new one too
            assert body._edge_free
            body.post_order()
        assert body._in_order and body._edge_free        # kept until the outermost ends
    assert not comp._in_order and not comp._edge_free
    assert not body._in_order and not body._edge_free
    comp.instructions.reverse()
    with control_edge_scope(module):            # a later pipeline scans again
        assert [x.name for x in comp.post_order()] == ["p", "a", "b"]


def test_cse_compares_called_computations_by_structure_when_the_rest_is_equal():
    module = hlo.parse_module(dedent("""
        HloModule m
        f1 {
          a = f32[4] parameter(0)
          ROOT n = f32[4] negate(a)
        }
        f2 {
          b = f32[4] parameter(0)
          ROOT m = f32[4] negate(b)
        }
        f3 {
          c = f32[4] parameter(0)
          ROOT e = f32[4] exponential(c)
        }
        ENTRY e {
          p = f32[4] parameter(0)
          q = f32[4] parameter(1)
          x = f32[4] fusion(p), kind=kLoop, calls=f1
          y = f32[4] fusion(p), kind=kLoop, calls=f2
          z = f32[4] fusion(p), kind=kLoop, calls=f3
          w = f32[4] fusion(q), kind=kLoop, calls=f1
          ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(x, y, z, w)
        }"""))
    assert passes.CSE().run(module)
    assert [o.name for o in module.entry.root.operands] == ["x", "x", "z", "w"]


def test_batched_removals_leave_the_list_sequential_removals_leave():
    text = dedent("""
        HloModule m
        ENTRY e {
          p = f32[4] parameter(0)
          a = f32[4] negate(p)
          b = f32[4] abs(a)
          c = f32[4] exponential(p)
          d = f32[4] negate(c)
          ROOT r = f32[4] add(p, p)
        }""")
    def run(batched: bool, scoped: bool):
        module = hlo.parse_module(text)
        comp = module.entry
        names = {}
        with control_edge_scope(module) if scoped else contextlib.nullcontext():
            with comp.batch_removals() if batched else contextlib.nullcontext():
                for name in ("b", "a", "d"):
                    x = comp.instruction(name) if not batched else names.setdefault(
                        name, next(i for i in comp.instructions if i.name == name))
                    comp.remove_instruction(x)
                    assert x.parent is None and not x.operands
                if batched and scoped:
                    assert len(comp.instructions) == 6      # still listed inside
        return [i.name for i in comp.instructions], [u.name for u in comp.instruction("p").users]
    expected = run(False, False)
    assert expected == (["p", "c", "r"], ["c", "r"])
    for batched, scoped in ((True, True), (True, False), (False, True)):
        assert run(batched, scoped) == expected


def test_producers_the_fusion_driver_skips_are_ones_it_would_decline(monkeypatch):
    from pathlib import Path
    from xlapy.hlo import OPCODES
    from xlapy.passes import instruction_fusion as fusion

    for opcode in fusion.NEVER_FUSED:
        info = OPCODES[opcode]
        assert not info.is_elementwise and opcode not in fusion.LOOP_MOVEMENT
        assert opcode not in ("reduce", "reduce-window", "broadcast", "iota", "constant")
    # And on modules: asked anyway, the policy declines each of them.
    asked = []
    real, skipped = fusion.CpuInstructionFusion.should_fuse, fusion.NEVER_FUSED

    def checked(self, consumer, index):
        decision = real(self, consumer, index)
        if consumer.operands[index].opcode in skipped:
            assert not decision
            asked.append(consumer.operands[index].opcode)
        return decision

    monkeypatch.setattr(fusion.CpuInstructionFusion, "should_fuse", checked)
    monkeypatch.setattr(fusion, "NEVER_FUSED", frozenset())
    corpus = Path(__file__).parents[1] / "corpus"
    for name in ("train_step_sgd", "attention_block", "convnet_forward", "scan_rnn"):
        passes.cpu_pipeline().run(hlo.parse_module((corpus / f"{name}.hlo").read_text()))
    assert {"parameter", "dot", "fusion"} <= set(asked)


def test_moves_out_of_a_batched_computation_and_reads_inside_the_batch():
    text = dedent("""
        HloModule m
        ENTRY e {
          p = f32[4] parameter(0)
          a = f32[4] negate(p)
          b = f32[4] abs(p)
          ROOT r = f32[4] add(p, p)
        }""")
    module = hlo.parse_module(text)
    comp = module.entry
    other = HloComputation("other")
    module.add_computation(other)
    with control_edge_scope(module):
        with comp.batch_removals():
            a = next(i for i in comp.instructions if i.name == "a")
            a.set_operands([])
            other.move_instruction(a)
            assert a.parent is other and other.instructions == [a]
            assert [i.name for i in comp.post_order()] == ["p", "b", "r"]   # rebuilt first
            b = next(i for i in comp.instructions if i.name == "b")
            other.move_instruction(b)
            comp.sort_topologically()
            assert [i.name for i in comp.instructions] == ["p", "r"]
            c = comp.add_instruction(hlo.HloInstruction("negate", a.shape, [comp.root]))
            comp.remove_instruction(c)
        assert [i.name for i in comp.instructions] == ["p", "r"]
    # Moving within one computation is never deferred.
    with control_edge_scope(module):
        with comp.batch_removals():
            r = comp.root
            comp.move_instruction(r)
            assert comp.instructions.count(r) == 1
        assert [i.name for i in comp.instructions] == ["p", "r"]


def test_callees_first_and_fusible_computations_as_the_plain_walks():
    from pathlib import Path
    from xlapy.passes.instruction_fusion import SEQUENTIAL_CALL_ATTRS, fusible_computations

    def plain_callees_first(root):
        order, seen = [], set()

        def visit(comp):
            if id(comp) in seen:
                return
            seen.add(id(comp))
            for instr in comp.instructions:
                for callee in instr.called_computations():
                    visit(callee)
            order.append(comp)
        visit(root)
        return order

    def plain_fusible(module):
        comps = [module.entry]
        for comp in plain_callees_first(module.entry):
            for instr in comp.instructions:
                for key in SEQUENTIAL_CALL_ATTRS:
                    value = instr.attrs.get(key)
                    for callee in (value if isinstance(value, (tuple, list)) else [value]):
                        if callee is not None and callee not in comps:
                            comps.append(callee)
        return [c for c in comps if not c.is_fusion_computation]

    corpus = Path(__file__).parents[1] / "corpus"
    for name in ("switch_index", "scan_rnn", "while_loop_newton", "cond_pred",
                 "train_step_sgd", "fori_loop_accum"):
        for optimized in (False, True):
            module = hlo.parse_module((corpus / f"{name}.hlo").read_text())
            if optimized:
                passes.cpu_pipeline().run(module)
            assert module.computations_post_order() == plain_callees_first(module.entry)
            assert fusible_computations(module) == plain_fusible(module)


class _Counting(passes.HloModulePass):
    """Reports a change on the runs listed in `changes` (1-based); counts its runs."""

    def __init__(self, name, changes=()):
        self.name, self.changes, self.runs = name, set(changes), 0

    def run(self, module):
        self.runs += 1
        return self.runs in self.changes


def test_a_pass_that_found_nothing_is_not_run_again_until_something_changes(tmp_path):
    text = dedent("""
        HloModule m
        ENTRY e {
          ROOT p = f32[4] parameter(0)
        }""")
    # Round 1: a changes, b and c find nothing. Round 2: a finds nothing, so b and c
    # (nothing changed since they ran) are skipped and the fixed point ends.
    a, b, c = _Counting("a", {1}), _Counting("b"), _Counting("c")
    pipeline = passes.HloPassPipeline("p", [passes.HloPassFix(
        passes.HloPassPipeline("round", [a, b, c]))])
    assert pipeline.run(hlo.parse_module(text))
    assert (a.runs, b.runs, c.runs) == (2, 1, 1)
    assert [(r.name, r.changed) for r in pipeline.records] == [
        ("a", True), ("b", False), ("c", False), ("a", False), ("b", False), ("c", False)]
    assert [r.seconds for r in pipeline.records][-2:] == [0.0, 0.0]
    # A change after b ran: b runs again.
    a, b, c = _Counting("a"), _Counting("b"), _Counting("c", {1})
    passes.HloPassPipeline("p", [passes.HloPassFix(
        passes.HloPassPipeline("round", [a, b, c]))]).run(hlo.parse_module(text))
    assert (a.runs, b.runs, c.runs) == (2, 2, 2)
    # Dumping or explaining shows every pass: nothing skipped.
    for options in ({"dump_dir": tmp_path}, {"explain": True}):
        a, b = _Counting("a", {1}), _Counting("b")
        passes.HloPassPipeline("p", [passes.HloPassFix(
            passes.HloPassPipeline("round", [a, b]))], **options).run(hlo.parse_module(text))
        assert (a.runs, b.runs) == (2, 2)
