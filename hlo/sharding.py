"""`sharding=` as structured data: how an array is split over the devices of a module.

The spellings XLA prints, all parsed into one `HloSharding`:

    {replicated}                     every device holds the whole array
    {maximal device=1}               one device holds it
    {manual}                         the program handles the split itself (shard_map)
    {unknown}                        no sharding decided yet
    {devices=[2,2]0,1,2,3}           tiled: a 2x2 grid of tiles, tile (i,j) on the device
                                     at position (i,j) of the list read as a 2x2 array
    {devices=[2,2]<=[4]}             the same grid, devices given by the iota form
    {devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}
                                     the last grid dimension is not a data dimension: the
                                     devices along it hold the same tile (partial replication)
    {devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}
                                     several trailing grid dimensions of the given kinds
    {{replicated}, {devices=[4,1]<=[4]}}
                                     a tuple: one sharding per element (`{}` = empty tuple)

Any of them may end in `metadata={...}` (kept, printed back) and `shard_as N` /
`shard_like N` (kept as text). The text an `HloSharding` was parsed from prints
back unchanged (equality ignores it); shardings made in code print canonically.

The grid ("tile assignment") is kept expanded: `tile_dims` and `devices`, the device
ids in row-major order of the grid. For a shape of rank r the first r grid
dimensions split the r data dimensions; the others (`subgroups`, their kinds
"replicated" or "manual") do not. A dimension of size n split in t tiles gives
tiles of ceil(n/t) elements; the last tiles may hold fewer real elements (the
partitioner pads them).

JAX's default output also carries Shardy's form (`frontend_attributes=
{xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"x\\"}, {}]>"}` with the meshes in the
module header's `frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=2]>}}`,
and the `xla.sdy.FuncResultSharding` custom-call). `parse_sdy_mesh`,
`parse_sdy_sharding` and `sdy_sharding_of(instr, meshes)` map it onto the same
`HloSharding`: the devices of a mesh laid out row-major over its axes (or as
`device_ids=[...]` orders them), dimension i split by the axes listed for it (the
first one major), the axes no dimension uses becoming a trailing replicated group.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from math import prod

import numpy as np

__all__ = ["HloSharding", "ShardingError", "parse_sharding", "parse_sdy_mesh",
           "parse_sdy_sharding", "parse_sdy_meshes", "sdy_sharding_of",
           "parse_frontend_attributes", "iota_devices"]

MAX_DEVICES = 2 ** 20


class ShardingError(ValueError):
    """A sharding's text is malformed or does not fit its shape / device count."""


@dataclass(frozen=True)
class HloSharding:
    kind: str                                   # replicated maximal manual unknown tiled tuple
    tile_dims: tuple[int, ...] = ()             # tiled: the grid, trailing subgroups included
    devices: tuple[int, ...] = ()               # tiled: device ids, row-major over tile_dims
    subgroups: tuple[str, ...] = ()             # kinds of the trailing non-data grid dims
    device: int = -1                            # maximal
    elements: tuple["HloSharding", ...] = ()    # tuple
    metadata: str = field(default="", compare=False)
    text: str = field(default="", compare=False)

    # --- construction -------------------------------------------------------------
    @staticmethod
    def replicate() -> "HloSharding":
        return HloSharding("replicated")

    @staticmethod
    def manual() -> "HloSharding":
        return HloSharding("manual")

    @staticmethod
    def maximal(device: int) -> "HloSharding":
        return HloSharding("maximal", device=int(device))

    @staticmethod
    def tuple_of(elements) -> "HloSharding":
        return HloSharding("tuple", elements=tuple(elements))

    @staticmethod
    def tiled(assignment, replicate_last: bool = False, subgroups=()) -> "HloSharding":
        """From a numpy array of device ids (its shape is the grid). A grid of one
        tile per dimension is replicated; a trailing replicated subgroup of size 1 is
        dropped, as XLA normalizes them."""
        a = np.asarray(assignment, dtype=np.int64)
        subgroups = tuple(subgroups) or (("replicated",) if replicate_last else ())
        # drop trailing replicated subgroups of size 1
        while subgroups and subgroups[-1] == "replicated" and a.shape[-1] == 1 and a.ndim > 1:
            a = a.reshape(a.shape[:-1])
            subgroups = subgroups[:-1]
        data_dims = a.shape[:a.ndim - len(subgroups)]
        if all(d == 1 for d in data_dims) and all(k == "replicated" for k in subgroups):
            return HloSharding("replicated")
        if a.ndim == 0:
            return HloSharding("replicated")
        return HloSharding("tiled", tuple(int(d) for d in a.shape),
                           tuple(int(d) for d in a.ravel()), subgroups)

    # --- queries --------------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.kind == "tuple"

    @property
    def is_tiled(self) -> bool:
        return self.kind == "tiled"

    @property
    def is_replicated(self) -> bool:
        """Every device holds the whole value (a tuple: every element does)."""
        if self.kind == "tuple":
            return all(e.is_replicated for e in self.elements)
        return self.kind == "replicated"

    @property
    def is_manual(self) -> bool:
        return self.kind == "manual"

    @property
    def replicate_on_last_tile_dim(self) -> bool:
        return self.subgroups == ("replicated",)

    @property
    def data_rank(self) -> int:
        """How many grid dimensions split data dimensions (tiled only)."""
        return len(self.tile_dims) - len(self.subgroups)

    @property
    def data_tile_dims(self) -> tuple[int, ...]:
        return self.tile_dims[:self.data_rank]

    def tile_counts(self, rank: int) -> tuple[int, ...]:
        """How many tiles split each of `rank` dimensions (all 1 unless tiled)."""
        if self.kind == "tiled":
            return self.data_tile_dims
        return (1,) * rank

    @property
    def num_tiles(self) -> int:
        return prod(self.data_tile_dims) if self.kind == "tiled" else 1

    @property
    def replication(self) -> int:
        """How many devices hold each tile (tiled: the product of the subgroups)."""
        return prod(self.tile_dims[self.data_rank:]) if self.kind == "tiled" else 0

    def assignment(self) -> np.ndarray:
        """The grid as a numpy array of device ids (tiled only)."""
        return np.array(self.devices, dtype=np.int64).reshape(self.tile_dims)

    def tile_shape(self, dims) -> tuple[int, ...]:
        """The dims of one (padded) tile of an array of `dims`."""
        counts = self.tile_counts(len(dims))
        return tuple(-(-int(n) // t) for n, t in zip(dims, counts))

    def tile_index(self, device: int) -> tuple[int, ...] | None:
        """The grid position (data dims only) of the tile `device` holds; None if it
        holds none. Replicated: all zeros."""
        if self.kind == "tiled":
            where = np.argwhere(self.assignment() == device)
            if len(where) == 0:
                return None
            return tuple(int(i) for i in where[0][:self.data_rank])
        if self.kind == "maximal" and device != self.device:
            return None
        return ()

    def tile_offsets(self, dims, device: int) -> tuple[int, ...]:
        """Where `device`'s tile starts in an array of `dims` (padded-tile units)."""
        index = self.tile_index(device)
        if not index:
            return (0,) * len(dims)
        return tuple(i * t for i, t in zip(index, self.tile_shape(dims)))

    def tile_limits(self, dims, device: int) -> tuple[int, ...]:
        """Where `device`'s tile ends (exclusive), clipped to the real dims."""
        return tuple(min(int(n), o + t) for n, o, t in
                     zip(dims, self.tile_offsets(dims, device), self.tile_shape(dims)))

    def devices_of_tile(self, index) -> tuple[int, ...]:
        """The devices that hold the tile at grid position `index` (tiled only)."""
        a = self.assignment()
        return tuple(int(d) for d in a[tuple(index)].ravel())

    def device_set(self) -> frozenset[int]:
        if self.kind == "tiled":
            return frozenset(self.devices)
        if self.kind == "maximal":
            return frozenset({self.device})
        return frozenset()

    def element(self, i: int) -> "HloSharding":
        """Tuple element i; a non-tuple sharding applies to every element."""
        return self.elements[i] if self.kind == "tuple" else self

    # --- checks -----------------------------------------------------------------------
    def validate(self, shape, num_devices: int | None = None) -> None:
        """ShardingError unless this sharding fits `shape` (a Shape) and the devices."""
        if self.kind == "tuple":
            if not shape.is_tuple:
                raise ShardingError(f"tuple sharding on the non-tuple shape {shape}")
            if len(self.elements) != len(shape.tuple_shapes):
                raise ShardingError(f"tuple sharding has {len(self.elements)} elements, "
                                    f"the shape {shape} has {len(shape.tuple_shapes)}")
            for e, s in zip(self.elements, shape.tuple_shapes):
                e.validate(s, num_devices)
            return
        if shape.is_tuple:
            # a single sharding on a tuple applies to every element
            for s in shape.tuple_shapes:
                self.validate(s, num_devices)
            return
        if self.kind == "maximal":
            if num_devices is not None and not 0 <= self.device < num_devices:
                raise ShardingError(f"maximal device={self.device} is out of range for "
                                    f"{num_devices} devices")
        if self.kind != "tiled":
            return
        if self.data_rank != len(shape.dims):
            raise ShardingError(f"sharding {self} splits {self.data_rank} dimensions, "
                                f"the shape {shape} has {len(shape.dims)}")
        if len(set(self.devices)) != len(self.devices):
            raise ShardingError(f"sharding {self} names a device twice")
        if num_devices is not None:
            if len(self.devices) != num_devices:
                raise ShardingError(f"sharding {self} has {len(self.devices)} devices, "
                                    f"the module runs on {num_devices}")
            if any(not 0 <= d < num_devices for d in self.devices):
                raise ShardingError(f"sharding {self} names a device out of range for "
                                    f"{num_devices} devices")

    # --- text ---------------------------------------------------------------------------
    def to_text(self) -> str:
        return self.text or self.canonical_text()

    def canonical_text(self) -> str:
        if self.kind == "tuple":
            return "{" + ", ".join(e.to_text() for e in self.elements) + "}"
        if self.kind == "maximal":
            body = f"maximal device={self.device}"
        elif self.kind == "tiled":
            dims = ",".join(map(str, self.tile_dims))
            if self.devices == tuple(range(len(self.devices))):
                body = f"devices=[{dims}]<=[{len(self.devices)}]"
            else:
                body = f"devices=[{dims}]" + ",".join(map(str, self.devices))
            if self.replicate_on_last_tile_dim:
                body += " last_tile_dim_replicate"
            elif self.subgroups:
                body += " last_tile_dims={" + ", ".join(self.subgroups) + "}"
        else:
            body = self.kind
        if self.metadata:
            body += f" metadata={self.metadata}"
        return "{" + body + "}"

    def __str__(self) -> str:
        return self.to_text()


# --- parsing the classic form ---------------------------------------------------------------

_INTS = r"\s*(?:\d+\s*(?:,\s*\d+\s*)*)?"
_DEVICES_RE = re.compile(rf"devices=\[({_INTS})\]\s*")
_IOTA_RE = re.compile(rf"<=\s*\[({_INTS})\]\s*(?:T\(({_INTS})\))?\s*")
_LIST_RE = re.compile(r"\d+(?:\s*,\s*\d+)*\s*")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def iota_devices(dims, reshape, perm=None) -> np.ndarray:
    """`<=[reshape]T(perm)` read as an array of `dims` (XLA's iota tile assignment)."""
    n = prod(reshape)
    if n > MAX_DEVICES:
        raise ShardingError(f"iota of {n} devices is more than {MAX_DEVICES}")
    a = np.arange(n, dtype=np.int64).reshape(reshape)
    if perm is not None:
        if sorted(perm) != list(range(len(reshape))):
            raise ShardingError(f"T({','.join(map(str, perm))}) is not a permutation of "
                                f"{len(reshape)} dimensions")
        a = a.transpose(perm)
    if prod(dims) != n:
        raise ShardingError(f"devices=[{','.join(map(str, dims))}] needs {prod(dims)} "
                            f"devices, the iota gives {n}")
    return a.reshape(dims)


def _match_brace(text: str, start: int) -> int:
    """Index just past the brace group opening at text[start], strings respected."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ShardingError(f"unbalanced braces in sharding {text!r}")


def _split_top(text: str) -> list[str]:
    """The comma-separated brace groups of a tuple sharding's inside."""
    parts, i, n = [], 0, len(text)
    while i < n:
        if text[i] in " ,\n\t":
            i += 1
            continue
        if text[i] != "{":
            raise ShardingError(f"a tuple sharding holds brace groups, got {text[i:]!r}")
        j = _match_brace(text, i)
        parts.append(text[i:j])
        i = j
    return parts


def parse_sharding(text: str) -> HloSharding:
    """The sharding spelled `text` (with its braces); ShardingError if malformed."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ShardingError(f"a sharding is written in braces, got {text!r}")
    if _match_brace(text, 0) != len(text):
        raise ShardingError(f"unbalanced braces in sharding {text!r}")
    inner = text[1:-1].strip()
    if inner == "" or inner.startswith("{"):
        return HloSharding("tuple", elements=tuple(parse_sharding(p) for p in _split_top(inner)),
                           text=text)
    metadata = ""
    m_at = inner.find("metadata={")
    if m_at >= 0:
        end = _match_brace(inner, m_at + len("metadata="))
        metadata = inner[m_at + len("metadata="):end]
        inner = (inner[:m_at] + inner[end:]).strip()
    inner = re.sub(r"\s*\b(shard_as|shard_like)\s+\d+\s*", " ", inner).strip()
    if inner in ("replicated", "manual", "unknown"):
        return HloSharding(inner, metadata=metadata, text=text)
    m = re.fullmatch(r"maximal\s+device\s*=\s*(\d+)", inner)
    if m:
        return HloSharding("maximal", device=int(m.group(1)), metadata=metadata, text=text)
    m = _DEVICES_RE.match(inner)
    if not m:
        raise ShardingError(f"sharding must be {{replicated}}, {{maximal device=N}}, {{manual}}, "
                            f"{{devices=[...]...}} or a tuple of them, got {text!r}")
    dims = _ints(m.group(1))
    if not dims or any(d < 1 for d in dims):
        raise ShardingError(f"devices=[...] needs positive grid sizes, got {text!r}")
    if prod(dims) > MAX_DEVICES:
        raise ShardingError(f"devices=[...] asks for {prod(dims)} devices, more than {MAX_DEVICES}")
    rest = inner[m.end():]
    im = _IOTA_RE.match(rest)
    if im:
        perm = _ints(im.group(2)) if im.group(2) is not None else None
        reshape = _ints(im.group(1))
        if perm is not None and len(perm) != len(reshape):
            raise ShardingError(f"T(...) must permute the {len(reshape)} iota dimensions in {text!r}")
        a = iota_devices(dims, reshape, perm)
        rest = rest[im.end():]
    else:
        lm = _LIST_RE.match(rest)
        if not lm:
            raise ShardingError(f"devices=[...] must be followed by a device list or <=[...], "
                                f"got {text!r}")
        ids = _ints(lm.group(0))
        if len(ids) != prod(dims):
            raise ShardingError(f"devices=[{','.join(map(str, dims))}] needs {prod(dims)} device "
                                f"ids, {len(ids)} given in {text!r}")
        a = np.array(ids, dtype=np.int64).reshape(dims)
        rest = rest[lm.end():]
    rest = rest.strip()
    subgroups: tuple[str, ...] = ()
    if rest == "last_tile_dim_replicate":
        subgroups = ("replicated",)
    elif rest.startswith("last_tile_dims"):
        lm = re.fullmatch(r"last_tile_dims\s*=\s*\{([^{}]*)\}", rest)
        kinds = tuple(k.strip() for k in lm.group(1).split(",")) if lm else ()
        if not kinds or any(k not in ("manual", "replicated") for k in kinds):
            raise ShardingError(f"last_tile_dims must list manual/replicated, got {text!r}")
        subgroups = kinds
    elif rest:
        raise ShardingError(f"unexpected {rest!r} in sharding {text!r}")
    if len(subgroups) > len(dims):
        raise ShardingError(f"{len(subgroups)} trailing grid dimensions but the grid has "
                            f"{len(dims)} in {text!r}")
    return HloSharding("tiled", tuple(dims), tuple(int(d) for d in a.ravel()), subgroups,
                       metadata=metadata, text=text)


# --- Shardy (sdy) ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SdyMesh:
    axes: tuple[tuple[str, int], ...]
    device_ids: tuple[int, ...] | None = None

    def size(self) -> int:
        return prod(s for _, s in self.axes)

    def devices(self) -> np.ndarray:
        dims = [s for _, s in self.axes]
        n = prod(dims)
        ids = np.arange(n) if self.device_ids is None else np.array(self.device_ids)
        if len(ids) != n:
            raise ShardingError(f"sdy mesh device_ids has {len(ids)} ids for {n} devices")
        return ids.reshape(dims) if dims else ids.reshape(())


_SDY_AXIS_RE = re.compile(r'\s*"([^"]*)"\s*=\s*(\d+)\s*')


def parse_sdy_mesh(text: str) -> SdyMesh:
    """`#sdy.mesh<["x"=2, "y"=2]>` / `<["x"=2], device_ids=[1,0]>` (the `#sdy.mesh`
    prefix optional)."""
    t = text.strip()
    t = t[len("#sdy.mesh"):].strip() if t.startswith("#sdy.mesh") else t
    m = re.fullmatch(r"<\s*\[([^\]]*)\]\s*(?:,\s*device_ids\s*=\s*\[([^\]]*)\])?\s*>", t)
    if not m:
        raise ShardingError(f"sdy mesh must look like #sdy.mesh<[\"x\"=2]>, got {text!r}")
    axes = []
    for part in (p for p in m.group(1).split(",") if p.strip()):
        am = _SDY_AXIS_RE.fullmatch(part)
        if not am:
            raise ShardingError(f"bad sdy mesh axis {part.strip()!r} in {text!r}")
        axes.append((am.group(1), int(am.group(2))))
    ids = tuple(_ints(m.group(2))) if m.group(2) is not None else None
    mesh = SdyMesh(tuple(axes), ids)
    mesh.devices()
    return mesh


def parse_sdy_meshes(text: str) -> dict[str, SdyMesh]:
    """`{mesh = #sdy.mesh<[...]>, other = #sdy.mesh<[...]>}` (xla.sdy.meshes), the value
    possibly a quoted, escaped string."""
    t = _unquote(text.strip())
    if t.startswith("{") and t.endswith("}"):
        t = t[1:-1]
    meshes = {}
    for m in re.finditer(r'\s*"?([A-Za-z_][\w.\-]*)"?\s*=\s*(?:"?)(#sdy\.mesh<[^>]*>)', t):
        meshes[m.group(1)] = parse_sdy_mesh(m.group(2))
    return meshes


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            return json.loads(text)
        except ValueError:
            raise ShardingError(f"bad string {text!r}") from None
    return text


_SDY_REF_RE = re.compile(r'\s*"([^"]*)"\s*(?::\s*\((\d+)\)\s*(\d+))?\s*')


def parse_sdy_sharding(text: str, meshes: dict[str, SdyMesh], rank: int | None = None
                       ) -> HloSharding:
    """`#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}>` (or an inline
    `<mesh<[...]>, ...>`, or a `#sdy.sharding_per_value<[<...>, ...]>` -> a tuple)."""
    t = _unquote(text.strip())
    if t.startswith("#sdy.sharding_per_value"):
        inner = t[len("#sdy.sharding_per_value"):].strip()
        m = re.fullmatch(r"<\s*\[(.*)\]\s*>", inner, re.S)
        if not m:
            raise ShardingError(f"bad sdy sharding_per_value {text!r}")
        parts = _split_angle(m.group(1))
        shardings = [_sdy_one(p, meshes) for p in parts]
        return shardings[0] if len(shardings) == 1 else HloSharding.tuple_of(shardings)
    if t.startswith("#sdy.sharding"):
        t = t[len("#sdy.sharding"):].strip()
    return _sdy_one(t, meshes)


def _split_angle(text: str) -> list[str]:
    parts, depth, start = [], 0, None
    for i, c in enumerate(text):
        if c == "<":
            if depth == 0:
                start = i
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                parts.append(text[start:i + 1])
    return parts


def _sdy_one(text: str, meshes: dict[str, SdyMesh]) -> HloSharding:
    m = re.fullmatch(r'<\s*(@[\w.\-]+|mesh\s*<[^>]*>)\s*,\s*\[(.*?)\]\s*'
                     r'(?:,\s*replicated\s*=\s*\{([^}]*)\}\s*)?'
                     r'(?:,\s*unreduced\s*=\s*\{([^}]*)\}\s*)?>', text.strip(), re.S)
    if not m:
        raise ShardingError(f"sdy sharding must look like <@mesh, [{{\"x\"}}, {{}}]>, got {text!r}")
    ref = m.group(1)
    if ref.startswith("@"):
        if ref[1:] not in meshes:
            raise ShardingError(f"sdy sharding names the mesh {ref} the module does not define")
        mesh = meshes[ref[1:]]
    else:
        mesh = parse_sdy_mesh("#sdy." + ref.replace(" ", ""))
    dims_text = re.findall(r"\{([^}]*)\}(?:p\d+)?", m.group(2))
    if not mesh.axes:
        # a maximal mesh: `#sdy.mesh<[], device_ids=[k]>`
        ids = mesh.devices().ravel()
        return HloSharding.maximal(int(ids[0])) if len(ids) == 1 else HloSharding.replicate()
    # split mesh axes into the pieces sub-axes refer to: name -> list of piece sizes
    sizes = dict(mesh.axes)
    used: list[list[tuple[str, int, int]]] = []     # per dim: (axis, pre, size)
    for d in dims_text:
        refs = []
        for part in (p for p in d.split(",") if p.strip() and p.strip() != "?"):
            rm = _SDY_REF_RE.fullmatch(part)
            if not rm or rm.group(1) not in sizes:
                raise ShardingError(f"sdy sharding names an unknown axis {part.strip()!r} in {text!r}")
            name = rm.group(1)
            if rm.group(2) is not None:
                refs.append((name, int(rm.group(2)), int(rm.group(3))))
            else:
                refs.append((name, 1, sizes[name]))
        used.append(refs)
    # every axis is cut at the boundaries its sub-axes mention
    cuts: dict[str, set[int]] = {n: {1, s} for n, s in mesh.axes}
    for refs in used:
        for name, pre, size in refs:
            if sizes[name] % (pre * size):
                raise ShardingError(f"sub-axis {name}:({pre}){size} does not divide the axis")
            cuts[name] |= {pre, pre * size}
    pieces: list[tuple[str, int, int]] = []          # (axis, pre, size), major first
    for name, s in mesh.axes:
        points = sorted(cuts[name])
        for a, b in zip(points, points[1:]):
            if b % a:
                raise ShardingError(f"sub-axes of {name} overlap in {text!r}")
            pieces.append((name, a, b // a))
    grid = mesh.devices().reshape([p[2] for p in pieces])

    def piece_indices(name, pre, size):
        idx = [i for i, p in enumerate(pieces) if p[0] == name and pre <= p[1] < pre * size]
        if not idx or prod(pieces[i][2] for i in idx) != size:
            raise ShardingError(f"sub-axis {name}:({pre}){size} does not fit the mesh")
        return idx

    order, tile_dims = [], []
    for refs in used:
        count = 1
        for r in refs:
            for i in piece_indices(*r):
                if i in order:
                    raise ShardingError(f"sdy sharding uses a mesh axis twice in {text!r}")
                order.append(i)
                count *= pieces[i][2]
        tile_dims.append(count)
    rest = [i for i in range(len(pieces)) if i not in order]
    rep = prod(pieces[i][2] for i in rest)
    a = grid.transpose(order + rest).reshape(tile_dims + [rep])
    return HloSharding.tiled(a, replicate_last=True)


def parse_frontend_attributes(text: str) -> dict[str, str]:
    """`{key="value", other=bare}` -> {key: value} (strings unescaped)."""
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        return {}
    t = t[1:-1]
    out, i, n = {}, 0, len(t)
    while i < n:
        while i < n and t[i] in " ,\n\t":
            i += 1
        m = re.compile(r"([\w.\-]+)\s*=\s*").match(t, i)
        if not m:
            break
        key, i = m.group(1), m.end()
        if i < n and t[i] == '"':
            j = i + 1
            while j < n and t[j] != '"':
                j += 2 if t[j] == "\\" else 1
            out[key] = _unquote(t[i:j + 1])
            i = j + 1
        elif i < n and t[i] == "{":
            j = _match_brace(t, i)
            out[key] = t[i:j]
            i = j
        else:
            j = i
            while j < n and t[j] != ",":
                j += 1
            out[key] = t[i:j].strip()
            i = j
    return out


def sdy_meshes_of(config: dict) -> dict[str, SdyMesh]:
    """The meshes a module header's frontend_attributes define (xla.sdy.meshes)."""
    fa = config.get("frontend_attributes")
    if not fa:
        return {}
    attrs = parse_frontend_attributes(str(fa))
    return parse_sdy_meshes(attrs["xla.sdy.meshes"]) if "xla.sdy.meshes" in attrs else {}


def sdy_sharding_of(instr, meshes: dict[str, SdyMesh]) -> HloSharding | None:
    """The Shardy sharding in `instr`'s frontend_attributes (xla.sdy.sharding), or None."""
    fa = instr.attrs.get("frontend_attributes")
    if fa is None:
        return None
    text = getattr(fa, "text", fa)
    attrs = parse_frontend_attributes(str(text))
    if "xla.sdy.sharding" not in attrs:
        return None
    return parse_sdy_sharding(attrs["xla.sdy.sharding"], meshes)
