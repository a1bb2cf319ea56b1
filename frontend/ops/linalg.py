"""Matrix products and linear algebra (tf.linalg names): matmul (TensorFlow's signature,
numpy's `@` for 1-D operands), batch_matmul, einsum, eye, band_part, norm."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from .core import apply, cast, constant, promote, user_error


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, output_type=None, grad_a=False,
           grad_b=False, name=None):
    """a @ b. Rank 2: MatMul; higher ranks: BatchMatMul with broadcast batch dims;
    a 1-D operand is a row (a) or column (b) vector that is dropped from the result.
    adjoint_a/b transpose (and conjugate complex values); output_type (int8
    inputs, an int32 result, as TF) computes in that type; the sparsity and grad_a/b
    hints are accepted and change nothing."""
    a, b = promote(a, b)
    if (transpose_a and adjoint_a) or (transpose_b and adjoint_b):
        raise user_error(ValueError, "matmul: transpose_a and adjoint_a (transpose_b and "
                                     "adjoint_b) cannot both be True")
    if dtypes.kind(a.dtype) == "complex":          # the adjoint conjugates, then transposes
        from .math import conj
        a = conj(a) if adjoint_a else a
        b = conj(b) if adjoint_b else b
    transpose_a = bool(transpose_a or adjoint_a)
    transpose_b = bool(transpose_b or adjoint_b)
    if output_type is not None:
        target = dtypes.canonical(output_type)
        if target != a.dtype:
            a, b = cast(a, target), cast(b, target)
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
        return apply("MatMul", [a, b], transpose_a=transpose_a, transpose_b=transpose_b)
    return apply("BatchMatMul", [a, b], adj_x=transpose_a, adj_y=transpose_b)


def batch_matmul(x, y, adj_x=False, adj_y=False, name=None):
    """tf.raw_ops.BatchMatMulV2: x @ y over the last two dims, batch dims broadcast;
    adj_x/adj_y transpose (and conjugate complex values)."""
    x, y = promote(x, y)
    if dtypes.kind(x.dtype) == "complex":
        from .math import conj
        x = conj(x) if adj_x else x
        y = conj(y) if adj_y else y
    return apply("BatchMatMul", [x, y], adj_x=bool(adj_x), adj_y=bool(adj_y))


def einsum(equation, *inputs, **kwargs):
    """Einsum with numpy's notation: "ij,jk->ik", "bij,bjk->bik", "ij->ji", "ij->",
    an implicit output ("ij,jk"), an ellipsis ("...ij,...jk->...ik", whose size-1 dims
    broadcast), repeated letters in an operand (diagonals: "ii->i", traces: "ii->")
    and any number of operands ("ij,jk,kl->il", contracted pairwise from the left)."""
    from ..kernels.linalg import parse_equation
    unknown = set(kwargs) - {"name", "optimize"}
    if unknown:
        raise user_error(TypeError, f"einsum: unexpected arguments {sorted(unknown)}")
    tensors = promote(*inputs)
    equation, broadcast = _expand_ellipsis(str(equation).replace(" ", ""),
                                           [t.ndim for t in tensors])
    lhs, arrow, out = equation.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(tensors):
        raise user_error(ValueError, f"einsum {equation!r} names {len(specs)} operands, "
                                     f"got {len(tensors)}")
    if not arrow:                         # numpy's implicit output: letters used once
        joined = "".join(specs)
        out = "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    for spec, t in zip(specs, tensors):
        if len(spec) != t.ndim:
            raise user_error(ValueError, f"einsum {equation!r}: {spec!r} has {len(spec)} "
                                         f"letters but the operand is {t.aval_text()}")
    pairs = [_diagonal(t, spec, equation) for t, spec in zip(tensors, specs)]
    tensors, specs = [p[0] for p in pairs], [p[1] for p in pairs]
    tensors = _broadcast_letters(tensors, specs, broadcast)
    equation = ",".join(specs) + "->" + out
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


def _diagonal(t, spec: str, equation: str):
    """A letter repeated in one operand's spec means its diagonal: the operand with the
    later occurrence taken away (the elements where both indices agree)."""
    from .math import reduce_sum, where
    while len(set(spec)) != len(spec):
        c = next(c for c in spec if spec.count(c) > 1)
        p = spec.index(c)
        q = spec.index(c, p + 1)
        n, m = t.shape[p], t.shape[q]
        if n != m:
            raise user_error(ValueError, f"einsum {equation!r}: letter {c!r} has sizes "
                                         f"{n} and {m}")
        shape = [1] * t.ndim
        shape[p] = shape[q] = n
        mask = constant(np.eye(n, dtype=bool).reshape(shape))
        # select, not multiply: an inf off the diagonal must not become NaN
        t = reduce_sum(where(mask, t, _zeros_like(t)), q)
        spec = spec[:q] + spec[q + 1:]
    return t, spec


def _zeros_like(t):
    return apply("ZerosLike", [t])


def _broadcast_letters(tensors, specs, letters: str):
    """Operands whose ellipsis dims have size 1 where another operand's do not are
    broadcast to the other size (numpy's and TF's rule for `...`)."""
    from .array import broadcast_to
    sizes: dict[str, int] = {}
    for t, spec in zip(tensors, specs):
        for c, n in zip(spec, t.shape):
            if c in letters and n != 1:
                sizes.setdefault(c, n)
    result = []
    for t, spec in zip(tensors, specs):
        target = tuple(sizes.get(c, n) if c in letters and n == 1 else n
                       for c, n in zip(spec, t.shape))
        result.append(broadcast_to(t, target) if target != t.shape else t)
    return result


def _expand_ellipsis(equation: str, ranks: list[int]) -> str:
    """Replaces "..." by letters the equation does not use, right-aligned across the
    operands as numpy does ("...ij" of rank 4 -> "ABij"); an implicit output puts the
    ellipsis letters first."""
    if "..." not in equation:
        return equation, ""
    lhs, arrow, out = equation.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ranks):
        return equation, ""                 # einsum reports the count
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
    return ",".join(specs) + "->" + out, letters


def eye(num_rows, num_columns=None, batch_shape=None, dtype="float32", name=None):
    """The identity matrix [num_rows, num_columns] (batched over batch_shape)."""
    rows = int(num_rows)
    cols = rows if num_columns is None else int(num_columns)
    value = np.eye(rows, cols, dtype=dtypes.canonical(dtype))
    if batch_shape is not None:
        value = np.broadcast_to(value, tuple(int(d) for d in batch_shape) + (rows, cols))
    return constant(np.ascontiguousarray(value))


def band_part(input, num_lower, num_upper, name=None):
    """The band of each inner matrix: x[..., i, j] where i - j <= num_lower and
    j - i <= num_upper (a negative bound keeps that whole triangle), zero elsewhere."""
    from .array import to_tensor
    from .math import where
    x = to_tensor(input)
    if x.ndim < 2:
        raise user_error(ValueError, f"band_part: needs a matrix, got {x.aval_text()}")
    lower, upper = int(num_lower), int(num_upper)
    m, n = x.shape[-2:]
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    keep = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    return where(constant(keep), x, _zeros_like(x))


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None):
    """Vector norms (axis None or an int: ord 'euclidean', 1, 2, np.inf or any p > 0 over
    the flattened tensor or the axis) and matrix norms (axis a pair: 'fro' or
    'euclidean', 1, np.inf: the largest column / row abs sum)."""
    from .array import reshape, to_tensor
    from .math import reduce_max, reduce_sum
    from . import math as m
    x = to_tensor(tensor)
    if not dtypes.is_float(x.dtype):
        raise user_error(TypeError, f"norm: needs floating point, got {x.aval_text()}")
    keep = bool(keepdims)
    matrix = isinstance(axis, (tuple, list)) and len(axis) == 2
    if axis is None and not matrix:
        flat = reshape(x, [-1])
        out = norm(flat, ord, 0)
        return reshape(out, [1] * x.ndim) if keep else out
    if matrix:
        r, c = (int(a) % x.ndim for a in axis)
        if ord in ("euclidean", "fro"):
            return m.UNARY_FUNCTIONS["sqrt"](reduce_sum(x * x, (r, c), keep))
        if ord in (1, np.inf):
            # 1: the largest column sum (sum over rows r); inf: the largest row sum
            summed, maxed = (r, c) if ord == 1 else (c, r)
            s = reduce_sum(m.UNARY_FUNCTIONS["abs"](x), summed, keepdims=True)
            out = reduce_max(s, maxed, keepdims=True)
            return out if keep else reshape(out, [n for d, n in enumerate(x.shape)
                                                  if d not in (r, c)])
        raise user_error(ValueError, f"norm: matrix ord must be 'fro', 'euclidean', 1 or "
                                     f"inf, got {ord!r}")
    if isinstance(axis, (tuple, list)):
        if len(axis) != 1:
            raise user_error(ValueError, f"norm: axis must be an int or a pair, got {axis}")
        axis = axis[0]
    a = m.UNARY_FUNCTIONS["abs"](x)
    if ord in ("euclidean", 2, 2.0):
        return m.UNARY_FUNCTIONS["sqrt"](reduce_sum(x * x, axis, keep))
    if ord in (1, 1.0):
        return reduce_sum(a, axis, keep)
    if ord in (np.inf, float("inf")):
        return reduce_max(a, axis, keep)
    if isinstance(ord, (int, float)) and not isinstance(ord, bool) and ord > 0:
        return m.pow(reduce_sum(m.pow(a, float(ord)), axis, keep), 1.0 / ord)
    raise user_error(ValueError, f"norm: ord must be 'euclidean', 'fro', a number > 0 or "
                                 f"inf, got {ord!r}")

