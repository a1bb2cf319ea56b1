"""docs/adding_an_op.md, followed to the end: after the page's walkthrough registers the
test-only transcendental opcode `log2` in its four places (row, vector routine,
reference, frontend row), the tests that follow the opcode table pass on it — with
only the test rows a new opcode brings (an accuracy reference and its input range).

One fresh process (the opcode exists only there), as tests/test_docs.py runs pages.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.test_docs import DOCS, ROOT, _DRIVER, runnable_blocks

# Run after the page's blocks, in their namespace.
_TABLE_TESTS = r'''
import numpy as np
from tests import test_op_table
from tests.backend_cpu import test_elementwise, test_vecmath_accuracy as accuracy
from tests.hlo_strategies import TRANSCENDENTAL_UNARY

# The opcode-table tests of tests/test_op_table.py, on the new opcode.
assert "log2" in test_op_table.transcendental_opcodes()
test_op_table.test_every_transcendental_op_has_a_vector_routine("log2")
test_op_table.test_every_transcendental_op_has_a_reference("log2")
test_op_table.test_every_transcendental_op_counts_as_one_in_cost_analysis("log2")
assert list(test_op_table._spelled_out_sets(set(test_op_table.transcendental_opcodes()))) == []

# The backend against the evaluator on every dtype's edge values, and random programs.
assert "log2" in test_elementwise.FLOAT_UNARY and "log2" in TRANSCENDENTAL_UNARY
for t in ("f16", "f32", "f64"):
    test_elementwise.test_float_elementwise(t)

# Accuracy: the sweep covers every flagged opcode and needs the new one's test rows.
assert "log2" in accuracy.SUPPORTED
accuracy.REFERENCE["log2"] = np.log2
accuracy.ORDINARY_RANGE["log2"] = (0, 100)
worst32, _, _ = accuracy.measure_f32("log2", 200_000)
worst64_np, worst64_true, _, _ = accuracy.measure_f64("log2", 50_000)
assert worst32 <= accuracy.F32_BOUND_VS_EXACT, worst32
assert max(worst64_np, worst64_true) <= accuracy.F64_BOUND, (worst64_np, worst64_true)
print(f"log2 worst ulp: f32 {worst32:.2f}, f64 {worst64_np:.2f} (numpy) "
      f"{worst64_true:.2f} (long double)")
'''


def test_the_transcendental_walkthrough_passes_the_table_tests():
    blocks = runnable_blocks(DOCS / "adding_an_op.md") + [("table tests", _TABLE_TESTS)]
    env = dict(os.environ, XLAPY_DISABLE_DISK_CACHE="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", _DRIVER], input=json.dumps(blocks),
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "log2 worst ulp" in result.stdout
