"""The verifier on collectives (issue 16): groups and pairs against the module's devices,
group sizes against shapes, async halves; each error names the instruction."""
from __future__ import annotations

import pytest

from xlapy import hlo

ADD = """
add {
  add.a = f32[] parameter(0)
  add.b = f32[] parameter(1)
  ROOT add.s = f32[] add(add.a, add.b)
}
"""


def module(header: str, body: str) -> hlo.HloModule:
    return hlo.parse_module(f"HloModule m{header}\n{ADD}\nENTRY e {{\n{body.strip()}\n}}\n")


def check_error(header: str, body: str, fragment: str) -> None:
    with pytest.raises(hlo.VerifyError) as info:
        hlo.verify(module(header, body))
    message = str(info.value)
    assert message.startswith("computation e, instruction %r = "), message
    assert fragment in message, message
    assert "\n" not in message


X = "  x = f32[8,4] parameter(0)\n"
FLAT = "channel_id=1, use_global_device_ids=true"


@pytest.mark.parametrize("header,line,fragment", [
    (", num_partitions=4",
     f"ROOT r = f32[8,4] all-reduce(x), {FLAT}, replica_groups={{{{0,1}},{{2,5}}}}, to_apply=add",
     "replica_groups names device 5, but the module has 4 devices (ids 0..3) "
     "(replica_count=1, num_partitions=4)"),
    (", num_partitions=4",
     f"ROOT r = f32[8,4] all-reduce(x), {FLAT}, replica_groups={{{{0,1}},{{1,2,3}}}}, to_apply=add",
     "replica_groups names device 1 twice"),
    (", num_partitions=4",
     f"ROOT r = f32[8,4] all-reduce(x), {FLAT}, replica_groups={{{{0,1}},{{3}}}}, to_apply=add",
     "replica_groups leaves out device 2"),
    (", replica_count=2, num_partitions=2",
     "ROOT r = f32[8,4] all-reduce(x), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=add",
     "replica_groups names replica 2, but the module has 2 replicas"),
    (", replica_count=2",
     "ROOT r = f32[8,4] all-reduce(x), use_global_device_ids=true, replica_groups={}, to_apply=add",
     "use_global_device_ids=true needs a channel_id"),
    (", num_partitions=4",
     f"ROOT r = f32[16,4] all-gather(x), {FLAT}, replica_groups={{{{0}},{{1,2,3}}}}, dimensions={{0}}",
     "all-gather needs groups of one size, got sizes [1, 3]"),
    (", num_partitions=4",
     f"ROOT r = f32[16,4] all-gather(x), {FLAT}, replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}",
     "all-gather over groups of 4 makes dimension 0 of operand 0 32, not 16"),
    (", num_partitions=3",
     f"ROOT r = f32[4,4] reduce-scatter(x), {FLAT}, replica_groups={{{{0,1,2}}}}, dimensions={{0}}, "
     "to_apply=add",
     "reduce-scatter over groups of 3 cannot split dimension 0 of operand 0 (8): not divisible"),
    (", num_partitions=4",
     f"ROOT r = f32[4,4] reduce-scatter(x), {FLAT}, replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}, "
     "to_apply=add",
     "reduce-scatter over groups of 4 makes dimension 0 of operand 0 2, not 4"),
    (", num_partitions=3",
     "ROOT r = f32[8,4] all-to-all(x), channel_id=1, replica_groups={{0,1,2}}, dimensions={1}",
     "all-to-all splits dimension 1 of size 4 into 3 parts (the group size): not divisible"),
    (", num_partitions=4",
     "ROOT r = (f32[8,4], f32[8,4]) all-to-all(x, x), channel_id=1, replica_groups={{0,1,2,3}}",
     "all-to-all without dimensions= takes one operand per participant: 4, got 2"),
    (", num_partitions=4",
     "ROOT r = f32[8,4] collective-permute(x), channel_id=1, source_target_pairs={{0,1},{2,1}}",
     "source_target_pairs has target 1 twice"),
    (", num_partitions=2",
     "ROOT r = f32[8,4] collective-permute(x), channel_id=1, source_target_pairs={{0,2}}",
     "source_target_pairs target 2 is not a partition (the module has 2 partitions, ids 0..1)"),
    (", replica_count=2, num_partitions=2",
     "ROOT r = f32[8,4] collective-permute(x), source_target_pairs={{0,1},{0,0}}",
     "source_target_pairs has source 0 twice"),
    (", num_partitions=4",
     "ROOT r = f32[8,4] collective-broadcast(x), channel_id=1, replica_groups={{0,1},{2},{3}}",
     "collective-broadcast needs groups of one size, got sizes [1, 2]"),
    ("", "ROOT r = f32[8,4] all-reduce(x), replica_groups={{0,1},{1}}, to_apply=add",
     "replica_groups names id 1 twice"),
])
def test_collective_errors(header, line, fragment):
    check_error(header, X + "  " + line, fragment)


def test_shape_errors_of_collectives_name_the_instruction():
    check_error(", num_partitions=2",
                X + f"  ROOT r = f32[8,5] all-reduce(x), {FLAT}, replica_groups={{{{0,1}}}}, "
                    "to_apply=add",
                "shape f32[8,5] does not match the inferred f32[8,4]")


def test_done_must_take_its_start():
    check_error(", num_partitions=2",
                X + "  s = (f32[8,4], f32[8,4], u32[], u32[]) collective-permute-start(x), "
                    "channel_id=1, source_target_pairs={{0,1}}\n"
                    "  ROOT r = f32[8,4] all-gather-done(s)",
                "must take a all-gather-start, got collective-permute-start")


def test_device_ids_are_u32_scalars():
    with pytest.raises(hlo.VerifyError, match=r"shape s32\[\] does not match the inferred u32\[\]"):
        hlo.verify(module(", num_partitions=2", "ROOT r = s32[] partition-id()"))


def test_uneven_all_reduce_groups_and_a_module_without_device_counts_verify():
    hlo.verify(module(", num_partitions=4", X + f"  ROOT r = f32[8,4] all-reduce(x), {FLAT}, "
                      "replica_groups={{0},{1,2,3}}, to_apply=add"))
    # JAX's global module (before partitioning) names 4 devices but declares none:
    # as in XLA, only the checks that need no device count apply.
    hlo.verify(module("", X + f"  ROOT r = f32[8,4] all-reduce(x), {FLAT}, "
                      "replica_groups={{0,1,2,3}}, to_apply=add"))


def test_verify_context_prefixes_collective_errors():
    m = module(", num_partitions=2", X + "  ROOT r = f32[8,4] collective-permute(x), channel_id=1, "
                                         "source_target_pairs={{0,1},{0,1}}")
    with pytest.raises(hlo.VerifyError, match=r"^after pass cse: computation e, instruction %r"):
        hlo.verify(m, context="after pass cse")
