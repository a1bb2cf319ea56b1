"""Random HLO graphs through the default pipeline: the numbers never change.

Hypothesis draws small DAGs mixing elementwise ops, broadcasts, row and column
reductions and shared values (the shapes fusion decisions hinge on), prints
them as HLO text, optimizes them and compares the evaluator's results before
and after, NaN equal to NaN.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from xlapy import hlo
from xlapy import passes
from tests.corpus_util import assert_all_close

R, N = 3, 5
UNARY = ["negate", "abs", "exponential", "tanh", "sqrt"]
BINARY = ["add", "subtract", "multiply", "maximum", "divide"]


@st.composite
def programs(draw) -> str:
    """HLO text: a few [R,N] parameters and a random DAG of instructions over them."""
    lines = [f"  p{i} = f32[{R},{N}] parameter({i})" for i in range(2)]
    lines.append("  zero = f32[] constant(0)")
    lines.append("  ninf = f32[] constant(-inf)")
    full = ["p0", "p1"]          # values of shape [R,N]
    rows: list[str] = []         # values of shape [R]
    cols: list[str] = []         # values of shape [N]
    for n in range(draw(st.integers(2, 9))):
        name = f"v{n}"
        choice = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "broadcast",
                                       "column"]))
        if choice == "unary":
            op, a = draw(st.sampled_from(UNARY)), draw(st.sampled_from(full))
            lines.append(f"  {name} = f32[{R},{N}] {op}({a})")
            full.append(name)
        elif choice == "binary":
            op = draw(st.sampled_from(BINARY))
            a, b = draw(st.sampled_from(full)), draw(st.sampled_from(full))
            lines.append(f"  {name} = f32[{R},{N}] {op}({a}, {b})")
            full.append(name)
        elif choice == "reduce":
            a, reducer = draw(st.sampled_from(full)), draw(st.sampled_from(["sum", "max"]))
            init = "zero" if reducer == "sum" else "ninf"
            lines.append(f"  {name} = f32[{R}] reduce({a}, {init}), dimensions={{1}}, "
                         f"to_apply={reducer}")
            rows.append(name)
        elif choice == "column":
            a = draw(st.sampled_from(full))
            lines.append(f"  {name} = f32[{N}] reduce({a}, zero), dimensions={{0}}, to_apply=sum")
            lines.append(f"  {name}b = f32[{R},{N}] broadcast({name}), dimensions={{1}}")
            cols.append(name)
            full.append(f"{name}b")
        elif rows:
            a = draw(st.sampled_from(rows))
            lines.append(f"  {name} = f32[{R},{N}] broadcast({a}), dimensions={{0}}")
            full.append(name)
    outputs = draw(st.lists(st.sampled_from(full[2:] + rows + cols or ["p0"]), min_size=1,
                            max_size=3, unique=True))
    shapes = ", ".join(f"f32[{R}]" if o in rows else f"f32[{N}]" if o in cols else f"f32[{R},{N}]"
                       for o in outputs)
    lines.append(f"  ROOT out = ({shapes}) tuple({', '.join(outputs)})")
    return ("HloModule random\n\nsum {\n  sx = f32[] parameter(0)\n  sy = f32[] parameter(1)\n"
            "  ROOT sr = f32[] add(sx, sy)\n}\n\nmax {\n  mx = f32[] parameter(0)\n"
            "  my = f32[] parameter(1)\n  ROOT mr = f32[] maximum(mx, my)\n}\n\n"
            "ENTRY main {\n" + "\n".join(lines) + "\n}\n")


@given(text=programs(), seed=st.integers(0, 2**16))
def test_default_pipeline_preserves_results(text, seed):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((R, N)).astype(np.float32) for _ in range(2)]
    expected = hlo.evaluate(hlo.parse_module(text), args)
    module = hlo.parse_module(text)
    passes.cpu_pipeline(verify_each=True).run(module)
    printed = hlo.print_module(module)
    reparsed = hlo.parse_module(printed)
    assert_all_close(hlo.evaluate(reparsed, args), expected, "optimized")
    assert passes.cpu_pipeline().run(reparsed) is False, "pipeline is not idempotent"
