"""hlo/sharding.py: `sharding=` parsed into HloSharding, printed back as written,
verified against shapes and device counts; the tile geometry the partitioner uses;
Shardy's form (JAX's default output) mapped onto the same shardings."""
import glob
import os

import numpy as np
import pytest

from xlapy import hlo
from xlapy.hlo.sharding import (HloSharding, ShardingError, parse_sdy_mesh, parse_sdy_sharding,
                                parse_sharding, sdy_meshes_of, sdy_sharding_of)

CORPUS = os.path.join(os.path.dirname(__file__), "..", "corpus_devices")

SPELLINGS = [
    "{replicated}", "{manual}", "{maximal device=3}", "{unknown}",
    "{devices=[2,2]0,1,2,3}", "{devices=[2,2]<=[4]}", "{devices=[4,1]<=[4]}",
    "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
    "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
    "{{replicated}, {devices=[4,1]<=[4]}}", "{}",
    '{devices=[2,2]3,2,1,0 metadata={op_name="x"}}',
    "{replicated metadata={op_name=\"a{b}\"}}",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_spelling_prints_back(text):
    s = parse_sharding(text)
    assert s.to_text() == text
    assert parse_sharding(s.canonical_text()) == s


def test_iota_and_list_forms_are_equal():
    a = parse_sharding("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    b = parse_sharding("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}")
    assert a == b and a.devices == (0, 2, 1, 3) and a.replicate_on_last_tile_dim
    assert a.data_rank == 2 and a.replication == 2 and a.num_tiles == 2


def test_tuple_and_maximal():
    t = parse_sharding("{{replicated}, {maximal device=1}, {devices=[1,4]<=[4]}}")
    assert t.is_tuple and len(t.elements) == 3
    assert t.element(1).device == 1 and t.element(2).tile_dims == (1, 4)
    assert parse_sharding("{}").elements == ()


def test_geometry_uneven():
    s = parse_sharding("{devices=[2,2]<=[2,2]T(1,0)}")   # devices [[0,2],[1,3]]
    dims = (5, 3)
    assert s.tile_shape(dims) == (3, 2)
    assert s.tile_index(2) == (0, 1)
    assert s.tile_offsets(dims, 2) == (0, 2)
    assert s.tile_limits(dims, 3) == (5, 3)
    assert s.devices_of_tile((1, 0)) == (1,)
    r = parse_sharding("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")
    assert r.devices_of_tile((1, 0)) == (2, 3)
    assert r.tile_index(3) == (1, 0)


def test_tiled_constructor_normalizes():
    assert HloSharding.tiled(np.zeros((1, 1), int)).is_replicated
    assert HloSharding.tiled(np.arange(4).reshape(1, 1, 4), replicate_last=True).is_replicated
    s = HloSharding.tiled(np.arange(4).reshape(2, 2, 1), replicate_last=True)
    assert s.tile_dims == (2, 2) and s.subgroups == ()
    assert s.canonical_text() == "{devices=[2,2]<=[4]}"


@pytest.mark.parametrize("text, why", [
    ("replicated", "braces"), ("{devices=[2,2]0,1,2}", "needs 4"),
    ("{devices=[2,2]<=[8]}", "needs 4"), ("{devices=[2]<=[2]T(0,1)}", "permute"),
    ("{devices=[2,2]<=[4] last_tile_dims={bogus}}", "manual/replicated"),
    ("{maximal}", "sharding must be"), ("{devices=[0]}", "positive"),
    ("{devices=[2]0,1 extra}", "unexpected"), ("{{replicated}", "unbalanced"),
])
def test_malformed(text, why):
    with pytest.raises(ShardingError, match=why):
        parse_sharding(text)


def test_malformed_in_module_is_a_parse_error():
    with pytest.raises(hlo.ParseError, match="needs 4"):
        hlo.parse_module("HloModule m\nENTRY e {\n  ROOT p = f32[4,4] parameter(0), "
                         "sharding={devices=[2,2]0,1,2}\n}\n")


@pytest.mark.parametrize("sharding, shape, header, why", [
    ("{devices=[2,2]<=[4]}", "f32[8]", "num_partitions=4", "splits 2 dimensions"),
    ("{devices=[4,1]<=[4]}", "f32[8,2]", "num_partitions=2", "the module runs on 2"),
    ("{devices=[2,2]0,1,2,2}", "f32[8,2]", "num_partitions=4", "twice"),
    ("{maximal device=5}", "f32[8,2]", "num_partitions=4", "out of range"),
])
def test_verifier(sharding, shape, header, why):
    m = hlo.parse_module(f"HloModule m, {header}\nENTRY e {{\n  ROOT p = {shape} parameter(0), "
                         f"sharding={sharding}\n}}\n")
    with pytest.raises(hlo.VerifyError, match=why):
        hlo.verify(m)


def test_verifier_tuple_arity():
    m = hlo.parse_module("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"
                         "  ROOT t = (f32[2], f32[2]) tuple(p, p), sharding={{replicated}}\n}\n")
    with pytest.raises(hlo.VerifyError, match="1 elements"):
        hlo.verify(m)


# --- Shardy --------------------------------------------------------------------------------

MESHES = {"mesh": parse_sdy_mesh('#sdy.mesh<["x"=2, "y"=2]>'),
          "m8": parse_sdy_mesh('#sdy.mesh<["a"=4, "b"=2]>'),
          "rev": parse_sdy_mesh('#sdy.mesh<["i"=4], device_ids=[3,2,1,0]>'),
          "max": parse_sdy_mesh("#sdy.mesh<[], device_ids=[2]>")}


@pytest.mark.parametrize("sdy, classic", [
    ('#sdy.sharding<@mesh, [{"x"}, {"y"}]>', "{devices=[2,2]<=[4]}"),
    ('#sdy.sharding<@mesh, [{"y"}, {"x"}]>', "{devices=[2,2]<=[2,2]T(1,0)}"),
    ('#sdy.sharding<@mesh, [{"y"}, {}]>', "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    ('#sdy.sharding<@mesh, [{}, {"y"}]>', "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    ('#sdy.sharding<@mesh, [{"x", "y"}, {}]>', "{devices=[4,1]<=[4]}"),
    ('#sdy.sharding<@mesh, [{"y", "x"}, {}]>', "{devices=[4,1]<=[2,2]T(1,0)}"),
    ('#sdy.sharding<@mesh, [{}, {}]>', "{replicated}"),
    ('#sdy.sharding<@mesh, [{"x", ?}, {?}], replicated={"y"}>',
     "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
    ('#sdy.sharding<@m8, [{"a":(1)2}, {"b"}]>', "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}"),
    ('#sdy.sharding<@m8, [{"a":(2)2}, {}]>', "{devices=[2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}"),
    ('#sdy.sharding<@rev, [{"i"}]>', "{devices=[4]3,2,1,0}"),
    ('#sdy.sharding<@max, []>', "{maximal device=2}"),
    ('#sdy.sharding<mesh<["z"=2]>, [{"z"}]>', "{devices=[2]<=[2]}"),
    ('#sdy.sharding_per_value<[<@mesh, [{"y"}]>, <@mesh, []>]>',
     "{{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}, {replicated}}"),
])
def test_sdy_maps_onto_classic(sdy, classic):
    assert parse_sdy_sharding(sdy, MESHES) == parse_sharding(classic)


@pytest.mark.parametrize("sdy, why", [
    ('#sdy.sharding<@nope, [{"x"}]>', "does not define"),
    ('#sdy.sharding<@mesh, [{"z"}]>', "unknown axis"),
    ('#sdy.sharding<@mesh, [{"x"}, {"x"}]>', "twice"),
    ("#sdy.sharding<mesh>", "must look like"),
])
def test_sdy_malformed(sdy, why):
    with pytest.raises(ShardingError, match=why):
        parse_sdy_sharding(sdy, MESHES)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(CORPUS, "*.global.hlo"))))
def test_corpus_sdy_agrees_with_classic(path):
    """JAX writes both forms on the global modules: they must name the same sharding."""
    m = hlo.parse_module(open(path).read())
    meshes = sdy_meshes_of(m.config)
    checked = 0
    for comp in m.computations:
        for instr in comp.instructions:
            s = sdy_sharding_of(instr, meshes)
            if s is None:
                continue
            classic = instr.attrs.get("sharding")
            if classic is None:
                continue
            if classic.is_manual or classic.is_tuple:
                continue
            assert s == classic, (instr.name, s.canonical_text(), classic.to_text())
            checked += 1
    if os.path.basename(path).startswith("auto_"):
        assert checked > 0
