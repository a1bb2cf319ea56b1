"""How two runs of one module are compared: the differential tests' notion of "same numbers".

Integers and pred must be bit-exact. Floats must have NaN in the same places
(any NaN matches any NaN), infinities of the same sign in the same places, and the finite values
within DESIGN.md's tolerance for the type (bf16 gets its own, looser one; `exact=True`: no difference, and denormals bit-equal, i.e.
either both sides flushed or neither). +0 and -0 compare equal: `x + 0 -> x`
is a rewrite XLA makes too.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from tests.corpus_util import TOLERANCES

BF16_TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def tolerance(element_type: str, dtype: np.dtype) -> dict | None:
    if element_type == "bf16":
        return BF16_TOLERANCE
    return TOLERANCES.get(np.dtype(dtype))


def assert_same_numbers(actual, expected, element_types, what: str, exact: bool = False) -> None:
    """`actual` and `expected` (lists of arrays) hold the same numbers; see the docstring.

    `exact=True` allows no rounding difference at all in floats (NaN still matches
    NaN and -0 matches +0): for transformations that must not change arithmetic.
    """
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    for i, (a, e, t) in enumerate(zip(actual, expected, element_types)):
        a, e = np.asarray(a), np.asarray(e)
        where = f"{what}, output {i} ({t})"
        assert a.shape == e.shape, f"{where}: shape {a.shape} != {e.shape}"
        assert a.dtype == e.dtype, f"{where}: dtype {a.dtype} != {e.dtype}"
        tol = tolerance(t, e.dtype)
        if tol is not None and exact:
            tol = dict(rtol=0, atol=0)
        if tol is None:
            np.testing.assert_array_equal(a, e, err_msg=where)
            continue
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(a64), np.isnan(e64),
                                      err_msg=f"{where}: NaN in different places")
        if exact:
            # Denormals only survive ops that move bits (copy, select, abs, ...): they
            # must match exactly, or one side flushed what the other did not.
            tiny = float(ml_dtypes.finfo(e.dtype).tiny)
            denormal = ((a64 != 0) & (np.abs(a64) < tiny)) | ((e64 != 0) & (np.abs(e64) < tiny))
            np.testing.assert_array_equal(a64[denormal], e64[denormal],
                                          err_msg=f"{where}: denormals flushed on one side only")
        finite = np.isfinite(e64) & np.isfinite(a64)
        np.testing.assert_array_equal(np.where(finite, 0, a64), np.where(finite, 0, e64),
                                      err_msg=f"{where}: infinities differ")
        np.testing.assert_allclose(a64[finite], e64[finite], err_msg=where, **tol)


def output_types(module) -> list[str]:
    """Element types of the ENTRY result, tuples flattened in order."""
    return [leaf.element_type for leaf in module.entry.root.shape.leaves()]
