"""backend_cpu.vecmath: API, IEEE special values, FTZ/DAZ behaviour, the emitted code.

The bulk accuracy sweeps are in test_vecmath_accuracy.py; this file pins the
cases that must be exact: signed zeros, infinities, NaN, the overflow and
underflow thresholds, pow's and atan2's special cases.
"""
import math

import numpy as np
import pytest
from llvmlite import ir

from xlapy.backend_cpu.vecmath.routines import ROUTINES, emit_math
from xlapy.backend_cpu.vecmath.standalone import assembly, math_kernel

from .test_vecmath_accuracy import BINARY, SUPPORTED, random_bits, reference, ulp_error

DTYPES = [np.float32, np.float64]
LANES = {np.float32: 16, np.float64: 8}
NAN, INF, PI = math.nan, math.inf, math.pi


def run(op, dtype, *args):
    arrays = [np.asarray(a, dtype) for a in args]
    return math_kernel(op, dtype, LANES[dtype])(*arrays)


def same(got, expected) -> bool:
    """Bitwise-style equality: NaN == NaN, and the sign of zero counts."""
    if math.isnan(expected):
        return math.isnan(got)
    return got == expected and math.copysign(1, got) == math.copysign(1, expected)


# ---- API -----------------------------------------------------------------------
def test_every_transcendental_opcode_has_a_routine():
    assert set(SUPPORTED) <= set(ROUTINES)


def _builder():
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.FloatType(), ir.DoubleType(),
                                                             ir.IntType(32)]), name="f")
    return ir.IRBuilder(fn.append_basic_block()), fn.args


def test_emit_math_rejects_bad_requests():
    builder, (f32, f64, i32) = _builder()
    with pytest.raises(ValueError, match="unsupported opcode 'frobnicate'"):
        emit_math(builder, "frobnicate", [f32])
    with pytest.raises(ValueError, match="power takes 2"):
        emit_math(builder, "power", [f32])
    with pytest.raises(TypeError, match="differ in type"):
        emit_math(builder, "atan2", [f32, f64])
    with pytest.raises(TypeError, match="expected float or double"):
        emit_math(builder, "exponential", [i32])


def test_result_type_matches_argument_type():
    builder, (f32, f64, _) = _builder()
    vec = ir.Constant(ir.VectorType(ir.FloatType(), 4), [ir.Constant(ir.FloatType(), 1.0)] * 4)
    for op in sorted(SUPPORTED):
        for arg in (f32, f64, vec):
            args = [arg, arg] if op in BINARY else [arg]
            assert emit_math(builder, op, args).type == arg.type, op


# ---- special values --------------------------------------------------------------
TINY = 1e-40          # subnormal in f32; DAZ reads it as 0 (used with f32 only)
SPECIAL_CASES = {
    "exponential": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN), (1e4, INF),
                    (-1e4, 0.0)],
    "exponential-minus-one": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -1.0), (NAN, NAN),
                              (1e4, INF), (-1e4, -1.0)],
    "log": [(0.0, -INF), (-0.0, -INF), (1.0, 0.0), (-1.0, NAN), (INF, INF), (-INF, NAN),
            (NAN, NAN)],
    "log-plus-one": [(0.0, 0.0), (-0.0, -0.0), (-1.0, -INF), (-2.0, NAN), (INF, INF),
                     (-INF, NAN), (NAN, NAN)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (50.0, 1.0), (-50.0, -1.0),
             (NAN, NAN)],
    "logistic": [(0.0, 0.5), (-0.0, 0.5), (INF, 1.0), (-INF, 0.0), (100.0, 1.0), (NAN, NAN)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (10.0, 1.0), (-10.0, -1.0),
            (NAN, NAN)],
    "sine": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
    "cosine": [(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
    "tan": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
    "cbrt": [(0.0, 0.0), (-0.0, -0.0), (-8.0, -2.0), (27.0, 3.0), (INF, INF), (-INF, -INF),
             (NAN, NAN)],
    "sqrt": [(0.0, 0.0), (-0.0, -0.0), (4.0, 2.0), (-1.0, NAN), (INF, INF), (NAN, NAN)],
    "rsqrt": [(0.0, INF), (-0.0, -INF), (4.0, 0.5), (-1.0, NAN), (INF, 0.0), (NAN, NAN)],
    "power": [((NAN, 0.0), 1.0), ((INF, -0.0), 1.0), ((-3.0, 0.0), 1.0), ((1.0, NAN), 1.0),
              ((1.0, INF), 1.0), ((1.0, -INF), 1.0), ((-1.0, INF), 1.0), ((-1.0, -INF), 1.0),
              ((-8.0, 1 / 3), NAN), ((-2.0, 3.0), -8.0), ((-2.0, 2.0), 4.0),
              ((0.0, -1.0), INF), ((-0.0, -1.0), -INF), ((-0.0, -2.0), INF),
              ((-0.0, -0.5), INF), ((-0.0, 3.0), -0.0), ((-0.0, 2.0), 0.0), ((0.0, 3.0), 0.0),
              ((0.5, INF), 0.0), ((2.0, INF), INF), ((0.5, -INF), INF), ((2.0, -INF), 0.0),
              ((-0.5, INF), 0.0), ((-INF, 3.0), -INF), ((-INF, -3.0), -0.0),
              ((-INF, 2.0), INF), ((-INF, 0.5), INF), ((INF, -1.0), 0.0), ((INF, 2.0), INF),
              ((NAN, 1.0), NAN), ((2.0, NAN), NAN), ((-1.0, NAN), NAN), ((2.0, 10.0), 1024.0),
              ((1e10, 1e10), INF), ((1e-10, 1e10), 0.0)],
    "atan2": [((0.0, 0.0), 0.0), ((-0.0, 0.0), -0.0), ((0.0, -0.0), PI), ((-0.0, -0.0), -PI),
              ((0.0, -1.0), PI), ((-0.0, -1.0), -PI), ((0.0, 1.0), 0.0), ((-0.0, 1.0), -0.0),
              ((1.0, 0.0), PI / 2), ((-1.0, -0.0), -PI / 2), ((INF, INF), PI / 4),
              ((INF, -INF), 3 * PI / 4), ((-INF, -INF), -3 * PI / 4), ((1.0, -INF), PI),
              ((-1.0, -INF), -PI), ((-1.0, INF), -0.0), ((INF, 1.0), PI / 2),
              ((-INF, -5.0), -PI / 2), ((NAN, 1.0), NAN), ((1.0, NAN), NAN),
              ((1.0, 1.0), PI / 4)],
}
# With DAZ, a subnormal argument acts as a zero of its sign.
DAZ_CASES = {
    "log": [(TINY, -INF), (-TINY, -INF)], "exponential": [(TINY, 1.0)],
    "tanh": [(-TINY, -0.0)], "erf": [(-TINY, -0.0)], "sine": [(-TINY, -0.0)],
    "sqrt": [(-TINY, -0.0)], "rsqrt": [(TINY, INF)], "cbrt": [(-TINY, -0.0)],
    "exponential-minus-one": [(-TINY, -0.0)], "log-plus-one": [(-TINY, -0.0)],
    "power": [((TINY, 2.0), 0.0), ((2.0, TINY), 1.0), ((-TINY, 3.0), -0.0)],
    "atan2": [((TINY, -1.0), PI), ((-TINY, -1.0), -PI), ((1.0, -TINY), PI / 2)],
}


def _table(cases):
    return [(op, args, expected) for op, rows in cases.items() for args, expected in rows]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("op,args,expected", _table(SPECIAL_CASES))
def test_special_values(op, args, expected, dtype):
    args = args if isinstance(args, tuple) else (args,)
    got = float(run(op, dtype, *[[a] for a in args])[0])
    assert same(got, float(dtype(expected))), f"{op}{args} = {got}, expected {expected}"


@pytest.mark.parametrize("op,args,expected", _table(DAZ_CASES))
def test_subnormal_inputs_read_as_zero(op, args, expected):
    args = args if isinstance(args, tuple) else (args,)
    got = float(run(op, np.float32, *[[a] for a in args])[0])
    assert same(got, float(np.float32(expected))), f"{op}{args} = {got}, expected {expected}"


def _window(center, dtype, count=4000):
    """`count` consecutive floats of `dtype` around `center`."""
    itype = np.int32 if dtype == np.float32 else np.int64
    mid = np.asarray(center, dtype).view(itype)
    return (mid + np.arange(-count // 2, count // 2, dtype=itype)).view(dtype)


THRESHOLDS = [  # (op, points where the result crosses to inf / 0 / a subnormal)
    ("exponential", [88.72, -87.33, -103.97], [709.78, -708.4, -745.1]),
    ("exponential-minus-one", [88.72], [709.78]),
    ("logistic", [-87.33, -103.97], [-708.4, -745.1]),
    ("tanh", [9.01, -9.01], [19.06]),
    ("erf", [3.92, -3.92], [5.93]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("op,f32_points,f64_points", THRESHOLDS)
def test_overflow_and_underflow_thresholds(op, f32_points, f64_points, dtype):
    """Consecutive floats around each threshold: inf/0/±1 exactly where the
    (flushed) reference has them, the rest within bound."""
    for point in (f32_points if dtype == np.float32 else f64_points):
        x = _window(point, dtype)
        err = ulp_error(run(op, dtype, x), reference(op, [x], np.float64), dtype)
        assert err.max() <= 4, f"{op} near {point}: {err.max()} ulp at {x[np.argmax(err)]}"


def test_power_overflow_threshold_f32():
    x = _window(2.0, np.float32, 200)
    y = _window(128.0, np.float32, 200)
    xs, ys = np.meshgrid(x, y)
    err = ulp_error(run("power", np.float32, xs.ravel(), ys.ravel()),
                    reference("power", [xs.ravel(), ys.ravel()], np.float64), np.float32)
    assert err.max() <= 4


def test_subnormal_results_flush_to_zero():
    got = run("exponential", np.float32, [-100.0, -88.0, -87.0])
    assert list(got[:2]) == [0.0, 0.0] and got[2] > np.finfo(np.float32).tiny
    assert run("exponential", np.float64, [-720.0])[0] == 0.0           # 1.9e-313 is subnormal
    assert run("power", np.float32, [2.0], [-140.0])[0] == 0.0


def test_kernel_restores_the_callers_fp_mode():
    run("exponential", np.float32, [1.0])
    # numpy runs in the caller's mode: subnormal results must still appear.
    assert np.float32(1e-38) * np.float32(0.01) != 0


# ---- emitted code ---------------------------------------------------------------
def test_exp_loop_is_vectorized_on_full_registers_without_calls(isa):
    """A scalar exp in a loop, vectorized by LLVM: the target's widest registers (zmm on
    AVX-512, ymm on AVX2, packed xmm on SSE4.2), no libm call."""
    from xlapy.backend_cpu import target as targets
    with targets.using(isa.target):
        asm = assembly("exponential", np.float32, lanes=None)
    body = [line.strip() for line in asm.splitlines()]
    assert isa.uses_full_vectors(asm)
    assert not [line for line in body if line.startswith("call")]
    assert "expf" not in asm


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("op", sorted(SUPPORTED))
def test_never_calls_libm(op, dtype):
    assert not [line for line in assembly(op, dtype, lanes=LANES[dtype]).splitlines()
                if line.strip().startswith("call")], op


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("op", sorted(SUPPORTED))
def test_scalar_and_vector_emission_agree(op, dtype):
    """The same routine emitted on scalars (loop-vectorized by LLVM), on the
    widest vectors and on narrower ones gives identical bits."""
    rng = np.random.default_rng(7)
    n = 20_000
    args = [np.concatenate([random_bits(rng, n, dtype), rng.uniform(-20, 20, n).astype(dtype)])
            for _ in range(2 if op in BINARY else 1)]
    widest = math_kernel(op, dtype, LANES[dtype])(*args)
    for lanes in (None, LANES[dtype] // 4):
        np.testing.assert_array_equal(math_kernel(op, dtype, lanes)(*args), widest,
                                      err_msg=f"lanes={lanes}")


@pytest.mark.parametrize("level", ["sse4.2", "avx2"])
def test_scaling_without_avx512_matches(level):
    """Targets without AVX-512 get 2^n scaling by two multiplications, not vscalef
    (compiled and checked on every host, run where the host can)."""
    from xlapy.backend_cpu import target as targets
    from xlapy.backend_cpu.vecmath.standalone import MathKernel, build_module
    with targets.using(targets.resolve(max_isa=level)):
        assert "llvm.ldexp" not in build_module("exponential", np.float32, 16)
    if level not in targets.levels_on_host():
        return
    x = np.concatenate([_window(88.72, np.float32), _window(-87.33, np.float32),
                        np.linspace(-110, 110, 10_001, dtype=np.float32),
                        np.float32([np.inf, -np.inf, np.nan])])
    for op in ("exponential", "exponential-minus-one", "logistic", "erf"):
        with targets.using(targets.resolve(max_isa=level)):
            kernel = MathKernel(op, np.float32, 16)
        assert "llvm.ldexp" not in kernel.ir_text
        np.testing.assert_array_equal(kernel(x), run(op, np.float32, x))
