"""The entry computation's results in the default (row-major) layout.

JAX writes layouts on every instruction of its HLO text, and an AdamW step's new
moments of a Dense kernel come out of a transposed gradient in {0,1}: the entry's
root tuple holds them in that layout. The caller receives logical (row-major)
arrays, so the executable had to transpose such results on the host after every
run, one numpy copy each (the Flax LM step of benchmarks/bench_models.py: 24 results,
12.6 MB, ~70 ms a step on a loaded 2-core host). Here each such result becomes a
`copy` to the default layout before fusion, which loop fusion absorbs into the
kernel that computes it: the kernel writes row-major directly.
"""
from __future__ import annotations

from ..hlo import HloModule, Shape

from .hlo_utils import new_instruction
from .pass_base import HloModulePass, register_pass


@register_pass
class DefaultResultLayouts(HloModulePass):
    """Copies every array result of the entry (the root, or the elements of a root
    tuple) that is not in the default layout to the default layout."""

    name = "default-result-layouts"

    def run(self, module: HloModule) -> bool:
        entry = module.entry
        root = entry.root
        if root.opcode == "tuple":
            changed = False
            for i, value in enumerate(root.operands):
                if value.shape.is_array and not value.shape.has_default_layout():
                    root.replace_operand(i, new_instruction(
                        entry, "copy", value.shape.without_layout(), [value], before=root))
                    changed = True
            if changed:
                root.shape = Shape.tuple_of([o.shape for o in root.operands])
            return changed
        if root.shape.is_array and not root.shape.has_default_layout():
            entry.set_root(new_instruction(entry, "copy", root.shape.without_layout(), [root]))
            return True
        return False
