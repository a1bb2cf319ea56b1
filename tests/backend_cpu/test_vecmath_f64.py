"""backend_cpu.vecmath f64 routines where the random sweeps rarely look: the
hardest pi/2 reductions, every exponent of the Payne-Hanek table, the path
boundaries of erf and atan2, pow's overflow edges, and the exactness claims
the log table is built on.

References are numpy in x87 long double (glibc's sinl/cosl/tanl/atan2l/powl,
which reduce huge arguments exactly) and libm's erf.
"""
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from xlapy.backend_cpu.vecmath.coeffs64 import ERF64_LARGE, ERF64_SPLIT
from xlapy.backend_cpu.vecmath.standalone import math_kernel
from xlapy.backend_cpu.vecmath.pow64 import log_table
from xlapy.backend_cpu.vecmath.reduce64 import CODY_WAITE_LIMIT

from .test_vecmath_accuracy import ulp_error

LD = np.longdouble
TRIG = {"sine": np.sin, "cosine": np.cos, "tan": np.tan}
# The double closest to a multiple of pi/2 (|r| ~ 2^-61), and classic test inputs.
HARDEST = [math.ldexp(6381956970095103, 797), 1e22, 5.319372648326541e+255]


def _window(center: float, count: int) -> np.ndarray:
    mid = np.asarray(center, np.float64).view(np.int64)
    return (mid + np.arange(-count // 2, count // 2, dtype=np.int64)).view(np.float64)


def _errors(op, *args):
    got = math_kernel(op, np.float64, 8)(*args)
    with np.errstate(all="ignore"):
        ref = {"atan2": np.arctan2, "power": np.power, **TRIG}[op](*[a.astype(LD) for a in args])
    return ulp_error(got, ref, np.float64)


def _hard_trig_inputs() -> np.ndarray:
    rng = np.random.default_rng(11)
    # Every exponent from the Cody-Waite limit to the largest double, a few
    # mantissas each (all Payne-Hanek table buckets), and their negatives.
    exponents = np.repeat(np.arange(28, 1024), 4)
    every_exponent = np.ldexp(rng.uniform(1, 2, exponents.size), exponents)
    # Doubles nearest k*pi/2 below the Cody-Waite limit, where r cancels most.
    k = rng.integers(1, int(CODY_WAITE_LIMIT / (math.pi / 2)), 4000)
    near_multiples = (k.astype(LD) * LD(math.pi / 2)).astype(np.float64)
    boundary = _window(CODY_WAITE_LIMIT, 4000)
    extremes = np.array(HARDEST + [np.finfo(np.float64).max, math.pi / 4, math.pi / 2])
    values = np.concatenate([every_exponent, near_multiples, boundary, extremes])
    return np.concatenate([values, -values])


@pytest.mark.parametrize("op", sorted(TRIG))
def test_trig_reduction_is_exact_enough_everywhere(op):
    """The reduced argument is good to far below an ulp, so sin and cos stay
    within 1 ulp (tan within 2.5) even where x is closest to k*pi/2."""
    x = _hard_trig_inputs()
    err = _errors(op, x)
    bound = 2.5 if op == "tan" else 1.0
    assert err.max() <= bound, f"{op}: {err.max():.2f} ulp at x={x[np.argmax(err)]!r}"


def test_atan2_across_its_table_steps():
    """Ratios on both sides of every rounding boundary (2k+1)/16 of the atan
    table, where atan t falls into a lower binade than t."""
    rng = np.random.default_rng(12)
    t = np.concatenate([(2 * k + 1) / 16 + rng.uniform(-1e-3, 1e-3, 500) for k in range(8)])
    x = rng.uniform(0.5, 100, t.size)
    y = t * x
    tiny = 2.0 ** -1000                 # where the division's residual would underflow
    args = [(y, x), (x, y), (-y, x), (y, -x), (-x, -y), (y * tiny, x * tiny)]
    for a, b in args:
        err = _errors("atan2", a, b)
        assert err.max() <= 2.0, f"atan2: {err.max():.2f} ulp at {a[np.argmax(err)]!r}"


def test_pow_near_overflow_and_underflow():
    x = _window(2.0, 100)
    for y_center in (1024.0, -1022.0, 1023.5):
        xs, ys = np.meshgrid(x, _window(y_center, 100))
        err = _errors("power", xs.ravel(), ys.ravel())
        assert err.max() <= 1.5, f"pow near 2^{y_center}: {err.max():.2f} ulp"


def test_pow_large_exponents_amplify_no_error():
    """|y log x| up to ~700 with x near 1 or far from it: the double-double log
    keeps the relative error of the result near an ulp."""
    rng = np.random.default_rng(13)
    n = 20_000
    x = np.concatenate([1 + rng.uniform(-1e-3, 1e-3, n), np.exp(rng.uniform(-700, 700, n))])
    y = np.concatenate([rng.uniform(-6e5, 6e5, n), rng.uniform(-1, 1, n)])
    err = _errors("power", x, y)
    i = np.argmax(err)
    assert err.max() <= 1.5, f"pow: {err.max():.2f} ulp at {x[i]!r}^{y[i]!r}"


def test_log_table_reduction_is_exact():
    """r = z * invc - 1 is representable for every z of every table interval."""
    invcs, logc_hi, logc_lo = log_table()
    assert len(invcs) == 128
    rng = random.Random(14)
    offset = 0x3FE6A00000000000
    for i, invc in enumerate(invcs):
        for _ in range(8):
            bits = offset + (i << 45) + rng.randrange(1 << 45)
            z = np.int64(bits).view(np.float64)
            r = Fraction(float(z)) * Fraction(invc) - 1
            assert Fraction(float(r)) == r, (i, float(z))
        assert logc_hi[i] == pytest.approx(-math.log(invc), abs=1e-16)
        assert abs(logc_lo[i]) <= math.ulp(logc_hi[i])


def test_erf_at_its_interval_boundaries():
    edges = [ERF64_SPLIT] + [upper for upper, _, _ in ERF64_LARGE]
    x = np.concatenate([_window(e, 2000) for e in edges] + [np.linspace(-7, 7, 20_001)])
    got = math_kernel("erf", np.float64, 8)(x)
    ref = np.array([math.erf(v) for v in x])
    err = ulp_error(got, ref, np.float64)
    assert err.max() <= 2.0, f"erf: {err.max():.2f} ulp at {x[np.argmax(err)]!r}"


def test_erf_against_high_precision_when_available():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    rng = np.random.default_rng(15)
    x = np.concatenate([rng.uniform(-1, 1, 1500), rng.uniform(0.8, 6.5, 1500)])
    got = math_kernel("erf", np.float64, 8)(x)
    worst = max(float(abs(mp.mpf(g) - mp.erf(mp.mpf(v)))) / math.ulp(math.erf(v))
                for g, v in zip(got, x))
    assert worst <= 1.5


TINY = 1e-310                     # subnormal in f64: DAZ reads it as a zero of its sign
DAZ_CASES = [("sine", (-TINY,), -0.0), ("tan", (-TINY,), -0.0), ("cosine", (TINY,), 1.0),
             ("erf", (-TINY,), -0.0), ("atan2", (TINY, -1.0), math.pi),
             ("atan2", (-TINY, -1.0), -math.pi), ("atan2", (1.0, -TINY), math.pi / 2),
             ("power", (TINY, 2.0), 0.0), ("power", (2.0, TINY), 1.0),
             ("power", (-TINY, 3.0), -0.0), ("power", (TINY, -1.0), math.inf)]


@pytest.mark.parametrize("op,args,expected", DAZ_CASES)
def test_subnormal_inputs_read_as_zero(op, args, expected):
    got = float(math_kernel(op, np.float64, 8)(*[np.full(8, a) for a in args])[0])
    assert got == expected and math.copysign(1, got) == math.copysign(1, expected), (op, args, got)
