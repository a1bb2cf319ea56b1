"""Execution with bad or unusual input: a table of cases against `backend_cpu` executables.

Each row either must raise (exception type + a fragment of its message) or
must work and agree with the reference evaluator (and leave its inputs
untouched). Unusual-but-valid inputs — strided views, Fortran order,
read-only, unaligned buffers, numpy scalars — must just work; wrong counts,
dtypes and shapes must name the parameter and what was expected; results too
large to allocate must raise MemoryError, never crash the process.
"""
from __future__ import annotations

from textwrap import dedent

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from tests.robustness.compare import assert_same_numbers, output_types

ADD = """
HloModule add
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ROOT c = f32[2,3] add(a, b)
}"""
SCALAR = """
HloModule scalar
ENTRY e {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}"""
TUPLE_PARAM = """
HloModule tuple_param
ENTRY e {
  t = (f32[], f32[]) parameter(0)
  ROOT x = f32[] get-tuple-element(t), index=0
}"""
HUGE_OUTPUT = """
HloModule huge_output
ENTRY e {
  a = f32[] parameter(0)
  ROOT b = f32[1099511627776] broadcast(a), dimensions={}
}"""
HUGE_TEMP = """
HloModule huge_temp
ENTRY e {
  a = f32[] parameter(0)
  b = f32[4000000,1000000] broadcast(a), dimensions={}
  ROOT r = f32[] reduce(b, a), dimensions={0,1}, to_apply=add
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}"""
FLOAT_MIX = """
HloModule float_mix
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  s = f32[8] add(a, b)
  m = f32[8] multiply(a, b)
  d = f32[8] divide(a, b)
  x = f32[8] maximum(a, b)
  n = f32[8] minimum(a, b)
  q = f32[8] sqrt(a)
  z = f32[] constant(0)
  r = f32[] reduce(s, z), dimensions={0}, to_apply=add
  i = s32[8] convert(a)
  ROOT t = (f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[], s32[8]) tuple(s, m, d, x, n, q, r, i)
}
add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT sum = f32[] add(lhs, rhs)
}"""
INT_EDGES = """
HloModule int_edges
ENTRY e {
  a = s32[8] parameter(0)
  b = s32[8] parameter(1)
  d = s32[8] divide(a, b)
  r = s32[8] remainder(a, b)
  l = s32[8] shift-left(a, b)
  sa = s32[8] shift-right-arithmetic(a, b)
  sl = s32[8] shift-right-logical(a, b)
  ab = s32[8] abs(a)
  ng = s32[8] negate(a)
  m = s32[8] multiply(a, b)
  ROOT t = (s32[8], s32[8], s32[8], s32[8], s32[8], s32[8], s32[8], s32[8]) tuple(d, r, l, sa, sl, ab, ng, m)
}"""

I32 = np.iinfo(np.int32)
SPECIAL_F32 = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3.4028235e38],
                       np.float32)
INT_A = np.array([7, -7, I32.min, I32.min, I32.max, -1, 1, 5], np.int32)
INT_B = np.array([0, 0, -1, 0, 32, 33, -1, 31], np.int32)


def ones(*dims, dtype=np.float32):
    return np.ones(dims, dtype)


def _unaligned(values: np.ndarray) -> np.ndarray:
    raw = np.zeros(values.nbytes + 1, np.uint8)
    view = raw[1:].view(values.dtype).reshape(values.shape)
    view[...] = values
    assert not view.flags.aligned or view.ctypes.data % values.itemsize
    return view


def _read_only(values: np.ndarray) -> np.ndarray:
    values = values.copy()
    values.flags.writeable = False
    return values


# (id, module, args factory, expected): expected is (ExceptionType, "message fragment"),
# or None for "must work and agree with the evaluator".
CASES = [
    ("too few arguments", ADD, lambda: [ones(2, 3)], (TypeError, "expected 2 arguments, got 1")),
    ("too many arguments", ADD, lambda: [ones(2, 3)] * 3, (TypeError, "expected 2 arguments, got 3")),
    ("float64 for f32", ADD, lambda: [ones(2, 3), ones(2, 3, dtype=np.float64)],
     (TypeError, "parameter 1 (b) must have dtype float32 (f32), got float64")),
    ("python list", ADD, lambda: [ones(2, 3), [[1, 2, 3], [4, 5, 6]]],
     (TypeError, "must have dtype float32 (f32), got int64")),
    ("None", ADD, lambda: [None, ones(2, 3)], (TypeError, "parameter 0 (a) must have dtype")),
    ("big-endian", ADD, lambda: [ones(2, 3).astype(">f4"), ones(2, 3)],
     (TypeError, "got >f4")),
    ("transposed shape", ADD, lambda: [ones(2, 3), ones(3, 2)],
     (ValueError, "parameter 1 (b) must have shape (2, 3), got (3, 2)")),
    ("scalar for array", ADD, lambda: [np.float32(1), ones(2, 3)],
     (ValueError, "must have shape (2, 3), got ()")),
    ("array for scalar", SCALAR, lambda: [ones(1)], (ValueError, "must have shape (), got (1,)")),
    ("tuple parameter", TUPLE_PARAM, lambda: [(np.float32(1), np.float32(2))],
     (NotImplementedError, "tuple parameters are not supported")),
    ("4 TiB result", HUGE_OUTPUT, lambda: [np.float32(1)], (MemoryError, "cannot allocate")),
    ("16 TiB temporary", HUGE_TEMP, lambda: [np.float32(0)], (MemoryError, "cannot allocate")),
    # --- must work ------------------------------------------------------------------------
    ("strided views", ADD, lambda: [ones(4, 6)[::2, ::2], np.arange(12, dtype=np.float32)
                                    .reshape(3, 4)[:2, 1:]], None),
    ("Fortran order", ADD, lambda: [np.asfortranarray(np.arange(6, dtype=np.float32)
                                                      .reshape(2, 3))] * 2, None),
    ("negative strides", ADD, lambda: [ones(2, 3)[::-1, ::-1],
                                       np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1]], None),
    ("broadcast view (stride 0)", ADD, lambda: [np.broadcast_to(np.float32(2), (2, 3)),
                                                ones(2, 3)], None),
    ("read-only", ADD, lambda: [_read_only(ones(2, 3)), _read_only(ones(2, 3))], None),
    ("unaligned", ADD, lambda: [_unaligned(np.arange(6, dtype=np.float32).reshape(2, 3)),
                                ones(2, 3)], None),
    ("numpy scalar", SCALAR, lambda: [np.float32(2.5)], None),
    ("0-d array", SCALAR, lambda: [np.array(-0.0, np.float32)], None),
    ("NaN and inf everywhere", FLOAT_MIX, lambda: [SPECIAL_F32, SPECIAL_F32[::-1].copy()], None),
    ("all NaN", FLOAT_MIX, lambda: [np.full(8, np.nan, np.float32)] * 2, None),
    ("all -inf", FLOAT_MIX, lambda: [np.full(8, -np.inf, np.float32)] * 2, None),
    ("integer edge cases", INT_EDGES, lambda: [INT_A, INT_B], None),
]


@pytest.fixture(scope="module")
def executables():
    cache = {}

    def get(text):
        if text not in cache:
            cache[text] = backend_cpu.compile(hlo.parse_module(dedent(text)))
        return cache[text]
    return get


@pytest.mark.parametrize("name,text,make_args,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_table(executables, name, text, make_args, expected):
    executable = executables(text)
    args = make_args()
    if expected is not None:
        error, fragment = expected
        with pytest.raises(error) as info:
            executable.run(*args)
        assert fragment in str(info.value)
        return
    before = [np.array(a, copy=True) for a in args]
    got = executable.run(*args)
    module = hlo.parse_module(dedent(text))
    want = hlo.evaluate(module, [np.array(a) for a in args])
    assert_same_numbers(got, want, output_types(module), name)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b, err_msg=f"{name}: an input was modified")


def test_integer_edge_cases_follow_xla():
    """DESIGN.md's defined results, spelled out (not just "same as the evaluator")."""
    d, r, shl, sra, srl, ab, ng, _ = backend_cpu.compile(
        hlo.parse_module(dedent(INT_EDGES))).run(INT_A, INT_B)
    assert list(d[:4]) == [-1, -1, I32.min, -1]          # x / 0 = -1; INT_MIN / -1 = INT_MIN
    assert list(r[:4]) == [7, -7, 0, I32.min]            # x % 0 = x; INT_MIN % -1 = 0
    assert shl[4] == 0 and shl[5] == 0                   # shifts by >= 32 give 0 ...
    assert sra[4] == 0 and sra[5] == -1                  # ... or the sign for arithmetic
    assert srl[5] == 0 and shl[6] == 0                   # a negative amount is over-wide too
    assert ab[2] == I32.min and ng[2] == I32.min         # |INT_MIN| and -INT_MIN wrap


def test_float_to_int_saturates():
    *_, converted = backend_cpu.compile(hlo.parse_module(dedent(FLOAT_MIX))).run(
        SPECIAL_F32, SPECIAL_F32)
    assert list(converted[:6]) == [0, 0, I32.max, I32.min, 0, 0]   # NaN -> 0, +-inf saturate
    assert converted[7] == I32.max


# --- the same through jit_compile ---------------------------------------------------------------

def _relu_sum(x, y):
    from xlapy.frontend import ops
    return ops.relu(x + y)


def _huge(a):
    from xlapy.frontend import ops
    return ops.broadcast_to(a, (1 << 20, 1 << 20))


F32 = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
JIT_CASES = [
    ("too few arguments", _relu_sum, lambda: [F32], (TypeError, "missing a required argument")),
    ("too many arguments", _relu_sum, lambda: [F32] * 3, (TypeError, "too many positional")),
    ("shapes that do not broadcast", _relu_sum, lambda: [F32, np.ones((3, 2), np.float32)],
     (ValueError, "cannot be broadcast together")),
    ("an object", _relu_sum, lambda: [F32, object()], (TypeError, "is not an array")),
    ("a string", _relu_sum, lambda: [F32, "abc"], (TypeError, "is not an array")),
    ("None", _relu_sum, lambda: [F32, None], (TypeError, "has no HLO element type")),
    ("int too large for int32", _relu_sum, lambda: [np.ones(3, np.int32), 2 ** 40],
     (OverflowError, "out of bounds for int32")),
    ("4 TiB result", _huge, lambda: [np.float32(1)], (MemoryError, "cannot allocate")),
    ("read-only", _relu_sum, lambda: [_read_only(F32), _read_only(F32)], None),
    ("strided", _relu_sum, lambda: [np.ones((4, 6), np.float32)[::2, ::2], F32], None),
    ("NaN and inf", _relu_sum, lambda: [SPECIAL_F32, SPECIAL_F32[::-1].copy()], None),
    ("empty", _relu_sum, lambda: [np.ones((0, 3), np.float32)] * 2, None),
    ("float16", _relu_sum, lambda: [F32.astype(np.float16)] * 2, None),
]


@pytest.mark.parametrize("name,fn,make_args,expected", JIT_CASES, ids=[c[0] for c in JIT_CASES])
def test_jit_compile_bad_input_table(name, fn, make_args, expected):
    from xlapy.frontend import jit_compile
    f = jit_compile(fn)
    args = make_args()
    if expected is not None:
        error, fragment = expected
        with pytest.raises(error) as info:
            f(*args)
        assert fragment in str(info.value)
        return
    got = np.asarray(f(*args))
    want = np.maximum(args[0] + args[1], 0)
    assert_same_numbers([got], [want], [hlo.from_numpy(want.dtype).name], name)
