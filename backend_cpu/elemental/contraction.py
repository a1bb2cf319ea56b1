"""Element generators for `dot` and `convolution`: one output element, one inner loop.

These are the general, always-correct paths: any batch/contracting dimensions,
any dtype (operands converted to the result type; f16 accumulates in f32),
any convolution window (stride, padding, lhs/rhs dilation, reversal) and
feature/batch grouping. Large matrix products and convolutions go to the packed
GEMM instead (emitters/dot.py, conv/on_gemm.py; strategies.py picks them), and
depthwise convolutions to a direct vectorized loop (conv/depthwise.py); these
generators remain for small or unusual cases (f16, integers, a kernel computed
in the same fusion) and let a dot or convolution sit inside a fusion like any
other instruction.

Float accumulation uses `reassoc`/`contract` so LLVM may vectorize the
contraction loop and form FMAs; XLA gives the same latitude.
"""
from __future__ import annotations

from ..llvm.kernel_ir import KernelIR
from ..llvm.loops import clamp_index, for_range, i64, in_range
from ..llvm.types import FLOAT, HALF, compute_type, is_complex, is_float, is_pred

from . import complex_ops
from .generators import register_looping
from .scalar_ops import const, emit_convert

_FAST = ("reassoc", "contract")


def parse_dim_labels(labels: str):
    """'b01f_01io->b01f' -> (lhs, rhs, out) maps from label char to dimension."""
    lhs, rest = labels.split("_", 1)
    rhs, out = rest.split("->")
    return ({c: i for i, c in enumerate(lhs)}, {c: i for i, c in enumerate(rhs)},
            {c: i for i, c in enumerate(out)})


class _Sum:
    """acc += l * r in the accumulation type (f32 for f16 results)."""

    def __init__(self, kernel: KernelIR, b, etype: str):
        self.etype = etype
        self.ty = FLOAT if compute_type(etype) == HALF else compute_type(etype)
        self.cell = kernel.alloca(self.ty, "dot.acc")
        b.store(complex_ops.zero(etype) if is_complex(etype) else const(self.ty, 0), self.cell)

    def add_product(self, b, l, r, valid=None) -> None:
        """acc += l * r; where `valid` is false, l is a padding zero (0 * r, like XLA's
        zero-padded patches: a NaN or inf weight still poisons the sum)."""
        acc = b.load(self.cell)
        if is_float(self.etype) and l.type != self.ty:
            l, r = b.fpext(l, self.ty), b.fpext(r, self.ty)
        if valid is not None:
            l = b.select(valid, l, complex_ops.zero(self.etype) if is_complex(self.etype)
                         else const(l.type, 0))
        if is_complex(self.etype):          # no reassociation: {re, im} in order
            new = complex_ops.multiply_add(b, acc, l, r)
        elif is_float(self.etype):
            new = b.fadd(acc, b.fmul(l, r, flags=_FAST), flags=_FAST)
        elif is_pred(self.etype):
            new = b.or_(acc, b.and_(l, r))
        else:
            new = b.add(acc, b.mul(l, r))
        b.store(new, self.cell)

    def result(self, b):
        value = b.load(self.cell)
        return b.fptrunc(value, HALF) if self.ty != compute_type(self.etype) else value


def _nested(kernel, b, sizes: list[int], body, name: str) -> None:
    """Loops over a box of `sizes`; body(b, [indices])."""
    indices: list = []

    def nest(level):
        if level == len(sizes):
            body(b, list(indices))
            return
        with for_range(b, 0, sizes[level], f"{name}{level}") as i:
            indices.append(i)
            nest(level + 1)
            indices.pop()
    with kernel.scope():
        nest(0)


def make_generator(kernel: KernelIR, instr, srcs):
    if instr.opcode == "dot":
        return _dot(kernel, instr, srcs)
    return _convolution(kernel, instr, srcs)


def _converted(b, src, index, from_type: str, to_type: str):
    if is_complex(to_type):
        return complex_ops.convert(b, src(b, index), from_type, to_type)
    return emit_convert(b, src(b, index), from_type, to_type)


def _dot(kernel, instr, srcs):
    a = instr.attrs
    lhs, rhs = instr.operands[0].shape, instr.operands[1].shape
    lb, rb = tuple(a.get("lhs_batch_dims", ())), tuple(a.get("rhs_batch_dims", ()))
    lc, rc = tuple(a.get("lhs_contracting_dims", ())), tuple(a.get("rhs_contracting_dims", ()))
    lhs_free = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rhs_free = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    out_t = instr.shape.element_type
    lt, rt = lhs.element_type, rhs.element_type
    sizes = [lhs.dims[d] for d in lc]

    def gen(b, index):
        li, ri = [None] * lhs.rank, [None] * rhs.rank
        for k, (dl, dr) in enumerate(zip(lb, rb)):
            li[dl] = ri[dr] = index[k]
        for k, d in enumerate(lhs_free):
            li[d] = index[len(lb) + k]
        for k, d in enumerate(rhs_free):
            ri[d] = index[len(lb) + len(lhs_free) + k]
        acc = _Sum(kernel, b, out_t)

        def body(b, ks):
            for k, dl, dr in zip(ks, lc, rc):
                li[dl] = ri[dr] = k
            acc.add_product(b, _converted(b, srcs[0], list(li), lt, out_t),
                            _converted(b, srcs[1], list(ri), rt, out_t))
        _nested(kernel, b, sizes, body, "k")
        return acc.result(b)
    return gen


def _convolution(kernel, instr, srcs):
    a = instr.attrs
    lhs, rhs = instr.operands[0].shape, instr.operands[1].shape
    lmap, rmap, omap = parse_dim_labels(a["dim_labels"])
    spatial = sorted(k for k in lmap if k.isdigit())
    window = a["window"].dims if "window" in a else ()
    out_t = instr.shape.element_type
    lt, rt = lhs.element_type, rhs.element_type
    f_out = instr.shape.dims[omap["f"]]
    groups = a.get("feature_group_count", 1)
    batch_groups = a.get("batch_group_count", 1)
    cin = rhs.dims[rmap["i"]]
    out_batch = instr.shape.dims[omap["b"]]
    ksizes = [rhs.dims[rmap[s]] for s in spatial]

    def gen(b, index):
        of = index[omap["f"]]
        batch = index[omap["b"]]
        if batch_groups > 1:
            group = b.udiv(of, i64(f_out // batch_groups))
            batch = b.add(b.mul(group, i64(out_batch)), batch)
        channel_base = i64(0)
        if groups > 1:
            channel_base = b.mul(b.udiv(of, i64(f_out // groups)), i64(cin))
        acc = _Sum(kernel, b, out_t)

        def body(b, ks):
            ci, taps = ks[0], ks[1:]
            li, ri = [None] * lhs.rank, [None] * rhs.rank
            li[lmap["b"]] = batch
            li[lmap["f"]] = b.add(channel_base, ci)
            ri[rmap["i"]], ri[rmap["o"]] = ci, of
            valid = None
            for s, k, size in zip(spatial, taps, ksizes):
                w = window[int(s)]
                ri[rmap[s]] = b.sub(i64(size - 1), k) if w.reversal else k
                pos = b.mul(index[omap[s]], i64(w.stride))
                pos = b.sub(b.add(pos, b.mul(k, i64(w.window_dilation))), i64(w.pad_low))
                ok = None
                if w.base_dilation != 1:
                    bd = i64(w.base_dilation)
                    ok = b.and_(b.icmp_signed(">=", pos, i64(0)),
                                b.icmp_signed("==", b.srem(pos, bd), i64(0)))
                    pos = b.sdiv(pos, bd)
                bounds = in_range(b, pos, 0, lhs.dims[lmap[s]])
                ok = bounds if ok is None else b.and_(ok, bounds)
                valid = ok if valid is None else b.and_(valid, ok)
                li[lmap[s]] = clamp_index(b, pos, 0, lhs.dims[lmap[s]] - 1)
            acc.add_product(b, _converted(b, srcs[0], li, lt, out_t),
                            _converted(b, srcs[1], ri, rt, out_t), valid)
        _nested(kernel, b, [cin] + ksizes, body, "c")
        return acc.result(b)
    return gen


register_looping(("dot", "convolution"), make_generator)
