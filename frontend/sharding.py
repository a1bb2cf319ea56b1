"""Mesh, PartitionSpec and sharded jit_compile (GSPMD-style tensor parallelism).

    from xlapy import distribute, jit_compile, ops
    from xlapy.frontend.distribute import Mesh, PartitionSpec as P

    mesh = Mesh(np.arange(4).reshape(2, 2), ("data", "model"))   # mesh.shape {"data": 2, "model": 2}

    @functools.partial(jit_compile, mesh=mesh, in_shardings=(P("data", None), P(None, "model")),
                       out_shardings=P("data", "model"))
    def f(x, w):
        h = ops.relu(x @ w)
        return ops.with_sharding_constraint(h, P("data", None))   # an annotation in the trace

    f(x, w)                      # whole numpy arrays in, the whole result out (gathered)
    f.lower(x, w).as_hlo_text()  # the annotated module (sharding= on parameters and copies)

A `PartitionSpec` names, for each dimension of an array, the mesh axis (or tuple of
axes, major first) that splits it, or None (not split); missing trailing entries are
None, and mesh axes a spec does not use replicate the tiles over them. It becomes an
HLO sharding (`devices=[...] ... last_tile_dim_replicate`) over the mesh's device ids.

`in_shardings` / `out_shardings` follow JAX's pytree-prefix rule: one entry per
argument (a spec or None for every leaf of that argument, or a tree of them in the
argument's structure), or one spec for everything; None means replicated. Without
`out_shardings` the partitioner's propagation chooses. The function is traced as
jit_compile traces, the parameters carry their shardings and the outputs pass through
`with_sharding_constraint`; the module then runs `sharding-propagation` and
`spmd-partitioner` (one program per device, num_partitions = mesh.size) and compiles
for mesh.size devices (CompileOptions(num_devices=N)): in this process (a thread per
device), or under `mpirun` with one rank per device (world size == mesh.size) as
distributed="mpi", where every rank passes the whole arrays and gets the whole results.
`return_shards=True` returns, at every output leaf, the list of each device's piece
(its tile without padding; under MPI only this rank's entry, the others None).

`ShardedProgram` is the machinery for any annotated HLO module (hlo-opt --run
--devices N uses it): whole arrays in, each device's (padded) tile cut per the
parameter's sharding, whole arrays out, reassembled from the tiles per the result's.
"""
from __future__ import annotations

import functools
import os
import threading
from math import prod

import numpy as np

from ..hlo import HloSharding

from . import pytree
from .autodiff.registry import register_gradient
from .ops.core import apply, to_tensor
from .registry import XlaOpKernel, register_xla_op
from .signature import is_number_list

__all__ = ["Mesh", "PartitionSpec", "with_sharding_constraint", "ShardedFunction",
           "ShardedProgram", "spec_to_sharding"]


# --- Mesh and PartitionSpec ---------------------------------------------------------------

class Mesh:
    """A named grid of device ids: `Mesh(np.arange(4).reshape(2, 2), ("data", "model"))`.

    `devices` holds every id 0..size-1 once (in-process devices or MPI ranks);
    `shape` maps axis names to sizes in order; `with mesh:` makes it the mesh of
    `with_sharding_constraint` outside a sharded jit_compile."""

    def __init__(self, devices, axis_names):
        a = np.asarray(devices)
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        names = tuple(axis_names)
        if a.dtype.kind not in "iu":
            raise TypeError(f"Mesh: devices must be integer device ids, got {a.dtype}")
        if a.ndim != len(names):
            raise ValueError(f"Mesh: devices has {a.ndim} dimensions but {len(names)} axis "
                             f"names {names}")
        if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
            raise ValueError(f"Mesh: axis names must be distinct non-empty strings, got {names}")
        if sorted(a.ravel().tolist()) != list(range(a.size)):
            raise ValueError(f"Mesh: devices must hold each id 0..{a.size - 1} once, "
                             f"got {a.ravel().tolist()}")
        self.devices = a.astype(np.int64)
        self.axis_names = names

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self) -> int:
        return int(self.devices.size)

    def __enter__(self):
        _mesh_stack().append(self)
        return self

    def __exit__(self, *exc):
        _mesh_stack().pop()

    def __eq__(self, other):
        return isinstance(other, Mesh) and self.axis_names == other.axis_names \
            and np.array_equal(self.devices, other.devices)

    def __hash__(self):
        return hash((self.axis_names, self.devices.tobytes(), self.devices.shape))

    def __repr__(self) -> str:
        axes = ", ".join(f"{k}={v}" for k, v in self.shape.items())
        return f"Mesh({axes}; devices={self.devices.tolist()})"


class PartitionSpec:
    """Per array dimension: a mesh axis name, a tuple of names (major first), or None."""

    def __init__(self, *partitions):
        parts = []
        for p in partitions:
            if p is None or isinstance(p, str):
                parts.append(p)
            elif isinstance(p, (tuple, list)) and all(isinstance(n, str) for n in p):
                parts.append(tuple(p) if len(p) != 1 else p[0])
            else:
                raise TypeError(f"PartitionSpec: each entry is a mesh axis name, a tuple of "
                                f"names or None, got {p!r}")
        self.partitions = tuple(parts)

    def __iter__(self):
        return iter(self.partitions)

    def __len__(self):
        return len(self.partitions)

    def __getitem__(self, i):
        return self.partitions[i]

    def __eq__(self, other):
        return isinstance(other, PartitionSpec) and self.partitions == other.partitions

    def __hash__(self):
        return hash(("PartitionSpec", self.partitions))

    def __repr__(self) -> str:
        return "PartitionSpec(" + ", ".join(map(repr, self.partitions)) + ")"


def spec_to_sharding(mesh: Mesh, spec, rank: int) -> HloSharding:
    """The HLO sharding of an array of `rank` dimensions laid out by `spec` on `mesh`."""
    if spec is None:
        return HloSharding.replicate()
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"expected a PartitionSpec or None, got {spec!r}")
    if len(spec) > rank:
        raise ValueError(f"{spec} has {len(spec)} entries for an array of rank {rank}")
    axes_of_dim, used = [], []
    for p in list(spec) + [None] * (rank - len(spec)):
        names = () if p is None else (p,) if isinstance(p, str) else p
        for n in names:
            if n not in mesh.axis_names:
                raise ValueError(f"{spec}: {n!r} is not an axis of the mesh "
                                 f"{mesh.axis_names}")
            if n in used:
                raise ValueError(f"{spec}: mesh axis {n!r} is used twice")
            used.append(n)
        axes_of_dim.append(names)
    rest = [n for n in mesh.axis_names if n not in used]
    order = [mesh.axis_names.index(n) for n in used + rest]
    grid = [prod(mesh.shape[n] for n in names) for names in axes_of_dim]
    assignment = mesh.devices.transpose(order).reshape(grid + [prod(mesh.shape[n] for n in rest)])
    return HloSharding.tiled(assignment, replicate_last=True)


_local = threading.local()


def _mesh_stack() -> list:
    if not hasattr(_local, "meshes"):
        _local.meshes = []
    return _local.meshes


def current_mesh() -> Mesh | None:
    stack = _mesh_stack()
    return stack[-1] if stack else None


# --- with_sharding_constraint: an annotated copy --------------------------------------------

@register_xla_op("ShardingConstraint")
class ShardingConstraint(XlaOpKernel):
    """A copy of the input carrying `sharding=` (what spmd-partitioner must give it)."""

    def compile(self, ctx):
        from ..hlo import parse_sharding
        x = ctx.input(0)
        ctx.set_output(0, ctx.builder.op("copy", [x],
                                         sharding=parse_sharding(ctx.attr("sharding"))))


@register_gradient("ShardingConstraint")
def _sharding_constraint_grad(node, grads):
    # the cotangent is laid out as the value (JAX does the same)
    return [apply("ShardingConstraint", [grads[0]], sharding=node.attrs["sharding"])]


def with_sharding_constraint(x, spec, mesh: Mesh | None = None):
    """`x` laid out by `spec` (a PartitionSpec, None = replicated, or an HloSharding)
    from here on: the partitioner reshards to it. The mesh is `mesh`, else the sharded
    jit_compile's (or a `with mesh:` block's)."""
    t = to_tensor(x)
    if isinstance(spec, HloSharding):
        sharding = spec
    else:
        mesh = mesh or current_mesh()
        if mesh is None:
            raise ValueError("with_sharding_constraint: no mesh (use it inside "
                             "jit_compile(..., mesh=...), in a `with mesh:` block, or pass mesh=)")
        sharding = spec_to_sharding(mesh, spec, len(t.shape))
    return apply("ShardingConstraint", [t], sharding=sharding.canonical_text())


# --- pytree prefixes -----------------------------------------------------------------------

def _is_spec(x) -> bool:
    return x is None or isinstance(x, (PartitionSpec, HloSharding))


def broadcast_prefix(prefix, tree, what: str) -> list:
    """One spec per leaf of `tree`: `prefix` is a spec (for the whole subtree) or a tree of
    the same structure whose nodes end in specs (JAX's prefix rule)."""
    out: list = []

    def walk(p, t, where):
        if _is_spec(p):
            leaves, _ = pytree.flatten(t, is_leaf=is_number_list)
            out.extend([p] * len(leaves))
            return
        if isinstance(p, (tuple, list)) and isinstance(t, (tuple, list)) \
                and len(p) == len(t):
            for i, (a, b) in enumerate(zip(p, t)):
                walk(a, b, f"{where}[{i}]")
            return
        if isinstance(p, dict) and isinstance(t, dict) and set(p) == set(t):
            for k in sorted(t):
                walk(p[k], t[k], f"{where}[{k!r}]")
            return
        raise ValueError(f"{what}{where}: {p!r} does not match the structure of the value "
                         f"({type(t).__name__}): give one PartitionSpec/None per leaf, or one "
                         "for the whole subtree")
    walk(prefix, tree, "")
    return out


# --- running an annotated module --------------------------------------------------------------

def _under_mpirun() -> int:
    """The MPI world size when this process was started by mpirun (else 0)."""
    for key in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        v = os.environ.get(key)
        if v and v.isdigit():
            return int(v)
    return 0


def split_whole(whole: np.ndarray, s: HloSharding | None, device: int) -> np.ndarray:
    """Device `device`'s piece of `whole` under `s`: its tile zero-padded to the tile
    shape (tiled), else the whole array."""
    whole = np.asarray(whole)
    if s is None or s.kind != "tiled" or whole.ndim == 0:
        return whole
    t, o = s.tile_shape(whole.shape), s.tile_offsets(whole.shape, device)
    piece = whole[tuple(slice(a, a + b) for a, b in zip(o, t))]
    if piece.shape != tuple(t):
        piece = np.pad(piece, [(0, b - c) for b, c in zip(t, piece.shape)])
    return np.ascontiguousarray(piece)


def _unpadded(piece, s: HloSharding | None, dims, device: int) -> np.ndarray:
    if s is None or s.kind != "tiled" or not dims:
        return piece
    o, lim = s.tile_offsets(dims, device), s.tile_limits(dims, device)
    return piece[tuple(slice(0, max(0, b - a)) for a, b in zip(o, lim))]


def assemble(pieces, s: HloSharding | None, dims, dtype) -> np.ndarray:
    """The whole array from each device's (padded) piece (None for devices not here)."""
    if s is None or s.kind != "tiled" or not dims:
        return next(p for p in pieces if p is not None)
    whole = np.empty(dims, dtype)
    for d, p in enumerate(pieces):
        if p is None:
            continue
        o, lim = s.tile_offsets(dims, d), s.tile_limits(dims, d)
        whole[tuple(slice(a, max(a, b)) for a, b in zip(o, lim))] = _unpadded(p, s, dims, d)
    return whole


class ShardedProgram:
    """An annotated (not yet partitioned) HLO module compiled for `num_devices`.

    The module is copied; sharding-propagation completes its annotations, the
    parameters' and results' shardings are noted, spmd-partitioner makes the
    per-device program and the CPU backend compiles it (`pipeline` as CompileOptions',
    `distributed` None or "mpi"). `run(*whole_arrays)` returns the whole results
    (flat list); `run_shards(*whole_arrays)` each result's per-device pieces."""

    def __init__(self, module, num_devices: int, *, pipeline="default", distributed=None,
                 backend: str = "cpu", intra_op_threads: int | None = None, max_isa=None,
                 compile_options: dict | None = None):
        from .. import passes
        from ..hlo import parse_module, verify
        from ..passes.spmd_partitioner import SpmdPartitioner
        m = parse_module(module.to_text()) if hasattr(module, "to_text") else parse_module(module)
        self.num_devices = int(num_devices)
        self.distributed = distributed
        self.backend = backend
        passes.make_pass("sharding-propagation").run(m)
        entry = m.entry
        self.param_shapes = [p.shape for p in entry.parameters]
        self.param_shardings = [_array_sharding(p) for p in entry.parameters]
        root = entry.root
        if root.shape.is_tuple:
            self.result_shapes = list(root.shape.tuple_shapes)
            s = root.attrs.get("sharding")
            if s is not None:
                self.result_shardings = [_usable(s.element(i))
                                         for i in range(len(self.result_shapes))]
            elif root.opcode == "tuple":     # the tuple carries its operands' shardings
                self.result_shardings = [_array_sharding(o) for o in root.operands]
            else:
                self.result_shardings = [None] * len(self.result_shapes)
        else:
            self.result_shapes = [root.shape]
            self.result_shardings = [_array_sharding(root)]
        for i, (shape, s) in enumerate(zip(self.param_shapes, self.param_shardings)):
            if s is not None:
                s.validate(shape, self.num_devices)
        SpmdPartitioner(num_partitions=self.num_devices).run(m)
        verify(m)
        self.module = m
        if backend == "interpreter":
            self.executable = None
            return
        from .. import backend_cpu
        options = {"num_devices": self.num_devices, "pipeline": pipeline, "max_isa": max_isa,
                   **{k: v for k, v in (compile_options or {}).items() if v is not None}}
        if distributed:
            options["distributed"] = distributed
        self.executable = _compile_with_threads(backend_cpu, m, options, intra_op_threads)

    @property
    def device(self):
        """This rank's device under MPI (else None)."""
        return None if self.executable is None else self.executable.device

    def _local_devices(self):
        return [self.device] if self.distributed else list(range(self.num_devices))

    def _device_pieces(self, arrays) -> list[list]:
        """Each device's outputs (padded tiles); None for devices another rank runs."""
        if len(arrays) != len(self.param_shapes):
            raise ValueError(f"the program takes {len(self.param_shapes)} arguments, "
                             f"got {len(arrays)}")
        arrays = [np.asarray(a) for a in arrays]
        for i, (a, shape) in enumerate(zip(arrays, self.param_shapes)):
            if tuple(a.shape) != tuple(shape.dims):
                raise ValueError(f"argument {i}: shape {a.shape}, the program takes "
                                 f"{tuple(shape.dims)}")
        args = {d: [split_whole(a, s, d) for a, s in zip(arrays, self.param_shardings)]
                for d in self._local_devices()}
        if self.executable is None:
            from ..hlo import evaluate_devices
            outs = evaluate_devices(self.module, [args[d] for d in range(self.num_devices)])
            return [list(o) for o in outs]
        if self.distributed:
            # (ascontiguousarray makes a 0-d array 1-d: keep the shape)
            mine = [np.ascontiguousarray(o).reshape(np.shape(o))
                    for o in self.executable.run(*args[self.device])]
            return self._gather_ranks(mine)
        return [list(o) for o in self.executable.run_devices([args[d] for d in
                                                              range(self.num_devices)])]

    def _gather_ranks(self, mine) -> list[list]:
        """Every rank's outputs for tiled results (all-gather of the padded tiles)."""
        comm = self.executable.communicator
        out = [[None] * len(mine) for _ in range(self.num_devices)]
        for j, (piece, s) in enumerate(zip(mine, self.result_shardings)):
            if s is None or s.kind != "tiled":
                for d in range(self.num_devices):
                    out[d][j] = piece
                continue
            recv = np.empty((self.num_devices,) + piece.shape, piece.dtype)
            comm.all_gather(self.device, None, piece, recv)
            for d in range(self.num_devices):
                out[d][j] = recv[d]
        return out

    def run(self, *arrays) -> list[np.ndarray]:
        pieces = self._device_pieces(arrays)
        return [assemble([p[j] for p in pieces], s, tuple(shape.dims),
                         next(p[j] for p in pieces if p is not None).dtype)
                for j, (shape, s) in enumerate(zip(self.result_shapes, self.result_shardings))]

    def run_shards(self, *arrays) -> list[list]:
        """Per result, each device's piece without padding (None for other ranks')."""
        pieces = self._device_pieces(arrays)
        local = set(self._local_devices())
        return [[_unpadded(pieces[d][j], s, tuple(shape.dims), d) if d in local else None
                 for d in range(self.num_devices)]
                for j, (shape, s) in enumerate(zip(self.result_shapes, self.result_shardings))]

    def as_hlo_text(self) -> str:
        """The per-device program (after the backend's pipeline when compiled)."""
        if self.executable is not None:
            return self.executable.as_hlo_text()
        return self.module.to_text()


def needs_partitioning(module) -> bool:
    """True for an annotated module that is not yet per-device: some entry instruction
    carries `sharding=` (or Shardy's xla.sdy.sharding) and nothing anywhere is a
    collective, replica-id / partition-id or a manual (shard_map) sharding."""
    from ..hlo.collectives import is_collective
    annotated = False
    for comp in module.computations:
        for instr in comp.instructions:
            if is_collective(instr) or instr.opcode in ("replica-id", "partition-id"):
                return False
            s = instr.attrs.get("sharding")
            if s is not None and ("manual" in (s.kind, *s.subgroups)
                                  or any(e.is_manual for e in s.elements)):
                return False
            if comp is module.entry and (s is not None or "xla.sdy.sharding" in
                                         str(instr.attrs.get("frontend_attributes", ""))):
                annotated = True
    return annotated


def device_count_of(module) -> int | None:
    """num_partitions when the module says it, else the most devices a sharding names."""
    if "num_partitions" in module.config:
        return module.num_partitions
    counts = [len(s.devices) for i in module.entry.instructions
              for s in _all_shardings(i.attrs.get("sharding")) if s.kind == "tiled"]
    return max(counts) if counts else None


def _all_shardings(s):
    if s is None:
        return []
    return [e for x in s.elements for e in _all_shardings(x)] if s.is_tuple else [s]


def _array_sharding(instr) -> HloSharding | None:
    s = instr.attrs.get("sharding")
    return _usable(s) if s is not None and not instr.shape.is_tuple else None


def _usable(s: HloSharding | None) -> HloSharding | None:
    """Only tiled shardings cut arrays; the partitioner treats the rest as replicated."""
    return s if s is not None and s.kind == "tiled" else None


def _compile_with_threads(backend_cpu, module, options, intra_op_threads):
    if intra_op_threads is None:
        return backend_cpu.compile(module, backend_cpu.CompileOptions(**options))
    from .. import runtime
    previous = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=intra_op_threads * (1 if options.get("distributed")
                                                           else options["num_devices"]))
    try:
        return backend_cpu.compile(module, backend_cpu.CompileOptions(**options))
    finally:
        runtime.configure(intra_op_threads=previous)


# --- jit_compile(fn, mesh=...) --------------------------------------------------------------

class _Unspecified:
    def __repr__(self) -> str:
        return "UNSPECIFIED"


UNSPECIFIED = _Unspecified()     # no out_shardings: propagation chooses


class ShardedFunction:
    """jit_compile(fn, mesh=..., in_shardings=..., out_shardings=...): see the module doc."""

    def __init__(self, fn, mesh: Mesh, in_shardings=UNSPECIFIED, out_shardings=UNSPECIFIED, *,
                 return_shards: bool = False, distributed="auto", static_argnums=(),
                 pipeline="default", intra_op_threads=None, backend: str = "cpu",
                 name: str | None = None, max_isa: str | None = None):
        from .jit import JitFunction
        if not isinstance(mesh, Mesh):
            raise TypeError(f"jit_compile: mesh must be a distribute.Mesh, got {mesh!r}")
        if distributed not in ("auto", None, "mpi"):
            raise ValueError(f"jit_compile: distributed must be 'auto', None or 'mpi', "
                             f"got {distributed!r}")
        self.mesh = mesh
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self.return_shards = bool(return_shards)
        if distributed == "auto":
            distributed = "mpi" if mesh.size > 1 and _under_mpirun() == mesh.size else None
        self.distributed = distributed
        self.options = dict(pipeline=pipeline, intra_op_threads=intra_op_threads,
                            backend=backend, max_isa=max_isa)
        self.fn = fn

        @functools.wraps(fn)
        def annotated(*args, **kwargs):
            return self._annotated(*args, **kwargs)
        self._jit = JitFunction(annotated, static_argnums=static_argnums, pipeline=pipeline,
                                intra_op_threads=intra_op_threads, backend=backend, name=name,
                                max_isa=max_isa)
        functools.update_wrapper(self, fn)
        self._programs: dict = {}

    def _annotated(self, *args, **kwargs):
        with self.mesh:
            out = self.fn(*args, **kwargs)
        if self.out_shardings is UNSPECIFIED:
            return out
        leaves, tree = pytree.flatten(out)
        specs = broadcast_prefix(self.out_shardings, out, "out_shardings")
        return pytree.unflatten(tree, [with_sharding_constraint(x, s, self.mesh)
                                       for x, s in zip(leaves, specs)])

    # --- calling ----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        from .signature import make_signature
        sig = make_signature(self._jit.name, self._jit.static_argnums, args, kwargs)
        if sig is None:                   # inside another trace: inline, annotations kept
            return self._annotated(*args, **kwargs)
        lowered, program = self._program(sig, args, kwargs)
        if self.return_shards:
            return pytree.unflatten(lowered.out_tree, program.run_shards(*sig.arrays))
        return pytree.unflatten(lowered.out_tree, program.run(*sig.arrays))

    def lower(self, *args, **kwargs):
        """The Lowered of these arguments: as_hlo_text() shows the annotated module."""
        sig = self._jit.signature_of(args, kwargs)
        return self._lowered(sig, args, kwargs)

    def compile(self, *args, **kwargs) -> ShardedProgram:
        """The ShardedProgram (as_hlo_text(): the per-device program after passes)."""
        sig = self._jit.signature_of(args, kwargs)
        return self._program(sig, args, kwargs)[1]

    def _lowered(self, sig, args, kwargs):
        lowered = self._jit._lower(sig, args, kwargs)
        if not getattr(lowered, "_shardings_set", False):
            specs = self._leaf_specs(sig, args, kwargs)
            for p in lowered.module.entry.parameters:
                shape = p.shape
                spec = specs[p.parameter_number]
                try:
                    p.attrs["sharding"] = spec if isinstance(spec, HloSharding) else \
                        spec_to_sharding(self.mesh, spec, len(shape.dims))
                except (TypeError, ValueError) as e:
                    raise type(e)(f"{self._jit.name}: in_shardings of argument leaf "
                                  f"{p.parameter_number} (shape {list(shape.dims)}): {e}") \
                        from None
            lowered._shardings_set = True
        return lowered

    def _program(self, sig, args, kwargs):
        lowered = self._lowered(sig, args, kwargs)
        program = self._programs.get(sig.key)
        if program is None:
            program = self._programs[sig.key] = ShardedProgram(
                lowered.module, self.mesh.size, distributed=self.distributed,
                **self.options)
        return lowered, program

    def _leaf_specs(self, sig, args, kwargs) -> list:
        """One spec per flattened argument array (kwargs leaves replicated)."""
        static = {pos for pos, _ in sig.static}
        dyn = [a for i, a in enumerate(args) if i not in static]
        spec = self.in_shardings
        if spec is UNSPECIFIED:
            spec = None
        if _is_spec(spec):
            per_arg = [spec] * len(dyn)
        elif isinstance(spec, (tuple, list)):
            if len(spec) != len(args):
                raise ValueError(f"{self._jit.name}: in_shardings has {len(spec)} entries for "
                                 f"{len(args)} positional arguments")
            per_arg = [s for i, s in enumerate(spec) if i not in static]
        else:
            raise TypeError(f"{self._jit.name}: in_shardings must be a PartitionSpec, None or "
                            f"a tuple of them per argument, got {spec!r}")
        specs = []
        for i, (s, a) in enumerate(zip(per_arg, dyn)):
            specs.extend(broadcast_prefix(s, a, f"in_shardings[{i}]"))
        kw_leaves, _ = pytree.flatten(dict(kwargs), is_leaf=is_number_list)
        specs.extend([None] * len(kw_leaves))
        return specs

    def __repr__(self) -> str:
        return f"<jit_compile {self._jit.name} on {self.mesh!r}>"
