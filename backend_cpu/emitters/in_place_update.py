"""A dynamic-update-slice written in place: only the update's elements are stored.

A while body that stacks a value per iteration (`lax.scan`'s outputs, the residuals
its gradient saves) does `state[i] = dynamic-update-slice(state[i], update, t...)`.
Computed as a fresh array, every iteration copies the whole stack to change one
row. When the compiler (ProgramBuilder, for while bodies) sees that the stack's old
value is read by nothing else, the kernel's output *is* the state buffer, already
holding the old value, and this kernel stores just the update at the clamped
start indices (the evaluator's semantics: starts clamped so the window fits).

The kernel is serial (one partition: the update is small next to the stack) and
reads only the update and the start indices; the output buffer is never read, so
the slots stay disjoint as KernelIR's alias annotations say.
"""
from __future__ import annotations

from ..elemental import generators
from ..llvm.kernel_ir import Buffer
from ..llvm.loops import clamp_index, for_range, index_to_i64


def emit(kernel, instr, inputs: list[Buffer], out: Buffer) -> int:
    """Stores `instr`'s update (inputs[0]) into `out` at its start indices (inputs[1:]);
    returns the partition extent (1)."""
    b = kernel.b
    update = instr.operands[1].shape
    sizes = update.dims
    if 0 in sizes:
        return 1
    operand_dims = instr.operands[0].shape.dims
    read = generators.buffer_reader(inputs[0])
    starts = []
    for d, (buf, operand) in enumerate(zip(inputs[1:], instr.operands[2:])):
        value = index_to_i64(b, buf.load(b, []), operand.shape.element_type)
        starts.append(clamp_index(b, value, 0, operand_dims[d] - sizes[d]))
    # The update's dimensions major to minor in its own layout: stores follow its bytes.
    order = list(reversed(update.minor_to_major()))
    index: list = [None] * update.rank

    def nest(level: int) -> None:
        if level == len(order):
            with kernel.scope():
                out.store(b, [b.add(s, i) for s, i in zip(starts, index)], read(b, list(index)))
            return
        d = order[level]
        with for_range(b, 0, sizes[d], f"u{d}") as i:
            index[d] = i
            nest(level + 1)
    nest(0)
    return 1
