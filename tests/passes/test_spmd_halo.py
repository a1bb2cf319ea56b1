"""spmd-partitioner halo exchange (passes/spmd_halo.py): reduce-window and convolution
split along the dimensions their windows slide over. Each partitioned module, run by
hlo.evaluate_devices on the tiles, equals hlo.evaluate of the whole module; the
partitioned module moves borders with collective-permute and never all-gathers the
input."""
import pytest

from xlapy import hlo, passes
from tests.passes.test_spmd_partitioner import check

MAX = "mx { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT r = f32[] maximum(a, b) }\n"
ADD = "ad { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT r = f32[] add(a, b) }\n"


def _opcodes(m):
    return [i.opcode for i in m.entry.instructions]


def _assert_halo(m):
    ops = _opcodes(m)
    assert "collective-permute" in ops
    assert "all-gather" not in ops


def _out_size(n, size, stride, lo, hi):
    return (n + lo + hi - size) // stride + 1


def _rw_1d(n, k, op, size, stride, lo, hi):
    comp, init = (MAX, "-inf") if op == "max" else (ADD, "0")
    name = "mx" if op == "max" else "ad"
    o = _out_size(n, size, stride, lo, hi)
    s = f"{{devices=[{k}]<=[{k}]}}"
    return (f"HloModule m, num_partitions={k}\n{comp}ENTRY e {{\n"
            f"  p = f32[{n}] parameter(0), sharding={s}\n"
            f"  z = f32[] constant({init})\n"
            f"  ROOT r = f32[{o}] reduce-window(p, z), window={{size={size} stride={stride} "
            f"pad={lo}_{hi}}}, to_apply={name}, sharding={s}\n}}\n")


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("n", [16, 13, 7])
@pytest.mark.parametrize("op", ["max", "sum"])
@pytest.mark.parametrize("stride,lo,hi", [(1, 1, 1), (1, 0, 0), (2, 1, 1), (2, 0, 0),
                                           (2, 0, 1), (1, 2, 0)])
def test_reduce_window_1d(k, n, op, stride, lo, hi):
    m = check(_rw_1d(n, k, op, 3, stride, lo, hi), k)
    _assert_halo(m)


def test_reduce_window_dilated_window():
    text = (f"HloModule m, num_partitions=2\n{ADD}ENTRY e {{\n"
            "  p = f32[11] parameter(0), sharding={devices=[2]<=[2]}\n"
            "  z = f32[] constant(0)\n"
            "  ROOT r = f32[11] reduce-window(p, z), window={size=3 pad=2_2 rhs_dilate=2}, "
            "to_apply=ad, sharding={devices=[2]<=[2]}\n}\n")
    _assert_halo(check(text, 2))


@pytest.mark.parametrize("sharding,k", [("{devices=[2,2]<=[4]}", 4), ("{devices=[4,1]<=[4]}", 4),
                                        ("{devices=[1,2]<=[2]}", 2),
                                        ("{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 4),
                                        ("{devices=[2,2]3,1,0,2}", 4)])
@pytest.mark.parametrize("op,stride,pad,dims", [("max", 1, 1, (9, 10)), ("sum", 2, 1, (9, 10)),
                                                ("sum", 1, 0, (8, 8)), ("max", 2, 0, (8, 7))])
def test_reduce_window_2d(sharding, k, op, stride, pad, dims):
    comp, init, name = (MAX, "-inf", "mx") if op == "max" else (ADD, "0", "ad")
    out = tuple(_out_size(n, 3, stride, pad, pad) for n in dims)
    text = (f"HloModule m, num_partitions={k}\n{comp}ENTRY e {{\n"
            f"  p = f32[{dims[0]},{dims[1]}] parameter(0), sharding={sharding}\n"
            f"  z = f32[] constant({init})\n"
            f"  ROOT r = f32[{out[0]},{out[1]}] reduce-window(p, z), window={{size=3x3 "
            f"stride={stride}x{stride} pad={pad}_{pad}x{pad}_{pad}}}, to_apply={name}, "
            f"sharding={sharding}\n}}\n")
    _assert_halo(check(text, k))


def _conv(h, k, pad, stride=1, spatial="[1,{k},1,1]"):
    s = "{devices=" + spatial.format(k=k) + "<=[" + str(k) + "]}"
    ho = _out_size(h, 3, stride, pad, pad)
    wo = _out_size(6, 3, 1, 1, 1)
    return (f"HloModule m, num_partitions={k}\nENTRY e {{\n"
            f"  p = f32[2,{h},6,3] parameter(0), sharding={s}\n"
            "  w = f32[3,3,3,4] parameter(1), sharding={replicated}\n"
            f"  ROOT c = f32[2,{ho},{wo},4] convolution(p, w), window={{size=3x3 "
            f"stride={stride}x1 pad={pad}_{pad}x1_1}}, dim_labels=b01f_01io->b01f, "
            f"sharding={s}\n}}\n")


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("h", [8, 11])
@pytest.mark.parametrize("pad,stride", [(1, 1), (0, 1), (1, 2)])
def test_conv_nhwc_split_along_h(k, h, pad, stride):
    _assert_halo(check(_conv(h, k, pad, stride), k, rtol=1e-4))


def test_conv_split_along_batch_and_h():
    m = check(_conv(9, 4, 1, spatial="[2,2,1,1]"), 4, rtol=1e-4)
    _assert_halo(m)


def test_conv_feature_split_is_made_whole():
    # the lhs's feature dimension is contracted: it is gathered, H keeps its split
    text = ("HloModule m, num_partitions=4\nENTRY e {\n"
            "  p = f32[1,8,6,4] parameter(0), sharding={devices=[1,2,1,2]<=[4]}\n"
            "  w = f32[3,3,4,2] parameter(1)\n"
            "  ROOT c = f32[1,8,6,2] convolution(p, w), window={size=3x3 pad=1_1x1_1}, "
            "dim_labels=b01f_01io->b01f\n}\n")
    m = check(text, 4, rtol=1e-4)
    assert "collective-permute" in _opcodes(m)


def test_propagation_carries_spatial_split():
    text = ("HloModule m, num_partitions=2\nENTRY e {\n"
            "  p = f32[1,8,6,3] parameter(0), sharding={devices=[1,2,1,1]<=[2]}\n"
            "  w = f32[3,3,3,4] parameter(1)\n"
            "  c = f32[1,8,6,4] convolution(p, w), window={size=3x3 pad=1_1x1_1}, "
            "dim_labels=b01f_01io->b01f\n"
            "  ROOT n = f32[1,8,6,4] negate(c)\n}\n")
    m = hlo.parse_module(text)
    passes.make_pass("sharding-propagation").run(m)
    assert m.entry.root.attrs["sharding"] == hlo.parse_sharding("{devices=[1,2,1,1]<=[2]}")
    m = check(text, 2, rtol=1e-4)
    _assert_halo(m)


def test_base_dilation_falls_back():
    text = ("HloModule m, num_partitions=2\nENTRY e {\n"
            "  p = f32[1,8,6,3] parameter(0), sharding={devices=[1,2,1,1]<=[2]}\n"
            "  w = f32[3,3,3,4] parameter(1)\n"
            "  ROOT c = f32[1,15,6,4] convolution(p, w), window={size=3x3 pad=1_1x1_1 "
            "lhs_dilate=2x1}, dim_labels=b01f_01io->b01f, sharding={devices=[1,2,1,1]<=[2]}\n}\n")
    m = check(text, 2, rtol=1e-4)
    assert "all-gather" in _opcodes(m)


def test_sum_with_init_not_identity():
    # the padding elements equal init, and init enters each window once: masked
    # elements outside the array must hold init as well
    text = _rw_1d(10, 4, "sum", 3, 1, 1, 1).replace("constant(0)", "constant(1.5)")
    _assert_halo(check(text, 4))


@pytest.mark.parametrize("seed", range(40))
def test_reduce_window_1d_sweep(seed):
    """Random window sizes, strides, paddings, window dilations and sizes; a halo
    wider than a tile falls back (then only the numbers are checked)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    k = int(rng.choice([2, 4]))
    n = int(rng.integers(k, 17))
    size, stride = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    dil = int(rng.integers(1, 3))
    lo, hi = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    if n + lo + hi < (size - 1) * dil + 1:
        lo = hi = (size - 1) * dil
    o = (n + lo + hi - ((size - 1) * dil + 1)) // stride + 1
    op = "max" if seed % 2 else "sum"
    comp, init, name = (MAX, "-inf", "mx") if op == "max" else (ADD, "0", "ad")
    s = f"{{devices=[{k}]<=[{k}]}}"
    text = (f"HloModule m, num_partitions={k}\n{comp}ENTRY e {{\n"
            f"  p = f32[{n}] parameter(0), sharding={s}\n  z = f32[] constant({init})\n"
            f"  ROOT r = f32[{o}] reduce-window(p, z), window={{size={size} stride={stride} "
            f"pad={lo}_{hi} rhs_dilate={dil}}}, to_apply={name}, sharding={s}\n}}\n")
    check(text, k)


@pytest.mark.parametrize("k", [2, 4])
def test_conv_window_dilation_and_nchw_labels(k):
    s = f"{{devices=[1,1,{k},1]<=[{k}]}}"
    text = (f"HloModule m, num_partitions={k}\nENTRY e {{\n"
            f"  p = f32[2,4,13,5] parameter(0), sharding={s}\n"
            "  w = f32[6,2,3,3] parameter(1)\n"
            f"  ROOT c = f32[2,6,11,5] convolution(p, w), window={{size=3x3 pad=1_2x1_1 "
            f"rhs_dilate=2x1}}, dim_labels=bf01_oi01->bf01, feature_group_count=2, "
            f"sharding={s}\n}}\n")
    _assert_halo(check(text, k, rtol=1e-4))
