"""ragged-all-to-all (hlo/eval_collective.py's ragged_exchange; collective_thunks.py's
RaggedAllToAllThunk): the evaluator on a small case worked by hand, then the compiled
program against the evaluator over random valid offsets and sizes (several slices per
member, narrow and wide types, rows of more than one element, zero-size slices), and
the errors for sizes that disagree or slices out of bounds."""
import ml_dtypes
import numpy as np
import pytest

from xlapy import backend_cpu, hlo

TEXT = """HloModule m, replica_count=%(g)d
ENTRY e {
  x = %(t)s[%(rows_in)d%(rest)s] parameter(0)
  out = %(t)s[%(rows_out)d%(rest)s] parameter(1)
  io = %(it)s[%(n)d] parameter(2)
  ss = %(it)s[%(n)d] parameter(3)
  oo = %(it)s[%(n)d] parameter(4)
  rs = %(it)s[%(n)d] parameter(5)
  ROOT r = %(t)s[%(rows_out)d%(rest)s] ragged-all-to-all(x, out, io, ss, oo, rs), replica_groups={}
}"""


def module(g, n, rows_in=3, rows_out=4, rest="", t="f32", it="s32"):
    return hlo.parse_module(TEXT % dict(g=g, n=n, rows_in=rows_in, rows_out=rows_out,
                                        rest=rest, t=t, it=it))


def test_two_devices_by_hand():
    # Device 0 sends row 0 to itself (at its row 0) and rows 1..2 to device 1 (at 0..1);
    # device 1 sends row 0 to device 0 (at its row 1) and row 1 to itself (at row 2).
    args = [[np.float32([1, 2, 2]), np.zeros(4, np.float32), np.int32([0, 1]),
             np.int32([1, 2]), np.int32([0, 0]), np.int32([1, 1])],
            [np.float32([3, 4, 0]), np.full(4, 9, np.float32), np.int32([0, 1]),
             np.int32([1, 1]), np.int32([1, 2]), np.int32([2, 1])]]
    got = hlo.evaluate_devices(module(2, 2), args)
    np.testing.assert_array_equal(got[0][0], [1, 3, 0, 0])
    np.testing.assert_array_equal(got[1][0], [2, 2, 4, 9])


def _random_case(rng, g, per, rows_in, rows_out, rest, dtype, itype):
    """Per device: disjoint output rows for every (sender, slice) and input slices inside."""
    n = g * per
    sizes = rng.integers(0, 3, (g, n))              # sizes[sender, i]
    out_off = np.zeros((g, n), np.int64)
    for r in range(g):                              # receiver r packs its slices in order
        at = 0
        for m in range(g):
            for k in range(per):
                i = r * per + k
                out_off[m, i] = at
                at += sizes[m, i]
        assert at <= rows_out
    args = []
    for d in range(g):
        x = (rng.standard_normal((rows_in,) + rest) * 4).astype(dtype)
        if x.size and np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16:
            x.reshape(-1)[0] = np.nan
        out = (rng.standard_normal((rows_out,) + rest) * 4).astype(dtype)
        in_off = np.array([rng.integers(0, rows_in - s + 1) for s in sizes[d]])
        recv = np.array([sizes[m, d * per + k] for m in range(g) for k in range(per)])
        args.append([x, out, in_off.astype(itype), sizes[d].astype(itype),
                     out_off[d].astype(itype), recv.astype(itype)])
    return args


@pytest.mark.parametrize("g,per,t,dtype,it,itype,rest", [
    (2, 1, "f32", np.float32, "s32", np.int32, ()),
    (3, 2, "f32", np.float32, "s64", np.int64, (2, 3)),
    (4, 1, "s32", np.int32, "s32", np.int32, (5,)),
    (2, 3, "bf16", ml_dtypes.bfloat16, "s32", np.int32, (3,)),
])
def test_compiled_equals_evaluator(g, per, t, dtype, it, itype, rest):
    rng = np.random.default_rng(g * 10 + per)
    rows_in, rows_out = 4, 2 * g * per + 1
    m = module(g, g * per, rows_in, rows_out, "".join(f",{d}" for d in rest), t, it)
    exe = backend_cpu.compile(m, backend_cpu.CompileOptions(num_devices=g))
    for _ in range(3):
        args = _random_case(rng, g, per, rows_in, rows_out, rest, dtype, itype)
        expected = hlo.evaluate_devices(m, args)
        got = exe.run_devices(args, timeout=30)
        for e, o in zip(expected, got):
            np.testing.assert_array_equal(np.asarray(o[0]).astype(np.float64),
                                          np.asarray(e[0]).astype(np.float64))


def test_sizes_that_disagree_and_slices_out_of_bounds_are_errors():
    good = [[np.float32([1, 2, 2]), np.zeros(4, np.float32), np.int32([0, 1]),
             np.int32([1, 2]), np.int32([0, 0]), np.int32([1, 1])],
            [np.float32([3, 4, 0]), np.zeros(4, np.float32), np.int32([0, 1]),
             np.int32([1, 1]), np.int32([1, 2]), np.int32([2, 1])]]
    disagree = [list(d) for d in good]
    disagree[1][5] = np.int32([1, 1])              # device 1 expects 1 row from device 0
    with pytest.raises(hlo.EvaluationError, match="sends 2 rows .* expects 1"):
        hlo.evaluate_devices(module(2, 2), disagree)
    outside = [list(d) for d in good]
    outside[0][2] = np.int32([0, 2])               # rows [2, 4) of a 3-row input
    with pytest.raises(hlo.EvaluationError, match="out of bounds"):
        hlo.evaluate_devices(module(2, 2), outside)
    exe = backend_cpu.compile(module(2, 2), backend_cpu.CompileOptions(num_devices=2))
    with pytest.raises(Exception, match="out of bounds"):
        exe.run_devices(outside, timeout=30)
