"""The partitioner's last step: all-reduces that are only added together become one.

A dot split on its contraction ends in an all-reduce, and a sum of such dots (the
gradient of an input that feeds several column-parallel layers, say the query, key and
value projections of an attention block) becomes a sum of all-reduces. Adding before
reducing is the same sum over the devices, so

    add(reshape(all-reduce(a)), all-reduce(b))  ->  all-reduce(add(reshape(a), b))

when both all-reduces add (their reducer is one `add` of its two parameters) over the
same device groups and each is read only on its way into the add (through shape-only
reshape / bitcast / copy links, replayed on the local value). Repeated over a chain of
adds, k all-reduces become one (XLA's all-reduce reassociation). The numbers are the
same sums in another order (f32 rounding).
"""
from __future__ import annotations

from ..hlo import HloComputation, HloInstruction

SHAPE_ONLY = ("reshape", "bitcast", "copy")


def _adds(reducer) -> bool:
    root = reducer.root if reducer is not None else None
    return root is not None and root.opcode == "add" and \
        [o.opcode for o in root.operands] == ["parameter", "parameter"]


def _all_reduce_under(x: HloInstruction, add: HloInstruction):
    """(the all-reduce, the shape-only links from the add's operand down to it) when
    `x` reads an adding all-reduce used only on this path; else None."""
    chain = []
    while x.opcode in SHAPE_ONLY and len(x.operands) == 1:
        chain.append(x)
        x = x.operands[0]
    if x.opcode != "all-reduce" or len(x.operands) != 1 or not x.shape.is_array or \
            not _adds(x.attrs.get("to_apply")):
        return None
    path = chain + [x]
    if path[0].users != [add] or any(len(n.users) != 1 for n in path[1:]):
        return None
    return x, chain


def _same_exchange(a: HloInstruction, b: HloInstruction) -> bool:
    keys = ("replica_groups", "use_global_device_ids")
    return all(a.attrs.get(k) == b.attrs.get(k) for k in keys) and \
        ("channel_id" in a.attrs) == ("channel_id" in b.attrs) and \
        a.shape.element_type == b.shape.element_type


def combine_all_reduces(comp: HloComputation, new_channel) -> int:
    """Rewrites every add of two all-reduces in `comp` as above; returns how many.
    `new_channel()` gives the combined all-reduce its channel id."""
    module = comp.parent
    done = 0
    for instr in list(comp.post_order()):
        if instr.parent is not comp or instr.opcode != "add" or len(instr.operands) != 2 or \
                instr.operands[0] is instr.operands[1]:
            continue
        found = [_all_reduce_under(o, instr) for o in instr.operands]
        if None in found or not _same_exchange(found[0][0], found[1][0]):
            continue
        local = []
        for reduce, chain in found:
            x = reduce.operands[0]
            for link in reversed(chain):
                x = comp.add_instruction(HloInstruction(
                    link.opcode, link.shape, [x], dict(link.attrs),
                    name=module.uniquify(link.name)), before=instr)
            local.append(x)
        total = comp.add_instruction(HloInstruction(
            "add", instr.shape, local, name=module.uniquify("add")), before=instr)
        attrs = dict(found[0][0].attrs)
        if "channel_id" in attrs:
            attrs["channel_id"] = new_channel()
        combined = comp.add_instruction(HloInstruction(
            "all-reduce", instr.shape, [total], attrs, name=module.uniquify("all-reduce")),
            before=instr)
        comp.replace_instruction(instr, combined)
        for reduce, chain in found:
            for node in chain + [reduce]:
                if not node.users:
                    comp.remove_instruction(node)
        done += 1
    return done
