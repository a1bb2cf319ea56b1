"""The fusion passes explain themselves: with `explain=True` a pipeline collects every
fusion decision (pass_base.FusionNote) -- what was fused, and why the rest was not --
and explaining changes nothing in what the passes do."""
from __future__ import annotations

from pathlib import Path

import pytest

from xlapy import hlo, passes
from xlapy.passes.pass_base import FusionNote, explain_lines
from tests.corpus_util import CORPUS
from tests.passes.helpers import parse

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def explain(pass_names: str, text: str) -> list[str]:
    """The explanation lines of running `pass_names` on `text`."""
    module = parse(text)
    pipeline = passes.pipeline_from_text(pass_names, verify_each=True, explain=True)
    pipeline.run(module)
    return explain_lines(pipeline.explanations)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*/*.in.hlo")),
                         ids=lambda p: f"{p.parent.name}/{p.name[:-7]}")
def test_explaining_changes_nothing(path):
    def run(explain_flag):
        module = hlo.parse_module(path.read_text())
        name = path.parent.name
        options = dict(verify_each=True, explain=explain_flag)
        pipeline = passes.named_pipeline(name[len("pipeline-"):], **options) \
            if name.startswith("pipeline-") else passes.pipeline_from_text(name, **options)
        changed = pipeline.run(module)
        return changed, hlo.print_module(module), pipeline
    quiet, explained = run(False), run(True)
    assert quiet[:2] == explained[:2]
    assert quiet[2].explanations == []
    # The passes are left as they were: no log stays attached.
    assert all(p.explain_log is None for p in explained[2].passes
               if isinstance(p, passes.HloModulePass))


def test_row_fusion_names_the_column_reduce_it_leaves_out():
    lines = explain("row-fusion", (GOLDEN / "row-fusion/keeps_column_and_shared.in.hlo").read_text())
    assert "row-fusion: y: fused 4 instructions into row_fusion" in lines
    assert "row-fusion: y <- e: declined: out outside the region reads it too" in lines
    # The column reduce stays out of y's row fusion; it is centered's column form.
    assert "row-fusion: centered: fused 4 instructions into row_fusion.1 (the column form, " \
           "reducing dimension 0)" in lines


def test_a_softmax_is_one_row_fusion():
    lines = explain("call-inliner,algebraic-simplifier,cse,dce,row-fusion",
                    (CORPUS / "softmax_f32.hlo").read_text())
    (line,) = [line for line in lines if line.startswith("row-fusion")]
    assert line.startswith("row-fusion: div.7: fused ") and line.endswith(" into row_fusion")


def test_instruction_fusion_records_its_policy():
    lines = explain("instruction-fusion", (GOLDEN / "instruction-fusion/"
                                           "no_duplicate_expensive_or_dot.in.hlo").read_text())
    assert "instruction-fusion: r <- d: declined: dot is not loop-fusible" in lines
    assert "instruction-fusion: a <- e: declined: would duplicate an expensive producer" in lines
    assert not any("parameter" in line for line in lines)      # never fusible: not noted


def test_multi_output_fusion_says_why_siblings_stay_apart():
    lines = explain("multi-output-fusion",
                    (GOLDEN / "multi-output-fusion/sibling_reductions.in.hlo").read_text())
    assert "multi-output-fusion: s <- m: merged (siblings reading x)" in lines
    assert "multi-output-fusion: s <- n: declined: iteration spaces differ: a reduce of " \
           "[8, 16] over [1], a loop over [8, 16]" in lines
    assert "multi-output-fusion: a <- n: merged (the producer kept as an output)" in lines


def test_horizontal_fusion_notes_size_and_dependence():
    lines = explain("instruction-fusion,horizontal-fusion", """
        HloModule h
        ENTRY main {
          big = f32[256,256] parameter(0)
          small = f32[16] parameter(1)
          nb = f32[256,256] negate(big)
          ns = f32[16] negate(small)
          es = f32[16] exponential(ns)
          ab = f32[256,256] abs(nb)
          e2 = f32[16] exponential(small)
          ROOT t = (f32[256,256], f32[16], f32[16]) tuple(ab, es, e2)
        }""")
    assert any(line.startswith("horizontal-fusion: loop_fusion") and
               "524288 bytes read and written, more than" in line for line in lines), lines
    assert any(line.startswith("horizontal-fusion: ") and line.endswith(": merged")
               for line in lines), lines


def test_notes_print_one_line_each_and_repeat_once():
    a = FusionNote("row-fusion", "y", "", None, "fused 3 instructions into row_fusion")
    b = FusionNote("instruction-fusion", "f", "e", "would duplicate an expensive producer")
    assert str(b) == "instruction-fusion: f <- e: declined: would duplicate an expensive producer"
    assert explain_lines([b, a, b]) == [str(b), str(a)]


def test_a_pass_outside_a_pipeline_can_explain_too():
    module = parse((GOLDEN / "instruction-fusion/no_duplicate_expensive_or_dot.in.hlo").read_text())
    fusion = passes.CpuInstructionFusion()
    fusion.explain_log = []
    fusion.run(module)
    assert any(note.reason == "would duplicate an expensive producer"
               for note in fusion.explain_log)
