"""Pipeline parallelism: stages on devices, microbatches flowing through (GPipe, 1F1B).

    def stage0(p, batch):                 # stage(params, activations) -> activations
        x, y = batch
        return ops.relu(x @ p["w"]), y    # labels ride along with the activations
    def stage1(p, act):
        h, y = act
        return ops.reduce_mean(ops.square(h @ p["w"] - y))   # the last: the mean loss

    pipe = distribute.pipeline([stage0, stage1], num_microbatches=4, schedule="1f1b")
    loss, grads = pipe.value_and_grad([p0, p1], (x, y))      # numpy in, numpy out
    pipe.stats    # bubble fraction measured and ideal, live activations per stage, ...

Stage s runs on device s: a thread per stage over an InProcessCommunicator, or,
under `mpirun -n S` (world size == number of stages), rank s (an MpiCommunicator;
every rank calls value_and_grad with the same arguments; the loss comes back on every
rank, the gradients of this rank's stage only, the others None).

The batch (any pytree) is split along axis 0 into `num_microbatches` equal pieces.
Each stage's work is compiled with jit_compile once per signature: forward
`stage(params, x)`, backward = the vector-Jacobian product of the stage at its saved
input (the forward is recomputed: only the stage's input is kept per microbatch,
GPipe's re-materialization), and for the last stage the loss and its gradient in one
program. Activations go to the next stage and their gradients back to the previous
one with the communicator's permute (point to point; the leaves of a pytree packed
into one byte buffer); only float leaves carry gradients. Gradients are summed over
the microbatches and divided by M: `loss` is the mean of the microbatch losses and
`grads` its gradient, what one device computes on the whole batch when the loss is a
mean over the microbatch.

Schedules. "gpipe": every forward, then every backward (microbatches in reverse), so
stage s keeps M inputs alive. "1f1b" (PipeDream-flush / Megatron's non-interleaved
schedule): S-s-1 warm-up forwards, then alternating one forward, one backward, then
the remaining backwards: stage s keeps at most S-s inputs alive. Sends and receives
of the steady state are paired into one permute (send to a neighbour and receive
from it) so no two stages wait on each other. Both schedules give the same numbers
(up to the order gradients are summed in).

`stats` after a step: `bubble` = 1 - (busy time of all stages) / (S x wall time),
beside `ideal_bubble` = (S-1)/(M+S-1); `max_live_activations` per stage; `busy`,
`wall` seconds.
"""
from __future__ import annotations

import time

import numpy as np

from . import pytree
from .autodiff.api import value_and_grad as _value_and_grad
from .jit import JitFunction
from .signature import is_number_list
from .sharding import _under_mpirun

__all__ = ["pipeline", "Pipeline"]

SCHEDULES = ("gpipe", "1f1b")


def pipeline(stages, num_microbatches: int, schedule: str = "gpipe", **options) -> "Pipeline":
    """A Pipeline of `stages` (see the module docstring)."""
    return Pipeline(stages, num_microbatches, schedule, **options)


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"


class _Aval:
    """The shape and dtype of a leaf (what a receiver allocates)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _pack(leaves) -> np.ndarray:
    if not leaves:
        return np.zeros(0, np.uint8)
    return np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in leaves])


def _unpack(buf: np.ndarray, avals) -> list:
    out, at = [], 0
    for a in avals:
        out.append(buf[at:at + a.nbytes].view(a.dtype).reshape(a.shape).copy())
        at += a.nbytes
    return out


class _Stage:
    """Stage s's compiled programs and the layout of what enters and leaves it."""

    def __init__(self, index: int, last: bool, fn, params, example_x, jit_options):
        self.index, self.last, self.fn = index, last, fn
        x_leaves, self.x_tree = pytree.flatten(example_x, is_leaf=is_number_list)
        self.x_float = [_is_float(np.asarray(a).dtype) for a in x_leaves]
        self.x_avals = [_Aval(np.shape(a), np.asarray(a).dtype) for a in x_leaves]
        first = index == 0
        split = self._split

        def forward(params, x):
            return fn(params, x)

        def rebuild(xf, xo):
            it_f, it_o = iter(xf), iter(xo)
            return pytree.unflatten(self.x_tree, [next(it_f) if f else next(it_o)
                                                  for f in self.x_float])

        def backward(params, xf, xo, gy):
            def weighted(params, xf):
                y_leaves, _ = pytree.flatten(fn(params, rebuild(xf, xo)))
                floats = [y for y in y_leaves if _is_float(y.dtype)]
                from . import ops
                total = ops.reduce_sum(floats[0] * gy[0])
                for y, g in zip(floats[1:], gy[1:]):
                    total = total + ops.reduce_sum(y * g)
                return total
            return _value_and_grad(weighted, argnums=0 if first else (0, 1))(params, xf)[1]

        def loss_and_grads(params, xf, xo):
            def loss(params, xf):
                return fn(params, rebuild(xf, xo))
            return _value_and_grad(loss, argnums=0 if first else (0, 1))(params, xf)

        name = f"stage{index}"
        self.forward = JitFunction(forward, name=f"{name}_forward", **jit_options)
        self.backward = JitFunction(backward, name=f"{name}_backward", **jit_options)
        self.loss_and_grads = JitFunction(loss_and_grads, name=f"{name}_loss_and_grads",
                                          **jit_options)
        xf, xo = split(x_leaves)
        if last:
            self.loss_and_grads.lower(params, xf, xo)    # autodiff: "must return a scalar"
            self.y_avals, self.y_tree, self.y_float = [], None, []
        else:
            lowered = self.forward.lower(params, example_x)
            self.y_avals = [_Aval(t.shape, t.dtype) for t in lowered.outputs]
            self.y_tree = lowered.out_tree
            self.y_float = [_is_float(a.dtype) for a in self.y_avals]

    def _split(self, leaves):
        xf = [a for a, f in zip(leaves, self.x_float) if f]
        xo = [a for a, f in zip(leaves, self.x_float) if not f]
        return xf, xo

    def example_output(self):
        return pytree.unflatten(self.y_tree, [np.zeros(a.shape, a.dtype) for a in self.y_avals])

    def compile(self, params) -> None:
        """Compiles the programs this stage runs (in the caller's thread)."""
        x = pytree.unflatten(self.x_tree, [np.zeros(a.shape, a.dtype) for a in self.x_avals])
        xf, xo = self._split(pytree.flatten(x, is_leaf=is_number_list)[0])
        if self.last:
            self.loss_and_grads.lower(params, xf, xo).compile()
            return
        self.forward.lower(params, x).compile()
        gy = [np.zeros(a.shape, a.dtype) for a, f in zip(self.y_avals, self.y_float) if f]
        self.backward.lower(params, xf, xo, gy).compile()


class Pipeline:
    """Stages over devices with a microbatch schedule; see the module docstring."""

    def __init__(self, stages, num_microbatches: int, schedule: str = "gpipe", *,
                 distributed="auto", backend: str = "cpu", pipeline="default",
                 intra_op_threads: int | None = None, max_isa: str | None = None,
                 timeout: float | None = None):
        stages = list(stages)
        if not stages or not all(callable(f) for f in stages):
            raise TypeError("pipeline: stages must be a non-empty list of functions "
                            "stage(params, activations)")
        if isinstance(num_microbatches, bool) or not isinstance(num_microbatches, int) \
                or num_microbatches < 1:
            raise ValueError(f"pipeline: num_microbatches must be a positive int, "
                             f"got {num_microbatches!r}")
        if schedule not in SCHEDULES:
            raise ValueError(f"pipeline: schedule must be one of {SCHEDULES}, got {schedule!r}")
        if distributed not in ("auto", None, "mpi"):
            raise ValueError(f"pipeline: distributed must be 'auto', None or 'mpi', "
                             f"got {distributed!r}")
        self.stages = stages
        self.num_stages = len(stages)
        self.num_microbatches = num_microbatches
        self.schedule = schedule
        if distributed == "auto":
            distributed = "mpi" if self.num_stages > 1 and \
                _under_mpirun() == self.num_stages else None
        self.distributed = distributed
        self.timeout = timeout
        if intra_op_threads is None and distributed is None:
            from .. import runtime          # the stages share this process's threads
            intra_op_threads = max(1, runtime.get_options().intra_op_threads // self.num_stages)
        self._jit_options = dict(backend=backend, pipeline=pipeline,
                                 intra_op_threads=intra_op_threads, max_isa=max_isa)
        self._compiled: dict = {}
        self._comm = None
        if distributed == "mpi":
            from ..runtime.mpi_communicator import MpiCommunicator
            self._comm = MpiCommunicator(timeout=timeout)
            if self._comm.num_devices != self.num_stages:
                raise ValueError(f"pipeline: {self.num_stages} stages need {self.num_stages} "
                                 f"MPI ranks, mpirun started {self._comm.num_devices}")
        self.stats: dict = {}

    @property
    def ideal_bubble(self) -> float:
        s, m = self.num_stages, self.num_microbatches
        return (s - 1) / (m + s - 1)

    # --- the step --------------------------------------------------------------------
    def value_and_grad(self, params_list, batch):
        """(mean loss over the microbatches, [gradient of each stage's params])."""
        params_list = list(params_list)
        if len(params_list) != self.num_stages:
            raise ValueError(f"pipeline: {len(params_list)} params for {self.num_stages} stages")
        micro = self._microbatches(batch)
        stages = self._prepare(params_list, micro[0])
        if self.distributed:
            rank = self._comm.local_devices[0]
            loss, grads, record = self._run_stage(rank, stages[rank], params_list[rank], micro,
                                                  self._comm)
            loss = self._share_loss(rank, loss)
            records = self._gather_records(rank, record)
            out = [grads if s == rank else None for s in range(self.num_stages)]
        else:
            from ..runtime.inprocess_communicator import InProcessCommunicator
            comm = InProcessCommunicator(self.num_stages, timeout=self.timeout)
            try:
                results = comm.run(lambda s: self._run_stage(s, stages[s], params_list[s],
                                                             micro, comm), timeout=self.timeout)
            finally:
                comm.close()
            loss = results[-1][0]
            out = [r[1] for r in results]
            records = [r[2] for r in results]
        wall = max(r["wall"] for r in records)
        busy = [r["busy"] for r in records]
        self.stats = {"bubble": 1.0 - sum(busy) / (self.num_stages * wall) if wall > 0 else 0.0,
                      "ideal_bubble": self.ideal_bubble, "busy": busy, "wall": wall,
                      "max_live_activations": [r["max_live"] for r in records],
                      "schedule": self.schedule}
        return loss, out

    def _microbatches(self, batch) -> list:
        leaves, tree = pytree.flatten(batch, is_leaf=is_number_list)
        m = self.num_microbatches
        pieces = []
        for i, leaf in enumerate(leaves):
            a = np.asarray(leaf)
            if a.ndim == 0 or a.shape[0] % m:
                raise ValueError(f"pipeline: batch leaf {i} of shape {list(a.shape)} cannot be "
                                 f"split into {m} microbatches along axis 0")
            pieces.append(np.split(a, m))
        return [pytree.unflatten(tree, [np.ascontiguousarray(p[k]) for p in pieces])
                for k in range(m)]

    def _prepare(self, params_list, example) -> list:
        """Each stage's _Stage (traced in order: a stage's input is its predecessor's
        output); this process's stages compiled here, not in the stage threads."""
        leaves, _ = pytree.flatten((params_list, example), is_leaf=is_number_list)
        key = tuple((np.shape(a), np.asarray(a).dtype.str) for a in leaves)
        stages = self._compiled.get(key)
        if stages is None:
            stages, x = [], example
            for s, fn in enumerate(self.stages):
                st = _Stage(s, s == self.num_stages - 1, fn, params_list[s], x,
                            self._jit_options)
                stages.append(st)
                if not st.last:
                    x = st.example_output()
            mine = [self._comm.local_devices[0]] if self.distributed else range(self.num_stages)
            for s in mine:
                stages[s].compile(params_list[s])
            self._compiled[key] = stages
        return stages

    def _share_loss(self, rank: int, loss):
        buf = np.zeros(1, np.float64) if loss is None else np.array([loss], np.float64)
        self._comm.broadcast(rank, None, self.num_stages - 1, buf)
        return np.float32(buf[0])

    def _gather_records(self, rank: int, record) -> list:
        mine = np.array([record["busy"], record["wall"], record["max_live"]], np.float64)
        every = np.zeros((self.num_stages, 3), np.float64)
        self._comm.all_gather(rank, None, mine, every)
        return [{"busy": b, "wall": w, "max_live": int(n)} for b, w, n in every]

    # --- one stage's schedule ------------------------------------------------------------
    def _run_stage(self, s: int, st: _Stage, params, micro, comm):
        S, M = self.num_stages, self.num_microbatches
        io = _StageIO(s, S, st, comm)
        saved: list = []                      # (x leaves) of microbatches awaiting backward
        grads_sum = None
        losses = []
        busy = 0.0
        max_live = 0
        next_input = iter(range(M))

        def fetch_input():
            return micro[next(next_input)]

        def forward(x):
            """Runs F; returns what goes to the next stage (None on the last stage)."""
            nonlocal busy, max_live
            leaves = pytree.flatten(x, is_leaf=is_number_list)[0]
            xf, xo = st._split(leaves)
            t0 = time.perf_counter()
            if st.last:
                loss, g = st.loss_and_grads(params, xf, xo)
                busy += time.perf_counter() - t0
                losses.append(np.float64(loss))
                saved.append(g)               # the gradients, consumed by the backward
                max_live = max(max_live, len(saved))
                return None
            y = st.forward(params, x)
            busy += time.perf_counter() - t0
            saved.append((xf, xo))
            max_live = max(max_live, len(saved))
            return [a for a in pytree.flatten(y)[0]]

        def backward(gy, newest: bool):
            """Runs B for the oldest (1F1B) or newest (GPipe) saved microbatch."""
            nonlocal busy, grads_sum
            item = saved.pop(-1 if newest else 0)
            t0 = time.perf_counter()
            if st.last:
                g = item
            else:
                xf, xo = item
                g = st.backward(params, xf, xo, gy)
            busy += time.perf_counter() - t0
            gp, gx = (g, None) if s == 0 else g
            grads_sum = gp if grads_sum is None else _tree_add(grads_sum, gp)
            return gx

        start = time.perf_counter()
        if self.schedule == "gpipe":
            for _ in range(M):
                x = fetch_input() if s == 0 else io.recv_forward()
                io.send_forward(forward(x))
            for _ in range(M):
                gy = io.recv_backward()
                io.send_backward(backward(gy, newest=True))
        else:
            warmup = min(S - s - 1, M)
            remaining = M - warmup
            for _ in range(warmup):
                x = fetch_input() if s == 0 else io.recv_forward()
                io.send_forward(forward(x))
            x = None
            if remaining:
                x = fetch_input() if s == 0 else io.recv_forward()
            for i in range(remaining):
                y = forward(x)
                gy = io.send_forward_recv_backward(y)
                gx = backward(gy, newest=False)
                if i == remaining - 1:
                    io.send_backward(gx)
                elif s == 0:
                    io.send_backward(gx)
                    x = fetch_input()
                else:
                    x = io.send_backward_recv_forward(gx)
            for _ in range(warmup):
                gy = io.recv_backward()
                io.send_backward(backward(gy, newest=False))
        wall = time.perf_counter() - start
        grads = _tree_scale(grads_sum, 1.0 / M)
        loss = np.float32(np.mean(losses)) if st.last else None
        return loss, grads, {"busy": busy, "wall": wall, "max_live": max_live}


class _StageIO:
    """Stage s's sends and receives to its neighbours (packed leaves over permute)."""

    def __init__(self, s: int, S: int, st: _Stage, comm):
        self.s, self.S, self.comm = s, S, comm
        self.in_avals = st.x_avals
        self.in_float = [a for a, f in zip(st.x_avals, st.x_float) if f]
        self.out_float = [a for a, f in zip(st.y_avals, st.y_float) if f]
        self.x_tree = st.x_tree

    def _permute(self, send_to, send, recv_from, recv_nbytes):
        recv = np.empty(recv_nbytes, np.uint8) if recv_from is not None else None
        self.comm.permute(self.s, send_to, recv_from, send if send is not None else
                          np.zeros(0, np.uint8), recv if recv is not None else
                          np.zeros(0, np.uint8))
        return recv

    def _activation(self, buf):
        return pytree.unflatten(self.x_tree, _unpack(buf, self.in_avals))

    def _nbytes(self, avals) -> int:
        return sum(a.nbytes for a in avals)

    def recv_forward(self):
        return self._activation(self._permute(None, None, self.s - 1,
                                              self._nbytes(self.in_avals)))

    def send_forward(self, y) -> None:
        if y is not None and self.s < self.S - 1:
            self._permute(self.s + 1, _pack(y), None, 0)

    def recv_backward(self):
        if self.s == self.S - 1:
            return None
        buf = self._permute(None, None, self.s + 1, self._nbytes(self.out_float))
        return _unpack(buf, self.out_float)

    def send_backward(self, gx) -> None:
        if self.s > 0:
            self._permute(self.s - 1, _pack(gx), None, 0)

    def send_forward_recv_backward(self, y):
        if self.s == self.S - 1:
            return None
        buf = self._permute(self.s + 1, _pack(y), self.s + 1, self._nbytes(self.out_float))
        return _unpack(buf, self.out_float)

    def send_backward_recv_forward(self, gx):
        buf = self._permute(self.s - 1, _pack(gx), self.s - 1, self._nbytes(self.in_avals))
        return self._activation(buf)


def _tree_add(a, b):
    la, tree = pytree.flatten(a)
    lb, _ = pytree.flatten(b)
    return pytree.unflatten(tree, [x + y for x, y in zip(la, lb)])


def _tree_scale(a, k: float):
    la, tree = pytree.flatten(a)
    return pytree.unflatten(tree, [(x * np.asarray(k, x.dtype)).astype(x.dtype) for x in la])
