"""Algebraic simplifier rules for data movement and reductions (see algebraic_simplifier).

Movement ops only copy elements, so these rules are exact by construction; the
reduce rules keep the exact sequence of reducer applications. Two rules reach
past movement: a sum of zero-padded pieces becomes their concatenation (exact,
signed zeros included), and a transposed dot becomes the dot with its operands
swapped (the same products over the same contraction; a dot's order of
summation is the backend's either way).
"""
from __future__ import annotations

import math

from ..hlo import HloInstruction, Shape, SliceDim

from .algebraic_simplifier import can_forward, is_float, is_splat, make, rule, splat_value
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


@rule("add")
def _sum_of_disjoint_pads(instr):
    """pad(a) + pad(b) + pad(c), zero-padded along one dimension where the pieces do
    not overlap, is concatenate(a, b, c) (gaps filled with the zero): the gradient of
    slicing one array into parts (attention's q, k, v from one projection) comes out
    of autodiff as this sum. Fused, the sum evaluates every pad's bounds and adds its
    zeros at every element; the concatenation picks one source per element.

    Exact: at each position one piece's value x meets only zeros. With -0.0 padding
    x + -0 is x; with +0.0 it is x except that -0 becomes +0, so that case keeps one
    `+ 0` after the concatenation. Mixed zero signs are left alone. An add whose one
    user is another add of the same sum waits for that outer add."""
    users = instr.users
    if len(users) == 1 and users[0].opcode == "add" and users[0].parent is instr.parent:
        return None
    if not instr.shape.is_array or not _default_layouts(instr):
        return None
    terms = []
    stack = [instr]
    while stack:
        x = stack.pop()
        if x.opcode == "add" and (x is instr or (len(x.users) == 1 and x.shape == instr.shape)):
            stack.extend(reversed(x.operands))
        else:
            terms.append(x)
    if len(terms) < 2 or len(terms) > 64 or any(t.opcode != "pad" for t in terms):
        return None
    zero = terms[0].operands[1]
    value = splat_value(zero)
    if value is None or isinstance(value, complex) or value != 0:
        return None
    sign = math.copysign(1.0, value) if is_float(instr) else 1.0
    dim = None
    pieces = []
    for t in terms:
        if not _default_layouts(t, t.operands[0]) or not is_splat(t.operands[1], value):
            return None
        padded = [d for d, p in enumerate(t.attrs["padding"]) if p.low or p.high or p.interior]
        if len(padded) > 1 or any(p.interior or p.low < 0 or p.high < 0
                                  for p in t.attrs["padding"]):
            return None
        if padded:
            if dim is not None and padded[0] != dim:
                return None
            dim = padded[0]
        pieces.append(t)
    if dim is None:
        return None                       # nothing padded: not a concatenation
    spans = sorted((t.attrs["padding"][dim].low, t.operands[0].shape.dims[dim], t.operands[0])
                   for t in pieces)
    operands = []
    at = 0
    for low, size, piece in spans:
        if low < at:
            return None                   # the pieces overlap
        if low > at:
            operands.append(_zeros_along(instr, zero, dim, low - at))
        if size:
            operands.append(piece)
        at = low + size
    if at < instr.shape.dims[dim]:
        operands.append(_zeros_along(instr, zero, dim, instr.shape.dims[dim] - at))
    if len(operands) == 1:
        return None
    concat = new_instruction(instr.parent, "concatenate", instr.shape, operands, before=instr,
                             attrs={"dimensions": (dim,)})
    if sign < 0 or not is_float(instr):
        return concat
    spread = new_instruction(instr.parent, "broadcast", instr.shape, [zero.operands[0]
                             if zero.opcode == "broadcast" else zero], before=instr,
                             attrs={"dimensions": ()})
    return make(instr, "add", [concat, spread])


def _zeros_along(instr: HloInstruction, zero: HloInstruction, dim: int, size: int):
    """broadcast(zero) of instr's shape with `size` elements along `dim`."""
    scalar = zero.operands[0] if zero.opcode == "broadcast" else zero
    dims = list(instr.shape.dims)
    dims[dim] = size
    return new_instruction(instr.parent, "broadcast", instr.shape.with_dims(tuple(dims)),
                           [scalar], before=instr, attrs={"dimensions": ()})


_DOT_KEYS = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims",
             "rhs_contracting_dims", "operand_precision", "metadata"}


def swapped_dot_attrs(dot: HloInstruction, perm: tuple) -> dict | None:
    """The attributes of dot(b, a) when a transpose by `perm` of `dot` = dot(a, b) puts
    b's free dimensions before a's (batch dimensions first, kept): the same products
    and sums in the order the transpose reads them. None for any other transpose, or a
    dot with attributes this does not know how to swap (frontend attributes, sparsity)."""
    if dot.opcode != "dot" or not set(dot.attrs) <= _DOT_KEYS:
        return None
    lhs, rhs = dot.operands
    lb, rb = dot.dims("lhs_batch_dims"), dot.dims("rhs_batch_dims")
    lc, rc = dot.dims("lhs_contracting_dims"), dot.dims("rhs_contracting_dims")
    nb = len(lb)
    nl = lhs.shape.rank - nb - len(lc)
    nr = rhs.shape.rank - nb - len(rc)
    if not nl or not nr or tuple(perm) != (tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr))
                                           + tuple(range(nb, nb + nl))):
        return None
    attrs = {"lhs_batch_dims": rb, "rhs_batch_dims": lb} if nb else {}
    attrs.update(lhs_contracting_dims=rc, rhs_contracting_dims=lc)
    precision = dot.attrs.get("operand_precision")
    if precision is not None:
        text = getattr(precision, "text", None)
        parts = text.strip().strip("{}").split(",") if isinstance(text, str) else []
        if len(parts) != 2:
            return None
        attrs["operand_precision"] = type(precision)(text="{" + parts[1] + "," + parts[0] + "}")
    return attrs


@rule("transpose")
def _transpose_of_dot(instr):
    """transpose(dot(a, b)) that puts b's free dimensions before a's is dot(b, a):
    the same products and sums, written in the order the consumer reads them, so
    no transposing pass over the product (autodiff makes such a dot for the
    gradient of the keys in attention, q @ k^T)."""
    dot = instr.operands[0]
    if dot.opcode != "dot" or len(dot.users) != 1 or not _default_layouts(instr, dot):
        return None
    attrs = swapped_dot_attrs(dot, instr.dims())
    if attrs is None:
        return None
    lhs, rhs = dot.operands
    return make(instr, "dot", [rhs, lhs], **attrs)
