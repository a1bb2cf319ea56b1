"""Fusion policies: what is fused, what is refused and why, and no cycles."""
from xlapy.passes import (CpuInstructionFusion, FusionDecision, HorizontalFusion, MultiOutputFusion,
                    RowFusion)
from xlapy.passes.fusion_utils import fusion_kind
from xlapy.passes.hlo_utils import Reachability
from xlapy.passes.row_fusion import grow_row_region
from xlapy import hlo
from tests.passes.helpers import assert_all_close, assert_same_results, opcodes, parse, random_args

SUM = """
sum {
  sx = f32[] parameter(0)
  sy = f32[] parameter(1)
  ROOT sr = f32[] add(sx, sy)
}
"""


def test_fusion_decision_is_truthy_only_without_reason():
    assert FusionDecision()
    refusal = FusionDecision("producer is the computation root")
    assert not refusal and refusal.reason == "producer is the computation root"


def test_explain_gives_the_reason_per_operand():
    module = parse("""
    HloModule m
    ENTRY e {
      p = f32[8] parameter(0)
      x = f32[8] exponential(p)
      a = f32[8] abs(x)
      n = f32[8] negate(x)
      ROOT t = (f32[8], f32[8]) tuple(a, n)
    }
    """)
    fusion = CpuInstructionFusion()
    assert fusion.explain(module.entry.instruction("a")) == [
        "a <- x: would duplicate an expensive producer"]
    assert fusion.explain(module.entry.instruction("x")) == [
        "x <- p: parameter is not loop-fusible"]


def test_expensive_producer_is_not_recomputed_per_broadcast_element():
    text = """
    HloModule m
    ENTRY e {
      p = f32[8] parameter(0)
      q = f32[8,64] parameter(1)
      x = f32[8] exponential(p)
      xb = f32[8,64] broadcast(x), dimensions={0}
      ROOT m = f32[8,64] multiply(q, xb)
    }
    """
    module = parse(text)
    assert CpuInstructionFusion().run(module)
    entry = module.entry
    assert "exponential" in opcodes(entry)              # stays a kernel of its own
    assert "broadcast" in opcodes(entry.root.fused_computation)
    assert_same_results(text, module)


def test_cheap_producers_are_duplicated_into_each_consumer():
    text = """
    HloModule m
    ENTRY e {
      p = f32[8] parameter(0)
      a = f32[8] abs(p)
      n = f32[8] negate(a)
      s = f32[8] sqrt(a)
      ROOT t = (f32[8], f32[8]) tuple(n, s)
    }
    """
    module = parse(text)
    CpuInstructionFusion().run(module)
    entry = module.entry
    assert opcodes(entry).count("fusion") == 2 and "abs" not in opcodes(entry)
    assert_same_results(text, module)


def test_reduce_becomes_an_input_fusion_with_its_producers():
    text = "HloModule m\n" + SUM + """
    ENTRY e {
      p = f32[8,16] parameter(0)
      sq = f32[8,16] multiply(p, p)
      z = f32[] constant(0)
      ROOT r = f32[8] reduce(sq, z), dimensions={1}, to_apply=sum
    }
    """
    module = parse(text)
    CpuInstructionFusion().run(module)
    root = module.entry.root
    assert fusion_kind(root) == "input"
    assert sorted(opcodes(root.fused_computation)) == ["constant", "multiply", "parameter",
                                                        "reduce"]
    assert_same_results(text, module)


def test_multi_output_fusion_never_creates_a_cycle():
    # producer -> dot -> consumer and producer -> consumer: merging the producer into
    # the consumer would make the dot both read and feed the fusion.
    text = """
    HloModule m
    f_p {
      a0 = f32[4,4] parameter(0)
      ROOT na = f32[4,4] negate(a0)
    }
    f_c {
      b0 = f32[4,4] parameter(0)
      b1 = f32[4,4] parameter(1)
      ROOT ad = f32[4,4] add(b0, b1)
    }
    ENTRY e {
      x = f32[4,4] parameter(0)
      p = f32[4,4] fusion(x), kind=kLoop, calls=f_p
      d = f32[4,4] dot(p, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      ROOT c = f32[4,4] fusion(p, d), kind=kLoop, calls=f_c
    }
    """
    module = parse(text)
    assert MultiOutputFusion().run(module) is False
    assert_same_results(text, module)


def test_horizontal_fusion_leaves_dependent_kernels_apart():
    text = "HloModule m\n" + SUM + """
    ENTRY e {
      p = f32[8,16] parameter(0)
      q = f32[3] parameter(1)
      a = f32[8,16] abs(p)
      z = f32[] constant(0)
      s = f32[8] reduce(a, z), dimensions={1}, to_apply=sum
      l = f32[8] log(s)
      n = f32[3] negate(q)
      ROOT t = (f32[8], f32[3], f32[8,16]) tuple(l, n, a)
    }
    """
    module = parse(text)
    assert HorizontalFusion().run(module)
    entry = module.entry
    # abs and negate are independent and merge; log depends on abs through the reduce.
    fusions = [i for i in entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 1 and fusions[0].shape.is_tuple
    assert {v.opcode for v in fusions[0].fused_computation.root.operands} == {"abs", "negate"}
    assert "log" in opcodes(entry)
    assert_same_results(text, module)


def test_horizontal_fusion_leaves_large_kernels_apart():
    """A kernel with more than MAX_OUTPUT_BYTES of output stays alone: merged with
    kernels of other shapes it would run on one thread (the zeros of an embedding
    gradient next to a small index computation)."""
    text = """HloModule m
    ENTRY e {
      p = f32[256,256] parameter(0)
      q = s32[3] parameter(1)
      r = f32[3] parameter(2)
      a = f32[256,256] abs(p)
      n = s32[3] negate(q)
      m = f32[3] negate(r)
      ROOT t = (f32[256,256], s32[3], f32[3]) tuple(a, n, m)
    }
    """
    module = parse(text)
    assert HorizontalFusion().run(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    # abs has 256 KiB of output: only the two negates merge.
    assert len(fusions) == 1
    assert [v.opcode for v in fusions[0].fused_computation.root.operands] == ["negate", "negate"]
    assert "abs" in opcodes(module.entry)
    assert_same_results(text, module)


def test_row_region_requires_a_minor_dimension_reduce():
    module = parse("HloModule m\n" + SUM + """
    ENTRY e {
      p = f32[8,16] parameter(0)
      z = f32[] constant(0)
      s = f32[16] reduce(p, z), dimensions={0}, to_apply=sum
      sb = f32[8,16] broadcast(s), dimensions={1}
      ROOT d = f32[8,16] divide(p, sb)
    }
    """)
    assert grow_row_region(module.entry.root) is None
    # Over dimension 0 it is the column form (issue 19), tagged with its dimension.
    assert [i.name for i in grow_row_region(module.entry.root, dim=0)] == ["d", "sb", "s", "z"]
    assert RowFusion().run(module) is True
    assert module.entry.root.attrs["backend_config"].text == \
        '{"fusion_kind":"row","row_dim":0}'


def test_row_fusion_leaves_values_needed_outside_as_operands():
    text = "HloModule m\n" + SUM + """
    ENTRY e {
      p = f32[8,16] parameter(0)
      z = f32[] constant(0)
      s = f32[8] reduce(p, z), dimensions={1}, to_apply=sum
      sb = f32[8,16] broadcast(s), dimensions={0}
      d = f32[8,16] divide(p, sb)
      ROOT t = (f32[8,16], f32[8]) tuple(d, s)
    }
    """
    module = parse(text)
    assert RowFusion().run(module) is False      # the only reduce is needed outside
    assert_same_results(text, module)


def test_reduce_joins_a_same_sized_loop_but_never_a_broadcast():
    text = "HloModule m\n" + SUM + """
    ENTRY e {
      p = f32[8,16] parameter(0)
      z = f32[] constant(0)
      s = f32[8] reduce(p, z), dimensions={1}, to_apply=sum
      l = f32[8] log(s)
      s2 = f32[8] reduce(p, z), dimensions={1}, to_apply=sum
      b = f32[8,16] broadcast(s2), dimensions={0}
      d = f32[8,16] divide(p, b)
      ROOT t = (f32[8], f32[8,16]) tuple(l, d)
    }
    """
    module = parse(text)
    fusion = CpuInstructionFusion()
    assert fusion.explain(module.entry.instruction("b")) == [
        "b <- s2: the reduce would be recomputed per reuse"]
    assert fusion.run(module)
    loops = [i for i in module.entry.instructions if i.opcode == "fusion"]
    log_fusion = next(f for f in loops if f.fused_computation.root.opcode == "log")
    assert fusion_kind(log_fusion) == "loop"
    assert "reduce" in opcodes(log_fusion.fused_computation)
    divide_fusion = next(f for f in loops if f.fused_computation.root.opcode == "divide")
    assert "reduce" not in opcodes(divide_fusion.fused_computation)
    assert_same_results(text, module)


def test_reduce_window_takes_cheap_producers_only():
    text = """
    HloModule m
    add_f32 {
      ax = f32[] parameter(0)
      ay = f32[] parameter(1)
      ROOT ar = f32[] add(ax, ay)
    }
    ENTRY e {
      p = f32[16] parameter(0)
      a = f32[16] abs(p)
      x = f32[16] exponential(p)
      z = f32[] constant(0)
      w1 = f32[16] reduce-window(a, z), window={size=3 pad=1_1}, to_apply=add_f32
      w2 = f32[16] reduce-window(x, z), window={size=3 pad=1_1}, to_apply=add_f32
      ROOT d = f32[16] divide(w1, w2)
    }
    """
    module = parse(text)
    CpuInstructionFusion().run(module)
    body = module.entry.root.fused_computation
    assert opcodes(body).count("reduce-window") == 2 and "abs" in opcodes(body)
    assert "exponential" in opcodes(module.entry)       # would be recomputed per window
    assert_same_results(text, module)


def test_a_large_matrix_transpose_stays_a_kernel_of_its_own():
    """transpose(relu(x)) and exp(transpose(x)): fused, a large matrix transpose would
    be a loop nest of strided accesses instead of the backend's register blocks.
    A small one still fuses."""
    def text(n):
        return f"""HloModule m
        ENTRY e {{
          p = f32[{n},{n}] parameter(0)
          z = f32[] constant(0)
          zb = f32[{n},{n}] broadcast(z), dimensions={{}}
          r = f32[{n},{n}] maximum(p, zb)
          t = f32[{n},{n}] transpose(r), dimensions={{1,0}}
          u = f32[{n},{n}] transpose(p), dimensions={{1,0}}
          e = f32[{n},{n}] exponential(u)
          ROOT s = (f32[{n},{n}], f32[{n},{n}]) tuple(t, e)
        }}
        """
    large = parse(text(1024))                 # 4 MiB
    CpuInstructionFusion().run(large)
    assert opcodes(large.entry).count("transpose") == 2       # both stay unfused
    for fusion in (i for i in large.entry.instructions if i.opcode == "fusion"):
        assert "transpose" not in opcodes(fusion.fused_computation)
    assert_same_results(text(1024), large)
    small = parse(text(64))
    CpuInstructionFusion().run(small)
    assert "transpose" not in opcodes(small.entry)


def test_horizontal_fusion_keeps_gradient_buckets_in_flight_together():
    """Unpacking bucket 1 (reads its all-reduce-done) and packing bucket 2 (feeds the
    next all-reduce-start) are independent, but merged they would make the second
    all-reduce wait for the first: only one bucket would ever be in flight."""
    text = "HloModule m, replica_count=2\n" + SUM + """
    ENTRY e {
      g1 = f32[8] parameter(0)
      g2 = f32[8] parameter(1)
      s1 = f32[8] all-reduce-start(g1), replica_groups={}, to_apply=sum
      d1 = f32[8] all-reduce-done(s1)
      u1 = f32[8] negate(d1)
      p2 = f32[8] abs(g2)
      s2 = f32[8] all-reduce-start(p2), replica_groups={}, to_apply=sum
      d2 = f32[8] all-reduce-done(s2)
      u2 = f32[8] negate(d2)
      ROOT t = (f32[8], f32[8]) tuple(u1, u2)
    }
    """
    module = parse(text)
    HorizontalFusion().run(module)
    entry = module.entry
    s2 = entry.instruction("s2")
    d1 = entry.instruction("d1")
    # Nothing that reads d1 feeds s2: the second start need not wait for the first done.
    assert not Reachability(entry).depends_on(s2, d1)
    # The two unpacks, both after every collective they read, still merge.
    fusions = [i for i in entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 1
    assert [v.opcode for v in fusions[0].fused_computation.root.operands] == ["negate", "negate"]
    before = parse(text)
    args = [random_args(before, seed) for seed in (1, 2)]
    for got, want in zip(hlo.evaluate_devices(module, args), hlo.evaluate_devices(before, args)):
        assert_all_close(got, want, "after vs before")
