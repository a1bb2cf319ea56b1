"""Real JAX/XLA modules that once broke xlapy (tests/regressions/jax, made by its
`make_cases.py`; README.md says what each one broke).

Each case is NAME.hlo (as JAX lowers it), NAME.opt.hlo (after XLA's CPU pipeline)
and NAME.npz (arguments and XLA's results). Both modules must parse, print back
stably, verify, evaluate to XLA's numbers and compile (no pipeline and the default
one) to XLA's numbers, within DESIGN.md's tolerances.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from tests.corpus_util import assert_all_close

HERE = Path(__file__).parent / "jax"
CASES = sorted(p.stem for p in HERE.glob("*.npz"))
FILES = [(name, suffix) for name in CASES for suffix in (".hlo", ".opt.hlo")]


def load(name: str, suffix: str):
    module = hlo.parse_module((HERE / f"{name}{suffix}").read_text())
    with np.load(HERE / f"{name}.npz") as data:
        args = [data[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in data.files))]
        outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    return module, args, outs


@pytest.mark.parametrize("name,suffix", FILES)
def test_parse_print_verify_evaluate(name, suffix):
    module, args, outs = load(name, suffix)
    hlo.verify(module)
    printed = hlo.print_module(module)
    assert hlo.print_module(hlo.parse_module(printed)) == printed
    assert_all_close(hlo.evaluate(module, args), outs, f"{name}{suffix} evaluator")


@pytest.mark.parametrize("pipeline", [None, "default"])
@pytest.mark.parametrize("name,suffix", FILES)
def test_backend_matches_xla(name, suffix, pipeline):
    module, args, outs = load(name, suffix)
    executable = backend_cpu.compile(module, backend_cpu.CompileOptions(pipeline=pipeline))
    assert_all_close(executable.run(*args), outs, f"{name}{suffix} pipeline {pipeline}")
