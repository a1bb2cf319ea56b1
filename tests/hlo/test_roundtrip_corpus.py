"""Every corpus file parses, prints canonically, and survives print -> parse -> print.

`assert_modules_equal` is the structural check used here and by the generated
round-trip tests of test_printer.py: same computations, instructions, opcodes,
shapes (with layouts), operands, attributes and literal values (NaN == NaN).
"""
import time

import numpy as np
import pytest

from xlapy.hlo import HloComputation, RawAttr, parse_module, print_module
from tests.corpus_util import hlo_paths

PATHS = hlo_paths()


def assert_modules_equal(a, b):
    """Structural equality of two modules; the first difference fails with its location."""
    assert a.name == b.name
    assert a.config == b.config
    assert a.entry.name == b.entry.name
    comps_a = {c.name: c for c in a.computations}
    comps_b = {c.name: c for c in b.computations}
    assert comps_a.keys() == comps_b.keys()
    for name, comp in comps_a.items():
        _assert_computations_equal(comp, comps_b[name])


def _assert_computations_equal(a, b):
    assert [i.name for i in a.instructions] == [i.name for i in b.instructions], a.name
    assert a.root.name == b.root.name, a.name
    assert a.is_fusion_computation == b.is_fusion_computation, a.name
    for x, y in zip(a.instructions, b.instructions):
        where = f"{a.name}/{x.name}"
        assert x.opcode == y.opcode, where
        assert x.shape == y.shape and x.shape.to_text() == y.shape.to_text(), where
        assert [o.name for o in x.operands] == [o.name for o in y.operands], where
        assert [p.name for p in x.control_predecessors] == \
            [p.name for p in y.control_predecessors], where
        assert x.parameter_number == y.parameter_number, where
        assert list(x.attrs) == list(y.attrs), where
        for key in x.attrs:
            assert _attr_key(x.attrs[key]) == _attr_key(y.attrs[key]), f"{where} {key}"
        _assert_literals_equal(x.literal, y.literal, where)


def _attr_key(value):
    # Computations compare by name (they are different objects in the two modules).
    if isinstance(value, HloComputation):
        return ("computation", value.name)
    if isinstance(value, tuple) and value and isinstance(value[0], HloComputation):
        return ("computations", tuple(c.name for c in value))
    if isinstance(value, RawAttr):
        return ("raw", value.text)
    return value


def _assert_literals_equal(x, y, where):
    if x is None or y is None:
        assert x is None and y is None, where
        return
    if isinstance(x, tuple):
        assert isinstance(y, tuple) and len(x) == len(y), where
        for u, v in zip(x, y):
            _assert_literals_equal(u, v, where)
        return
    assert x.dtype == y.dtype and x.shape == y.shape, where
    np.testing.assert_array_equal(x, y, err_msg=where)   # NaN == NaN here
    if x.dtype.kind == "f":   # and the sign of zero and of NaN survives
        np.testing.assert_array_equal(np.signbit(x), np.signbit(y), err_msg=where)


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_corpus_file_round_trips(path):
    module = parse_module(path.read_text())
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text
    assert_modules_equal(module, again)


def test_corpus_has_both_styles():
    names = [p.name for p in PATHS]
    assert len(names) >= 190
    assert any(n.endswith(".opt.hlo") for n in names)
    assert any(not n.endswith(".opt.hlo") for n in names)


def test_whole_corpus_parses_in_a_few_seconds():
    texts = [p.read_text() for p in PATHS]
    parse_module(texts[0])   # the Lark object is built once per process; not timed
    start = time.perf_counter()
    for text in texts:
        parse_module(text)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"parsing the corpus took {elapsed:.2f} s"


def test_corpus_values_survive_printing():
    # The printer drops nothing: every constant and attribute of the file comes back.
    for path in PATHS:
        module = parse_module(path.read_text())
        for instr in module.instructions():
            if instr.opcode == "constant" and instr.literal is not None:
                assert instr.literal.dtype == np.dtype(instr.shape.dtype.numpy), instr.name
                assert instr.literal.shape == instr.shape.dims, instr.name
