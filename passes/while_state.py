"""Changing the state tuple of a while loop: adding leaves (loop-invariant code motion
hoists values into new ones) and removing leaves (the simplifier drops dead ones).

A while's state type appears in five places that must agree: the while's shape, its
init, the cond's and the body's parameter, and the body's root. These helpers change
all five together, for loops whose state is a tuple that every reader takes apart with
get-tuple-element (`can_reshape_state` says which; the others are left alone).
"""
from __future__ import annotations

from ..hlo import HloInstruction, Shape

from .dce import remove_dead_instructions
from .hlo_utils import new_instruction


def can_reshape_state(loop: HloInstruction, callers: dict[int, int]) -> bool:
    """The state is a tuple; cond and body are called by this loop alone; every reader
    of the cond's and body's parameter is a get-tuple-element; the body's root is a
    tuple instruction."""
    cond, body = loop.attrs["condition"], loop.attrs["body"]
    if not loop.shape.is_tuple or callers.get(id(cond)) != 1 or callers.get(id(body)) != 1:
        return False
    if body.root.opcode != "tuple":
        return False
    for comp in (cond, body):
        if any(u.opcode != "get-tuple-element" for u in comp.parameters[0].users):
            return False
    return True


def init_elements(loop: HloInstruction) -> list[HloInstruction]:
    """The init's elements as instructions of the loop's computation: the tuple's
    operands, or get-tuple-elements of the init made before the loop."""
    init = loop.operands[0]
    if init.opcode == "tuple":
        return list(init.operands)
    return [new_instruction(loop.parent, "get-tuple-element", shape, [init], before=loop,
                            attrs={"index": k})
            for k, shape in enumerate(init.shape.tuple_shapes)]


def add_leaves(loop: HloInstruction, values: list[HloInstruction],
               elements: list[HloInstruction] | None = None) -> list[HloInstruction]:
    """Appends one state leaf per value of `values` (instructions before the loop),
    passed through by the body unchanged. Returns the body's get-tuple-element of each
    new leaf, for the body's instructions to read. `elements`: `init_elements(loop)`,
    when the caller has them."""
    comp = loop.parent
    cond, body = loop.attrs["condition"], loop.attrs["body"]
    n = len(loop.shape.tuple_shapes)
    extra = [v.shape for v in values]
    elements = (init_elements(loop) if elements is None else list(elements)) + list(values)
    init = new_instruction(comp, "tuple", _widened(loop.operands[0].shape, extra), elements,
                           before=loop)
    old_init = loop.operands[0]
    loop.replace_operand(0, init)
    if not old_init.users and not old_init.is_root and old_init.opcode == "tuple":
        comp.remove_instruction(old_init)
    loop.shape = _widened(loop.shape, extra)
    cparam, bparam = cond.parameters[0], body.parameters[0]
    cparam.shape = _widened(cparam.shape, extra)
    bparam.shape = _widened(bparam.shape, extra)
    reads = [new_instruction(body, "get-tuple-element", shape, [bparam], before=body.root,
                             attrs={"index": n + i}) for i, shape in enumerate(extra)]
    old_root = body.root
    root = new_instruction(body, "tuple", _widened(old_root.shape, extra),
                           list(old_root.operands) + reads)
    body.set_root(root)
    body.remove_instruction(old_root)
    return reads


def remove_leaves(loop: HloInstruction, dead: set[int]) -> None:
    """Drops the state leaves `dead`: nothing outside the loop reads them (every user of
    the loop is a get-tuple-element of another leaf), the cond does not, and in the
    body they only feed their own next value (the caller checked all of it)."""
    comp = loop.parent
    cond, body = loop.attrs["condition"], loop.attrs["body"]
    n = len(loop.shape.tuple_shapes)
    keep = [k for k in range(n) if k not in dead]
    renumber = {k: i for i, k in enumerate(keep)}
    elements = init_elements(loop)
    old_init = loop.operands[0]
    init = new_instruction(comp, "tuple", _narrowed(old_init.shape, keep),
                           [elements[k] for k in keep], before=loop)
    loop.replace_operand(0, init)
    if not old_init.users and not old_init.is_root and old_init.opcode == "tuple":
        comp.remove_instruction(old_init)
    old_root = body.root
    root = new_instruction(body, "tuple", _narrowed(old_root.shape, keep),
                           [old_root.operands[k] for k in keep])
    body.set_root(root)
    body.remove_instruction(old_root)
    for c in (cond, body):
        remove_dead_instructions(c)
        param = c.parameters[0]
        for gte in list(param.users):
            gte.attrs["index"] = renumber[gte.attrs["index"]]
        param.shape = _narrowed(param.shape, keep)
    for user in loop.users:
        user.attrs["index"] = renumber[user.attrs["index"]]
    loop.shape = _narrowed(loop.shape, keep)
    # A backend_config naming a leaf by its index (XLA's known_induction_variable) would
    # now name another one: drop it (while-trip-count writes a fresh one).
    config = loop.attrs.get("backend_config")
    if config is not None and "tuple_index" in getattr(config, "text", ""):
        del loop.attrs["backend_config"]


def _widened(shape: Shape, extra: list[Shape]) -> Shape:
    return Shape.tuple_of(list(shape.tuple_shapes) + list(extra))


def _narrowed(shape: Shape, keep: list[int]) -> Shape:
    return Shape.tuple_of([shape.tuple_shapes[k] for k in keep])
