"""passes/spmd_all_reduce.py: a sum of contraction-split dots (through reshapes) ends in one
all-reduce instead of one per dot; all-reduces used elsewhere, over other groups or with
another reducer are left alone. Numbers vs hlo.evaluate on 2 and 4 devices."""
import pytest

from xlapy import hlo
from xlapy.passes.spmd_all_reduce import combine_all_reduces
from tests.passes.test_spmd_partitioner import check


def count(m, op="all-reduce"):
    return sum(i.opcode == op for i in m.instructions())


def dots(n, k_split, tail, reshape=False):
    """Three dots of x (split along its contraction) summed; `tail`: what reads them."""
    r = (lambda v: f"  {v}r = f32[24] reshape({v})\n") if reshape else (lambda v: "")
    sh = "f32[24]" if reshape else "f32[4,6]"
    name = (lambda v: f"{v}r") if reshape else (lambda v: v)
    return (f"HloModule m, num_partitions={n}\nENTRY e {{\n"
            f"  x = f32[4,8] parameter(0), sharding={{devices=[1,{k_split}]<=[{n}]}}\n"
            + "".join(f"  w{i} = f32[8,6] parameter({i + 1}), sharding={{devices=[{k_split},1]<=[{n}]}}\n"
                      for i in range(3))
            + "".join(f"  d{i} = f32[4,6] dot(x, w{i}), lhs_contracting_dims={{1}}, "
                      f"rhs_contracting_dims={{0}}\n" for i in range(3))
            + "".join(r(f"d{i}") for i in range(3))
            + f"  s = {sh} add({name('d0')}, {name('d1')})\n  t = {sh} add(s, {name('d2')})\n"
            + tail.replace("SH", sh) + "}\n")


@pytest.mark.parametrize("reshape", [False, True])
@pytest.mark.parametrize("n", [2, 4])
def test_sum_of_split_dots_one_all_reduce(n, reshape):
    m = check(dots(n, n, "  ROOT o = SH negate(t), sharding={replicated}\n", reshape), n)
    assert count(m) == 1


def test_all_reduce_read_elsewhere_is_kept():
    tail = "  u = f32[4,6] multiply(d2, d2)\n  ROOT o = (f32[4,6], f32[4,6]) tuple(t, u), " \
           "sharding={{replicated}, {replicated}}\n"
    m = check(dots(2, 2, tail), 2)
    assert count(m) == 2        # d2's stays (read by u); d0 + d1 combined


def test_other_groups_or_reducers_are_not_combined():
    text = """HloModule m, num_partitions=4
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b) }
mx { a2 = f32[] parameter(0)
  b2 = f32[] parameter(1)
  ROOT s2 = f32[] maximum(a2, b2) }
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add, channel_id=1, use_global_device_ids=true
  b = f32[4] all-reduce(p), replica_groups={{0,2},{1,3}}, to_apply=add, channel_id=2, use_global_device_ids=true
  c = f32[4] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=mx, channel_id=3, use_global_device_ids=true
  d = f32[4] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add, channel_id=4, use_global_device_ids=true
  s1 = f32[4] add(a, b)
  s2 = f32[4] add(c, d)
  ROOT t = (f32[4], f32[4]) tuple(s1, s2)
}
"""
    m = hlo.parse_module(text)
    assert combine_all_reduces(m.entry, lambda: 9) == 0
    assert count(m) == 4
