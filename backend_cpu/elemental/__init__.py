"""Element generators: how any instruction's value at one index is emitted, so that a
fused computation becomes one loop nest with no intermediate array (STYLE.md §4).

    generators     the generator of every instruction kind, composed over a computation
                   (elementwise, movement, and the registry of looping ops)
    scalar_ops     per-opcode scalar recipes (the LLVM side of the opcode table)
    reduction      reduce and reduce-window generators, reducers, blocked float sums
    contraction    dot and convolution generators (one inner loop per element)
    pairwise_sum   float sums whose error grows like log(n)
    vector_gen     the same generators on several consecutive elements at once
    hoisting       a fusion's inner reductions computed once per row, not per element

Imports: `llvm/`, `vecmath/` and the compile target; of the project, `hlo`. Nothing
of gemm/, conv/, emitters/ or the top level.

reduction and contraction build on generators (a reducer is a computation emitted
with `apply_computation`) and register their generators in it when imported; this
file imports them, so the registry is complete once any module here is imported.
"""
from . import contraction, generators, reduction
