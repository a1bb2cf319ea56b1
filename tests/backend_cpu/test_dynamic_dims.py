"""Dynamic dimensions are refused by the CPU backend as by the evaluator (issue 17).

`f32[<=8]` (bounded) and `f32[?,4]` (unbounded) parse, verify, print and round-trip,
but nothing computes with them (docs/hlo.md): computing with the bound would be right
only while the runtime size equals it. The backend once compiled such modules with the
bound, silently; now `compile` refuses them with the evaluator's message (one line
naming the first instruction that has one), and `hlo-opt --run` prints that line.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu
from xlapy import hlo
from xlapy.frontend import hlo_opt

DYNAMIC = [
    ("bounded_parameter", """HloModule m

ENTRY e {
  p = f32[<=8] parameter(0)
  ROOT n = f32[<=8] negate(p)
}
""", "%p = f32[<=8] parameter()"),
    ("unbounded_dimension", """HloModule m

ENTRY e {
  p = f32[?,4] parameter(0)
  ROOT n = f32[?,4] exponential(p)
}
""", "%p = f32[?,4] parameter()"),
    ("bounded_inside", """HloModule m

ENTRY e {
  p = f32[8] parameter(0)
  n = s32[] parameter(1)
  d = f32[<=8] custom-call(p, n), custom_call_target="SliceToDynamic"
  ROOT r = f32[<=8] negate(d)
}
""", "%d = f32[<=8] custom-call(%p, %n)"),
    ("tuple_element", """HloModule m

ENTRY e {
  p = f32[4] parameter(0)
  q = s32[<=3] parameter(1)
  ROOT t = (f32[4], s32[<=3]) tuple(p, q)
}
""", "%q = s32[<=3] parameter()"),
    ("called_computation", """HloModule m

body {
  x = f32[<=4,2] parameter(0)
  ROOT y = f32[<=4,2] negate(x)
}

ENTRY e {
  p = f32[<=4,2] parameter(0)
  ROOT c = f32[<=4,2] call(p), to_apply=body
}
""", "dynamic dimensions"),
]


def _parses(text):
    m = hlo.parse_module(text)
    hlo.verify(m)
    assert hlo.print_module(hlo.parse_module(hlo.print_module(m))) == hlo.print_module(m)
    return m


@pytest.mark.parametrize("name,text,where", DYNAMIC, ids=[d[0] for d in DYNAMIC])
@pytest.mark.parametrize("pipeline", [None, "default"])
def test_backend_refuses_like_the_evaluator(name, text, where, pipeline):
    m = _parses(text)
    with pytest.raises(hlo.EvaluationError) as evaluated:
        hlo.evaluate(m, [np.zeros([max(d, 0) for d in p.shape.dims], np.float32)
                         for p in m.entry.parameters])
    with pytest.raises(NotImplementedError) as compiled:
        backend_cpu.compile(m, backend_cpu.CompileOptions(pipeline=pipeline, disk_cache=False))
    message = str(compiled.value)
    assert "\n" not in message and where in message
    assert "dynamic dimensions (<=N or ?) are parsed and printed but the CPU backend " \
           "compiles only static shapes" in message
    # The same instruction named by both.
    assert message.split(": dynamic dimensions")[0].split("backend_cpu: ")[1] == \
        str(evaluated.value).split(": dynamic dimensions")[0]


def test_hlo_opt_run_prints_one_line(tmp_path, capsys):
    path = tmp_path / "dynamic.hlo"
    path.write_text(DYNAMIC[0][1])
    assert hlo_opt.main([str(path), "--run"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["hlo-opt: error: not supported: backend_cpu: in computation e: "
                   "%p = f32[<=8] parameter(): dynamic dimensions (<=N or ?) are parsed and "
                   "printed but the CPU backend compiles only static shapes"]


def test_hlo_opt_without_run_still_prints_the_module(tmp_path, capsys):
    path = tmp_path / "dynamic.hlo"
    path.write_text(DYNAMIC[1][1])
    assert hlo_opt.main([str(path), "--passes=dce"]) == 0
    assert "f32[?,4]" in capsys.readouterr().out


def test_static_module_still_compiles():
    text = DYNAMIC[0][1].replace("<=8", "8")
    x = np.arange(8, dtype=np.float32)
    (got,) = backend_cpu.compile(hlo.parse_module(text)).run(x)
    np.testing.assert_array_equal(got, -x)
