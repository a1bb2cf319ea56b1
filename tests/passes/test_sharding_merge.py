"""sharding-propagation merges a dot's two operand shardings when they split different
result dimensions over compatible devices (merge_compatible), so the dot needs no
communication; the reshard of a sharding written with its replicas in another order
moves nothing (same_placement). Numbers vs hlo.evaluate; JAX's auto_matmul_chain_2x2
partitioned with XLA's communication volume."""
import os

import numpy as np
import pytest

from xlapy import hlo, passes
from xlapy.hlo import parse_sharding
from xlapy.passes.sharding_propagation import merge_compatible
from xlapy.passes.spmd_reshard import collective_bytes, same_placement
from tests.passes.test_spmd_partitioner import check

CORPUS = os.path.join(os.path.dirname(__file__), "..", "corpus_devices")
ROWS_X = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"               # rows over x
COLS_Y = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"       # columns over y


@pytest.mark.parametrize("a, b, expect", [
    (ROWS_X, COLS_Y, "{devices=[2,2]<=[4]}"),
    (COLS_Y, ROWS_X, "{devices=[2,2]<=[4]}"),
    # columns over x instead: device (i, j) = 2i + j gets row i and column i
    (ROWS_X, "{devices=[1,2,2]<=[4] last_tile_dim_replicate}", None),
    (ROWS_X, ROWS_X, None),                                             # nothing gained
    ("{devices=[2,1]<=[2]}", "{devices=[1,2]<=[2]}", None),             # 4 tiles, 2 devices
    ("{devices=[4,1]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", None),
    ("{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}",
     "{devices=[1,1,2,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}",
     "{devices=[2,1,2,2]<=[8] last_tile_dim_replicate}"),
])
def test_merge_compatible(a, b, expect):
    got = merge_compatible(parse_sharding(a), parse_sharding(b))
    if expect is None:
        assert got is None, got
    else:
        assert same_placement(got, parse_sharding(expect)), got


def test_merged_dot_needs_no_communication():
    text = ("HloModule m, num_partitions=4\nENTRY e {\n"
            f"  a = f32[8,6] parameter(0), sharding={ROWS_X}\n"
            f"  b = f32[6,10] parameter(1), sharding={COLS_Y}\n"
            "  d = f32[8,10] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            "  ROOT r = f32[8,10] tanh(d), sharding={devices=[2,2]<=[4]}\n}\n")
    m = hlo.parse_module(text)
    passes.make_pass("sharding-propagation").run(m)
    assert same_placement(m.entry.instruction("d").attrs["sharding"],
                          parse_sharding("{devices=[2,2]<=[4]}"))
    m = check(text, 4)
    assert collective_bytes(m) == 0


@pytest.mark.parametrize("dims", [(8, 6), (5, 7)])
def test_reshard_between_replica_orders_is_free(dims):
    shape = f"f32[{dims[0]},{dims[1]}]"
    m = check(f"HloModule m, num_partitions=4\nENTRY e {{\n"
              f"  p = {shape} parameter(0), sharding={{devices=[2,1,2]<=[4] last_tile_dim_replicate}}\n"
              f"  ROOT c = {shape} copy(p), sharding={{devices=[2,1,2]1,0,3,2 last_tile_dim_replicate}}\n}}\n", 4)
    assert collective_bytes(m) == 0


def test_auto_matmul_chain_2x2_moves_what_xla_moves():
    m = hlo.parse_module(open(os.path.join(CORPUS, "auto_matmul_chain_2x2.global.hlo")).read())
    passes.make_pass("sharding-propagation").run(m)
    passes.make_pass("spmd-partitioner").run(m)
    z = np.load(os.path.join(CORPUS, "auto_matmul_chain_2x2.npz"))
    outs = hlo.evaluate_devices(m, [[z[f"d{d}_arg{i}"] for i in range(3)] for d in range(4)])
    for d in range(4):
        np.testing.assert_allclose(outs[d][0], z[f"d{d}_out0"], rtol=1e-5, atol=1e-5)
    xla = hlo.parse_module(open(os.path.join(CORPUS, "auto_matmul_chain_2x2.hlo")).read())
    assert collective_bytes(m) == collective_bytes(xla) == 256      # was 640: two all-gathers
