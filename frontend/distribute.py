"""frontend.distribute: tf.distribute-style data parallelism over replicas.

    from xlapy.frontend import distribute, ops

    strategy = distribute.MirroredStrategy(num_replicas=2)   # 2 devices in this process
    # strategy = distribute.MultiWorkerMirroredStrategy()    # one replica per MPI rank

    def step(params, x, y):                                  # runs on every replica
        loss, grads = distribute.value_and_grad(loss_fn)(params, x, y)  # grads: MEAN over
        ctx = distribute.get_replica_context()                          # the replicas
        return {k: params[k] - 0.1 * grads[k] for k in params}, ctx.all_reduce("MEAN", loss)

    xs, ys = strategy.distribute_batch((x, y))      # PerReplica shards of axis 0
    params, loss = strategy.run(step, args=(params, xs, ys))
    strategy.reduce("MEAN", loss)                   # one numpy value

A strategy runs one SPMD program on `num_replicas_in_sync` replicas: `run` traces
`fn` once per argument signature (jit_compile, with the trace's replica count set,
so its collectives and the module's `replica_count` say N) and runs the compiled
module on every replica, through the CPU backend (`CompileOptions(num_devices=N)`,
`run_devices`; under MPI `distributed="mpi"` and each rank runs its device) or, with
`backend="interpreter"`, on the reference evaluator (`hlo.evaluate_devices`).

Values. An argument of `run` is a pytree whose leaves are arrays (the same value on
every replica) or `PerReplica` values (one value per local replica, e.g. from
`distribute_batch`). Every replica must get the same shapes and dtypes (one
program). `run` returns fn's output structure with a `PerReplica` at every leaf;
`experimental_local_results(v)` gives the tuple of local values. Under
MultiWorkerMirroredStrategy a process holds only its own replica's values
(`PerReplica` of one value); `reduce` brings in the others.

Inside fn, `get_replica_context()` gives the `ReplicaContext`:
`replica_id_in_sync_group` (a traced int32 scalar, HLO replica-id),
`num_replicas_in_sync`, and `all_reduce("SUM"|"MEAN", value)` for any pytree of
tensors (packed in buckets, bucketing.py). `value_and_grad` (and `grad`) here is
autodiff's, with the gradients all-reduced across the replicas in buckets whose
all-reduce-start is emitted as soon as the bucket's last gradient exists in the
backward pass (`bucket_bytes`, a strategy option like Horovod's fusion threshold).
Outside a strategy the replica context is the default one: one replica.
`frontend.ops.collective` has TensorFlow's collective ops for the same programs.

Options of both strategies: `backend` ("cpu" or "interpreter"), `pipeline` (as
jit_compile's), `intra_op_threads` (threads of each replica's kernel launches;
default: the runtime's threads shared between this process's replicas),
`bucket_bytes` (gradient and all_reduce buckets, bucketing.DEFAULT_BUCKET_BYTES),
`max_isa`. `run` keeps one trace cache per function object: pass the same
function each step (a new lambda each call traces and compiles again).

Model parallelism lives beside it: `Mesh` and `PartitionSpec` (frontend/sharding.py,
for `jit_compile(fn, mesh=..., in_shardings=..., out_shardings=...)` and
`ops.with_sharding_constraint`), and pipeline parallelism: `pipeline(stages,
num_microbatches, schedule="gpipe"|"1f1b")` (frontend/pipeline.py).
"""
from __future__ import annotations

import functools
import numbers
import threading

import numpy as np

from . import ops, pytree
from .autodiff.api import _value_and_grad_traced
from .bucketing import DEFAULT_BUCKET_BYTES, REDUCE_OPS, BucketedAllReduce, check_bucket_bytes
from .compiled import _compile_cpu, _run_pipeline, check_pipeline
from .jit import BACKENDS, JitFunction
from .ops import collective
from .pipeline import Pipeline, pipeline
from .sharding import Mesh, PartitionSpec
from .signature import is_number_list
from .trace import current_graph

__all__ = ["MirroredStrategy", "MultiWorkerMirroredStrategy", "Strategy", "PerReplica",
           "ReplicaContext", "ReduceOp", "get_replica_context", "value_and_grad", "grad",
           "Mesh", "PartitionSpec", "pipeline", "Pipeline"]


class ReduceOp:
    """TF's names of the cross-replica reductions (plain strings work as well)."""
    SUM = "SUM"
    MEAN = "MEAN"


def _reduce_op(value, what: str) -> str:
    op = value.upper() if isinstance(value, str) else value
    if op not in REDUCE_OPS:
        raise ValueError(f"{what}: reduce_op must be 'SUM' or 'MEAN', got {value!r}")
    return op


class PerReplica:
    """One value per local replica (`values`, in replica order)."""

    def __init__(self, values):
        self.values = tuple(values)

    def __repr__(self) -> str:
        inner = ", ".join(_short(v) for v in self.values)
        return f"PerReplica({inner})"


def _short(value) -> str:
    if isinstance(value, np.ndarray) and value.size > 6:
        return f"<{value.dtype}{list(value.shape)}>"
    return repr(value)


# --- the replica context ---------------------------------------------------------------

class ReplicaContext:
    """What fn sees while a strategy traces it (one replica of N; all run the same code)."""

    def __init__(self, num_replicas: int, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                 strategy=None):
        self.num_replicas_in_sync = num_replicas
        self.bucket_bytes = bucket_bytes
        self.strategy = strategy

    @property
    def replica_id_in_sync_group(self):
        """This replica's id, 0..N-1: a traced int32 scalar (HLO replica-id)."""
        _require_trace("replica_id_in_sync_group")
        return collective.replica_id()

    def all_reduce(self, reduce_op, value, *, bucket_bytes: int | None = None):
        """SUM or MEAN of `value` (a pytree of tensors) over all replicas, same structure.

        The leaves are packed into buckets of `bucket_bytes` (default: the strategy's)
        and each bucket is one all-reduce; MEAN of integers gives float32 (ops.divide)."""
        op = _reduce_op(reduce_op, "all_reduce")
        _require_trace("all_reduce")
        size = self.bucket_bytes if bucket_bytes is None else \
            check_bucket_bytes(bucket_bytes, "all_reduce")
        leaves, tree = pytree.flatten(value, is_leaf=is_number_list)
        buckets = BucketedAllReduce(op, self.num_replicas_in_sync, size)
        return pytree.unflatten(tree, buckets.finish(leaves))

    def __repr__(self) -> str:
        return f"<ReplicaContext of {self.num_replicas_in_sync} replicas>"


_local = threading.local()


def _contexts() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def get_replica_context() -> ReplicaContext:
    """The replica context of the strategy tracing fn; the default (1 replica) elsewhere."""
    stack = _contexts()
    return stack[-1] if stack else ReplicaContext(1)


def _require_trace(what: str) -> None:
    if current_graph() is None:
        raise RuntimeError(f"ReplicaContext.{what} builds traced ops: use it inside the "
                           "function given to strategy.run")


# --- gradients all-reduced in buckets --------------------------------------------------

def value_and_grad(fn, argnums=0, *, has_aux: bool = False, reduce_op="MEAN",
                   bucket_bytes: int | None = None):
    """autodiff.value_and_grad for fn run by a strategy: the value is this replica's,
    the gradients are reduced (`reduce_op`, MEAN by default) over every replica, packed
    in buckets of `bucket_bytes` (default: the strategy's) that start their all-reduce
    as soon as their last gradient is computed. Use it inside strategy.run."""
    op = _reduce_op(reduce_op, "value_and_grad")
    if bucket_bytes is not None:
        check_bucket_bytes(bucket_bytes, "value_and_grad")
    if not callable(fn):
        raise TypeError(f"value_and_grad: expected a function, got {fn!r}")
    single = isinstance(argnums, numbers.Integral)
    positions = (int(argnums),) if single else tuple(int(a) for a in argnums)
    if not positions:
        raise ValueError("value_and_grad: argnums must name at least one argument")

    @functools.wraps(fn)
    def value_and_gradient(*args, **kwargs):
        _require_trace_for(fn)
        ctx = get_replica_context()
        size = ctx.bucket_bytes if bucket_bytes is None else bucket_bytes
        buckets = BucketedAllReduce(op, ctx.num_replicas_in_sync, size)
        return _value_and_grad_traced(fn, positions, single, has_aux, args, kwargs,
                                      combine=buckets)
    return value_and_gradient


def grad(fn, argnums=0, *, has_aux: bool = False, reduce_op="MEAN",
         bucket_bytes: int | None = None):
    """The reduced gradient alone (see value_and_grad); with has_aux, (grads, aux)."""
    vg = value_and_grad(fn, argnums, has_aux=has_aux, reduce_op=reduce_op,
                        bucket_bytes=bucket_bytes)

    @functools.wraps(fn)
    def gradient(*args, **kwargs):
        value, grads = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return gradient


def _require_trace_for(fn) -> None:
    if current_graph() is None:
        raise RuntimeError(f"distribute.value_and_grad({getattr(fn, '__name__', 'fn')}) "
                           "all-reduces across replicas: call it inside the function given "
                           "to strategy.run")


# --- strategies -------------------------------------------------------------------------

class Strategy:
    """What MirroredStrategy and MultiWorkerMirroredStrategy share (see the module doc)."""

    def __init__(self, num_replicas: int, local_replica_ids, *, backend: str, pipeline,
                 intra_op_threads, bucket_bytes, max_isa, distributed):
        if backend not in BACKENDS:
            raise ValueError(f"{type(self).__name__}: backend must be one of {BACKENDS}, "
                             f"got {backend!r}")
        check_pipeline(pipeline)
        self.num_replicas_in_sync = num_replicas
        self.local_replica_ids = tuple(local_replica_ids)
        self.backend = backend
        self.pipeline = pipeline
        self.intra_op_threads = intra_op_threads
        self.bucket_bytes = check_bucket_bytes(
            DEFAULT_BUCKET_BYTES if bucket_bytes is None else bucket_bytes,
            type(self).__name__)
        self.max_isa = max_isa
        self._distributed = distributed
        self._jits: dict = {}              # fn -> its JitFunction (traced per signature)
        self._programs: dict = {}          # Lowered -> ReplicaProgram
        self._reducers: dict = {}          # (op, axis) -> the traced reduction

    # --- values ---------------------------------------------------------------------
    def distribute_batch(self, x):
        """`x` (an array or a pytree of arrays) split along axis 0 into
        num_replicas_in_sync equal shards: a PerReplica of this process's shards at
        every leaf (replica r gets rows [r*n/N, (r+1)*n/N))."""
        n = self.num_replicas_in_sync
        leaves, tree = pytree.flatten(x, is_leaf=is_number_list)
        out = []
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, PerReplica):
                raise TypeError("distribute_batch: the batch is already distributed "
                                "(a PerReplica leaf)")
            a = np.asarray(leaf)
            where = f"leaf {i} " if len(leaves) > 1 else ""
            if a.ndim == 0:
                raise ValueError(f"distribute_batch: {where}is a scalar; the batch is split "
                                 "along axis 0")
            if a.shape[0] % n:
                raise ValueError(f"distribute_batch: {where}has {a.shape[0]} rows on axis 0, "
                                 f"not divisible by the {n} replicas")
            rows = a.shape[0] // n
            out.append(PerReplica(np.ascontiguousarray(a[r * rows:(r + 1) * rows])
                                  for r in self.local_replica_ids))
        return pytree.unflatten(tree, out)

    def experimental_local_results(self, value) -> tuple:
        """The values of this process's replicas (a plain value: itself, once per replica)."""
        if isinstance(value, PerReplica):
            return value.values
        return tuple(value for _ in self.local_replica_ids)

    # --- running ----------------------------------------------------------------------
    def run(self, fn, args=(), kwargs=None):
        """fn(*args, **kwargs) on every replica (see the module docstring)."""
        lowered, per_replica = self._lowered(fn, args, kwargs)
        program = self._program(lowered)
        outputs = program.run(per_replica)
        trees = [pytree.unflatten(lowered.out_tree, list(out)) for out in outputs]
        return _merge(trees)

    def lower(self, fn, args=(), kwargs=None):
        """The traced fn for these arguments (a jit Lowered: as_hlo_text(), the HLO with
        replica_count=N, before passes)."""
        return self._lowered(fn, args, kwargs)[0]

    def compile(self, fn, args=(), kwargs=None) -> "ReplicaProgram":
        """The compiled program fn runs as (as_hlo_text(): after the pass pipeline)."""
        return self._program(self._lowered(fn, args, kwargs)[0])

    def reduce(self, reduce_op, value, axis=None):
        """SUM or MEAN over the replicas of `value` (a PerReplica, or a pytree of them;
        plain arrays count as the same value on every replica), as numpy arrays in the
        structure of `value`. With `axis`, that axis of each replica's value is reduced
        too: MEAN is then the mean over every replica's elements along it."""
        op = _reduce_op(reduce_op, "reduce")
        key = (op, axis if axis is None or isinstance(axis, int) else tuple(axis))
        fn = self._reducers.get(key)
        if fn is None:
            fn = self._reducers[key] = _reduction(op, axis, self.num_replicas_in_sync)
            fn.__name__ = f"reduce_{op.lower()}"
        leaves, tree = pytree.flatten(value, is_leaf=is_number_list)
        result = self.run(fn, args=(leaves,))
        return pytree.unflatten(tree, [leaf.values[0] for leaf in result])

    # --- the machinery ------------------------------------------------------------------
    def _jit(self, fn) -> JitFunction:
        jit = self._jits.get(fn)
        if jit is None:
            if not callable(fn):
                raise TypeError(f"strategy.run: expected a function, got {fn!r}")
            context = ReplicaContext(self.num_replicas_in_sync, self.bucket_bytes, self)

            @functools.wraps(fn)
            def replicated(*args, **kwargs):
                current_graph().num_replicas = context.num_replicas_in_sync
                _contexts().append(context)
                try:
                    return fn(*args, **kwargs)
                finally:
                    _contexts().pop()
            jit = self._jits[fn] = JitFunction(replicated, pipeline=self.pipeline,
                                               backend=self.backend)
        return jit

    def _lowered(self, fn, args, kwargs):
        """(the Lowered of fn for replica 0's arguments, each local replica's arrays)."""
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"strategy.run: args must be a tuple, got {type(args).__name__}")
        per_replica = self._split(tuple(args), dict(kwargs or {}))
        jit = self._jit(fn)
        first_args, first_kwargs = per_replica[0]
        sig = jit.signature_of(first_args, first_kwargs)
        lowered = jit._lower(sig, first_args, first_kwargs)
        arrays = [sig.arrays]
        for k, (a, kw) in enumerate(per_replica[1:], start=1):
            try:
                arrays.append(lowered.check_call(a, kw))
            except (TypeError, ValueError) as e:
                replica = self.local_replica_ids[k]
                raise type(e)(f"strategy.run: replica {replica}: {e} (every replica runs one "
                              "program: give every replica the same shapes and dtypes)") \
                    from None
        return lowered, arrays

    def _split(self, args, kwargs) -> list:
        """(args, kwargs) of each local replica: PerReplica leaves replaced by the
        replica's value, other leaves shared."""
        leaves, tree = pytree.flatten((args, kwargs), is_leaf=is_number_list)
        count = len(self.local_replica_ids)
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, PerReplica) and len(leaf.values) != count:
                raise ValueError(f"strategy.run: argument leaf {i} is a PerReplica of "
                                 f"{len(leaf.values)} values; this process runs {count} "
                                 f"replica{'s' * (count != 1)}")
        return [pytree.unflatten(tree, [leaf.values[k] if isinstance(leaf, PerReplica)
                                        else leaf for leaf in leaves])
                for k in range(count)]

    def _program(self, lowered) -> "ReplicaProgram":
        program = self._programs.get(lowered)
        if program is None:
            program = self._programs[lowered] = ReplicaProgram(lowered, self)
        return program

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} num_replicas_in_sync={self.num_replicas_in_sync} "
                f"backend={self.backend}>")


class MirroredStrategy(Strategy):
    """num_replicas devices in this process (threads over shared memory)."""

    def __init__(self, num_replicas: int = 1, *, backend: str = "cpu", pipeline="default",
                 intra_op_threads: int | None = None, bucket_bytes: int | None = None,
                 max_isa: str | None = None):
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) \
                or num_replicas < 1:
            raise ValueError(f"MirroredStrategy: num_replicas must be a positive int, "
                             f"got {num_replicas!r}")
        super().__init__(num_replicas, range(num_replicas), backend=backend,
                         pipeline=pipeline, intra_op_threads=intra_op_threads,
                         bucket_bytes=bucket_bytes, max_isa=max_isa, distributed=None)


class MultiWorkerMirroredStrategy(Strategy):
    """One replica per MPI rank (`mpirun -n N python script.py`): replica id = rank.

    `rank`, `world_size` (= num_replicas_in_sync) and `local_rank` (the rank among
    the processes of this machine) come from MPI's COMM_WORLD; needs mpi4py
    (`pip install 'xlapy[mpi]'`). Started without mpirun it is one replica."""

    def __init__(self, *, backend: str = "cpu", pipeline="default",
                 intra_op_threads: int | None = None, bucket_bytes: int | None = None,
                 max_isa: str | None = None):
        if backend != "cpu":
            raise ValueError("MultiWorkerMirroredStrategy runs through the CPU backend "
                             f"(backend='cpu'), got backend={backend!r}")
        self.rank, self.world_size, self.local_rank = _mpi_ranks()
        super().__init__(self.world_size, (self.rank,), backend=backend, pipeline=pipeline,
                         intra_op_threads=intra_op_threads, bucket_bytes=bucket_bytes,
                         max_isa=max_isa, distributed="mpi")


def _mpi_ranks() -> tuple[int, int, int]:
    """(rank, world size, local rank) of this process in MPI's COMM_WORLD."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise ImportError("MultiWorkerMirroredStrategy needs mpi4py: "
                          "pip install 'xlapy[mpi]'") from None
    world = MPI.COMM_WORLD
    node = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.Get_rank())
    try:
        return world.Get_rank(), world.Get_size(), node.Get_rank()
    finally:
        node.Free()


def _merge(trees) -> object:
    """Per-replica output pytrees -> one pytree with a PerReplica at every leaf."""
    flat = [pytree.flatten(t) for t in trees]
    tree = flat[0][1]
    columns = zip(*[leaves for leaves, _ in flat])
    return pytree.unflatten(tree, [PerReplica(column) for column in columns])


def _reduction(op: str, axis, num_replicas: int):
    """The traced function strategy.reduce runs: per-replica axis reduction, then the
    cross-replica SUM (MEAN divides by every replica's element count)."""
    def reduce_values(leaves):
        out = []
        for x in leaves:
            count = 1
            if axis is not None:
                axes = (axis,) if isinstance(axis, int) else tuple(axis)
                for a in axes:
                    count *= x.shape[a]
                x = ops.reduce_sum(x, axes)
            out.append((x, count))
        total = get_replica_context().all_reduce("SUM", [x for x, _ in out])
        if op == "MEAN":
            total = [ops.divide(t, num_replicas * count) for t, (_, count) in zip(total, out)]
        return total
    return reduce_values


# --- the compiled program ---------------------------------------------------------------

class ReplicaProgram:
    """A lowered fn compiled for the strategy's replicas; `run(arrays per local replica)`
    returns each local replica's flat outputs."""

    def __init__(self, lowered, strategy: Strategy):
        self.lowered = lowered
        self.num_devices = strategy.num_replicas_in_sync
        self.distributed = strategy._distributed
        self.backend = strategy.backend
        if self.backend == "interpreter":
            self._executable = None
            self._optimized = _run_pipeline(lowered.module, strategy.pipeline)
            self._optimized_text = self._optimized.to_text()
        else:
            self._executable = _compile_devices(lowered, strategy, self.num_devices,
                                                self.distributed)
            self._optimized_text = self._executable.as_hlo_text()

    def run(self, arrays_per_replica) -> list[list]:
        if self._executable is None:
            from ..hlo import evaluate_devices
            return evaluate_devices(self._optimized, arrays_per_replica)
        if self.distributed is None:
            return [list(out) for out in self._executable.run_devices(arrays_per_replica)]
        (arrays,) = arrays_per_replica
        return [list(self._executable.run(*arrays))]

    def as_hlo_text(self) -> str:
        """The module after the pass pipeline."""
        return self._optimized_text


def _compile_devices(lowered, strategy: Strategy, num_devices: int, distributed):
    from .. import backend_cpu
    import dataclasses
    if "num_devices" not in {f.name for f in dataclasses.fields(backend_cpu.CompileOptions)}:
        raise NotImplementedError("this CPU backend runs one device: run strategies with "
                                  "backend='interpreter'")
    more = {"num_devices": num_devices}
    threads = strategy.intra_op_threads
    if distributed is not None:
        more["distributed"] = distributed
    elif threads is not None:
        threads *= num_devices      # the backend shares the threads between the devices
    return _compile_cpu(lowered, strategy.pipeline, threads, strategy.max_isa, **more)
