"""Custom-call targets in the CPU backend agree with the evaluator (backend_cpu/library_ops.py).

The tables of tests/hlo/test_custom_calls.py, compiled with and without the default
pipeline: annotations bind their operand's slot, TopK runs on the host, the oneDNN
targets run their HLO expansion as a called computation; every refused target fails
at compile time with the evaluator's one line, and hlo-opt --run prints it as one line.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from xlapy import hlo
from xlapy.backend_cpu import CompileOptions, compile
from xlapy.frontend import hlo_opt
from tests.corpus_util import assert_close
from tests.hlo.test_custom_calls import (ALLOCATE, COMPUTING, IDENTITY, REFUSED, TOPK_CMP,
                                         module, random_args)


def run_both(text, args):
    expected = hlo.evaluate(hlo.parse_module(text), args)
    for pipeline in (None, "default"):
        got = compile(hlo.parse_module(text),
                      CompileOptions(pipeline=pipeline, disk_cache=False)).run(*args)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            assert_close(g, e, str(pipeline))
    return expected


@pytest.mark.parametrize("name,text,formula", COMPUTING, ids=[c[0] for c in COMPUTING])
def test_custom_call_compiles_like_the_evaluator(name, text, formula):
    m = hlo.parse_module(text)
    run_both(text, random_args(m))


def test_onednn_matmul_uses_a_gemm_and_names_its_strategy():
    text = module("a = f32[128,256] parameter(0)\nb = f32[256,128] parameter(1)",
                  'f32[128,128] custom-call(a, b), custom_call_target="__onednn$matmul"')
    executable = compile(hlo.parse_module(text), CompileOptions(pipeline="default",
                                                                disk_cache=False))
    chosen = [c.chosen for c in executable.kernel_strategies()]
    assert "custom_call_expansion" in chosen
    assert "gemm" in " ".join(chosen)          # the expansion's dot is a GEMM kernel


def test_onednn_calls_in_other_layouts():
    text = module("a = f32[2,3,4]{0,1,2} parameter(0)\nb = f32[4,5]{0,1} parameter(1)\n"
                  "c = f32[5]{0} parameter(2)",
                  'f32[2,3,5]{1,0,2} custom-call(a, b, c), custom_call_target="__onednn$matmul", '
                  'backend_config={"onednn_matmul_config":{"fusions":{"ops":["BIAS","GELU_TANH"]}}}')
    run_both(text, random_args(hlo.parse_module(text)))
    text = module("x = f32[4,6]{0,1} parameter(0)",
                  'f32[4,6]{1,0} custom-call(x), custom_call_target="__onednn$softmax", '
                  'backend_config={"onednn_softmax_config":{"softmax_axis":1}}')
    run_both(text, random_args(hlo.parse_module(text)))


@pytest.mark.parametrize("target", IDENTITY)
def test_annotation_targets_bind_their_operand(target):
    text = module("x = f32[2,3]{0,1} parameter(0)\ny = f32[2,3]{0,1} negate(x)",
                  f'f32[2,3]{{1,0}} custom-call(y), custom_call_target="{target}"')
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = run_both(text, [x])
    np.testing.assert_array_equal(got, -x)


def test_allocate_buffer_compiles_to_zeros():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, z = run_both(ALLOCATE, [x])
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, np.zeros(4, np.int32))


@pytest.mark.parametrize("op", ["add-dependency(x, t)", "domain(x), domain={kind=\"sharding\", "
                                "entry={maximal device=0}, exit={maximal device=0}}"])
def test_pass_through_ops_keep_their_own_layout(op):
    # Like the annotations: add-dependency and domain bound their operand's slot as is,
    # so a result declared in another layout read the operand's bytes in the wrong order.
    text = module("x = f32[2,3]{0,1} parameter(0)\nt = token[] after-all()",
                  f"f32[2,3]{{1,0}} {op}")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = run_both(text, [x])
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("operands,direction", [("a, b", "GT"), ("a, b", "LT"), ("b, a", "GE")])
def test_topk_with_comparator(operands, direction):
    x = np.random.default_rng(3).permutation(18).reshape(3, 6).astype(np.float32)
    run_both(TOPK_CMP % (operands, direction), [x])


@pytest.mark.parametrize("name,text,message", REFUSED, ids=[c[0] for c in REFUSED])
def test_custom_call_refused_at_compile_time(name, text, message):
    with pytest.raises(NotImplementedError, match=re.escape(message)) as info:
        compile(hlo.parse_module(text), CompileOptions(pipeline=None, disk_cache=False))
    assert "\n" not in str(info.value)


def test_hlo_opt_run_prints_the_refusal_as_one_line(tmp_path, capsys):
    path = tmp_path / "m.hlo"
    path.write_text(module("x = f32[4] parameter(0)",
                           'f32[4] custom-call(x), custom_call_target="my_kernel"'))
    assert hlo_opt.main([str(path), "--run"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hlo-opt: error: not supported: backend_cpu: r: unsupported custom-call "
                   "target 'my_kernel'"]
