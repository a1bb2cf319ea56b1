"""Row-wise hoisting: compute a fusion's inner reductions once per row, not per element.

In a fused softmax or layernorm the root reads, for each element [i, j], a
value like `broadcast(reduce(x))[i, j] = sum_k x[i, k]`. Computing that reduce
inside the element loop would redo a whole row per element. Instead, the loop
nest evaluates each such reduce as soon as the loops of every dimension it
depends on are open (here: inside the `i` loop, before the `j` loop), in a memo
scope that lives as long as that loop iteration. When the element body later
asks for the same reduce at the same index values, the memo answers: the row is
reduced once, then the `j` loop only reads a loop-invariant scalar.

    for i in [begin, end):
      m = max_k x[i, k]                   # hoisted
      s = sum_k exp(x[i, k] - m)          # hoisted (reads m from the memo)
      for j in [0, n):
        out[i, j] = exp(x[i, j] - m) / s  # vectorized

Which reduces, and at which index: a walk from the root towards the operands
records, for each instruction, the root dimension each of its own dimensions
follows (through elementwise ops, broadcasts, transposes, reshapes that only add
or drop size-1 dimensions, and the kept dimensions of reduces). Hoisting is only
a precomputation: a reduce reached with other index values is still computed
where it is used, so the plan never changes results.
"""
from __future__ import annotations

from ..llvm.loops import i64

from .generators import memo_key, nondegenerate_dims
from .vector_gen import emit_row_reduce

ZERO = "zero"     # a size-1 dimension: its index is always 0


def plan_hoisting(root) -> list[tuple[object, list]]:
    """[(reduce, its dims as root dims or ZERO)] for the reduces worth hoisting."""
    comp = root.parent
    if root.shape.is_tuple and root.opcode != "tuple":
        return []                    # a variadic reduce root: nothing above it to hoist
    maps: dict = {root: list(range(root.shape.rank))}
    if root.opcode == "tuple":
        maps = {e: list(range(e.shape.rank)) for e in root.operands}
    for instr in reversed(comp.post_order()):
        mapping = maps.get(instr)
        if mapping is None:
            continue
        for i, operand in enumerate(instr.operands):
            derived = _operand_map(instr, i, mapping)
            if derived is not None and None not in derived and operand not in maps:
                maps[operand] = derived
    innermost = root.shape.minor_to_major()[0] if root.shape.rank and root.opcode != "tuple" \
        else None
    plan = []
    for instr in comp.post_order():
        if instr.opcode == "reduce" and instr is not root and instr in maps:
            dims = {d for d in maps[instr] if d != ZERO}
            if innermost is None or innermost not in dims:
                plan.append((instr, maps[instr]))
    return plan


def _operand_map(user, i, mapping) -> list | None:
    """The root dims of operand i's dimensions, given the user's; None where unknown."""
    operand = user.operands[i].shape
    op = user.opcode
    if user.shape.is_tuple or not operand.is_array:
        return None
    if user.info.is_elementwise:
        return list(mapping) if operand.rank == user.shape.rank else \
            ([] if operand.rank == 0 else None)
    if op == "broadcast":
        return [mapping[d] for d in user.dims()]
    if op == "transpose":
        result = [None] * operand.rank
        for j, d in enumerate(user.dims()):
            result[d] = mapping[j]
        return result
    if op in ("reshape", "bitcast"):
        physical = op == "bitcast"
        out_dims = nondegenerate_dims(user.shape, physical)
        in_dims = nondegenerate_dims(operand, physical)
        if [user.shape.dims[d] for d in out_dims] != [operand.dims[d] for d in in_dims]:
            return None
        result = [ZERO] * operand.rank
        for o, d in zip(out_dims, in_dims):
            result[d] = mapping[o]
        return result
    if op == "reduce" and i < len(user.operands) // 2:
        kept = [d for d in range(operand.rank) if d not in set(user.dims())]
        result = [None] * operand.rank
        for k, d in enumerate(kept):
            result[d] = mapping[k]
        return result
    return None


def make_hoister(plan, gens, kernel=None):
    """The loop-nest callback: emits each planned reduce once its dims are all open.

    With `kernel`, a reduce along its input's minor dimension is emitted on vectors
    when it can be (vector_gen.emit_row_reduce), and its value put in the memo where
    the reduce's scalar generator finds it."""
    emitted_at: dict = {}

    def hoist(b, opened: set, index: list) -> None:
        for instr, mapping in plan:
            needs = {d for d in mapping if d != ZERO}
            if needs <= opened and emitted_at.get(id(instr)) in (None, len(opened)):
                emitted_at[id(instr)] = len(opened)
                at = [i64(0) if d == ZERO else index[d] for d in mapping]
                value = emit_row_reduce(kernel, gens, instr, at) if kernel is not None else None
                if value is None:
                    gens[instr](b, at)
                else:
                    kernel.memo_put(memo_key(instr, at), value)
    return hoist
