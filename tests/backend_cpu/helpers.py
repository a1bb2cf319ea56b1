"""Shared helpers of the backend tests: build a module from text, compile once, compare
with the reference evaluator."""
from __future__ import annotations

import functools
import re
from textwrap import dedent

import numpy as np

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.hlo.evaluator import evaluate_instruction
from xlapy.hlo.printer import print_instruction
from tests.corpus_util import assert_close


def uniquify(text: str) -> str:
    """Suffixes the instruction names of each computation so that names are unique in the
    module (HLO requires it); lets test modules reuse short names like `a`, `b`, `x`."""
    out, block, k = [], [], 0
    for line in dedent(text).splitlines():
        if line.rstrip().endswith("{") and "=" not in line.split("(")[0]:
            out.append(line)
            block = []
            continue
        if line.strip() == "}":
            names = {m.group(2) for m in (re.match(r"\s*(ROOT\s+)?([\w.]+)\s*=", l) for l in block) if m}
            k += 1
            for l in block:
                for name in names:
                    l = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", f"{name}_{k}", l)
                out.append(l)
            out.append(line)
            block = []
            continue
        if block is not None and out and not line.startswith("HloModule"):
            block.append(line)
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@functools.lru_cache(maxsize=None)
def compiled(text: str, isa: str | None = None):
    """(module, executable) for HLO text; compiled once per test session, for the
    default target or the ISA level `isa` (tests/targets.py)."""
    module = hlo.parse_module(uniquify(text))
    return module, backend_cpu.compile(module, backend_cpu.CompileOptions(max_isa=isa))


def check_against_evaluator(text: str, args, what: str = "") -> list[np.ndarray]:
    """Runs `text` on the backend and the evaluator; asserts every output agrees. A
    failure names the instruction that computed the output (its opcode, operands and
    attributes) and, element by element, its operands' values where it differs."""
    module, executable = compiled(text)
    actual = executable.run(*args)
    expected = hlo.evaluate(module, list(args))
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        try:
            assert_close(a, np.asarray(e), f"{what} output {i}")
        except AssertionError:
            instr, inputs = _output_source(module, list(args), i)
            assert_close(a, np.asarray(e), f"{what} output {i}: {instr}", inputs)
            raise
    return actual


def _output_source(module, args: list, index: int) -> tuple[str, dict]:
    """(the HLO text of the entry instruction that computes flat output `index`, its
    operands' values by name); the values are left out where the evaluator cannot
    give them."""
    def leaves(instr):
        if instr.opcode == "tuple":
            return [leaf for o in instr.operands for leaf in leaves(o)]
        return [instr] * len(instr.shape.leaves())
    instr = leaves(module.entry.root)[index]
    text = print_instruction(instr, print_metadata=False).strip()
    try:
        values = _values(module.entry, args)
    except Exception:                       # noqa: BLE001 -- a report: best effort
        return text, {}
    return text, {o.name: values[id(o)] for o in instr.operands
                  if isinstance(values.get(id(o)), np.ndarray)}


def _values(comp, args: list) -> dict:
    """The reference value of every instruction of `comp` by id."""
    values: dict = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            values[id(instr)] = np.asarray(args[instr.parameter_number])
        else:
            values[id(instr)] = evaluate_instruction(instr, [values[id(o)] for o in instr.operands])
    return values


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
