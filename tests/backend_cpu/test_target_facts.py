"""The compile target is the pass pipeline's TargetFacts (passes/target_facts.py): the
pipeline and the backend read one object, and the backend compiles with its target's
facts (the thunks' parallel-work threshold, the pipeline run by `compile`)."""
from __future__ import annotations

import ctypes
import dataclasses

import pytest

from xlapy import backend_cpu, hlo, passes, runtime
from xlapy.backend_cpu import target as targets
from xlapy.backend_cpu.thunks import KernelThunk
from xlapy.passes.target_facts import DEFAULT, TargetFacts

# Any function address will do: the thunk is linked, never run.
_ADDRESS = ctypes.cast(ctypes.CDLL(None).abs, ctypes.c_void_p).value


@pytest.mark.parametrize("level", targets.ISA_LEVELS)
def test_every_target_is_the_pipelines_facts(level):
    target = targets.resolve(max_isa=level)
    assert isinstance(target, TargetFacts)
    assert target.vector_bytes == target.vector_bits // 8
    assert target.parallel_min_bytes == DEFAULT.parallel_min_bytes
    assert target.large_transpose_bytes == DEFAULT.large_transpose_bytes


def test_facts_are_part_of_the_fingerprint():
    target = targets.resolve(max_isa="sse4.2")
    other = dataclasses.replace(target, large_transpose_bytes=1)
    assert other.fingerprint() != target.fingerprint()


@pytest.fixture
def two_threads():
    before = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=2)
    yield
    runtime.configure(intra_op_threads=before)


@pytest.mark.parametrize("threshold,parts", [(1000, 2), (1001, 1)])
def test_a_thunk_splits_from_the_compile_targets_threshold(two_threads, threshold, parts):
    target = dataclasses.replace(targets.resolve(max_isa="sse4.2"), parallel_min_bytes=threshold)
    thunk = KernelThunk("k", extent=8, work_bytes=1000, reads=[], writes=[])
    with targets.using(target):
        thunk.link(lambda name: _ADDRESS)
    assert len(thunk.dims.slices) == parts


def test_compile_runs_the_pipeline_with_its_target(monkeypatch):
    seen = []
    pipeline = passes.cpu_pipeline

    def spy(facts=DEFAULT, **options):
        seen.append(facts)
        return pipeline(facts, **options)
    monkeypatch.setattr(passes, "cpu_pipeline", spy)
    module = hlo.parse_module("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
                              "  ROOT n = f32[4] negate(p)\n}\n")
    options = backend_cpu.CompileOptions(pipeline="default", max_isa="sse4.2", cache=False,
                                         disk_cache=False)
    backend_cpu.compile(module, options)
    assert seen == [options.target()]
