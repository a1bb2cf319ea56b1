"""Every corpus file (XLA's own output, before and after its CPU pipeline) verifies,
and the verifier is not vacuous: breaking one shape in each file is caught."""
from __future__ import annotations

import pytest

from xlapy.hlo import Shape, VerifyError, parse_module, verify
from tests.corpus_util import hlo_paths

PATHS = hlo_paths()

# Ops whose result dims are fixed by operands and attributes: an extra dim must be caught.
INFERRED = {"add", "multiply", "subtract", "maximum", "exponential", "negate", "compare",
            "select", "transpose", "slice", "reduce", "concatenate", "pad", "gather",
            "dynamic-slice", "reduce-window", "tuple", "get-tuple-element", "fusion", "call",
            "sort", "while", "dot", "convolution", "reshape", "bitcast", "copy", "convert",
            "bitcast-convert", "scatter", "select-and-scatter", "conditional", "and", "or",
            "xor", "not", "abs", "popcnt", "count-leading-zeros", "shift-left"}


def test_corpus_is_there():
    assert len(PATHS) >= 100


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_corpus_file_verifies(path):
    verify(parse_module(path.read_text()))


def _grow(shape: Shape) -> Shape:
    """The same shape with one more dimension of size 7 (inside the first array of a tuple)."""
    if shape.is_tuple:
        return Shape.tuple_of([_grow(shape.tuple_shapes[0]), *shape.tuple_shapes[1:]])
    return shape.with_dims(shape.dims + (7,))


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_corrupted_shape_is_caught(path):
    module = parse_module(path.read_text())
    victim = next((i for c in module.computations for i in c.instructions
                   if i.opcode in INFERRED and (i.shape.is_tuple or i.shape.is_array)
                   and (not i.shape.is_tuple or i.shape.tuple_shapes)), None)
    if victim is None:
        pytest.skip("no instruction with a fully inferred shape")
    victim.shape = _grow(victim.shape)
    with pytest.raises(VerifyError):
        verify(module)
