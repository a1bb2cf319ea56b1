"""ragged-dot (XLA's three modes; hlo/eval_dot_conv.py, shape_rules_dot.py) against
loops written from the definition, and the CPU backend (a host op) against the
evaluator. Texts in the style of XLA's ragged_dot_rewriter_test."""
import numpy as np
import pytest

from xlapy import backend_cpu, hlo

NON_CONTRACTING = """HloModule m
ENTRY e {
  a = f32[7,3] parameter(0)
  b = f32[3,3,4] parameter(1)
  g = s64[3] parameter(2)
  ROOT r = f32[7,4] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1},
    lhs_ragged_dims={0}, rhs_group_dims={0}
}"""

# Batch dims, the group dimension in the middle of the rhs, sizes per batch.
NON_CONTRACTING_BATCHED = """HloModule m
ENTRY e {
  a = f32[2,6,3] parameter(0)
  b = f32[2,4,2,3] parameter(1)
  g = s32[2,2] parameter(2)
  ROOT r = f32[2,6,4] ragged-dot(a, b, g), lhs_contracting_dims={2}, rhs_contracting_dims={3},
    lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_ragged_dims={1}, rhs_group_dims={2}
}"""

CONTRACTING = """HloModule m
ENTRY e {
  a = f32[2,5,9] parameter(0)
  b = f32[2,9,3] parameter(1)
  g = s32[2,3] parameter(2)
  ROOT r = f32[3,2,5,3] ragged-dot(a, b, g), lhs_contracting_dims={2}, rhs_contracting_dims={1},
    lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_ragged_dims={2}
}"""

BATCH = """HloModule m
ENTRY e {
  a = bf16[3,4,5] parameter(0)
  b = bf16[3,5,2] parameter(1)
  g = s64[3] parameter(2)
  ROOT r = bf16[3,4,2] ragged-dot(a, b, g), lhs_contracting_dims={2}, rhs_contracting_dims={1},
    lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_ragged_dims={0}
}"""


def _groups(sizes, n):
    """Position -> group along a ragged dimension of n (-1 past the last group)."""
    out, at = np.full(n, -1), 0
    for j, s in enumerate(sizes):
        out[at:at + s] = j
        at += s
    return out


def test_non_contracting_rows_take_their_groups_rhs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((7, 3)).astype(np.float32)
    b = rng.standard_normal((3, 3, 4)).astype(np.float32)
    b[2, 0, 0] = np.inf                  # group 2 is empty: its inf must reach nothing
    for sizes in ([2, 3, 0], [0, 7, 0], [1, 1, 1], [7, 5, 3]):
        (got,) = hlo.evaluate(hlo.parse_module(NON_CONTRACTING), [a, b, np.int64(sizes)])
        want = np.zeros((7, 4))
        for row, j in enumerate(_groups(sizes, 7)):
            if j >= 0:
                want[row] = a[row].astype(np.float64) @ b[j]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_non_contracting_with_batch_and_sizes_per_batch():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 6, 3)).astype(np.float32)
    b = rng.standard_normal((2, 4, 2, 3)).astype(np.float32)
    sizes = np.int32([[4, 2], [1, 3]])
    (got,) = hlo.evaluate(hlo.parse_module(NON_CONTRACTING_BATCHED), [a, b, sizes])
    want = np.zeros((2, 6, 4))
    for n in range(2):
        for row, j in enumerate(_groups(sizes[n], 6)):
            if j >= 0:
                want[n, row] = b[n, :, j, :].astype(np.float64) @ a[n, row]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_contracting_gives_one_result_per_group():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 5, 9)).astype(np.float32)
    b = rng.standard_normal((2, 9, 3)).astype(np.float32)
    b[1, 8, :] = np.nan                  # past the groups of batch 1: never contracted
    sizes = np.int32([[3, 0, 6], [2, 4, 2]])
    (got,) = hlo.evaluate(hlo.parse_module(CONTRACTING), [a, b, sizes])
    want = np.zeros((3, 2, 5, 3))
    for n in range(2):
        ids = _groups(sizes[n], 9)
        for j in range(3):
            k = ids == j
            want[j, n] = a[n][:, k].astype(np.float64) @ b[n][k, :]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_batch_mode_is_the_plain_dot():
    rng = np.random.default_rng(3)
    import ml_dtypes
    a = rng.standard_normal((3, 4, 5)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((3, 5, 2)).astype(ml_dtypes.bfloat16)
    (got,) = hlo.evaluate(hlo.parse_module(BATCH), [a, b, np.int64([1, 1, 1])])
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("text", [NON_CONTRACTING, NON_CONTRACTING_BATCHED, CONTRACTING, BATCH])
def test_prints_back_and_compiles_like_the_evaluator(text):
    m = hlo.parse_module(text)
    hlo.verify(m)
    printed = hlo.print_module(m)
    assert hlo.print_module(hlo.parse_module(printed)) == printed
    rng = np.random.default_rng(4)
    args = []
    for p in m.entry.parameters:
        dt = hlo.dtypes.numpy_dtype(p.shape.element_type)
        if p.parameter_number == 2:
            n = p.shape.dims[-1]
            args.append(np.full(p.shape.dims, 2, dt) - (np.arange(n) % 2).astype(dt))
        else:
            args.append(rng.standard_normal(p.shape.dims).astype(dt))
    (want,) = hlo.evaluate(m, args)
    (got,) = backend_cpu.compile(hlo.parse_module(text)).run(*args)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("edit,fragment", [
    (("lhs_ragged_dims={0}, ", ""), "needs lhs_ragged_dims={d}"),
    (("rhs_group_dims={0}", "rhs_group_dims={}"), "needs rhs_group_dims={d}"),
    (("b = f32[3,3,4]", "b = f32[2,3,4]"), "rhs has 2 groups along dimension 0"),
    (("g = s64[3]", "g = f32[3]"), "group_sizes must be an integer array"),
    (("g = s64[3]", "g = s64[2,3]"), "group_sizes s64[2,3] must be [g] or"),
])
def test_rejected(edit, fragment):
    text = NON_CONTRACTING.replace(*edit).replace("ragged-dot(a, b, g)", "ragged-dot(a, b, g)")
    with pytest.raises((hlo.ParseError, hlo.VerifyError), match=fragment.replace("[", r"\[")
                       .replace("{", r"\{").replace("}", r"\}")):
        hlo.verify(hlo.parse_module(text))
