"""The corpus of real XLA output (tests/corpus, a copy of ../shared/corpus) and the
tolerances of DESIGN.md, shared by every test that checks numbers."""
from __future__ import annotations

from pathlib import Path

import numpy as np

CORPUS = Path(__file__).parent / "corpus"

# DESIGN.md: "Numbers that count".
TOLERANCES = {
    np.dtype(np.float16): dict(rtol=1e-3, atol=1e-3),
    np.dtype(np.float32): dict(rtol=2e-5, atol=1e-6),
    np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12),
}


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


def assert_close(actual, expected, what: str = "") -> None:
    """Equal within DESIGN.md's tolerance for the dtype; NaN equals NaN; ints and pred exact."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    tol = TOLERANCES.get(expected.dtype)
    if tol is None:
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    else:
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   equal_nan=True, err_msg=what, **tol)


def assert_all_close(actuals, expecteds, what: str = "") -> None:
    assert len(actuals) == len(expecteds), f"{what}: {len(actuals)} outputs, expected {len(expecteds)}"
    for i, (a, e) in enumerate(zip(actuals, expecteds)):
        assert_close(a, e, f"{what} out{i}")
