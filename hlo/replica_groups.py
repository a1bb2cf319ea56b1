"""`replica_groups=` in every spelling XLA prints, expanded to explicit groups.

    {{0,1},{2,3}}                      a list of groups; `{}` is one group of everyone
    [2,2]<=[4]                         iota: 0..3 reshaped to 2 groups of 2 -> {0,1},{2,3}
    [2,2]<=[2,2]T(1,0)                 iota through a transpose            -> {0,2},{1,3}
    mesh['x'=2,'y'=2] {'x'}            mesh axes (XLA's SPMD partitioner): one group per
                                       position along the other axes      -> {0,2},{1,3}

The iota form `[G,S]<=[d0,...,dk]T(p0,...,pk)` numbers the ids 0..n-1 in an array
of dims `d`, transposes it by `p` (identity when `T(...)` is absent), and reads
the result row-major as G groups of S.

The mesh form names a device mesh (`mesh[name=size, ...]`, devices 0..n-1
laid out row-major over the axes, or the order given by `, device_ids=(...)`)
and the axes a group spans (`{'x'}`, `{'x','y'}`, or part of an axis:
`'x':(p)s` is the size-s piece of axis x that follows its first p, the axis
being split as [p, s, rest], major first). Devices that agree on every other axis form a group;
inside a group they are ordered by the grouped axes as listed, the first one
outermost. Axis names may be quoted ('x') or not.

`parse_replica_groups(text) -> ReplicaGroups` keeps the text so it prints
back as written; a malformed spelling is a `ValueError` saying which form
it tried and why.
"""
from __future__ import annotations

import re
from math import prod

import numpy as np

from .ir import ReplicaGroups

__all__ = ["parse_replica_groups", "iota_groups", "mesh_groups", "MAX_IDS"]

# No spelling may expand to more ids than this (a few characters of iota or mesh text
# could otherwise ask for gigabytes).
MAX_IDS = 2 ** 20

_INT_LIST = r"\s*(?:-?\d+\s*(?:,\s*-?\d+\s*)*)?"
_LIST_RE = re.compile(rf"\{{\s*(?:\{{{_INT_LIST}\}}\s*(?:,\s*\{{{_INT_LIST}\}}\s*)*)?\}}")
_GROUP_RE = re.compile(rf"\{{({_INT_LIST})\}}")
_IOTA_RE = re.compile(rf"\[({_INT_LIST})\]\s*<=\s*\[({_INT_LIST})\]\s*(?:T\(({_INT_LIST})\))?")
_MESH_RE = re.compile(r"mesh\s*\[(?P<axes>[^\]]*)\]"
                      r"(?:\s*,\s*device_ids\s*=\s*\((?P<ids>(?:[^()]|\([^()]*\))*)\))?"
                      r"\s*\{(?P<refs>[^{}]*)\}")
_NAME = r"'[^']*'|[A-Za-z_][A-Za-z0-9_.\-]*"
_AXIS_RE = re.compile(rf"\s*({_NAME})\s*=\s*(\d+)\s*")
_REF_RE = re.compile(rf"\s*({_NAME})\s*(?::\s*\(\s*(\d+)\s*\)\s*(\d+))?\s*")


def parse_replica_groups(text: str) -> ReplicaGroups:
    """The groups spelled by `text` (any form above); ValueError if malformed."""
    text = text.strip()
    if text.startswith("{"):
        if not _LIST_RE.fullmatch(text):
            raise ValueError(f"replica_groups must look like {{{{0,1}},{{2,3}}}}, got {text!r}")
        groups = tuple(tuple(_ints(g)) for g in _GROUP_RE.findall(text[1:-1]))
        return ReplicaGroups(groups, text)
    if text.startswith("["):
        m = _IOTA_RE.fullmatch(text)
        if m is None:
            raise ValueError(f"replica_groups in the iota form must look like "
                             f"[2,2]<=[4] or [2,2]<=[2,2]T(1,0), got {text!r}")
        shape = _ints(m.group(1))
        perm = _ints(m.group(3)) if m.group(3) is not None else None
        return ReplicaGroups(iota_groups(shape, _ints(m.group(2)), perm), text)
    if text.startswith("mesh"):
        return ReplicaGroups(_parse_mesh(text), text)
    raise ValueError(f"replica_groups must be a list {{{{0,1}},{{2,3}}}}, an iota [2,2]<=[4] "
                     f"or a mesh mesh['x'=2] {{'x'}}, got {text!r}")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def iota_groups(shape, dims, perm=None) -> tuple[tuple[int, ...], ...]:
    """[G,S]<=[dims]T(perm): ids 0..n-1 laid out in `dims`, transposed, read as G x S."""
    shape, dims = list(shape), list(dims)
    if len(shape) != 2 or min(shape) < 0:
        raise ValueError(f"an iota replica group list is [groups,size]<=[...], got {shape}")
    if not dims or min(dims) < 1:
        raise ValueError(f"iota dims must be positive, got {dims}")
    if prod(dims) > MAX_IDS:
        raise ValueError(f"iota dims {dims} name more than {MAX_IDS} ids")
    if prod(dims) != shape[0] * shape[1]:
        raise ValueError(f"iota dims {dims} hold {prod(dims)} ids, but {shape[0]} groups of "
                         f"{shape[1]} need {shape[0] * shape[1]}")
    perm = list(range(len(dims))) if perm is None else list(perm)
    if sorted(perm) != list(range(len(dims))):
        raise ValueError(f"T{tuple(perm)} is not a permutation of the {len(dims)} iota dims")
    ids = np.arange(prod(dims)).reshape(dims).transpose(perm).reshape(shape)
    return tuple(tuple(int(i) for i in row) for row in ids)


# --- the mesh form -----------------------------------------------------------------------

def _parse_mesh(text: str) -> tuple[tuple[int, ...], ...]:
    m = _MESH_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"replica_groups in the mesh form must look like "
                         f"mesh['x'=2,'y'=2] {{'x'}}, got {text!r}")
    names, sizes = [], []
    for item in m.group("axes").split(","):
        a = _AXIS_RE.fullmatch(item)
        if a is None:
            raise ValueError(f"mesh axis must be name=size, got {item.strip()!r} in {text!r}")
        names.append(a.group(1).strip("'"))
        sizes.append(int(a.group(2)))
    refs = []
    for item in m.group("refs").split(",") if m.group("refs").strip() else []:
        r = _REF_RE.fullmatch(item)
        if r is None:
            raise ValueError(f"mesh group axis must be 'name' or 'name':(pre)size, got "
                             f"{item.strip()!r} in {text!r}")
        name = r.group(1).strip("'")
        if name not in names:
            raise ValueError(f"mesh group axis {name!r} is not an axis of the mesh {names}")
        sub = (int(r.group(2)), int(r.group(3))) if r.group(2) is not None else None
        refs.append((names.index(name), sub))
    ids = _mesh_device_ids(m.group("ids"), sizes, text)
    return mesh_groups(sizes, refs, ids)


def _mesh_device_ids(spelled: str | None, sizes: list[int], text: str) -> np.ndarray:
    n = prod(sizes)
    if n > MAX_IDS or min(sizes, default=0) < 1:
        raise ValueError(f"mesh axis sizes must be positive, at most {MAX_IDS} devices in all, "
                         f"got {sizes}")
    if spelled is None:
        return np.arange(n)
    spelled = spelled.strip()
    if spelled.startswith("["):
        m = _IOTA_RE.fullmatch(spelled)
        if m is None:
            raise ValueError(f"mesh device_ids must be a list of ids or an iota, got {spelled!r}")
        dims = _ints(m.group(2))
        perm = _ints(m.group(3)) if m.group(3) is not None else list(range(len(dims)))
        if not dims or min(dims) < 1 or prod(dims) != n or sorted(perm) != list(range(len(dims))):
            raise ValueError(f"mesh device_ids {spelled!r}: an iota over dims of {n} ids whose "
                             f"T(...) permutes its {len(dims)} dims {dims}")
        ids = np.arange(prod(dims)).reshape(dims).transpose(perm).reshape(-1)
    else:
        try:
            ids = np.array(_ints(spelled), dtype=np.int64)
        except ValueError:
            raise ValueError(f"mesh device_ids must be a list of ids, got {spelled!r}") from None
    if sorted(ids.tolist()) != list(range(n)):
        raise ValueError(f"mesh device_ids must be a permutation of 0..{n - 1}, got {spelled!r} "
                         f"in {text!r}")
    return ids


def mesh_groups(sizes, refs, ids=None) -> tuple[tuple[int, ...], ...]:
    """The groups of a mesh of axis `sizes` (device `ids` row-major, default 0..n-1)
    spanning `refs`: (axis index, None) for a whole axis, (axis index, (pre, size))
    for the piece of size `size` after the `pre` major ones."""
    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"mesh axis sizes must be positive, got {sizes}")
    if prod(sizes) > MAX_IDS:
        raise ValueError(f"a mesh of {sizes} has more than {MAX_IDS} devices")
    ids = np.arange(prod(sizes)) if ids is None else np.asarray(ids)
    # Split every referenced axis into pieces so that each reference is one dimension.
    pieces: list[int] = []          # the sizes of the dimensions after splitting
    where: dict[int, int] = {}      # ref position -> its dimension
    for axis, size in enumerate(sizes):
        mine = [(k, sub) for k, (a, sub) in enumerate(refs) if a == axis]
        if not mine:
            pieces.append(size)
            continue
        if len(mine) == 1 and mine[0][1] is None:
            where[mine[0][0]] = len(pieces)
            pieces.append(size)
            continue
        if any(sub is None for _, sub in mine):
            raise ValueError(f"mesh axis {axis} is grouped whole and in part at once")
        covered = 1                  # product of the pieces laid out so far (major first)
        parts: list[int] = []
        for k, (pre, sub_size) in sorted(mine, key=lambda item: item[1][0]):
            if sub_size < 2 or pre < 1 or pre % covered or size % (pre * sub_size):
                raise ValueError(f"mesh sub-axis :({pre}){sub_size} does not split axis "
                                 f"{axis} of size {size} (or overlaps another piece)")
            if pre != covered:
                parts.append(pre // covered)
            where[k] = len(pieces) + len(parts)
            parts.append(sub_size)
            covered = pre * sub_size
        if covered != size:
            parts.append(size // covered)
        pieces.extend(parts)
    grouped = [where[k] for k in range(len(refs))]
    if len(set(grouped)) != len(grouped):
        raise ValueError("a mesh axis is listed twice in the group axes")
    rest = [d for d in range(len(pieces)) if d not in grouped]
    size = prod(pieces[d] for d in grouped)
    array = ids.reshape(pieces).transpose(rest + grouped).reshape(-1, size)
    return tuple(tuple(int(i) for i in row) for row in array)
