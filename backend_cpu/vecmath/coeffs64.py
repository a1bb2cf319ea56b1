"""Fitted polynomial coefficients for the f64 routines (erf), stored as literals.

f64 fits need reference values well beyond double precision, so they were
made once with mpmath (50 digits) by `python3 -m backend_cpu.vecmath.coeffs64`,
which prints the tables below (mpmath is a development-time tool only, not
a dependency): Chebyshev interpolation (`mpmath.chebyfit`, near-minimax) of
the function on the interval, coefficients rounded to double, and the error of
the rounded polynomial measured on 800 points in 50-digit arithmetic.

erf(x) = x * P(x^2)                    |x| < ERF64_SPLIT
erf(x) = 1 - exp(-x^2) * Q_i(|x| - c_i) on three intervals up to ERF64_ONE,
where Q_i fits erfc(x) exp(x^2). What matters there is the absolute error of
erfc in ulps of erf (erf is in [0.78, 1)), so Q_i's error is weighted by
exp(-x^2) * 2^53 when measured.

Measured errors (of the polynomials alone, coefficients as stored):
  P (degree 11 in x^2):   relative 2^-54.4 (the rounding of P's constant term)
  Q_i (degree 15):        0.108, 0.005, 0.011 ulp of erf on the three intervals
"""
from __future__ import annotations

ERF64_SPLIT = 0.875
# erf(x) rounds to 1 in f64 for |x| >= 5.93; the fits cover up to here.
ERF64_ONE = 6.0

ERF64_SMALL = (
    1.1283791670955126, -0.3761263890318374, 0.11283791670954353, -0.026866170644942594,
    0.005223977623059443, -0.0008548326845690305, 0.00012055324561705379,
    -1.492538720169797e-05, 1.6456607597388118e-06, -1.6289242608284092e-07,
    1.4122777660357666e-08, -8.666276629203472e-10,
)

# P(0) = 2/sqrt(pi) = ERF64_SMALL[0] + ERF64_SMALL_C0_LO (the fit's constant term is
# the double nearest 2/sqrt(pi); the rest, added separately, keeps erf(x) ~ x * 2/sqrt(pi)
# for small x within half an ulp).
ERF64_SMALL_C0_LO = 1.533545961316588e-17

# (upper end of the interval, center c_i, coefficients of Q_i in powers of |x| - c_i)
ERF64_LARGE = (
    (1.75, 1.3125, (
        0.3551767864976341, -0.19604010253922294, 0.09787415191490514, -0.04505351876727457,
        0.019370704266305553, -0.007851787767001732, 0.003021744279188789,
        -0.0011102138320475403, 0.00039114705035090286, -0.00013262956927536472,
        4.3415328321914e-05, -1.3754589661439176e-05, 4.219779810694072e-06,
        -1.2605886839761334e-06, 3.899220899832563e-07, -1.1024943899364327e-07,
    )),
    (3.0, 2.375, (
        0.22050569220490665, -0.08097712912220592, 0.028185010539669517, -0.009358486060330658,
        0.0029793030730893184, -0.000913056504576758, 0.00027026462701502696,
        -7.747943487828301e-05, 2.156272106014332e-05, -5.837311235229475e-06,
        1.5399374765642987e-06, -3.964324269645123e-07, 9.93834800604578e-08,
        -2.4469218474698108e-08, 6.449940973257288e-09, -1.5198332627244804e-09,
    )),
    (6.0, 4.5, (
        0.12248480427383412, -0.026015928630938604, 0.005413125435026951,
        -0.0011045761168586993, 0.00022126645066794002, -4.355082792216068e-05,
        8.42925566083678e-06, -1.6054992914112449e-06, 3.0110268308105365e-07,
        -5.5646832401511234e-08, 1.0161728654988694e-08, -1.8259813431827113e-09,
        3.1183804259638267e-10, -5.470596250566415e-11, 1.2752347155665385e-11,
        -2.166239027063042e-12,
    )),
)


def _fit():                                            # pragma: no cover - dev tool
    import mpmath as mp
    mp.mp.dps = 50

    def rounded(poly):
        return [float(c) for c in reversed(poly)]

    def value(coeffs, u):
        return mp.polyval([mp.mpf(c) for c in reversed(coeffs)], u)

    def p_target(z):
        return mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z > 0 else 2 / mp.sqrt(mp.pi)

    small = rounded(mp.chebyfit(p_target, [0, ERF64_SPLIT ** 2], 12))
    worst = max(abs(value(small, z) / p_target(z) - 1)
                for z in (mp.mpf(ERF64_SPLIT ** 2) * i / 800 for i in range(801)))
    print(f"# P: relative error 2^{float(mp.log(worst, 2)):.1f}")
    print(f"ERF64_SMALL = {tuple(small)!r}")

    def q_target(x):
        return mp.erfc(x) * mp.exp(x * x)

    print("ERF64_LARGE = (")
    for lo, hi in ((ERF64_SPLIT, 1.75), (1.75, 3.0), (3.0, ERF64_ONE)):
        center = (lo + hi) / 2
        coeffs = rounded(mp.chebyfit(lambda u: q_target(u + center),
                                     [lo - center, hi - center], 16))
        worst = max(abs(value(coeffs, x - center) - q_target(x)) * mp.exp(-x * x) * 2 ** 53
                    for x in (mp.mpf(lo) + (hi - lo) * mp.mpf(i) / 800 for i in range(801)))
        print(f"    # Q on [{lo}, {hi}]: {float(worst):.3f} ulp of erf")
        print(f"    ({hi!r}, {center!r}, {tuple(coeffs)!r}),")
    print(")")


if __name__ == "__main__":
    _fit()
