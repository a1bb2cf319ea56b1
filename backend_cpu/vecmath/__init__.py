"""Vector math: the elementwise transcendental opcodes as straight-line LLVM IR, for
scalars and vectors alike (no libm calls, so every use vectorizes).

    routines       ROUTINES (one f32/f64 pair per opcode the table flags
                   `transcendental`) and emit_math, the entry point
    math_builder   MathBuilder: the type-generic building blocks of every routine
    explog, misc, trig, trig64, pow64, reduce64
                   the routines (exp/log family, erf/cbrt/sqrt, trigonometry, power)
    coeffs, coeffs64
                   their polynomial coefficients, fitted once per process
    standalone     elementwise loops over numpy arrays, for tests and benchmarks only

Imports: `llvm/` (standalone only: target machine, fp_env) and the compile target;
of the project, `hlo` (the opcode table). Nothing above it (elemental/, emitters/ ...).
"""
