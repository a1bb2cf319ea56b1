"""Collectives in the text format (issue 16): module device counts, every spelling of
replica_groups, the structured attributes, the async pairs with XLA's shapes, and
`sharding=` kept verbatim; each prints back exactly and parses to the same module."""
from __future__ import annotations

from textwrap import dedent

import pytest

from xlapy import hlo
from xlapy.hlo import ReplicaGroups
from xlapy.hlo.replica_groups import parse_replica_groups

ADD = """
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""


def roundtrip(text: str, *spelled: str) -> hlo.HloModule:
    """Parses and verifies `text`; its printed form parses back to the same text, and
    contains each of `spelled` exactly as written."""
    module = hlo.parse_module(dedent(text))
    hlo.verify(module)
    printed = hlo.print_module(module)
    assert hlo.print_module(hlo.parse_module(printed)) == printed
    for piece in spelled:
        assert piece in printed, (piece, printed)
    return module


def module_text(body: str, header: str = "num_partitions=4", comps: str = ADD) -> str:
    return f"HloModule m, {header}\n{comps}\nENTRY %e {{\n{dedent(body).strip()}\n}}\n"


# --- the module header ------------------------------------------------------------------

def test_device_counts_parse_print_and_default_to_one():
    m = roundtrip(module_text("ROOT %p = f32[4] parameter(0)", "replica_count=2, num_partitions=3"),
                  "HloModule m, replica_count=2, num_partitions=3\n")
    assert (m.replica_count, m.num_partitions, m.num_devices) == (2, 3, 6)
    plain = hlo.parse_module("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    assert (plain.replica_count, plain.num_partitions, plain.num_devices) == (1, 1, 1)
    assert "replica_count" not in hlo.print_module(plain)


def test_device_counts_keep_their_place_among_other_header_items():
    text = module_text("ROOT %p = f32[4] parameter(0)",
                       "is_scheduled=true, entry_computation_layout={(f32[4]{0})->f32[4]{0}}, "
                       "allow_spmd_sharding_propagation_to_output={true}, num_partitions=4")
    assert roundtrip(text, text.splitlines()[0] + "\n").num_partitions == 4


def test_setting_device_counts():
    m = hlo.parse_module("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    m.num_partitions = 4
    m.replica_count = 1               # the default: not written
    assert hlo.print_module(m).startswith("HloModule m, num_partitions=4\n")
    assert m.num_devices == 4
    for bad in (0, -1, 2.5, True, "4"):
        with pytest.raises(ValueError, match="num_partitions must be a positive integer"):
            m.num_partitions = bad


@pytest.mark.parametrize("value", ["0", "-2", "two", "{4}", "99999999999", "\u00b2"])
def test_bad_device_count_is_a_parse_error_at_its_value(value):
    text = f"HloModule m, replica_count={value}\nENTRY e {{\n  ROOT p = f32[] parameter(0)\n}}\n"
    with pytest.raises(hlo.ParseError) as info:
        hlo.parse_module(text)
    message = str(info.value)
    assert message.startswith("line 1, column 28: replica_count must be a positive integer, "
                              f"got {value!r}")


# --- replica_groups ----------------------------------------------------------------------

SPELLINGS = [
    ("{{0,1},{2,3}}", ((0, 1), (2, 3)), "list"),
    ("{}", (), "list"),
    ("{{0},{1,2,3}}", ((0,), (1, 2, 3)), "list"),
    ("{{3,1,0,2}}", ((3, 1, 0, 2),), "list"),
    ("[2,2]<=[4]", ((0, 1), (2, 3)), "iota"),
    ("[1,4]<=[4]", ((0, 1, 2, 3),), "iota"),
    ("[2,2]<=[2,2]T(1,0)", ((0, 2), (1, 3)), "iota"),
    ("[4,2]<=[2,2,2]T(2,1,0)", ((0, 4), (2, 6), (1, 5), (3, 7)), "iota"),
    # XLA's SPMD partitioner: the named axes move last, one group per position of the others.
    ("mesh['axis_0'=2,'axis_1'=1,'axis_2'=2] {'axis_0'}", ((0, 2), (1, 3)), "mesh"),
    ("mesh['axis_0'=2,'axis_1'=2] {'axis_1'}", ((0, 1), (2, 3)), "mesh"),
    ("mesh['axis_0'=1,'axis_1'=4] {'axis_1'}", ((0, 1, 2, 3),), "mesh"),
    ("mesh['x'=2,'y'=2] {'y','x'}", ((0, 2, 1, 3),), "mesh"),
    ("mesh['x'=2,'y'=2] {}", ((0,), (1,), (2,), (3,)), "mesh"),
    ("mesh['x'=2,'y'=2], device_ids=(3,2,1,0) {'x'}", ((3, 1), (2, 0)), "mesh"),
    ("mesh['x'=4], device_ids=([4]<=[2,2]T(1,0)) {'x'}", ((0, 2, 1, 3),), "mesh"),
    ("mesh['a'=8] {'a':(1)2}", ((0, 4), (1, 5), (2, 6), (3, 7)), "mesh"),
    ("mesh['a'=8] {'a':(2)2,'a':(1)2}", ((0, 4, 2, 6), (1, 5, 3, 7)), "mesh"),
]


@pytest.mark.parametrize("text,groups,form", SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_replica_group_spellings_expand(text, groups, form):
    value = parse_replica_groups(text)
    assert value.groups == groups and value.form == form and value.text == text


@pytest.mark.parametrize("text", [s[0] for s in SPELLINGS])
def test_replica_group_spellings_print_back_exactly(text):
    n = max((i for g in parse_replica_groups(text).groups for i in g), default=3) + 1
    flattened = "use_global_device_ids=true, " if text != "{}" else ""
    m = roundtrip(module_text(f"""
        %x = f32[8] parameter(0)
        ROOT %r = f32[8] all-reduce(%x), channel_id=1, replica_groups={text}, {flattened}to_apply=%add
        """, f"num_partitions={n}"), f"replica_groups={text}, ")
    value = m.entry.root.attrs["replica_groups"]
    assert isinstance(value, ReplicaGroups) and value.text == text


def test_replica_groups_compare_by_groups():
    assert parse_replica_groups("[2,2]<=[4]") == parse_replica_groups("{{0,1},{2,3}}")
    assert ReplicaGroups(((0, 1), (2, 3))).text == "{{0,1},{2,3}}"
    assert ReplicaGroups(()).text == "{}"


BAD_GROUPS = [
    ("{{0,1},{2,}}", "must look like {{0,1},{2,3}}"),
    ("[2,2]<=[5]", "iota dims [5] hold 5 ids, but 2 groups of 2 need 4"),
    ("[2,2]<=[2,2]T(0,0)", "is not a permutation"),
    ("mesh['x'=2] {'z'}", "'z' is not an axis of the mesh"),
    ("mesh['x'=2,'y'=2], device_ids=(0,1,1,2) {'x'}", "permutation of 0..3"),
    ("mesh['a'=8] {'a':(3)2}", "does not split axis"),
    ("mesh['x'=4], device_ids=([2,2]<=[4]T(1,0)) {'x'}", "T(...) permutes its 1 dims [4]"),
    ("[1073741824,1]<=[1073741824]", "name more than 1048576 ids"),
    ("mesh['x'=65536,'y'=65536] {'x'}", "at most 1048576 devices in all"),
]


@pytest.mark.parametrize("text,fragment", BAD_GROUPS, ids=[b[0] for b in BAD_GROUPS])
def test_malformed_replica_groups_are_parse_errors_at_the_value(text, fragment):
    src = module_text(f"""
        %x = f32[8] parameter(0)
        ROOT %r = f32[8] all-reduce(%x), channel_id=1, replica_groups={text}, to_apply=%add
        """)
    with pytest.raises(hlo.ParseError) as info:
        hlo.parse_module(src)
    message = str(info.value)
    assert fragment in message, message
    line = src.splitlines().index(next(s for s in src.splitlines() if "all-reduce" in s)) + 1
    assert message.startswith(f"line {line}, column "), message


# --- the other attributes ----------------------------------------------------------------

def test_structured_collective_attributes():
    m = roundtrip(module_text("""
        %x = f32[8] parameter(0)
        %ar = f32[8] all-reduce(%x), channel_id=3, replica_groups={{0,1,2,3}}, use_global_device_ids=true, constrain_layout=true, to_apply=%add
        ROOT %cp = f32[8] collective-permute(%ar), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
        """), "channel_id=3, replica_groups={{0,1,2,3}}, use_global_device_ids=true, "
              "constrain_layout=true, to_apply=%add",
                  "channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}")
    ar, cp = m.entry.instruction("ar"), m.entry.root
    assert ar.attrs["channel_id"] == 3 and ar.attrs["use_global_device_ids"] is True
    assert ar.attrs["constrain_layout"] is True
    assert ar.attrs["replica_groups"].groups == ((0, 1, 2, 3),)
    assert cp.attrs["source_target_pairs"] == ((0, 1), (1, 2), (2, 3), (3, 0))
    assert cp.attrs["channel_id"] == 3          # one id may be shared


@pytest.mark.parametrize("attr,fragment", [
    ("source_target_pairs={{0,1,2}}", "source_target_pairs must look like"),
    ("source_target_pairs={0,1}", "source_target_pairs must look like"),
    ("channel_id=one, source_target_pairs={}", "channel_id must be an integer"),
    ("use_global_device_ids=yes, source_target_pairs={}", "must be true or false"),
])
def test_malformed_attributes(attr, fragment):
    src = module_text(f"""
        %x = f32[8] parameter(0)
        ROOT %cp = f32[8] collective-permute(%x), {attr}
        """)
    with pytest.raises(hlo.ParseError, match=fragment):
        hlo.parse_module(src)


# --- every opcode, with the shapes XLA prints -----------------------------------------------

EVERY_OPCODE = """
    %x = f32[8,2]{1,0} parameter(0)
    %y = s32[4]{0} parameter(1)
    %replica = u32[] replica-id()
    %partition = u32[] partition-id()
    %ar = (f32[8,2]{1,0}, f32[8,2]{1,0}) all-reduce(%x, %x), channel_id=1, replica_groups=[2,2]<=[4], use_global_device_ids=true, to_apply=%add
    %ag = f32[16,2]{1,0} all-gather(%x), channel_id=2, replica_groups={{0,1},{2,3}}, dimensions={0}, use_global_device_ids=true
    %rs = f32[8,1]{1,0} reduce-scatter(%x), channel_id=3, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, dimensions={1}, to_apply=%add
    %a2a = f32[8,2]{1,0} all-to-all(%x), channel_id=4, replica_groups={{0,1,2,3}}, dimensions={0}
    %a2a.tuple = (s32[4]{0}, s32[4]{0}) all-to-all(%y, %y), channel_id=5, replica_groups={{0,1},{2,3}}
    %cp = f32[8,2]{1,0} collective-permute(%x), channel_id=6, source_target_pairs={{0,1},{1,2}}
    %cb = s32[4]{0} collective-broadcast(%y), channel_id=7, replica_groups={{0,1,2,3}}
    %ars = f32[8,2]{1,0} all-reduce-start(%x), channel_id=8, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%add, backend_config={"is_sync":false}
    %ard = f32[8,2]{1,0} all-reduce-done(%ars)
    %ags = (f32[8,2]{1,0}, f32[8,4]{1,0}) all-gather-start(%x), channel_id=9, replica_groups={{0,1},{2,3}}, dimensions={1}, use_global_device_ids=true
    %agd = f32[8,4]{1,0} all-gather-done(%ags)
    %cps = (f32[8,2]{1,0}, f32[8,2]{1,0}, u32[], u32[]) collective-permute-start(%x), channel_id=10, source_target_pairs={{0,1},{1,0},{2,3},{3,2}}
    %cpd = f32[8,2]{1,0} collective-permute-done(%cps)
    %ra2a = f32[8,2]{1,0} ragged-all-to-all(%x, %x, %y, %y, %y, /*index=5*/%y), channel_id=11, replica_groups={{0,1,2,3}}
    ROOT %t = ((f32[8,2]{1,0}, f32[8,2]{1,0}), f32[16,2]{1,0}, f32[8,1]{1,0}, f32[8,2]{1,0}, (s32[4]{0}, s32[4]{0}), /*index=5*/f32[8,2]{1,0}, s32[4]{0}, f32[8,2]{1,0}, f32[8,4]{1,0}, f32[8,2]{1,0}, /*index=10*/u32[], u32[]) tuple(%ar, %ag, %rs, %a2a, %a2a.tuple, /*index=5*/%cp, %cb, %ard, %agd, %cpd, /*index=10*/%replica, %partition)
"""


def test_every_collective_opcode_round_trips():
    m = roundtrip(module_text(EVERY_OPCODE), *[line.strip().removeprefix("ROOT ")
                                               for line in EVERY_OPCODE.strip().splitlines()])
    used = {i.opcode for i in m.entry.instructions}
    every = {name for name, info in hlo.OPCODES.items() if info.collective or info.per_device}
    assert every <= used, every - used


def test_collective_permute_start_without_contexts():
    roundtrip(module_text("""
        %x = f32[4]{0} parameter(0)
        %cps = (f32[4]{0}, f32[4]{0}) collective-permute-start(%x), channel_id=1, source_target_pairs={{0,1}}
        ROOT %cpd = f32[4]{0} collective-permute-done(%cps)
        """))


def test_collectives_with_non_default_layouts():
    m = roundtrip(module_text("""
        %x = f32[4,6]{0,1} parameter(0)
        %ag = f32[4,24]{0,1} all-gather(%x), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={1}, use_global_device_ids=true
        ROOT %a2a = f32[4,24]{0,1} all-to-all(%ag), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={1}
        """))
    assert m.entry.root.shape.layout == (0, 1)


# --- sharding= is kept as written ----------------------------------------------------------

def test_sharding_is_kept_on_parameters_and_inside_fusions():
    m = roundtrip(SHARDED, *[line.strip().removeprefix("ROOT ") for line in SHARDED.splitlines()
                             if "sharding" in line])
    fused = m.computation("fused")
    # structured since issue 20 (hlo/sharding.py), the spelling kept
    assert fused.parameter(0).attrs["sharding"].to_text() == (
        "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    assert fused.root.attrs["sharding"].is_replicated
    assert m.entry.parameter(0).attrs["sharding"].to_text() == "{devices=[4,1]<=[4]}"


SHARDED = """
HloModule m, num_partitions=4

%fused (p: f32[8,4]) -> f32[8,4] {
  %p = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  ROOT %n = f32[8,4]{1,0} negate(%p), sharding={replicated}
}

ENTRY %e (x: f32[8,4]) -> f32[8,4] {
  %x = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT %f = f32[8,4]{1,0} fusion(%x), kind=kLoop, calls=%fused, sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}
}
"""
