"""Shape rules of dot (dot_general) and convolution.

Both may accumulate into a wider type than their operands (s8 x s8 -> s32 in
quantized matmuls): the result element type comes from the hint when one is
given, else it is the operands' common type.
"""
from __future__ import annotations

import re

from .shape import Shape
from .shape_rules_common import array, check_dims_attr, fail, rule, window_output_size


def _result_type(lhs: Shape, rhs: Shape, hint: Shape | None) -> str:
    if hint is not None:
        all_pred = lhs.element_type == rhs.element_type == hint.element_type == "pred"
        if not hint.is_array or (hint.dtype.kind not in ("signed", "unsigned", "float",
                                                         "complex") and not all_pred):
            fail(f"result {hint} must be a numeric array (or pred, of pred operands)")
        return hint.element_type
    if lhs.element_type != rhs.element_type:
        fail(f"operand types {lhs.element_type} and {rhs.element_type} differ "
             f"(give the result type as a hint for mixed precision)")
    return lhs.element_type


def _sparse_operands(shapes, attrs) -> tuple[Shape, Shape]:
    """A sparse dot (sparsity=L.1@2:4): lhs, rhs and one metadata operand per
    descriptor; returns lhs and rhs with each sparse dimension at its logical size
    (stored size * m / n), which the dot's checks then see."""
    descriptors = attrs["sparsity"]
    if len(shapes) != 2 + len(descriptors):
        fail(f"a sparse dot with {len(descriptors)} sparsity descriptor(s) takes "
             f"{2 + len(descriptors)} operands (lhs, rhs, metadata), got {len(shapes)}")
    operands = {"L": array(shapes[0], "lhs"), "R": array(shapes[1], "rhs")}
    for i, (side, d, n, m) in enumerate(descriptors):
        s = operands[side]
        meta = array(shapes[2 + i], f"sparsity metadata {i}")
        if meta.element_type not in ("u16", "u8", "u32"):
            fail(f"sparsity metadata {i} must be unsigned integers, got {meta}")
        if not 0 <= d < s.rank or not 0 < n < m:
            fail(f"sparsity {side}.{d}@{n}:{m} does not fit {s}")
        if (s.dims[d] * m) % n:
            fail(f"sparsity {side}.{d}@{n}:{m}: stored size {s.dims[d]} is not a multiple of {n}")
        dims = list(s.dims)
        dims[d] = s.dims[d] * m // n
        operands[side] = Shape(s.element_type, tuple(dims))
    return operands["L"], operands["R"]


@rule("dot")
def dot_shape(opcode, shapes, attrs, hint):
    """dot_general: result = batch dims, then lhs free dims, then rhs free dims. A sparse
    dot (sparsity=) is checked at its operands' logical sizes."""
    if "sparsity" in attrs:
        shapes = list(_sparse_operands(shapes, attrs))
    elif len(shapes) != 2:
        fail(f"takes 2 operands (lhs, rhs), got {len(shapes)} (more only for a sparse dot, "
             f"with sparsity=)")
    lhs, rhs = array(shapes[0], "lhs"), array(shapes[1], "rhs")
    lc = check_dims_attr(attrs.get("lhs_contracting_dims", ()), lhs.rank, "lhs_contracting_dims")
    rc = check_dims_attr(attrs.get("rhs_contracting_dims", ()), rhs.rank, "rhs_contracting_dims")
    lb = check_dims_attr(attrs.get("lhs_batch_dims", ()), lhs.rank, "lhs_batch_dims")
    rb = check_dims_attr(attrs.get("rhs_batch_dims", ()), rhs.rank, "rhs_batch_dims")
    if len(lc) != len(rc):
        fail(f"lhs_contracting_dims {list(lc)} and rhs_contracting_dims {list(rc)} differ in length")
    if len(lb) != len(rb):
        fail(f"lhs_batch_dims {list(lb)} and rhs_batch_dims {list(rb)} differ in length")
    if set(lc) & set(lb) or set(rc) & set(rb):
        fail("a dim cannot be both batch and contracting")
    for a, b in zip(lc, rc):
        if lhs.dims[a] != rhs.dims[b]:
            fail(f"contracting dims lhs {a} (size {lhs.dims[a]}) and rhs {b} "
                 f"(size {rhs.dims[b]}) differ: {lhs} x {rhs}")
    for a, b in zip(lb, rb):
        if lhs.dims[a] != rhs.dims[b]:
            fail(f"batch dims lhs {a} (size {lhs.dims[a]}) and rhs {b} "
                 f"(size {rhs.dims[b]}) differ: {lhs} x {rhs}")
    lhs_free = [n for d, n in enumerate(lhs.dims) if d not in lc and d not in lb]
    rhs_free = [n for d, n in enumerate(rhs.dims) if d not in rc and d not in rb]
    dims = [lhs.dims[d] for d in lb] + lhs_free + rhs_free
    return Shape(_result_type(lhs, rhs, hint), tuple(dims))


def ragged_dot_mode(attrs, lhs_rank: int) -> tuple[str, int]:
    """("non-contracting" | "contracting" | "batch", the lhs ragged dimension)."""
    ragged = tuple(attrs.get("lhs_ragged_dims", ()))
    if len(ragged) != 1 or not 0 <= ragged[0] < lhs_rank:
        fail(f"needs lhs_ragged_dims={{d}} with one dimension of the lhs, got {list(ragged)}")
    (d,) = ragged
    if d in tuple(attrs.get("lhs_batch_dims", ())):
        return "batch", d
    if d in tuple(attrs.get("lhs_contracting_dims", ())):
        return "contracting", d
    return "non-contracting", d


def ragged_group_prefix(attrs, mode: str, ragged: int) -> list[int]:
    """The lhs dimensions group_sizes is indexed by before its group dimension: the
    batch dims, then the dims of the ragged dim's kind outer to it (none for batch)."""
    lb = list(attrs.get("lhs_batch_dims", ()))
    if mode == "batch":
        return [d for d in lb if d < ragged]
    kind = list(attrs.get("lhs_contracting_dims", ())) if mode == "contracting" else None
    if kind is None:
        skip = set(lb) | set(attrs.get("lhs_contracting_dims", ()))
        return lb + [d for d in range(ragged) if d not in skip]
    return lb + [d for d in kind if d < ragged]


@rule("ragged-dot")
def ragged_dot_shape(opcode, shapes, attrs, hint):
    """ragged-dot(lhs, rhs, group_sizes): XLA's three modes by the kind of lhs's ragged
    dimension. non-contracting: rhs has a group dimension (rhs_group_dims) that the
    dot drops; contracting: the result gets a leading group dimension; batch: the
    dot's shape. group_sizes is [g] or [prefix..., g] (ragged_group_prefix)."""
    if len(shapes) != 3:
        fail(f"takes lhs, rhs and group_sizes, got {len(shapes)} operands")
    lhs, rhs, sizes = (array(s, w) for s, w in zip(shapes, ("lhs", "rhs", "group_sizes")))
    if sizes.rank == 0 or sizes.element_type not in ("s32", "s64", "u32", "u64"):
        fail(f"group_sizes must be an integer array with the groups last, got {sizes}")
    mode, ragged = ragged_dot_mode(attrs, lhs.rank)
    groups = tuple(attrs.get("rhs_group_dims", ()))
    g = sizes.dims[-1]
    dot_attrs = {k: v for k, v in attrs.items() if k not in ("lhs_ragged_dims", "rhs_group_dims")}
    if mode == "non-contracting":
        if len(groups) != 1 or not 0 <= groups[0] < rhs.rank:
            fail(f"a non-contracting ragged dimension needs rhs_group_dims={{d}} with one "
                 f"dimension of the rhs, got {list(groups)}")
        (gd,) = groups
        if gd in tuple(attrs.get("rhs_batch_dims", ())) or \
                gd in tuple(attrs.get("rhs_contracting_dims", ())):
            fail(f"rhs_group_dims {gd} is also a batch or contracting dimension")
        if rhs.dims[gd] != g:
            fail(f"rhs has {rhs.dims[gd]} groups along dimension {gd}, group_sizes {sizes} "
                 f"has {g}")
        rhs = Shape(rhs.element_type, rhs.dims[:gd] + rhs.dims[gd + 1:])
        shift = lambda ds: tuple(d - (d > gd) for d in ds)               # noqa: E731
        dot_attrs["rhs_batch_dims"] = shift(attrs.get("rhs_batch_dims", ()))
        dot_attrs["rhs_contracting_dims"] = shift(attrs.get("rhs_contracting_dims", ()))
    elif groups:
        fail(f"rhs_group_dims is only for a non-contracting ragged dimension ({mode} here)")
    prefix = [lhs.dims[d] for d in ragged_group_prefix(attrs, mode, ragged)]
    if sizes.rank > 1 and list(sizes.dims[:-1]) != prefix:
        fail(f"group_sizes {sizes} must be [g] or {prefix + ['g']} for this ragged dimension")
    inner_hint = None
    if hint is not None:
        inner_hint = Shape(hint.element_type, hint.dims[1:]) \
            if mode == "contracting" and hint.is_array and hint.rank else hint
    out = dot_shape("dot", [lhs, rhs], dot_attrs, inner_hint)
    if mode == "contracting":
        return Shape(out.element_type, (g,) + out.dims)
    return out


_LABEL = re.compile(r"^([^_]+)_([^-]+)->(.+)$")


def parse_dim_labels(labels: str, num_spatial: int) -> tuple[dict, dict, dict]:
    """"b01f_01io->b01f" -> ({'b':0,'0':1,'1':2,'f':3}, {'0':0,'1':1,'i':2,'o':3}, {...})."""
    m = _LABEL.match(labels or "")
    if not m:
        fail(f"dim_labels {labels!r} is not of the form lhs_rhs->out (e.g. b01f_01io->b01f)")
    spatial = {str(k) for k in range(num_spatial)}
    result = []
    for text, special, what in ((m[1], "bf", "lhs"), (m[2], "io", "rhs"), (m[3], "bf", "out")):
        if sorted(text) != sorted(set(special) | spatial):
            fail(f"dim_labels {labels!r}: {what} labels {text!r} must be {special} and "
                 f"{num_spatial} spatial dims 0..{num_spatial - 1}")
        result.append({c: i for i, c in enumerate(text)})
    return result[0], result[1], result[2]


@rule("convolution")
def convolution_shape(opcode, shapes, attrs, hint):
    """Output: batch / batch_group_count, kernel output features, one spatial size per window dim."""
    lhs, rhs = array(shapes[0], "lhs"), array(shapes[1], "rhs")
    window = attrs.get("window")
    if window is None:
        fail("missing window")
    n = len(window.dims)
    if lhs.rank != n + 2 or rhs.rank != n + 2:
        fail(f"lhs {lhs} and rhs {rhs} must have rank {n + 2} for a {n}-d window")
    L, R, O = parse_dim_labels(attrs.get("dim_labels"), n)
    fgc = int(attrs.get("feature_group_count", 1))
    bgc = int(attrs.get("batch_group_count", 1))
    if fgc < 1 or bgc < 1:
        fail("feature_group_count and batch_group_count must be >= 1")
    batch, in_feat = lhs.dims[L["b"]], lhs.dims[L["f"]]
    k_in, k_out = rhs.dims[R["i"]], rhs.dims[R["o"]]
    if in_feat != k_in * fgc:
        fail(f"input features {in_feat} != kernel input features {k_in} x feature_group_count {fgc}")
    if k_out % fgc:
        fail(f"kernel output features {k_out} not divisible by feature_group_count {fgc}")
    if batch % bgc or k_out % bgc:
        fail(f"batch {batch} and kernel output features {k_out} must be multiples of "
             f"batch_group_count {bgc}")
    dims = [0] * (n + 2)
    dims[O["b"]], dims[O["f"]] = batch // bgc, k_out
    for k, wd in enumerate(window.dims):
        if rhs.dims[R[str(k)]] != wd.size:
            fail(f"window size {wd.size} of spatial dim {k} != kernel size {rhs.dims[R[str(k)]]}")
        dims[O[str(k)]] = window_output_size(lhs.dims[L[str(k)]], wd)
    return Shape(_result_type(lhs, rhs, hint), tuple(dims))
