"""Fusion instructions: what they look like and how passes build them.

A fusion is printed in XLA's form

    %loop_fusion = f32[32,100]{1,0} fusion(%x, %m), kind=kLoop, calls=%fused_computation

and calls a computation of its own (`is_fusion_computation = True`) whose
parameter i stands for operand i of the fusion. Every fusion xlapy creates has
one of three forms; `fusion_kind(instr)` tells them apart and a backend emits
each as ONE kernel:

kLoop (`kind=kLoop`, `fusion_kind` "loop")
    The root computes output elements independently: elementwise ops and data
    movement (broadcast, reshape, bitcast, transpose, slice, pad, concatenate,
    iota, reverse, dynamic-slice, gather), scalar constants, and parameters.
    It may also hold a `reduce-window`, or a `reduce` whose every output
    element the loop reads exactly once (`mean = sum / n`, `log(sum)`): their
    element generators loop over the window / reduced dimensions. A
    multi-output loop fusion has a `tuple` root; its users are
    get-tuple-element instructions. Tuple elements need NOT share dimensions
    (horizontal fusion merges independent loops of any shape): emit one loop
    nest per group of elements with equal dimensions (`output_groups`), all
    inside the one kernel.

kInput (`kind=kInput`, "input")
    The root is a `reduce` (possibly variadic, e.g. argmax) whose operands are
    fused loop expressions (read by the reduction loop, never stored), or a
    `tuple` of such reduces that all reduce operands of the same dimensions
    over the same `dimensions` (sibling multi-output: one pass over the input).

row (`kind=kCustom, backend_config={"fusion_kind":"row"}`, "row")
    A whole row-wise normalization (softmax, log-softmax, layernorm, rmsnorm).
    Output shape S = [R1..Rk, N], one array (no tuple). Inside, every value
    is either a *row value* of dimensions S or a *row scalar* of dimensions
    [R1..Rk] (or [R1..Rk,1], reshaped to and from [R1..Rk]). Every `reduce`
    reduces a row value over exactly the last dimension (`dimensions={k}`)
    into a row scalar, with a scalar init. A row scalar reaches row values
    only through `broadcast(<[R1..Rk] value>, dimensions={0..k-1})`.
    Parameters of shape S are read row by row; any other parameter (a [N]
    gamma, a scalar) is read through a broadcast like in a loop fusion.
    Emission: for each row r (the outer k dimensions, split over threads):
    evaluate the row scalars in post order -- a reduce is one pass over
    j = 0..N-1 of its operand's element generator at (r, j) -- then write the
    root's N elements of row r. The row's inputs stay in cache between passes.
    `row_reduces(fusion)` lists the reduces in the order to evaluate them.
    Column form (`backend_config={"fusion_kind":"row","row_dim":a}`): the same
    with the reduced dimension `a` not the last one (softmax over axis 0): row
    scalars have dimensions S without `a` (or with `a` of size 1), every reduce
    has `dimensions={a}`, and broadcasts back have every dimension but `a`; the
    root is in the default layout. `row_dim(fusion)` gives `a` (None for the
    plain form). Emission: for each block of columns (the dimensions other than
    `a`, split over threads), one lane-wise pass over `a` per reduce, then the
    output pass (backend_cpu/emitters/column_normalize.py).

Control edges (`control-predecessors`) never enter a fused computation: an
instruction moved (or cloned) into a fusion hands its control predecessors to
the fusion instruction, and whatever had to run after it runs after the fusion
(`_carry_control_edges`). The passes keep that from closing a cycle: a producer
that something else must follow is not fused (`control_successors`), and
sibling merges check reachability over data and control edges.

Layouts: a fused parameter, a fusion's root and the fusion instruction may each
declare a layout of their own (XLA's text does; the backend converts at those
boundaries). When a function here puts one value where another was declared (a
producer's value for the parameter that read it, a parameter of the fusion for
another one, a fusion's output for the fusion), the readers keep the declared
layout: a `copy` inside the body (`passes.hlo_utils.in_layout`) or a
get-tuple-element declaring it. A `bitcast` reading the old value would otherwise
reinterpret other bytes (issue 14).

Functions here build and grow fusions; the fusion passes only decide *what*
to fuse. They keep `users`, parameter numbering and the instruction order of
the enclosing computation consistent, and they move instructions into a fused
computation (names kept) unless another user still needs the original, in
which case it is cloned.
"""
from __future__ import annotations

from ..hlo import HloComputation, HloInstruction, RawAttr, Shape

from .hlo_utils import in_layout, new_instruction

LOOP, INPUT, ROW = "kLoop", "kInput", "row"
ROW_BACKEND_CONFIG = '{"fusion_kind":"row"}'


# --- kinds ---------------------------------------------------------------------------

def fusion_kind(instr: HloInstruction) -> str:
    """"loop", "input", "row", "output" or "custom" for a fusion instruction."""
    kind = instr.attrs.get("kind", "kLoop")
    if kind == "kCustom":
        config = instr.attrs.get("backend_config")
        text = config.text if isinstance(config, RawAttr) else str(config or "")
        return "row" if '"fusion_kind":"row"' in text.replace(" ", "") else "custom"
    return {"kLoop": "loop", "kInput": "input", "kOutput": "output"}.get(kind, "custom")


def row_dim(fusion: HloInstruction) -> int | None:
    """The reduced dimension `a` of a row fusion's column form, else None."""
    config = fusion.attrs.get("backend_config")
    text = (config.text if isinstance(config, RawAttr) else str(config or "")).replace(" ", "")
    if '"fusion_kind":"row"' not in text or '"row_dim":' not in text:
        return None
    digits = text.split('"row_dim":', 1)[1]
    end = next((i for i, ch in enumerate(digits) if not ch.isdigit()), len(digits))
    return int(digits[:end]) if end else None


def set_row_dim(fusion: HloInstruction, dim: int) -> None:
    """Tags a row fusion as the column form reducing dimension `dim`."""
    fusion.attrs["backend_config"] = RawAttr('{"fusion_kind":"row","row_dim":%d}' % dim)


def _kind_attrs(kind: str) -> dict:
    if kind == ROW:
        return {"kind": "kCustom", "backend_config": RawAttr(ROW_BACKEND_CONFIG)}
    return {"kind": kind}


def outputs(fusion: HloInstruction) -> list[HloInstruction]:
    """The values a fusion produces, inside its fused computation."""
    root = fusion.fused_computation.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def output_groups(fusion: HloInstruction) -> list[list[int]]:
    """Output indices of a (horizontal) loop fusion grouped by equal dimensions."""
    groups: dict[tuple, list[int]] = {}
    for i, value in enumerate(outputs(fusion)):
        groups.setdefault(value.shape.dims, []).append(i)
    return list(groups.values())


def row_reduces(fusion: HloInstruction) -> list[HloInstruction]:
    """The reduces of a row fusion, in an order where each one's inputs come first."""
    return [i for i in fusion.fused_computation.post_order() if i.opcode == "reduce"]


# --- parameters ----------------------------------------------------------------------

def _parameter_for(fusion: HloInstruction, operand: HloInstruction) -> HloInstruction:
    """The fused parameter reading `operand`, added (as the last operand) if missing."""
    comp = fusion.fused_computation
    for i, op in enumerate(fusion.operands):
        if op is operand:
            return comp.parameter(i)
    number = len(fusion.operands)
    fusion.set_operands(fusion.operands + [operand])
    return new_instruction(comp, "parameter", operand.shape, name=f"param_{number}",
                           parameter_number=number)


def _read_operand(fusion: HloInstruction, operand: HloInstruction,
                  shape: Shape | None = None) -> HloInstruction:
    """Inside the fusion, the value of `operand` in the layout of `shape` (default: the
    operand's own): its parameter, or a copy of it when that parameter was declared in
    another layout (a fusion parsed from text may declare any; `in_layout` says why).
    An operand the fusion does not read but holds a clone of is read from that clone."""
    shape = shape or operand.shape
    if not any(op is operand for op in fusion.operands):
        clone = _clone_in(fusion, operand)
        if clone is not None:
            return in_layout(clone, shape, fusion.fused_computation)
    param = _parameter_for(fusion, operand)
    for user in param.users:         # one copy per layout (the body is sorted afterwards)
        if user.opcode == "copy" and user.shape.minor_to_major() == shape.minor_to_major():
            return user
    return in_layout(param, shape, fusion.fused_computation)


def _remove_operand(fusion: HloInstruction, number: int) -> None:
    """Drops operand `number` (whose parameter must be unused) and renumbers the rest."""
    comp = fusion.fused_computation
    param = comp.parameter(number)
    comp.remove_instruction(param)
    for p in comp.parameters:
        if p.parameter_number > number:
            p.parameter_number -= 1
    fusion.set_operands(fusion.operands[:number] + fusion.operands[number + 1:])


def _name_parameters(fusion: HloInstruction) -> None:
    """Renames fused parameters to `param_<number>` (made unique) after renumbering."""
    module = fusion.parent.parent
    for param in fusion.fused_computation.parameters:
        base = f"param_{param.parameter_number}"
        if param.name != base and not param.name.startswith(base + "."):
            param.name = module.uniquify(base) if module is not None else base


def _carry_control_edges(instr: HloInstruction, fusion: HloInstruction,
                         moved: bool = True) -> bool:
    """`instr` now runs inside `fusion`: the fusion runs after `instr`'s control
    predecessors and, if `instr` was moved (not cloned), before its control successors.
    Edges between two members of the fusion disappear (one kernel has no order).
    True if an instruction other than the fusion now waits for the fusion."""
    comp = fusion.parent
    for pred in instr.control_predecessors:
        if pred.parent is comp and pred is not fusion:
            fusion.add_control_predecessor(pred)
    if not moved:
        return False
    instr.drop_control_predecessors()
    waits = False
    for other in comp.control_successors(instr):
        other.remove_control_predecessor(instr)
        if other is not fusion:
            other.add_control_predecessor(fusion)
            waits = True
    return waits


def control_successors(instr: HloInstruction) -> list[HloInstruction]:
    """The instructions of its computation that must run after `instr` (a scan)."""
    comp = instr.parent
    return [] if comp is None else comp.control_successors(instr)


# --- clones of producers that stay outside ------------------------------------------
#
# `fuse_producer` clones a producer P that still has users outside the fusion. When
# one of those users is fused into the same fusion later, it reads P's clone: were P
# to come back as an operand, it would be fused (cloned or moved) a second time, and
# so would everything below it that also has two users. On a chain where every value
# has two users (an add-rotate-xor round: `s = a + b; x = s ^ b`, n rounds), the fused
# body grew to ~n^2/2 instructions (left for CSE to merge), each step of the driver
# sorting all of them: minutes for 100 rounds. With the clone reused the body has one
# instruction per fused value, and a P that no user outside reads any more is removed
# where it would otherwise have been moved in as the second copy.

def _clones(body: HloComputation) -> dict:
    """id(original) -> (original, clone) for the producers cloned into fused `body`."""
    table = body.__dict__.get("_fusion_clones")
    if table is None:
        table = body._fusion_clones = {}
    return table


def _clone_in(fusion: HloInstruction, original: HloInstruction) -> HloInstruction | None:
    """The clone of `original` inside `fusion` if it still computes `original`'s value:
    same opcode, shape and attributes over the fusion's values of the same operands."""
    body = fusion.fused_computation
    entry = body.__dict__.get("_fusion_clones", {}).get(id(original))
    if entry is None or entry[0] is not original:
        return None
    clone = entry[1]
    if clone.parent is not body or clone.opcode != original.opcode \
            or clone.shape != original.shape or clone.attrs != original.attrs \
            or len(clone.operands) != len(original.operands):
        return None
    for value, operand in zip(clone.operands, original.operands):
        if value.opcode == "copy" and value.operands[0].opcode == "parameter":
            value = value.operands[0]          # a layout copy of the parameter
        if value.opcode == "parameter":
            number = value.parameter_number
            if number >= len(fusion.operands) or fusion.operands[number] is not operand:
                return None
        else:
            inner = body.__dict__.get("_fusion_clones", {}).get(id(operand))
            if inner is None or inner[0] is not operand or inner[1] is not value:
                return None
    return clone


def _drop_dead_originals(fusion: HloInstruction, candidates: list[HloInstruction]) -> None:
    """Removes the instructions of `candidates` (and, in turn, their operands) that nothing
    outside reads any more and whose value the fusion holds as a clone. Ones with
    control edges stay (DCE removes them later)."""
    comp = fusion.parent
    pending = list(candidates)
    while pending:
        instr = pending.pop()
        if instr.parent is not comp or instr.users or instr is comp.root \
                or instr.control_predecessors or _clone_in(fusion, instr) is None \
                or control_successors(instr):
            continue
        operands = list(instr.operands)
        comp.remove_instruction(instr)
        pending.extend(operands)


# --- creating and growing fusions --------------------------------------------------

def create_fusion(instr: HloInstruction, kind: str, name: str | None = None) -> HloInstruction:
    """Wraps `instr` in a new fusion of `kind`; the fusion takes its place and users."""
    comp, module = instr.parent, instr.parent.parent
    fused = HloComputation("fused_computation")
    fused.is_fusion_computation = True
    module.add_computation(fused, before=comp)
    label = {LOOP: "loop", INPUT: "input", ROW: "row"}.get(kind, "custom")
    fusion = new_instruction(comp, "fusion", instr.shape, before=instr,
                             name=name or f"{label}_fusion",
                             attrs={**_kind_attrs(kind), "calls": fused})
    if "metadata" in instr.attrs:
        fusion.attrs["metadata"] = instr.attrs["metadata"]
    operands = list(instr.operands)
    instr.replace_all_uses_with(fusion)
    for i, op in enumerate(operands):
        instr.replace_operand(i, _read_operand(fusion, op))
    _carry_control_edges(instr, fusion)
    fused.move_instruction(instr)
    fused.set_root(instr)
    fused.sort_topologically()
    return fusion


def fuse_producer(fusion: HloInstruction, producer: HloInstruction,
                  keep_output: bool = False, *, parent_sorted: bool = False,
                  sort_body: bool = True) -> HloInstruction:
    """Fuses operand `producer` into `fusion`; returns its value inside the fusion.

    Moved if the fusion is its only user, else cloned (the original keeps its
    other users). With `keep_output`, it is instead moved and exposed as an
    extra output: its other users read a get-tuple-element of the fusion.
    A producer that is itself a (single-output) fusion is merged body and all.

    The fused body is left in topological order unless `sort_body` is False: then the
    caller sorts it after its last producer (a sort per step makes growing a body of n
    instructions cost n^2; nothing here reads the body's order).

    The enclosing computation is left in topological order. `parent_sorted`: the
    caller knows it was in that order already (a fuse_producer or create_fusion left
    it so, nothing changed it since). Then it is re-sorted only where this step can
    break the order: a get-tuple-element read by the producer's other users, or
    control successors of the producer now waiting for the fusion. Otherwise the
    fusion's new operands are the producer's operands, listed before the producer,
    which is listed before the fusion: a sort would change nothing and costs a pass
    over the whole computation, on each of the driver's steps.
    """
    comp = fusion.parent
    others = [u for u in producer.users if u is not fusion]
    move = keep_output or not others
    waits = _carry_control_edges(producer, fusion, moved=move)
    # What the producer read outside: moved in, it may have read the last outside use
    # of a value the fusion holds as a clone (`_drop_dead_originals`).
    released = list(producer.operands) if move else []
    if producer.opcode == "fusion":
        assert move, "fusions are merged, never duplicated"
        body = producer.fused_computation
        value = _inline_body(fusion, producer)
    elif move:
        for i, op in enumerate(list(producer.operands)):
            producer.replace_operand(i, _read_operand(fusion, op))
        value = producer
    else:
        value = fusion.fused_computation.clone_instruction(
            producer, [_read_operand(fusion, op) for op in producer.operands])
        _clones(fusion.fused_computation)[id(producer)] = (producer, value)
    # The parameter(s) that read the producer now read its fused value, in the layout
    # the parameter declared (a bitcast of it means the parameter's bytes).
    for number in reversed([i for i, op in enumerate(fusion.operands) if op is producer]):
        param = fusion.fused_computation.parameter(number)
        param.replace_all_uses_with(in_layout(value, param.shape, fusion.fused_computation))
        _remove_operand(fusion, number)
    if keep_output and others:
        # The other users keep reading the producer's declared layout (a fused body's
        # root may have another): the get-tuple-element declares it.
        gte = _get_tuple_element(fusion, add_output(fusion, value), producer.shape)
        for user in others:
            user.replace_operand_with(producer, gte)
        if comp.root is producer:
            comp.set_root(gte)
    if producer.opcode == "fusion":
        _discard_fusion(producer, body)
    elif move:
        fusion.fused_computation.move_instruction(producer)
    _drop_dead_originals(fusion, released)
    _name_parameters(fusion)
    if sort_body:
        fusion.fused_computation.sort_topologically()
    if not parent_sorted or (keep_output and others) or waits:
        comp.sort_topologically()
    return value


def _inline_body(target: HloInstruction, source: HloInstruction) -> HloInstruction:
    """Moves the fused body of fusion `source` into fusion `target`.

    Source parameters become target parameters for the same operands. Returns
    the source's root inside the target. The caller redirects the users of
    `source` and then discards it (`_discard_fusion`).
    """
    body = source.fused_computation
    for param in list(body.parameters):
        param.replace_all_uses_with(
            _read_operand(target, source.operands[param.parameter_number], param.shape))
    root = body.root
    for instr in [i for i in body.post_order() if i.opcode != "parameter"]:
        target.fused_computation.move_instruction(instr)
    if body.__dict__.get("_fusion_clones"):     # its clones now live in the target
        _clones(target.fused_computation).update(body._fusion_clones)
    return root


def _discard_fusion(fusion: HloInstruction, body: HloComputation) -> None:
    """Removes a fusion whose body has been moved elsewhere, and its computation."""
    comp = fusion.parent
    if fusion.users or comp.root is fusion:
        raise ValueError(f"{fusion.name} still has users")
    comp.remove_instruction(fusion)
    if body.parent is not None:
        body.parent.remove_computation(body)


def _get_tuple_element(fusion: HloInstruction, index: int,
                       shape: Shape | None = None) -> HloInstruction:
    """get-tuple-element `index` of a multi-output fusion. `shape`: the layout its users
    expect, when it differs from the output's (the backend converts at the get-tuple-element
    boundary, a copy inside would break the form of an input fusion)."""
    shape = shape or fusion.fused_computation.root.operands[index].shape
    return new_instruction(fusion.parent, "get-tuple-element", shape, [fusion],
                           attrs={"index": index})


def add_output(fusion: HloInstruction, value: HloInstruction) -> int:
    """Makes `value` (inside the fusion) an extra output; returns its tuple index.

    A single-output fusion becomes multi-output: its root turns into a tuple and
    its previous users read get-tuple-element 0.
    """
    body = fusion.fused_computation
    root = body.root
    if root.opcode != "tuple":
        comp = fusion.parent
        users, was_root = list(fusion.users), comp.root is fusion
        declared = fusion.shape          # what the users read; the root's layout may differ
        body.set_root(new_instruction(body, "tuple", Shape.tuple_of([root.shape]), [root],
                                      name="tuple"))
        fusion.shape = body.root.shape
        gte = _get_tuple_element(fusion, 0, declared)
        for user in users:
            user.replace_operand_with(fusion, gte)
        if was_root:
            comp.set_root(gte)
        root = body.root
    root.set_operands(root.operands + [value])
    root.shape = Shape.tuple_of([op.shape for op in root.operands])
    fusion.shape = root.shape
    return len(root.operands) - 1


def merge_siblings(first: HloInstruction, second: HloInstruction, *,
                   sort_parent: bool = True) -> HloInstruction:
    """Merges fusion `second` into fusion `first` as extra outputs; returns `first`,
    now multi-output. There must be no data dependence between the two, and
    `second` must not be the root of its computation.

    The enclosing computation is sorted again (`first` may now read what was listed
    after it, the new get-tuple-elements are added at the end) unless `sort_parent` is
    False: then the caller sorts it once after all its merges. A sort costs a walk over
    the list from `first` on, and a pass makes one merge per pair (the 12-layer GPT
    step: 107 merges of a ~900-instruction list)."""
    comp = first.parent
    assert comp.root is not second, "cannot merge away the root"
    body = second.fused_computation
    old_root = body.root
    single = old_root.opcode != "tuple"
    values = outputs(second)
    _carry_control_edges(second, first)
    _inline_body(first, second)
    indices = [add_output(first, v) for v in values]
    if not single:                    # second's own tuple root is now dead
        first.fused_computation.remove_instruction(old_root)
    gte = _get_tuple_element(first, indices[0], second.shape) if single and second.users \
        else None
    for user in list(second.users):
        if single:
            user.replace_operand_with(second, gte)
        else:                         # get-tuple-element(second, j)
            user.replace_operand_with(second, first)
            user.attrs["index"] = indices[user.attrs["index"]]
    _discard_fusion(second, body)
    _name_parameters(first)
    first.fused_computation.sort_topologically()
    if sort_parent:
        comp.sort_topologically()
    return first
