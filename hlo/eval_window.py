"""Reference semantics of the windowed ops: reduce-window and select-and-scatter.

Both slide a window (size, stride, padding, base and window dilation) over the
operand. `windows()` builds every window at once as a strided view, together
with a mask of which window positions hold real operand elements: padding and
the holes of base dilation are skipped by XLA (not combined with the init
value), and the mask lets the generic path skip them too.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .eval_common import EvaluationError, recognize_binary_reducer, reducer_identity
from .eval_reduce import call_reducer, combine_in_order, combine_with_init, ufunc_reduce
from .opcodes import reference


def _dilate_and_pad(x: np.ndarray, window, fill) -> np.ndarray:
    """x with base dilation holes and edge padding (negative = crop), filled with `fill`."""
    dilated_dims = [(n - 1) * w.base_dilation + 1 if n else 0 for n, w in zip(x.shape, window.dims)]
    out = np.full(dilated_dims, fill, dtype=x.dtype)
    out[tuple(slice(None, None, w.base_dilation) for w in window.dims)] = x
    widths = [(max(w.pad_low, 0), max(w.pad_high, 0)) for w in window.dims]
    out = np.pad(out, widths, mode="constant", constant_values=fill)
    crop = tuple(slice(max(-w.pad_low, 0), out.shape[i] - max(-w.pad_high, 0))
                 for i, w in enumerate(window.dims))
    return out[crop]


def windows(x: np.ndarray, window, fill):
    """(values, valid): arrays of shape out_dims + (window elements,), in window order."""
    if len(window.dims) != x.ndim:
        raise EvaluationError(f"window of rank {len(window.dims)} on an operand of rank {x.ndim}")
    if x.ndim == 0:                   # the one window of a scalar is the scalar
        return x.reshape(1), np.ones(1, dtype=bool)
    padded = _dilate_and_pad(x, window, fill)
    valid = _dilate_and_pad(np.ones(x.shape, dtype=bool), window, False)
    return _slide(padded, window), _slide(valid, window)


def _slide(padded: np.ndarray, window) -> np.ndarray:
    extents = [(w.size - 1) * w.window_dilation + 1 for w in window.dims]
    if any(e > n for e, n in zip(extents, padded.shape)):
        # The window does not fit anywhere along some dimension: no windows at all.
        out_dims = [max(0, (n - e) // w.stride + 1) for n, e, w in zip(padded.shape, extents, window.dims)]
        return np.zeros(out_dims + [int(np.prod([w.size for w in window.dims]))], padded.dtype)
    view = sliding_window_view(padded, extents)
    rank = padded.ndim
    index = tuple(slice(None, None, w.stride) for w in window.dims)
    index += tuple(slice(None, None, w.window_dilation) for w in window.dims)
    view = view[index]
    return view.reshape(view.shape[:rank] + (int(np.prod(view.shape[rank:])),))


@reference("reduce-window")
def reduce_window(instr, operands, ctx):
    n = len(operands) // 2
    inputs, inits = operands[:n], operands[n:]
    window = instr.attrs["window"]
    comp = instr.attrs["to_apply"]
    opcode = recognize_binary_reducer(comp) if n == 1 else None
    if opcode is not None:
        # Skipped positions hold the reducer's identity, so they change nothing.
        values, _ = windows(inputs[0], window, reducer_identity(opcode, inputs[0].dtype))
        if values.shape[-1] == 0:
            return np.broadcast_to(inits[0], values.shape[:-1])
        partial = ufunc_reduce(opcode, values, -1, ctx)
        return combine_with_init(opcode, partial, inits[0], ctx, instr)
    parts = [windows(x, window, np.zeros((), x.dtype)) for x in inputs]
    valid = parts[0][1]
    out_dims = valid.shape[:-1]
    accs = [np.broadcast_to(init, out_dims) for init in inits]
    # Sequential fold over the window positions, vectorized over all windows.
    for k in range(valid.shape[-1]):
        new = call_reducer(comp, ctx, accs, [values[..., k] for values, _ in parts])
        accs = [np.where(valid[..., k], v, a) for v, a in zip(new, accs)]
    return accs[0] if n == 1 else tuple(accs)


@reference("select-and-scatter")
def select_and_scatter(instr, operands, ctx):
    operand, source, init = operands
    window = instr.attrs["window"]
    select, scatter = instr.attrs["select"], instr.attrs["scatter"]
    values, valid = windows(operand, window, np.zeros((), operand.dtype))
    flat_index = np.arange(operand.size).reshape(operand.shape)
    positions, _ = windows(flat_index, window, -1)
    if values.shape[:-1] != source.shape:
        raise EvaluationError(f"{instr.name}: source shape {source.shape} does not match "
                              f"the {values.shape[:-1]} windows")
    # The first element of each window that `select` prefers over every later one:
    # a candidate replaces the current choice when select(current, candidate) is false.
    chosen_value = values[..., 0]
    chosen_at = positions[..., 0]
    have = valid[..., 0]
    for k in range(1, values.shape[-1]):
        candidate = values[..., k]
        keep = np.asarray(call_reducer(select, ctx, [chosen_value], [candidate])[0], dtype=bool)
        take = valid[..., k] & (~have | ~keep)
        chosen_value = np.where(take, candidate, chosen_value)
        chosen_at = np.where(take, positions[..., k], chosen_at)
        have = have | valid[..., k]
    out = np.full(operand.size, init, dtype=operand.dtype)
    scattered = have.reshape(-1)
    combine_in_order(scatter, ctx, [out], chosen_at.reshape(-1)[scattered],
                     [source.reshape(-1)[scattered]])
    return out.reshape(operand.shape)
