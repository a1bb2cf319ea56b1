"""backend_cpu's native folds for the runtime's in-process all-reduce (collective_fold.py):
the same bits as numpy's fold in the same order, for every op and dtype it takes, any
number of parts and outs, any alignment and range, on every target the host runs."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.backend_cpu import collective_fold
from xlapy.runtime import collective_util

UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
         "and": np.bitwise_and, "or": np.bitwise_or}
DTYPES = ["float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
          "int64", "uint64"]


def values(dtype, size, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        x = (rng.standard_normal(size) * 10.0 ** rng.integers(-30, 30, size)).astype(dtype)
        special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0,
                            np.finfo(dtype).tiny / 4, np.finfo(dtype).max], dtype)
        x[rng.integers(0, size, 24)] = rng.choice(special, 24)
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)


def expected(op, parts):
    out = parts[0].copy()
    with np.errstate(all="ignore"):
        for p in parts[1:]:
            UFUNC[op](out, p, out=out)
    return out


def same_bits(a, b):
    """Equal bits, except that a NaN's sign and payload may differ (which operand's NaN
    an x86 add passes on depends on the order LLVM gives a commutative add)."""
    if a.dtype.kind != "f":
        return a.tobytes() == b.tobytes()
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and a[~nan].tobytes() == b[~nan].tobytes()


def check_fold(op, dtype, target, shapes):
    rng = np.random.default_rng(7)
    for parts, outs in shapes:
        plain = collective_fold.build(op, dtype, parts, outs, False, target)
        streaming = collective_fold.build(op, dtype, parts, outs, True, target)
        size = 517
        ins = [values(dtype, size, rng) for _ in range(parts)]
        want = expected(op, ins)
        for offset in (0, 1, 5):          # outs off the 64-byte lines, alike
            buffers = [np.zeros(size + 8, dtype) for _ in range(outs)]
            views = [b[offset:offset + size] for b in buffers]
            collective_util.run_native_fold(plain, streaming, ins, views, 0, size)
            for v in views:
                assert same_bits(v, want), (op, dtype, parts, outs, offset)
        # A sub-range leaves the rest alone; outs aligned differently take cached stores.
        buffers = [np.zeros(size + 8, dtype) for _ in range(outs)]
        views = [b[j:j + size] for j, b in enumerate(buffers)]
        collective_util.run_native_fold(plain, streaming, ins, views, 37, 400)
        for v in views:
            assert same_bits(v[37:400], want[37:400])
            assert not v[:37].any() and not v[400:].any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(UFUNC))
def test_fold_matches_numpy_bit_for_bit(op, dtype):
    if op in ("and", "or") and np.dtype(dtype).kind == "f":
        assert collective_fold.build(op, dtype, 2, 2, False) is None
        return
    check_fold(op, dtype, None, [(3, 1), (4, 4)])


@pytest.mark.parametrize("op,dtype", [("sum", "float32"), ("max", "float64"), ("prod", "int16")])
def test_fold_on_every_target(op, dtype, isa):
    if not isa.runs:
        pytest.skip(f"{isa.level} code does not run on this host")
    check_fold(op, dtype, isa.target, [(1, 1), (2, 2), (3, 1)])


def test_types_it_declines_stay_on_numpys_path():
    for dtype in ("bool", "float16", "complex64", "complex128"):
        assert collective_fold.build("sum", dtype, 2, 2, False) is None
    assert collective_fold.build("logaddexp", "float32", 2, 2, False) is None


def test_a_provider_that_fails_leaves_numpys_path(monkeypatch):
    from xlapy import runtime

    def broken(*args):
        raise RuntimeError("no compiler today")

    try:
        runtime.set_native_folds(broken)
        assert collective_util.native_fold("sum", np.dtype("float32"), 2, 2, False) is None
    finally:
        runtime.set_native_folds(collective_fold.provide)
    assert collective_util.native_fold("sum", np.dtype("float32"), 2, 2, False) is not None
