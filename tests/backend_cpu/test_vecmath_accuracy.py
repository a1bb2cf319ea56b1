"""Accuracy of backend_cpu.vecmath over millions of points: ulp-error tables.

Every opcode runs through a JIT-compiled vector loop (with FTZ/DAZ set, as in
the compiler's kernels) over random bit patterns (all exponents, both signs,
NaN/inf/subnormal patterns included) and dense sweeps of the usual ranges.

f32 reference: numpy in f64 on the flushed inputs; the error is measured in
f32 ulps against that (nearly exact) value, so a bound of 3.5 here means
within 4 ulp of the correctly rounded result. A result is also accepted as 0
where the reference lies below the smallest normal (flush-to-zero).
f64 reference: numpy in f64 (libm, itself within an ulp) and numpy in x87 long
double (about 11 more bits: the "true" error, reported and bounded too). erf has
no long double version in numpy; its "true" reference is libm's f64 erf.
"""
import math

import numpy as np
import pytest

from xlapy.backend_cpu.vecmath.standalone import math_kernel
from xlapy.hlo.opcodes import OPCODES, transcendental_opcodes

# What vecmath computes: the opcodes the table flags transcendental (each has a routine:
# tests/test_op_table.py). A new one needs a REFERENCE row below (and a range if unary).
SUPPORTED = tuple(sorted(transcendental_opcodes()))
BINARY = frozenset(op for op in SUPPORTED if OPCODES[op].arity == 2)

F32_BOUND_VS_EXACT = 3.5
F64_BOUND = 4.0
LD = np.longdouble

_erf = np.frompyfunc(math.erf, 1, 1)

# opcode -> numpy reference (works for f64 and long double arrays)
REFERENCE = {
    "exponential": np.exp,
    "exponential-minus-one": np.expm1,
    "log": np.log,
    "log-plus-one": np.log1p,
    "tanh": np.tanh,
    "logistic": lambda x: 1 / (1 + np.exp(-x)),
    "erf": lambda x: _erf(x.astype(np.float64)).astype(np.float64),
    "sine": np.sin,
    "cosine": np.cos,
    "tan": np.tan,
    "cbrt": np.cbrt,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "power": np.power,
    "atan2": np.arctan2,
}

# The usual input range of each unary opcode, swept densely.
ORDINARY_RANGE = {
    "exponential": (-90, 90), "exponential-minus-one": (-20, 20), "log": (0, 10),
    "log-plus-one": (-1, 10), "tanh": (-10, 10), "logistic": (-30, 30), "erf": (-5, 5),
    "sine": (-100, 100), "cosine": (-100, 100), "tan": (-10, 10), "cbrt": (-1000, 1000),
    "sqrt": (0, 100), "rsqrt": (0, 100),
}


def flush_subnormals(a: np.ndarray) -> np.ndarray:
    """What DAZ makes of an input: subnormals become zeros of the same sign."""
    tiny = np.abs(a) < np.finfo(a.dtype).tiny
    return np.where(tiny, np.copysign(np.zeros_like(a), a), a)


def reference(op: str, args, dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(REFERENCE[op](*[flush_subnormals(a).astype(dtype) for a in args]))


def ulp_error(got: np.ndarray, ref: np.ndarray, fmt) -> np.ndarray:
    """|got - ref| in ulps of format `fmt` at ref; inf for NaN/inf mismatches.

    `ref` may be more precise than `fmt`. Special values must match exactly
    (after rounding ref to fmt); a zero result counts as exact where the
    rounded reference is below the smallest normal (flush-to-zero).
    """
    info = np.finfo(fmt)
    wide = LD if fmt == np.float64 else np.float64
    with np.errstate(all="ignore"):
        got, ref = got.astype(wide), ref.astype(wide)
        rounded = ref.astype(fmt).astype(wide)
    err = np.zeros(ref.shape)
    nan_ref, nan_got = np.isnan(ref), np.isnan(got)
    err[nan_ref != nan_got] = np.inf
    both = ~nan_ref & ~nan_got
    special = both & (np.isinf(rounded) | np.isinf(got))
    err[special & (got != rounded)] = np.inf
    finite = both & ~special
    magnitude = np.abs(ref[finite])
    exponent = np.floor(np.log2(np.maximum(magnitude, wide(info.smallest_subnormal))))
    ulp = wide(2.0) ** (np.maximum(exponent, info.minexp) - info.nmant)
    distance = (np.abs(got[finite] - ref[finite]) / ulp).astype(np.float64)
    flushed = (np.abs(rounded[finite]) < info.tiny) & (got[finite] == 0)
    distance[flushed] = 0.0
    err[finite] = distance
    return err


def random_bits(rng, n, dtype) -> np.ndarray:
    """n values with uniformly random bit patterns (every exponent and sign)."""
    if dtype == np.float32:
        return rng.integers(0, 2 ** 32, n, dtype=np.uint32).view(np.float32)
    return rng.integers(0, 2 ** 64, n, dtype=np.uint64, endpoint=False).view(np.float64)


def near_multiples_of_half_pi(rng, n, dtype) -> np.ndarray:
    """Floats nearest to k*pi/2 for small k and for huge k at every exponent:
    the inputs whose reduced argument cancels the most."""
    k = rng.integers(1, 2 ** 20, n // 2).astype(np.float64)
    small = (k * (np.pi / 2)).astype(dtype)
    exponents = rng.integers(0, 126 if dtype == np.float32 else 1000, n - n // 2)
    huge = np.ldexp(rng.uniform(1, 2, exponents.size) * (np.pi / 2), exponents).astype(dtype)
    return np.concatenate([small, huge])


def sweeps(op: str, dtype, n: int):
    """[(label, args)] of inputs for `op`: random bits plus dense ordinary ranges."""
    rng = np.random.default_rng(1234)
    if op in BINARY:
        a, b = rng.uniform(0, 10, n), rng.uniform(-30, 30, n)
        cases = [("bits", (random_bits(rng, n, dtype), random_bits(rng, n, dtype))),
                 ("x>0", (a, b)), ("x<0, integer y", (-a, np.round(b))), ("mixed", (b, a))]
    else:
        lo, hi = ORDINARY_RANGE[op]
        cases = [("bits", (random_bits(rng, n, dtype),)),
                 ("range", (np.linspace(lo, hi, n),)),
                 ("near 0", (np.linspace(-1e-3, 1e-3, n // 4),))]
        if op in ("sine", "cosine", "tan"):
            cases.append(("near k*pi/2", (near_multiples_of_half_pi(rng, n // 4, dtype),)))
    return [(label, tuple(np.asarray(a, dtype) for a in args)) for label, args in cases]


def measure_f32(op: str, n: int):
    worst, points, where = 0.0, 0, None
    kernel = math_kernel(op, np.float32, 16)
    for label, args in sweeps(op, np.float32, n):
        err = ulp_error(kernel(*args), reference(op, args, np.float64), np.float32)
        points += err.size
        if err.max() > worst:
            i = int(np.argmax(err))
            worst, where = float(err.max()), (label, [float(a[i]) for a in args])
    return worst, points, where


def measure_f64(op: str, n: int):
    worst_np, worst_true, points, where = 0.0, 0.0, 0, None
    kernel = math_kernel(op, np.float64, 8)
    for label, args in sweeps(op, np.float64, n):
        got = kernel(*args)
        true = reference(op, args, LD)
        # numpy has no logistic: its "numpy result" is the exact one rounded once,
        # not 1/(1 + exp(-x)) with three roundings of its own.
        numpy_result = true.astype(np.float64) if op == "logistic" \
            else reference(op, args, np.float64)
        err_np = ulp_error(got, numpy_result, np.float64)
        err_true = ulp_error(got, true, np.float64)
        points += got.size
        worst_np = max(worst_np, float(err_np.max()))
        if err_true.max() > worst_true:
            i = int(np.argmax(err_true))
            worst_true, where = float(err_true.max()), (label, [float(a[i]) for a in args])
    return worst_np, worst_true, points, where


@pytest.fixture(scope="module")
def error_table():
    table = {}
    for op in sorted(SUPPORTED):
        table[op] = (measure_f32(op, 600_000), measure_f64(op, 150_000))
    return table


def test_print_error_table(error_table, capsys):
    lines = [f"{'opcode':<24}{'f32 max ulp':>12}{'points':>10}"
             f"{'f64 vs numpy':>14}{'f64 vs true':>13}{'points':>10}"]
    total = 0
    for op, ((e32, n32, _), (e64np, e64true, n64, _)) in error_table.items():
        total += n32 + n64
        lines.append(f"{op:<24}{e32:>12.3f}{n32:>10}{e64np:>14.3f}{e64true:>13.3f}{n64:>10}")
    lines.append(f"total points: {total}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert total > 2_000_000


@pytest.mark.parametrize("op", sorted(SUPPORTED))
def test_f32_within_4_ulp(error_table, op):
    worst, _, where = error_table[op][0]
    assert worst <= F32_BOUND_VS_EXACT, f"{op} f32: {worst:.2f} ulp at {where}"


@pytest.mark.parametrize("op", sorted(SUPPORTED))
def test_f64_within_4_ulp(error_table, op):
    worst_np, worst_true, _, where = error_table[op][1]
    assert worst_np <= F64_BOUND, f"{op} f64 vs numpy: {worst_np:.2f} ulp"
    assert worst_true <= F64_BOUND, f"{op} f64 vs long double: {worst_true:.2f} at {where}"


def exhaustive_f32(op: str, chunk_bits: int = 24) -> tuple[float, float]:
    """(max ulp error, worst input) of f32 `op` over all 2^32 inputs (unary ops).

    Minutes per opcode, so not a test: run by hand with
    `python3 -m tests.backend_cpu.test_vecmath_accuracy exponential log ...`.
    """
    kernel = math_kernel(op, np.float32, 16)
    size = 1 << chunk_bits
    out = np.empty(size, np.float32)
    worst, where = 0.0, math.nan
    for start in range(0, 1 << 32, size):
        x = np.arange(start, start + size, dtype=np.uint64).astype(np.uint32).view(np.float32)
        err = ulp_error(kernel(x, out=out), reference(op, [x], np.float64), np.float32)
        if err.max() > worst:
            worst, where = float(err.max()), float(x[np.argmax(err)])
    return worst, where


if __name__ == "__main__":
    import sys
    for name in sys.argv[1:]:
        print(name, "max %.4f ulp at x=%r over all 2^32 f32 inputs" % exhaustive_f32(name),
              flush=True)
