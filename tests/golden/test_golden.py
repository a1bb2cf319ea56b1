"""Golden tests: HLO text in, expected HLO text out, per pass or pipeline.

Layout: `tests/golden/<passes>/<case>.in.hlo` is the input and
`<case>.out.hlo` the expected module after running `<passes>` on it, where
`<passes>` is a pass list as `hlo-opt --passes` takes it (`dce`,
`instruction-fusion,multi-output-fusion`) or `pipeline-<name>` for a named
pipeline. An expected text equal to the (printed) input means "must not
change", and then the pass must also report no change.

`pytest --update-golden` rewrites every `.out.hlo` from the current output;
review the diff like any code change.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo
from xlapy import passes
from tests.corpus_util import assert_all_close

GOLDEN = Path(__file__).parent
CASES = sorted(GOLDEN.glob("*/*.in.hlo"))


def make_pipeline(directory: str) -> passes.HloPassPipeline:
    if directory.startswith("pipeline-"):
        return passes.named_pipeline(directory[len("pipeline-"):], verify_each=True)
    return passes.pipeline_from_text(directory, verify_each=True)


def test_every_pass_has_golden_cases():
    covered = {name for path in CASES for name in path.parent.name.split(",")}
    missing = set(passes.pass_names()) - covered
    assert not missing, f"passes without golden tests: {sorted(missing)}"


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name[:-7]}")
def test_golden(path: Path, request):
    module = hlo.parse_module(path.read_text())
    hlo.verify(module)
    before = hlo.print_module(module)
    changed = make_pipeline(path.parent.name).run(module)
    actual = hlo.print_module(module)
    expected_path = path.with_name(path.name[:-len(".in.hlo")] + ".out.hlo")
    if request.config.getoption("--update-golden"):
        expected_path.write_text(actual)
    if not expected_path.exists():
        pytest.fail(f"{expected_path.name} is missing: run pytest --update-golden")
    assert actual == expected_path.read_text(), f"{expected_path.name} differs (--update-golden?)"
    assert changed == (actual != before), "the pass reported `changed` wrongly"
    # The output is itself valid, canonical HLO.
    reparsed = hlo.parse_module(actual)
    hlo.verify(reparsed)
    assert hlo.print_module(reparsed) == actual
    assert_same_numbers(hlo.parse_module(path.read_text()), reparsed)


def assert_same_numbers(before: hlo.HloModule, after: hlo.HloModule) -> None:
    """The rewritten module computes what the input did, on random inputs."""
    if any(i.has_side_effect() for i in before.instructions()):
        return             # custom calls and friends: the evaluator cannot run them
    if any(i.info.collective or i.info.per_device for i in after.instructions()):
        return             # a per-device program (spmd-partitioner): its numbers are
                           # tested against the whole module in tests/passes/test_spmd_*
    rng = np.random.default_rng(0)
    args = []
    for p in before.entry.parameters:
        if not p.shape.is_array:
            return
        dtype = hlo.numpy_dtype(p.shape.element_type)
        if p.shape.dtype.is_float:
            args.append(rng.standard_normal(p.shape.dims).astype(dtype))
        else:
            args.append(rng.integers(0, 5, size=p.shape.dims).astype(dtype))
    assert_all_close(hlo.evaluate(after, args), hlo.evaluate(before, args), "golden")
