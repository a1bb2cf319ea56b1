"""The packed GEMM: out[m, n] = lhs[m, k] @ rhs[k, n] as cache-blocked, register-blocked
LLVM IR (BLIS / Goto's loop nest), and what the dot and convolution emitters share.

    packed_gemm    emit_gemm: the driver loop nest, its plan, partitions and scratch
    gemv           matrix-vector products (m == 1 or n == 1)
    microkernel    the GEMM micro-kernel: an MR x NR block of C in vector registers
    packing        copies blocks of A and B into contiguous micro-panels
    library        the shape-independent routines (micro-kernels, packing), compiled
                   once per process and declared by each GEMM
    spec           GemmSpec and the accumulation arithmetic (Arith)
    operands       operands as strided views of arrays in memory (View, resolve_view)
    partition      a kernel's work units over the intra-op threads (run_units, even_cuts)

Imports: `llvm/`, the compile target and the runtime's options (partition); of the
project, `hlo` (dtypes, shapes). Nothing of elemental/, conv/, emitters/ or the top
level: the library gets the disk cache to use from its caller.
"""
