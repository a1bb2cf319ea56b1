"""Convolutions on arrays in memory: im2col + the packed GEMM, and direct loops for
depthwise convolutions. (Small or unusual convolutions, and those inside a fusion,
stay on the generic generator, elemental/contraction.py.)

    plan        how a convolution becomes GEMMs on chunks of a patch matrix (no IR)
    patches     building a chunk of the patch matrix, copying result tiles and kernels
    phases      lhs (base) dilation split into dense sub-convolutions by output phase
    on_gemm     the emitter: im2col chunk by chunk, one GEMM per chunk (conv_gemm)
    depthwise   depthwise convolutions vectorized over the groups (conv_depthwise)
    stencil     depthwise convolutions along a spatial dimension (conv_depthwise_spatial)

Imports: `gemm/` (the GEMM, operand views, work units), `elemental/` (window
positions, dim labels), `llvm/`; of the project, `hlo`. Nothing of emitters/ or the
top level.
"""
