"""The default pipeline on the real XLA corpus: same numbers, fewer kernels, idempotent.

Every case is optimized once per session (cached); the tests then check that
the result verifies, prints canonically, re-parses and evaluates to XLA's
outputs, that its kernel count beats XLA's own optimized modules in total
(and is exactly 1 for the row-wise normalizations), and that a second run of
the pipeline changes nothing.
"""
from __future__ import annotations

import functools

import pytest

from xlapy import hlo
from xlapy import passes
from xlapy.passes import count_kernels
from tests.corpus_util import CORPUS, assert_all_close, case_names, load_case

CASES = case_names()
ROW_NORMALIZATIONS = ["softmax_f32", "log_softmax_f32", "layernorm_f32", "rmsnorm_f32"]


@functools.lru_cache(maxsize=None)
def optimized_text(filename: str) -> str:
    module = hlo.parse_module((CORPUS / filename).read_text())
    passes.cpu_pipeline(verify_each=True).run(module)
    return hlo.print_module(module)


@functools.lru_cache(maxsize=None)
def xla_kernels(name: str) -> int:
    return count_kernels(hlo.parse_module((CORPUS / f"{name}.opt.hlo").read_text()))


def ours_kernels(name: str) -> int:
    return count_kernels(hlo.parse_module(optimized_text(f"{name}.hlo")))


@pytest.mark.parametrize("name", CASES)
def test_pipeline_keeps_results(name):
    text = optimized_text(f"{name}.hlo")
    module = hlo.parse_module(text)
    hlo.verify(module)
    assert hlo.print_module(module) == text, "printer output does not re-parse identically"
    args, expected = load_case(name)
    assert_all_close(hlo.evaluate(module, args), expected, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_pipeline_keeps_results_of_xla_optimized_input(name):
    module = hlo.parse_module(optimized_text(f"{name}.opt.hlo"))
    args, expected = load_case(name)
    assert_all_close(hlo.evaluate(module, args), expected, f"{name}.opt.hlo")


@pytest.mark.parametrize("name", CASES)
def test_pipeline_is_idempotent(name):
    module = hlo.parse_module(optimized_text(f"{name}.hlo"))
    assert passes.cpu_pipeline().run(module) is False
    assert hlo.print_module(module) == optimized_text(f"{name}.hlo")


def test_kernel_count_beats_xla():
    rows, ours_total, xla_total = [], 0, 0
    for name in CASES:
        ours, xla = ours_kernels(name), xla_kernels(name)
        ours_total, xla_total = ours_total + ours, xla_total + xla
        rows.append(f"{name:32s} {ours:6d} {xla:6d}")
    print("\n".join([f"{'case':32s} {'xlapy':>6s} {'XLA':>6s}"] + rows
                    + [f"{'total':32s} {ours_total:6d} {xla_total:6d}"]))
    assert ours_total <= xla_total


@pytest.mark.parametrize("name", ROW_NORMALIZATIONS)
def test_row_normalizations_are_one_kernel(name):
    assert ours_kernels(name) == 1
    assert xla_kernels(name) >= 3
    module = hlo.parse_module(optimized_text(f"{name}.hlo"))
    assert passes.fusion_utils.fusion_kind(module.entry.root) == "row"
