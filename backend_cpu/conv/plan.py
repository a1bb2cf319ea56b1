"""How a convolution becomes GEMMs on chunks of a patch matrix (planning only, no IR).

For one group of a convolution (feature or batch grouping splits it into G
independent ones), with any `dim_labels`:

    out[row, f] = sum over k of P[row, k] * W[k, f]

- a *row* is one output position (b, o0, o1, ..): M rows in all;
- `k` runs over the input channels of the group and the window taps
  (c, k0, k1, ..): K in all;
- `f` runs over the group's Fg output features;
- P, the patch matrix, holds at (row, k) the input element under tap (k0..) of
  output position (o0..), or 0 in padding and between base-dilated elements;
- W is the kernel seen as a [K, Fg] matrix.

The plan fixes orders that make the memory walks cheap:
- the k axes follow the lhs's memory order, so the innermost one walks the lhs
  contiguously (the channels in NHWC, a spatial tap in NCHW);
- the rows follow the output's memory order when the GEMM can write the output in
  place (one group, features innermost: the output *is* the [M, F] matrix), else
  the lhs's, and then a copy puts each GEMM result tile where the labels say;
- P is stored [K, rows] ("columns major") when the lhs's innermost dimension is
  the inner row axis' and runs longer along the rows than along the taps (NCHW),
  else [rows, K], so that building it streams along the lhs's contiguous
  dimension either way (the GEMM folds the transpose into packing);
- W is used in place when its k axes merge into one stride, else copied.

Rows are cut into chunks of `chunk_rows` so that a chunk's patches stay in cache
(and under MAX_PATCH_BYTES in all); a work item is one (group, chunk).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil, prod

from ..elemental.contraction import parse_dim_labels
from ..gemm.partition import even_cuts
from ..llvm.kernel_ir import strides as layout_strides

# The patch chunks of all units together stay under this many bytes.
MAX_PATCH_BYTES = 64 << 20
# A chunk of patches of about this size stays in L2 between its build and the GEMM.
CHUNK_BYTES = 1 << 20
# The GEMM of a chunk packs all of W (K x Fg): a chunk of at least this many times
# Fg rows makes that packing a small share of the chunk's work. It only binds when
# K is long (a weight gradient: K = 25088, P rows of 100 KB); there, 2 beat 1 and 4
# (f32[8,56,56,64] kernel gradient: 9.0 / 8.6 / 9.6 ms): smaller chunks stay in cache.
ROWS_PER_FEATURE = 2
# Below this many multiply-adds the generic convolution generator is used.
GEMM_MIN_FLOPS = 32 * 1024
# Per group and output element, a contraction shorter than this (a depthwise conv:
# one channel, a 3x3 window) is faster on the generic generator's direct loop.
MIN_GROUP_WORK = 64


@dataclass(frozen=True)
class Axis:
    """One dimension of the rows or of k: its size and where it sits in each operand.

    `spatial` is the window dimension of a spatial axis (None for batch/channel);
    `lhs_dim`, `other_dim` are the dimension in the lhs and in the out (a row) or in
    the rhs (a k axis)."""
    size: int
    lhs_dim: int
    other_dim: int
    spatial: int | None = None


@dataclass(frozen=True)
class ConvPlan:
    """See the module docstring. Sizes are per group."""
    etype: str
    rows: tuple[Axis, ...]        # outer to inner; a row index is mixed-radix over them
    k_axes: tuple[Axis, ...]      # outer to inner
    groups: int
    by_batch: bool                # batch_group_count (else feature_group_count) groups
    batch: int                    # the output's batch size
    channels: int                 # input channels per group (Cg)
    features: int                 # output features per group (Fg)
    columns_major: bool           # P chunks are [K, rows] (else [rows, K])
    chunk_rows: int
    direct: bool                  # the GEMM writes the output in place
    rhs_strides: tuple[int, int] | None   # W in place as [K, Fg]; None: copied [K, F]
    units: int
    out_feature_dim: int
    rhs_feature_dim: int

    @property
    def m(self) -> int:
        return prod(a.size for a in self.rows)

    @property
    def k(self) -> int:
        return prod(a.size for a in self.k_axes)

    @property
    def chunks(self) -> int:
        return ceil(self.m / self.chunk_rows)

    @property
    def items(self) -> int:
        return self.groups * self.chunks

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.features * self.groups


def plan_conv(conv, rhs_dims, rhs_strides, threads: int,
              allow_direct: bool = True) -> ConvPlan | None:
    """The plan of `conv` (an HLO convolution, or a phase of one: phases.py) whose
    rhs is in memory with element `rhs_strides`; None when the GEMM path does not pay
    or does not apply (plan_refusal says why). `allow_direct`: the output is a real
    array (not a phase's strided rows), which the GEMM may write in place."""
    plan = _plan(conv, rhs_dims, rhs_strides, threads, allow_direct)
    return plan if isinstance(plan, ConvPlan) else None


def plan_refusal(conv, rhs_dims, rhs_strides, threads: int, allow_direct: bool = True) -> str | None:
    """Why plan_conv gives no plan for these arguments, or None when it gives one."""
    plan = _plan(conv, rhs_dims, rhs_strides, threads, allow_direct)
    return plan if isinstance(plan, str) else None


def _plan(conv, rhs_dims, rhs_strides, threads: int, allow_direct: bool) -> ConvPlan | str:
    """plan_conv's plan, or the reason for none."""
    a = conv.attrs
    lhs_shape, out_shape = conv.operands[0].shape, conv.shape
    etype = out_shape.element_type
    if etype not in ("f32", "f64") or lhs_shape.element_type != etype:
        return f"{lhs_shape.element_type} input, {etype} output (f32 or f64 only)"
    fgc, bgc = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    if fgc > 1 and bgc > 1:
        return "both feature and batch grouping"
    lmap, rmap, omap = parse_dim_labels(a["dim_labels"])
    window = a["window"].dims if "window" in a else ()
    groups = fgc * bgc
    features = out_shape.dims[omap["f"]] // groups
    lhs_st, out_st = layout_strides(lhs_shape), layout_strides(out_shape)
    direct = allow_direct and groups == 1 and out_st[omap["f"]] == 1
    rows = [Axis(out_shape.dims[d], lmap[c], d, None if c == "b" else int(c))
            for c, d in omap.items() if c != "f"]
    rows.sort(key=lambda r: -(out_st[r.other_dim] if direct else lhs_st[r.lhs_dim]))
    k_axes = [Axis(rhs_dims[rmap["i"]], lmap["f"], rmap["i"])] + \
        [Axis(w.size, lmap[str(i)], rmap[str(i)], i) for i, w in enumerate(window)]
    k_axes.sort(key=lambda x: -lhs_st[x.lhs_dim])
    m, k = prod(r.size for r in rows), prod(x.size for x in k_axes)
    if m * k * features * groups < GEMM_MIN_FLOPS:
        return f"small: {m * k * features * groups} multiply-adds (the generic convolution " \
               f"below {GEMM_MIN_FLOPS})"
    if k * features < MIN_GROUP_WORK:
        return f"short groups: {k * features} multiply-adds per output element and group " \
               f"(the generic convolution below {MIN_GROUP_WORK})"
    innermost = min((d for d in range(lhs_shape.rank) if lhs_shape.dims[d] > 1),
                    key=lambda d: lhs_st[d], default=lmap["f"])
    # A spatial innermost lhs dimension is walked by the inner row axis and by its
    # tap axis: the longer of the two makes the longer contiguous runs (an NCHW
    # forward conv: 56 outputs vs 3 taps; its weight gradient: 3 vs 56).
    taps = next((x.size for x in k_axes if x.lhs_dim == innermost), 1)
    columns_major = innermost != lmap["f"] and innermost == rows[-1].lhs_dim \
        and rows[-1].size >= taps
    esize = 8 if etype == "f64" else 4
    chunk_rows, units = _chunking(m, k, esize, features, groups, threads)
    if chunk_rows is None:
        return f"one row of patches per thread exceeds {MAX_PATCH_BYTES >> 20} MiB"
    return ConvPlan(etype, tuple(rows), tuple(k_axes), groups, bgc > 1,
                    out_shape.dims[omap["b"]], rhs_dims[rmap["i"]], features, columns_major,
                    chunk_rows, direct, _rhs_in_place(k_axes, rhs_strides, rmap["o"]), units,
                    omap["f"], rmap["o"])


def _chunking(m: int, k: int, esize: int, features: int, groups: int, threads: int):
    """(rows per chunk, work units), or (None, 0) when one row of patches per unit
    does not fit the budget."""
    row_bytes = k * esize
    rows = max(CHUNK_BYTES // row_bytes, ROWS_PER_FEATURE * features, 1)
    chunks = ceil(m / rows)
    if groups * chunks < 4 * threads:
        # Few items: an equal number per thread, or one thread idles at the end.
        chunks = min(m, ceil(ceil(groups * chunks / threads) * threads / groups))
    rows = ceil(m / chunks)
    if threads * rows * row_bytes > MAX_PATCH_BYTES:
        rows = MAX_PATCH_BYTES // (threads * row_bytes)
    if rows < 1:
        return None, 0
    units = len(even_cuts(groups * ceil(m / rows), 2 * m * k * features * groups)) - 1
    return rows, units


def _rhs_in_place(k_axes, rhs_strides, out_feature_dim: int) -> tuple[int, int] | None:
    """(k stride, f stride) of the rhs as a [K, F] matrix, or None when its k axes
    (in plan order) do not merge into one stride."""
    real = [x for x in k_axes if x.size > 1]
    for outer, inner in zip(real, real[1:]):
        if rhs_strides[outer.other_dim] != rhs_strides[inner.other_dim] * inner.size:
            return None
    k_stride = rhs_strides[real[-1].other_dim] if real else 0
    return k_stride, rhs_strides[out_feature_dim]
