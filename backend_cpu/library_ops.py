"""Ops the CPU backend runs on the host with numpy, and the ops that compute nothing.

Why the host: topk, cholesky, triangular-solve, fft, the batch norms, the random
number generators and stochastic-convert are not loop nests. Neither is scan (a
sequential loop over a called computation; XLA's CPU backend expands it into a
while loop): it runs as the evaluator's loop, the called computation evaluated too.
ragged-dot (a dot per group of rows or of contracted positions) runs as the
evaluator's masked dots, sinh (XLA's newest unary function) as numpy's, and
shuffle (rotate / permute by constant coordinates) as the evaluator's indexing. XLA's CPU backend
calls library routines for several of them (DUCC for fft, a TopK runtime
function, LAPACK-style expanders) and expands the rest into loops of HLO. Our
library is numpy: a `HostOpThunk` views the operand buffers as numpy arrays (in
their layouts), computes the instruction with the reference semantics of the
`hlo` evaluator (hlo/eval_library.py, hlo/eval_random.py: vectorized numpy,
bit-exact with XLA for rng-bit-generator) and writes the results into the output
buffers. One implementation serves both, so the backend's numbers are the
reference's by construction; what the backend adds is the plumbing (layouts,
tuples, slots), which tests/backend_cpu/test_new_opcodes.py checks.

fft (FFT, IFFT, RFFT, IRFFT on c64/c128) is one of them: numpy.fft through the
evaluator, where XLA calls DUCC. Other complex (c64, c128) instructions are computed
by kernels (elemental/complex_ops.py: elementwise ops, converts, movement, reduce,
dot, power, atan2); the few that are not (complex_ops.why_not_compiled: scatter,
sort, convolution, ...), or a fusion holding one, run here through the evaluator,
one numpy pass per instruction.

Ops that compute nothing bind slots only: after-all (a token: an empty slot),
add-dependency and domain (their operand), the async wrappers (async-start runs
the wrapped computation at once as a call, async-update passes its tuple on,
async-done returns the result; the context elements are zeros), copy-start /
copy-done (the copy is the source itself: values never change in place), and
the custom-call targets that annotate (Sharding, MoveToHost, ...). custom-call
TopK runs on the host; the oneDNN targets (__onednn$matmul, ...) run their HLO
expansion (hlo/custom_calls.py) as a called computation of ordinary kernels; any
other target is refused at compile time with its name.

`lower(builder, instr, operands)` is the compiler's one entry point: the slots of
the instruction's leaves, or None when the instruction is not ours.
"""
from __future__ import annotations

import numpy as np

from ..hlo.dtypes import DTYPES, numpy_dtype
from ..hlo import custom_calls
from ..hlo.evaluator import evaluate_instruction

from . import strategies
from .buffer_assignment import Slot
from .elemental.complex_ops import why_not_compiled
from .executable import physical_dims
from .thunks import CallThunk, array_at

# Opcodes computed by a HostOpThunk.
HOST_OPCODES = frozenset({"rng-bit-generator", "rng", "topk", "cholesky", "triangular-solve",
                          "fft", "batch-norm-training", "batch-norm-inference",
                          "batch-norm-grad", "stochastic-convert", "scan", "ragged-dot",
                          "sinh", "shuffle"})
_PASS_THROUGH = frozenset({"add-dependency", "domain", "async-update"})


class HostLayout:
    """One array buffer as a logical numpy view: physical dims, dtype, and the
    transpose from memory order back to logical order."""

    def __init__(self, shape):
        self.dims = physical_dims(shape)
        self.dtype = numpy_dtype(shape.element_type)
        self.to_logical = tuple(int(d) for d in np.argsort(list(reversed(shape.minor_to_major()))))

    def view(self, address: int) -> np.ndarray:
        return array_at(address, self.dims, self.dtype).transpose(self.to_logical)


class HostOpThunk:
    """Computes `instr` with numpy (the evaluator's semantics) from operand slots
    `reads` (one per operand, all arrays) into output slots `writes` (one per leaf)."""

    def __init__(self, instr, reads, writes, operand_shapes, output_shapes):
        self.instr = instr
        self.reads, self.writes = list(reads), list(writes)
        self.inputs = [HostLayout(s) for s in operand_shapes]
        self.outputs = [HostLayout(s) for s in output_shapes]

    def link(self, lookup, threads: int | None = None) -> None:
        pass

    def run(self, table, address, keep, ctx=None) -> None:
        values = [layout.view(table[slot]) for layout, slot in zip(self.inputs, self.reads)]
        result = evaluate_instruction(self.instr, values)
        leaves = list(_flatten(result))
        for layout, slot, value in zip(self.outputs, self.writes, leaves):
            if value.size:
                layout.view(table[slot])[...] = value


def _flatten(value):
    if isinstance(value, tuple):
        for v in value:
            yield from _flatten(v)
    else:
        yield np.asarray(value)


def involves_complex(instr) -> bool:
    """True if `instr` (or, for a fusion, any fused instruction) has a complex operand
    or result. (Every compiled instruction asks: a fused instruction's operands are
    fused instructions too, so their results are all there is to look at.)"""
    if _complex_shape(instr.shape) or any(_complex_shape(o.shape) for o in instr.operands):
        return True
    if instr.opcode == "fusion":
        return any(_complex_shape(i.shape) or i.opcode == "fusion" and involves_complex(i)
                   for i in instr.attrs["calls"].instructions)
    return False


def _complex_shape(shape) -> bool:
    if shape.is_tuple:
        return any(_complex_shape(s) for s in shape.tuple_shapes)
    return shape.element_type in _COMPLEX


_COMPLEX = frozenset(name for name, d in DTYPES.items() if d.is_complex)


def lower(builder, instr, operands) -> list[int] | None:
    """The slots of `instr`'s leaves if this module lowers it (see the docstring), else
    None. `builder` is the compiler's ProgramBuilder; `operands` its operands' slots."""
    op = instr.opcode
    if op == "custom-call":
        refusal = custom_calls.refusal(instr)
        if refusal is not None:
            raise NotImplementedError(f"backend_cpu: {instr.name}: {refusal}")
        target = instr.attrs["custom_call_target"]
        if target in custom_calls.IDENTITY_TARGETS:    # the operand, in the call's layout
            return builder._conform(operands[0], instr.operands[0].shape.leaves(),
                                    instr.shape.leaves(), instr.name)
        if target in custom_calls.ONEDNN_TARGETS:
            return _expanded(builder, instr, operands)
        if target == "AllocateBuffer":             # undefined contents: zeros
            return [_zeros(builder, leaf) for leaf in instr.shape.leaves()]
        return _host(builder, instr, operands, "host_topk")
    if op in HOST_OPCODES:
        return _host(builder, instr, operands, f"host_{op.replace('-', '_')}")
    if op in _PASS_THROUGH:                     # the operand, in the instruction's layout
        return builder._conform(operands[0], instr.operands[0].shape.leaves(),
                                instr.shape.leaves(), instr.name)
    if op == "after-all":
        return [_token_slot(builder, instr.shape)]
    if op == "async-start":
        return _async_start(builder, instr, operands)
    if op == "async-done":
        shapes = instr.operands[0].shape.tuple_shapes
        start = len(shapes[0].leaves())
        return operands[0][start:start + len(shapes[1].leaves())]
    if op == "copy-start":
        (source,) = operands
        return source + source + [_zeros(builder, instr.shape.tuple_shapes[2])]
    if op == "copy-done":
        return operands[0][:len(instr.shape.leaves())]
    if op not in ("while", "conditional", "call", "tuple", "get-tuple-element", "bitcast") \
            and involves_complex(instr) and why_not_compiled(instr) is not None:
        return _host(builder, instr, operands, "host_complex")
    return None


def _host(builder, instr, operands, strategy: str) -> list[int]:
    for o in instr.operands:
        if not o.shape.is_array:
            raise NotImplementedError(f"backend_cpu: {instr.opcode} {instr.name} has a "
                                      f"non-array operand")
    builder.context.kernel_choices.append(strategies.Choice(instr.name, strategy, ()))
    writes = [builder._new_slot("temp", leaf) for leaf in instr.shape.leaves()]
    builder.thunks.append(HostOpThunk(instr, [leaves[0] for leaves in operands], writes,
                                      [o.shape for o in instr.operands], instr.shape.leaves()))
    return writes


def _expanded(builder, instr, operands) -> list[int]:
    """A custom-call defined as HLO (hlo/custom_calls.py: the oneDNN targets) runs its
    expansion as a called computation: kernels of ordinary ops, GEMM for the dot."""
    comp = custom_calls.expansion(instr)
    builder.context.kernel_choices.append(strategies.Choice(instr.name, "custom_call_expansion", ()))
    program = builder._sub_program(comp, [o.shape for o in instr.operands], [instr.shape])
    writes = builder._dynamic_slots(instr.shape)
    builder.thunks.append(CallThunk(program, [leaves[0] for leaves in operands], writes))
    return writes


def _token_slot(builder, shape) -> int:
    """A token's slot: no bytes. A constant (an empty array), not a temp: no thunk
    writes it, and a temp nothing writes would never get its place in the arena."""
    builder.slots.append(Slot("constant", 0, shape, array=np.zeros((0,), np.uint8)))
    return len(builder.slots) - 1


def _zeros(builder, shape) -> int:
    if not shape.is_array:
        return _token_slot(builder, shape)
    array = np.zeros(physical_dims(shape), numpy_dtype(shape.element_type))
    return builder._new_slot("constant", shape, array=array)


def _async_start(builder, instr, operands) -> list[int]:
    """((operands), result, context...): the wrapped computation runs here, as a call."""
    comp = instr.attrs["calls"]
    program = builder._sub_program(comp, [leaf for o in instr.operands for leaf in o.shape.leaves()],
                                   comp.root.shape.leaves())
    writes = builder._dynamic_slots(comp.root.shape)
    builder.thunks.append(CallThunk(program, [s for leaves in operands for s in leaves], writes))
    context = [_zeros(builder, leaf) for s in instr.shape.tuple_shapes[2:] for leaf in s.leaves()]
    return [s for leaves in operands for s in leaves] + writes + context


__all__ = ["HOST_OPCODES", "HostLayout", "HostOpThunk", "involves_complex", "lower"]
