"""Texts in XLA's older or looser spellings (hlo/parser.py reads them), compiled and
run against the evaluator: the rank-1 start-index operand of dynamic-slice and
dynamic-update-slice, and a scalar value written for an array constant."""
import numpy as np

from xlapy import backend_cpu, hlo
from tests.corpus_util import assert_close

DS = """HloModule m
ENTRY e {
  x = f32[6,9] parameter(0)
  i = s32[2] parameter(1)
  ROOT d = f32[2,4] dynamic-slice(x, i), dynamic_slice_sizes={2,4}
}"""

DUS = """HloModule m
ENTRY e {
  x = f32[6,9] parameter(0)
  u = f32[2,4] parameter(1)
  i = s64[2] parameter(2)
  bias = f32[9] constant(15)
  b = f32[6,9] broadcast(bias), dimensions={1}
  d = f32[6,9] dynamic-update-slice(x, u, i)
  ROOT r = f32[6,9] add(d, b)
}"""


def _compare(text, args):
    expected = hlo.evaluate(hlo.parse_module(text), args)
    got = backend_cpu.compile(hlo.parse_module(text)).run(*args)
    for g, e in zip(got, expected):
        assert_close(np.asarray(g), np.asarray(e), "old form")


def test_index_vector_forms_compile_like_the_evaluator():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    x[0, 0], x[1, 2] = np.nan, -np.inf
    u = rng.standard_normal((2, 4)).astype(np.float32)
    for start in ([0, 0], [3, 2], [5, 8], [-1, 100]):
        _compare(DS, [x, np.array(start, np.int32)])
        _compare(DUS, [x, u, np.array(start, np.int64)])


def test_in_place_collective_permute_is_refused_by_evaluator_and_backend():
    """Read and verified (tests/hlo/test_xla_syntax.py) but never computed: both the
    plain and the -start form give the same one-line reason (they computed garbage)."""
    import pytest
    from tests.hlo.test_xla_syntax import ACCEPTED
    texts = dict(ACCEPTED)
    x, out = np.ones((4, 6), np.float32), np.zeros((16, 8), np.float32)
    for key in ("in_place_collective_permute", "in_place_collective_permute_start"):
        module = hlo.parse_module(texts[key])
        with pytest.raises(hlo.EvaluationError, match="in-place collective-permute"):
            hlo.evaluate_devices(module, [[x, out]] * 2)
        with pytest.raises(NotImplementedError, match="in-place collective-permute .* not "
                                                      "computed"):
            backend_cpu.compile(module, backend_cpu.CompileOptions(num_devices=2))
