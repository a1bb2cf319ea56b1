"""A failing numeric check names what failed: the instruction that computed the output
(opcode, operands, attributes) and, per differing element, its index, the value the
backend gave, the value expected and the operands' values there -- not "f32 output 17".
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_cpu import helpers
from tests.backend_cpu.test_elementwise import _inputs, _module
from tests.corpus_util import assert_close


def _failing(monkeypatch, text: str, spoil) -> str:
    """The message of check_against_evaluator when the backend's outputs are `spoil`ed."""
    module, executable = helpers.compiled(text)

    class Spoiled:
        target = executable.target

        def run(self, *args):
            results = [np.array(r) for r in executable.run(*args)]
            spoil(results)
            return results
    monkeypatch.setattr(helpers, "compiled", lambda _: (module, Spoiled()))
    x, y = _inputs("f32")
    with pytest.raises(AssertionError) as failure, np.errstate(all="ignore"):
        helpers.check_against_evaluator(text, [x, y], "f32")
    return str(failure.value)


def test_a_wrong_element_names_opcode_index_and_inputs(monkeypatch):
    text = _module("f32", ["exponential"], ["power"], ["TOTALORDER"])
    x, y = _inputs("f32")

    def spoil(results):
        results[1][17] = 123.0
    message = _failing(monkeypatch, text, spoil)
    first, second = message.splitlines()[:2]
    assert first.startswith("f32 output 1: %b1") and " power(%x" in first
    assert "1 of 96 elements differ (rtol=2e-05, atol=1e-06, float32)" in first
    assert second.startswith("  at [17]: got 123.0, expected ")
    assert f"x_1={str(x[17])}" in second and f"y_1={str(y[17])}" in second


def test_a_compare_names_its_direction(monkeypatch):
    text = _module("f32", [], [], ["TOTALORDER"])

    def spoil(results):
        results[2][5] = not results[2][5]
    first = _failing(monkeypatch, text, spoil).splitlines()[0]
    assert first.startswith("f32 output 2: %c2")
    assert "compare(" in first and "direction=LT" in first and "type=TOTALORDER" in first
    assert "(exact, bool)" in first


def test_assert_close_lists_the_first_elements_and_counts_the_rest():
    with pytest.raises(AssertionError) as failure:
        assert_close(np.arange(20), np.arange(20) * 2, "ints", {"x": np.arange(20), "k": 3})
    lines = str(failure.value).splitlines()
    assert lines[0] == "ints: 19 of 20 elements differ (exact, int64)"
    assert lines[1] == "  at [1]: got 1, expected 2  <- x=1, k=3"
    assert lines[-1] == "  ... and 11 more"


def test_assert_close_still_accepts_what_it_accepted():
    assert_close(np.float32([1, np.nan, -np.inf]), np.float32([1 + 1e-6, np.nan, -np.inf]))
    with pytest.raises(AssertionError, match=r"at \[1\]: got 1.0, expected 2.0"):
        assert_close(np.float32([0, 1]), np.float32([0, 2]))
