"""Shared helpers of the backend tests: build a module from text, compile once, compare
with the reference evaluator."""
from __future__ import annotations

import functools
from textwrap import dedent

import numpy as np

import backend_cpu
import hlo
from tests.corpus_util import assert_close


@functools.lru_cache(maxsize=None)
def compiled(text: str):
    """(module, executable) for HLO text; compiled once per test session."""
    module = hlo.parse_module(dedent(text))
    return module, backend_cpu.compile(module)


def check_against_evaluator(text: str, args, what: str = "") -> list[np.ndarray]:
    """Runs `text` on the backend and the evaluator; asserts every output agrees."""
    module, executable = compiled(text)
    actual = executable.run(*args)
    expected = hlo.evaluate(module, list(args))
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, np.asarray(e), f"{what} output {i}")
    return actual


EDGE_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 1e-3, 0.1, 10.0, -7.25,
               100.0, 1e30, -1e30, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 88.0, -88.0, 1e5]


def edge_values(etype: str, n: int, seed: int = 0) -> np.ndarray:
    """`n` values of element type `etype`: the type's edge values, then random ones."""
    rng = np.random.default_rng(seed)
    dt = hlo.numpy_dtype(etype)
    if etype == "pred":
        return rng.integers(0, 2, n).astype(bool)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        edges = [0, 1, 2, 3, 7, info.max, info.min, info.max - 1, info.min + 1]
        if info.min < 0:
            edges += [-1, -2, -3, -7]
        values = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        edges = np.array(edges, dtype=object).astype(dt)[:n]
        values[:len(edges)] = edges
        return values
    with np.errstate(over="ignore"):
        values = (rng.standard_normal(n) * 4).astype(dt)
        edges = np.array(EDGE_FLOATS, np.float64).astype(dt)[:n]
    values[:len(edges)] = edges
    return values
