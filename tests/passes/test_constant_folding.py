"""Constant folding: evaluator semantics, size threshold, what is never folded."""
import numpy as np

from xlapy.passes import DCE, ConstantFolding
from tests.passes.helpers import parse


def test_folds_with_xla_semantics():
    module = parse("""
    HloModule m
    ENTRY e {
      tiny = f32[] constant(1e-30)
      small = f32[] constant(1e-10)
      denormal = f32[] multiply(tiny, small)
      i = s32[] constant(-2147483648)
      m1 = s32[] constant(-1)
      q = s32[] divide(i, m1)
      f = f32[] constant(nan)
      c = s32[] convert(f)
      ROOT t = (f32[], s32[], s32[]) tuple(denormal, q, c)
    }
    """)
    assert ConstantFolding().run(module)
    DCE().run(module)
    values = [op.literal for op in module.entry.root.operands]
    assert values[0] == 0 and not np.signbit(values[0])   # flushed to zero, as XLA's CPU
    assert values[1] == -2147483648                         # INT_MIN / -1 = INT_MIN
    assert values[2] == 0                                   # NaN -> int is 0


def test_size_threshold_keeps_large_results():
    text = """
    HloModule m
    ENTRY e {
      c = f32[4] constant({1, 2, 3, 4})
      ROOT n = f32[4] negate(c)
    }
    """
    assert ConstantFolding(max_elements=3).run(parse(text)) is False
    module = parse(text)
    assert ConstantFolding(max_elements=4).run(module) is True
    assert list(module.entry.root.literal) == [-1, -2, -3, -4]


def test_never_folds_broadcast_iota_or_side_effects():
    module = parse("""
    HloModule m
    ENTRY e {
      one = f32[] constant(1)
      ones = f32[3] broadcast(one), dimensions={}
      i = s32[3] iota(), iota_dimension=0
      cc = f32[3] custom-call(ones), custom_call_target="f"
      ROOT t = (f32[3], s32[3], f32[3]) tuple(ones, i, cc)
    }
    """)
    assert ConstantFolding().run(module) is False
