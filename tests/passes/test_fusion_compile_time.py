"""Instruction fusion's work grows linearly with the module (issue 19), counted, not timed.

A chain where every value has two users (an add-rotate-xor round as in Threefry:
`s = a + b; x = s ^ b`, n rounds) made the driver clone a shared producer into the
fusion and later fuse it a second time when its other user joined: ~n^2/2 fuse steps
and fused instructions (left for CSE), each step also sorting the whole fused body
and the whole enclosing computation -- 6.8 s for 40 rounds, minutes for 100. The
counters here (fuse steps, fused body size, instructions the enclosing computation's
sorts walk through) failed before the fix; the results must equal the evaluator's.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import hlo
from xlapy.passes import CpuInstructionFusion, cpu_pipeline
from xlapy.passes import fusion_utils, instruction_fusion
from tests.passes.helpers import assert_all_close, assert_same_results


def arx_chain(n: int, dtype: str = "u32", rotate: bool = False, escape: int | None = None) -> str:
    """n rounds of `s_i = s_{i-1} + x_{i-1}; x_i = s_i ^ x_{i-1}` (for floats: `*`
    instead of `^`). `rotate`: x_i reads rotl(x_{i-1}, 13) as Threefry does. `escape`:
    round whose s is also an output (its value is needed outside the fusion)."""
    mix = "xor" if dtype.startswith("u") or dtype.startswith("s") else "multiply"
    lines = ["HloModule chain", "ENTRY e {", f"  p = {dtype}[64] parameter(0)",
             f"  q = {dtype}[64] parameter(1)"]
    if rotate:
        lines += [f"  c13 = {dtype}[] constant(13)", f"  c19 = {dtype}[] constant(19)",
                  f"  k13 = {dtype}[64] broadcast(c13), dimensions={{}}",
                  f"  k19 = {dtype}[64] broadcast(c19), dimensions={{}}"]
    a, b = "p", "q"
    for i in range(n):
        lines.append(f"  s{i} = {dtype}[64] add({a}, {b})")
        if rotate:
            lines += [f"  l{i} = {dtype}[64] shift-left({b}, k13)",
                      f"  r{i} = {dtype}[64] shift-right-logical({b}, k19)",
                      f"  t{i} = {dtype}[64] or(l{i}, r{i})"]
            lines.append(f"  x{i} = {dtype}[64] {mix}(s{i}, t{i})")
        else:
            lines.append(f"  x{i} = {dtype}[64] {mix}(s{i}, {b})")
        a, b = f"s{i}", f"x{i}"
    if escape is None:
        lines.append(f"  ROOT r = {dtype}[64] add({a}, {b})")
    else:
        lines.append(f"  r = {dtype}[64] add({a}, {b})")
        lines.append(f"  ROOT out = ({dtype}[64], {dtype}[64]) tuple(r, s{escape})")
    lines.append("}")
    return "\n".join(lines)


def fusion_counts(text: str) -> dict:
    """Runs instruction fusion alone; counts its fuse steps, the instructions of the
    fused bodies it leaves, and the instructions walked by sorts of the entry."""
    module = hlo.parse_module(text)
    counts = {"fuse_steps": 0, "entry_sort_work": 0}
    entry = module.entry
    real_fuse, real_sort = fusion_utils.fuse_producer, hlo.HloComputation.sort_topologically

    def fuse(*args, **kwargs):
        counts["fuse_steps"] += 1
        return real_fuse(*args, **kwargs)

    def sort(comp):
        if comp is entry:
            counts["entry_sort_work"] += len(comp.instructions)
        return real_sort(comp)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(instruction_fusion, "fuse_producer", fuse)
        mp.setattr(hlo.HloComputation, "sort_topologically", sort)
        CpuInstructionFusion().run(module)
    finally:
        mp.undo()
    hlo.verify(module)
    counts["fused_instructions"] = sum(len(c.instructions) for c in module.computations_post_order()
                                       if c.is_fusion_computation)
    return counts


@pytest.mark.parametrize("rotate", [False, True])
def test_fuse_steps_and_fused_body_grow_linearly_on_a_two_user_chain(rotate):
    per_round = 5 if rotate else 2            # instructions of one round
    counts = {n: fusion_counts(arx_chain(n, rotate=rotate)) for n in (10, 20, 40)}
    for n, c in counts.items():
        # one step per instruction of the chain, each fused once (before: ~n^2/2)
        assert c["fuse_steps"] <= per_round * n + 8, (n, c)
        assert c["fused_instructions"] <= per_round * n + 8, (n, c)
    assert counts[40]["fuse_steps"] <= 4.5 * counts[10]["fuse_steps"], counts


def test_enclosing_computation_is_not_resorted_on_every_step():
    # Many independent chains: the entry holds ~8 * m instructions, the driver takes
    # ~6 * m steps. Sorting the entry on each step walked ~m^2 instructions.
    def wide(m):
        lines = ["HloModule wide", "ENTRY e {", "  p = f32[16] parameter(0)"]
        for i in range(m):
            lines += [f"  a{i} = f32[16] negate(p)", f"  b{i} = f32[16] multiply(a{i}, a{i})",
                      f"  c{i} = f32[16] add(b{i}, a{i})", f"  d{i} = f32[16] abs(c{i})",
                      f"  e{i} = f32[16] subtract(d{i}, b{i})"]
        lines.append(f"  ROOT t = ({', '.join(['f32[16]'] * m)}) tuple({', '.join(f'e{i}' for i in range(m))})")
        return "\n".join(lines + ["}"])
    work = {m: fusion_counts(wide(m))["entry_sort_work"] for m in (10, 40)}
    assert work[40] <= 4.5 * max(work[10], 1) and work[40] <= 8 * 40 * 2, work


@pytest.mark.parametrize("dtype,rotate,escape", [
    ("u32", False, None), ("u32", True, None), ("u32", True, 7), ("s32", False, 3),
    ("f32", False, None), ("f32", False, 11),
])
def test_fused_chain_computes_what_the_evaluator_does(dtype, rotate, escape):
    text = arx_chain(24, dtype, rotate, escape)
    module = hlo.parse_module(text)
    cpu_pipeline(verify_each=True).run(module)
    kernels = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(kernels) <= 2, hlo.print_module(module)
    if dtype == "f32":       # keep the products bounded: values in [0.5, 1)
        rng = np.random.default_rng(1)
        args = [rng.uniform(0.5, 1.0, 64).astype(np.float32) for _ in range(2)]
        assert_all_close(hlo.evaluate(module, args), hlo.evaluate(hlo.parse_module(text), args),
                         "fused vs unfused")
    else:
        assert_same_results(text, module)

def test_a_chain_with_control_edges_keeps_them_and_its_results():
    # A control predecessor on a shared value: the original is not dropped from the
    # entry while fused (the edge would be lost); results and verification hold.
    text = arx_chain(6).replace("  s3 = u32[64] add(s2, x2)",
                                "  s3 = u32[64] add(s2, x2), control-predecessors={x1}")
    module = hlo.parse_module(text)
    cpu_pipeline(verify_each=True).run(module)
    assert_same_results(text, module)
    module = hlo.parse_module(text)
    CpuInstructionFusion().run(module)
    hlo.verify(module)
    assert_same_results(text, module)

