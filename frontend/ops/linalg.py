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
    """Einsum of one or two operands ("ij,jk->ik", "bij,bjk->bik", "ij->ji", "ij->")."""
    return apply("Einsum", promote(*inputs), equation=str(equation))
