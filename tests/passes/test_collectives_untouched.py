"""Passes leave collectives and device ids alone (issue 16).

Their value depends on the device: constant folding must not evaluate them
(all-reduce of a constant is N times the constant on N devices, replica-id is
not 0 everywhere), CSE must not merge them, fusion must not pull them into a
kernel, and DCE must keep the async halves. The default pipeline must compute
on every device what the module computed before.
"""
from __future__ import annotations

import numpy as np

from xlapy import hlo
from xlapy.passes import CSE, DCE, ConstantFolding
from xlapy.passes.pipeline import cpu_pipeline

from .helpers import opcodes, parse

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def test_all_reduce_of_a_constant_is_not_folded():
    module = parse("HloModule m, replica_count=2\n" + ADD + """
ENTRY e {
  c = f32[4] constant({1, 2, 3, 4})
  ROOT r = f32[4] all-reduce(c), replica_groups={}, to_apply=add
}""")
    assert not ConstantFolding().run(module)
    outputs = hlo.evaluate_devices(module, [[], []])
    for out in outputs:
        np.testing.assert_array_equal(out[0], [2, 4, 6, 8])


def test_device_ids_are_not_folded():
    """Before the fix replica-id folded to 0 on every device (it has no operands)."""
    module = parse("""
HloModule m, replica_count=2, num_partitions=2
ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  c = u32[] constant(10)
  m = u32[] multiply(r, c)
  ROOT s = u32[] add(m, p)
}""")
    assert not ConstantFolding().run(module)
    assert opcodes(module.entry).count("constant") == 1
    outputs = hlo.evaluate_devices(module, [[]] * 4)
    assert [int(o[0]) for o in outputs] == [0, 1, 10, 11]


def test_cse_keeps_each_collective_and_device_id():
    module = parse("HloModule m, num_partitions=2\n" + ADD + """
ENTRY e {
  x = f32[4] parameter(0)
  r1 = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  r2 = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  i = u32[] partition-id()
  j = u32[] partition-id()
  k = u32[] add(i, j)
  sum = f32[4] add(r1, r2)
  ROOT t = (f32[4], u32[]) tuple(sum, k)
}""")
    assert not CSE().run(module)
    assert opcodes(module.entry).count("all-reduce") == 2
    assert opcodes(module.entry).count("partition-id") == 2


def test_cse_keeps_calls_whose_body_holds_a_collective():
    module = parse("HloModule m, num_partitions=2\n" + ADD + """
body1 {
  p1 = f32[4] parameter(0)
  ROOT r1 = f32[4] all-reduce(p1), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}

body2 {
  p2 = f32[4] parameter(0)
  ROOT r2 = f32[4] all-reduce(p2), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}

ENTRY e {
  x = f32[4] parameter(0)
  c1 = f32[4] call(x), to_apply=body1
  c2 = f32[4] call(x), to_apply=body2
  ROOT sum = f32[4] add(c1, c2)
}""")
    assert not CSE().run(module)
    assert opcodes(module.entry).count("call") == 2


def test_dce_keeps_async_halves_and_drops_a_dead_sync_collective():
    module = parse("HloModule m, num_partitions=2\n" + ADD + """
ENTRY e {
  x = f32[4] parameter(0)
  start = f32[4] all-reduce-start(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  done = f32[4] all-reduce-done(start)
  dead = f32[4] all-reduce(x), channel_id=2, replica_groups={}, to_apply=add
  ROOT n = f32[4] negate(x)
}""")
    assert DCE().run(module)
    assert opcodes(module.entry) == ["parameter", "all-reduce-start", "all-reduce-done",
                                     "negate"]


def test_constrained_layout_collective_is_kept_by_dce():
    module = parse("HloModule m, replica_count=2\n" + ADD + """
ENTRY e {
  x = f32[4] parameter(0)
  dead = f32[4] all-reduce(x), replica_groups={}, constrain_layout=true, to_apply=add
  ROOT n = f32[4] negate(x)
}""")
    assert not DCE().run(module)


PIPELINE_CASE = "HloModule m, num_partitions=4\n" + ADD + """
ENTRY e {
  x = f32[16,8] parameter(0)
  two = f32[] constant(2)
  b2 = f32[16,8] broadcast(two), dimensions={}
  y = f32[16,8] multiply(x, b2)
  e = f32[16,8] exponential(y)
  r = f32[16,8] all-reduce(e), channel_id=1, replica_groups=[2,2]<=[4], use_global_device_ids=true, to_apply=add
  p = u32[] partition-id()
  pf = f32[] convert(p)
  pb = f32[16,8] broadcast(pf), dimensions={}
  z = f32[16,8] add(r, pb)
  g = f32[32,8] all-gather(z), channel_id=2, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, dimensions={0}
  ROOT t = f32[32,8] tanh(g)
}"""


def test_default_pipeline_keeps_collectives_and_their_numbers():
    before = parse(PIPELINE_CASE)
    after = parse(PIPELINE_CASE)
    cpu_pipeline(verify_each=True).run(after)
    hlo.verify(after)
    top = opcodes(after.entry)
    assert top.count("all-reduce") == 1 and top.count("all-gather") == 1
    assert top.count("partition-id") == 1
    for comp in after.computations:
        if comp.is_fusion_computation:
            assert not any(i.info.per_device for i in comp.instructions), comp.name
    rng = np.random.default_rng(0)
    args = [[rng.standard_normal((16, 8)).astype(np.float32)] for _ in range(4)]
    want = hlo.evaluate_devices(before, args)
    got = hlo.evaluate_devices(after, args)
    for d in range(4):
        np.testing.assert_allclose(got[d][0], want[d][0], rtol=2e-5, atol=1e-6)
