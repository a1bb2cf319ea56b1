"""TensorFlow's collective ops in one SPMD program: all_reduce, all_gather, broadcast.

    from xlapy.frontend.ops import collective

    def step(x):                                # run by strategy.run on 4 replicas
        s = collective.all_reduce(x, group_size=4, group_key=1, instance_key=1)
        m = collective.all_reduce(x, 4, 1, 2, merge_op="Max")
        g = collective.all_gather(x, 4, 1, 3)   # the members' x, concatenated on axis 0
        w = collective.broadcast_send(x, x.shape, x.dtype, 4, 1, 4)   # replica 0's x

In TensorFlow every device runs its own graph and the devices that use one
`group_key` form a group of `group_size` members. Here one traced function runs
on every replica (frontend/distribute.py's strategies set how many: N; N = 1 in a
plain jit_compile), so every replica reaches the same op with the same keys. The
keys map onto replica groups like this:

    group_size g must divide N; the replicas form N / g consecutive groups,
    replica r in group r // g: {0..g-1}, {g..2g-1}, ...   (g == N: one group, TF's case)

and lower to cross-replica HLO collectives (all-reduce, all-gather,
collective-broadcast with those `replica_groups`). Within one traced function:

- a group_key always has the same group_size (as TF requires of a group);
- an instance_key identifies one collective of its group: using it twice is an
  error (in TF two collectives with one instance would meet each other), except
  that `broadcast_recv` names the `broadcast_send` it receives from;
- keys are Python ints known at trace time (they select the program's groups).

Broadcast in one program: the sender is the group's root, its first replica (the
replica whose id is a multiple of g). `broadcast_send(t, ...)` returns the root's
`t` on every member of the group (what TF's sender and receivers end up holding);
on the other replicas `t` is read for its shape only. `broadcast_recv(shape, dtype,
...)` returns the value of the `broadcast_send` with the same group_key and
instance_key in the same function, which must come first: a receiver cannot run
without a sender in an SPMD program.

Merge and final ops: `merge_op` "Add", "Mul", "Min", "Max" (Min/Max propagate NaN,
as XLA's do); `final_op` "Id" or "Div" (the result divided by group_size; integers
truncate toward zero). all_reduce takes floating-point and integer tensors; the
gather and broadcast move any dtype. Gradients do not flow through these ops:
differentiate the per-replica loss and all-reduce the gradients
(`frontend.distribute.value_and_grad`).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..kernels.collective import MERGE_OPCODES
from ..tensor import Tensor
from .core import apply, graph_of, to_tensor, user_error

FINAL_OPS = ("Id", "Div")

__all__ = ["all_reduce", "all_gather", "broadcast_send", "broadcast_recv", "replica_id",
           "consecutive_groups", "all_reduce_start", "all_reduce_done"]


# --- the TF ops ------------------------------------------------------------------------

def all_reduce(t, group_size, group_key, instance_key, merge_op="Add", final_op="Id"):
    """The members' `t` merged elementwise with `merge_op`, then `final_op` applied."""
    what = "all_reduce"
    if merge_op not in MERGE_OPCODES:
        raise user_error(ValueError, f"{what}: merge_op must be one of "
                                     f"{', '.join(MERGE_OPCODES)}, got {merge_op!r}")
    if final_op not in FINAL_OPS:
        raise user_error(ValueError, f"{what}: final_op must be one of "
                                     f"{', '.join(FINAL_OPS)}, got {final_op!r}")
    t = _tensor(what, t)
    if dtypes.kind(t.dtype) not in ("float", "signed", "unsigned"):
        raise user_error(TypeError, f"{what}: t must be a floating-point or integer tensor, "
                                    f"got {t.aval_text()}")
    groups = _claim(what, t, group_size, group_key, instance_key)
    return apply("CollectiveReduceV2", [t], merge_op=merge_op, final_op=final_op,
                 group_size=len(groups[0]), replica_groups=groups)


def all_gather(t, group_size, group_key, instance_key):
    """The members' `t` concatenated along axis 0, in the order of their replica ids."""
    what = "all_gather"
    t = _tensor(what, t)
    if t.ndim == 0:
        raise user_error(ValueError, f"{what}: t must have at least one dimension (the "
                                     f"gather concatenates along axis 0), got {t.aval_text()}")
    groups = _claim(what, t, group_size, group_key, instance_key)
    return apply("CollectiveGatherV2", [t], group_size=len(groups[0]), replica_groups=groups)


def broadcast_send(t, shape, dtype, group_size, group_key, instance_key):
    """Sends the root's `t` to its group; returns the root's `t` on every member."""
    what = "broadcast_send"
    t = _tensor(what, t)
    _check_declared(what, t.shape, t.dtype, shape, dtype, "t")
    groups = _claim(what, t, group_size, group_key, instance_key)
    out = apply("CollectiveBcastV2", [t], replica_groups=groups)
    _keys(graph_of(t))["sends"][(int(group_key), int(instance_key))] = out
    return out


def broadcast_recv(shape, dtype, group_size, group_key, instance_key):
    """The value of this function's broadcast_send with the same keys (see the module
    docstring): `shape` and `dtype` must be the sent tensor's."""
    what = "broadcast_recv"
    graph = graph_of()
    size = _static_int(what, "group_size", group_size)
    key = (_static_int(what, "group_key", group_key),
           _static_int(what, "instance_key", instance_key))
    _check_group_size(what, graph, size, key[0])
    sent = _keys(graph)["sends"].get(key)
    if sent is None:
        raise user_error(ValueError, f"{what}: no broadcast_send with group_key {key[0]} and "
                                     f"instance_key {key[1]} came before it in this function; "
                                     "in one program run by every replica, the group's first "
                                     "replica sends with broadcast_send and the value reaches "
                                     "every member")
    _check_declared(what, sent.shape, sent.dtype, shape, dtype, "the sent tensor")
    return sent


def replica_id():
    """This replica's id (int32 scalar, 0..N-1)."""
    return apply("ReplicaId", [])


# --- pieces for frontend/distribute.py (no keys: the strategy owns its collectives) -----

def consecutive_groups(num_replicas: int, group_size: int) -> tuple[tuple[int, ...], ...]:
    """The replicas 0..num_replicas-1 in consecutive groups of group_size."""
    return tuple(tuple(range(start, start + group_size))
                 for start in range(0, num_replicas, group_size))


def all_reduce_start(t: Tensor, reduce: str, groups) -> Tensor:
    """The first half of an all-reduce (`reduce` an HLO opcode: "add", ...); its result
    is only for `all_reduce_done`."""
    return apply("CollectiveReduceStart", [t], reduce=reduce, replica_groups=tuple(groups))


def all_reduce_done(started: Tensor) -> Tensor:
    return apply("CollectiveReduceDone", [started])


# --- checks ------------------------------------------------------------------------------

def _tensor(what: str, t) -> Tensor:
    if isinstance(t, (list, tuple)) and any(isinstance(v, Tensor) for v in t):
        raise user_error(TypeError, f"{what}: t must be one tensor, got a "
                                    f"{type(t).__name__} of tensors")
    return to_tensor(t)


def _static_int(what: str, name: str, value) -> int:
    if isinstance(value, Tensor):
        raise user_error(TypeError, f"{what}: {name} must be a Python int known at trace "
                                    f"time, got a traced {value.aval_text()}")
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise user_error(TypeError, f"{what}: {name} must be an int, got {value!r}")
    return int(value)


def _root(graph):
    while getattr(graph, "parent", None) is not None:      # a cond / loop body
        graph = graph.parent
    return graph


def _keys(graph) -> dict:
    keys = _root(graph).collective_keys
    if not keys:
        keys.update(sizes={}, instances={}, sends={})
    return keys


def _check_group_size(what: str, graph, size: int, group_key: int) -> None:
    if size < 1:
        raise user_error(ValueError, f"{what}: group_size must be at least 1, got {size}")
    n = _root(graph).num_replicas
    if n % size:
        raise user_error(ValueError, f"{what}: group_size {size} does not divide the {n} "
                                     f"replica{'s' * (n != 1)} this function runs on (replicas "
                                     f"form consecutive groups of group_size; "
                                     + ("run it with a strategy, frontend.distribute, for more"
                                        if n == 1 else f"use a divisor of {n}") + ")")
    sizes = _keys(graph)["sizes"]
    if sizes.setdefault(group_key, size) != size:
        raise user_error(ValueError, f"{what}: group_key {group_key} has group_size "
                                     f"{sizes[group_key]} in this function, got {size}")


def _claim(what: str, t: Tensor, group_size, group_key, instance_key):
    """Checks the keys, records this collective's instance, returns the replica groups."""
    graph = graph_of(t)
    size = _static_int(what, "group_size", group_size)
    gkey = _static_int(what, "group_key", group_key)
    ikey = _static_int(what, "instance_key", instance_key)
    _check_group_size(what, graph, size, gkey)
    instances = _keys(graph)["instances"]
    if (gkey, ikey) in instances:
        raise user_error(ValueError, f"{what}: instance_key {ikey} of group_key {gkey} is "
                                     f"already used by {instances[gkey, ikey]} in this "
                                     "function; every collective needs its own instance_key")
    instances[gkey, ikey] = f"an {what}" if what[0] in "aeiou" else f"a {what}"
    return consecutive_groups(_root(graph).num_replicas, size)


def _check_declared(what: str, shape, dtype, declared_shape, declared_dtype, name) -> None:
    try:
        declared = tuple(int(d) for d in declared_shape)
    except TypeError:
        raise user_error(TypeError, f"{what}: shape must be a sequence of ints, "
                                    f"got {declared_shape!r}") from None
    try:
        declared_dt = dtypes.canonical(declared_dtype)
    except TypeError as e:
        raise user_error(TypeError, f"{what}: {e}") from None
    if declared != tuple(shape):
        raise user_error(ValueError, f"{what}: shape {list(declared)} differs from {name}'s "
                                     f"shape {list(shape)}")
    if declared_dt != np.dtype(dtype):
        raise user_error(TypeError, f"{what}: dtype {declared_dt.name} differs from {name}'s "
                                    f"dtype {np.dtype(dtype).name}")
