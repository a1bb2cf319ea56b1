"""Kernel emitters: the ways a kernel (an entry instruction, usually a fusion) becomes
one LLVM function. strategies.py (one level up) chooses among them, in order.

    loop_nest       the generic shapes: one loop nest of element generators, multi-output
                    roots, in-place ops, fusions that read a dot or in-place result
    dot             dots on the packed GEMM (strided operand views, work units)
    transpose       transposes in registers (block transpose, row shuffle)
    row_normalize   e / sum(e) over the minor dimension (softmax rows) in place
    column_normalize  a row fusion's column form (softmax over axis 0): blocks of
                    columns, a lane-wise pass over the reduced dimension per reduce
    column_reduce   the streaming column reduce and its epilogues
    scatter         scatter and select-and-scatter, in place, parallel where race-free
    in_place_update  a while body's dynamic-update-slice stored into the loop state
    merge_sort      the sort kernel: a merge sort of a permutation (sorts numpy cannot do)
    streaming       non-temporal stores for outputs that cannot stay in cache

Imports: `gemm/`, `elemental/`, `llvm/` and the compile target; of the project, `hlo`.
Not `conv/`, its sibling (strategies.py chooses between the two), nor the top level
(compiler, strategies, thunks, executable).
"""
