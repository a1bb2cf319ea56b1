"""Convolutions of CNN forward and backward passes: xlapy against XLA CPU (JAX).

Run by hand from the repository root (not part of the test suite):

    python3 benchmarks/bench_conv.py                    # every case
    python3 benchmarks/bench_conv.py --only nhwc,wgrad --repeat 5
    python3 benchmarks/bench_conv.py --small            # tiny shapes: a smoke run

Each case is one `convolution` instruction written as the HLO text JAX emits
for it (`jax.jit(f).lower(...).as_text()`), compiled by xlapy from that text
(`hlo.parse_module` + `backend_cpu.compile`, numpy in, numpy out) and, when JAX
is installed (a benchmark-only dependency), run by XLA through
`lax.conv_general_dilated` with the same dimension numbers, window and
grouping, on device-resident inputs. The cases: a ResNet-like 3x3 conv
f32[8,56,56,64] -> 64 channels in NHWC/HWIO and in NCHW/OIHW, ResNet's 7x7
stride-2 stem on f32[8,224,224,3], a depthwise 3x3
on [8,56,56,128] (feature_group_count 128) in NHWC and in NCHW, a grouped one
(4 groups), the
gradients of the NHWC conv with respect to its kernel (`f01b_i01o->01bf`, a
56x56 window; also its NCHW form `fb01_io01->fb01`) and its input (`01oi`, the
reversed kernel), the input gradient
of the same conv with stride 2 (lhs_dilate=2x2), and the kernel gradient of the
depthwise conv (batch_group_count 128).

Printed per case: median times (ms unless marked us) of xlapy and XLA, the ratio,
GFLOP/s of both (2 x output elements x contraction length, without the zeros of
lhs dilation), xlapy's busiest
thread's CPU time per call ("thr": about the call's time on an idle machine) and
xlapy's max error against XLA's result (relative to the same convolution of
|inputs|). Note the load average printed first: the machine has 2 cores and is
often shared.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from math import prod
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (PEAK_GFLOPS_2_CORES, CheckError, check, fmt_ms,  # noqa: E402
                     fmt_ratio, host_line, import_jax, load_average, timed_ms)


@dataclass(frozen=True)
class Case:
    """One convolution: operand shapes, window (size, stride, pads) and labels."""
    name: str
    lhs: tuple[int, ...]
    rhs: tuple[int, ...]
    labels: str
    size: tuple[int, ...]
    pad: tuple[tuple[int, int], ...]
    stride: tuple[int, ...] = (1, 1)
    feature_groups: int = 1
    batch_groups: int = 1
    lhs_dilation: tuple[int, ...] = (1, 1)

    def maps(self):
        lhs, rest = self.labels.split("_")
        rhs, out = rest.split("->")
        return lhs, rhs, out

    def out_shape(self) -> tuple[int, ...]:
        lhs, rhs, out = self.maps()
        spatial = [((self.lhs[lhs.index(str(i))] - 1) * self.lhs_dilation[i] + 1
                    + sum(self.pad[i]) - self.size[i]) // self.stride[i] + 1
                   for i in range(len(self.size))]
        dims = {"b": self.lhs[lhs.index("b")] // self.batch_groups,
                "f": self.rhs[rhs.index("o")]}
        return tuple(dims[c] if c in dims else spatial[int(c)] for c in out)

    def flops(self) -> float:
        """2 x output elements x contraction length; along an lhs-dilated dimension
        only the (output, tap) pairs that meet a real input element count."""
        lhs, rhs, out = self.maps()
        contraction = self.rhs[rhs.index("i")] * prod(self.size)
        total = 2.0 * prod(self.out_shape()) * contraction
        for i, step in enumerate(self.lhs_dilation):
            if step > 1:
                n, size = self.out_shape()[out.index(str(i))], self.size[i]
                hits = sum((o * self.stride[i] + k - self.pad[i][0]) % step == 0
                           and 0 <= (o * self.stride[i] + k - self.pad[i][0]) // step
                           < self.lhs[lhs.index(str(i))] for o in range(n) for k in range(size))
                total *= hits / (n * size)
        return total

    def hlo(self) -> str:
        window = "x".join(map(str, self.size))
        pads = "x".join(f"{lo}_{hi}" for lo, hi in self.pad)
        stride = "" if set(self.stride) == {1} else " stride=" + "x".join(map(str, self.stride))
        if set(self.lhs_dilation) != {1}:
            stride += " lhs_dilate=" + "x".join(map(str, self.lhs_dilation))
        groups = (f", feature_group_count={self.feature_groups}" if self.feature_groups > 1 else "") + \
            (f", batch_group_count={self.batch_groups}" if self.batch_groups > 1 else "")

        def shape(dims):
            return f"f32[{','.join(map(str, dims))}]"
        return (f"HloModule {self.name}\n\nENTRY main {{\n"
                f"  x = {shape(self.lhs)} parameter(0)\n"
                f"  w = {shape(self.rhs)} parameter(1)\n"
                f"  ROOT c = {shape(self.out_shape())} convolution(x, w), "
                f"window={{size={window}{stride} pad={pads}}}, dim_labels={self.labels}{groups}\n}}\n")

    def jax_fn(self, jax):
        """The same convolution through lax.conv_general_dilated."""
        from jax import lax
        lhs, rhs, out = self.maps()
        spatial = [str(i) for i in range(len(self.size))]
        numbers = lax.ConvDimensionNumbers(
            tuple(lhs.index(c) for c in ["b", "f", *spatial]),
            tuple(rhs.index(c) for c in ["o", "i", *spatial]),
            tuple(out.index(c) for c in ["b", "f", *spatial]))
        return jax.jit(lambda x, w: lax.conv_general_dilated(
            x, w, self.stride, self.pad, lhs_dilation=self.lhs_dilation, dimension_numbers=numbers,
            feature_group_count=self.feature_groups, batch_group_count=self.batch_groups,
            precision=lax.Precision.HIGHEST))


SAME3 = ((1, 1), (1, 1))
CASES = [
    Case("nhwc", (8, 56, 56, 64), (3, 3, 64, 64), "b01f_01io->b01f", (3, 3), SAME3),
    Case("stem", (8, 224, 224, 3), (7, 7, 3, 64), "b01f_01io->b01f", (7, 7),
         ((2, 3), (2, 3)), stride=(2, 2)),
    Case("nchw", (8, 64, 56, 56), (64, 64, 3, 3), "bf01_oi01->bf01", (3, 3), SAME3),
    Case("depthwise", (8, 56, 56, 128), (3, 3, 1, 128), "b01f_01io->b01f", (3, 3), SAME3,
         feature_groups=128),
    Case("dw_nchw", (8, 128, 56, 56), (128, 1, 3, 3), "bf01_oi01->bf01", (3, 3), SAME3,
         feature_groups=128),
    Case("grouped4", (8, 56, 56, 64), (3, 3, 16, 64), "b01f_01io->b01f", (3, 3), SAME3,
         feature_groups=4),
    Case("wgrad", (8, 56, 56, 64), (8, 56, 56, 64), "f01b_i01o->01bf", (56, 56), SAME3),
    Case("wgrad_nchw", (8, 64, 56, 56), (8, 64, 56, 56), "fb01_io01->fb01", (56, 56), SAME3),
    Case("xgrad", (8, 56, 56, 64), (3, 3, 64, 64), "b01f_01oi->b01f", (3, 3), SAME3),
    Case("xgrad_s2", (8, 28, 28, 64), (3, 3, 64, 64), "b01f_01oi->b01f", (3, 3),
         ((1, 2), (1, 2)), lhs_dilation=(2, 2)),
    Case("dw_wgrad", (8, 56, 56, 128), (8, 56, 56, 128), "f01b_i01o->01bf", (56, 56), SAME3,
         batch_groups=128),
]


def shrink(case: Case) -> Case:
    """The case on 2 images of 10x10 (a smoke run)."""
    def small(dims, labels):
        return tuple(2 if c in "bfio" and d == 8 else {56: 10, 28: 5, 224: 20}.get(d, d)
                     for c, d in zip(labels, dims))
    lhs, rhs, _ = case.maps()
    size = tuple(10 if s == 56 else s for s in case.size)
    return Case(case.name, small(case.lhs, lhs), small(case.rhs, rhs), case.labels, size,
                case.pad, case.stride, case.feature_groups, case.batch_groups, case.lhs_dilation)


def run_case(case: Case, repeat: int, jax) -> bool:
    from xlapy import backend_cpu
    from xlapy import hlo
    rng = np.random.default_rng(0)
    x = rng.standard_normal(case.lhs, dtype=np.float32)
    w = rng.standard_normal(case.rhs, dtype=np.float32)
    exe = backend_cpu.compile(hlo.parse_module(case.hlo()))
    timing = timed_ms(lambda: exe.run(x, w), repeat)
    ours = timing.wall
    got = exe.run(x, w)[0]
    flops = case.flops()
    line = (f"{case.name:10s} {case.labels:18s} G={case.feature_groups * case.batch_groups:<4d}"
            f" xlapy {fmt_ms(ours):>8s} {flops / ours / 1e6:7.1f} GFLOP/s"
            f" ({100 * flops / ours / 1e6 / PEAK_GFLOPS_2_CORES:4.1f}% peak)"
            f" [thr {fmt_ms(timing.busiest)}]")
    ok = True
    if jax is not None:
        fn = jax.jit(case.jax_fn(jax))
        dx, dw = jax.device_put(x), jax.device_put(w)
        theirs = timed_ms(lambda: fn(dx, dw).block_until_ready(), repeat).wall
        ref = np.asarray(fn(dx, dw), np.float64)
        scale = np.asarray(fn(jax.device_put(np.abs(x)), jax.device_put(np.abs(w))), np.float64)
        try:
            err = check(case.name, got, ref, 1e-4, scale)
            verdict = f"err {err:.1e}"
        except CheckError as e:
            verdict, ok = f"!! {e}", False
        line += (f" | XLA {fmt_ms(theirs):>8s} {flops / theirs / 1e6:7.1f} GFLOP/s"
                 f" | xlapy/XLA {fmt_ratio(ours, theirs)} | {verdict}")
    print(line, flush=True)
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="tiny shapes (smoke run)")
    parser.add_argument("--no-jax", action="store_true", help="skip the XLA column")
    args = parser.parse_args(argv)
    jax = None if args.no_jax else import_jax()[0]
    wanted = set(filter(None, args.only.split(",")))
    unknown = wanted - {c.name for c in CASES}
    if unknown:
        raise SystemExit(f"bench_conv: unknown case(s) {', '.join(sorted(unknown))}")
    note = "" if jax else "; --no-jax" if args.no_jax else "; JAX not installed"
    print(host_line())
    print(load_average() + (note and note + ": no XLA column"))
    ok = True
    for case in CASES:
        if wanted and case.name not in wanted:
            continue
        ok &= run_case(shrink(case) if args.small else case, args.repeat, jax)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
