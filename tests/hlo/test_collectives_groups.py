"""hlo/collectives.py: XLA's group modes and the device groups they give (issue 16).

Device d is replica d // P, partition d % P. The expected groups below are written
out by hand from XLA's rules (GetCollectiveOpGroupMode,
GetParticipatingDevicesGroups)."""
from __future__ import annotations

import pytest

from xlapy import hlo
from xlapy.hlo import collectives as C

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def instr(line: str, header: str = "") -> hlo.HloInstruction:
    """The ROOT instruction of a one-line entry over an f32[8] parameter x (not verified)."""
    text = f"HloModule m{header}\n{ADD}\nENTRY e {{\n  x = f32[8] parameter(0)\n  ROOT {line}\n}}\n"
    return hlo.parse_module(text).entry.root


AR = "r = f32[8] all-reduce(x), to_apply=add"
AG = "r = f32[16] all-gather(x), dimensions={0}"
A2A = "r = f32[8] all-to-all(x), dimensions={0}"
CP = "r = f32[8] collective-permute(x)"
CB = "r = f32[8] collective-broadcast(x)"


@pytest.mark.parametrize("line,attrs,mode", [
    (AR, "", C.CROSS_REPLICA),
    (AR, ", use_global_device_ids=false", C.CROSS_REPLICA),
    (AR, ", channel_id=1", C.CROSS_REPLICA_AND_PARTITION),
    (AR, ", channel_id=1, use_global_device_ids=true", C.FLATTENED_ID),
    (AG, "", C.CROSS_REPLICA),
    (AG, ", channel_id=7", C.CROSS_REPLICA_AND_PARTITION),
    (AG, ", channel_id=7, use_global_device_ids=true", C.FLATTENED_ID),
    ("r = f32[4] reduce-scatter(x), dimensions={0}, to_apply=add", ", channel_id=1, "
     "use_global_device_ids=true", C.FLATTENED_ID),
    ("r = f32[8] all-reduce-start(x), to_apply=add", ", channel_id=1", C.CROSS_REPLICA_AND_PARTITION),
    (A2A, "", C.CROSS_REPLICA),
    (A2A, ", channel_id=1", C.CROSS_PARTITION),
    (A2A, ", channel_id=1, use_global_device_ids=true", C.CROSS_PARTITION),   # ignored
    (CP + ", source_target_pairs={}", "", C.CROSS_REPLICA),
    (CP + ", source_target_pairs={}", ", channel_id=2", C.CROSS_PARTITION),
    (CB, ", channel_id=2", C.CROSS_PARTITION),
])
def test_group_mode(line, attrs, mode):
    assert C.group_mode(instr(line + attrs)) == mode


def test_global_ids_without_channel_is_an_error():
    with pytest.raises(C.CollectiveError, match="use_global_device_ids=true needs a channel_id"):
        C.group_mode(instr(AR + ", use_global_device_ids=true"))


# (R, P, instruction attributes, groups of global devices in rank order)
GROUPS = [
    # cross-replica: replica groups, repeated in every partition
    (4, 1, "replica_groups={}", ((0, 1, 2, 3),)),
    (4, 1, "replica_groups={{0,1},{2,3}}", ((0, 1), (2, 3))),
    (4, 1, "replica_groups={{3,0},{1,2}}", ((3, 0), (1, 2))),
    (2, 2, "replica_groups={}", ((0, 2), (1, 3))),
    (2, 3, "replica_groups={{1,0}}", ((3, 0), (4, 1), (5, 2))),
    (1, 4, "replica_groups={}", ((0,), (1,), (2,), (3,))),
    # cross-replica-and-partition: replica groups, every partition of those replicas
    (1, 4, "channel_id=1, replica_groups={}", ((0, 1, 2, 3),)),
    (2, 2, "channel_id=1, replica_groups={{0},{1}}", ((0, 1), (2, 3))),
    (2, 2, "channel_id=1, replica_groups={{1,0}}", ((2, 3, 0, 1),)),
    # flattened ids: global devices as written
    (1, 4, "channel_id=1, replica_groups={{0,2},{1,3}}, use_global_device_ids=true",
     ((0, 2), (1, 3))),
    (2, 2, "channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true",
     ((0, 2), (1, 3))),
    (1, 3, "channel_id=1, replica_groups={{0},{1,2}}, use_global_device_ids=true",
     ((0,), (1, 2))),
    (1, 4, "channel_id=1, replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_0'}, "
           "use_global_device_ids=true", ((0, 2), (1, 3))),
]


@pytest.mark.parametrize("R,P,attrs,groups", GROUPS, ids=[f"{g[0]}x{g[1]}:{g[2]}" for g in GROUPS])
def test_device_groups_of_all_reduce(R, P, attrs, groups):
    i = instr(f"{AR}, {attrs}")
    assert C.device_groups(i, R, P) == groups
    for g in groups:
        for rank, d in enumerate(g):
            assert C.group_of(i, d, R, P) == g and C.rank_in_group(i, d, R, P) == rank


def test_cross_partition_groups_of_all_to_all():
    i = instr(f"{A2A}, channel_id=1, replica_groups={{{{1,0}}}}")
    assert C.device_groups(i, 2, 2) == ((1, 0), (3, 2))
    i = instr(f"{A2A}, channel_id=1, replica_groups={{}}")
    assert C.device_groups(i, 3, 2) == ((0, 1), (2, 3), (4, 5))


@pytest.mark.parametrize("R,P,attrs,fragment", [
    (1, 4, "channel_id=1, replica_groups={{0,1},{2,4}}, use_global_device_ids=true",
     "replica_groups names device 4, but the module has 4 devices (ids 0..3)"),
    (2, 2, "channel_id=1, replica_groups={{0,1,2}}",
     "replica_groups names replica 2, but the module has 2 replicas (ids 0..1)"),
    (1, 4, "channel_id=1, replica_groups={{0,1},{1,2,3}}, use_global_device_ids=true",
     "replica_groups names device 1 twice"),
    (1, 4, "channel_id=1, replica_groups={{0,1},{3}}, use_global_device_ids=true",
     "replica_groups leaves out device 2 (every one of the 4 must be in a group)"),
    (1, 4, "channel_id=1, replica_groups={}, use_global_device_ids=true",
     "use_global_device_ids=true needs explicit replica_groups"),
    (1, 2, "replica_groups={{0},{}}", "replica_groups has an empty group"),
])
def test_device_group_errors_name_the_instruction(R, P, attrs, fragment):
    with pytest.raises(C.CollectiveError) as info:
        C.device_groups(instr(f"{AR}, {attrs}"), R, P)
    assert str(info.value) == f"%r (all-reduce): {fragment}"
    assert isinstance(info.value, ValueError)


def test_permute_pairs_in_each_mode():
    cross_partition = instr(f"{CP}, channel_id=1, source_target_pairs={{{{0,1}},{{1,0}}}}")
    assert C.permute_pairs(cross_partition, 2, 2) == ((0, 1), (1, 0), (2, 3), (3, 2))
    cross_replica = instr(f"{CP}, source_target_pairs={{{{0,1}}}}")
    assert C.permute_pairs(cross_replica, 2, 2) == ((0, 2), (1, 3))
    partial = instr(f"{CP}, channel_id=1, source_target_pairs={{{{0,1}},{{1,2}}}}")
    assert [C.permute_peers(partial, d, 1, 4) for d in range(4)] == [
        (None, 1), (0, 2), (1, None), (None, None)]


@pytest.mark.parametrize("pairs,fragment", [
    ("{{0,1},{0,2}}", "source_target_pairs has source 0 twice"),
    ("{{0,2},{1,2}}", "source_target_pairs has target 2 twice"),
    ("{{0,4}}", "source_target_pairs target 4 is not a partition (the module has 4 partitions"),
])
def test_permute_pair_errors(pairs, fragment):
    with pytest.raises(C.CollectiveError, match=fragment.replace("(", r"\(")):
        C.permute_pairs(instr(f"{CP}, channel_id=1, source_target_pairs={pairs}"), 1, 4)


def test_broadcast_root_is_the_first_of_the_group():
    i = instr(f"{CB}, channel_id=1, replica_groups={{{{1,0}},{{3,2}}}}")
    assert [C.broadcast_root(i, d, 1, 4) for d in range(4)] == [1, 1, 3, 3]


def test_device_numbering():
    assert [(C.replica_of(d, 3), C.partition_of(d, 3)) for d in range(6)] == [
        (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert C.device_of(1, 2, 3) == 5


def test_async_halves():
    m = hlo.parse_module(f"HloModule m, num_partitions=2\n{ADD}\nENTRY e {{\n"
                         "  x = f32[8] parameter(0)\n"
                         "  st = f32[8] all-reduce-start(x), to_apply=add\n"
                         "  ROOT d = f32[8] all-reduce-done(st)\n}\n")
    start, done = m.entry.instruction("st"), m.entry.root
    assert C.is_async_start(start) and C.is_async_done(done) and C.is_collective(done)
    assert C.async_start_of(done) is start
    assert start.info.sync_op == done.info.sync_op == "all-reduce"
    assert not C.is_collective(m.entry.instruction("x"))
    assert set(hlo.opcodes.collective_opcodes()) >= {"all-reduce", "all-gather-done"}
