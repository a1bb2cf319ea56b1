"""Common subexpression elimination."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..hlo import HloComputation, HloInstruction, HloModule
from ..hlo.opcodes import CALLED_COMPUTATION_ATTRS, CALLED_COMPUTATION_LIST_ATTRS, OPCODES

from .pass_base import HloModulePass, register_pass

# Attributes that describe where an instruction came from, not what it computes.
IGNORED_ATTRS = frozenset({"metadata"})
_CALL_KEYS = frozenset(CALLED_COMPUTATION_ATTRS) | frozenset(CALLED_COMPUTATION_LIST_ATTRS)


# Attribute values that are their own key (hashable, no computation inside).
_PLAIN = (int, str, bool, float, type(None))


class _Keys:
    """Value keys of instructions: equal keys mean equal results.

    Called computations are keyed by structure (their fingerprint), so two
    reduces whose `to_apply` are separate but identical `add` regions match.
    Shapes are keyed by their text (layouts included), computed once per shape
    object.
    """

    def __init__(self):
        self._fingerprints: dict[int, tuple] = {}
        self._runs_per_device: dict[int, bool] = {}
        self._shape_texts: dict[int, tuple] = {}     # id -> (shape kept alive, text)

    def shape_text(self, shape) -> str:
        entry = self._shape_texts.get(id(shape))
        if entry is None:
            entry = self._shape_texts[id(shape)] = (shape, shape.to_text())
        return entry[1]

    def instruction(self, instr: HloInstruction, operand_ids) -> tuple | None:
        """The key of `instr` given keys for its operands; None if it must stay unique."""
        opcode = instr.opcode
        info = OPCODES[opcode]
        if opcode == "parameter" or info.side_effect or info.per_device:
            return None     # per-device: collectives and device ids stay one per use
        if info.collective and instr.attrs.get("constrain_layout"):
            return None     # (has_side_effect)
        attrs = instr.attrs
        if attrs and not _CALL_KEYS.isdisjoint(attrs) \
                and any(self.runs_per_device(c) for c in instr.called_computations()):
            return None     # a call whose body holds a collective counts as one
        if opcode == "constant":
            if instr.literal is None:      # an elided literal: its value is unknown
                return None
            literal = literal_key(instr.literal)
        else:
            literal = None
        operands = list(operand_ids)
        if info.commutative:
            operands.sort()                # add(a, b) == add(b, a)
        if attrs:
            frozen = tuple((k, self.freeze(v)) for k, v in sorted(attrs.items())
                           if k not in IGNORED_ATTRS)
        else:
            frozen = ()
        return (opcode, self.shape_text(instr.shape), tuple(operands), frozen, literal)

    def freeze(self, value: Any):
        if isinstance(value, _PLAIN):
            return value
        if isinstance(value, HloComputation):
            return _CalledKey(self, value)
        if isinstance(value, (list, tuple)):
            if all(isinstance(v, _PLAIN) for v in value):
                return tuple(value)
            return tuple(self.freeze(v) for v in value)
        if isinstance(value, dict):
            return tuple((k, self.freeze(v)) for k, v in sorted(value.items()))
        return value

    def runs_per_device(self, comp: HloComputation) -> bool:
        """True if `comp`, or a computation it calls, holds a per-device instruction."""
        known = self._runs_per_device.get(id(comp))
        if known is None:
            self._runs_per_device[id(comp)] = False        # no recursion in HLO; be safe
            known = any(i.info.per_device or any(self.runs_per_device(c)
                                                 for c in i.called_computations())
                        for i in comp.instructions)
            self._runs_per_device[id(comp)] = known
        return known

    def computation(self, comp: HloComputation) -> tuple:
        """A structural fingerprint: instructions in post order, operands by position."""
        key = self._fingerprints.get(id(comp))
        if key is None:
            position: dict[int, int] = {}
            parts = []
            for i, instr in enumerate(comp.post_order()):
                position[id(instr)] = i
                ops = [position[id(o)] for o in instr.operands]
                k = self.instruction(instr, ops)
                if k is None:   # parameters and side effects: compare by number / opcode
                    k = (instr.opcode, self.shape_text(instr.shape), instr.parameter_number,
                         tuple(ops))
                parts.append(k)
            key = (tuple(parts), position[id(comp.root)])
            self._fingerprints[id(comp)] = key
        return key


class _CalledKey:
    """A called computation inside a key: equal to another when the two computations'
    fingerprints are equal. The fingerprint is computed only when the rest of two keys
    is equal (the hash is a constant): a fusion's key differs from every other one in
    its operands as a rule, so its body (most of the module after fusion) is seldom
    fingerprinted at all."""
    __slots__ = ("keys", "comp")

    def __init__(self, keys: "_Keys", comp: HloComputation):
        self.keys, self.comp = keys, comp

    def __hash__(self):
        return 0

    def __eq__(self, other):
        if not isinstance(other, _CalledKey):
            return NotImplemented
        return self.comp is other.comp or \
            self.keys.computation(self.comp) == other.keys.computation(other.comp)


def literal_key(literal) -> tuple:
    """A hashable key of a constant's value: its bit pattern (so -0.0 and 0.0 differ),
    element type and dims; a tuple-shaped constant's literal is a tuple of literals."""
    if isinstance(literal, tuple):
        return ("tuple",) + tuple(literal_key(element) for element in literal)
    literal = np.asarray(literal)
    return (literal.dtype.str, literal.shape, literal.tobytes())


def eliminate_common_subexpressions(comp: HloComputation, keys: _Keys) -> bool:
    """Replaces every instruction equal to an earlier one by that one; True if any."""
    canonical: dict[tuple, HloInstruction] = {}
    changed = False
    with comp.batch_removals():
        for instr in comp.post_order():
            key = keys.instruction(instr, map(id, instr.operands))
            if key is None:
                continue
            first = canonical.setdefault(key, instr)
            if first is not instr:
                comp.replace_instruction(instr, first)
                changed = True
    return changed


@register_pass
class CSE(HloModulePass):
    """Merges instructions that compute the same value from the same operands.

    Same opcode, shape, attributes (metadata ignored), operands (in any order
    for commutative opcodes), constants by value (bit pattern, so -0.0 and 0.0
    stay apart), called computations by structure. Parameters, side-effecting
    instructions and per-device ones (collectives, replica-id, partition-id) are
    never merged. True iff any merge happened.
    """

    name = "cse"

    def run(self, module: HloModule) -> bool:
        keys = _Keys()
        changed = False
        for comp in module.computations_post_order():
            changed |= eliminate_common_subexpressions(comp, keys)
        return changed
