"""A Graphviz DOT picture of a module's entry computation, fusions drawn as clusters.

Used by `hlo-opt --emit=dot` to see what the pipeline fused:

    hlo-opt softmax.hlo --emit=dot | dot -Tsvg > softmax.svg

Each top-level instruction is a node; each fusion is a box (a cluster) that
holds its fused computation, with edges from the fusion's operands to the
fused parameters and from the fused root(s) to the fusion's users. Scalar
constants are left out to keep pictures readable.
"""
from __future__ import annotations

from ..hlo import HloComputation, HloInstruction, HloModule

from .fusion_utils import fusion_kind

_COLORS = {"loop": "lightblue", "input": "khaki", "row": "palegreen", "custom": "lightgrey",
           "output": "lightgrey"}


def _node_id(instr: HloInstruction) -> str:
    return '"' + f"{instr.parent.name}/{instr.name}".replace('"', "'") + '"'


def _label(instr: HloInstruction) -> str:
    return f"{instr.name}\\n{instr.opcode} {instr.shape.to_text(with_layout=False)}"


def _hidden(instr: HloInstruction) -> bool:
    return instr.opcode == "constant" and instr.shape.is_scalar


def _nodes(comp: HloComputation, lines: list[str], indent: str) -> None:
    for instr in comp.instructions:
        if _hidden(instr) or instr.opcode == "fusion":
            continue
        shape = "ellipse" if instr.opcode == "parameter" else "box"
        lines.append(f'{indent}{_node_id(instr)} [label="{_label(instr)}", shape={shape}];')


def _edges(comp: HloComputation, lines: list[str], source_of, target_of) -> None:
    for instr in comp.instructions:
        if _hidden(instr):
            continue
        for k, op in enumerate(instr.operands):
            if _hidden(op):
                continue
            lines.append(f"  {source_of(op)} -> {target_of(instr, k)};")


def to_dot(module: HloModule) -> str:
    """The DOT text of `module.entry` with every fusion expanded as a cluster."""
    entry = module.entry
    lines = [f'digraph "{module.name}" {{', "  rankdir=TB;", "  node [fontsize=10];"]
    _nodes(entry, lines, "  ")
    fusions = [i for i in entry.instructions if i.opcode == "fusion"]
    for n, fusion in enumerate(fusions):
        kind = fusion_kind(fusion)
        lines.append(f"  subgraph cluster_{n} {{")
        lines.append(f'    label="{fusion.name} ({kind})"; style=filled; '
                     f'color={_COLORS.get(kind, "lightgrey")};')
        _nodes(fusion.fused_computation, lines, "    ")
        lines.append("  }")

    def source_of(op: HloInstruction) -> str:
        # A fusion's value leaves through its fused root.
        return _node_id(op.fused_computation.root) if op.opcode == "fusion" else _node_id(op)

    def target_of(user: HloInstruction, k: int) -> str:
        if user.opcode == "fusion":
            return _node_id(user.fused_computation.parameter(k))
        return _node_id(user)

    _edges(entry, lines, source_of, target_of)
    for fusion in fusions:
        _edges(fusion.fused_computation, lines, _node_id, lambda u, k: _node_id(u))
    lines.append("}")
    return "\n".join(lines) + "\n"
