"""The SPMD partitioner's windowed ops: reduce-window and convolution split along the
dimensions their windows slide over, with a halo exchange.

A dimension of `n` elements split into `k` tiles of `t = ceil(n/k)` (device at position
p holds input elements [p*t, (p+1)*t), the ones past n padding) gives an output of
`o` elements split into tiles of `to = ceil(o/k)`. Output element j reads the input
from j*stride - pad_low over the window's extent `w` ((size-1)*dilation+1), so device
p needs the input range starting at p*to*stride - pad_low of length
`(to-1)*stride + w`. What it lacks on the left comes from position p-1's last elements,
on the right from p+1's first: each device sends those borders with one
collective-permute per side over the devices that split the dimension (pairs
neighbour -> neighbour, in grid order), concatenates [left, own tile, right], and
sets every element whose global index is outside [0, n) to the value the op pads
with (reduce-window: its reducer's identity, so that the init still enters each window
once and padding adds nothing, as XLA reads it; convolution: 0) -- that covers the array's edges, the
padded elements of uneven tiles and what the devices at the ends receive from nobody.
A dynamic-slice at the device's own offset (a table indexed by partition-id) then
gives exactly the range its output tile reads, and the op runs locally with that
dimension's padding set to 0. Dimensions are treated one after the other, so a value
split along two windowed dimensions gets its corners too.

Handled: reduce-window of one array whose reducer is one binary op with an identity
(add, multiply, maximum, minimum, and, or, xor; any init), convolution with the
lhs split along batch and spatial dimensions (its feature dimension made whole) and
the kernel replicated, `feature_group_count` any. Declined (the caller falls back to
computing the op whole): base (lhs) dilation or window reversal on a split dimension,
`batch_group_count` > 1, a halo wider than a neighbour's tile (it would need more
than one hop), sharding subgroups other than replication.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..hlo import HloSharding, SliceDim
from ..hlo.dtypes import numpy_dtype
from ..hlo.ir import Window
from .sharding_maps import derive
from . import spmd_reshard as rs


@dataclass
class _DimPlan:
    dim: int            # the dimension of the input
    n: int              # its global size
    t: int              # input tile
    length: int         # the local range the output tile reads
    lo: int             # elements received from the left neighbour
    hi: int             # ... from the right neighbour
    offsets: dict       # grid position -> start of the range in [left, own, right]


def _plan_dim(s: HloSharding, in_dims, out_dims, d_in, d_out, wd) -> _DimPlan | None:
    k = s.tile_counts(len(in_dims))[d_in]
    n, o = in_dims[d_in], out_dims[d_out]
    if wd.base_dilation != 1 or wd.reversal or o == 0:
        return None
    t, to = -(-n // k), -(-o // k)
    w = (wd.size - 1) * wd.window_dilation + 1
    length = (to - 1) * wd.stride + w
    real = [p for p in range(k) if p * to < o]
    start = {p: p * to * wd.stride - wd.pad_low for p in range(k)}
    left = {p: p * t - start[p] for p in real}
    right = {p: start[p] + length - (p + 1) * t for p in real}
    lo, hi = max([0] + list(left.values())), max([0] + list(right.values()))
    if lo > t or hi > t:
        return None
    ext = lo + t + hi
    offsets = {p: (lo - left[p] if p in real else 0) for p in range(k)}
    offsets = {p: min(max(v, 0), ext - length) for p, v in offsets.items()}
    return _DimPlan(d_in, n, t, length, lo, hi, offsets)


def _exchange(ctx, x, s: HloSharding, shape, plan: _DimPlan, fill):
    """x's tile extended along plan.dim by its neighbours' borders, masked outside the
    array, and cut to the range this device's output tile reads."""
    d, t = plan.dim, plan.t
    pos = [s.tile_offsets(shape.dims, dev)[d] // t for dev in range(ctx.n)]
    if plan.lo == 0 and plan.hi == 0 and plan.length == t and \
            all(v == 0 for v in plan.offsets.values()) and t * s.tile_counts(len(shape.dims))[d] == plan.n:
        return x
    rows = rs.groups_along(s, [d])
    dims = list(x.shape.dims)

    def cut(a, b):
        sl = tuple(SliceDim(a, b, 1) if i == d else SliceDim(0, m, 1) for i, m in enumerate(dims))
        return ctx.emit("slice", [x], x.shape.with_dims(tuple(b - a if i == d else m
                                                              for i, m in enumerate(dims))),
                        slice=sl)

    parts = []
    if plan.lo:
        pairs = tuple((r[p], r[p + 1]) for r in rows for p in range(len(r) - 1))
        parts.append(ctx.emit("collective-permute", [cut(t - plan.lo, t)],
                              source_target_pairs=pairs, channel_id=ctx.channel()))
    parts.append(x)
    if plan.hi:
        pairs = tuple((r[p + 1], r[p]) for r in rows for p in range(len(r) - 1))
        parts.append(ctx.emit("collective-permute", [cut(0, plan.hi)],
                              source_target_pairs=pairs, channel_id=ctx.channel()))
    ext = x
    if len(parts) > 1:
        ext_dims = tuple(plan.lo + t + plan.hi if i == d else m for i, m in enumerate(dims))
        ext = ctx.emit("concatenate", parts, x.shape.with_dims(ext_dims), dimensions=(d,))
    # global index of ext's element i along d: base + i; keep 0 <= base + i < n
    base = [p * t - plan.lo for p in pos]
    loc = ext.shape
    io = ctx.emit("iota", [], loc.with_element_type("s32"), iota_dimension=d)
    lo_t = ctx.emit("broadcast", [ctx.device_scalar([-b for b in base])],
                    loc.with_element_type("s32"), dimensions=())
    hi_t = ctx.emit("broadcast", [ctx.device_scalar([plan.n - b for b in base])],
                    loc.with_element_type("s32"), dimensions=())
    ok = ctx.emit("and", [ctx.emit("compare", [io, lo_t], loc.with_element_type("pred"),
                                   direction="GE"),
                          ctx.emit("compare", [io, hi_t], loc.with_element_type("pred"),
                                   direction="LT")])
    ext = ctx.emit("select", [ok, ext, ctx.emit("broadcast", [fill], loc, dimensions=())])
    if plan.length == ext.shape.dims[d] and all(v == 0 for v in plan.offsets.values()):
        return ext
    zero = ctx.constant(0, "s32")
    starts = [ctx.device_scalar([plan.offsets[p] for p in pos]) if i == d else zero
              for i in range(len(dims))]
    sizes = tuple(plan.length if i == d else m for i, m in enumerate(ext.shape.dims))
    return ctx.emit("dynamic-slice", [ext] + starts, ext.shape.with_dims(sizes),
                    dynamic_slice_sizes=sizes)


def _identity(ctx, reducer, dtype):
    """The identity of a reducer that is one binary op of its two parameters, as a
    constant (None for any other reducer)."""
    root = reducer.root
    if root.opcode not in ("add", "or", "xor", "multiply", "and", "maximum", "minimum") or \
            sorted(o.opcode for o in root.operands) != ["parameter", "parameter"]:
        return None
    dt = np.dtype(numpy_dtype(dtype))
    if root.opcode in ("maximum", "minimum"):
        big = root.opcode == "minimum"
        if dt.kind == "f":
            v = np.inf if big else -np.inf
        elif dt.kind in "iu":
            v = np.iinfo(dt).max if big else np.iinfo(dt).min
        else:
            v = big
    else:
        v = 1 if root.opcode in ("multiply", "and") else 0
        if dt.kind == "b":
            v = bool(v)
        elif root.opcode == "and" and dt.kind in "iu":
            v = -1 if dt.kind == "i" else np.iinfo(dt).max
    return ctx.constant(np.asarray(v).astype(dt), dtype)


def _split_ok(s: HloSharding) -> bool:
    return s.kind == "tiled" and all(k == "replicated" for k in s.subgroups)


def partition_reduce_window(ctx, instr, ops, want) -> rs.PVal | None:
    if len(instr.operands) != 2 or not instr.shape.is_array:
        return None
    x, init = ops
    s = x.sharding
    if not _split_ok(s):
        if want is None or not _split_ok(want):
            return None
        s = want
    in_dims, out_dims = instr.operands[0].shape.dims, instr.shape.dims
    window = instr.attrs["window"]
    counts = s.tile_counts(len(in_dims))
    plans = []
    for d, wd in enumerate(window.dims):
        if counts[d] > 1:
            p = _plan_dim(s, in_dims, out_dims, d, d, wd)
            if p is None:
                return None
            plans.append(p)
    fill = _identity(ctx, instr.attrs["to_apply"], instr.shape.element_type) if plans else None
    if plans and fill is None:
        return None
    x = ctx.reshard_value(x, s)
    init_r = ctx.reshard_value(init, HloSharding.replicate()).instr
    local = x.instr
    for p in plans:
        local = _exchange(ctx, local, s, x.shape, p, fill)
    split = {p.dim for p in plans}
    attrs = {k: v for k, v in instr.attrs.items() if k not in ("sharding", "frontend_attributes")}
    attrs["window"] = Window(tuple(replace(wd, pad_low=0, pad_high=0) if d in split else wd
                                   for d, wd in enumerate(window.dims)))
    shape = rs.local_shape(instr.shape, s)
    r = ctx.emit("reduce-window", [local, init_r], shape, **attrs)
    ctx.owner.note(instr, None, "halo exchange along " + str(sorted(split)), done="halo")
    v = rs.PVal(r, s, instr.shape)
    return ctx.reshard_value(v, want) if want is not None else v


def partition_convolution(ctx, instr, ops, want) -> rs.PVal | None:
    a = instr.attrs
    if a.get("batch_group_count", 1) != 1 or not instr.shape.is_array:
        return None
    lhs_l, rest = a["dim_labels"].split("_")
    rhs_l, out_l = rest.split("->")
    x, w = ops
    s = x.sharding
    if not _split_ok(s):
        return None
    in_dims, out_dims = instr.operands[0].shape.dims, instr.shape.dims
    # the lhs's feature dimension made whole (it is contracted)
    s = derive(s, [None if c == "f" else j for j, c in enumerate(lhs_l)])
    if s is None or not _split_ok(s):
        return None
    counts = s.tile_counts(len(in_dims))
    plans = []
    for k, wd in enumerate(a["window"].dims):
        d_in, d_out = lhs_l.index(str(k)), out_l.index(str(k))
        if counts[d_in] > 1:
            p = _plan_dim(s, in_dims, out_dims, d_in, d_out, wd)
            if p is None:
                return None
            plans.append((k, p))
    out_s = derive(s, [None if c == "f" else lhs_l.index(c) for c in out_l])
    if out_s is None:
        return None
    x = ctx.reshard_value(x, s)
    w = ctx.reshard_value(w, HloSharding.replicate())
    zero = ctx.constant(np.zeros((), dtype=np.float64), instr.operands[0].shape.element_type)
    local = x.instr
    for _, p in plans:
        local = _exchange(ctx, local, s, x.shape, p, zero)
    split = {k for k, _ in plans}
    attrs = {k: v for k, v in a.items() if k not in ("sharding", "frontend_attributes")}
    attrs["window"] = Window(tuple(replace(wd, pad_low=0, pad_high=0) if k in split else wd
                                   for k, wd in enumerate(a["window"].dims)))
    shape = rs.local_shape(instr.shape, out_s)
    r = ctx.emit("convolution", [local, w.instr], shape, **attrs)
    ctx.owner.note(instr, None, "halo exchange along spatial " + str(sorted(split)), done="halo")
    v = rs.PVal(r, out_s, instr.shape)
    return ctx.reshard_value(v, want) if want is not None else v
