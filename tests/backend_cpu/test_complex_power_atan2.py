"""power and atan2 on c64/c128 compiled as kernels (elemental/complex_math.py; they ran
on the host before), against the evaluator: numpy's complex power (integer exponents
by repeated squaring, 0^w, z^0, exp(w log z) with C's recovery of infinities) and
XLA's complex atan2, over random values and a grid of special values (signed zeros,
infinities, NaNs in either part), with integer, fractional and complex exponents."""
import numpy as np
import pytest

from xlapy import backend_cpu, hlo
from xlapy.backend_cpu.elemental.complex_ops import why_not_compiled

PARTS = (0.0, -0.0, 1.5, -2.0, 1e-3, np.inf, -np.inf, np.nan)
# -100 is the first integer numpy does not multiply out (|n| < 100). A large exponent
# off that path is ill-conditioned: w log z's angle (100 arg z) keeps the last bit of
# libm's clog, which is not always correctly rounded (numpy's c64 (-2+1.5j)^100 differs
# from the correctly rounded angle's by 6e-4 relative), so none is used here.
EXPONENTS = (0, 1, 2, 3, -1, -2, 5, -7, 2.5, -0.5, 0.5 + 1j, 1j, -1.5 - 2j, 99, -99, -100)


def _text(op, t, n):
    return (f"HloModule m\nENTRY e {{\n  a = {t}[{n}] parameter(0)\n  b = {t}[{n}] "
            f"parameter(1)\n  ROOT r = {t}[{n}] {op}(a, b)\n}}")


def _cases(op, dt):
    rng = np.random.default_rng(5)
    specials = [complex(x, y) for x in PARTS for y in PARTS]
    if op == "power":
        a = [s for s in specials for _ in EXPONENTS]
        b = [e for _ in specials for e in EXPONENTS]
    else:
        # Not the zeros: on atan2's branch cuts (x^2 + y^2 = -4 +- 0i) the sign of a
        # zero decides between results pi apart, and that sign comes from numpy's
        # product, fused or not as the host's SIMD has it.
        specials = [complex(x, y) for x in PARTS[2:] for y in PARTS[2:]]
        a = [s for s in specials for _ in specials]
        b = [s for _ in specials for s in specials]
    r = rng.standard_normal((4, 200)) * 3
    a += list(r[0] + 1j * r[1])
    b += list(r[2] + 1j * r[3])
    if op == "power":
        b[-50:] = list(rng.integers(-9, 10, 50))
    return np.array(a).astype(dt), np.array(b).astype(dt)


def _same(got, want, tol):
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        ok = (g == w) | (np.isnan(g) & np.isnan(w)) | np.isclose(g, w, rtol=tol, atol=tol / 10)
        assert ok.all(), [(i, got[i], want[i]) for i in np.nonzero(~ok)[0][:5]]


@pytest.mark.parametrize("op", ["power", "atan2"])
@pytest.mark.parametrize("t,dt,tol", [("c64", np.complex64, 2e-5), ("c128", np.complex128, 1e-10)])
def test_compiled_equals_evaluator(op, t, dt, tol):
    a, b = _cases(op, dt)
    m = hlo.parse_module(_text(op, t, len(a)))
    assert why_not_compiled(m.entry.root) is None
    (want,) = hlo.evaluate(m, [a, b])
    (got,) = backend_cpu.compile(hlo.parse_module(_text(op, t, len(a)))).run(a, b)
    _same(np.asarray(got), want, tol)


def test_zero_size_and_a_scalar_exponent():
    text = """HloModule m
ENTRY e {
  a = c64[0,3] parameter(0)
  e = c64[] parameter(1)
  b = c64[0,3] broadcast(e), dimensions={}
  p = c64[0,3] power(a, b)
  ROOT r = c64[0,3] atan2(p, a)
}"""
    (got,) = backend_cpu.compile(hlo.parse_module(text)).run(
        np.zeros((0, 3), np.complex64), np.complex64(2.5))
    assert got.shape == (0, 3)
