"""The SPMD partitioner's building blocks: local values, resharding, masks, device tables.

A `PVal` is a partitioned value: `instr` (in the per-device computation), the
`sharding` it has, the global `shape`. `Ctx.reshard_value(v, target)` returns a PVal
with the target sharding (see passes/spmd_partitioner.py for the strategies);
`Ctx.mask(v, dims, fill)` replaces the padding of a tiled value along `dims` with
`fill`; `Ctx.device_scalar(table)` is table[partition-id] as an s32 scalar.
`collective_bytes(module)` counts the bytes each device sends through collectives
(an estimate of the communication volume: all-reduce 2(g-1)/g of its buffer, all-gather
and all-to-all (g-1)/g of the result / operand, collective-permute its operand).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from ..hlo import HloComputation, HloInstruction, HloSharding, Shape, infer_shape
from ..hlo.dtypes import numpy_dtype
from ..hlo.ir import ReplicaGroups


@dataclass
class PVal:
    instr: HloInstruction
    sharding: HloSharding
    shape: Shape


def local_shape(shape: Shape, s: HloSharding) -> Shape:
    if shape.is_tuple:
        return Shape.tuple_of([local_shape(e, s.element(i)) for i, e in
                               enumerate(shape.tuple_shapes)])
    if s.kind != "tiled":
        return shape
    return shape.with_dims(s.tile_shape(shape.dims))


def grid(s: HloSharding, n: int) -> np.ndarray:
    """The devices of a tiled sharding as [data tiles..., replication] (always one
    trailing axis)."""
    a = s.assignment()
    rep = prod(a.shape[s.data_rank:])
    return a.reshape(list(a.shape[:s.data_rank]) + [rep])


def groups_along(s: HloSharding, dims) -> tuple[tuple[int, ...], ...]:
    """Groups of devices that differ only in their position along data dims `dims`,
    ordered by that position (row-major over `dims` as listed)."""
    a = grid(s, 0)
    others = [d for d in range(a.ndim) if d not in dims]
    t = a.transpose(others + list(dims))
    k = prod(a.shape[d] for d in dims)
    return tuple(tuple(int(x) for x in row) for row in t.reshape(-1, k))


_IDENTITIES = {"add": 0, "or": 0, "xor": 0, "multiply": 1, "and": 1,
               "maximum": "min", "minimum": "max"}


def is_identity_init(reducer: HloComputation, init: HloInstruction) -> bool:
    """The reducer is one binary op of its two parameters and `init` a constant equal to
    its identity (so partial reductions can be combined again)."""
    root = reducer.root
    if root.opcode not in _IDENTITIES or init.opcode != "constant" or init.literal is None:
        return False
    if sorted(o.opcode for o in root.operands) != ["parameter", "parameter"]:
        return False
    v = np.asarray(init.literal)
    ident = _IDENTITIES[root.opcode]
    dt = v.dtype
    if ident == "min":
        target = -np.inf if dt.kind == "f" else (np.iinfo(dt).min if dt.kind in "iu" else False)
    elif ident == "max":
        target = np.inf if dt.kind == "f" else (np.iinfo(dt).max if dt.kind in "iu" else True)
    else:
        target = ident
    return bool(np.all(v == target))


class Ctx:
    def __init__(self, module, n: int, comp: HloComputation, owner):
        self.module, self.n, self.comp, self.owner = module, n, comp, owner
        self.fallbacks: list[str] = []
        self._pid = None                # per computation: partition-id and its tables
        self._tables: dict[tuple, HloInstruction] = {}
        self._next_channel = [1 + max([i.attrs.get("channel_id", 0) for i in
                                       module.instructions()] + [0])]
        self._reducers: dict[str, HloComputation] = {}

    def child(self, comp: HloComputation) -> "Ctx":
        """A context that emits into `comp` (a called computation being partitioned),
        sharing channel ids, reducers and the fallback list with this one."""
        c = Ctx.__new__(Ctx)
        c.module, c.n, c.comp, c.owner = self.module, self.n, comp, self.owner
        c.fallbacks, c._next_channel, c._reducers = self.fallbacks, self._next_channel, \
            self._reducers
        c._pid, c._tables = None, {}
        return c

    # --- emitting -------------------------------------------------------------------
    def add(self, instr: HloInstruction) -> HloInstruction:
        if instr.name:
            instr.name = self.module.uniquify(instr.name)
        return self.comp.add_instruction(instr)

    def emit(self, opcode, operands, shape=None, **attrs) -> HloInstruction:
        operands = list(operands)
        inferred = infer_shape(opcode, [o.shape for o in operands], attrs, result_hint=shape)
        return self.add(HloInstruction(opcode, inferred, operands, attrs,
                                       name=self.module.uniquify(opcode)))

    def clone(self, instr, operands) -> HloInstruction:
        attrs = {k: v for k, v in instr.attrs.items() if k != "sharding"}
        literal = None if instr.literal is None else np.array(instr.literal, copy=True)
        return self.add(HloInstruction(instr.opcode, instr.shape, operands, attrs,
                                       name=instr.name, literal=literal,
                                       parameter_number=instr.parameter_number))

    def channel(self) -> int:
        c = self._next_channel[0]
        self._next_channel[0] += 1
        return c

    def constant(self, value, dtype: str) -> HloInstruction:
        arr = np.asarray(value, dtype=numpy_dtype(dtype))
        return self.add(HloInstruction("constant", Shape(dtype, tuple(arr.shape)), (),
                                       name=self.module.uniquify("constant"), literal=arr))

    def device_scalar(self, table) -> HloInstruction:
        """table[partition-id] (an s32 scalar)."""
        table = tuple(int(v) for v in table)
        if len(set(table)) == 1:
            return self.constant(table[0], "s32")
        if table in self._tables:
            return self._tables[table]
        if self._pid is None:
            pid = self.emit("partition-id", [])
            self._pid = self.emit("convert", [pid], Shape.scalar("s32"))
        t = self.constant(np.array(table, dtype=np.int32), "s32")
        ds = self.emit("dynamic-slice", [t, self._pid], dynamic_slice_sizes=(1,))
        r = self.emit("reshape", [ds], Shape.scalar("s32"))
        self._tables[table] = r
        return r

    def reducer(self, opcode: str, dtype: str) -> HloComputation:
        key = f"{opcode}.{dtype}"
        if key not in self._reducers:
            comp = HloComputation(self.module.uniquify(f"spmd_{opcode}_{dtype}"))
            s = Shape.scalar(dtype)
            a = comp.add_instruction(HloInstruction("parameter", s, name=self.module.uniquify("a"), parameter_number=0))
            b = comp.add_instruction(HloInstruction("parameter", s, name=self.module.uniquify("b"), parameter_number=1))
            comp.set_root(comp.add_instruction(HloInstruction(opcode, s, [a, b], name=self.module.uniquify("r"))))
            self.module.add_computation(comp, before=self.module.entry)
            self._reducers[key] = comp
        return self._reducers[key]

    # --- masks ------------------------------------------------------------------------
    def mask(self, v: PVal, dims, fill: HloInstruction) -> HloInstruction:
        """v's tile with the elements past the real size along `dims` set to `fill` (a
        scalar); dims that split evenly need nothing."""
        s, shape = v.sharding, v.shape
        tile = s.tile_shape(shape.dims)
        counts = s.tile_counts(len(shape.dims))
        uneven = [d for d in dims if tile[d] * counts[d] != shape.dims[d]]
        if not uneven:
            return v.instr
        local = v.instr.shape
        pred = None
        for d in uneven:
            offsets = [s.tile_offsets(shape.dims, dev)[d] for dev in range(self.n)]
            limit = [shape.dims[d] - o for o in offsets]
            lim = self.emit("broadcast", [self.device_scalar(limit)],
                            local.with_element_type("s32"), dimensions=())
            io = self.emit("iota", [], local.with_element_type("s32"), iota_dimension=d)
            ok = self.emit("compare", [io, lim], local.with_element_type("pred"), direction="LT")
            pred = ok if pred is None else self.emit("and", [pred, ok])
        f = self.emit("broadcast", [fill], local, dimensions=())
        return self.emit("select", [pred, v.instr, f])

    # --- resharding ---------------------------------------------------------------------
    def reshard_value(self, v: PVal, target: HloSharding) -> PVal:
        if target is None:
            return v
        if target.kind in ("maximal", "unknown"):
            target = HloSharding.replicate()
        if v.shape.is_tuple:
            if all(_same(v.sharding.element(k), target.element(k))
                   for k in range(len(v.shape.tuple_shapes))):
                return PVal(v.instr, target, v.shape)
            return self._reshard_tuple(v, target)
        if not v.shape.dims:
            target = HloSharding.replicate()
        src = v.sharding
        if src.kind in ("maximal", "unknown"):
            src = HloSharding.replicate()
        if src == target or (src.is_replicated and target.is_replicated) or \
                same_placement(src, target):
            return PVal(v.instr, target, v.shape)
        if src.is_replicated:
            return PVal(self._slice_to(v.instr, v.shape, target), target, v.shape)
        if target.is_replicated:
            return PVal(self._gather(v), target, v.shape)
        r = self._all_to_all(v, target)
        if r is None:
            r = self._permute(v, target)
        if r is None:
            full = self._gather(v)
            r = self._slice_to(full, v.shape, target)
        return PVal(r, target, v.shape)

    def _reshard_tuple(self, v: PVal, target: HloSharding) -> PVal:
        elems, shardings = [], []
        for k, es in enumerate(v.shape.tuple_shapes):
            src = v.sharding.element(k)
            g = self.emit("get-tuple-element", [v.instr], index=k)
            r = self.reshard_value(PVal(g, src, es), target.element(k))
            elems.append(r.instr)
            shardings.append(r.sharding)
        return PVal(self.emit("tuple", elems), HloSharding.tuple_of(shardings), v.shape)

    def _gather(self, v: PVal) -> HloInstruction:
        """The whole array on every device: one all-gather per split dimension."""
        s, dims = v.sharding, v.shape.dims
        x = v.instr
        counts = s.tile_counts(len(dims))
        for d, k in enumerate(counts):
            if k == 1:
                continue
            groups = groups_along(s, [d])
            shape = x.shape.with_dims(tuple(n * k if i == d else n
                                            for i, n in enumerate(x.shape.dims)))
            x = self.emit("all-gather", [x], shape, dimensions=(d,),
                          replica_groups=ReplicaGroups(groups), channel_id=self.channel(),
                          use_global_device_ids=True)
        if tuple(x.shape.dims) != tuple(dims):
            x = self.emit("slice", [x], x.shape.with_dims(dims), slice=tuple(
                _sd(0, n) for n in dims))
        return x

    def _slice_to(self, full: HloInstruction, shape: Shape, target: HloSharding) -> HloInstruction:
        """Each device's tile of a whole array (padded with zeros past the end)."""
        dims = shape.dims
        tile = target.tile_shape(dims)
        counts = target.tile_counts(len(dims))
        padded = tuple(t * k for t, k in zip(tile, counts))
        x = full
        if padded != tuple(dims):
            from ..hlo import PadDim
            zero = self.constant(np.zeros((), numpy_dtype(shape.element_type)), shape.element_type)
            x = self.emit("pad", [x, zero], full.shape.with_dims(padded), padding=tuple(
                PadDim(0, p - n) for n, p in zip(dims, padded)))
        starts = [self.device_scalar([target.tile_offsets(dims, dev)[d] for dev in range(self.n)])
                  for d in range(len(dims))]
        return self.emit("dynamic-slice", [x] + starts, full.shape.with_dims(tile),
                         dynamic_slice_sizes=tile)

    def _all_to_all(self, v: PVal, target: HloSharding):
        """A split that moves from dimension a to dimension b over the same devices (even
        sizes only): all-to-all."""
        s, dims = v.sharding, v.shape.dims
        if s.kind != "tiled" or target.kind != "tiled" or s.subgroups != target.subgroups:
            return None
        if s.devices != target.devices:
            return None
        sc, tc = s.tile_counts(len(dims)), target.tile_counts(len(dims))
        diff = [d for d in range(len(dims)) if sc[d] != tc[d]]
        if len(diff) != 2:
            return None
        a, b = (diff[0], diff[1]) if sc[diff[0]] > 1 else (diff[1], diff[0])
        k = sc[a]
        if not (sc[b] == 1 and tc[a] == 1 and tc[b] == k):
            return None
        if list(s.tile_dims) != [tc[d] if d not in (a, b) else s.tile_dims[d]
                                 for d in range(len(dims))] + list(s.tile_dims[len(dims):]):
            return None
        if dims[a] % k or dims[b] % k:
            return None
        # the two grids must list devices in the same order once a and b are swapped
        ga, gb = grid(s, 0), grid(target, 0)
        if not np.array_equal(np.moveaxis(ga, a, b).reshape(-1), gb.reshape(-1)) and \
                not np.array_equal(ga.reshape(-1), gb.reshape(-1)):
            return None
        if not np.array_equal(ga.reshape(-1), gb.reshape(-1)):
            return None
        groups = groups_along(s, [a])
        groups_t = groups_along(target, [b])
        if groups != groups_t:
            return None
        x = v.instr
        L = list(x.shape.dims)              # L[a] = A/k, L[b] = B
        split = L[:b] + [k, L[b] // k] + L[b + 1:]
        x = self.emit("reshape", [x], x.shape.with_dims(tuple(split)))
        perm = [b] + [i for i in range(len(split)) if i != b]
        x = self.emit("transpose", [x], x.shape.with_dims(tuple(split[p] for p in perm)),
                      dimensions=tuple(perm))
        x = self.emit("all-to-all", [x], dimensions=(0,), replica_groups=ReplicaGroups(groups),
                      channel_id=self.channel())
        # axis 0 now indexes the source member = the tile of dimension a; put it before a
        rest = [i for i in range(len(split)) if i != b]    # split axes after axis 0, in order
        a_pos = rest.index(a if a < b else a + 1) + 1
        order = list(range(1, len(perm)))
        order.insert(a_pos - 1, 0)
        x = self.emit("transpose", [x], x.shape.with_dims(tuple(x.shape.dims[p] for p in order)),
                      dimensions=tuple(order))
        out = list(dims)
        out = [dims[d] if d == a else (dims[d] // k if d == b else L[d]) for d in range(len(dims))]
        return self.emit("reshape", [x], x.shape.with_dims(tuple(out)))

    def _permute(self, v: PVal, target: HloSharding):
        """The same grid on other devices: collective-permute (one per round when a
        replicated tile must reach several devices)."""
        s = v.sharding
        if s.kind != "tiled" or target.kind != "tiled" or s.tile_dims != target.tile_dims or \
                s.subgroups != target.subgroups:
            return None
        ga, gb = grid(s, 0), grid(target, 0)
        pairs = []
        for pos in np.ndindex(*gb.shape):
            pairs.append((int(ga[pos]), int(gb[pos])))
        pairs = [(a, b) for a, b in pairs]
        return self.emit("collective-permute", [v.instr], source_target_pairs=tuple(pairs),
                         channel_id=self.channel())


def same_placement(a: HloSharding, b: HloSharding) -> bool:
    """Two tiled shardings that give every device the same tile, written with the
    devices of a replicated subgroup in another order."""
    if a.kind != "tiled" or b.kind != "tiled" or a.data_tile_dims != b.data_tile_dims:
        return False
    if a.subgroups != b.subgroups or any(k != "replicated" for k in a.subgroups):
        return False
    if a.device_set() != b.device_set() or a.replication != b.replication:
        return False
    return all(a.tile_index(d) == b.tile_index(d) for d in a.device_set())


def _same(a: HloSharding, b: HloSharding) -> bool:
    """The same placement (maximal and unknown are held replicated)."""
    def norm(s):
        return HloSharding.replicate() if s.kind in ("maximal", "unknown") else s
    a, b = norm(a), norm(b)
    if a.is_tuple or b.is_tuple:
        return a.is_tuple and b.is_tuple and len(a.elements) == len(b.elements) and \
            all(_same(x, y) for x, y in zip(a.elements, b.elements))
    return a == b


def _sd(start, limit):
    from ..hlo import SliceDim
    return SliceDim(start, limit, 1)


# --- communication volume --------------------------------------------------------------------

def collective_bytes(module) -> int:
    """Bytes one device sends through the collectives of `module` (summed over every
    collective executed once; loops counted once)."""
    from ..hlo import collectives
    R, P = module.replica_count, module.num_partitions
    total = 0
    for instr in module.instructions():
        code = instr.opcode.removesuffix("-start")
        if code not in ("all-reduce", "all-gather", "all-to-all", "collective-permute",
                        "reduce-scatter", "collective-broadcast"):
            continue
        nbytes = sum(_nbytes(o.shape) for o in instr.operands)
        if code == "collective-permute":
            total += nbytes
            continue
        try:
            groups = collectives.device_groups(instr, R, P)
            g = max(len(x) for x in groups)
        except Exception:
            g = R * P
        if g <= 1:
            continue
        if code == "all-reduce":
            total += nbytes * 2 * (g - 1) // g
        elif code == "all-gather":
            total += nbytes * (g - 1)
        else:
            total += nbytes * (g - 1) // g
    return total


def _nbytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_nbytes(s) for s in shape.tuple_shapes)
    return prod(shape.dims) * np.dtype(numpy_dtype(shape.element_type)).itemsize
