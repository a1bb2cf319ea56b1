"""Who talks to whom: XLA's device numbering and the groups of each collective.

A module with `replica_count=R, num_partitions=P` runs on N = R * P devices.
Device d runs replica `d // P`, partition `d % P` (`device_of(r, p, P) = r * P + p`,
XLA's "flattened id"). Every layer numbers devices this way: the evaluator
(`hlo.evaluate_devices`), the backend's thunks and the runtime's communicators.

Group modes (XLA's GetCollectiveOpGroupMode), decided by the opcode, whether the
instruction has a `channel_id`, and `use_global_device_ids`:

    opcode                                   channel_id  use_global_device_ids  mode
    all-reduce, all-gather, reduce-scatter   no          false                  CROSS_REPLICA
      (and all-reduce-start,                 no          true                   (an error)
       all-gather-start)                     yes         false                  CROSS_REPLICA_AND_PARTITION
                                             yes         true                   FLATTENED_ID
    all-to-all, collective-permute(-start),  no          (not an attribute)     CROSS_REPLICA
      collective-broadcast                   yes                                CROSS_PARTITION

What the ids of `replica_groups` mean in each mode, and the device groups they
give (`device_groups`), each group in the order of the participants' ranks
(all-gather concatenates, reduce-scatter and all-to-all split, in that order):

    CROSS_REPLICA                ids are replicas; for each group g and each
                                 partition p: [device_of(r, p) for r in g]
    CROSS_PARTITION              ids are partitions; for each group g and each
                                 replica r: [device_of(r, p) for p in g]
    CROSS_REPLICA_AND_PARTITION  ids are replicas; for each group g: every
                                 partition of those replicas,
                                 [device_of(r, p) for r in g for p in range(P)]
    FLATTENED_ID                 ids are devices; the groups as written

Empty `replica_groups` (`{}`) mean one group of every replica (every partition
in CROSS_PARTITION mode); FLATTENED_ID mode needs explicit groups. The ids of
the groups must name every replica (partition, device) exactly once.

collective-permute's `source_target_pairs` are replica ids (CROSS_REPLICA: the
pair (s, t) moves data from replica s to replica t within every partition) or
partition ids (CROSS_PARTITION: within every replica); `permute_pairs` gives
them as device pairs. A device that is no pair's target receives zeros.
collective-broadcast sends the operand of the first device of each group to the
whole group.

The API (all functions take the instruction and the module's R and P and raise
`CollectiveError`, a ValueError naming the instruction, on bad attributes):

    group_mode(instr) -> str                       one of the GROUP_MODES
    device_groups(instr, R, P) -> ((d, ...), ...)  every device in exactly one group
    group_of(instr, device, R, P) -> (d, ...)      the group of `device`
    rank_in_group(instr, device, R, P) -> int      its position there
    permute_pairs(instr, R, P) -> ((src, dst), ...)
    permute_peers(instr, device, R, P) -> (source or None, target or None)
    broadcast_root(instr, device, R, P) -> int     the device whose operand it receives
    replica_of(d, P), partition_of(d, P), device_of(r, p, P)
    is_collective(instr), is_async_start(instr), is_async_done(instr)
    async_start_of(done) -> the -start instruction a -done waits for
"""
from __future__ import annotations

from .ir import HloInstruction, ReplicaGroups
from .opcodes import OPCODES

CROSS_REPLICA = "cross_replica"
CROSS_PARTITION = "cross_partition"
CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
FLATTENED_ID = "flattened_id"
GROUP_MODES = (CROSS_REPLICA, CROSS_PARTITION, CROSS_REPLICA_AND_PARTITION, FLATTENED_ID)

# The collectives whose group mode reads use_global_device_ids (XLA's all-reduce
# and all-gather instruction classes); the others ignore it.
_GLOBAL_ID_OPS = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter",
                            "all-gather", "all-gather-start"})
# Collectives that use replica_groups (the others use source_target_pairs, or are -done).
_GROUPED_OPS = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter", "all-gather",
                          "all-gather-start", "all-to-all", "ragged-all-to-all",
                          "collective-broadcast"})
_PERMUTE_OPS = frozenset({"collective-permute", "collective-permute-start"})


class CollectiveError(ValueError):
    """A collective's attributes do not fit the module's devices: `%name (opcode):
    detail`; `detail` alone is the what (the verifier adds its own where)."""

    def __init__(self, instr: HloInstruction, detail: str):
        super().__init__(f"%{instr.name} ({instr.opcode}): {detail}")
        self.instr, self.detail = instr, detail


# --- device numbering -------------------------------------------------------------------

def device_of(replica: int, partition: int, num_partitions: int) -> int:
    return replica * num_partitions + partition


def replica_of(device: int, num_partitions: int) -> int:
    return device // num_partitions


def partition_of(device: int, num_partitions: int) -> int:
    return device % num_partitions


# --- what an instruction is ---------------------------------------------------------------

def is_collective(instr: HloInstruction) -> bool:
    return OPCODES[instr.opcode].collective


def is_async_start(instr: HloInstruction) -> bool:
    return OPCODES[instr.opcode].async_role == "start"


def is_async_done(instr: HloInstruction) -> bool:
    return OPCODES[instr.opcode].async_role == "done"


def async_start_of(done: HloInstruction) -> HloInstruction:
    """The -start a -done completes (its operand, of the matching opcode)."""
    info = OPCODES[done.opcode]
    if info.async_role != "done":
        raise CollectiveError(done, "is not the -done half of an async collective")
    start = done.operands[0] if done.operands else None
    if start is None or start.opcode != f"{info.sync_op}-start":
        got = start.opcode if start is not None else "nothing"
        raise CollectiveError(done, f"must take a {info.sync_op}-start, got {got}")
    return start


def group_mode(instr: HloInstruction) -> str:
    """The group mode of a collective (see the table in the module docstring)."""
    if instr.opcode not in _GROUPED_OPS and instr.opcode not in _PERMUTE_OPS:
        raise CollectiveError(instr, "has no replica groups")
    has_channel = instr.attrs.get("channel_id") is not None
    global_ids = bool(instr.attrs.get("use_global_device_ids", False))
    if instr.opcode in _GLOBAL_ID_OPS:
        if not has_channel:
            if global_ids:
                raise CollectiveError(instr, f"use_global_device_ids=true needs a "
                                      f"channel_id")
            return CROSS_REPLICA
        return FLATTENED_ID if global_ids else CROSS_REPLICA_AND_PARTITION
    return CROSS_PARTITION if has_channel else CROSS_REPLICA


def _id_space(mode: str, replica_count: int, num_partitions: int) -> tuple[str, int]:
    """What the ids of replica_groups count in `mode`, and how many there are."""
    if mode == CROSS_PARTITION:
        return "partition", num_partitions
    if mode == FLATTENED_ID:
        return "device", replica_count * num_partitions
    return "replica", replica_count


def _check_counts(instr, replica_count, num_partitions) -> None:
    for what, n in (("replica_count", replica_count), ("num_partitions", num_partitions)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise CollectiveError(instr, f"{what} must be a positive integer, got {n!r}")


def _written_groups(instr: HloInstruction) -> tuple[tuple[int, ...], ...]:
    groups = instr.attrs.get("replica_groups")
    if groups is None:
        return ()
    if not isinstance(groups, ReplicaGroups):
        raise CollectiveError(instr, f"replica_groups must be a ReplicaGroups, "
                              f"got {groups!r}")
    return groups.groups


def device_groups(instr: HloInstruction, replica_count: int,
                  num_partitions: int) -> tuple[tuple[int, ...], ...]:
    """The groups of global device ids that run `instr` together, each in rank order;
    every device 0..R*P-1 is in exactly one group."""
    _check_counts(instr, replica_count, num_partitions)
    if instr.opcode in _PERMUTE_OPS:
        # Everyone sharing the replica (CROSS_PARTITION) or the partition takes part.
        mode = group_mode(instr)
        ids = (tuple(range(num_partitions)) if mode == CROSS_PARTITION
               else tuple(range(replica_count)),)
    else:
        mode = group_mode(instr)
        ids = _written_groups(instr)
        what, count = _id_space(mode, replica_count, num_partitions)
        if not ids:
            if mode == FLATTENED_ID:
                raise CollectiveError(instr, f"use_global_device_ids=true needs "
                                      f"explicit replica_groups")
            ids = (tuple(range(count)),)
        _check_ids(instr, ids, what, count)
    P = num_partitions
    if mode == CROSS_REPLICA:
        return tuple(tuple(device_of(r, p, P) for r in g) for g in ids for p in range(P))
    if mode == CROSS_PARTITION:
        return tuple(tuple(device_of(r, p, P) for p in g) for g in ids
                     for r in range(replica_count))
    if mode == CROSS_REPLICA_AND_PARTITION:
        return tuple(tuple(device_of(r, p, P) for r in g for p in range(P)) for g in ids)
    return tuple(tuple(g) for g in ids)


def _check_ids(instr, groups, what: str, count: int) -> None:
    """Every id in range, none twice, none missing, no empty group."""
    seen: set[int] = set()
    for g in groups:
        if not g:
            raise CollectiveError(instr, "replica_groups has an empty group")
        for i in g:
            if not 0 <= i < count:
                raise CollectiveError(instr, f"replica_groups names {what} {i}, but the "
                                      f"module has {_count(count, what)} (ids 0..{count - 1})")
            if i in seen:
                raise CollectiveError(instr, f"replica_groups names {what} {i} twice")
            seen.add(i)
    missing = sorted(set(range(count)) - seen)
    if missing:
        raise CollectiveError(instr, f"replica_groups leaves out {what}"
                              f"{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} "
                              f"(every one of the {count} must be in a group)")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def group_of(instr: HloInstruction, device: int, replica_count: int,
             num_partitions: int) -> tuple[int, ...]:
    """The group (in rank order) that `device` runs `instr` with."""
    for g in device_groups(instr, replica_count, num_partitions):
        if device in g:
            return g
    raise CollectiveError(instr, f"device {device} is not one of the "
                          f"{replica_count * num_partitions} devices")


def rank_in_group(instr: HloInstruction, device: int, replica_count: int,
                  num_partitions: int) -> int:
    return group_of(instr, device, replica_count, num_partitions).index(device)


def uniform_group_size(instr: HloInstruction, replica_count: int,
                       num_partitions: int) -> int | None:
    """The size of every group, or None if the groups differ in size."""
    sizes = {len(g) for g in device_groups(instr, replica_count, num_partitions)}
    return sizes.pop() if len(sizes) == 1 else None


# --- collective-permute ------------------------------------------------------------------

def permute_pairs(instr: HloInstruction, replica_count: int,
                  num_partitions: int) -> tuple[tuple[int, int], ...]:
    """(source device, target device) for every pair, in every replica (partition) the
    pairs apply to: CROSS_PARTITION pairs are partitions within each replica,
    CROSS_REPLICA pairs are replicas within each partition."""
    if instr.opcode not in _PERMUTE_OPS:
        raise CollectiveError(instr, "has no source_target_pairs")
    _check_counts(instr, replica_count, num_partitions)
    mode = group_mode(instr)
    pairs = instr.attrs.get("source_target_pairs", ())
    what, count = (("partition", num_partitions) if mode == CROSS_PARTITION
                   else ("replica", replica_count))
    # As XLA's verifier: the in-place form may name a device as often as it has offset
    # tuples (several slices between the same devices).
    repeats = _in_place_repeats(instr)
    sources: dict[int, int] = {}
    targets: dict[int, int] = {}
    for pair in pairs:
        if len(pair) != 2:
            raise CollectiveError(instr, f"source_target_pairs holds {pair!r}, "
                                  f"not a (source, target) pair")
        s, t = pair
        for role, i in (("source", s), ("target", t)):
            if not 0 <= i < count:
                raise CollectiveError(instr, f"source_target_pairs {role} {i} is not a {what} "
                                      f"(the module has {_count(count, what)}, ids "
                                      f"0..{count - 1})")
        sources[s] = sources.get(s, 0) + 1
        targets[t] = targets.get(t, 0) + 1
        if sources[s] > repeats:
            raise CollectiveError(instr, f"source_target_pairs has source {s} "
                                  f"{'twice' if repeats == 1 else 'too often'}")
        if targets[t] > repeats:
            raise CollectiveError(instr, f"source_target_pairs has target {t} "
                                  f"{'twice' if repeats == 1 else 'too often'}")
    P = num_partitions
    if mode == CROSS_PARTITION:
        return tuple((device_of(r, s, P), device_of(r, t, P))
                     for r in range(replica_count) for s, t in pairs)
    return tuple((device_of(s, p, P), device_of(t, p, P)) for p in range(P) for s, t in pairs)


def _in_place_repeats(instr: HloInstruction) -> int:
    if "slice_sizes" not in instr.attrs or len(instr.operands) != 4:
        return 1
    offsets = instr.operands[2].shape
    if offsets is None or not offsets.is_tuple or not offsets.tuple_shapes:
        return 1
    if instr.operands[0].shape is not None and instr.operands[0].shape.is_tuple:
        first = offsets.tuple_shapes[0]
        return len(first.tuple_shapes) if first.is_tuple else 1
    return len(offsets.tuple_shapes)


# Why the in-place form is read and checked but not computed (evaluator and backend).
IN_PLACE_PERMUTE_REFUSAL = (
    "the in-place collective-permute (4 operands with buffer offsets, slice_sizes) is "
    "read and verified but not computed: XLA gives it no reference semantics (whose "
    "offsets place a slice, the sender's or the receiver's, is left to its TPU/GPU "
    "runtimes), and a guess could give wrong numbers")


def is_in_place_permute(instr: HloInstruction) -> bool:
    """The in-place collective-permute: 4 operands with buffer offsets and slice_sizes."""
    return instr.opcode in _PERMUTE_OPS and "slice_sizes" in instr.attrs


def permute_peers(instr: HloInstruction, device: int, replica_count: int,
                  num_partitions: int) -> tuple[int | None, int | None]:
    """(the device `device` receives from, the device it sends to); None where there is
    none (a device that receives nothing gets zeros)."""
    source = target = None
    for s, t in permute_pairs(instr, replica_count, num_partitions):
        if t == device:
            source = s
        if s == device:
            target = t
    return source, target


def broadcast_root(instr: HloInstruction, device: int, replica_count: int,
                   num_partitions: int) -> int:
    """collective-broadcast: the device whose operand `device` receives (the first of
    its group)."""
    return group_of(instr, device, replica_count, num_partitions)[0]
