"""The order a program's instructions run in: a list schedule that keeps the temp arena small.

Any topological order computes the same values; they differ in how many temporaries are
alive at once, and the arena (buffer_assignment.py) is at least that peak. The post-order
of the HLO (operands depth-first) often computes every gradient of a backward pass
before the first update that reads one, so all of them are alive together. XLA's CPU
backend orders instructions with a memory-minimizing scheduler before it assigns
buffers; this is the same idea in its simplest form, a greedy list scheduler:

    ready = instructions whose operands (and control predecessors) have run
    repeat: run the ready instruction that frees the most bytes net of what it
            allocates (ties: the earliest in post-order); an async -start at once
            and what it waits for first, an async -done only when nothing else is
            ready

An instruction frees a buffer when it is the buffer's last reader. Instructions that
only name other buffers (tuple, get-tuple-element, bitcast, copy, reshape: they get no
slot of their own) run as soon as they are ready and read through to the buffers they
name. Parameters, constants and the buffers the root returns are never temps: they
neither count as allocated nor freed. Instructions with effects beyond their result
(collectives, custom-calls, rng, infeed/outfeed, send/recv) keep their relative
order, so every device of a program issues its collectives alike.
"""
from __future__ import annotations

_ALIASES = frozenset({"tuple", "get-tuple-element", "bitcast", "copy", "reshape"})
_PINNED = frozenset({"parameter", "constant"})
# Besides what the opcode table marks as a side effect or a collective: control flow,
# whose called computations may hold either, and add-dependency, an ordering itself.
_ORDERED_CONTROL = frozenset({"while", "conditional", "call", "add-dependency"})


def _bytes(shape) -> int:
    return sum(leaf.nbytes for leaf in shape.leaves() if leaf.is_array)


def memory_order(comp) -> list:
    """The instructions of `comp` in the order the program runs them (module docstring)."""
    order = comp.post_order()
    n = len(order)
    if n < 3:
        return order
    index = {id(x): i for i, x in enumerate(order)}
    owners: list[tuple] = []
    size = [0] * n
    pinned: set[int] = set()
    for i, x in enumerate(order):
        if x.opcode in _PINNED:
            owners.append((i,))
            pinned.add(i)
        elif x.opcode in _ALIASES:
            found: list[int] = []
            for o in (x.operands if x.opcode == "tuple" else x.operands[:1]):
                found.extend(b for b in owners[index[id(o)]] if b not in found)
            owners.append(tuple(found))
        else:
            owners.append((i,))
            size[i] = _bytes(x.shape)
    pinned.update(owners[index[id(comp.root)]])
    alias = [x.opcode in _ALIASES for x in order]
    reads: list[tuple] = []
    remaining = [0] * n
    for i, x in enumerate(order):
        if alias[i]:
            reads.append(())
            continue
        found = []
        for o in x.operands:
            found.extend(b for b in owners[index[id(o)]] if b not in found)
        reads.append(tuple(found))
        for b in found:
            remaining[b] += 1

    # Dependencies: operands, control predecessors, and the chain of ordered instructions.
    waiting = [0] * n
    users: list[list[int]] = [[] for _ in range(n)]
    previous_ordered = None
    for i, x in enumerate(order):
        preds = {index[id(o)] for o in x.operands} | \
            {index[id(o)] for o in x.control_predecessors if id(o) in index}
        if x.info.side_effect or x.info.collective or x.opcode in _ORDERED_CONTROL:
            if previous_ordered is not None:
                preds.add(previous_ordered)
            previous_ordered = i
        waiting[i] = len(preds)
        for p in preds:
            users[p].append(i)

    # Asynchronous pairs: a -start runs as soon as it can and a -done as late as it can,
    # so that kernels run while the collective is in flight (collective_thunks.schedule
    # then keeps them apart; a done placed right after its start leaves nothing to move).
    start = [x.opcode.endswith("-start") for x in order]
    done = [x.opcode.endswith("-done") for x in order]
    # What the next -start (in their fixed order) waits for runs first: the earlier a
    # collective starts, the more work can hide it (a data-parallel step: each
    # gradient's exchange starts as soon as the gradient exists, in the order the
    # backward pass makes them).
    starts = [i for i in range(n) if start[i]]
    feeds: list[set] = []
    for i in starts:
        found: set[int] = set()
        stack = [i]
        while stack:
            for o in order[stack.pop()].operands:
                j = index[id(o)]
                if j not in found:
                    found.add(j)
                    stack.append(j)
        feeds.append(found)
    next_start = 0
    ready = [i for i in range(n) if waiting[i] == 0]
    result = []
    while ready:
        best, best_key = None, None
        for i in ready:
            if alias[i] or start[i]:
                best = i
                break
            freed = sum(size[b] for b in reads[i] if remaining[b] == 1 and b not in pinned)
            urgent = next_start < len(starts) and i in feeds[next_start]
            key = (urgent, not done[i], freed - (0 if i in pinned else size[i]), -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        ready.remove(best)
        result.append(order[best])
        if start[best]:
            next_start += 1
        for b in reads[best]:
            remaining[b] -= 1
        for u in users[best]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if len(result) != n:                   # a cycle cannot reach here (post_order ran)
        raise AssertionError(f"schedule of {comp.name}: {len(result)} of {n} instructions")
    return result
