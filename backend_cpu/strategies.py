"""Kernel strategies: one ordered table of the ways to emit a kernel, each choice with
its reason.

Every kernel (an entry instruction, often a fusion) is emitted by the first row of
`STRATEGIES` whose `match` says it may apply; each row before it says why not:

    candidate = Candidate(kernel, instr, operands, outputs)
    for row in STRATEGIES:
        decision = row.match(candidate)              # Decision("not a dot"), or Decision()
        if decision:
            extent = row.emit(candidate, decision)   # the partition extent
            if extent is not None:
                break                                # (None: it declined while emitting)
        declined.append((row.name, decision.reason))

`emit_kernel` returns, besides the extent, a `Choice`: (kernel name, the chosen row,
((declined row, reason), ...)). The compiler keeps them in emission order;
`CpuExecutable.kernel_strategies()`, `hlo-opt --explain` and the tests read them.

The rows, in the order the backend tries them (most specific first, the fallback last):

    host_sort               a sort by a plain key compare: no kernel, numpy sorts it on
                            the host (sort_thunk.py)
    materialize_inner       a fusion reading a dot, convolution or in-place result
                            inside: each computed once into scratch (emitters/loop_nest.py)
    gemm                    a dot of arrays in memory, not tiny: the packed GEMM
                            (emitters/dot.py)
    conv_depthwise          a depthwise convolution, groups innermost (conv/depthwise.py)
    conv_depthwise_spatial  a depthwise convolution, a spatial dimension innermost
                            (conv/stencil.py)
    conv_gemm               an f32/f64 convolution with its kernel in memory: im2col +
                            GEMMs (conv/on_gemm.py)
    row_shuffle             a large transpose keeping the minor dimension (emitters/transpose.py)
    block_transpose         a transpose of an array in memory, by register blocks
    column_reduce_epilogue  column reduces under pointwise ops: a mean, a variance
                            (emitters/column_reduce.py)
    column_normalize        a row fusion's column form (softmax over axis 0): blocks of
                            columns, a pass over the reduced dim per reduce
                            (emitters/column_normalize.py)
    row_normalize           e / sum(e) over the minor dimension: softmax (emitters/row_normalize.py)
    column_reduces          a tuple of column reduces sharing one walk
    scatter                 a scatter root (emitters/scatter.py)
    merge_sort              a sort root that host_sort declined (emitters/merge_sort.py)
    select_and_scatter      a select-and-scatter root (emitters/scatter.py)
    column_reduce           a reduce keeping its input's minor dimension
    loop_nest               any other root, or a tuple whose outputs share one shape:
                            one loop nest of element generators (emitters/loop_nest.py)
    per_output_loops        a tuple root: one serial nest per element

A kernel that computes on complex numbers (c64, c128: LLVM structs, see
elemental/complex_ops.py) takes only the rows of COMPLEX_ROWS, which build on element
generators; every other row works on vectors of scalars and declines it.

host_sort makes no kernel: the compiler asks `choose_on_host` before it makes one and
runs a SortThunk instead. A kernel's walk asks host_sort too, so a merge_sort
kernel's record says why numpy could not sort it.

The matches decide; the emitters only emit. Where an emitter module has its own
check (`why_not_gemm`, `why_not_block_transpose`, ...) the match calls it, so each
condition is written once, next to the code it guards, with its reason. A match
emits no IR. The walk builds a fusion's element generators where the backend always
has, before the first row that reads them: building emits no code but allocates
constant slots, whose order then stays put.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

from .conv.depthwise import try_emit_depthwise, why_not_depthwise
from .conv.on_gemm import emit_conv_gemm, why_not_conv, why_not_conv_gemm
from .conv.stencil import try_emit_depthwise_spatial, why_not_depthwise_spatial
from .elemental import complex_ops, generators
from .elemental.hoisting import make_hoister, plan_hoisting
from .emitters import column_normalize, loop_nest, row_normalize, streaming
from .emitters.column_reduce import (emit_column_reduce, try_emit_column_reduces,
                                     try_emit_reduce_epilogue, why_not_column_reduce,
                                     why_not_column_reduces, why_not_reduce_epilogue)
from .emitters.dot import try_emit_gemm, why_not_gemm
from .emitters.transpose import (try_emit_block_transpose, try_emit_row_shuffle,
                                 why_not_block_transpose, why_not_row_shuffle)
from .gemm.operands import View, resolve_view
from .llvm.kernel_ir import strides
from .sort_thunk import match_sort, why_not_host_sort


@dataclass(frozen=True)
class Decision:
    """A row's answer for one kernel: `reason` is None when the row may apply (then the
    Decision is true), else why it does not. `found` is what the match found that its
    emitter needs (row_normalize: the row sum; host_sort: the sort key)."""
    reason: str | None = None
    found: object = None

    def __bool__(self) -> bool:
        return self.reason is None


MAY_APPLY = Decision()


@dataclass(frozen=True)
class Strategy:
    """One row of the table: `match(candidate) -> Decision`, and
    `emit(candidate, decision) -> partition extent` (None: it declined after all);
    `emit` is None for a row that makes no kernel (host_sort).
    `reads_generators`: the row reads a fusion's element generators."""
    name: str
    match: Callable[["Candidate"], Decision]
    emit: Callable[["Candidate", Decision], int | None] | None
    reads_generators: bool = True


class Choice(NamedTuple):
    """How one kernel was emitted: its name, the chosen row, and the rows declined
    before it with their reasons (in table order)."""
    kernel: str
    chosen: str
    declined: tuple[tuple[str, str], ...]

    def lines(self) -> list[str]:
        """The record as `hlo-opt --explain` prints it."""
        return [f"{self.kernel}: {self.chosen}"] + \
            [f"  {name} declined: {reason}" for name, reason in self.declined]


class Candidate:
    """One kernel to emit and what the matches look at: the instruction, its fused
    computation and root (the instruction itself when unfused), the operand buffers'
    element readers and strided views, the output buffers, and for a fusion its
    element generators and hoisting plan."""

    def __init__(self, kernel, instr, operands=(), outputs=()):
        self.kernel, self.instr = kernel, instr
        self.outputs = list(outputs)
        self.comp = instr.fused_computation if instr.opcode == "fusion" else None
        self.root = self.comp.root if self.comp is not None else instr
        self.operand_gens = [generators.buffer_reader(buffer) for buffer in operands]
        self.views = {i: View(buf.pointer, buf.shape.dims, tuple(strides(buf.shape)), buf.etype)
                      for i, buf in enumerate(operands)}
        self.gens: dict | None = None      # a fusion's generators (build_generators)
        self._plan = None

    @property
    def fused(self) -> bool:
        return self.comp is not None

    def build_generators(self) -> None:
        """A fusion's element generators, once. In-place ops get none: they are
        emitted from their operands' generators."""
        if self.comp is None or self.gens is not None:
            return
        root = self.root
        in_place = [root] if root.opcode in loop_nest.IN_PLACE else []
        if root.opcode == "tuple":
            in_place = [root] + [e for e in root.operands if e.opcode in loop_nest.IN_PLACE]
        # Building generators emits no IR yet: only the ones the kernel calls cost code.
        self.gens = generators.build_generators(self.kernel, self.comp, self.operand_gens,
                                               skip=set(in_place))

    def operand_gen(self, i: int):
        """The generator of the root's operand i."""
        return self.gens[self.root.operands[i]] if self.fused else self.operand_gens[i]

    def root_operand_gens(self) -> list:
        return [self.operand_gen(i) for i in range(len(self.root.operands))]

    def operand_view(self, i: int) -> View | None:
        """The strided view of the root's operand i when it is an array in memory."""
        if self.fused:
            return resolve_view(self.root.operands[i], self.views)
        return self.views.get(i)

    def transposed_view(self) -> View | None:
        """The (transpose) root's operand as a view permuted like the root's output."""
        view = self.operand_view(0)
        if view is None:
            return None
        perm = self.root.dims()
        return View(view.pointer, tuple(view.dims[p] for p in perm),
                    tuple(view.strides[p] for p in perm), view.etype)

    @property
    def plan(self) -> list:
        """A fusion's hoisting plan (elemental/hoisting.py): the reduces computed once per row."""
        if self._plan is None:
            self._plan = plan_hoisting(self.root)
        return self._plan


def _not(c: Candidate, opcode: str) -> str | None:
    """The refusal when the root is not `opcode`, else None."""
    return None if c.root.opcode == opcode else f"not a {opcode}"


def _decision(reason: str | None) -> Decision:
    return MAY_APPLY if reason is None else Decision(reason)


# --- host_sort and materialize_inner -------------------------------------------------------

def _match_host_sort(c: Candidate) -> Decision:
    if c.root.opcode != "sort":
        return Decision("not a sort")
    if c.fused:
        return Decision("a fused sort (numpy sorts only a sort instruction of its own)")
    key = match_sort(c.instr)
    return Decision(found=key) if key is not None else Decision(why_not_host_sort(c.instr))


def _match_materialize_inner(c: Candidate) -> Decision:
    if not c.fused:
        return Decision("not a fusion")
    if not loop_nest.materialized(c.comp):
        return Decision("reads no dot, convolution or in-place result inside")
    return MAY_APPLY


def _emit_materialize_inner(c: Candidate, _: Decision) -> int:
    return loop_nest.emit_with_inner_in_place(c.kernel, c.comp, c.operand_gens, c.outputs)


# --- contractions: the GEMM and the convolutions ---------------------------------------------

def _match_gemm(c: Candidate) -> Decision:
    return _decision(_not(c, "dot") or why_not_gemm(c.root, c.operand_view(0), c.operand_view(1),
                                                    c.outputs[0].shape,
                                                    relayout=c.kernel.scratch_slot is not None))


def _emit_gemm(c: Candidate, _: Decision) -> int | None:
    return try_emit_gemm(c.kernel, c.root, c.operand_view(0), c.operand_view(1), c.outputs[0])


def _conv_match(why_not) -> Callable[[Candidate], Decision]:
    """The match of a convolution row: what every convolution emitter of memory views
    needs, then the row's own check, `why_not(kernel, conv, rhs_view, out)`."""
    def match(c: Candidate) -> Decision:
        if c.root.opcode != "convolution":
            return Decision("not a convolution")
        rhs, out = c.operand_view(1), c.outputs[0]
        return _decision(why_not_conv(c.root, rhs, out.shape)
                         or why_not(c.kernel, c.root, rhs, out))
    return match


def _conv_emit(emit) -> Callable[[Candidate, Decision], int | None]:
    """The emitter of a convolution row: `emit(kernel, conv, lhs_gen, rhs_view, out)`."""
    def emit_row(c: Candidate, _: Decision) -> int | None:
        return emit(c.kernel, c.root, c.operand_gen(0), c.operand_view(1), c.outputs[0])
    return emit_row


def _why_not_conv_gemm(kernel, conv, rhs_view, out) -> str | None:
    return why_not_conv_gemm(conv, rhs_view, out)


# --- transposes -------------------------------------------------------------------------------

def _match_row_shuffle(c: Candidate) -> Decision:
    return _decision(_not(c, "transpose")
                     or why_not_row_shuffle(c.root, c.transposed_view(), c.outputs[0].shape))


def _emit_row_shuffle(c: Candidate, _: Decision) -> int | None:
    return try_emit_row_shuffle(c.kernel, c.transposed_view(), c.outputs[0])


def _match_block_transpose(c: Candidate) -> Decision:
    return _decision(_not(c, "transpose")
                     or why_not_block_transpose(c.root, c.transposed_view(), c.outputs[0].shape))


def _emit_block_transpose(c: Candidate, _: Decision) -> int | None:
    return try_emit_block_transpose(c.kernel, c.root, c.transposed_view(), c.outputs[0])


# --- reductions -------------------------------------------------------------------------------

def _match_reduce_epilogue(c: Candidate) -> Decision:
    if not c.fused:
        return Decision("not a fusion")
    return _decision(why_not_reduce_epilogue(c.comp, c.kernel.scratch_slot is not None,
                                             len(c.outputs)))


def _emit_reduce_epilogue(c: Candidate, _: Decision) -> int | None:
    # A column reduce under pointwise ops (a mean).
    return try_emit_reduce_epilogue(c.kernel, c.comp, c.operand_gens, c.outputs)


def _match_column_normalize(c: Candidate) -> Decision:
    if not c.fused:
        return Decision("not a fusion")
    return _decision(column_normalize.why_not(c.comp, c.outputs))


def _emit_column_normalize(c: Candidate, _: Decision) -> int:
    # Blocks of columns: one pass over the reduced dimension per reduce, then the output.
    return column_normalize.emit(c.kernel, c.comp, c.operand_gens, c.outputs[0])


def _match_row_normalize(c: Candidate) -> Decision:
    if not c.fused:
        return Decision("not a fusion")
    if len(c.outputs) != 1:
        return Decision("several outputs")
    reduce = row_normalize.match(c.root, c.plan)
    if reduce is None:
        return Decision(row_normalize.why_not(c.root, c.plan))
    return Decision(found=reduce)


def _emit_row_normalize(c: Candidate, decision: Decision) -> int:
    # A softmax-like row: exp once, scale in place.
    return row_normalize.emit(c.kernel, c.root, decision.found, c.gens, c.plan, c.outputs[0])


def _match_column_reduces(c: Candidate) -> Decision:
    if not c.fused:
        return Decision("not a fusion")
    return _decision(why_not_column_reduces(c.root, c.outputs))


def _emit_column_reduces(c: Candidate, _: Decision) -> int | None:
    # Sibling column reduces: one streaming walk.
    return try_emit_column_reduces(c.kernel, c.root, c.gens, c.outputs)


def _match_column_reduce(c: Candidate) -> Decision:
    return _decision(why_not_column_reduce(c.root))


def _emit_column_reduce(c: Candidate, _: Decision) -> int:
    return emit_column_reduce(c.kernel, c.root, c.root_operand_gens(), c.outputs)


# --- in-place roots -----------------------------------------------------------------------------

def _in_place(opcode: str) -> Callable[[Candidate], Decision]:
    def match(c: Candidate) -> Decision:
        return _decision(_not(c, opcode))
    return match


def _emit_in_place(c: Candidate, _: Decision) -> int:
    return loop_nest.emit_in_place(c.kernel, c.root, c.root_operand_gens(), c.outputs)


# --- loop nests: the fallback --------------------------------------------------------------------

def _hoister(c: Candidate):
    """The loop nest's hoisting callback: a fusion's row reduces, each emitted once the
    nest has opened its dimensions (on vectors where the nest streams its output)."""
    if not c.fused or not c.plan:
        return None
    on_vectors = len(c.outputs) == 1 and streaming.wants_streaming(c.root.shape, c.outputs)
    return make_hoister(c.plan, c.gens, c.kernel if on_vectors else None)


def _match_loop_nest(c: Candidate) -> Decision:
    if c.root.opcode == "tuple":
        return _decision(loop_nest.why_not_one_nest(c.root, c.outputs))
    return MAY_APPLY


def _emit_loop_nest(c: Candidate, _: Decision) -> int:
    root = c.root
    if not c.fused:
        return loop_nest.emit_loop_nest_root(c.kernel, root, c.operand_gens, c.outputs)
    hoist = _hoister(c)
    if root.opcode == "tuple":
        return loop_nest.emit_tuple_together(c.kernel, root, c.gens, c.outputs, hoist)
    return loop_nest.emit_loop_nest_root(c.kernel, root, c.root_operand_gens(), c.outputs,
                                       c.gens.get(root), hoist, c.gens)


def _match_per_output(c: Candidate) -> Decision:
    return MAY_APPLY if c.root.opcode == "tuple" else Decision("not a tuple root")


def _emit_per_output(c: Candidate, _: Decision) -> int:
    return loop_nest.emit_per_output(c.kernel, c.root, c.gens, c.outputs)


STRATEGIES: list[Strategy] = [
    Strategy("host_sort", _match_host_sort, None, reads_generators=False),
    Strategy("materialize_inner", _match_materialize_inner, _emit_materialize_inner,
             reads_generators=False),
    Strategy("gemm", _match_gemm, _emit_gemm),
    Strategy("conv_depthwise", _conv_match(why_not_depthwise), _conv_emit(try_emit_depthwise)),
    Strategy("conv_depthwise_spatial", _conv_match(why_not_depthwise_spatial),
             _conv_emit(try_emit_depthwise_spatial)),
    Strategy("conv_gemm", _conv_match(_why_not_conv_gemm), _conv_emit(emit_conv_gemm)),
    Strategy("row_shuffle", _match_row_shuffle, _emit_row_shuffle),
    Strategy("block_transpose", _match_block_transpose, _emit_block_transpose),
    Strategy("column_reduce_epilogue", _match_reduce_epilogue, _emit_reduce_epilogue),
    Strategy("column_normalize", _match_column_normalize, _emit_column_normalize),
    Strategy("row_normalize", _match_row_normalize, _emit_row_normalize),
    Strategy("column_reduces", _match_column_reduces, _emit_column_reduces),
    Strategy("scatter", _in_place("scatter"), _emit_in_place),
    Strategy("merge_sort", _in_place("sort"), _emit_in_place),
    Strategy("select_and_scatter", _in_place("select-and-scatter"), _emit_in_place),
    Strategy("column_reduce", _match_column_reduce, _emit_column_reduce),
    Strategy("loop_nest", _match_loop_nest, _emit_loop_nest),
    Strategy("per_output_loops", _match_per_output, _emit_per_output),
]

STRATEGY_NAMES = tuple(row.name for row in STRATEGIES)
# The rows that emit complex numbers: the ones made of element generators only.
COMPLEX_ROWS = frozenset({"materialize_inner", "loop_nest", "per_output_loops"})


def emit_kernel(kernel, instr, operands: list, outputs: list) -> tuple[int, Choice]:
    """Emits the body of `kernel` computing `instr` from the `operands` buffers into
    the `outputs` buffers by the first row of STRATEGIES that takes it; returns the
    partition extent and the Choice."""
    kernel.operands = operands
    c = Candidate(kernel, instr, operands, outputs)
    declined: list[tuple[str, str]] = []
    complex_values = _computes_complex(instr)
    for row in STRATEGIES:
        if complex_values and row.name not in COMPLEX_ROWS:
            declined.append((row.name, "complex numbers (only element generators compute them)"))
            continue
        if row.reads_generators:
            c.build_generators()
        decision = row.match(c)
        if not decision:
            declined.append((row.name, decision.reason))
            continue
        if row.emit is None:          # (the compiler would have taken it: never here)
            declined.append((row.name, "makes no kernel (the compiler runs it on the host)"))
            continue
        extent = row.emit(c, decision)
        if extent is not None:
            return extent, Choice(kernel.name, row.name, tuple(declined))
        declined.append((row.name, "declined while emitting"))
    raise AssertionError(f"backend_cpu: no kernel strategy took {instr.name}")


def _computes_complex(instr) -> bool:
    comp = instr.fused_computation if instr.opcode == "fusion" else None
    return any(complex_ops.handles(i) for i in (comp.instructions if comp else [instr])
               if i.opcode != "parameter")


def choose_on_host(instr) -> tuple[Choice, object] | None:
    """(the Choice, what its match found) when a row that makes no kernel takes
    `instr` (host_sort: a SortThunk sorts it with numpy); None when it needs a kernel."""
    c = Candidate(None, instr)
    declined: list[tuple[str, str]] = []
    for row in STRATEGIES:
        if row.emit is not None:
            continue
        decision = row.match(c)
        if decision:
            return Choice(instr.name, row.name, tuple(declined)), decision.found
        declined.append((row.name, decision.reason))
    return None
