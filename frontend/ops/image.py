"""tf.image: resize (bilinear and nearest neighbour, TF 2's half-pixel centers).

The sampling positions depend only on the sizes, so they are computed with numpy at
trace time: each output row (column) reads one or two input rows (columns) through a
gather with constant indices and blends them with constant weights. The gradient is
the gathers' (a scatter-add) and the weights'.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from .array import gather
from .core import cast, constant, static_int, to_tensor, user_error


def _bilinear_taps(n_in: int, n_out: int):
    """(lower index, upper index, weight of upper) per output position: the input
    coordinate (i + 1/2) * n_in / n_out - 1/2, clamped to the edges."""
    scale = n_in / n_out
    pos = (np.arange(n_out) + 0.5) * scale - 0.5
    low = np.floor(pos)
    frac = pos - low
    lower = np.clip(low, 0, n_in - 1).astype(np.int32)
    upper = np.clip(np.ceil(pos), 0, n_in - 1).astype(np.int32)
    return lower, upper, frac


def _nearest_taps(n_in: int, n_out: int):
    """floor((i + 1/2) * n_in / n_out), at most n_in - 1 (TF 2's half-pixel rule)."""
    scale = n_in / n_out
    return np.minimum(np.floor((np.arange(n_out) + 0.5) * scale).astype(np.int64),
                      n_in - 1).astype(np.int32)


def resize(images, size, method="bilinear", preserve_aspect_ratio=False, antialias=False,
           name=None):
    """images [N, H, W, C] (or [H, W, C]) resized to size (new_height, new_width).
    'bilinear' returns float32 (float64 stays float64); 'nearest' keeps the dtype."""
    x = to_tensor(images)
    if x.ndim not in (3, 4):
        raise user_error(ValueError, f"resize: images must be [N, H, W, C] or [H, W, C], "
                                     f"got {x.aval_text()}")
    method = str(getattr(method, "value", method)).lower()
    if method not in ("bilinear", "nearest"):
        raise user_error(NotImplementedError, f"resize: method {method!r} is not supported "
                                              "(bilinear, nearest)")
    if antialias and method == "bilinear":
        raise user_error(NotImplementedError, "resize: antialias=True is not supported")
    h_axis = x.ndim - 3
    h_in, w_in = x.shape[h_axis], x.shape[h_axis + 1]
    h_out, w_out = (static_int(s, "resize: size") for s in size)
    if preserve_aspect_ratio:
        factor = min(h_out / h_in, w_out / w_in)
        h_out, w_out = int(round(h_in * factor)), int(round(w_in * factor))
    if min(h_out, w_out) <= 0 or min(h_in, w_in) <= 0:
        raise user_error(ValueError, f"resize: sizes must be positive, got {h_out}x{w_out} "
                                     f"from {x.aval_text()}")
    if method == "nearest":
        x = gather(x, constant(_nearest_taps(h_in, h_out)), axis=h_axis)
        return gather(x, constant(_nearest_taps(w_in, w_out)), axis=h_axis + 1)
    if x.dtype != np.float64:
        x = cast(x, "float32")
    for axis, n_in, n_out in ((h_axis, h_in, h_out), (h_axis + 1, w_in, w_out)):
        lower, upper, frac = _bilinear_taps(n_in, n_out)
        shape = [1] * x.ndim
        shape[axis] = n_out
        weight = constant(frac.reshape(shape).astype(dtypes.canonical(x.dtype)))
        a = gather(x, constant(lower), axis=axis)
        b = gather(x, constant(upper), axis=axis)
        x = a + (b - a) * weight
    return x
