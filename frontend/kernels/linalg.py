"""Contraction kernels: MatMul, BatchMatMul, Einsum — all one HLO `dot` each.

`dot` contracts named dims of two operands, keeps named batch dims, and puts
the result dims in the order batch, lhs free, rhs free; the kernels choose
the dims and add a transpose when the requested order differs.
"""
from __future__ import annotations

from ..registry import XlaOpKernel, register_xla_op
from .common import broadcast_shapes, broadcast_to, require_same_types, sum_wide


def _check_contracting(a_size: int, b_size: int, a_dims, b_dims) -> None:
    if a_size != b_size:
        raise ValueError(f"contracting dims differ: {a_size} in {list(a_dims)} vs "
                         f"{b_size} in {list(b_dims)}")


@register_xla_op("MatMul")
class MatMul(XlaOpKernel):
    """2-D a @ b, with transpose_a / transpose_b applied first."""

    def compile(self, ctx):
        a, b = ctx.inputs
        require_same_types([a, b])
        ad, bd = ctx.input_shape(0), ctx.input_shape(1)
        if len(ad) != 2 or len(bd) != 2:
            raise ValueError(f"operands must be matrices, got {list(ad)} and {list(bd)}")
        ka = 0 if ctx.attr("transpose_a", False) else 1
        kb = 1 if ctx.attr("transpose_b", False) else 0
        _check_contracting(ad[ka], bd[kb], ad, bd)
        ctx.set_output(0, ctx.builder.dot(a, b, lhs_contracting=[ka], rhs_contracting=[kb]))


@register_xla_op("BatchMatMul")
class BatchMatMul(XlaOpKernel):
    """x @ y over the last two dims; the leading (batch) dims broadcast (adj_x, adj_y)."""

    def compile(self, ctx):
        bld = ctx.builder
        x, y = ctx.inputs
        require_same_types([x, y])
        xd, yd = ctx.input_shape(0), ctx.input_shape(1)
        if len(xd) < 2 or len(yd) < 2:
            raise ValueError(f"operands need rank >= 2, got {list(xd)} and {list(yd)}")
        batch = broadcast_shapes(xd[:-2], yd[:-2])
        x = broadcast_to(bld, x, batch + xd[-2:])
        y = broadcast_to(bld, y, batch + yd[-2:])
        nb = len(batch)
        kx = nb if ctx.attr("adj_x", False) else nb + 1
        ky = nb + 1 if ctx.attr("adj_y", False) else nb
        _check_contracting(xd[kx - nb - 2], yd[ky - nb - 2], xd, yd)
        out = bld.dot(x, y, lhs_contracting=[kx], rhs_contracting=[ky],
                      lhs_batch=list(range(nb)), rhs_batch=list(range(nb)))
        ctx.set_output(0, out)


def parse_equation(equation: str, n_operands: int) -> tuple[list[str], str]:
    """"ij,jk->ik" -> (["ij", "jk"], "ik"); an implicit output is the letters used once."""
    equation = equation.replace(" ", "")
    if "." in equation:
        raise ValueError(f"einsum {equation!r}: ellipsis is not supported")
    lhs, arrow, out = equation.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != n_operands:
        raise ValueError(f"einsum {equation!r} names {len(inputs)} operands, got {n_operands}")
    if not arrow:
        letters = "".join(inputs)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    for spec in inputs + [out]:
        if not all(c.isalpha() for c in spec) or len(set(spec)) != len(spec):
            raise ValueError(f"einsum {equation!r}: {spec!r} must be distinct letters "
                             "(repeated letters / diagonals are not supported)")
    unknown = set(out) - set("".join(inputs))
    if unknown:
        raise ValueError(f"einsum {equation!r}: output letters {sorted(unknown)} are not inputs")
    return inputs, out


def _sum_out(b, x, spec: str, keep: set) -> tuple[object, str]:
    """Sums away the letters of `spec` not in `keep` (they appear nowhere else)."""
    drop = [i for i, c in enumerate(spec) if c not in keep]
    if not drop:
        return x, spec
    return sum_wide(b, x, drop), "".join(c for c in spec if c in keep)


@register_xla_op("Einsum")
class Einsum(XlaOpKernel):
    """One- and two-operand einsum without ellipsis or repeated letters."""

    def compile(self, ctx):
        b = ctx.builder
        require_same_types(ctx.inputs)
        specs, out = parse_equation(ctx.attr("equation"), ctx.num_inputs)
        if len(specs) > 2:
            raise ValueError("einsum of more than two operands is not supported")
        sizes: dict[str, int] = {}
        for spec, v in zip(specs, ctx.inputs):
            if len(spec) != v.shape.rank:
                raise ValueError(f"{spec!r} has {len(spec)} letters but the operand has "
                                 f"shape {list(v.shape.dims)}")
            for c, n in zip(spec, v.shape.dims):
                if sizes.setdefault(c, n) != n:
                    raise ValueError(f"letter {c!r} has sizes {sizes[c]} and {n}")
        if len(specs) == 1:
            x, spec = _sum_out(b, ctx.input(0), specs[0], set(out))
        else:
            (ls, rs), (lhs, rhs) = specs, ctx.inputs
            lhs, ls = _sum_out(b, lhs, ls, set(out) | set(rs))
            rhs, rs = _sum_out(b, rhs, rs, set(out) | set(ls))
            batch = [c for c in ls if c in rs and c in out]
            contract = [c for c in ls if c in rs and c not in out]
            x = b.dot(lhs, rhs, lhs_contracting=[ls.index(c) for c in contract],
                      rhs_contracting=[rs.index(c) for c in contract],
                      lhs_batch=[ls.index(c) for c in batch],
                      rhs_batch=[rs.index(c) for c in batch])
            spec = "".join(batch) + "".join(c for c in ls if c not in rs) + \
                "".join(c for c in rs if c not in ls)
        if spec != out:
            x = b.transpose(x, [spec.index(c) for c in out])
        ctx.set_output(0, x)
