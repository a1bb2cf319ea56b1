"""Full unrolling of while loops with a small known trip count.

    while(init), trips = 3     ->   s1 = body(init); s2 = body(s1); s3 = body(s2)

The body is cloned once per trip into the loop's computation, each copy reading the
previous copy's root; the while's users read the last one (the init itself for a loop
that never runs). The cond is not needed any more: `trip_count` proved how often it
holds. Later passes then see straight-line code: tuple simplification forwards the
state, constant folding evaluates the induction variable and what depends on it, and
loop fusion merges the trips' elementwise work -- threefry's 5 rounds over a full-size
counter array become one kernel instead of 5 trips that each read and write two
full-size arrays.

Which loops: `trip_count` knows the count; the cond and body are pure (no side effect,
no rng, no collective, no control flow: `is_pure_computation`) so cloning them changes
nothing observable; the body's work is elementwise or data movement that loop fusion
merges across trips (`FUSES_ACROSS_TRIPS`: a body around a dot, a reduction or an
update in place gains nothing from unrolling that the native loop does not give, and
an in-place update of the state would become a copy per trip); and trips x body size
<= UNROLL_BUDGET.
"""
from __future__ import annotations

from ..hlo import HloInstruction, HloModule

from .dce import remove_unreachable_computations
from .hlo_utils import TRIVIAL_OPCODES, in_layout
from .pass_base import HloModulePass, register_pass
from .while_loop_analysis import is_pure_computation, trip_count, whiles

# The most instructions (those that compute: not parameters, constants, tuples, gtes,
# bitcasts) an unrolled loop may add. JAX's threefry loop (5 rounds of ~45 integer ops,
# ~225) fits with room to spare; a scan over a recurrent layer (16 trips of ~80 ops
# around 8 GEMMs, ~1300) does not: its trips share no elementwise work to fuse, the
# native loop runs them at a few microseconds of overhead a trip, and unrolling would
# give the fusion passes and LLVM 16 copies of the body to compile.
UNROLL_BUDGET = 400


# Data movement that fuses with elementwise work (besides the elementwise ops).
FUSES_ACROSS_TRIPS = frozenset({"broadcast", "reshape", "slice", "concatenate", "iota",
                                "transpose", "reverse", "pad"})


def fuses_across_trips(loop: HloInstruction) -> bool:
    """Every computing instruction of the body is elementwise or fusible movement."""
    return all(i.opcode in TRIVIAL_OPCODES or i.opcode in FUSES_ACROSS_TRIPS
               or i.info.is_elementwise for i in loop.attrs["body"].instructions)


def body_size(loop: HloInstruction) -> int:
    return sum(1 for i in loop.attrs["body"].instructions if i.opcode not in TRIVIAL_OPCODES)


def unroll(loop: HloInstruction, trips: int) -> HloInstruction:
    """Replaces `loop` by `trips` copies of its body; returns what took its place."""
    comp = loop.parent
    body = loop.attrs["body"]
    param = body.parameters[0]
    order = body.post_order()
    state = loop.operands[0]
    for _ in range(trips):
        # The body reads its parameter in the parameter's layout (a copy where the
        # state so far is stored otherwise: see in_layout).
        value = {id(param): in_layout(state, param.shape, comp, before=loop)}
        for instr in order:
            if instr.opcode == "parameter":
                continue
            value[id(instr)] = comp.clone_instruction(
                instr, [value[id(o)] for o in instr.operands], before=loop)
        state = value[id(body.root)]
    result = in_layout(state, loop.shape, comp, before=loop)
    comp.replace_instruction(loop, result)
    return result


@register_pass
class WhileLoopUnroll(HloModulePass):
    """Unrolls every while whose trip count is known and small (see the module
    docstring). The unrolled loop's cond and body stay in the module if something else
    calls them (DCE drops them otherwise). True iff a loop was unrolled."""

    name = "while-loop-unroll"

    def __init__(self, budget: int = UNROLL_BUDGET):
        self.budget = budget

    def run(self, module: HloModule) -> bool:
        changed = False
        for loop in whiles(module):
            trips = trip_count(loop)
            if trips is None or trips > self.budget or trips * body_size(loop) > self.budget \
                    or not fuses_across_trips(loop):
                continue
            body, cond = loop.attrs["body"], loop.attrs["condition"]
            if not (is_pure_computation(body) and is_pure_computation(cond)):
                continue
            unroll(loop, trips)
            changed = True
        if changed:
            remove_unreachable_computations(module)
        return changed
