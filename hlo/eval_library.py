"""Reference semantics of the library ops, reduce-precision, map, stochastic-convert and
the scheduling wrappers.

The numpy functions here (`cholesky`, `triangular_solve`, `fft`, `topk`, the batch
norms, `reduce_precision`) take arrays and plain parameters; the `@reference`
wrappers read the parameters from the instruction. The CPU backend runs the same
functions on the host (backend_cpu/library_ops.py): XLA's CPU backend, too, calls
library routines (or expands the ops into loops of HLO) for these.

What XLA defines and this follows:
- cholesky: only the `lower` (or upper) triangle of the operand is read; the other
  triangle of the result is zero; a matrix whose factorization meets the square
  root of a negative number or a NaN (not positive definite) becomes all NaN
  (XLA's CholeskyExpander). Complex matrices use the Hermitian form.
- triangular-solve: solves op(a) x = b (left_side) or x op(a) = b with op(a) = a,
  a^T or a^H (transpose_a); only the named triangle of a is read, its diagonal
  taken as ones if unit_diagonal. Singular systems give inf/NaN, not an error.
- topk: the k largest (smallest) elements of the minor dimension in order, with
  their s32 indices; floats ordered like XLA's comparator, on the bits (-NaN <
  -inf < ... < -0 < +0 < ... < inf < +NaN), ties by lower index first.
- fft: numpy's fftn/ifftn/rfftn/irfftn over the len(fft_length) minor dimensions.
- batch-norm-*: XLA's formulas (BatchNormExpander), biased variance.
- reduce-precision: XLA's bit recipe (round to nearest even on the mantissa,
  overflow to inf, underflow (including denormals) to zero, NaN kept).
"""
from __future__ import annotations

import numpy as np

from .eval_common import EvaluationError, as_tuple, compute_dtype, flush, np_dtype_of, to_result
from .opcodes import reference

TOKEN = np.zeros((0,), np.uint8)   # the value of a token (after-all): carries no data


# --- reduce-precision ------------------------------------------------------------------

_FLOAT_LAYOUT = {np.dtype(np.float16): (np.uint16, 5, 10),
                 np.dtype(np.float32): (np.uint32, 8, 23),
                 np.dtype(np.float64): (np.uint64, 11, 52)}


def reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """`x` rounded to a float of `exponent_bits` and `mantissa_bits`, in x's own type."""
    x = np.asarray(x)
    uint, src_e, src_m = _FLOAT_LAYOUT[x.dtype]
    u = uint
    nbits = 8 * x.dtype.itemsize
    bits = x.view(uint).copy()
    exp_mask = u(((1 << src_e) - 1) << src_m)
    sign_mask = u(1 << (nbits - 1))
    is_nan = (bits & ~sign_mask) > exp_mask
    with np.errstate(over="ignore"):
        if mantissa_bits < src_m:
            shift = src_m - mantissa_bits
            last = u(1 << shift)
            bias = ((bits & last) >> u(shift)) + u((1 << (shift - 1)) - 1)
            bits = (bits + bias) & ~u((1 << shift) - 1)
        if exponent_bits < src_e:
            exponent_bias = (1 << (src_e - 1)) - 1
            reduced_bias = (1 << (exponent_bits - 1)) - 1
            max_exp = u((exponent_bias + reduced_bias) << src_m)
            min_exp = u((exponent_bias - reduced_bias) << src_m)
            exponent = bits & exp_mask
            signed_zero = bits & sign_mask
            bits = np.where(exponent > max_exp, signed_zero | exp_mask, bits)
            bits = np.where(exponent <= min_exp, signed_zero, bits)
    result = bits.view(x.dtype)
    if mantissa_bits > 0:
        return np.where(is_nan, x, result)
    return np.where(is_nan, x.dtype.type(np.inf), result)


@reference("reduce-precision")
def reduce_precision_ref(instr, operands, ctx):
    (x,) = operands
    # bf16 is held as f32 whose low 16 bits are zero: the f32 recipe gives the bf16 result.
    return reduce_precision(np.asarray(x), instr.attrs["exponent_bits"],
                            instr.attrs["mantissa_bits"])


# --- map, stochastic-convert -----------------------------------------------------------

@reference("map")
def map_ref(instr, operands, ctx):
    # The evaluator runs scalar computations on whole arrays (as it does reducers).
    value = ctx.call(instr.attrs["to_apply"], list(operands))
    return to_result(np.broadcast_to(value, instr.shape.dims), instr)


def stochastic_convert(x: np.ndarray, random: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """XLA's stochastic rounding to a signed integer (StochasticConvertDecomposer): |x|
    rounds up iff random < floor(fraction * 2^bits); the sign is restored; x <= the
    type's min (max), compared as floats, gives min (max); NaN gives 0."""
    x = np.asarray(x)
    out_dtype = np.dtype(out_dtype)
    if out_dtype.kind != "i":
        raise ValueError(f"stochastic-convert to {out_dtype} is not implemented (signed "
                         f"integers only, as in XLA)")
    info = np.iinfo(out_dtype)
    bits = 8 * np.asarray(random).dtype.itemsize
    with np.errstate(all="ignore"):
        magnitude = np.abs(x)
        whole = np.floor(magnitude)
        fraction = (magnitude - whole).astype(np.float64)       # exact
        fixed = np.nan_to_num(np.floor(np.ldexp(fraction, bits)), nan=0.0)
        up = np.asarray(random).astype(np.float64) < fixed
        # float -> int saturates, NaN -> 0; then +1 and negation wrap in the type.
        truncated = np.nan_to_num(whole.astype(np.float64), nan=0.0)
        truncated = np.clip(truncated, info.min, info.max).astype(np.int64)
        value = truncated + up
        value = np.where(x < 0, -value, value)
        value = value.astype(out_dtype)                        # wraps
        low, high = x.dtype.type(info.min), x.dtype.type(info.max)
        value = np.where(x <= low, out_dtype.type(info.min), value)
        value = np.where(x >= high, out_dtype.type(info.max), value)
    return value.astype(out_dtype)


@reference("stochastic-convert")
def stochastic_convert_ref(instr, operands, ctx):
    x, random = operands
    return stochastic_convert(x, np.asarray(random), np_dtype_of(instr))


# --- topk ---------------------------------------------------------------------------------

def _order_key(x: np.ndarray) -> np.ndarray:
    """Integers ordered like XLA's topk comparator orders `x`."""
    if x.dtype.kind == "f":
        signed = np.dtype(f"i{x.dtype.itemsize}")
        bits = x.view(signed).astype(np.int64)
        return np.where(bits < 0, bits ^ np.int64(np.iinfo(signed).max), bits)
    if x.dtype == np.bool_:
        return x.astype(np.int64)
    return x


def topk(x: np.ndarray, k: int, largest: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(values, s32 indices) of the k largest (smallest) along the minor dimension."""
    x = np.asarray(x)
    key = _order_key(x)
    if largest:
        # Stable descending: sort the negated order; unsigned keys cannot be negated,
        # so reverse a stable ascending sort of the reversed row instead.
        n = x.shape[-1]
        rev = np.flip(key, axis=-1)
        order = n - 1 - np.flip(np.argsort(rev, axis=-1, kind="stable"), axis=-1)
    else:
        order = np.argsort(key, axis=-1, kind="stable")
    order = order[..., :k]
    return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)


@reference("topk")
def topk_ref(instr, operands, ctx):
    return topk(operands[0], instr.attrs["k"], instr.attrs.get("largest", True))


# --- cholesky, triangular-solve --------------------------------------------------------

def _swap(m: np.ndarray) -> np.ndarray:
    return np.swapaxes(m, -1, -2)


def cholesky(a: np.ndarray, lower: bool) -> np.ndarray:
    """XLA's cholesky (module docstring), batched over the major dimensions."""
    a = np.asarray(a)
    out_dtype = a.dtype
    calc = np.result_type(compute_dtype(a), np.float32)
    m = a.astype(calc) if lower else _swap(a).astype(calc)
    n = m.shape[-1]
    l = np.zeros_like(m)
    failed = np.zeros(m.shape[:-2], bool)
    complex_ = np.iscomplexobj(m)
    with np.errstate(all="ignore"):
        for j in range(n):
            row = l[..., j, :j]
            d = m[..., j, j] - np.sum(row * np.conj(row), axis=-1)
            if complex_:
                root = np.sqrt(d.real)
                failed |= np.isnan(root)
                diag = root.astype(calc)
            else:
                diag = np.sqrt(d)
                failed |= np.isnan(diag)
            l[..., j, j] = diag
            if j + 1 < n:
                below = m[..., j + 1:, j] - np.einsum("...ik,...k->...i", l[..., j + 1:, :j],
                                                      np.conj(row))
                l[..., j + 1:, j] = below / diag[..., None]
    l = np.where(failed[..., None, None], calc.type(np.nan), l)
    result = l if lower else _swap(l)
    return result.astype(out_dtype)


def triangular_solve(a: np.ndarray, b: np.ndarray, left_side: bool, lower: bool,
                     unit_diagonal: bool, transpose_a: str) -> np.ndarray:
    """XLA's triangular-solve (module docstring), batched over the major dimensions."""
    a, b = np.asarray(a), np.asarray(b)
    out_dtype = b.dtype
    calc = np.result_type(compute_dtype(a), np.float32)
    tri = np.tril(a) if lower else np.triu(a)
    tri = tri.astype(calc)
    if unit_diagonal:
        idx = np.arange(tri.shape[-1])
        tri[..., idx, idx] = 1
    op, op_lower = tri, lower
    if transpose_a != "NO_TRANSPOSE":
        op, op_lower = _swap(tri), not lower
        if transpose_a == "ADJOINT":
            op = np.conj(op)
    rhs = b.astype(calc)
    if not left_side:            # x op = b  <=>  op^T x^T = b^T
        op, op_lower, rhs = _swap(op), not op_lower, _swap(rhs)
    n = op.shape[-1]
    x = np.zeros_like(rhs)
    steps = range(n) if op_lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in steps:
            known = slice(0, i) if op_lower else slice(i + 1, n)
            acc = rhs[..., i, :] - np.einsum("...k,...kj->...j", op[..., i, known], x[..., known, :])
            x[..., i, :] = acc / op[..., i, i][..., None]
    if not left_side:
        x = _swap(x)
    return x.astype(out_dtype)


@reference("cholesky")
def cholesky_ref(instr, operands, ctx):
    (a,) = operands
    return flush(cholesky(flush(a, ctx), bool(instr.attrs.get("lower", False))), ctx)


@reference("triangular-solve")
def triangular_solve_ref(instr, operands, ctx):
    a, b = operands
    attrs = instr.attrs
    x = triangular_solve(flush(a, ctx), flush(b, ctx), bool(attrs.get("left_side", False)),
                         bool(attrs.get("lower", False)), bool(attrs.get("unit_diagonal", False)),
                         attrs.get("transpose_a", "NO_TRANSPOSE"))
    return flush(x, ctx)


# --- fft -------------------------------------------------------------------------------------

def fft(x: np.ndarray, fft_type: str, lengths: tuple, out_dims: tuple, out_dtype) -> np.ndarray:
    """numpy's n-dimensional transforms over the len(lengths) minor dimensions."""
    x = np.asarray(x)
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if 0 in x.shape or 0 in out_dims or 0 in lengths:
        return np.zeros(out_dims, out_dtype)
    if fft_type == "FFT":
        y = np.fft.fftn(x, axes=axes)
    elif fft_type == "IFFT":
        y = np.fft.ifftn(x, axes=axes)
    elif fft_type == "RFFT":
        y = np.fft.rfftn(x, s=lengths, axes=axes)
    else:
        y = np.fft.irfftn(x, s=lengths, axes=axes)
    return np.asarray(y).astype(out_dtype)


@reference("fft")
def fft_ref(instr, operands, ctx):
    return fft(operands[0], instr.attrs["fft_type"], tuple(instr.attrs["fft_length"]),
               instr.shape.dims, np_dtype_of(instr))


# --- batch norm --------------------------------------------------------------------------------

def _feature_view(x: np.ndarray, feature: int):
    """(axes reduced over, the broadcast shape of a per-feature vector)."""
    axes = tuple(d for d in range(x.ndim) if d != feature)
    shape = [1] * x.ndim
    shape[feature] = x.shape[feature]
    return axes, shape


def batch_norm_training(x, scale, offset, epsilon: float, feature: int):
    calc = compute_dtype(np.asarray(x))
    x = np.asarray(x, calc)
    axes, shape = _feature_view(x, feature)
    with np.errstate(all="ignore"):
        mean = np.mean(x, axis=axes) if x.size else np.zeros(x.shape[feature], calc)
        centered = x - mean.reshape(shape)
        var = np.mean(centered * centered, axis=axes) if x.size else np.zeros_like(mean)
        y = centered / np.sqrt(var + calc.type(epsilon)).reshape(shape) \
            * np.asarray(scale, calc).reshape(shape) + np.asarray(offset, calc).reshape(shape)
    return y, mean.astype(calc), var.astype(calc)


def batch_norm_inference(x, scale, offset, mean, var, epsilon: float, feature: int):
    calc = compute_dtype(np.asarray(x))
    x = np.asarray(x, calc)
    _, shape = _feature_view(x, feature)

    def vec(v):
        return np.asarray(v, calc).reshape(shape)
    with np.errstate(all="ignore"):
        return (x - vec(mean)) / np.sqrt(vec(var) + calc.type(epsilon)) * vec(scale) + vec(offset)


def batch_norm_grad(x, scale, mean, var, grad, epsilon: float, feature: int):
    calc = compute_dtype(np.asarray(x))
    x, grad = np.asarray(x, calc), np.asarray(grad, calc)
    axes, shape = _feature_view(x, feature)
    count = calc.type(x.size // max(1, x.shape[feature]))
    with np.errstate(all="ignore"):
        inv_std = (1 / np.sqrt(np.asarray(var, calc) + calc.type(epsilon))).astype(calc)
        xhat = (x - np.asarray(mean, calc).reshape(shape)) * inv_std.reshape(shape)
        grad_offset = np.sum(grad, axis=axes).astype(calc)
        grad_scale = np.sum(grad * xhat, axis=axes).astype(calc)
        grad_x = (np.asarray(scale, calc) * inv_std / count).reshape(shape) * (
            count * grad - grad_offset.reshape(shape) - xhat * grad_scale.reshape(shape))
    return grad_x, grad_scale, grad_offset


def _epsilon(instr) -> float:
    value = instr.attrs.get("epsilon", 0.0)
    return float(getattr(value, "text", value))      # kept as raw text by the parser


def _cast_all(values, instr, ctx):
    shapes = instr.shape.leaves() if instr.shape.is_tuple else [instr.shape]
    out = tuple(flush(np.asarray(v).astype(s.dtype.numpy), ctx) for v, s in zip(values, shapes))
    return out if instr.shape.is_tuple else out[0]


@reference("batch-norm-training")
def batch_norm_training_ref(instr, operands, ctx):
    x, scale, offset = (flush(v, ctx) for v in operands)
    return _cast_all(batch_norm_training(x, scale, offset, _epsilon(instr),
                                         instr.attrs["feature_index"]), instr, ctx)


@reference("batch-norm-inference")
def batch_norm_inference_ref(instr, operands, ctx):
    args = [flush(v, ctx) for v in operands]
    return _cast_all([batch_norm_inference(*args, _epsilon(instr), instr.attrs["feature_index"])],
                     instr, ctx)


@reference("batch-norm-grad")
def batch_norm_grad_ref(instr, operands, ctx):
    args = [flush(v, ctx) for v in operands]
    return _cast_all(batch_norm_grad(*args, _epsilon(instr), instr.attrs["feature_index"]),
                     instr, ctx)


# --- tokens, dependencies, async wrappers ---------------------------------------------------

@reference("after-all")
def after_all_ref(instr, operands, ctx):
    return TOKEN


@reference("add-dependency", "domain")
def pass_through_ref(instr, operands, ctx):
    return operands[0]


@reference("async-start")
def async_start_ref(instr, operands, ctx):
    """Runs the wrapped computation now; the context elements are zeros."""
    result = ctx.call(instr.attrs["calls"], list(operands))
    context = tuple(np.zeros(s.dims, s.dtype.numpy) if s.is_array else TOKEN
                    for s in instr.shape.tuple_shapes[2:])
    return (tuple(operands), result) + context


@reference("async-update")
def async_update_ref(instr, operands, ctx):
    return operands[0]


@reference("async-done")
def async_done_ref(instr, operands, ctx):
    return as_tuple(operands[0])[1]


@reference("copy-start")
def copy_start_ref(instr, operands, ctx):
    (x,) = operands
    return (np.array(x, copy=True), x, np.zeros((), np.uint32))


@reference("copy-done")
def copy_done_ref(instr, operands, ctx):
    return as_tuple(operands[0])[0]


def custom_call_error(instr) -> EvaluationError:
    target = instr.attrs.get("custom_call_target", "?")
    return EvaluationError(f"{instr.name}: unsupported custom-call target {target!r}")
