"""tf.signal's Fourier transforms: fft, ifft, rfft, irfft and their 2-D and 3-D forms,
over the innermost one, two or three dims, each lowered to one HLO `fft`.

fft/ifft take complex tensors (as TF: a real tensor is an error, cast it first).
rfft takes float32/float64 and gives complex64/complex128 with n // 2 + 1 entries
in the last dim; `fft_length` crops or zero-pads the input's inner dims to it first.
irfft gives back fft_length real values (default 2 * (m - 1) from the m entries of
the last dim); its input is cropped or zero-padded to fft_length // 2 + 1 first,
and the imaginary parts of the 0 and n/2 entries are ignored, as numpy and TF do.
Gradients are TF's (autodiff/grads_complex.py).
"""
from __future__ import annotations

from .. import dtypes
from ..tensor import Tensor
from .core import apply, to_tensor, user_error


_SUFFIX = {1: "", 2: "2D", 3: "3D"}     # the op names: RFFT, RFFT2D, RFFT3D


def _complex_input(input, what: str, rank: int) -> Tensor:
    x = to_tensor(input)
    if dtypes.kind(x.dtype) != "complex":
        raise user_error(TypeError, f"{what}: input must be complex64 or complex128, got "
                                    f"{x.dtype.name} (use ops.cast or signal.rfft)")
    if x.ndim < rank:
        raise user_error(ValueError, f"{what}: input must have at least {rank} dims, got "
                                     f"{x.aval_text()}")
    return x


def _real_input(input_tensor, what: str, rank: int) -> Tensor:
    x = to_tensor(input_tensor)
    if x.dtype.name not in ("float32", "float64"):
        raise user_error(TypeError, f"{what}: input must be float32 or float64, got "
                                    f"{x.dtype.name}")
    if x.ndim < rank:
        raise user_error(ValueError, f"{what}: input must have at least {rank} dims, got "
                                     f"{x.aval_text()}")
    return x


def _lengths(fft_length, rank: int, what: str):
    from .core import static_value
    value = static_value(fft_length)
    if value is None:
        raise user_error(TypeError, f"{what}: fft_length must be known at trace time")
    lengths = [int(v) for v in value.reshape(-1)]
    if len(lengths) != rank or min(lengths) < 0:
        raise user_error(ValueError, f"{what}: fft_length must be {rank} non-negative "
                                     f"int(s), got {lengths}")
    return lengths


def _fit_inner(x: Tensor, sizes) -> Tensor:
    """x with its inner dims cropped or zero-padded at the end to `sizes`."""
    from .array import pad, slice as slice_
    lead = x.ndim - len(sizes)
    inner = list(x.shape[lead:])
    if inner == list(sizes):
        return x
    crop = [min(a, b) for a, b in zip(inner, sizes)]
    if crop != inner:
        x = slice_(x, [0] * x.ndim, list(x.shape[:lead]) + crop)
    if crop != list(sizes):
        x = pad(x, [[0, 0]] * lead + [[0, s - c] for s, c in zip(sizes, crop)])
    return x


def fft(input, name=None):
    """The discrete Fourier transform over the innermost dim."""
    return apply("FFT", [_complex_input(input, "fft", 1)])


def ifft(input, name=None):
    """The inverse transform over the innermost dim (scaled by 1/n)."""
    return apply("IFFT", [_complex_input(input, "ifft", 1)])


def fft2d(input, name=None):
    """The 2-D transform over the two innermost dims."""
    return apply("FFT2D", [_complex_input(input, "fft2d", 2)])


def ifft2d(input, name=None):
    return apply("IFFT2D", [_complex_input(input, "ifft2d", 2)])


def _rfft(input_tensor, fft_length, rank: int, what: str):
    x = _real_input(input_tensor, what, rank)
    sizes = list(x.shape[-rank:]) if fft_length is None else _lengths(fft_length, rank, what)
    return apply(f"RFFT{_SUFFIX[rank]}", [_fit_inner(x, sizes)])


def _irfft(input_tensor, fft_length, rank: int, what: str):
    x = _complex_input(input_tensor, what, rank)
    if fft_length is None:
        sizes = list(x.shape[-rank:])
        sizes[-1] = 2 * max(sizes[-1] - 1, 0)
    else:
        sizes = _lengths(fft_length, rank, what)
    if 0 in sizes:
        raise user_error(ValueError, f"{what}: no samples to produce (fft_length {sizes}); "
                                     f"give a positive fft_length")
    half = sizes[:-1] + [sizes[-1] // 2 + 1]
    return apply(f"IRFFT{_SUFFIX[rank]}", [_fit_inner(x, half)],
                 fft_length=tuple(sizes))


def rfft(input_tensor, fft_length=None, name=None):
    """The transform of a real signal over the innermost dim: its n // 2 + 1
    non-negative frequencies (n = fft_length, default the dim's size)."""
    return _rfft(input_tensor, fft_length, 1, "rfft")


def irfft(input_tensor, fft_length=None, name=None):
    """The real signal of length fft_length (default 2 * (m - 1)) whose rfft is the
    input."""
    return _irfft(input_tensor, fft_length, 1, "irfft")


def rfft2d(input_tensor, fft_length=None, name=None):
    return _rfft(input_tensor, fft_length, 2, "rfft2d")


def irfft2d(input_tensor, fft_length=None, name=None):
    return _irfft(input_tensor, fft_length, 2, "irfft2d")


def fft3d(input, name=None):
    """The 3-D transform over the three innermost dims."""
    return apply("FFT3D", [_complex_input(input, "fft3d", 3)])


def ifft3d(input, name=None):
    return apply("IFFT3D", [_complex_input(input, "ifft3d", 3)])


def rfft3d(input_tensor, fft_length=None, name=None):
    return _rfft(input_tensor, fft_length, 3, "rfft3d")


def irfft3d(input_tensor, fft_length=None, name=None):
    return _irfft(input_tensor, fft_length, 3, "irfft3d")
