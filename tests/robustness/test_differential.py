"""Differential fuzzing: random valid modules through every layer, checked against each other.

(1) print -> parse -> print gives the identical text;
(2) `passes.cpu_pipeline()` keeps the numbers: the optimized module evaluates
    to what the original does (reference evaluator on both);
(3) `backend_cpu.compile(module).run(*args)` computes what the evaluator does.

"The same numbers" is `compare.assert_same_numbers`: ints exact, NaN matches
NaN, floats within DESIGN.md's tolerances. Legitimate float differences are
few: the pipeline may drop the sign of a zero (`x + 0 -> x`) but may not
reassociate or otherwise round differently, and both sides run on the same
evaluator, so (2) draws every op and demands the same bits (`exact=True`).
The backend may reassociate reductions
and dots (XLA's reduce order is unspecified) and its exp/log/tanh are
polynomial approximations whose last-bit differences later ops can magnify
(`exp(a) - exp(b)`), so (3) draws only correctly rounded ops and values whose
sums are exact, or every value but no order-dependent float sums (3c);
approximations are tested alone, at the root (3b).

Examples: the "ci" profile of tests/conftest.py; `--hypothesis-profile=long`
runs many more. A failing example shrinks to a small module: save it under
tests/regressions/ (see that package's README) so it is run forever after.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import event, given, note, settings, strategies as st

from xlapy import backend_cpu
from xlapy import hlo
from xlapy import passes
from tests.hlo_strategies import ALL_TYPES, FLOAT_TYPES, TRANSCENDENTAL_UNARY, GenOptions, arrays, \
    hlo_cases, hlo_modules
from tests.robustness.compare import assert_same_numbers, output_types

# The CPU backend is the slow part (an LLVM compile per example): smaller modules,
# exact arithmetic only (see the module docstring); bf16 is not supported by it yet.
BACKEND_EXAMPLES = 1
# Round trip and pipeline are cheap: twice the profile's examples.
CHEAP_EXAMPLES = 2
BACKEND_OPTIONS = GenOptions(max_instructions=20, transcendental=False, exact_sums=True,
                             dtypes=tuple(t for t in ALL_TYPES if t != "bf16"))
def scaled(fraction: float):
    """Settings for `fraction` of the active profile's examples (at least 5)."""
    return settings(max_examples=max(5, int(settings().max_examples * fraction)))


def note_case(module, args) -> None:
    """Shows the module text and arguments with a falsifying example (a repr is not enough)."""
    note(hlo.print_module(module))
    for i, a in enumerate(args):
        note(f"arg{i} = np.{np.asarray(a).dtype}({np.asarray(a).tolist()!r})")


# --- (1) text round trip ---------------------------------------------------------------------

@scaled(CHEAP_EXAMPLES)
@given(hlo_modules())
def test_print_parse_round_trip(module):
    text = hlo.print_module(module)
    note(text)
    reparsed = hlo.parse_module(text)
    hlo.verify(reparsed)
    assert hlo.print_module(reparsed) == text


# --- (2) the pipeline keeps the numbers ---------------------------------------------------------

def optimized_copy(module) -> hlo.HloModule:
    copy = hlo.parse_module(hlo.print_module(module))
    passes.cpu_pipeline().run(copy)
    hlo.verify(copy, context="after the cpu pipeline")
    return copy


@scaled(CHEAP_EXAMPLES)
@given(hlo_cases())
def test_cpu_pipeline_keeps_the_numbers(case):
    module, args = case
    note_case(module, args)
    expected = hlo.evaluate(module, args)
    optimized = optimized_copy(module)
    got = hlo.evaluate(optimized, args)
    assert_same_numbers(got, expected, output_types(module),
                        f"pipeline vs evaluator\n{hlo.print_module(module)}", exact=True)


# --- (3) the backend computes what the evaluator does ---------------------------------------------

def run_backend(module, args, pipeline=None):
    """The backend's results, or None when it does not support an opcode yet."""
    try:
        # Not the disk cache: each example is a real compile, and thousands of
        # throwaway modules would evict the user's useful entries.
        options = backend_cpu.CompileOptions(pipeline=pipeline, disk_cache=False)
        executable = backend_cpu.compile(module, options)
    except NotImplementedError as e:
        event(f"backend: not implemented: {str(e).split(':')[-1].strip()[:60]}")
        return None
    return executable.run(*args)


def check_backend(module, args, pipeline=None) -> None:
    """The backend's numbers equal the evaluator's (unless an opcode is not supported yet)."""
    note_case(module, args)
    expected = hlo.evaluate(module, args)
    got = run_backend(module, args, pipeline)
    if got is not None:
        assert_same_numbers(got, expected, output_types(module),
                            f"backend (pipeline={pipeline}) vs evaluator\n{hlo.print_module(module)}")


@scaled(BACKEND_EXAMPLES)
@given(hlo_cases(BACKEND_OPTIONS))
def test_backend_matches_evaluator(case):
    module, args = case
    check_backend(module, args)


@scaled(BACKEND_EXAMPLES / 2)
@given(hlo_cases(dataclasses.replace(BACKEND_OPTIONS, exact_sums=False, float_sums=False)))
def test_backend_matches_evaluator_on_extreme_values(case):
    """Every value (max floats, huge ints, denormals) where no op's result depends on order."""
    module, args = case
    check_backend(module, args)


@scaled(BACKEND_EXAMPLES / 2)
@given(hlo_cases(BACKEND_OPTIONS))
def test_backend_with_cpu_pipeline_matches_evaluator(case):
    module, args = case
    check_backend(module, args, pipeline="default")


def _approximation_module(opcode: str, element_type: str, dims: tuple[int, ...]):
    b = hlo.HloBuilder("approx")
    b.op(opcode, [b.parameter(hlo.Shape(element_type, dims))])
    return b.build_module()


APPROX_TYPES = tuple(t for t in FLOAT_TYPES if t != "bf16")


def _typed_arrays():
    dims = st.lists(st.sampled_from((0, 1, 2, 3, 7, 16)), max_size=2).map(tuple)
    return st.tuples(st.sampled_from(APPROX_TYPES), dims).flatmap(
        lambda td: st.tuples(st.just(td[0]), arrays(td[0], td[1])))


@pytest.mark.parametrize("opcode", TRANSCENDENTAL_UNARY)
@scaled(0.1)
@given(typed=_typed_arrays())
def test_backend_approximations_at_the_root(opcode, typed):
    """(3b) exp, log, tanh, ... applied once to drawn values, so nothing magnifies their error."""
    element_type, arg = typed
    module = _approximation_module(opcode, element_type, arg.shape)
    check_backend(module, [arg])
