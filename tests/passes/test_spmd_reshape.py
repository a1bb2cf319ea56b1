"""Reshapes that keep a split (passes/spmd_reshape.py): the major dimension of a merged
or split group split evenly carries over, each device reshapes its tile, no
communication; the rest falls back (gathered) -- all vs hlo.evaluate."""
import numpy as np
import pytest

from xlapy import hlo, passes
from xlapy.hlo import parse_sharding
from xlapy.passes.spmd_reshape import reshape_sharding
from xlapy.passes.spmd_reshard import collective_bytes
from tests.passes.test_spmd_partitioner import check


@pytest.mark.parametrize("src, dst, s, expect", [
    ((8, 4, 3), (8, 12), "{devices=[1,2,1]<=[2]}", "{devices=[1,2]<=[2]}"),       # [D,H,K]->[D,H*K]
    ((8, 12), (8, 4, 3), "{devices=[1,2]<=[2]}", "{devices=[1,2,1]<=[2]}"),
    ((6, 12), (2, 3, 4, 3), "{devices=[2,2]<=[4]}", "{devices=[2,1,2,1]<=[4]}"),   # [BT,HK]->[B,T,H,K]
    ((6, 12), (2, 3, 4, 3), "{devices=[1,4]<=[4]}", "{devices=[1,1,4,1]<=[4]}"),
    ((5, 6), (5, 2, 3), "{devices=[2,1]<=[2]}", "{devices=[2,1,1]<=[2]}"),        # uneven, 1:1 group
    ((4, 1, 6), (4, 6), "{devices=[1,1,2]<=[2]}", "{devices=[1,2]<=[2]}"),        # size-1 dims
    ((8, 6), (48,), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"),
    ((6, 4), (4, 6), "{devices=[4,1]<=[4]}", None),        # 4 does not divide 6 into blocks
    ((8, 6), (48,), "{devices=[2,2]<=[4]}", None),          # two splits in one group
    ((6, 4), (24,), "{devices=[1,2]<=[2]}", None),          # minor dimension split
])
def test_reshape_sharding(src, dst, s, expect):
    got = reshape_sharding(parse_sharding(s), src, dst)
    assert got == (parse_sharding(expect) if expect else None), got


@pytest.mark.parametrize("n, src, dst, s, want, local", [
    (2, (8, 4, 3), (8, 12), "{devices=[1,2,1]<=[2]}", None, True),
    (4, (6, 12), (2, 3, 4, 3), "{devices=[2,2]<=[4]}", None, True),
    (2, (5, 6), (5, 2, 3), "{devices=[2,1]<=[2]}", None, True),
    (4, (8, 6), (48,), "{devices=[4,1]<=[4]}", "{devices=[4]<=[4]}", True),
    (2, (8, 12), (8, 4, 3), "{replicated}", "{devices=[1,2,1]<=[2]}", True),   # sliced, local
    (2, (6, 4), (4, 6), "{devices=[2,1]<=[2]}", "{devices=[2,1]<=[2]}", True),
    (4, (6, 4), (4, 6), "{devices=[4,1]<=[4]}", "{devices=[4,1]<=[4]}", False),
    (4, (8, 6), (48,), "{devices=[2,2]<=[4]}", "{devices=[4]<=[4]}", False),
    (2, (6, 4), (24,), "{devices=[1,2]<=[2]}", None, False),
])
def test_partitioned_reshape(n, src, dst, s, want, local):
    shape = lambda d: f"f32[{','.join(map(str, d))}]"  # noqa: E731
    ann = f", sharding={want}" if want else ""
    m = check(f"HloModule m, num_partitions={n}\nENTRY e {{\n"
              f"  p = {shape(src)} parameter(0), sharding={s}\n"
              f"  ROOT r = {shape(dst)} reshape(p){ann}\n}}\n", n)
    assert (collective_bytes(m) == 0) == local, m.to_text()
