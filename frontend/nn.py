"""Keras-style building blocks as pure functions: parameters are pytrees of arrays.

    dense = nn.Dense(64, activation="relu")
    params = dense.init(seed, input_shape=(None, 32))      # {"kernel": ..., "bias": ...}

    @jit_compile
    def f(params, x):
        return dense.apply(params, x)

A layer object holds only its configuration (Keras's argument names and defaults);
`init(seed, input_shape)` returns numpy parameters, `apply(params, x, ...)` computes
with frontend ops inside a trace. Nothing is global: randomness comes from the seed
passed to init (a Python int or a [2] seed, see ops.random) and, for dropout in
training, from the `seed=` passed to apply.

Layers (Keras's initializers):
  Dense(units, activation=None, use_bias=True)           kernel glorot_uniform, bias zeros
  Embedding(input_dim, output_dim)                       embeddings uniform(-0.05, 0.05)
  LayerNormalization(axis=-1, epsilon=1e-3)              gamma ones, beta zeros
  MultiHeadAttention(num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                     output_shape=None)                  query/key/value/output kernels
      glorot_uniform on Keras's EinsumDense shapes ([d, heads, key_dim], ...), biases zeros;
      apply(params, query, value, key=None, attention_mask=None, use_causal_mask=False,
            training=False, seed=None)
  Conv2D(filters, kernel_size, strides=1, padding="valid", dilation_rate=1,
         activation=None, use_bias=True)                 NHWC, kernel [kh, kw, in, out]
  BatchNormalization(axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True)
      init -> (params {gamma, beta}, state {moving_mean, moving_variance});
      apply(params, state, x, training) -> (y, new state): training normalizes by the
      batch's mean and (biased) variance and moves the averages by `momentum`,
      inference uses the moving averages.
  dropout(x, rate, noise_shape=None, seed=None)          tf.nn.dropout (ops.dropout)

glorot_uniform draws from U(-l, l), l = sqrt(6 / (fan_in + fan_out)) with Keras's fans
(fan_in = shape[-2] * r, fan_out = shape[-1] * r, r the product of the other dims).
The draws are ops.random's (Threefry), so the values differ from Keras's, not the law.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import ops
from .jit import jit_compile
from .ops.random import dropout  # noqa: F401  (tf.nn.dropout, re-exported)

# --- initializers -------------------------------------------------------------------------

_draw_cache: dict = {}


def _uniform(seed, shape, low, high, dtype="float32") -> np.ndarray:
    """U[low, high) of `shape` from ops.random (run on the numpy evaluator: no compile)."""
    fn = _draw_cache.get("uniform")
    if fn is None:
        fn = _draw_cache["uniform"] = jit_compile(
            lambda key, shape, dtype: ops.random.stateless_uniform(shape, key, dtype=dtype,
                                                                   alg="threefry"),
            static_argnums=(1, 2), backend="interpreter", pipeline=None, name="nn_init")
    unit = np.asarray(fn(ops.random.key_array(seed), tuple(int(d) for d in shape), dtype))
    return (low + (high - low) * unit).astype(dtype)


def split_seed(seed, num: int) -> list[np.ndarray]:
    """`num` independent [2] seeds made from `seed` (an int or a [2] seed)."""
    fn = _draw_cache.get("split")
    if fn is None:
        fn = _draw_cache["split"] = jit_compile(
            lambda key, n: ops.random.split_key(key, n, alg="threefry"), static_argnums=(1,),
            backend="interpreter", pipeline=None, name="nn_split")
    return list(np.asarray(fn(ops.random.key_array(seed), int(num))))


def compute_fans(shape) -> tuple[float, float]:
    """Keras's (fan_in, fan_out) of a kernel shape."""
    shape = tuple(shape)
    if len(shape) == 0:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    receptive = math.prod(shape[:-2])
    return float(shape[-2] * receptive), float(shape[-1] * receptive)


def glorot_uniform(seed, shape, dtype="float32") -> np.ndarray:
    fan_in, fan_out = compute_fans(shape)
    limit = math.sqrt(6.0 / max(1.0, fan_in + fan_out))
    return _uniform(seed, shape, -limit, limit, dtype)


def random_uniform(seed, shape, dtype="float32", minval=-0.05, maxval=0.05) -> np.ndarray:
    """Keras's RandomUniform (the "uniform" initializer of Embedding): U[-0.05, 0.05)."""
    return _uniform(seed, shape, minval, maxval, dtype)


INITIALIZERS = {"glorot_uniform": glorot_uniform, "uniform": random_uniform,
                "random_uniform": random_uniform,
                "zeros": lambda seed, shape, dtype="float32": np.zeros(shape, dtype),
                "ones": lambda seed, shape, dtype="float32": np.ones(shape, dtype)}


def _initializer(name_or_fn):
    if callable(name_or_fn):
        return name_or_fn
    try:
        return INITIALIZERS[name_or_fn]
    except KeyError:
        raise ValueError(f"unknown initializer {name_or_fn!r}; expected one of "
                         f"{sorted(INITIALIZERS)} or a function (seed, shape, dtype)") from None


# --- activations ----------------------------------------------------------------------------

ACTIVATIONS = {None: lambda x: x, "linear": lambda x: x, "relu": ops.relu,
               "gelu": ops.gelu, "tanh": ops.tanh, "sigmoid": ops.sigmoid,
               "softmax": ops.softmax, "silu": ops.silu, "swish": ops.silu, "elu": ops.elu}


def _activation(a):
    if callable(a):
        return a
    try:
        return ACTIVATIONS[a]
    except KeyError:
        raise ValueError(f"unknown activation {a!r}; expected one of "
                         f"{sorted(k for k in ACTIVATIONS if k)} or a function") from None


def _positive_int(owner, name, value) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")
    return int(value)


def _last_dim(owner, input_shape) -> int:
    if isinstance(input_shape, numbers.Integral):
        return int(input_shape)
    dims = tuple(input_shape)
    if not dims or dims[-1] is None:
        raise ValueError(f"{owner}: the last dimension of input_shape must be known, "
                         f"got {input_shape!r}")
    return int(dims[-1])


def _kernel_and_bias(layer, seed, kernel_shape, dtype) -> dict:
    """{"kernel", "bias"} of a Dense or Conv2D layer: the kernel from the first of two seeds,
    the bias (one per output unit, the kernel's last dimension) from the second."""
    k_seed, b_seed = split_seed(seed, 2)
    params = {"kernel": layer.kernel_initializer(k_seed, tuple(kernel_shape), dtype)}
    if layer.use_bias:
        params["bias"] = layer.bias_initializer(b_seed, (kernel_shape[-1],), dtype)
    return params


def _linear(x, kernel, bias=None):
    """x[..., d] @ kernel[d, u] (+ bias) for any rank of x: one 2-D dot."""
    lead = list(x.shape[:-1])
    y = ops.matmul(ops.reshape(x, [-1, x.shape[-1]]), kernel)
    if bias is not None:
        y = y + bias
    return ops.reshape(y, lead + [kernel.shape[-1]])


# --- layers ---------------------------------------------------------------------------------

class Dense:
    """keras.layers.Dense: activation(x @ kernel + bias) over the last axis."""

    def __init__(self, units, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros"):
        self.units = _positive_int("Dense", "units", units)
        self.activation = activation
        self._act = _activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _initializer(kernel_initializer)
        self.bias_initializer = _initializer(bias_initializer)

    def init(self, seed, input_shape, dtype="float32") -> dict:
        d = _last_dim("Dense", input_shape)
        return _kernel_and_bias(self, seed, (d, self.units), dtype)

    def apply(self, params, x):
        x = ops.to_tensor(x)
        return self._act(_linear(x, params["kernel"], params.get("bias")))


class Embedding:
    """keras.layers.Embedding: rows of the table [input_dim, output_dim] by integer ids."""

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform"):
        self.input_dim = _positive_int("Embedding", "input_dim", input_dim)
        self.output_dim = _positive_int("Embedding", "output_dim", output_dim)
        self.embeddings_initializer = _initializer(embeddings_initializer)

    def init(self, seed, input_shape=None, dtype="float32") -> dict:
        return {"embeddings": self.embeddings_initializer(seed, (self.input_dim,
                                                                 self.output_dim), dtype)}

    def apply(self, params, ids):
        return ops.gather(params["embeddings"], ids)


class LayerNormalization:
    """keras.layers.LayerNormalization: (x - mean) / sqrt(var + epsilon) * gamma + beta
    over `axis` (the biased variance, epsilon 1e-3 as Keras)."""

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True):
        self.axis = axis
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)

    def _axes(self, rank):
        axes = (self.axis,) if isinstance(self.axis, int) else tuple(self.axis)
        return tuple(sorted(a % rank for a in axes))

    def init(self, seed, input_shape, dtype="float32") -> dict:
        shape = tuple(input_shape)
        if any(shape[a] is None for a in self._axes(len(shape))):
            raise ValueError(f"LayerNormalization: normalized dims of {shape} must be known")
        pshape = tuple(shape[a] for a in self._axes(len(shape)))
        params = {}
        if self.scale:
            params["gamma"] = np.ones(pshape, dtype)
        if self.center:
            params["beta"] = np.zeros(pshape, dtype)
        return params

    def apply(self, params, x):
        x = ops.to_tensor(x)
        axes = self._axes(x.ndim)
        mean = ops.reduce_mean(x, list(axes), True)
        centered = x - mean
        var = ops.reduce_mean(ops.square(centered), list(axes), True)
        y = centered * ops.rsqrt(var + self.epsilon)
        # gamma/beta have the normalized dims' shape: put them back in x's rank
        pshape = [x.shape[d] if d in axes else 1 for d in range(x.ndim)]
        if self.scale:
            y = y * ops.reshape(params["gamma"], pshape)
        if self.center:
            y = y + ops.reshape(params["beta"], pshape)
        return y


class MultiHeadAttention:
    """keras.layers.MultiHeadAttention (the EinsumDense projections of Keras 3)."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 output_shape=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros"):
        self.num_heads = _positive_int("MultiHeadAttention", "num_heads", num_heads)
        self.key_dim = _positive_int("MultiHeadAttention", "key_dim", key_dim)
        self.value_dim = self.key_dim if value_dim is None else \
            _positive_int("MultiHeadAttention", "value_dim", value_dim)
        if not 0 <= float(dropout) < 1:
            raise ValueError(f"MultiHeadAttention: dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        self.output_shape = output_shape
        self.kernel_initializer = _initializer(kernel_initializer)
        self.bias_initializer = _initializer(bias_initializer)

    def init(self, seed, query_shape, value_shape=None, key_shape=None,
             dtype="float32") -> dict:
        dq = _last_dim("MultiHeadAttention", query_shape)
        dv = dq if value_shape is None else _last_dim("MultiHeadAttention", value_shape)
        dk = dv if key_shape is None else _last_dim("MultiHeadAttention", key_shape)
        out = dq if self.output_shape is None else int(self.output_shape)
        h, kd, vd = self.num_heads, self.key_dim, self.value_dim
        seeds = split_seed(seed, 8)
        shapes = {"query": ((dq, h, kd), (h, kd)), "key": ((dk, h, kd), (h, kd)),
                  "value": ((dv, h, vd), (h, vd)), "output": ((h, vd, out), (out,))}
        params = {}
        for i, (name, (kshape, bshape)) in enumerate(shapes.items()):
            params[name] = {"kernel": self.kernel_initializer(seeds[2 * i], kshape, dtype)}
            if self.use_bias:
                params[name]["bias"] = self.bias_initializer(seeds[2 * i + 1], bshape, dtype)
        return params

    def _project(self, p, x):
        """x [B, T, d] -> [B, T, heads, dim] with kernel [d, heads, dim]."""
        d, h, k = p["kernel"].shape
        y = _linear(x, ops.reshape(p["kernel"], [d, h * k]),
                    None if "bias" not in p else ops.reshape(p["bias"], [h * k]))
        return ops.reshape(y, list(x.shape[:-1]) + [h, k])

    def apply(self, params, query, value, key=None, attention_mask=None,
              use_causal_mask=False, training=False, seed=None,
              return_attention_scores=False):
        query = ops.to_tensor(query)
        value = ops.to_tensor(value)
        key = value if key is None else ops.to_tensor(key)
        if query.ndim != 3 or value.ndim != 3:
            raise ValueError(f"MultiHeadAttention: query and value must be [batch, time, "
                             f"dim], got {query.aval_text()} and {value.aval_text()}")
        q = self._project(params["query"], query) * (1.0 / math.sqrt(self.key_dim))
        k = self._project(params["key"], key)
        v = self._project(params["value"], value)
        # [B, H, Tq, Tk]: each head's query rows against its key rows
        scores = ops.einsum("bqhd,bkhd->bhqk", q, k)
        mask = self._mask(attention_mask, use_causal_mask, query.shape[1], key.shape[1])
        if mask is not None:
            # masked logits get Keras's large negative number, so a fully masked row
            # becomes uniform instead of NaN
            scores = ops.where(mask, scores, -1e9)
        probs = ops.softmax(scores, -1)
        if training and self.dropout > 0:
            if seed is None:
                raise ValueError("MultiHeadAttention: training with dropout needs seed=")
            probs = dropout(probs, self.dropout, seed=seed)
        heads = ops.einsum("bhqk,bkhd->bqhd", probs, v)            # [B, Tq, H, Dv]
        h, vd, out = params["output"]["kernel"].shape
        b_, tq = query.shape[0], query.shape[1]
        flat = ops.reshape(heads, [b_, tq, h * vd])
        y = _linear(flat, ops.reshape(params["output"]["kernel"], [h * vd, out]),
                    params["output"].get("bias"))
        return (y, probs) if return_attention_scores else y

    @staticmethod
    def _mask(attention_mask, causal, tq, tk):
        """A bool mask broadcastable to [B, H, Tq, Tk] (True: attend), or None."""
        mask = None
        if attention_mask is not None:
            m = ops.cast(attention_mask, "bool")
            if m.ndim == 3:                              # Keras's [B, Tq, Tk]
                m = ops.expand_dims(m, 1)
            mask = m
        if causal:
            # query i sees keys j <= i (aligned at the end when Tq != Tk, as Keras)
            rows = np.arange(tq)[:, None] + (tk - tq)
            causal_mask = ops.constant(rows >= np.arange(tk)[None, :])
            mask = causal_mask if mask is None else ops.logical_and(mask, causal_mask)
        return mask


class Conv2D:
    """keras.layers.Conv2D on NHWC inputs, kernel [kh, kw, in, filters]."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 dilation_rate=(1, 1), activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros"):
        self.filters = _positive_int("Conv2D", "filters", filters)
        self.kernel_size = _pair("Conv2D", "kernel_size", kernel_size)
        self.strides = _pair("Conv2D", "strides", strides)
        self.dilation_rate = _pair("Conv2D", "dilation_rate", dilation_rate)
        if str(padding).lower() not in ("valid", "same"):
            raise ValueError(f"Conv2D: padding must be 'valid' or 'same', got {padding!r}")
        self.padding = str(padding).lower()
        self.activation = activation
        self._act = _activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _initializer(kernel_initializer)
        self.bias_initializer = _initializer(bias_initializer)

    def init(self, seed, input_shape, dtype="float32") -> dict:
        c = _last_dim("Conv2D", input_shape)
        return _kernel_and_bias(self, seed, self.kernel_size + (c, self.filters), dtype)

    def apply(self, params, x):
        y = ops.conv2d(x, params["kernel"], list(self.strides), self.padding.upper(),
                       "NHWC", list(self.dilation_rate))
        if self.use_bias:
            y = ops.bias_add(y, params["bias"])
        return self._act(y)


def _pair(owner, name, value) -> tuple[int, int]:
    if isinstance(value, numbers.Integral):
        value = (value, value)
    value = tuple(value)
    if len(value) != 2 or not all(isinstance(v, numbers.Integral) and v >= 1 for v in value):
        raise ValueError(f"{owner}: {name} must be a positive int or a pair, got {value!r}")
    return tuple(int(v) for v in value)


class BatchNormalization:
    """keras.layers.BatchNormalization with the moving statistics as explicit state."""

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True):
        self.axis = int(axis)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)

    def init(self, seed, input_shape, dtype="float32"):
        """(params {gamma, beta}, state {moving_mean, moving_variance})."""
        shape = tuple(input_shape)
        c = shape[self.axis]
        if c is None:
            raise ValueError(f"BatchNormalization: the channel dim of {shape} must be known")
        params = {}
        if self.scale:
            params["gamma"] = np.ones((c,), dtype)
        if self.center:
            params["beta"] = np.zeros((c,), dtype)
        state = {"moving_mean": np.zeros((c,), dtype), "moving_variance": np.ones((c,), dtype)}
        return params, state

    def apply(self, params, state, x, training=False):
        """(y, new state); the state is unchanged in inference."""
        x = ops.to_tensor(x)
        axis = self.axis % x.ndim
        reduce_axes = [d for d in range(x.ndim) if d != axis]
        bshape = [x.shape[d] if d == axis else 1 for d in range(x.ndim)]
        if training:
            mean = ops.reduce_mean(x, reduce_axes)
            var = ops.reduce_mean(ops.square(x - ops.reshape(mean, bshape)), reduce_axes)
            m = self.momentum
            new_state = {"moving_mean": state["moving_mean"] * m + mean * (1 - m),
                         "moving_variance": state["moving_variance"] * m + var * (1 - m)}
        else:
            mean, var = state["moving_mean"], state["moving_variance"]
            new_state = state
        inv = ops.rsqrt(ops.reshape(var, bshape) + self.epsilon)
        y = (x - ops.reshape(mean, bshape)) * inv
        if self.scale:
            y = y * ops.reshape(params["gamma"], bshape)
        if self.center:
            y = y + ops.reshape(params["beta"], bshape)
        return y, new_state
