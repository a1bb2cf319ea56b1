"""The corpus of real XLA output (tests/corpus, a copy of ../shared/corpus) and the
tolerances of DESIGN.md, shared by every test that checks numbers."""
from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np

CORPUS = Path(__file__).parent / "corpus"

# DESIGN.md: "Numbers that count".
TOLERANCES = {
    np.dtype(np.float16): dict(rtol=1e-3, atol=1e-3),
    np.dtype(np.float32): dict(rtol=2e-5, atol=1e-6),
    np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12),
    # The narrow floats (ml_dtypes arrays): a rounding step of the type, relative
    # (bf16 as tests/robustness/compare.py), and the smallest subnormal absolute.
    np.dtype(ml_dtypes.bfloat16): dict(rtol=1e-2, atol=1e-2),
    **{np.dtype(t): dict(rtol=float(ml_dtypes.finfo(t).eps),
                         atol=float(ml_dtypes.finfo(t).smallest_subnormal))
       for t in (ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3b11fnuz,
                 ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e4m3,
                 ml_dtypes.float8_e3m4)},
    np.dtype(ml_dtypes.float8_e8m0fnu): dict(rtol=1.0, atol=0.0),
}
# Complex numbers: each part within the tolerance of its real type.
COMPLEX_PARTS = {np.dtype(np.complex64): np.dtype(np.float32),
                 np.dtype(np.complex128): np.dtype(np.float64)}


def case_names() -> list[str]:
    """Every case of the corpus (`softmax_f32`, ...), sorted."""
    return sorted(p.name[:-4] for p in CORPUS.glob("*.hlo") if not p.name.endswith(".opt.hlo"))


def hlo_paths() -> list[Path]:
    """Every HLO file of the corpus, unoptimized and optimized."""
    return sorted(CORPUS.glob("*.hlo"))


def load_case(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(args, expected outputs) of a corpus case, in ENTRY parameter / output order."""
    with np.load(CORPUS / f"{name}.npz") as data:
        args = [data[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in data.files))]
        outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    return args, outs


def assert_close(actual, expected, what: str = "", inputs: dict | None = None) -> None:
    """Equal within DESIGN.md's tolerance for the dtype; NaN equals NaN; ints and pred exact.

    A failure names the elements that differ: index, what came out, what was expected,
    and the value of each of `inputs` (name -> array of the output's shape, or a
    scalar) at that index."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype in COMPLEX_PARTS:
        assert_close(actual.real, expected.real, f"{what} (real part)", inputs)
        assert_close(actual.imag, expected.imag, f"{what} (imaginary part)", inputs)
        return
    tol = TOLERANCES.get(expected.dtype)
    try:
        if tol is None:
            np.testing.assert_array_equal(actual, expected, err_msg=what)
        else:
            np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                       equal_nan=True, err_msg=what, **tol)
    except AssertionError:
        # numpy decided; this only says where and with which inputs.
        raise AssertionError(mismatch_report(actual, expected, what, tol, inputs)) from None


# At most this many differing elements are listed in a failure.
REPORTED_ELEMENTS = 8


def mismatch_report(actual, expected, what: str, tol: dict | None, inputs: dict | None) -> str:
    """The failure message of assert_close: how many elements differ and, for the first
    REPORTED_ELEMENTS of them, index, got, expected and the inputs there."""
    if tol is None:
        bad = actual != expected
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            bad = ~np.isclose(actual.astype(np.float64), expected.astype(np.float64),
                              equal_nan=True, **tol)
    where = np.argwhere(np.atleast_1d(bad))
    limits = "exact" if tol is None else f"rtol={tol['rtol']:g}, atol={tol['atol']:g}"
    lines = [f"{what}: {len(where)} of {actual.size} elements differ ({limits}, "
             f"{actual.dtype})"]
    for index in map(tuple, where[:REPORTED_ELEMENTS]):
        at = index if actual.ndim else ()
        line = f"  at {[int(i) for i in index]}: got {_item(actual[at])}, " \
               f"expected {_item(expected[at])}"
        values = [f"{name}={_item(v)}" for name, v in _inputs_at(inputs, actual.shape, at)]
        lines.append(line + (f"  <- {', '.join(values)}" if values else ""))
    if len(where) > REPORTED_ELEMENTS:
        lines.append(f"  ... and {len(where) - REPORTED_ELEMENTS} more")
    return "\n".join(lines)


def _inputs_at(inputs: dict | None, shape: tuple, at: tuple):
    """(name, value) of each input at the output index `at` (inputs of another shape,
    which do not map index to index, are left out)."""
    for name, value in (inputs or {}).items():
        value = np.asarray(value)
        if value.ndim == 0:
            yield name, value[()]
        elif value.shape == shape:
            yield name, value[at]


def _item(value) -> str:
    """A numpy element, shortest in its own precision: 1e-40 (f32), -0.0, nan, -inf,
    2147483647, True."""
    return str(np.asarray(value)[()])


def assert_all_close(actuals, expecteds, what: str = "") -> None:
    assert len(actuals) == len(expecteds), f"{what}: {len(actuals)} outputs, expected {len(expecteds)}"
    for i, (a, e) in enumerate(zip(actuals, expecteds)):
        assert_close(a, e, f"{what} out{i}")
