"""Gradients of the complex-number ops and the Fourier transforms, in TensorFlow's
convention.

TF's cotangent of a complex tensor z = x + iy under a real loss L is
dL/dx + i dL/dy (the conjugate Wirtinger derivative, times 2). For a holomorphic op
f that makes the input's cotangent g * conj(f'(z)): backprop.py gets it from the
real-valued gradient functions by conjugating around them (the gradient of a
holomorphic op is linear in g with coefficients holomorphic in the inputs). The ops
here are not holomorphic (real, imag, conj, abs, angle) or mix real and complex
(complex, rfft, irfft), and are written out (HANDLES_COMPLEX):

    Complex(x, y)   (real(g), imag(g)), each summed back over broadcasting
    Real(z)         complex(g, 0)          Imag(z)   complex(0, g)
    Conj(z)         conj(g)                Abs(z)    g z / |z|  (0 at z = 0)
    Angle(z)        -g / (imag(z) + i real(z))   ((-y + ix) g / |z|^2)
    FFT             n ifft(g)               IFFT      fft(g) / n
    RFFT            real(n ifft(g padded with zeros to n))
    IRFFT           rfft(g) w / n, w = 2 but 1 at frequency 0 and (n even) n/2
and the 2-D and 3-D forms with n the product of the lengths.
"""
from __future__ import annotations

import numpy as np

from .. import ops
from .registry import register_gradient
from .util import unbroadcast

# Ops whose gradient functions handle complex cotangents themselves (backprop.py
# conjugates around every other op with a complex input or output). Cond and While
# too: their gradients run backprop over the branch or body, which already follows the
# convention (conjugating around them as well would undo it).
HANDLES_COMPLEX = frozenset({
    "Complex", "Real", "Imag", "Conj", "Angle", "Abs", "Cast",
    *(f"{kind}{rank}" for kind in ("FFT", "IFFT", "RFFT", "IRFFT")
      for rank in ("", "2D", "3D")),
    "Cond", "While"})


def _as_complex(g, like):
    """A real cotangent as a complex tensor of `like`'s dtype (zero imaginary part)."""
    return ops.cast(g, like.dtype)


@register_gradient("Complex")
def _complex_grad(node, grads):
    x, y = node.inputs
    g = grads[0]
    return [unbroadcast(ops.math.real(g), x.shape), unbroadcast(ops.math.imag(g), y.shape)]


@register_gradient("Real")
def _real_grad(node, grads):
    return [_as_complex(grads[0], node.inputs[0])]


@register_gradient("Imag")
def _imag_grad(node, grads):
    g = grads[0]
    return [ops.complex(ops.zeros_like(g), g)]


@register_gradient("Conj")
def _conj_grad(node, grads):
    return [ops.math.conj(grads[0])]


@register_gradient("Angle")
def _angle_grad(node, grads):
    z = node.inputs[0]
    g = _as_complex(grads[0], z)
    return [-g / ops.complex(ops.math.imag(z), ops.math.real(z))]


def _inner_size(t, rank: int) -> float:
    return float(np.prod(t.shape[-rank:]))


def _fft_grads(forward: str, inverse: str, rank: int):
    # y = F z: z's cotangent is F^H g = n * ifft(g); for the inverse, fft(g) / n.
    @register_gradient(forward)
    def _forward_grad(node, grads):
        g = grads[0]
        return [ops.apply(inverse, [g]) * _inner_size(g, rank)]

    @register_gradient(inverse)
    def _inverse_grad(node, grads):
        g = grads[0]
        return [ops.apply(forward, [g]) * (1.0 / _inner_size(g, rank))]


_fft_grads("FFT", "IFFT", 1)
_fft_grads("FFT2D", "IFFT2D", 2)
_fft_grads("FFT3D", "IFFT3D", 3)


def _rfft_grad(rank: int):
    # X_k = sum_j x_j e^(-2 pi i jk/n) for k <= n/2: dL/dx_j = re(sum_k G_k e^(2 pi i jk/n)),
    # the inverse transform of G with the missing frequencies zero, times n.
    inverse = {1: "IFFT", 2: "IFFT2D", 3: "IFFT3D"}[rank]

    def gradient(node, grads):
        x, g = node.inputs[0], grads[0]
        n = x.shape[-1]
        full = ops.pad(g, [[0, 0]] * (g.ndim - 1) + [[0, n - g.shape[-1]]])
        return [ops.math.real(ops.apply(inverse, [full])) * _inner_size(x, rank)]
    return gradient


def _irfft_grad(rank: int):
    # x_j = (1/n) [re X_0 + sum_{0<k<n/2} 2 re(X_k e^(2 pi i jk/n)) + re(X_{n/2} (-1)^j)]:
    # the cotangent of X_k is w_k rfft(g)_k / n.
    forward = {1: "RFFT", 2: "RFFT2D", 3: "RFFT3D"}[rank]

    def gradient(node, grads):
        g = grads[0]
        n = g.shape[-1]
        m = n // 2 + 1
        w = np.full(m, 2.0)
        w[0] = 1.0
        if n % 2 == 0:
            w[-1] = 1.0
        spectrum = ops.apply(forward, [g])
        scale = ops.constant((w / _inner_size(g, rank)).astype(g.dtype))
        return [spectrum * ops.cast(scale, spectrum.dtype)]
    return gradient


for _rank, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    register_gradient(f"RFFT{_suffix}")(_rfft_grad(_rank))
    register_gradient(f"IRFFT{_suffix}")(_irfft_grad(_rank))
