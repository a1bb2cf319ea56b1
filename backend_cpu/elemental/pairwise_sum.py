"""Float sums whose rounding error grows like log(n), at the speed of a vector loop.

A reduction loop that adds n floats into k accumulators (the lanes of a few
vectors) makes chains of n / k dependent additions, and the error of a chain
grows with its length: a 1M-element f32 sum in 64 lanes was off by ~2.6e-4
(relative) on a row of 0.1s, and an f32 accumulator stops growing at 2^24 when
it adds ones (2^30 ones summed to 2^29). numpy's pairwise sum and XLA's tree
reductions keep the error at O(log n) ulps; so does this scheme:

- the elements are cut into *blocks*; each block is summed by the ordinary
  vector loop into fresh accumulators (starting from -0.0, the identity of a
  float sum), a chain of at most BLOCK_CHAIN additions per lane;
- the block sums are combined pairwise by a binary counter of partial sums:
  level t holds the sum of 2^t consecutive blocks. Block k (counted from 0)
  enters as

      v = block;  for t in range(trailing_ones(k)): v = level[t] + v
      level[trailing_ones(k)] = v

  so a sum is only ever added to one of equal weight (like carrying in a
  binary increment). After the last block the levels of the set bits of the
  block count hold the rest; they are added smallest first.

The error is O((BLOCK_CHAIN + log2(blocks) + log2(lanes)) * eps) instead of
O(n / lanes * eps); the counter costs a few instructions per block of thousands
of elements, and the loops that stream the data are unchanged. Only float
additions are blocked: integer sums are exact in any order, max and min too,
and a product's relative error is one rounding per multiplication whatever the
order of the tree (n - 1 of them), so blocking a product buys nothing.

The block count is a compile-time constant (shapes are static), so the final
combination is straight-line code, and a block's number comes from the loop
indices around it (no counter kept in memory). Levels live in a small array on
the stack (`Levels`) or, for a column reduce that sums a whole row of outputs at
once, in scratch rows indexed like the outputs (emitters/column_reduce.py).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..llvm.loops import for_range, i64
from ..llvm.types import I64, PTR

# Additions per accumulator lane inside one block: a block is this many vectors
# per accumulator. 64 keeps a 1M-element f32 sum of equal values within ~6e-7 of
# the exact sum (measured: 32 -> 3e-7, 128 -> 1e-6, 256 -> 2.4e-6), and a block of
# 4 x 16 x 64 = 4096 f32 elements makes the counter's cost per element negligible.
BLOCK_CHAIN = 64
# Vector accumulators a loop written by LLVM's vectorizer keeps (its interleave
# count for long loops, loops.LONG_LOOP_INTERLEAVE): a generator's block is this
# many vectors of lanes_for(etype) elements, BLOCK_CHAIN deep.
LLVM_ACCUMULATORS = 4


def is_pairwise(reducer: str | None, etype: str) -> bool:
    """True for the reductions that are summed in blocks: a float `add`."""
    return reducer == "add" and etype in ("f16", "f32", "f64")


def wide_type(etype: str) -> ir.Type | None:
    """The type a float add or multiply reduction of `etype` accumulates in, when it
    is not `etype` itself: f16 sums and products accumulate in f32 and are rounded
    to f16 once, at the end (a chain of f16 additions stops at 2048 for ones)."""
    return ir.FloatType() if etype == "f16" else None


def trailing_ones(b: ir.IRBuilder, k: ir.Value) -> ir.Value:
    """The number of trailing one bits of the i64 `k` (cttz of ~k; 64 for ~0)."""
    fn = b.module.globals.get("llvm.cttz.i64")
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(I64, [I64, ir.IntType(1)]), "llvm.cttz.i64")
    return b.call(fn, [b.xor(k, i64(-1)), ir.Constant(ir.IntType(1), 0)])


def levels_needed(blocks: int) -> int:
    """How many levels a counter of `blocks` blocks uses (level t: 2^t blocks)."""
    return max(1, blocks.bit_length())


def final_levels(blocks: int) -> list[int]:
    """The levels holding partial sums after `blocks` blocks: the set bits of the
    count, lowest (smallest sum) first."""
    return [t for t in range(blocks.bit_length()) if blocks >> t & 1]


class Levels:
    """The levels of one pairwise combination in a stack array of `ty` (a float or a
    vector of floats): `push` each block in order, then `total`. The array needs no
    reset between reductions: block k only reads levels written by blocks < k."""

    def __init__(self, kernel, ty: ir.Type, blocks: int, name: str = "pairwise"):
        self.ty, self.blocks = ty, blocks
        self.array_type = ir.ArrayType(ty, levels_needed(blocks))
        self.array = kernel.alloca(self.array_type, f"{name}.levels")
        self.array.type = PTR       # llvmlite types it `[n x T]*`; it is addressed by level
        self.carry = kernel.alloca(ty, f"{name}.carry")
        self.name = name

    def _cell(self, b, level) -> ir.Value:
        level = i64(level) if isinstance(level, int) else level
        return b.gep(self.array, [i64(0), level], inbounds=True, source_etype=self.array_type)

    def _load(self, b, level) -> ir.Value:
        return b.load(self._cell(b, level), typ=self.ty)

    def push(self, b: ir.IRBuilder, k: ir.Value, value: ir.Value) -> None:
        """Adds block number `k` (i64, from 0), whose sum is `value`."""
        if self.blocks == 1:
            b.store(value, self._cell(b, 0))
            return
        carry = trailing_ones(b, k)
        b.store(value, self.carry)
        with for_range(b, i64(0), carry, f"{self.name}.carry", scalar=True, unroll=False) as t:
            b.store(b.fadd(self._load(b, t), b.load(self.carry)), self.carry)
        b.store(b.load(self.carry), self._cell(b, carry))

    def total(self, b: ir.IRBuilder) -> ir.Value:
        """The sum of every block pushed (exactly `blocks` of them)."""
        levels = final_levels(self.blocks)
        total = self._load(b, levels[0])
        for t in levels[1:]:
            total = b.fadd(self._load(b, t), total)
        return total
