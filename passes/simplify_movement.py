"""Algebraic simplifier rules for data movement and reductions (see algebraic_simplifier).

Movement ops only copy elements, so these rules are exact by construction; the
reduce rules keep the exact sequence of reducer applications.
"""
from __future__ import annotations

from ..hlo import HloInstruction, Shape, SliceDim

from .algebraic_simplifier import can_forward, make, rule
from .hlo_utils import new_instruction


@rule("reshape", "transpose", "slice", "reverse", "broadcast")
def _move_scalar_broadcast(instr):
    # reshape/transpose/slice/reverse/broadcast(broadcast(s)) -> broadcast(s): every
    # element is still s. Keeps splats symbolic, so fusion and folding see them.
    value = instr.operands[0]
    if (value.opcode == "broadcast" and value.operands[0].shape.is_scalar
            and instr.shape.is_array and _default_layouts(instr)):
        return make(instr, "broadcast", [value.operands[0]], dimensions=())
    return None


@rule("reshape", "bitcast")
def _noop_reshape(instr):
    # reshape(x) -> x when the dimensions already match
    value = instr.operands[0]
    return value if can_forward(instr, value) else None


@rule("reshape")
def _reshape_of_reshape(instr):
    # reshape(reshape(x)) -> reshape(x): both keep row-major element order
    inner = instr.operands[0]
    if inner.opcode != "reshape" or not _default_layouts(instr, inner, inner.operands[0]):
        return None
    return make(instr, "reshape", [inner.operands[0]])


@rule("transpose")
def _transpose(instr):
    perm = instr.dims()
    value = instr.operands[0]
    if perm == tuple(range(len(perm))) and can_forward(instr, value):
        return value                      # transpose(x, identity) -> x
    if value.opcode == "transpose" and _default_layouts(instr, value):
        # transpose(transpose(x, p1), p2) -> transpose(x, p1[p2[i]])
        inner = value.dims()
        return make(instr, "transpose", [value.operands[0]],
                    dimensions=tuple(inner[p] for p in perm))
    return None


@rule("broadcast")
def _broadcast(instr):
    value = instr.operands[0]
    dims = instr.dims()
    if dims == tuple(range(value.shape.rank)) and can_forward(instr, value):
        return value                      # broadcast to its own shape -> x
    if value.opcode == "broadcast":
        # broadcast(broadcast(x, d1), d2) -> broadcast(x, d2[d1])
        inner = value.dims()
        return make(instr, "broadcast", [value.operands[0]],
                    dimensions=tuple(dims[d] for d in inner))
    return None


@rule("slice")
def _slice(instr):
    value = instr.operands[0]
    sl = instr.attrs["slice"]
    if all(s.start == 0 and s.stride == 1 and s.limit == d
           for s, d in zip(sl, value.shape.dims)) and can_forward(instr, value):
        return value                      # a slice of everything -> x
    if value.opcode == "slice":
        # slice(slice(x)): z[k] = y[s2 + k t2] = x[s1 + (s2 + k t2) t1]
        composed = []
        for outer, inner, n in zip(sl, value.attrs["slice"], instr.shape.dims):
            if n == 0:    # empty: s1 + s2 t1 may lie past x's end, so take [s1:s1]
                composed.append(SliceDim(inner.start, inner.start, 1))
                continue
            start = inner.start + outer.start * inner.stride
            stride = inner.stride * outer.stride
            composed.append(SliceDim(start, start + (n - 1) * stride + 1, stride))
        return make(instr, "slice", [value.operands[0]], slice=tuple(composed))
    return None


@rule("concatenate")
def _concatenate_one(instr):
    # concatenate(x) -> x
    if len(instr.operands) == 1 and can_forward(instr, instr.operands[0]):
        return instr.operands[0]
    return None


@rule("pad")
def _noop_pad(instr):
    # pad(x, v) with no padding anywhere -> x
    if all(p.low == 0 and p.high == 0 and p.interior == 0 for p in instr.attrs["padding"]):
        value = instr.operands[0]
        return value if can_forward(instr, value) else None
    return None


@rule("reverse")
def _noop_reverse(instr):
    # reversing only size-1 dimensions -> x
    value = instr.operands[0]
    if all(value.shape.dims[d] == 1 for d in instr.dims()) and can_forward(instr, value):
        return value
    return None


@rule("reduce")
def _reduce_size_one_dims(instr):
    """Reduced dimensions of size 1 contribute one element each: drop them.

    reduce(x[R,1,N], dims={1,2}) -> reduce(reshape(x)[R,N], dims={1}); when
    every reduced dimension has size 1 the result is reducer(init, x), which
    we keep as that elementwise op (so -0.0 + 0 still gives +0.0 as XLA does).
    """
    if len(instr.operands) != 2 or not instr.shape.is_array:
        return None
    data, init = instr.operands
    dims = instr.dims()
    unit = [d for d in dims if data.shape.dims[d] == 1]
    if not unit or not _default_layouts(instr, data):
        return None
    kept = [d for d in range(data.shape.rank) if d not in unit]
    rest = tuple(kept.index(d) for d in dims if d not in unit)
    root = instr.to_apply.root
    if not rest and not _is_plain_binary(instr.to_apply):
        return None
    reshaped = new_instruction(instr.parent, "reshape",
                               Shape(data.shape.element_type, [data.shape.dims[d] for d in kept]),
                               [data], before=instr)
    if rest:
        return make(instr, "reduce", [reshaped, init], dimensions=rest,
                    to_apply=instr.attrs["to_apply"])
    # reducer(accumulator=param 0, element=param 1) applied to (init, x)
    spread = new_instruction(instr.parent, "broadcast", instr.shape, [init], before=instr,
                             attrs={"dimensions": ()})
    by_number = {0: spread, 1: reshaped}
    operands = [by_number[o.parameter_number] for o in root.operands]
    return new_instruction(instr.parent, root.opcode, instr.shape, operands, before=instr,
                           attrs={k: v for k, v in root.attrs.items() if k != "metadata"})


def _is_plain_binary(reducer) -> bool:
    """A reducer that is one elementwise op of its two parameters (add, max, ...)."""
    root = reducer.root
    return (len(reducer.instructions) == 3 and len(root.operands) == 2
            and root.info.is_elementwise
            and all(o.opcode == "parameter" for o in root.operands))


def _default_layouts(*instrs: HloInstruction) -> bool:
    """Rules that reinterpret element order assume row-major layouts."""
    return all(i.shape.has_default_layout() for i in instrs)
