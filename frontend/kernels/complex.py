"""Complex-number kernels (TensorFlow's op names): Complex, Real, Imag, Conj, Angle,
and the Fourier transforms FFT, IFFT, RFFT, IRFFT (the innermost dim), their 2D forms
(FFT2D, ..., the two innermost) and 3D forms (FFT3D, ...), each one HLO `fft`.

    Complex(re, im)   complex(re, im), the two broadcast; f32 -> c64, f64 -> c128
    Real / Imag       real(z) / imag(z)  (complex -> its real type)
    Conj              complex(real(z), -imag(z)): HLO has no conjugate opcode
    Angle             atan2(imag(z), real(z))

The transforms take their lengths from the input: FFT/IFFT over the inner dims as
they are, RFFT over `fft_length` = the inner dims of the real input, IRFFT to the
`fft_length` attribute (the inner dims of the input must be fft_length with the last
halved plus one; ops/signal.py pads or crops to that first, as TF does). Unnormalized
forward, 1/n inverse, as numpy and TF.
"""
from __future__ import annotations

from ..registry import XlaOpKernel, register_xla_op
from .common import broadcast_all, require_same_types

REAL_OF = {"c64": "f32", "c128": "f64"}
COMPLEX_OF = {"f32": "c64", "f64": "c128"}


def require_complex(x, what: str = "input") -> str:
    etype = x.shape.element_type
    if etype not in REAL_OF:
        raise TypeError(f"{what} must be complex64 or complex128, got {etype}")
    return etype


@register_xla_op("Complex")
class Complex(XlaOpKernel):
    """real + i imag from two real tensors of one type (f32 or f64), broadcast."""

    def compile(self, ctx):
        etype = require_same_types(ctx.inputs, "real and imag")
        if etype not in COMPLEX_OF:
            raise TypeError(f"real and imag must be float32 or float64, got {etype}")
        re, im = broadcast_all(ctx.builder, ctx.inputs)
        ctx.set_output(0, ctx.builder.complex(re, im))


@register_xla_op("Real")
class Real(XlaOpKernel):
    def compile(self, ctx):
        require_complex(ctx.input(0))
        ctx.set_output(0, ctx.builder.real(ctx.input(0)))


@register_xla_op("Imag")
class Imag(XlaOpKernel):
    def compile(self, ctx):
        require_complex(ctx.input(0))
        ctx.set_output(0, ctx.builder.imag(ctx.input(0)))


@register_xla_op("Conj")
class Conj(XlaOpKernel):
    def compile(self, ctx):
        b, z = ctx.builder, ctx.input(0)
        require_complex(z)
        ctx.set_output(0, b.complex(b.real(z), b.negate(b.imag(z))))


@register_xla_op("Angle")
class Angle(XlaOpKernel):
    """The argument of z in (-pi, pi]: atan2(imag, real)."""

    def compile(self, ctx):
        b, z = ctx.builder, ctx.input(0)
        require_complex(z)
        ctx.set_output(0, b.atan2(b.imag(z), b.real(z)))


class _Fourier(XlaOpKernel):
    """One HLO fft over the `RANK` innermost dims."""
    KIND = "FFT"
    RANK = 1

    def compile(self, ctx):
        b, x = ctx.builder, ctx.input(0)
        n = self.RANK
        if x.shape.rank < n:
            raise ValueError(f"input must have at least {n} dims, got {list(x.shape.dims)}")
        inner = tuple(x.shape.dims[-n:])
        if self.KIND == "RFFT":
            etype = x.shape.element_type
            if etype not in COMPLEX_OF:
                raise TypeError(f"input must be float32 or float64, got {etype}")
            lengths = inner
        else:
            require_complex(x)
            lengths = inner if self.KIND != "IRFFT" else tuple(ctx.attr("fft_length"))
            if self.KIND == "IRFFT":
                half = (*lengths[:-1], lengths[-1] // 2 + 1)
                if inner != half:
                    raise ValueError(f"the inner dims {list(inner)} must be {list(half)} "
                                     f"for fft_length {list(lengths)}")
        ctx.set_output(0, b.op("fft", [x], fft_type=self.KIND, fft_length=list(lengths)))


def _fourier(name: str, kind: str, rank: int):
    cls = type(name, (_Fourier,), {"KIND": kind, "RANK": rank,
                                   "__doc__": f"HLO fft {kind} over the {rank} inner dims."})
    register_xla_op(name)(cls)


for _kind in ("FFT", "IFFT", "RFFT", "IRFFT"):
    _fourier(_kind, _kind, 1)
    _fourier(f"{_kind}2D", _kind, 2)
    _fourier(f"{_kind}3D", _kind, 3)
