"""The canonical HLO printer, in the style of XLA's optimized files.

    HloModule name, is_scheduled=true, entry_computation_layout={...}

    %add (x: f32[], y: f32[]) -> f32[] {
      %x = f32[] parameter(0)
      %y = f32[] parameter(1)
      ROOT %sum = f32[] add(%x, %y)
    }

    ENTRY %main (p: f32[4]) -> f32[] {
      ...
    }

Computations print callees before callers with the entry last; instructions in
their stored order; attributes in their stored order (control-predecessors
after them). Every spelling is fixed, so `parse_module(print_module(m))` prints
to the same text: the parser is the printer's inverse.
"""
from __future__ import annotations

from .attributes import encode_attribute
from .ir import HloComputation, HloInstruction, HloModule, Window, callees_first
from .literal import format_literal

__all__ = ["print_module", "print_computation", "print_instruction"]


def print_module(module: HloModule, *, print_metadata: bool = True) -> str:
    """The whole module as text, ending with a newline."""
    header = ", ".join([f"HloModule {module.name}"]
                       + [f"{key}={value}" for key, value in module.config.items()])
    blocks = [header]
    for comp in _print_order(module):
        blocks.append(print_computation(comp, print_metadata=print_metadata,
                                        is_entry=comp is module.entry))
    return "\n\n".join(blocks) + "\n"


def _print_order(module: HloModule) -> list[HloComputation]:
    """Stored order, except that a callee always comes before its first caller and the
    entry comes last. Text printed this way re-parses to the same order, so printing
    is idempotent."""
    others = [c for c in module.computations if c is not module.entry]
    return callees_first(others + ([module.entry] if module.entry is not None else []))


def print_computation(comp: HloComputation, *, print_metadata: bool = True,
                      is_entry: bool | None = None) -> str:
    """`%name (p: f32[4]) -> f32[4] {`, the instructions, `}` (ENTRY-marked if the entry)."""
    if is_entry is None:
        is_entry = comp.parent is not None and comp.parent.entry is comp
    params = ", ".join(f"{p.name}: {p.shape.to_text(with_layout=False)}"
                       for p in comp.parameters)
    result = comp.root.shape.to_text(with_layout=False) if comp.root is not None else "()"
    lines = [f"{'ENTRY ' if is_entry else ''}%{comp.name} ({params}) -> {result} {{"]
    for instr in comp.instructions:
        prefix = "ROOT " if instr is comp.root else ""
        lines.append(f"  {prefix}{print_instruction(instr, print_metadata=print_metadata)}")
    lines.append("}" + "".join(f", {key}={encode_attribute(key, value)}"
                               for key, value in comp.attrs.items()))
    return "\n".join(lines)


def print_instruction(instr: HloInstruction, *, print_metadata: bool = True) -> str:
    """`%name = f32[4]{0} opcode(%a, %b), attr=value, ...` (without ROOT or indent)."""
    text = f"%{instr.name} = {instr.shape.to_text()} {instr.opcode}({_arguments(instr)})"
    attrs = [f"{key}={encode_attribute(key, value)}" for key, value in instr.attrs.items()
             if (print_metadata or key != "metadata")
             and not (key == "window" and value == Window(()))]   # XLA leaves it out
    if instr.control_predecessors:
        names = ", ".join(f"%{p.name}" for p in instr.control_predecessors)
        attrs.append(f"control-predecessors={{{names}}}")
    return ", ".join([text] + attrs)


def _arguments(instr: HloInstruction) -> str:
    if instr.opcode == "constant":
        return format_literal(instr.literal, instr.shape)
    if instr.opcode == "parameter":
        return str(instr.parameter_number)
    names = []
    for i, operand in enumerate(instr.operands):
        # XLA marks every fifth operand of a long list with its index.
        names.append(f"/*index={i}*/%{operand.name}" if i and i % 5 == 0 else f"%{operand.name}")
    return ", ".join(names)
