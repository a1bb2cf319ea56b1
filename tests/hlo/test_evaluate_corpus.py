"""The evaluator reproduces XLA's own results on every file of the corpus.

Each case has an unoptimized `.hlo` (as JAX emits it) and an optimized
`.opt.hlo` (after XLA's CPU pipeline: fusions, bitcasts, layouts); both must
give XLA's outputs on the recorded arguments, within DESIGN.md's tolerances.
"""
import pytest

from xlapy.hlo import parse_module
from xlapy.hlo.evaluator import evaluate
from tests.corpus_util import assert_all_close, hlo_paths, load_case


def _case_name(path) -> str:
    return path.name.split(".")[0]


@pytest.mark.parametrize("path", hlo_paths(), ids=lambda p: p.name)
def test_evaluate_reproduces_xla(path):
    module = parse_module(path.read_text())
    args, expected = load_case(_case_name(path))
    assert_all_close(evaluate(module, args), expected, path.name)


def test_corpus_is_complete():
    # 95 cases, each unoptimized and optimized: a missing file must not pass silently.
    assert len(hlo_paths()) == 190


def test_denormal_flushing_is_what_makes_ieee_special_match():
    # With XLA's flush-to-zero modelled, log(1e-40) is -inf; without it the case fails.
    path = next(p for p in hlo_paths() if p.name == "unary_ieee_special_f32.hlo")
    module = parse_module(path.read_text())
    args, expected = load_case("unary_ieee_special_f32")
    assert_all_close(evaluate(module, args), expected)
    with pytest.raises(AssertionError):
        assert_all_close(evaluate(module, args, flush_denormals=False), expected)
