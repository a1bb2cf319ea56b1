"""The generic kernel shapes: loop nests, multi-output roots, in-place ops, and fusions
that read a contraction or an in-place result inside.

strategies.py chooses how each kernel is emitted (one ordered table, every refusal
with its reason) and calls these for the general cases. A fusion's computation is
turned into generators (elemental/generators.py) whose parameters read the fusion's operand
buffers; an unfused instruction is treated as a one-instruction fusion. Then:

- a generator-capable root (elementwise, movement, reduce, dot, ...) is
  materialized by one loop nest over its output, partitioned on the outermost
  dimension (`emit_loop_nest_root`);
- a tuple root (multi-output fusion) stores every element from the same loop
  nest when they share a shape (`emit_tuple_together`), else runs one nest per
  element (`emit_per_output`);
- scatter, sort and select-and-scatter write their outputs in place, so they
  first copy (or initialize) the output and then update it (`IN_PLACE`;
  scatter.py splits both over the threads where that is race-free);
- a fusion that reads a dot, convolution or in-place result inside computes it
  once into scratch memory first (`emit_with_inner_in_place`).

Each returns the partition extent (how many units `[begin, end)` may split), 1
meaning "call once with [0, 1)".
"""
from __future__ import annotations

from ..elemental import generators, vector_gen
from ..llvm.kernel_ir import Buffer
from ..llvm.loops import emit_loop_nest, for_range, i64, partition_extent

from . import streaming
from .merge_sort import emit_sort
from .scatter import emit_scatter, emit_select_and_scatter


def emit_in_place(kernel, root, operand_gens, outputs) -> int:
    """A scatter, sort or select-and-scatter `root` writing `outputs` in place."""
    return IN_PLACE[root.opcode](kernel, root, operand_gens, outputs, partitioned=True)


def emit_loop_nest_root(kernel, root, operand_gens, outputs, root_gen=None, hoist=None,
                        gens=None) -> int:
    """One loop nest storing `root`'s value (`root_gen`, else a generator made from
    `operand_gens`) into `outputs`. `gens`: every instruction's generator (a fusion's);
    None for an unfused `root`."""
    gen = root_gen or generators.make_generator(kernel, root, operand_gens)
    if gens is None:
        gens = {**dict(zip(root.operands, operand_gens)), root: gen}
    return _store_together(kernel, lambda b, index: _as_list(gen(b, index)), outputs,
                           tile_dim=_transposed_dim(root), hoist=hoist,
                           roots=[root], gens=gens)


def emit_tuple_together(kernel, root, gens, outputs, hoist=None) -> int:
    """A multi-output fusion whose outputs share one shape: one nest stores every
    element. Outputs of different layouts (JAX's AdamW update of a transposed gradient:
    the new moments in {0,1}, the new parameter in {1,0}) get one nest per layout
    (`_store_layout_groups`), all partitioned, rather than one serial nest per output
    that recomputes the shared chain each time."""
    layouts = [o.shape.minor_to_major() for o in outputs]
    if len(set(layouts)) > 1:
        return _store_layout_groups(kernel, root, gens, outputs, layouts)
    return _store_together(
        kernel, lambda b, index: [v for e in root.operands for v in _as_list(gens[e](b, index))],
        outputs, hoist=hoist, roots=list(root.operands), gens=gens)


def _store_layout_groups(kernel, root, gens, outputs, layouts) -> int:
    """The outputs of each layout stored by a nest of their own, walking that layout
    (contiguous stores, vectorized along its minor dimension; the inputs of the other
    layout are read across). The kernel's [begin, end) counts units of the largest
    nest's partition extent; each nest scales it to its own extent, so every nest is
    covered exactly once over all partitions."""
    leaves = [(e, k) for e in root.operands for k in range(len(e.shape.leaves()))]
    groups: dict = {}
    for i, layout in enumerate(layouts):
        groups.setdefault(layout, []).append(i)
    extents = {layout: partition_extent(outputs[members[0]].shape)
               for layout, members in groups.items()}
    total = max(extents.values())
    b = kernel.b
    for layout, members in groups.items():
        extent = extents[layout]
        begin, end = (b.udiv(b.mul(bound, i64(extent)), i64(total))
                      for bound in (kernel.begin, kernel.end))

        def gen(b, index, members=members):
            return [_as_list(gens[leaves[i][0]](b, index))[leaves[i][1]] for i in members]
        _store_together(kernel, gen, [outputs[i] for i in members],
                        shape=outputs[members[0]].shape, bounds=(begin, end))
    return total


def emit_per_output(kernel, root, gens, outputs) -> int:
    """A multi-output fusion, serially: one whole nest (or in-place op) per element."""
    per_element, rest = [], list(outputs)
    for e in root.operands:
        count = len(e.shape.leaves())
        per_element.append((e, rest[:count]))
        rest = rest[count:]
    for e, outs in per_element:
        if e.opcode in IN_PLACE:
            IN_PLACE[e.opcode](kernel, e, [gens[o] for o in e.operands], outs)
            continue
        for k, out in enumerate(outs):
            _fill(kernel, out, lambda b, index, g=gens[e], k=k: _as_list(g(b, index))[k])
    return 1


def why_not_one_nest(root, outputs) -> str | None:
    """Why the outputs of the tuple `root` cannot be stored by one loop nest, or None."""
    if len({o.shape.dims for o in outputs}) != 1:
        return "the outputs differ in shape"
    in_place = next((e for e in root.operands if e.opcode in IN_PLACE), None)
    if in_place is not None:
        return f"{in_place.name} ({in_place.opcode}) writes its output in place"
    return None


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _store_together(kernel, gen, outputs, tile_dim=None, hoist=None, roots=(),
                    gens=None, shape=None, bounds=None) -> int:
    """One loop nest over the (common) output shape storing every value of `gen`
    (a large output with non-temporal stores: streaming.py). When `roots` (the
    instructions whose values `gen` gives, one output each) have vector generators,
    the minor loop works on vectors (elemental/vector_gen.py). `shape`: the dims and
    layout the nest walks (the outputs' dims; default: the first output's layout).
    `bounds`: the nest's [begin, end) instead of the kernel's (then no streaming)."""
    shape = shape or outputs[0].shape
    if tile_dim is None and bounds is None:
        outputs = streaming.streamed_outputs(kernel, shape, outputs,
                                             prefetch_next_row=hoist is not None)
    minor_loop = getattr(outputs[0], "emit_minor_loop", None)

    def body(b, index):
        with kernel.scope():
            for out, value in zip(outputs, gen(b, index)):
                out.store(b, index, value)
    vector_body = None if tile_dim is not None else _vector_body(kernel, roots, gens, outputs)
    begin, end = bounds or (kernel.begin, kernel.end)
    emit_loop_nest(kernel.b, shape, begin, end, body, tile_dim=tile_dim,
                   hoist=hoist, level_scope=kernel.scope, minor_loop=minor_loop,
                   vector_body=vector_body)
    return streaming.partition_extent(outputs) or partition_extent(shape)


def _vector_body(kernel, roots, gens, outputs):
    """(lanes, body) storing every root's vector at an index, or None when some root
    has no vector generator along the outputs' minor dimension.

    Only kernels that stream their output take it (elemental/vector_gen.py says why)."""
    if not isinstance(outputs[0], streaming.StreamedBuffer):
        return None
    if not roots or gens is None or len(roots) != len(outputs) or outputs[0].shape.rank == 0:
        return None
    dim = outputs[0].minor_dim()
    if any(out.minor_dim() != dim or out.etype not in vector_gen.LANE_TYPES for out in outputs):
        return None
    lanes = outputs[0].lanes            # one cache line: a streamed chunk's unit
    vgens = [vector_gen.vector_generator(kernel, gens, r, dim, lanes) for r in roots]
    if None in vgens:
        return None

    def body(b, index):
        with kernel.scope():
            for out, vgen in zip(outputs, vgens):
                out.store_vector(b, index, vgen(b, index))
    return lanes, body


def _transposed_dim(root) -> int | None:
    """For a root that moves data across the minor dimension (a transpose, or a copy
    changing the layout), the output dimension its input's minor dimension becomes:
    the loop nest tiles it against the output's own minor dimension."""
    if root.opcode not in ("transpose", "copy") or root.shape.rank < 2:
        return None
    operand = root.operands[0].shape
    source_minor = operand.minor_to_major()[0]
    if root.opcode == "transpose":
        out_dim = root.dims().index(source_minor)
    else:
        out_dim = source_minor
    return None if out_dim == root.shape.minor_to_major()[0] else out_dim


def _fill(kernel, out: Buffer, gen) -> None:
    """out[i] = gen(i) for every i, ignoring [begin, end) (serial kernels only)."""
    def body(b, index):
        with kernel.scope():
            out.store(b, index, gen(b, index))
    emit_loop_nest(kernel.b, out.shape, i64(0), i64(partition_extent(out.shape)), body)


def _for_each_index(kernel, shape, body, skip_dim=None) -> None:
    """Serial loops over every index of `shape` (dimension `skip_dim` left None)."""
    b = kernel.b
    index: list = [None] * shape.rank
    dims = [d for d in range(shape.rank) if d != skip_dim]

    def nest(level):
        if level == len(dims):
            with kernel.scope():
                body(b, list(index))
            return
        with for_range(b, 0, shape.dims[dims[level]], f"s{dims[level]}") as i:
            index[dims[level]] = i
            nest(level + 1)
    nest(0)


# --- in-place kernels ---------------------------------------------------------------------

def _read_inside(comp) -> list:
    """The instructions of `comp` in MATERIALIZED whose value something in it reads
    (not only the root, or a root tuple, as an output)."""
    root = comp.root
    roots = list(root.operands) if root.opcode == "tuple" else [root]
    return [i for i in comp.instructions if i.opcode in MATERIALIZED
            and (all(i is not r for r in roots) or any(u is not root for u in i.users))]


def materialized(comp) -> bool:
    """True when something in the fusion computation `comp` reads the result of a
    scatter, sort, select-and-scatter, dot or convolution (emit_with_inner_in_place)."""
    return bool(_read_inside(comp))


def emit_with_inner_in_place(kernel, comp, operand_gens, outputs) -> int:
    """A fusion that reads the result of a scatter, sort, select-and-scatter, dot or
    convolution inside (xlapy's passes never make one; XLA's YNNPACK fusions chain
    convolutions): each such op is computed once, first, into a scratch buffer of
    this kernel, which the rest then reads. The scratch buffer is shared by the whole
    launch, so the kernel runs as one partition (returns 1)."""
    if kernel.scratch_slot is None:
        raise NotImplementedError("backend_cpu: a scatter, sort, select-and-scatter, dot or "
                                  "convolution read inside a fusion needs scratch memory")
    root = comp.root
    roots = list(root.operands) if root.opcode == "tuple" else [root]
    # What something in the fusion reads goes to scratch memory; an in-place op that
    # is only an output is written straight into its output.
    to_scratch = {id(i) for i in _read_inside(comp)}
    gens: dict = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            gens[instr] = operand_gens[instr.parameter_number]
        elif id(instr) in to_scratch:
            leaves = instr.shape.leaves()
            scratch = [kernel.buffer(kernel.scratch_slot(s), s) for s in leaves]
            srcs = [gens[o] for o in instr.operands]
            if instr.opcode in IN_PLACE:
                IN_PLACE[instr.opcode](kernel, instr, srcs, scratch)
            else:
                _fill(kernel, scratch[0], generators.make_generator(kernel, instr, srcs))
            readers = [generators.buffer_reader(buf) for buf in scratch]
            gens[instr] = readers[0] if instr.shape.is_array else \
                (lambda b, index, rs=readers: [r(b, index) for r in rs])
        elif instr.opcode not in IN_PLACE and not (instr is root and root.opcode == "tuple"):
            gens[instr] = generators.make_generator(kernel, instr,
                                                    [gens[o] for o in instr.operands])
    rest = list(outputs)
    for e in roots:                      # serial: one whole nest (or in-place op) each
        count = len(e.shape.leaves())
        outs, rest = rest[:count], rest[count:]
        if e.opcode in IN_PLACE and id(e) not in to_scratch:
            IN_PLACE[e.opcode](kernel, e, [gens[o] for o in e.operands], outs)
            continue
        for k, out in enumerate(outs):
            _fill(kernel, out, lambda b, index, g=gens[e], k=k: _as_list(g(b, index))[k])
    return 1


def _sort(kernel, instr, gens, outputs, partitioned=False) -> int:
    emit_sort(kernel, instr, gens, outputs, _for_each_index)
    return 1


IN_PLACE = {"scatter": emit_scatter, "sort": _sort, "select-and-scatter": emit_select_and_scatter}

# Ops whose result a fusion must not recompute per element that reads it: the in-place
# ops have no element generator at all, and a contraction's generator is a whole dot
# product (a convolution read by a convolution is quadratic).
MATERIALIZED = frozenset(IN_PLACE) | {"dot", "convolution"}

KERNEL_OPCODES = generators.GENERATOR_OPCODES | set(IN_PLACE)
