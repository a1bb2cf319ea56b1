"""The fitted polynomial coefficients of the vector-math library, measured in numpy
(independent of any target): what their comments claim holds."""
from __future__ import annotations

import math

import numpy as np

from xlapy.backend_cpu.vecmath.coeffs import EXP_F32_MINIMAX6, taylor_exp

HALF_LN2 = math.log(2.0) / 2 * 1.001      # the reduced range, with the 0.1% spare


def _fused_horner_f32(coeffs, r: np.ndarray) -> np.ndarray:
    """Horner's rule with one rounding to f32 per step (what a fused multiply-add gives:
    the f64 product of two f32 values is exact, the sum rounds once more in f64 first,
    which stays well below an f32 ulp)."""
    acc = np.full(r.shape, np.float32(coeffs[-1]))
    for c in reversed(coeffs[:-1]):
        acc = (acc.astype(np.float64) * r.astype(np.float64) + np.float64(np.float32(c))) \
            .astype(np.float32)
    return acc


def test_exp_f32_minimax_is_exact_in_f32_and_beats_taylor_7():
    assert all(float(np.float32(c)) == c for c in EXP_F32_MINIMAX6)
    assert EXP_F32_MINIMAX6[:2] == [1.0, 1.0]           # e^0 = 1 exactly
    r = np.linspace(-HALF_LN2, HALF_LN2, 200001)
    exact = np.exp(r)
    minimax = np.polynomial.polynomial.polyval(r, EXP_F32_MINIMAX6)
    taylor = np.polynomial.polynomial.polyval(r, [float(np.float32(c)) for c in taylor_exp(7)])
    assert np.max(np.abs(minimax - exact) / exact) < 3.2e-9
    assert np.max(np.abs(minimax - exact) / exact) < np.max(np.abs(taylor - exact) / exact)


def test_exp_f32_minimax_within_an_ulp_when_evaluated_in_f32():
    r = np.linspace(-HALF_LN2, HALF_LN2, 400001).astype(np.float32)
    got = _fused_horner_f32(EXP_F32_MINIMAX6, r).astype(np.float64)
    exact = np.exp(r.astype(np.float64))
    ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - exact) / ulp) < 0.9
