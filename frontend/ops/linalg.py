"""Matrix products: matmul (TensorFlow's signature, numpy's `@` for 1-D operands),
batch_matmul and einsum."""
from __future__ import annotations

from .core import apply, promote, user_error


def matmul(a, b, transpose_a=False, transpose_b=False):
    """a @ b. Rank 2: MatMul; higher ranks: BatchMatMul with broadcast batch dims;
    a 1-D operand is a row (a) or column (b) vector that is dropped from the result."""
    a, b = promote(a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise user_error(ValueError, f"matmul: operands must not be scalars, got "
                                     f"{a.aval_text()} and {b.aval_text()}")
    if a.ndim == 1 or b.ndim == 1:
        if transpose_a or transpose_b:
            raise user_error(ValueError, "matmul: transpose_a/b need operands of rank >= 2")
        from .array import expand_dims, squeeze
        a2 = expand_dims(a, 0) if a.ndim == 1 else a
        b2 = expand_dims(b, -1) if b.ndim == 1 else b
        out = matmul(a2, b2)
        if b.ndim == 1:
            out = squeeze(out, -1)
        if a.ndim == 1:
            out = squeeze(out, -2 if b.ndim != 1 else -1)
        return out
    if a.ndim == 2 and b.ndim == 2:
        return apply("MatMul", [a, b], transpose_a=bool(transpose_a),
                     transpose_b=bool(transpose_b))
    return apply("BatchMatMul", [a, b], adj_x=bool(transpose_a), adj_y=bool(transpose_b))


def batch_matmul(x, y, adj_x=False, adj_y=False):
    return apply("BatchMatMul", promote(x, y), adj_x=bool(adj_x), adj_y=bool(adj_y))


def einsum(equation, *inputs):
    """Einsum with numpy's notation: "ij,jk->ik", "bij,bjk->bik", "ij->ji", "ij->",
    an implicit output ("ij,jk"), an ellipsis ("...ij,...jk->...ik") and any number of
    operands ("ij,jk,kl->il", contracted pairwise from the left). Each letter names
    distinct dims of one size (no diagonals, no broadcasting of size-1 dims)."""
    from ..kernels.linalg import parse_equation
    tensors = promote(*inputs)
    equation = _expand_ellipsis(str(equation).replace(" ", ""), [t.ndim for t in tensors])
    if len(tensors) <= 2:
        return apply("Einsum", tensors, equation=equation)   # the kernel checks it
    specs, out = parse_equation(equation, len(tensors))
    # Fold from the left; an intermediate keeps only the letters needed later.
    acc, acc_spec = tensors[0], specs[0]
    for k in range(1, len(specs)):
        if k == len(specs) - 1:
            keep = out
        else:
            later = set(out).union(*specs[k + 1:])
            keep = "".join(c for c in dict.fromkeys(acc_spec + specs[k]) if c in later)
        acc = apply("Einsum", [acc, tensors[k]], equation=f"{acc_spec},{specs[k]}->{keep}")
        acc_spec = keep
    return acc


def _expand_ellipsis(equation: str, ranks: list[int]) -> str:
    """Replaces "..." by letters the equation does not use, right-aligned across the
    operands as numpy does ("...ij" of rank 4 -> "ABij"); an implicit output puts the
    ellipsis letters first."""
    if "..." not in equation:
        return equation
    lhs, arrow, out = equation.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ranks):
        return equation                     # parse_equation reports the count
    widths = []
    for spec, rank in zip(specs, ranks):
        named = len(spec.replace("...", ""))
        if "..." in spec and rank < named:
            raise user_error(ValueError, f"einsum {equation!r}: {spec!r} names {named} dims "
                                         f"but the operand has rank {rank}")
        widths.append(rank - named if "..." in spec else 0)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
            if c not in equation]
    letters = "".join(free[:max(widths)])
    specs = [s.replace("...", letters[len(letters) - w:]) for s, w in zip(specs, widths)]
    if arrow:
        out = out.replace("...", letters)
    else:
        joined = "".join(specs)
        out = letters + "".join(sorted(c for c in set(joined)
                                       if joined.count(c) == 1 and c not in letters))
    return ",".join(specs) + "->" + out
