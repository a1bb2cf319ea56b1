"""ops.signal: fft, ifft, rfft, irfft and their 2d and 3d forms against numpy.fft
(complex64 and complex128, batch dims, odd and even lengths, length 1, fft_length
cropping and zero-padding), through the reference evaluator and the compiled CPU code;
gradients in TF's convention by central differences (test_complex_ops.py)."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import ops

from .test_complex_ops import check_complex_grads, cplx
from .util import compiled, interpret

S = ops.signal
BACKENDS = ["interpreter", "cpu"]


def close(got, want, dtype):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    single = np.dtype(dtype) in (np.dtype(np.complex64), np.dtype(np.float32))
    rtol, atol = (1e-4, 1e-4) if single else (1e-10, 1e-10)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def run(backend, name, fn, *args):
    if backend == "cpu":
        return compiled(f"fft_{name}", fn, *args)
    return interpret(fn, *args)


COMPLEX_TRANSFORMS = {"fft": np.fft.fft, "ifft": np.fft.ifft, "fft2d": np.fft.fft2,
                      "ifft2d": np.fft.ifft2, "fft3d": lambda z: np.fft.fftn(z, axes=(-3, -2, -1)),
                      "ifft3d": lambda z: np.fft.ifftn(z, axes=(-3, -2, -1))}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", sorted(COMPLEX_TRANSFORMS))
@pytest.mark.parametrize("shape, ctype", [((8,), np.complex64), ((2, 3, 5), np.complex64),
                                          ((4, 1), np.complex128), ((2, 6, 7), np.complex128)])
def test_complex_transforms(backend, fn, shape, ctype):
    z = cplx(np.random.default_rng(sum(shape)), shape, ctype)
    rank = {"2d": 2, "3d": 3}.get(fn[-2:], 1)
    if len(shape) < rank:
        z = z.reshape((1,) * (rank - len(shape)) + shape)
    got = run(backend, f"{fn}_{z.shape}_{np.dtype(ctype).name}", getattr(S, fn), z)
    close(got, COMPLEX_TRANSFORMS[fn](z), ctype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n, length", [(8, None), (7, None), (1, None), (8, 6), (8, 11),
                                       (5, 1)])
@pytest.mark.parametrize("rtype", [np.float32, np.float64])
def test_rfft_irfft(backend, n, length, rtype):
    rng = np.random.default_rng(n)
    x = rng.uniform(-1, 1, (3, n)).astype(rtype)
    ctype = np.complex64 if rtype == np.float32 else np.complex128
    arg = None if length is None else [length]
    key = f"{n}_{length}_{np.dtype(rtype).name}"
    got = run(backend, f"rfft_{key}", lambda a: S.rfft(a, arg), x)
    close(got, np.fft.rfft(x, length), ctype)
    spectrum = cplx(rng, (2, n), ctype)
    if n == 1 and length is None:        # 2 * (1 - 1) = 0 samples: numpy refuses too
        with pytest.raises(ValueError, match=r"irfft: no samples to produce"):
            run(backend, f"irfft_{key}", lambda a: S.irfft(a, arg), spectrum)
        return
    got = run(backend, f"irfft_{key}", lambda a: S.irfft(a, arg), spectrum)
    close(got, np.fft.irfft(spectrum, length), rtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape, lengths", [((4, 6), None), ((3, 5, 7), None),
                                            ((4, 6), [3, 8]), ((2, 5, 4), [6, 3])])
def test_rfft2d_irfft2d(backend, shape, lengths):
    rng = np.random.default_rng(sum(shape))
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    key = f"{shape}_{lengths}"
    got = run(backend, f"rfft2d_{key}", lambda a: S.rfft2d(a, lengths), x)
    close(got, np.fft.rfft2(x, lengths), np.complex64)
    z = cplx(rng, shape)
    got = run(backend, f"irfft2d_{key}", lambda a: S.irfft2d(a, lengths), z)
    close(got, np.fft.irfft2(z, lengths), np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lengths", [None, [3, 2, 5]])
def test_rfft3d_irfft3d(backend, lengths):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 3, 4, 6))
    axes = (-3, -2, -1)
    got = run(backend, f"rfft3d_{lengths}", lambda a: S.rfft3d(a, lengths), x)
    close(got, np.fft.rfftn(x, lengths, axes=axes), np.complex128)
    z = cplx(rng, (2, 3, 4, 6), np.complex128)
    got = run(backend, f"irfft3d_{lengths}", lambda a: S.irfft3d(a, lengths), z)
    close(got, np.fft.irfftn(z, lengths, axes=axes), np.float64)


def test_round_trips():
    rng = np.random.default_rng(4)
    z = cplx(rng, (3, 8), np.complex128)
    x = rng.uniform(-1, 1, (3, 9))
    got = interpret(lambda a, b: (S.ifft(S.fft(a)), S.ifft2d(S.fft2d(a)),
                                  S.irfft(S.rfft(b), [9])), z, x)
    close(got[0], z, np.complex128)
    close(got[1], z, np.complex128)
    close(got[2], x, np.float64)


def test_errors_are_clear():
    x = np.ones((4,), np.float32)
    with pytest.raises(TypeError, match="fft: input must be complex64 or complex128, got "
                                        "float32"):
        interpret(S.fft, x)
    with pytest.raises(TypeError, match="rfft: input must be float32 or float64, got "
                                        "complex64"):
        interpret(S.rfft, x.astype(np.complex64))
    with pytest.raises(ValueError, match=r"fft2d: input must have at least 2 dims"):
        interpret(S.fft2d, x.astype(np.complex64))
    with pytest.raises(ValueError, match=r"rfft: fft_length must be 1 non-negative int"):
        interpret(lambda a: S.rfft(a, [4, 4]), x)


# --- gradients --------------------------------------------------------------------------------

GRADS = {
    "fft": (lambda z: S.fft(z), "c", (2, 5)),
    "ifft": (lambda z: S.ifft(z), "c", (2, 4)),
    "fft2d": (lambda z: S.fft2d(z), "c", (2, 3)),
    "ifft2d": (lambda z: S.ifft2d(z), "c", (3, 2)),
    "rfft_even": (lambda x: S.rfft(x), "r", (2, 6)),
    "rfft_odd": (lambda x: S.rfft(x), "r", (2, 5)),
    "rfft_padded": (lambda x: S.rfft(x, [7]), "r", (2, 4)),
    "irfft_even": (lambda z: S.irfft(z), "c", (2, 4)),        # n = 6
    "irfft_odd": (lambda z: S.irfft(z, [5]), "c", (2, 3)),
    "irfft_cropped": (lambda z: S.irfft(z, [4]), "c", (1, 5)),
    "rfft2d": (lambda x: S.rfft2d(x), "r", (3, 4)),
    "irfft2d": (lambda z: S.irfft2d(z, [2, 5]), "c", (2, 3)),
    "fft3d": (lambda z: S.fft3d(z), "c", (2, 2, 3)),
    "ifft3d": (lambda z: S.ifft3d(z), "c", (2, 1, 3)),
    "rfft3d": (lambda x: S.rfft3d(x), "r", (2, 2, 4)),
    "irfft3d": (lambda z: S.irfft3d(z, [2, 2, 3]), "c", (2, 2, 2)),
    "power_spectrum": (lambda x: ops.abs(S.rfft(x)) ** 2, "r", (2, 6)),
}


@pytest.mark.parametrize("case", sorted(GRADS))
def test_gradients_by_finite_differences(case):
    f, kind, shape = GRADS[case]
    rng = np.random.default_rng(len(case))
    arg = cplx(rng, shape, np.complex128) if kind == "c" else rng.uniform(-1, 1, shape)
    check_complex_grads(f, [arg])


def test_gradient_compiled_matches_the_evaluator():
    from xlapy.frontend import grad
    rng = np.random.default_rng(6)
    x = rng.uniform(-1, 1, (4, 8))
    g = grad(lambda a: ops.reduce_sum(ops.abs(S.fft(ops.cast(S.irfft(S.rfft(a) * 2.0),
                                                             "complex128")))))
    np.testing.assert_allclose(compiled("fft_grad", g, x), interpret(g, x), rtol=1e-9,
                               atol=1e-11)
