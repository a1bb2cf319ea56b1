"""Cost analysis of an HLO module: flops, transcendentals and bytes accessed.

An analysis beside the passes (it changes nothing); the frontend's
`Compiled.cost_analysis()` reports it for the optimized module.

Counted the way XLA's HloCostAnalysis counts, on the optimized module:

- flops: one per output element of an elementwise arithmetic op (comparisons
  and selects included), 2*M*N*K for a dot, 2 * outputs * window * in-features
  per group for a convolution, one reducer application per input element of a
  reduce (per output element and window position of a reduce-window);
  movement ops cost none. Fusions and calls count the ops inside them; a
  while body or a branch is counted once (trip counts are not known here).
- transcendentals: one per output element of an opcode the table flags
  `transcendental` (exp, log, tanh, erf, power, sqrt, ...; counted here, not
  in flops).
- bytes accessed: for every top-level instruction of the entry that does
  work (fusions counted at their boundary, like one kernel), the bytes of its
  operands plus the bytes of its result. Parameters, constants, tuples and
  bitcasts move nothing.
"""
from __future__ import annotations

from ..hlo import OPCODES

from .hlo_utils import is_kernel

_MOVEMENT_FREE_FLOPS = frozenset({"convert", "bitcast-convert", "copy"})


def _bytes(shape) -> int:
    return sum(leaf.nbytes for leaf in shape.leaves())


def _reducer_size(instr) -> int:
    comp = instr.attrs.get("to_apply")
    if comp is None:
        return 1
    return max(1, sum(1 for i in comp.instructions
                      if OPCODES[i.opcode].is_elementwise and i.opcode not in ("select",)))


def _instruction_flops(instr) -> tuple[int, int]:
    """(flops, transcendentals) of one instruction, not counting called computations."""
    op = instr.opcode
    info = OPCODES[op]
    if info.transcendental:
        return 0, instr.shape.numel
    if info.is_elementwise and op not in _MOVEMENT_FREE_FLOPS:
        return instr.shape.numel, 0
    if op == "dot":
        lhs = instr.operands[0].shape.dims
        k = 1
        for d in instr.attrs.get("lhs_contracting_dims", ()):
            k *= lhs[d]
        return 2 * instr.shape.numel * k, 0
    if op == "convolution":
        window = instr.attrs["window"]
        taps = 1
        for d in window.dims:
            taps *= d.size
        rhs = instr.operands[1].shape.dims
        labels = instr.attrs["dim_labels"].split("_")[1].split("->")[0]
        in_features = rhs[labels.index("i")]
        return 2 * instr.shape.leaves()[0].numel * taps * in_features, 0
    if op == "reduce":
        return instr.operands[0].shape.numel * _reducer_size(instr), 0
    if op == "reduce-window":
        taps = 1
        for d in instr.attrs["window"].dims:
            taps *= d.size
        return instr.shape.leaves()[0].numel * taps * _reducer_size(instr), 0
    return 0, 0


def _computation_flops(comp, seen: set) -> tuple[int, int]:
    flops = trans = 0
    for instr in comp.instructions:
        f, t = _instruction_flops(instr)
        flops, trans = flops + f, trans + t
        if instr.opcode in ("fusion", "call", "while", "conditional"):
            for callee in instr.called_computations():
                if id(callee) not in seen:
                    f, t = _computation_flops(callee, seen | {id(callee)})
                    flops, trans = flops + f, trans + t
    return flops, trans


def instruction_cost(instr) -> tuple[int, int]:
    """(flops, transcendentals) of one instruction with the computations it calls (a
    fusion's ops; a while body or branch once): what one kernel of it computes."""
    flops, trans = _instruction_flops(instr)
    if instr.opcode in ("fusion", "call", "while", "conditional"):
        for callee in instr.called_computations():
            f, t = _computation_flops(callee, {id(callee)})
            flops, trans = flops + f, trans + t
    return flops, trans


def cost_analysis(module) -> dict:
    """{"flops", "transcendentals", "bytes accessed"} of the module's entry computation."""
    entry = module.entry
    flops, trans = _computation_flops(entry, {id(entry)})
    accessed = 0
    for instr in entry.instructions:
        if not is_kernel(instr):        # moves nothing: parameters, tuples, bitcasts, ...
            continue
        accessed += _bytes(instr.shape) + sum(_bytes(o.shape) for o in instr.operands)
    return {"flops": float(flops), "transcendentals": float(trans),
            "bytes accessed": float(accessed)}
