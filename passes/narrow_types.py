"""narrow-type-normalization: arithmetic on the narrow element types (bf16, the 8-bit
floats, s2/s4/u2/u4) becomes arithmetic on their compute types, with converts around
it -- what XLA's CPU pipeline does with its float-normalization and
change-op-data-type passes, and the model the evaluator computes by
(hlo/narrow_types.py):

    r = bf16[n] add(bf16 a, bf16 b)
 -> r = bf16[n] convert(f32[n] add(f32[n] convert(a), f32[n] convert(b)))

After it, a narrow type appears only where values are moved, not computed:
parameters, constants, convert, bitcast-convert, select, the movement ops, tuples,
control flow and collectives (hlo.narrow_types.computes_narrow says which). The
computations such an instruction calls (a reducer, a comparator, a map's function)
are cloned with every narrow type replaced by its compute type, so a reduction
accumulates in the compute type and rounds once, as the evaluator does.

The CPU backend runs it on every module it compiles, after the optimization
pipeline (or alone, when the module is compiled as written): it is part of
lowering, not an optimization. It is idempotent.
"""
from __future__ import annotations

from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcodes import CALLED_COMPUTATION_ATTRS, CALLED_COMPUTATION_LIST_ATTRS
from ..hlo.narrow_types import computes_narrow, has_narrow, wide_shape, widen
from .hlo_utils import new_instruction
from .pass_base import HloModulePass, register_pass


def needs_normalization(module: HloModule) -> bool:
    return any(computes_narrow(i) for c in module.computations for i in c.instructions)


@register_pass
class NarrowTypeNormalization(HloModulePass):
    name = "narrow-type-normalization"

    def run(self, module: HloModule) -> bool:
        self._clones: dict[int, HloComputation] = {}
        changed = False
        for comp in list(module.computations):
            for instr in list(comp.instructions):
                if instr.parent is comp and computes_narrow(instr):
                    if any(o.shape.is_tuple and has_narrow(o.shape) for o in instr.operands):
                        raise NotImplementedError(
                            f"backend_cpu: {instr.name} ({instr.opcode}) reads a tuple of "
                            f"narrow element types")
                    self._rewrite(module, comp, instr)
                    changed = True
        return changed

    def _rewrite(self, module, comp, instr) -> None:
        operands = [self._to(comp, o, wide_shape(o.shape), instr) if has_narrow(o.shape) else o
                    for o in instr.operands]
        wide = comp.clone_instruction(instr, operands, before=instr)
        wide.shape = wide_shape(instr.shape)
        for key, value in list(wide.attrs.items()):
            if key in CALLED_COMPUTATION_ATTRS:
                wide.attrs[key] = self._retyped(module, value)
            elif key in CALLED_COMPUTATION_LIST_ATTRS:
                wide.attrs[key] = [self._retyped(module, c) for c in value]
        comp.replace_instruction(instr, self._back(comp, wide, instr.shape, instr))

    def _to(self, comp, value, shape, before):
        return new_instruction(comp, "convert", shape, [value], before=before)

    def _back(self, comp, wide, shape, before):
        """`wide` converted back to `shape` (leaf by leaf for tuples)."""
        if not has_narrow(shape):
            return wide
        if not shape.is_tuple:
            return self._to(comp, wide, shape, before)
        leaves = [self._back(comp, new_instruction(comp, "get-tuple-element", wide.shape
                                                   .tuple_shapes[i], [wide], before=before,
                                                   attrs={"index": i}), s, before)
                  for i, s in enumerate(shape.tuple_shapes)]
        return new_instruction(comp, "tuple", shape, leaves, before=before)

    def _retyped(self, module, comp: HloComputation) -> HloComputation:
        """A clone of `comp` (and of what it calls) with every narrow type replaced by
        its compute type; one clone per computation."""
        if not any(has_narrow(i.shape) for i in comp.instructions):
            return comp
        clone = self._clones.get(id(comp))
        if clone is not None:
            return clone
        clone = HloComputation(f"{comp.name}.wide")
        clone.is_fusion_computation = comp.is_fusion_computation
        clone.attrs = dict(comp.attrs)
        module.add_computation(clone, before=comp)      # names its instructions uniquely
        self._clones[id(comp)] = clone
        mapped: dict[int, HloInstruction] = {}
        params = comp.parameters
        for instr in params + [i for i in comp.post_order() if i.opcode != "parameter"]:
            new = clone.clone_instruction(instr, [mapped[id(o)] for o in instr.operands],
                                          name=f"{instr.name}.wide")
            new.shape = wide_shape(instr.shape)
            if new.literal is not None and not isinstance(new.literal, tuple):
                new.literal = widen(new.literal)
            for key, value in list(new.attrs.items()):
                if key in CALLED_COMPUTATION_ATTRS:
                    new.attrs[key] = self._retyped(module, value)
                elif key in CALLED_COMPUTATION_LIST_ATTRS:
                    new.attrs[key] = [self._retyped(module, c) for c in value]
            mapped[id(instr)] = new
        clone.set_root(mapped[id(comp.root)])
        return clone
