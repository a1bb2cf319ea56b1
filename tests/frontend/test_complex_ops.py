"""Complex numbers in the frontend: ops.complex, math.real/imag/conj/angle, abs, the
arithmetic and holomorphic functions on complex64/complex128, against numpy (the
reference evaluator and the compiled CPU code), and their gradients in TensorFlow's
convention (the cotangent of z = x + iy under a real loss L is dL/dx + i dL/dy; a
holomorphic f passes g * conj(f'(z))), checked by central differences on the real and
imaginary parts separately.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import grad, jit_compile, ops

from .util import compiled, interpret

BACKENDS = ["interpreter", "cpu"]
TOL = {np.dtype(np.complex64): (2e-5, 2e-6), np.dtype(np.float32): (2e-5, 2e-6),
       np.dtype(np.complex128): (1e-10, 1e-12), np.dtype(np.float64): (1e-10, 1e-12)}


def run(backend, name, fn, *args):
    if backend == "cpu":
        return compiled(f"complex_{name}", fn, *args)
    return interpret(fn, *args)


def cplx(rng, shape, dtype=np.complex64, lo=-2.0, hi=2.0):
    return (rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)).astype(dtype)


def close(got, want, scale=1.0):
    got = np.asarray(got)
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    rtol, atol = TOL[got.dtype]
    np.testing.assert_allclose(got, want, rtol=rtol * scale, atol=atol * scale)


# --- gradient checking in TF's convention ---------------------------------------------------

STEP = 1e-6


def _loss(f, out_shape, out_complex, seed=0):
    """x -> a real scalar that sees every output element (real and imaginary parts)."""
    rng = np.random.default_rng(seed)
    c1 = rng.uniform(0.5, 1.5, out_shape)
    c2 = rng.uniform(0.5, 1.5, out_shape)

    def loss(*args):
        out = f(*args)
        if out_complex:
            return ops.reduce_sum(ops.math.real(out) * c1) + \
                ops.reduce_sum(ops.math.imag(out) * c2)
        return ops.reduce_sum(out * c1)
    return loss


def check_complex_grads(f, args, argnums=(0,), rtol=1e-5, atol=1e-6):
    """TF-convention gradients of f (complex128/float64 arguments) vs central
    differences: dL/dRe + i dL/dIm for a complex argument, dL/dx for a real one."""
    out = np.asarray(interpret(f, *args))
    loss = _loss(f, out.shape, np.iscomplexobj(out))
    analytic = interpret(lambda *a: grad(loss, tuple(argnums))(*a), *args)
    value = jit_compile(loss, backend="interpreter", pipeline=None)
    for i, got in zip(argnums, analytic):
        x = np.array(args[i])
        assert np.asarray(got).dtype == x.dtype, f"argument {i}: {got.dtype} != {x.dtype}"
        want = np.zeros_like(x)
        for k in range(x.size):
            parts = (1.0, 1j) if np.iscomplexobj(x) else (1.0,)
            for unit in parts:
                d = 0.0
                for sign in (1, -1):
                    xs = x.copy()
                    xs.flat[k] += sign * STEP * unit
                    shifted = list(args)
                    shifted[i] = xs
                    d += sign * float(value(*shifted)) / (2 * STEP)
                want.flat[k] += d * unit
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of argument {i}")


# --- construction and parts -----------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("real_type", [np.float32, np.float64])
def test_complex_real_imag_conj_abs_angle(backend, real_type):
    rng = np.random.default_rng(1)
    re = rng.uniform(-2, 2, (3, 4)).astype(real_type)
    im = rng.uniform(-2, 2, (4,)).astype(real_type)       # broadcast against re
    ctype = np.complex64 if real_type == np.float32 else np.complex128
    got = run(backend, f"parts_{np.dtype(real_type).name}", lambda a, b: (
        ops.complex(a, b), ops.math.real(ops.complex(a, b)), ops.math.imag(ops.complex(a, b)),
        ops.math.conj(ops.complex(a, b)), ops.abs(ops.complex(a, b)),
        ops.math.angle(ops.complex(a, b))), re, im)
    z = (re + 1j * im).astype(ctype)
    for g, w in zip(got, (z, z.real, z.imag, np.conj(z), np.abs(z), np.angle(z))):
        close(g, w)


def test_angle_on_the_axes_and_at_zero():
    z = np.array([1, -1, 1j, -1j, 0, -0.0 + 0j, complex(-1, -0.0)], np.complex128)
    close(interpret(ops.math.angle, z), np.angle(z))


def test_real_inputs_as_tf():
    """real(x) is x, imag(x) zeros, conj(x) x, angle(x) pi where x < 0 (TF's rules)."""
    x = np.array([-2.0, 0.0, 3.0], np.float32)
    re, im, cj, an = interpret(lambda a: (ops.math.real(a), ops.math.imag(a),
                                          ops.math.conj(a), ops.math.angle(a)), x)
    close(re, x)
    close(im, np.zeros(3, np.float32))
    close(cj, x)
    close(an, np.array([np.pi, 0, 0], np.float32))


def test_complex_of_python_numbers_and_ints():
    got = interpret(lambda: (ops.complex(1.0, 2.0), ops.complex(np.int32(3), 4)))
    close(got[0], np.complex64(1 + 2j))
    close(got[1], np.complex64(3 + 4j))


def test_errors_are_clear():
    f16 = np.ones(2, np.float16)
    with pytest.raises(TypeError, match="complex: real and imag must be float32 or float64"):
        interpret(lambda a: ops.complex(a, a), f16)
    with pytest.raises(TypeError, match=r"Floor: input must be floating point, got c64"):
        interpret(ops.floor, np.ones(2, np.complex64))
    with pytest.raises(TypeError, match="Erf: input must be floating point, got c64"):
        interpret(ops.erf, np.ones(2, np.complex64))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_sigmoid_is_holomorphic(dtype):
    z = cplx(np.random.default_rng(3), (7,), dtype)
    want = (1.0 / (1.0 + np.exp(-z.astype(np.complex128)))).astype(dtype)
    for got in (interpret(ops.sigmoid, z), jit_compile(lambda a: ops.sigmoid(a))(z)):
        assert got.dtype == dtype
        close(got, want)
    if dtype == np.complex128:          # (central differences need the precision)
        check_complex_grads(lambda a: ops.sigmoid(a), (z,))


def test_nn_dropout_is_tf_nn_dropout():
    assert ops.nn.dropout is ops.dropout


# --- arithmetic and functions -----------------------------------------------------------------

UNARY = {"negative": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
         "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "tan": np.tan, "log1p": np.log1p,
         "expm1": np.expm1, "rsqrt": lambda z: 1 / np.sqrt(z), "square": np.square,
         "sign": lambda z: z / np.abs(z)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", sorted(UNARY))
def test_unary_functions(backend, fn):
    z = cplx(np.random.default_rng(len(fn)), (2, 7), lo=-1.0, hi=1.0)
    got = run(backend, f"u_{fn}", getattr(ops, fn), z)
    close(got, UNARY[fn](z.astype(np.complex128)).astype(np.complex64), scale=10)


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "divide": np.divide, "pow": np.power}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", sorted(BINARY))
@pytest.mark.parametrize("ctype", [np.complex64, np.complex128])
def test_binary_with_broadcast(backend, fn, ctype):
    rng = np.random.default_rng(len(fn))
    x, y = cplx(rng, (3, 1, 4), ctype, 0.2, 1.5), cplx(rng, (2, 1), ctype, 0.2, 1.5)
    got = run(backend, f"b_{fn}_{np.dtype(ctype).name}", getattr(ops, fn), x, y)
    close(got, BINARY[fn](x, y), scale=10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_operators_scalars_and_promotion(backend):
    rng = np.random.default_rng(2)
    z = cplx(rng, (5,))
    x = rng.uniform(-1, 1, 5).astype(np.float32)
    got = run(backend, "operators", lambda a, b: (
        a * 2j + 1, a / (a + 3.0), -a, a - b, b + 1j, a ** 2, a == a, a != ops.math.conj(a)),
        z, x)
    c = np.complex64
    wants = [z * c(2j) + 1, z / (z + 3), -z, z - x.astype(c), x.astype(c) + c(1j),
             z * z, np.ones(5, bool), z.imag != 0]
    for g, w in zip(got, wants):
        if w.dtype == bool:
            np.testing.assert_array_equal(g, w)
        else:
            close(g, w.astype(c), scale=5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_reductions_and_movement(backend):
    rng = np.random.default_rng(3)
    a, b = cplx(rng, (3, 5)), cplx(rng, (5, 2))
    got = run(backend, "linear", lambda p, q: (
        ops.matmul(p, q), ops.matmul(p, p, adjoint_b=True), ops.reduce_sum(p, 1),
        ops.reduce_mean(p), ops.transpose(p), ops.reshape(p, [5, 3]),
        ops.concat([p, p], 0), ops.where(ops.abs(p) > 1.0, p, ops.zeros_like(p)),
        ops.einsum("ij,jk->ik", p, q), ops.cumsum(p, 1)), a, b)
    wants = [a @ b, a @ a.conj().T, a.sum(1), a.mean(), a.T, a.reshape(5, 3),
             np.concatenate([a, a]), np.where(np.abs(a) > 1, a, 0), a @ b, np.cumsum(a, 1)]
    for g, w in zip(got, wants):
        close(g, np.asarray(w).astype(np.complex64), scale=10)


def test_adjoints_conjugate():
    """matmul's adjoint_a/b and batch_matmul's adj_x/adj_y conjugate complex operands
    (transpose_a/b only transpose)."""
    rng = np.random.default_rng(4)
    a, b = cplx(rng, (2, 3, 4), np.complex128), cplx(rng, (2, 3, 5), np.complex128)
    got = interpret(lambda p, q: (ops.linalg.batch_matmul(p, q, adj_x=True),
                                  ops.matmul(p[0], q[0], adjoint_a=True),
                                  ops.matmul(p[0], q[0], transpose_a=True),
                                  ops.matmul(q[0], p[0], adjoint_a=True, adjoint_b=False)), a, b)
    ah = np.conj(np.swapaxes(a, 1, 2))
    close(got[0], ah @ b)
    close(got[1], ah[0] @ b[0])
    close(got[2], a[0].T @ b[0])
    close(got[3], np.conj(b[0]).T @ a[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_casts(backend):
    z = np.array([1.5 - 2j, -0.25 + 1j], np.complex64)
    x = np.array([1.0, -3.0], np.float32)
    got = run(backend, "casts", lambda a, b: (ops.cast(a, "float32"), ops.cast(b, "complex64"),
                                              ops.cast(a, ops.complex128)), z, x)
    close(got[0], z.real)                    # TF and XLA keep the real part
    close(got[1], x.astype(np.complex64))
    close(got[2], z.astype(np.complex128))


# --- gradients ---------------------------------------------------------------------------------

def test_tf_documented_convention():
    """TF's own example (tensorflow#3348): d(z*z)/dz at z = 0.1i gives -0.2i, the
    conjugate of 2z; and for a real loss |z|^2 the gradient is 2z."""
    z = np.complex128(0.1j)
    np.testing.assert_allclose(interpret(grad(lambda a: a * a), z), -0.2j)
    z = np.complex128(0.3 - 0.7j)
    np.testing.assert_allclose(interpret(grad(lambda a: ops.math.real(a * ops.math.conj(a))),
                                         z), 2 * z)
    np.testing.assert_allclose(interpret(grad(lambda a: ops.abs(a) ** 2), z), 2 * z)


def _c128(rng, shape, lo=-1.5, hi=1.5):
    return cplx(rng, shape, np.complex128, lo, hi)


GRAD_CASES = {
    "complex": (lambda x, y: ops.complex(x, y), "rr"),
    "real": (lambda z: ops.math.real(z) * 2.0, "c"),
    "imag": (lambda z: ops.math.imag(z), "c"),
    "conj": (lambda z: ops.math.conj(z) * ops.complex(1.0, 2.0), "c"),
    "abs": (lambda z: ops.abs(z), "c"),
    "angle": (lambda z: ops.math.angle(z), "c"),
    "multiply": (lambda z, w: z * w, "cc"),
    "divide": (lambda z, w: z / w, "cc"),
    "exp_sin": (lambda z: ops.exp(z) + ops.sin(z) * ops.tanh(z), "c"),
    "log_sqrt": (lambda z: ops.log(z) + ops.sqrt(z) + ops.math.rsqrt(z), "c"),
    "pow": (lambda z, w: ops.pow(z, w), "cc"),
    "matmul": (lambda z, w: ops.matmul(z, ops.transpose(w)), "cc"),
    "matmul_adjoint": (lambda z, w: ops.matmul(z, w, adjoint_b=True), "cc"),
    "batch_matmul_adj": (lambda z, w: ops.linalg.batch_matmul(
        ops.reshape(z, [2, 3, 1]), ops.reshape(w, [2, 3, 1]), adj_x=True), "cc"),
    "mixed_real": (lambda z, x: z * ops.complex(x, x * 0.5) + ops.cast(x, "complex128"), "cr"),
    "sum_square": (lambda z: ops.reduce_sum(ops.square(z), 1) / 3.0, "c"),
    "cast_to_real": (lambda z: ops.cast(z * z, "float64"), "c"),
}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients_by_finite_differences(case):
    f, kinds = GRAD_CASES[case]
    rng = np.random.default_rng(len(case))
    shape = (2, 3)
    args = [_c128(rng, shape, 0.3, 1.5) if k == "c" else rng.uniform(-1.5, 1.5, shape)
            for k in kinds]
    check_complex_grads(f, args, tuple(range(len(args))))


def test_gradients_through_control_flow():
    """cond and a loop with a static trip count carry complex values: their gradients
    run backprop on the body, which conjugates per op (not twice)."""
    from xlapy.frontend import cond, fori_loop
    rng = np.random.default_rng(10)
    check_complex_grads(lambda z: cond(ops.reduce_sum(ops.math.real(z)) > -100.0,
                                       lambda a: a * a * ops.complex(0.5, 1.0),
                                       lambda a: a, z), [_c128(rng, (3,))])
    check_complex_grads(lambda z: fori_loop(0, 3, lambda i, a: a * z + 1.0, z),
                        [_c128(rng, (2,), 0.3, 0.9)])


def test_abs_gradient_at_zero_is_zero():
    z = np.array([0j, 3 + 4j], np.complex128)
    g = interpret(grad(lambda a: ops.reduce_sum(ops.abs(a))), z)
    np.testing.assert_allclose(g, [0, 0.6 + 0.8j])


def test_gradients_compiled_match_the_evaluator():
    rng = np.random.default_rng(9)
    z, w = _c128(rng, (3, 4)), _c128(rng, (4, 2))

    def loss(a, b):
        m = ops.matmul(ops.exp(a), b)
        return ops.reduce_sum(ops.abs(m)) + ops.reduce_sum(ops.math.angle(a) *
                                                           ops.math.imag(a))
    g = grad(loss, (0, 1))
    want = interpret(g, z, w)
    got = compiled("complex_grad", g, z, w)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
