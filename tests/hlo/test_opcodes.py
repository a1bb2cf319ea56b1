"""Coverage of the opcode table: every row has a shape rule and a reference
implementation, and every opcode has at least one shape-inference test row.

This replaces the exhaustive switch a C++ compiler would check: adding a row to
OPCODES without its rule, its NumPy semantics or a test fails here.
"""
from __future__ import annotations

import inspect

import pytest

from xlapy.hlo import OPCODES

from .test_shape_inference import OK

NAMES = sorted(OPCODES)


@pytest.mark.parametrize("name", NAMES)
def test_every_opcode_has_a_shape_rule(name):
    rule = OPCODES[name].shape_rule
    assert callable(rule), f"{name} has no shape rule"
    params = list(inspect.signature(rule).parameters)
    assert params[:2] == ["operand_shapes", "attrs"], f"{name}: rule takes {params}"


@pytest.mark.parametrize("name", NAMES)
def test_every_opcode_has_a_reference(name):
    assert callable(OPCODES[name].ref), f"{name} has no reference (evaluator) implementation"


def test_every_opcode_has_a_shape_test_row():
    # Unary and binary ops are all covered by the loops over OPCODES at the end of
    # test_shape_inference.py.
    tested = {row[1] for row in OK}
    untested = [n for n, info in OPCODES.items()
                if n not in tested and info.kind not in ("unary", "binary")]
    assert not untested, f"no shape-inference test row for {untested}"
