"""The `sort` kernel: a stable bottom-up merge sort of a permutation, row by row.

It serves the comparators sort_thunk.py does not recognize (several keys,
LE/GE, bf16 keys): a plain key compare is sorted by numpy on the host instead.

Each row along the sort dimension is sorted by sorting the permutation
`perm = [0, 1, ..., n)` with the comparator applied to the operands' values at
the permuted positions; then every output gathers `out[i] = operand[perm[i]]`.
Moving indices instead of values means one scratch array serves any number of
operands, and the operands are only read (through their generators).

The merge passes are unrolled at compile time (ceil(log2 n) of them, alternating
between the two halves of the scratch buffer); each pass merges runs of
`width` with a branch-free step: take the left element unless the right one is
strictly less (which keeps equal elements in order: stable).

    for width in 1, 2, 4, ...:                 # unrolled
      for lo in [0, n) step 2 * width:
        i, j = lo, mid
        for k in [lo, hi):
          left = i < mid and not (j < hi and less(v[src[j]], v[src[i]]))
          dst[k] = src[i] if left else src[j]; advance i or j
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...hlo.shape import Shape

from ..elemental.generators import apply_computation
from ..llvm.loops import for_range, i64
from ..llvm.types import I1, I64


def emit_sort(kernel, instr, gens, outputs, for_each_row) -> None:
    dim = instr.dims()[0]
    shape = outputs[0].shape
    n = shape.dims[dim]
    scratch = kernel.buffer(kernel.scratch_slot(Shape("s64", (2, max(n, 1)))),
                            Shape("s64", (2, max(n, 1))))
    cells = {name: kernel.alloca(I64, f"sort.{name}") for name in ("i", "j")}

    def row(b, index):
        def at(pos):
            full = list(index)
            full[dim] = pos
            return full

        def values(p):
            return [g(b, at(p)) for g in gens]

        with for_range(b, 0, n, "sort.init") as k:
            scratch.store(b, [i64(0), k], k)
        src = 0
        width = 1
        while width < n:
            _merge_pass(kernel, b, scratch, src, n, width, values, cells,
                        lambda args: apply_computation(kernel, instr.to_apply, args)[0])
            src, width = 1 - src, width * 2
        with for_range(b, 0, n, "sort.out") as k:
            with kernel.scope():
                p = scratch.load(b, [i64(src), k])
                for out, value in zip(outputs, values(p)):
                    out.store(b, at(k), value)
    for_each_row(kernel, shape, row, skip_dim=dim)


def _merge_pass(kernel, b, scratch, src, n, width, values, cells, less) -> None:
    dst = 1 - src
    with for_range(b, 0, n, f"merge{width}.lo", step=2 * width) as lo:
        mid = _min(b, b.add(lo, i64(width)), n)
        hi = _min(b, b.add(lo, i64(2 * width)), n)
        b.store(lo, cells["i"])
        b.store(mid, cells["j"])
        with for_range(b, lo, hi, f"merge{width}.k") as k:
            with kernel.scope():
                i, j = b.load(cells["i"]), b.load(cells["j"])
                has_left = b.icmp_signed("<", i, mid)
                has_right = b.icmp_signed("<", j, hi)
                # Read at clamped positions: the values are only used where valid.
                left = scratch.load(b, [i64(src), _min(b, i, n - 1)])
                right = scratch.load(b, [i64(src), _min(b, j, n - 1)])
                args = [v for pair in zip(values(right), values(left)) for v in pair]
                right_first = b.and_(has_right, less(args))
                take_left = b.and_(has_left, b.xor(right_first, _true()))
                scratch.store(b, [i64(dst), k], b.select(take_left, left, right))
                step = b.zext(take_left, I64)
                b.store(b.add(i, step), cells["i"])
                b.store(b.add(j, b.sub(i64(1), step)), cells["j"])


def _min(b, value, limit):
    limit = i64(limit) if isinstance(limit, int) else limit
    return b.select(b.icmp_signed("<", value, limit), value, limit)


def _true():
    return ir.Constant(I1, 1)
