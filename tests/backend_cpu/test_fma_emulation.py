"""fma where the target has no FMA unit (x86 SSE4.2: MathBuilder.fma's exact product and
compensated sum) keeps IEEE's answers for infinite and NaN operands. Its error terms were
inf - inf there, so fma(0, 0, -inf) came out NaN: complex multiply of i*inf by i gave
nan+nanj on SSE4.2 and -inf+nanj (numpy's and XLA's answer) with an FMA unit. Complex
multiply is the direct user: (ar br - ai bi, ar bi + ai br), one fma per part."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from xlapy import hlo
from xlapy.backend_cpu import CompileOptions, compile

HUGE = {"c64": 1e30, "c128": 1e300}
DTYPES = {"c64": np.complex64, "c128": np.complex128}


def parts_grid(etype: str) -> tuple[np.ndarray, np.ndarray]:
    h = HUGE[etype]
    parts = [0.0, -0.0, 1.0, -1.0, 2.5, h, -h, np.inf, -np.inf, np.nan]
    values = np.array([complex(r, i) for r, i in itertools.product(parts, parts)])
    x, y = (a.reshape(-1) for a in np.meshgrid(values, values))
    return x.astype(DTYPES[etype]), y.astype(DTYPES[etype])


def same(got, want) -> np.ndarray:
    """Equal, or both NaN (a NaN's sign is not checked)."""
    return (got == want) | (np.isnan(got) & np.isnan(want))


@pytest.mark.parametrize("etype", ["c64", "c128"])
def test_complex_multiply_with_infinities_on_every_target(etype, isa):
    if not isa.runs:
        pytest.skip(f"{isa.level} code does not run on this host")
    x, y = parts_grid(etype)
    n = x.size
    module = hlo.parse_module(f"""HloModule m
ENTRY e {{
  x = {etype}[{n}] parameter(0)
  y = {etype}[{n}] parameter(1)
  ROOT z = {etype}[{n}] multiply(x, y)
}}""")
    (got,) = compile(module, CompileOptions(disk_cache=False, max_isa=isa.level)).run(x, y)
    (want,) = hlo.evaluate(module, [x, y])
    for part in (np.real, np.imag):
        # Finite results may differ in the last bits (one rounding or two, as numpy
        # fuses or not); every infinity and NaN must match exactly.
        special = ~np.isfinite(part(want)) | ~np.isfinite(part(got))
        ok = same(part(got), part(want)) | ~special
        bad = np.flatnonzero(~ok)
        assert not bad.size, [(x[i], y[i], got[i], want[i]) for i in bad[:4]]
