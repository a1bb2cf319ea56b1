"""Row fusion: a whole row-wise normalization in one kernel (beyond XLA's CPU backend).

Softmax, log-softmax, layernorm and rmsnorm share one shape of computation:
reductions over the minor dimension whose results are broadcast back over it.

    x:[R,N] -> reduce(max, dims={1}) -> m:[R] -> broadcast(dims={0}) -> [R,N]
    x - m -> exp -> e:[R,N] -> reduce(add) -> s:[R] -> broadcast -> e / s

XLA's CPU backend emits this as 3-6 kernels, each streaming the whole tensor
through memory. Row fusion makes it ONE fusion that a backend computes row by
row: the reductions of row r, then the output of row r, while the row is still
in cache. The form of the resulting fusion (`kind=kCustom` tagged
`"fusion_kind":"row"`) is specified in `fusion_utils`.

The pattern matched, for an output shape S = [R1..Rk, N]:

- *row values* have dimensions S: elementwise ops on row values; broadcasts
  into S (of a row scalar over dims {0..k-1}, or of anything computed outside
  the fusion, such as a [N] gamma or a scalar);
- *row scalars* have dimensions [R1..Rk], or [R1..Rk,1] (the "keepdims"
  form JAX computes in): reduces of a row value over exactly dimension k with
  a scalar constant init (giving [R1..Rk]); elementwise ops on row scalars;
  reshapes between the two forms; broadcasts of scalar constants;
- scalar constants (cloned in when used elsewhere too).

An instruction joins the fusion only if all its users are already in it, so
nothing is computed twice; the fusion must contain at least one reduce. With an
explain log (pass_base) the pass notes each row fusion it makes, each operand it
leaves out and why, and each row value it did not fuse for want of a row reduce.

Column form (issue 19). The same normalization over a dimension `a` that is not
the minor one (softmax over axis 0 of [R, N], a layernorm over axis 1 of
[B, S, D]) matches the same pattern with dimension `a` in the place of the last:
row scalars have dimensions S without `a` (or S with `a` of size 1, the keepdims
form), every reduce reduces a row value over exactly `a`, and row scalars reach
row values through `broadcast(dimensions=<every dimension but a>)`. The root must
be in the default layout, the reduces f32 or f64 (the CPU backend's column
emitter computes those; other types keep today's kernels), the root a float of
at most that width (a mixed-precision softmax converts its f32 result to bf16). The
fusion is tagged with its dimension, `{"fusion_kind":"row","row_dim":a}`
(fusion_utils). A root is tried as a row first (the minor dimension), then over
each other dimension some reduce of the computation reduces a value of the root's
dimensions over.
"""
from __future__ import annotations

from ..hlo import HloInstruction, HloModule

from .fusion_utils import ROW, control_successors, create_fusion, fuse_producer, row_dim, \
    set_row_dim
from .instruction_fusion import fusible_computations
from .pass_base import HloModulePass, register_pass


class _RowPattern:
    """Decides membership for one candidate root of shape S."""

    def __init__(self, root: HloInstruction, dim: int | None = None):
        self.row = root.shape.dims
        # The reduced dimension: the last (a row), or another one (the column form).
        self.k = len(self.row) - 1 if dim is None else dim
        self.scalar = self.row[:self.k] + self.row[self.k + 1:]
        # The dimensions a row scalar is broadcast back along: all but k.
        self.kept = tuple(d for d in range(len(self.row)) if d != self.k)
        # JAX computes on row scalars in "keepdims" form [R.., 1] between reshapes.
        self.scalar_forms = (self.scalar, self.row[:self.k] + (1,) + self.row[self.k + 1:])

    def role(self, instr: HloInstruction) -> str | None:
        """"row", "scalar" or "constant" if `instr` may be inside, else None."""
        if not instr.shape.is_array:
            return None
        dims, op = instr.shape.dims, instr.opcode
        if op == "constant":
            return "constant" if instr.shape.is_scalar else None
        if op == "reduce":
            return "scalar" if self._is_row_reduce(instr) else None
        if instr.info.is_elementwise:
            if dims == self.row:
                return "row"
            if dims in self.scalar_forms:
                return "scalar"
            return None
        if op == "broadcast":
            source = instr.operands[0]
            if dims == self.row:
                return "row"
            if dims in self.scalar_forms and source.opcode == "constant" \
                    and source.shape.is_scalar:
                return "scalar"
        if op == "reshape" and dims in self.scalar_forms \
                and instr.operands[0].shape.dims in self.scalar_forms:
            return "scalar"
        return None

    def _is_row_reduce(self, reduce: HloInstruction) -> bool:
        if len(reduce.operands) != 2 or not reduce.shape.is_array:
            return False
        data, init = reduce.operands
        return (data.shape.dims == self.row and reduce.dims() == (self.k,)
                and reduce.shape.dims == self.scalar and init.opcode == "constant")

    def why_not(self, instr: HloInstruction) -> str:
        """Why `instr` has no role (`role` is None): for explaining only."""
        dims, op = instr.shape.dims if instr.shape.is_array else None, instr.opcode
        if dims is None:
            return "a tuple"
        if op == "constant":
            return "a constant that is not a scalar"
        if op == "reduce":
            if len(instr.operands) != 2 or not instr.shape.is_array:
                return "a variadic reduce"
            if instr.operands[0].shape.dims != self.row:
                return f"reduces {list(instr.operands[0].shape.dims)}, not a row value " \
                       f"{list(self.row)}"
            if instr.dims() != (self.k,):
                reduced = ", ".join(str(d) for d in instr.dims())
                which = "row" if self.k == len(self.row) - 1 else "reduced"
                return f"reduce over dimension{'s' * (len(instr.dims()) != 1)} {reduced}, " \
                       f"not the {which} dimension {self.k}"
            return "its init value is not a constant"
        if instr.info.is_elementwise:
            return f"{list(dims)} is neither a row value {list(self.row)} nor a row scalar " \
                   f"{list(self.scalar)}"
        if op == "broadcast":
            return "a broadcast into a row scalar of something other than a scalar constant"
        if op == "reshape":
            return "a reshape that is not between the two row scalar forms"
        return f"{op} is not part of the row pattern"

    def can_read(self, user: HloInstruction, operand: HloInstruction) -> bool:
        """A broadcast may read a row scalar only along the row dimensions."""
        if user.opcode == "broadcast" and operand.shape.dims == self.scalar \
                and user.shape.dims == self.row:
            return user.dims() == self.kept
        return True


# The element types of the column form's reduces and root (module docstring).
COLUMN_TYPES = ("f32", "f64")
COLUMN_ROOT_TYPES = ("f16", "bf16", "f32", "f64")


def grow_row_region(root: HloInstruction, refused: list | None = None,
                    dim: int | None = None, *, parent_sorted: bool = False,
                    places: dict[int, int] | None = None) -> list[HloInstruction] | None:
    """The instructions of a row fusion rooted at `root` (users before operands),
    or None if the pattern does not apply. `refused`: None, or a list that gets
    (operand, reason) for each operand the region reaches but leaves out. `dim`:
    the reduced dimension of the column form (None: the last, a row).
    `parent_sorted`: the caller knows the computation is in topological order (then
    its list is its post order). `places`: None, or id -> a number that orders the
    instructions as the (sorted) list does: the region is ordered by them instead of
    by a walk over the whole list."""
    if not root.shape.is_array or root.shape.rank < 1 or root.opcode == "fusion":
        return None
    pattern = _RowPattern(root, dim)
    if pattern.role(root) != "row":
        return None
    column = dim is not None and dim != root.shape.rank - 1
    if column:
        if not root.shape.has_default_layout() \
                or root.shape.element_type not in COLUMN_ROOT_TYPES:
            if refused is not None:
                refused.append((root, f"a column form needs a float root in the default "
                                      f"layout, not {root.shape}"))
            return None
    elif root.shape.minor_to_major()[0] != root.shape.rank - 1:
        if refused is not None:
            refused.append((root, "the row dimension is not the minor one (a row must be "
                                  "contiguous in memory to stay in cache)"))
        return None
    ordered = root.parent.has_control_edges()
    region = [root]
    members = {id(root)}
    frontier = [root]
    while frontier:
        user = frontier.pop()
        for operand in user.operands:
            if id(operand) in members:
                continue
            if operand.is_root or not pattern.can_read(user, operand):
                if refused is not None:
                    refused.append((operand, "the computation's root" if operand.is_root else
                                    f"{user.name} broadcasts it along other dimensions "
                                    f"than the rows"))
                continue
            role = pattern.role(operand)
            if role is None:
                if refused is not None and operand.opcode != "parameter":
                    refused.append((operand, pattern.why_not(operand)))
                continue
            if column and operand.opcode == "reduce" \
                    and operand.shape.element_type not in COLUMN_TYPES:
                if refused is not None:
                    refused.append((operand, f"a {operand.shape.element_type} reduce (the "
                                             f"column form takes f32 and f64)"))
                continue
            if role != "constant" and any(id(u) not in members for u in operand.users):
                # Someone outside needs it: leave it as a fusion operand.
                if refused is not None:
                    outside = next(u for u in operand.users if id(u) not in members)
                    refused.append((operand, f"{outside.name} outside the region reads it too"))
                continue
            if ordered and control_successors(operand):
                # A control edge orders something after it: see fusion_utils.
                if refused is not None:
                    refused.append((operand, "a control edge orders another instruction "
                                             "after it"))
                continue
            members.add(id(operand))
            region.append(operand)
            frontier.append(operand)
    if not any(i.opcode == "reduce" for i in region):
        return None
    # Users before operands, so each producer is fused after everything reading it.
    if parent_sorted and places is not None and all(id(i) in places for i in region):
        return sorted(region, key=lambda i: places[id(i)], reverse=True)
    comp = root.parent
    order = comp.instructions if parent_sorted else comp.post_order()
    return [i for i in reversed(order) if id(i) in members]


def fuse_row_region(region: list[HloInstruction], dim: int | None = None, *,
                    parent_sorted: bool = False) -> HloInstruction:
    """One row fusion of `region` (root first, users before operands); `dim`: the
    reduced dimension of a column form (tagged in the fusion's backend_config).
    Leaves the computation in topological order; `parent_sorted`: it was already."""
    if not parent_sorted:
        region[0].parent.sort_topologically()     # once: each step below keeps the order
    fusion = create_fusion(region[0], ROW)     # (in the root's place: still sorted)
    if dim is not None and dim != region[0].shape.rank - 1:
        set_row_dim(fusion, dim)
    for producer in region[1:]:
        fuse_producer(fusion, producer, parent_sorted=True, sort_body=False)
    fusion.fused_computation.sort_topologically()    # once, after all its producers
    return fusion


def column_dims(comp) -> dict:
    """{root dimensions: the dimensions some reduce of `comp` reduces a value of
    those dimensions over, alone}: the candidates of the column form."""
    found: dict = {}
    for instr in comp.instructions:
        if instr.opcode == "reduce" and len(instr.operands) == 2 \
                and instr.operands[0].shape.is_array and len(instr.dims()) == 1:
            dims = instr.operands[0].shape.dims
            if instr.dims()[0] != len(dims) - 1:
                found.setdefault(dims, set()).add(instr.dims()[0])
    return found


@register_pass
class RowFusion(HloModulePass):
    """Fuses each row-wise normalization (see the module docstring) into one row fusion.

    Tries roots from the end of each computation so the largest region wins.
    Leaves everything else alone. True iff a row fusion was created.
    """

    name = "row-fusion"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            columns = column_dims(comp)
            in_order = False      # the first fusion sorts comp, and the next keep it so
            # The list's places once it is sorted: the fusions below take their root's
            # place and remove the rest, so the instructions left keep their order (a
            # control edge can make fuse_producer sort again: then none are kept).
            places = None
            kept_order = not comp.has_control_edges()
            with comp.batch_removals():    # fused instructions leave the list once
                for root in reversed(comp.post_order()):
                    if root.parent is not comp:
                        continue
                    refused = [] if self.explain_log is not None else None
                    region, dim = grow_row_region(root, refused, parent_sorted=in_order,
                                                  places=places), None
                    if region is None and root.shape.is_array:
                        # The column form, over each dimension some reduce reduces.
                        for dim in sorted(columns.get(root.shape.dims, ())):
                            tried = [] if refused is not None else None
                            region = grow_row_region(root, tried, dim, parent_sorted=in_order,
                                                     places=places)
                            if region is not None:
                                refused = tried
                                break
                    fusion = None
                    if region is not None:
                        fusion = fuse_row_region(region, dim, parent_sorted=in_order)
                        if places is None and kept_order:
                            places = {id(i): n for n, i in enumerate(comp.instructions)}
                        in_order = changed = True
                    if refused is not None:
                        self._explain(root, region, refused, fusion)
        return changed

    def _explain(self, root, region, refused: list, fusion) -> None:
        """Notes one region: fused with what it left out, or not fused when a reduce
        was reached but could not join (a row value alone is no candidate)."""
        if region is not None:
            dim = row_dim(fusion)
            form = "" if dim is None else f" (the column form, reducing dimension {dim})"
            self.note(root, None, None, f"fused {len(region)} instructions into {fusion.name}"
                                        f"{form}")
        elif not any(operand.opcode == "reduce" or operand is root for operand, _ in refused):
            return
        # An operand refused while some of its users were still outside may have
        # joined later: only what stayed out, once each.
        members = {id(i) for i in region or ()}
        seen = set()
        for operand, reason in refused:
            if id(operand) in members or id(operand) in seen:
                continue
            seen.add(id(operand))
            self.note(root, None if operand is root else operand, reason)
        if region is None and all(operand is not root for operand, _ in refused):
            self.note(root, None, "no row reduce joins the region")
