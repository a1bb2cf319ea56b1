"""Make tests/corpus_devices: real multi-device HLO from JAX/XLA with XLA's per-device results.

Run from the repository root with the JAX venv (never a dependency of xlapy):

    XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
        /work/jaxvenv/bin/python tools/make_device_corpus.py [--out DIR] [CASE ...]

Every case is a JAX function over a device mesh (shard_map, pmap, or jit with
NamedSharding inputs that XLA's SPMD partitioner splits). For each one this writes

- NAME.hlo         the per-device program as XLA's SPMD partitioner leaves it: the last
                   dump of the "spmd-partitioner" pipeline (partitioned, the manual
                   computation inlined, no SPMD*/Sharding custom-calls left);
- NAME.opt.hlo     the module after XLA's whole CPU pipeline (`compiled.as_text()`);
- NAME.global.hlo  the unpartitioned module XLA received from JAX (the
                   "before_optimizations" dump: global shapes, Shardy attributes);
- NAME.npz         `d{d}_arg{i}` / `d{d}_out{j}`: logical device d's arguments and
                   results. Logical device d = replica * num_partitions + partition of
                   the module; the executable's device assignment maps it to a physical
                   CPU device (recorded in MANIFEST.md), and the shards are read from
                   that physical device.

Checks made before anything is written (a failure stops the run):
- the npz arguments have the shapes and dtypes of NAME.hlo's ENTRY parameters;
- NAME.hlo compiled again by XLA (parameters and root marked `{manual}` so the
  partitioner leaves the program alone, mesh-form replica groups spelled as lists)
  and run on the npz arguments, logical device d fed `d{d}_arg*`, reproduces every
  `d{d}_out*` bit for bit;
- for the cases with a `reference`, numpy by hand on the per-device arguments gives
  the per-device results.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

if "--xla_force_host_platform_device_count=4" not in os.environ.get("XLA_FLAGS", ""):
    sys.exit("set XLA_FLAGS=--xla_force_host_platform_device_count=4 (4 host CPU devices)")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import shard_map  # noqa: E402
from jax._src import xla_bridge  # noqa: E402
from jax._src.lib import _jax, xla_client  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

jax.config.update("jax_enable_x64", True)
# Source locations in the HLO metadata relative to the repository (no /home/... paths).
jax.config.update("jax_hlo_source_file_canonicalization_regex", "^" + re.escape(f"{ROOT}/"))
DEFAULT_OUT = ROOT / "tests" / "corpus_devices"
DEVICES = jax.devices()

# Opcodes listed in the manifest's collective columns.
COLLECTIVES = {
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast", "replica-id", "partition-id",
    "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "async-start", "async-done",
    "send", "recv", "send-done", "recv-done",
}


@dataclass
class Case:
    name: str
    fn: Callable                     # a jitted function (jax.jit or jax.pmap)
    args: list                       # host arrays (numpy), global shapes
    in_shardings: list | None        # one per arg; None: the function's own (pmap)
    notes: str = ""
    # numpy by hand: per-device args -> per-device outputs (lists of arrays)
    reference: Callable | None = None


CASES: dict[str, Callable[[], Case]] = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def rng(seed):
    return np.random.default_rng(seed)


def mesh1(ids, axis="i"):
    """A one-axis mesh over the physical devices `ids`, in that order."""
    return Mesh(np.array([DEVICES[i] for i in ids]), (axis,))


def smap(f, mesh, in_specs, out_specs, check_vma=True):
    """jit(shard_map(f)). check_vma=False where an all_gather result is returned as
    replicated (JAX does not infer that it is)."""
    return jax.jit(shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                             check_vma=check_vma))


def sharded(mesh, *specs):
    return [NamedSharding(mesh, s) for s in specs]


def f32(shape, seed):
    return rng(seed).standard_normal(shape).astype(np.float32)


# --- per-device numpy references ------------------------------------------------------
# Each takes args[d][i] (device d's argument i) and returns outs[d][j].

def ref_psum(args):
    total = sum(a[0].astype(np.float64) for a in args).astype(args[0][0].dtype)
    return [[total] for _ in args]


def ref_all_gather_stack(args):
    g = np.stack([a[0] for a in args])
    return [[g] for _ in args]


# --- the cases --------------------------------------------------------------------------

@case
def psum_f32():
    mesh = mesh1([0, 1, 2, 3])

    def psum_f32(x):
        return jax.lax.psum(x, "i")
    x = f32((8, 3), 1)
    return Case("psum_f32", smap(psum_f32, mesh, P("i"), P()), [x], sharded(mesh, P("i")),
                "shard_map psum over 4 devices", ref_psum)


@case
def psum_f64():
    mesh = mesh1([0, 1, 2, 3])

    def psum_f64(x):
        return jax.lax.psum(x, "i") * 0.5
    x = rng(2).standard_normal((4, 4))
    return Case("psum_f64", smap(psum_f64, mesh, P("i"), P()), [x], sharded(mesh, P("i")),
                "f64; result * 0.5",
                lambda args: [[o[0] * 0.5] for o in ref_psum(args)])


@case
def psum_tuple_mixed():
    mesh = mesh1([0, 1, 2, 3])

    def psum_tuple_mixed(x, n):
        return jax.lax.psum((x, n), "i")
    x = f32((8, 2), 3)
    n = rng(3).integers(-50, 50, (4, 5)).astype(np.int32)
    return Case("psum_tuple_mixed", smap(psum_tuple_mixed, mesh, (P("i"), P("i")), (P(), P())),
                [x, n], sharded(mesh, P("i"), P("i")), "psum of an (f32, s32) pair in one call",
                lambda args: [[sum(a[0] for a in args), sum(a[1] for a in args)] for _ in args])


@case
def pmax_f32():
    mesh = mesh1([0, 1, 2, 3])

    def pmax_f32(x):
        return jax.lax.pmax(x, "i")
    x = f32((8, 5), 4)
    return Case("pmax_f32", smap(pmax_f32, mesh, P("i"), P()), [x], sharded(mesh, P("i")),
                "", lambda args: [[np.max([a[0] for a in args], axis=0)] for _ in args])


@case
def pmin_s32():
    mesh = mesh1([0, 1, 2, 3])

    def pmin_s32(x):
        return jax.lax.pmin(x, "i")
    x = rng(5).integers(-1000, 1000, (4, 6)).astype(np.int32)
    return Case("pmin_s32", smap(pmin_s32, mesh, P("i"), P()), [x], sharded(mesh, P("i")),
                "s32", lambda args: [[np.min([a[0] for a in args], axis=0)] for _ in args])


@case
def all_gather_f32():
    mesh = mesh1([0, 1, 2, 3])

    def all_gather_f32(x):
        return jax.lax.all_gather(x, "i")
    x = f32((8, 3), 6)
    return Case("all_gather_f32", smap(all_gather_f32, mesh, P("i"), P(), False), [x],
                sharded(mesh, P("i")), "not tiled: a new leading axis of 4", ref_all_gather_stack)


@case
def all_gather_tiled_f32():
    mesh = mesh1([0, 1, 2, 3])

    def all_gather_tiled_f32(x):
        return jax.lax.all_gather(x, "i", axis=1, tiled=True)
    x = f32((6, 8), 7)
    return Case("all_gather_tiled_f32",
                smap(all_gather_tiled_f32, mesh, P(None, "i"), P(), False), [x],
                sharded(mesh, P(None, "i")), "tiled along axis 1",
                lambda args: [[np.concatenate([a[0] for a in args], axis=1)] for _ in args])


@case
def psum_scatter_f32():
    mesh = mesh1([0, 1, 2, 3])

    def psum_scatter_f32(x):
        return jax.lax.psum_scatter(x, "i", scatter_dimension=0, tiled=True)
    x = f32((32, 3), 8)

    def ref(args):
        total = sum(a[0] for a in args)
        return [[total[2 * d:2 * d + 2]] for d in range(4)]
    return Case("psum_scatter_f32", smap(psum_scatter_f32, mesh, P("i"), P("i")), [x],
                sharded(mesh, P("i")), "tiled, scatter_dimension=0", ref)


@case
def psum_scatter_untiled_f32():
    mesh = mesh1([0, 1, 2, 3])

    def psum_scatter_untiled_f32(x):
        return jax.lax.psum_scatter(x, "i", scatter_dimension=1, tiled=False)
    x = f32((3, 16), 9)

    def ref(args):
        total = sum(a[0] for a in args)
        return [[total[:, d]] for d in range(4)]
    return Case("psum_scatter_untiled_f32",
                smap(psum_scatter_untiled_f32, mesh, P(None, "i"), P("i")), [x],
                sharded(mesh, P(None, "i")), "not tiled, scatter_dimension=1 (dimension dropped)",
                ref)


@case
def all_to_all_f32():
    mesh = mesh1([0, 1, 2, 3])

    def all_to_all_f32(x):
        return jax.lax.all_to_all(x, "i", split_axis=1, concat_axis=0, tiled=True)
    x = f32((16, 8), 10)

    def ref(args):
        return [[np.concatenate([a[0][:, 2 * d:2 * d + 2] for a in args], axis=0)]
                for d in range(4)]
    return Case("all_to_all_f32", smap(all_to_all_f32, mesh, P("i"), P("i")), [x],
                sharded(mesh, P("i")), "tiled, split_axis=1, concat_axis=0", ref)


@case
def all_to_all_untiled_s32():
    mesh = mesh1([0, 1, 2, 3])

    def all_to_all_untiled_s32(x):
        return jax.lax.all_to_all(x, "i", split_axis=0, concat_axis=1, tiled=False)
    x = rng(11).integers(-100, 100, (16, 3)).astype(np.int32)

    def ref(args):
        # device d receives row d of every device's block, stacked along a new axis 1
        return [[np.stack([a[0][d] for a in args], axis=1)] for d in range(4)]
    return Case("all_to_all_untiled_s32", smap(all_to_all_untiled_s32, mesh, P("i"), P("i")),
                [x], sharded(mesh, P("i")), "not tiled, split_axis=0, concat_axis=1; s32", ref)


def ref_ppermute(perm):
    def ref(args):
        outs = [[np.zeros_like(a[0])] for a in args]
        for src, dst in perm:
            outs[dst][0] = args[src][0]
        return outs
    return ref


@case
def ppermute_ring_f32():
    mesh = mesh1([2, 0, 3, 1])           # a permuted mesh: the device assignment matters
    perm = [(d, (d + 1) % 4) for d in range(4)]

    def ppermute_ring_f32(x):
        return jax.lax.ppermute(x, "i", perm)
    x = f32((8, 3), 12)
    return Case("ppermute_ring_f32", smap(ppermute_ring_f32, mesh, P("i"), P("i")), [x],
                sharded(mesh, P("i")), "ring d -> d+1; mesh over physical devices [2,0,3,1]",
                ref_ppermute(perm))


@case
def ppermute_partial_f32():
    mesh = mesh1([0, 1, 2, 3])
    perm = [(0, 1), (1, 2)]

    def ppermute_partial_f32(x):
        return jax.lax.ppermute(x, "i", perm)
    x = f32((8, 3), 13)
    return Case("ppermute_partial_f32", smap(ppermute_partial_f32, mesh, P("i"), P("i")), [x],
                sharded(mesh, P("i")), "pairs 0->1, 1->2: devices 0 and 3 receive zeros",
                ref_ppermute(perm))


@case
def axis_index_s32():
    mesh = mesh1([3, 1, 0, 2])

    def axis_index_s32(x):
        i = jax.lax.axis_index("i")
        return i[None], x * i.astype(x.dtype) + 1.0
    x = f32((8, 2), 14)

    def ref(args):
        return [[np.array([d], np.int32), args[d][0] * np.float32(d) + np.float32(1)]
                for d in range(4)]
    return Case("axis_index_s32", smap(axis_index_s32, mesh, P("i"), (P("i"), P("i"))), [x],
                sharded(mesh, P("i")), "axis_index; mesh over physical devices [3,1,0,2]", ref)


@case
def dp_mlp_grad_step():
    mesh = mesh1([0, 1, 2, 3], "batch")

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        h = jnp.tanh(x @ w1 + b1)
        return jnp.mean((h @ w2 + b2 - y) ** 2)

    def dp_mlp_grad_step(w1, b1, w2, b2, x, y):
        # The replicated parameters made device-varying first: each device then takes the
        # gradient of its own loss, and the pmean below is the data-parallel all-reduce
        # (without it JAX's transpose of the implicit broadcast would already psum them).
        params = tuple(jax.lax.pcast(p, "batch", to="varying") for p in (w1, b1, w2, b2))
        value, grads = jax.value_and_grad(loss)(params, x, y)
        grads = jax.lax.pmean(grads, "batch")
        new = tuple(p - 0.1 * g for p, g in zip((w1, b1, w2, b2), grads))
        return (*new, jax.lax.pmean(value, "batch"))
    r = rng(15)
    args = [r.standard_normal(s).astype(np.float32) * 0.5
            for s in [(4, 8), (8,), (8, 2), (2,), (16, 4), (16, 2)]]
    specs = (P(), P(), P(), P(), P("batch"), P("batch"))

    def ref(args):
        # the gradients written out by hand, in f64, then averaged over the devices
        per_device = []
        for w1, b1, w2, b2, x, y in [[a.astype(np.float64) for a in d] for d in args]:
            h = np.tanh(x @ w1 + b1)
            err = h @ w2 + b2 - y
            dpred = 2.0 * err / err.size
            dz = (dpred @ w2.T) * (1.0 - h * h)
            per_device.append([x.T @ dz, dz.sum(0), h.T @ dpred, dpred.sum(0), np.mean(err ** 2)])
        mean = [sum(g[k] for g in per_device) / len(args) for k in range(5)]
        params = args[0][:4]
        new = [(p - 0.1 * g).astype(np.float32) for p, g in zip(params, mean[:4])]
        return [new + [np.float32(mean[4])] for _ in args]
    return Case("dp_mlp_grad_step",
                smap(dp_mlp_grad_step, mesh, specs, (P(), P(), P(), P(), P())), args,
                sharded(mesh, *specs),
                "MLP 4-8-2 tanh, MSE; pmean of grads and loss over 'batch'; SGD lr 0.1", ref)


@case
def mesh2x2_psum_all_gather():
    mesh = Mesh(np.array([DEVICES[i] for i in [1, 0, 3, 2]]).reshape(2, 2), ("x", "y"))

    def mesh2x2_psum_all_gather(a):
        s = jax.lax.psum(a, "x")
        return jax.lax.all_gather(s, "y", axis=1, tiled=True), jax.lax.psum(a, "y")
    a = f32((4, 6), 16)

    def ref(args):
        # logical device d = mesh position (x, y) = (d // 2, d % 2)
        outs = []
        for d in range(4):
            x, y = divmod(d, 2)
            gathered = np.concatenate([sum(args[2 * xx + yy][0] for xx in range(2))
                                       for yy in range(2)], axis=1)
            outs.append([gathered, sum(args[2 * x + yy][0] for yy in range(2))])
        return outs
    return Case("mesh2x2_psum_all_gather",
                smap(mesh2x2_psum_all_gather, mesh, P("x", "y"), (P(), P("x")), False), [a],
                sharded(mesh, P("x", "y")),
                "mesh ('x','y')=(2,2) over physical devices [[1,0],[3,2]]: psum over x, "
                "all_gather (tiled, axis 1) over y; psum over y", ref)


@case
def pmap_psum():
    def pmap_psum(x):
        return jax.lax.psum(x, "i") * 2.0
    x = f32((4, 3), 17)
    return Case("pmap_psum", jax.pmap(pmap_psum, axis_name="i"), [x], None,
                "jax.pmap (lowers to 4 partitions, shard_map style)",
                lambda args: [[(ref_psum(args)[0][0] * 2).astype(np.float32)] for _ in args])


@case
def mixed_2dev():
    mesh = mesh1([1, 3])

    def mixed_2dev(x):
        return (jax.lax.psum(x, "i"), jax.lax.all_gather(x, "i", tiled=True),
                jax.lax.ppermute(x, "i", [(0, 1), (1, 0)]))
    x = f32((4, 3), 18)

    def ref(args):
        s = args[0][0] + args[1][0]
        g = np.concatenate([args[0][0], args[1][0]])
        return [[s, g, args[1][0]], [s, g, args[0][0]]]
    return Case("mixed_2dev", smap(mixed_2dev, mesh, P("i"), (P(), P(), P("i")), False), [x],
                sharded(mesh, P("i")), "2 devices (physical [1,3]): psum, all_gather, swap", ref)


@case
def mixed_3dev():
    mesh = mesh1([0, 2, 3])
    perm = [(d, (d + 1) % 3) for d in range(3)]

    def mixed_3dev(x):
        return (jax.lax.psum(x, "i"), jax.lax.all_gather(x, "i", tiled=True),
                jax.lax.ppermute(x, "i", perm),
                jax.lax.psum_scatter(x, "i", scatter_dimension=1, tiled=True))
    x = f32((6, 6), 19)

    def ref(args):
        s = sum(a[0] for a in args)
        g = np.concatenate([a[0] for a in args])
        outs = [[s, g, None, s[:, 2 * d:2 * d + 2]] for d in range(3)]
        for src, dst in perm:
            outs[dst][2] = args[src][0]
        return outs
    return Case("mixed_3dev",
                smap(mixed_3dev, mesh, P("i"), (P(), P(), P("i"), P("i")), False), [x],
                sharded(mesh, P("i")),
                "3 devices (physical [0,2,3]): psum, all_gather, ring, psum_scatter", ref)


@case
def auto_matmul():
    mesh = mesh1([0, 1, 2, 3])

    def auto_matmul(a, b):
        return a @ b
    a, b = f32((8, 16), 20), f32((16, 4), 21)
    ins = sharded(mesh, P(None, "i"), P("i", None))
    fn = jax.jit(auto_matmul, in_shardings=ins, out_shardings=NamedSharding(mesh, P()))

    def ref(args):
        full = sum(args[d][0].astype(np.float64) @ args[d][1] for d in range(4))
        return [[full.astype(np.float32)] for _ in range(4)]
    return Case("auto_matmul", fn, [a, b], ins,
                "jit, no shard_map: contraction dim sharded 4 ways, replicated result", ref)


@case
def auto_reshard():
    mesh = mesh1([0, 1, 2, 3])

    def auto_reshard(x):
        return x * 2.0, x + 1.0, jnp.sum(x, axis=0)
    x = f32((8, 12), 25)
    ins = sharded(mesh, P("i", None))
    outs = sharded(mesh, P(None, "i"), P(), P())
    fn = jax.jit(auto_reshard, in_shardings=ins, out_shardings=tuple(outs))

    def ref(args):
        full = np.concatenate([a[0] for a in args])
        col = np.sum(full.astype(np.float64), axis=0).astype(np.float32)
        return [[full[:, 3 * d:3 * d + 3] * np.float32(2), full + np.float32(1), col]
                for d in range(4)]
    return Case("auto_reshard", fn, [x], ins,
                "jit, no shard_map: rows-sharded input to a columns-sharded, a replicated "
                "output and a column sum", ref)


@case
def auto_reduce_2x2():
    mesh = Mesh(np.array([DEVICES[i] for i in [2, 3, 0, 1]]).reshape(2, 2), ("x", "y"))

    def auto_reduce_2x2(x):
        return jnp.sum(x, axis=0), jnp.max(x), x.T * 3.0
    x = f32((8, 6), 26)
    ins = sharded(mesh, P("x", "y"))
    outs = sharded(mesh, P("y"), P(), P("y", "x"))
    fn = jax.jit(auto_reduce_2x2, in_shardings=ins, out_shardings=tuple(outs))

    def ref(args):
        # logical device d = mesh position (d // 2, d % 2); x tiles are [4, 3]
        full = np.block([[args[0][0], args[1][0]], [args[2][0], args[3][0]]])
        col = np.sum(full.astype(np.float64), axis=0).astype(np.float32)
        outs = []
        for d in range(4):
            x, y = divmod(d, 2)
            outs.append([col[3 * y:3 * y + 3], np.max(full),
                         full.T[3 * y:3 * y + 3, 4 * x:4 * x + 4] * np.float32(3)])
        return outs
    return Case("auto_reduce_2x2", fn, [x], ins,
                "jit on a 2x2 mesh over physical devices [[2,3],[0,1]]: column sum, max, "
                "transpose resharded", ref)


@case
def auto_matmul_chain_2x2():
    mesh = Mesh(np.array(DEVICES).reshape(2, 2), ("x", "y"))

    def auto_matmul_chain_2x2(x, w1, w2):
        return jnp.maximum(x @ w1, 0.0) @ w2
    x, w1, w2 = f32((8, 8), 22), f32((8, 16), 23), f32((16, 8), 24)
    ins = sharded(mesh, P("x", "y"), P("y", None), P(None, "y"))
    fn = jax.jit(auto_matmul_chain_2x2, in_shardings=ins,
                 out_shardings=NamedSharding(mesh, P("x", "y")))

    def ref(args):
        # logical device d = mesh position (d // 2, d % 2); x tiles [4,4], w1 rows split
        # over y, w2 columns split over y
        full_x = np.block([[args[0][0], args[1][0]], [args[2][0], args[3][0]]])
        full_w1 = np.concatenate([args[0][1], args[1][1]])
        full_w2 = np.concatenate([args[0][2], args[1][2]], axis=1)
        h = np.maximum(full_x.astype(np.float64) @ full_w1, 0.0)
        out = (h @ full_w2).astype(np.float32)
        return [[out[4 * (d // 2):4 * (d // 2) + 4, 4 * (d % 2):4 * (d % 2) + 4]]
                for d in range(4)]
    return Case("auto_matmul_chain_2x2", fn, [x, w1, w2], ins,
                "jit on a 2x2 mesh: relu(x @ w1) @ w2, x P(x,y), w1 P(y,-), w2 P(-,y), "
                "out P(x,y)", ref)


# --- extraction -------------------------------------------------------------------------

def dump_files(dump_dir: Path) -> list[Path]:
    return sorted(p for p in dump_dir.glob("module_*.txt"))


def partitioned_dump(dump_dir: Path) -> Path:
    """The last dump of the spmd-partitioner pipeline (the partitioned per-device module)."""
    spmd = [p for p in dump_files(dump_dir) if re.search(r"\.\d{4}\.spmd-partitioner\.", p.name)]
    if not spmd:
        raise SystemExit(f"{dump_dir}: no spmd-partitioner dump")
    chosen = spmd[-1]
    text = chosen.read_text()
    if re.search(r'custom_call_target="(SPMD|Sharding|xla\.sdy)', text):
        raise SystemExit(f"{chosen.name}: sharding custom-calls left after partitioning")
    return chosen


def before_optimizations(dump_dir: Path) -> Path:
    found = list(dump_dir.glob("module_*.before_optimizations.txt"))
    if len(found) != 1:
        raise SystemExit(f"{dump_dir}: {len(found)} before_optimizations dumps")
    return found[0]


def module_counts(text: str) -> tuple[int, int]:
    header = text[text.index("HloModule"):].split("\n", 1)[0]
    r = re.search(r"replica_count=(\d+)", header)
    p = re.search(r"num_partitions=(\d+)", header)
    return (int(r.group(1)) if r else 1, int(p.group(1)) if p else 1)


OPCODE_RE = re.compile(r"=\s+(?:\([^=]*?\)|\S+)\s+([a-z][a-z0-9\-]*)\(")


def opcodes(text: str) -> set[str]:
    return {m.group(1) for line in text.splitlines() for m in [OPCODE_RE.search(line)] if m}


def collectives(text: str) -> str:
    ops = sorted(opcodes(text) & COLLECTIVES)
    return " ".join(ops) if ops else "-"


def match_brace(text: str, start: int) -> int:
    """Index just past the brace group opening at text[start] == '{'."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise ValueError("unbalanced braces")


def strip_shardings(text: str) -> str:
    out, pos = [], 0
    while (i := text.find(", sharding={", pos)) >= 0:
        out.append(text[pos:i])
        pos = match_brace(text, i + len(", sharding="))
    out.append(text[pos:])
    return "".join(out)


MESH_GROUPS_RE = re.compile(r"replica_groups=mesh\[([^\]]*)\]([^{]*)\{([^}]*)\}")


def mesh_groups_to_lists(m: re.Match) -> str:
    """`mesh['a'=2,'b'=2] {'b'}` as explicit groups: the devices 0..n-1 laid out row-major
    over the mesh axes; each group runs along the named axes (in their order), one group
    per position of the other axes. Only for the rerun: XLA's HLO -> MLIR conversion does
    not carry the mesh form over (the collective then runs on wrong groups)."""
    if m.group(2).strip() or ":(" in m.group(3):
        raise SystemExit(f"mesh replica groups with device ids or sub-axes: {m.group(0)}")
    axes = [a.split("=") for a in m.group(1).split(",")]
    names = [n.strip("'") for n, _ in axes]
    sizes = [int(v) for _, v in axes]
    grouped = [names.index(a.strip().strip("'")) for a in m.group(3).split(",")]
    order = [i for i in range(len(sizes)) if i not in grouped] + grouped
    per_group = int(np.prod([sizes[i] for i in grouped]))
    ids = np.arange(int(np.prod(sizes))).reshape(sizes).transpose(order).reshape(-1, per_group)
    return "replica_groups={" + ",".join("{" + ",".join(map(str, g)) + "}" for g in ids) + "}"


def manualize(text: str) -> str:
    """The per-device module with every sharding removed and the ENTRY's parameters and
    root marked manual: XLA's SPMD partitioner then leaves the program as it is. Mesh-form
    replica groups are spelled as lists (see mesh_groups_to_lists)."""
    text = MESH_GROUPS_RE.sub(mesh_groups_to_lists, strip_shardings(text))
    lines, in_entry = [], False
    for line in text.splitlines():
        if line.startswith("ENTRY"):
            in_entry = True
        elif line.startswith("}"):
            in_entry = False
        if in_entry and (" parameter(" in line or line.lstrip().startswith("ROOT")):
            m = re.match(r"\s*(?:ROOT\s+)?\S+\s+=\s+(\([^=]*?\)|\S+)\s", line)
            shape = m.group(1)
            if shape.startswith("("):
                n = len(re.findall(r"[a-z0-9]+\[[^\]]*\]", shape))
                if shape.count("(") > 1:
                    raise SystemExit("nested tuple at the ENTRY boundary: not handled")
                sharding = "{" + ", ".join(["{manual}"] * n) + "}"
            else:
                sharding = "{manual}"
            if ", metadata=" in line:
                line = line.replace(", metadata=", f", sharding={sharding}, metadata=", 1)
            else:
                line += f", sharding={sharding}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def rerun_with_xla(hlo_text: str, args_per_device, replicas: int, partitions: int):
    """Compile the per-device module with XLA and run logical device d on args[d]."""
    backend = xla_bridge.get_backend()
    module = xla_client.hlo.hlo_module_from_text(manualize(hlo_text))
    comp = xla_client.XlaComputation(module.as_serialized_hlo_module_proto())
    mlir = _jax.mlir.xla_computation_to_mlir_module(comp)
    opts = xla_client.CompileOptions()
    build = opts.executable_build_options
    build.num_replicas, build.num_partitions = replicas, partitions
    build.use_spmd_partitioning = partitions > 1
    n = replicas * partitions
    assign = np.arange(n).reshape(replicas, partitions)
    build.device_assignment = xla_client.DeviceAssignment.create(assign)
    devices = [DEVICES[i] for i in range(n)]
    exe = backend.compile_and_load(mlir, xla_client.DeviceList(tuple(devices)), opts)
    got = [d.id for d in exe.local_devices()]
    assert got == list(range(n)), f"rerun device order {got}"
    mesh = Mesh(np.array(devices), ("d",))
    arrays = []
    for i in range(len(args_per_device[0])):
        shards = [jax.device_put(args_per_device[d][i], devices[d]) for d in range(n)]
        arrays.append(jax.make_array_from_single_device_arrays(
            shards[0].shape, NamedSharding(mesh, P()), shards))
    results = exe.execute_sharded(arrays).disassemble_into_single_device_arrays()
    return [[np.asarray(results[j][d]) for j in range(len(results))] for d in range(n)]


def shard_on(array, device) -> np.ndarray:
    found = [s for s in array.addressable_shards if s.device == device]
    if len(found) != 1:
        raise SystemExit(f"{len(found)} shards on {device}")
    return np.asarray(found[0].data)


def entry_param_shapes(text: str) -> list[str]:
    layout = re.search(r"entry_computation_layout=\{\((.*?)\)->", text).group(1)
    return [re.sub(r"\{[^}]*\}", "", s) for s in re.findall(r"[a-z0-9]+\[[^\]]*\](?:\{[^}]*\})?",
                                                            layout)]


def dtype_shape(a: np.ndarray) -> str:
    names = {"float32": "f32", "float64": "f64", "int32": "s32", "int64": "s64", "bool": "pred"}
    return f"{names[a.dtype.name]}[{','.join(map(str, a.shape))}]"


def assert_same(got, want, what):
    if len(got) != len(want):
        raise SystemExit(f"{what}: {len(got)} devices, expected {len(want)}")
    for d, (g, w) in enumerate(zip(got, want)):
        if len(g) != len(w):
            raise SystemExit(f"{what}: device {d}: {len(g)} outputs, expected {len(w)}")
        for j, (a, b) in enumerate(zip(g, w)):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape or a.dtype != b.dtype:
                raise SystemExit(f"{what}: d{d}_out{j}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
            if not np.array_equal(a, b):
                raise SystemExit(f"{what}: d{d}_out{j} differs: {a} vs {b}")


def assert_close(got, want, what):
    for d, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w), f"{what}: device {d}"
        for j, (a, b) in enumerate(zip(g, w)):
            b = np.asarray(b)
            if a.shape != b.shape:
                raise SystemExit(f"{what}: d{d}_out{j}: shape {a.shape} vs {b.shape}")
            if not np.allclose(a, b, rtol=1e-5, atol=1e-5):
                raise SystemExit(f"{what}: d{d}_out{j}: XLA {a} vs numpy {b}")


def build(c: Case, out: Path) -> dict:
    host_args = [np.asarray(a) for a in c.args]
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp)
        if c.in_shardings is None:
            lowered = c.fn.lower(*host_args)
        else:
            lowered = c.fn.lower(*[jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s)
                                   for a, s in zip(host_args, c.in_shardings)])
        compiled = lowered.compile(compiler_options={"xla_dump_to": str(dump),
                                                     "xla_dump_hlo_pass_re": ".*"})
        hlo_path = partitioned_dump(dump)
        hlo_text = hlo_path.read_text()
        global_text = before_optimizations(dump).read_text()
    opt_text = compiled.as_text()
    replicas, partitions = module_counts(hlo_text)
    n = replicas * partitions

    # The device assignment: logical device d (replica-major) -> physical device.
    assignment = list(compiled.runtime_executable().local_devices())
    if len(assignment) != n:
        raise SystemExit(f"{c.name}: {len(assignment)} devices for R={replicas} P={partitions}")

    # Inputs placed as the executable wants them; results read per physical device.
    shardings = jax.tree.leaves(compiled.input_shardings[0])
    dev_args = [jax.device_put(a, s) for a, s in zip(host_args, shardings)]
    results = jax.tree.leaves(compiled(*dev_args))
    args_pd = [[shard_on(a, dev) for a in dev_args] for dev in assignment]
    outs_pd = [[shard_on(r, dev) for r in results] for dev in assignment]

    params = entry_param_shapes(hlo_text)
    have = [dtype_shape(a) for a in args_pd[0]]
    if params != have:
        raise SystemExit(f"{c.name}: ENTRY parameters {params} but npz arguments {have}")

    rerun = rerun_with_xla(hlo_text, args_pd, replicas, partitions)
    assert_same(rerun, outs_pd, f"{c.name}: XLA rerun of {c.name}.hlo")
    if c.reference is not None:
        assert_close(outs_pd, c.reference(args_pd), f"{c.name}: numpy reference")

    (out / f"{c.name}.hlo").write_text(hlo_text)
    (out / f"{c.name}.opt.hlo").write_text(opt_text)
    (out / f"{c.name}.global.hlo").write_text(global_text)
    arrays = {}
    for d in range(n):
        arrays.update({f"d{d}_arg{i}": a for i, a in enumerate(args_pd[d])})
        arrays.update({f"d{d}_out{j}": r for j, r in enumerate(outs_pd[d])})
    np.savez_compressed(out / f"{c.name}.npz", **arrays)
    return dict(
        name=c.name, hlo=collectives(hlo_text), opt=collectives(opt_text),
        rp=f"{replicas}/{partitions}", assign="[" + ",".join(str(d.id) for d in assignment) + "]",
        shapes=", ".join(have) + " -> " + ", ".join(dtype_shape(r) for r in outs_pd[0]),
        source=hlo_path.name.split(".", 2)[2].removesuffix(".txt"),
        notes="; ".join(filter(None, [c.notes, "checked by hand (numpy)" if c.reference
                                      else ""])))


HEADER = """# Multi-device HLO corpus

Generated by `tools/make_device_corpus.py` (JAX/jaxlib {jax}, XLA CPU, jax_enable_x64=True) with

    XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
        /work/jaxvenv/bin/python tools/make_device_corpus.py

Each case is a JAX function over a mesh of host CPU devices (shard_map, pmap, or jit with
NamedSharding inputs). Files:

- `NAME.hlo`: the per-device program, XLA's module at the end of its `spmd-partitioner`
  pipeline (dumped with `xla_dump_to` and `xla_dump_hlo_pass_re=.*`; the dump named in
  the "dump" column): partitioned, shard_map's body inlined, no SPMD/Sharding custom-calls.
  `num_partitions` (and `replica_count` when > 1) are in the HloModule line.
- `NAME.opt.hlo`: the module after XLA's whole CPU pipeline (`compiled.as_text()`).
- `NAME.global.hlo`: the unpartitioned module XLA received from JAX (dump
  `before_optimizations`: global shapes, `sharding=` plus Shardy frontend attributes and
  `xla.sdy.*` custom-calls).
- `NAME.npz`: `d{{d}}_arg{{i}}` = logical device d's argument i (ENTRY parameter order, the
  shard of the global input that device holds), `d{{d}}_out{{j}}` = device d's result j as XLA
  computed it (tuple flattened). Logical device d = replica * num_partitions + partition.
  The "assignment" column lists the physical CPU device of logical devices 0, 1, ... (the
  executable's device assignment); values were read from that physical device.

Checks made by the generator: the npz arguments have NAME.hlo's ENTRY parameter shapes;
NAME.hlo compiled again by XLA (entry parameters and root marked `sharding={{manual}}`) and
run with logical device d fed `d{{d}}_arg*` reproduces every `d{{d}}_out*` bit for bit; cases
marked "checked by hand" match numpy computed from the per-device arguments (rtol 1e-5).

What the files hold: all modules are in partition mode (`num_partitions`, replica_count 1;
JAX's pmap lowers to partitions too). Collectives use `channel_id` (several collectives
may share one id), `use_global_device_ids=true` (not on all-to-all / collective-permute),
replica groups as lists `{{{{0,1}},{{2,3}}}}` or in the mesh form of the partitioner,
`mesh['axis_0'=2,'axis_1'=2] {{'axis_0'}}` (devices 0..n-1 row-major over the mesh axes;
one group along the named axes per position of the others: here {{0,2}},{{1,3}}; verified by
the rerun). The .opt.hlo files add variadic all-reduces (XLA's combiner), all-to-all in
tuple form (no `dimensions=`) and kCustom fusions with backend_config. XLA's CPU pipeline
keeps collectives synchronous: no `-start`/`-done` pairs appear in any .opt.hlo.

Columns: name | collectives in .hlo | collectives in .opt.hlo | replica_count/num_partitions |
assignment | per-device params -> outputs | dump | notes

| name | .hlo | .opt.hlo | R/P | assignment | params -> outputs | dump | notes |
|---|---|---|---|---|---|---|---|
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("cases", nargs="*", help="case names (default: all)")
    a = p.parse_args(argv)
    out = Path(a.out)
    names = a.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        p.error(f"unknown cases {unknown}; known: {' '.join(CASES)}")
    if not a.cases:
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        c = CASES[name]()
        assert c.name == name
        row = build(c, out)
        print(f"{name}: {row['hlo']} | {row['opt']} | {row['assign']}", flush=True)
        rows.append(row)
    if not a.cases:
        table = "".join(
            f"| {r['name']} | {r['hlo']} | {r['opt']} | {r['rp']} | {r['assign']} | "
            f"{r['shapes']} | {r['source']} | {r['notes']} |\n" for r in rows)
        (out / "MANIFEST.md").write_text(HEADER.format(jax=jax.__version__) + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
