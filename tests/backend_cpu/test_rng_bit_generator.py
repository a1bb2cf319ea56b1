"""rng-bit-generator gives XLA's bits: every case of tests/corpus_rng (JAX's modules
and XLA's outputs; tools/make_rng_corpus.py) through the evaluator and the CPU
backend, bit for bit -- THREEFRY, PHILOX and the default algorithm (PHILOX on
XLA's CPU backend), u8..u64 outputs, scalar, odd, even and zero-size shapes, a
counter that wraps, and jax.random's rbg / unsafe_rbg implementations."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo
from xlapy.backend_cpu import CompileOptions, compile

CORPUS = Path(__file__).parents[1] / "corpus_rng"
CASES = sorted(p.stem for p in CORPUS.glob("*.hlo"))


def load(name):
    module = hlo.parse_module((CORPUS / f"{name}.hlo").read_text())
    with np.load(CORPUS / f"{name}.npz") as data:
        outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
        return module, data["arg0"], outs


def same_bits(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


def test_the_corpus_is_there():
    assert len(CASES) >= 20


@pytest.mark.parametrize("name", CASES)
def test_evaluator_gives_xlas_bits(name):
    module, arg, expected = load(name)
    for got, want in zip(hlo.evaluate(module, [arg]), expected, strict=True):
        same_bits(got, want)


@pytest.mark.parametrize("name", CASES)
def test_backend_gives_xlas_bits(name):
    module, arg, expected = load(name)
    pipeline = "default" if CASES.index(name) % 2 else None
    for p in (None, "default") if name.startswith("philox_uint32_3x5") else (pipeline,):
        got = compile(module, CompileOptions(pipeline=p, disk_cache=False)).run(arg)
        for g, want in zip(got, expected, strict=True):
            same_bits(g, want)


def test_philox_three_word_state_carries_into_the_high_word():
    """u64[3] = (key, counter low, counter high): the 128-bit counter carries."""
    text = """HloModule m
ENTRY e {
  s = u64[3] parameter(0)
  ROOT r = (u64[3], u32[10]) rng-bit-generator(s), algorithm=rng_philox
}"""
    module = hlo.parse_module(text)
    state = np.array([9, 2**64 - 2, 5], np.uint64)
    new_state, bits = hlo.evaluate(module, [state])
    # 10 words = 3 blocks of 4: low wraps past 2^64 - 1, the high word takes the carry.
    np.testing.assert_array_equal(new_state, np.array([9, 1, 6], np.uint64))
    got = compile(module, CompileOptions(disk_cache=False)).run(state)
    same_bits(got[0], new_state)
    same_bits(got[1], bits)


@pytest.mark.parametrize("state,message", [
    ("u64[3]", r"THREEFRY takes a u64\[2\] state, got u64\[3\]"),
])
def test_bad_states_are_one_line_errors(state, message):
    module = hlo.parse_module(f"""HloModule m
ENTRY e {{
  s = {state} parameter(0)
  ROOT r = ({state}, u32[4]) rng-bit-generator(s), algorithm=rng_three_fry
}}""")
    with pytest.raises(hlo.EvaluationError, match=message):
        hlo.evaluate(module, [np.zeros(3, np.uint64)])
