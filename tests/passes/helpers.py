"""Shared helpers of the pass tests: parse dedented HLO, evaluate on random inputs."""
from __future__ import annotations

from textwrap import dedent

import numpy as np

from xlapy import hlo
from tests.corpus_util import assert_all_close


def parse(text: str) -> hlo.HloModule:
    module = hlo.parse_module(dedent(text))
    hlo.verify(module)
    return module


def random_args(module: hlo.HloModule, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = []
    for p in module.entry.parameters:
        dtype = hlo.numpy_dtype(p.shape.element_type)
        if p.shape.dtype.is_float:
            args.append(rng.standard_normal(p.shape.dims).astype(dtype))
        else:
            args.append(rng.integers(0, 5, size=p.shape.dims).astype(dtype))
    return args


def assert_same_results(before_text: str, after: hlo.HloModule, seed: int = 0) -> None:
    """`after` verifies and computes what the module `before_text` computed."""
    hlo.verify(after)
    before = hlo.parse_module(dedent(before_text))
    args = random_args(before, seed)
    assert_all_close(hlo.evaluate(after, args), hlo.evaluate(before, args), "after vs before")


def opcodes(comp: hlo.HloComputation) -> list[str]:
    return [i.opcode for i in comp.instructions]
