"""The pass infrastructure: pipelines, fixed points, dumps, verification, the registry."""
import pytest

from xlapy import hlo
from xlapy.passes import (DCE, HloModulePass, HloPassFix, HloPassPipeline, PassError, make_pass,
                    pass_names, pipeline_from_text)
from tests.passes.helpers import parse

MODULE = """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  dead = f32[4] exponential(p)
  ROOT n = f32[4] negate(p)
}
"""


class CountingPass(HloModulePass):
    """Reports a change for its first `changes` runs."""

    def __init__(self, name="counting", changes=0):
        self.name, self.changes, self.runs = name, changes, 0

    def run(self, module):
        self.runs += 1
        return self.runs <= self.changes


class BreakingPass(HloModulePass):
    name = "breaks-shapes"

    def run(self, module):
        module.entry.root.shape = hlo.Shape("f32", (5,))
        return True


def test_pipeline_runs_in_order_and_records_each_pass():
    first, second = CountingPass("first", 1), CountingPass("second", 0)
    pipeline = HloPassPipeline("p", [first, DCE(), second])
    assert pipeline.run(parse(MODULE)) is True
    assert [(r.name, r.changed) for r in pipeline.records] == [
        ("first", True), ("dce", True), ("second", False)]
    assert all(r.seconds >= 0 for r in pipeline.records)


def test_pipeline_reports_no_change_honestly():
    module = parse(MODULE)
    DCE().run(module)
    assert HloPassPipeline("p", [DCE(), CountingPass()]).run(module) is False


def test_verify_each_names_the_culprit():
    pipeline = HloPassPipeline("p", [DCE(), BreakingPass()], verify_each=True)
    with pytest.raises(hlo.VerifyError, match="after pass breaks-shapes"):
        pipeline.run(parse(MODULE))


def test_dump_dir_has_one_numbered_file_per_pass(tmp_path):
    pipeline = HloPassPipeline("p", [DCE(), HloPassFix(CountingPass("c", 1))], dump_dir=tmp_path)
    pipeline.run(parse(MODULE))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["000-input.hlo", "001-dce.hlo", "002-c.hlo", "003-c.hlo"]
    assert "exponential" in (tmp_path / "000-input.hlo").read_text()
    assert "exponential" not in (tmp_path / "001-dce.hlo").read_text()


def test_fixed_point_repeats_until_no_change():
    inner = CountingPass(changes=2)
    assert HloPassFix(inner).run(parse(MODULE)) is True
    assert inner.runs == 3
    unchanged = CountingPass(changes=0)
    assert HloPassFix(unchanged).run(parse(MODULE)) is False


def test_fixed_point_cap_is_an_error():
    with pytest.raises(PassError, match="fixed point in 4 iterations"):
        HloPassFix(CountingPass(changes=100), max_iterations=4).run(parse(MODULE))


def test_nested_pipelines_are_recorded_by_the_outer_one():
    inner = HloPassPipeline("inner", [CountingPass("a", 1), CountingPass("b")])
    outer = HloPassPipeline("outer", [HloPassFix(inner), DCE()])
    outer.run(parse(MODULE))
    assert [r.name for r in outer.records] == ["a", "b", "a", "b", "dce"]


def test_registry_builds_passes_by_name():
    assert {"dce", "cse", "constant-folding", "algebraic-simplifier", "call-inliner",
            "tuple-simplifier", "instruction-fusion", "multi-output-fusion",
            "horizontal-fusion", "row-fusion"} <= set(pass_names())
    pipeline = pipeline_from_text("dce, cse")
    assert [p.name for p in pipeline.passes] == ["dce", "cse"]
    assert make_pass("dce") is not make_pass("dce")     # fresh instances


def test_unknown_pass_suggests_close_names():
    with pytest.raises(PassError, match="unknown pass 'algebraic-simplfier'.*algebraic-simplifier"):
        make_pass("algebraic-simplfier")
    with pytest.raises(PassError, match="empty"):
        pipeline_from_text(" , ")
