"""Random shapes and dtypes through the elementwise ops, against Python-level references.

Integer references compute with Python's unbounded integers and wrap explicitly;
float references compute in f64 (or with `math`) and compare within a few ulps.
"""
import math

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from tests.hlo.evaluator_util import run_op

INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOAT_TYPES = [np.float16, np.float32, np.float64]
FLOAT_RTOL = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-14}


def _atol(dtype) -> float:
    # Results below the smallest normal may be flushed to zero (XLA's CPU model).
    return float(np.finfo(dtype).tiny)

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


@st.composite
def int_pairs(draw):
    dtype = draw(st.sampled_from(INT_TYPES))
    shape = draw(shapes)
    return (draw(hnp.arrays(dtype, shape)), draw(hnp.arrays(dtype, shape)))


@st.composite
def float_pairs(draw):
    dtype = draw(st.sampled_from(FLOAT_TYPES))
    shape = draw(shapes)
    elements = st.floats(-1e4, 1e4, width=np.dtype(dtype).itemsize * 8, allow_subnormal=False)
    return (draw(hnp.arrays(dtype, shape, elements=elements)),
            draw(hnp.arrays(dtype, shape, elements=elements)))


def _wrap(value: int, dtype) -> int:
    info = np.iinfo(dtype)
    span = 1 << info.bits
    value %= span
    return value - span if info.min < 0 and value > info.max else value


def _c_divide(a: int, b: int, dtype) -> tuple[int, int]:
    """C's truncating division with XLA's results for /0 and MIN/-1."""
    if b == 0:
        return _wrap(-1, dtype), a
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return _wrap(q, dtype), a - q * b


def _int_reference(op, a, b):
    dtype = a.dtype
    fn = {
        "add": lambda x, y: x + y, "subtract": lambda x, y: x - y, "multiply": lambda x, y: x * y,
        "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
        "maximum": max, "minimum": min,
        "divide": lambda x, y: _c_divide(x, y, dtype)[0],
        "remainder": lambda x, y: _c_divide(x, y, dtype)[1],
    }[op]
    flat = [_wrap(fn(int(x), int(y)), dtype) for x, y in zip(a.ravel(), b.ravel())]
    return np.array(flat, dtype=object).reshape(a.shape).astype(dtype)


@given(int_pairs(), st.sampled_from(["add", "subtract", "multiply", "and", "or", "xor",
                                     "maximum", "minimum", "divide", "remainder"]))
def test_integer_binary_ops(pair, op):
    a, b = pair
    np.testing.assert_array_equal(run_op(op, a, b), _int_reference(op, a, b))


@given(float_pairs(), st.sampled_from(["add", "subtract", "multiply", "divide", "maximum", "minimum"]))
def test_float_binary_ops(pair, op):
    a, b = pair
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        wide = {"add": x + y, "subtract": x - y, "multiply": x * y, "divide": x / y,
                "maximum": np.maximum(x, y), "minimum": np.minimum(x, y)}[op]
    out = run_op(op, a, b)
    assert out.dtype == a.dtype and out.shape == a.shape
    with np.errstate(all="ignore"):
        expected = wide.astype(a.dtype)
    np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64),
                               rtol=FLOAT_RTOL[a.dtype.type], atol=_atol(a.dtype), equal_nan=True)


# Where math raises ValueError but IEEE gives -inf (log's pole).
POLES = {math.log: 0.0, math.log1p: -1.0}


def _math_or_special(fn, v):
    try:
        return fn(v)
    except OverflowError:
        return math.inf
    except ValueError:
        return -math.inf if v == POLES.get(fn) else math.nan


UNARY = {
    "exponential": math.exp, "log": math.log, "sqrt": math.sqrt, "tanh": math.tanh,
    "sine": math.sin, "log-plus-one": math.log1p, "erf": math.erf,
}


@given(float_pairs(), st.sampled_from(sorted(UNARY)))
def test_float_unary_ops(pair, op):
    x = pair[0]
    expected = np.array([_math_or_special(UNARY[op], float(v)) for v in x.ravel()], np.float64)
    with np.errstate(all="ignore"):
        expected = expected.astype(x.dtype).astype(np.float64).reshape(x.shape)
    out = run_op(op, x)
    assert out.dtype == x.dtype
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=FLOAT_RTOL[x.dtype.type],
                               atol=_atol(x.dtype), equal_nan=True)


@given(int_pairs())
def test_int_convert_round_trip_through_s64_wraps(pair):
    a = pair[0]
    wide = run_op("convert", a, result="s64")
    np.testing.assert_array_equal(wide, np.array([_wrap(int(v), np.int64) for v in a.ravel()],
                                                 dtype=np.int64).reshape(a.shape))
    back = run_op("convert", wide, result={np.dtype(t): n for t, n in zip(
        INT_TYPES, ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"])}[a.dtype])
    np.testing.assert_array_equal(back, a)
