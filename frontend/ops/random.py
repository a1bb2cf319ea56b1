"""Random numbers as TensorFlow's stateless ops do them: `tf.random.stateless_*`,
`tf.random.Generator` with its state made explicit, and `tf.nn.dropout`.

    @jit_compile
    def noisy(x, seed):                         # seed: int32/int64/uint32 [2]
        return x + ops.random.stateless_normal(x.shape, seed, stddev=0.1)

The values are a pure function of the seed and the shape: the same seed gives the
same numbers in every call, in every compiled program, on any thread count.

The seed. TensorFlow's `seed=[a, b]` (a shape-[2] integer tensor, numpy array or
pair of Python ints) becomes the key (a mod 2^32, b mod 2^32) of the bit
generator; a single Python int s (dropout, `Generator.from_seed`) becomes
(s >> 32, s mod 2^32), JAX's key of s.

The algorithm (`alg=`, TensorFlow's names and enum values):
  "philox"      (1)  Philox-4x32-10
  "threefry"    (2)  Threefry-2x32-20
  "auto_select" (3)  Philox, the generator TensorFlow picks on CPU
The bits are JAX's (`jax.random.*` with `jax.random.wrap_key_data(key,
impl="philox4x32" | "threefry2x32")`): uniform floats are bit-identical to
`jax.random.uniform`, normals and truncated normals agree with JAX to a few ulps
(the same inverse-CDF method through erfinv). They are not TensorFlow's bits
(TensorFlow scrambles the seed into its key and counter with its own function,
and makes normals with Box-Muller); see frontend/kernels/random.py for the exact
layout. Integer uniforms follow TensorFlow's rule, minval + bits mod (maxval -
minval).

Generator: TensorFlow's `tf.random.Generator` keeps its state in a variable that
each draw updates. Here the state is an explicit u32[2] array and every draw
returns the new generator with its result:

    gen = ops.random.Generator.from_seed(42)          # a pytree: pass it to jit
    @jit_compile
    def step(gen, x):
        noise, gen = gen.normal(x.shape)
        return x + noise, gen                         # carry gen to the next call

A draw splits the state into (next state, key of this draw), as `jax.random.split`
does, so draw i of a generator equals JAX's `split` chain.
"""
from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .core import apply, cast, to_float, to_tensor, user_error

# TensorFlow's tf.random.Algorithm values
_ALG_NAMES = {"philox": "philox", "threefry": "threefry", "auto_select": "philox",
              1: "philox", 2: "threefry", 3: "philox"}
_INT_TYPES = tuple(np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64))


def algorithm(alg) -> str:
    """"philox" or "threefry" from a TF algorithm name, enum value or Algorithm object."""
    key = getattr(alg, "name", alg)
    if isinstance(key, str):
        key = key.lower()
    elif isinstance(key, numbers.Integral):
        key = int(key)
    if key is None:
        key = "auto_select"
    if key not in _ALG_NAMES:
        raise user_error(ValueError, f"unknown random algorithm {alg!r}: use 'philox', "
                                     f"'threefry' or 'auto_select'")
    return _ALG_NAMES[key]


def key_of(seed) -> Tensor:
    """The u32[2] key of a seed: a shape-[2] integer tensor/array/pair, or a Python int."""
    if isinstance(seed, Tensor):
        if seed.shape != (2,) or not dtypes.is_integer(seed.dtype):
            raise user_error(ValueError, f"seed must be an integer tensor of shape [2], "
                                         f"got {seed.aval_text()}")
        return cast(seed, "uint32")
    return to_tensor(key_array(seed))


def key_array(seed) -> np.ndarray:
    """The numpy u32[2] key of a seed given as values (see `key_of`)."""
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        s = int(seed)
        return np.array([(s >> 32) & 0xFFFFFFFF, s & 0xFFFFFFFF], np.uint32)
    array = np.asarray(seed)
    if array.shape != (2,) or array.dtype.kind not in "iu":
        raise user_error(ValueError, f"seed must be a pair of integers (shape [2]), got "
                                     f"{seed!r}")
    return np.array([int(v) & 0xFFFFFFFF for v in array.tolist()], np.uint32)


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, Tensor):
        raise user_error(TypeError, "shape must be known at trace time (a list of ints), "
                                    f"got a traced {shape.aval_text()}")
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        dims = tuple(int(d) for d in np.asarray(shape, dtype=np.int64).reshape(-1))
    except (TypeError, ValueError):
        raise user_error(TypeError, f"shape must be a list of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise user_error(ValueError, f"shape {list(dims)} has a negative dimension")
    return dims


def _float_type(dtype, what: str) -> np.dtype:
    dt = dtypes.canonical(dtype)
    if dtypes.kind(dt) != "float":          # bfloat16 included (numpy kind "V")
        raise user_error(TypeError, f"{what}: dtype must be a floating type, got {dt.name}")
    return dt


def _is_static_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.ndim(v) == 0 \
        and not isinstance(v, Tensor)


def stateless_uniform(shape, seed, minval=0, maxval=None, dtype="float32", name=None,
                      alg="auto_select"):
    """Uniform values in [minval, maxval) (tf.random.stateless_uniform).

    Floats: maxval defaults to 1. Integers (int32, int64, uint32, uint64): maxval is
    required, the values are minval + bits mod (maxval - minval) as in TensorFlow;
    minval=None and maxval=None give every value of the type (full-range bits).
    """
    dims, key, a = _shape(shape), key_of(seed), algorithm(alg)
    dt = dtypes.canonical(dtype)
    if dt in _INT_TYPES:
        if minval is None and maxval is None:
            bits = apply("StatelessRandomBits", [key], shape=dims, alg=a,
                         width=dt.itemsize * 8)
            return cast(bits, dt)
        if minval is None or maxval is None:
            raise user_error(ValueError, f"stateless_uniform: dtype {dt.name} needs maxval "
                                         f"(and minval), or neither for full-range integers")
        return apply("StatelessRandomUniformInt",
                     [key, to_tensor(minval, dt), to_tensor(maxval, dt)], shape=dims, alg=a)
    if dtypes.is_integer(dt):
        raise user_error(TypeError, f"stateless_uniform: integer dtype must be int32, int64, "
                                    f"uint32 or uint64, got {dt.name}")
    dt = _float_type(dt, "stateless_uniform")
    maxval = 1.0 if maxval is None else maxval
    if _is_static_number(minval) and _is_static_number(maxval):
        return apply("StatelessRandomUniform", [key], shape=dims, alg=a,
                     dtype=dtypes.hlo_name(dt), minval=float(minval), maxval=float(maxval))
    # traced bounds: u * (maxval - minval) + minval, as TensorFlow
    u = apply("StatelessRandomUniform", [key], shape=dims, alg=a, dtype=dtypes.hlo_name(dt))
    lo, hi = to_tensor(minval, dt), to_tensor(maxval, dt)
    return u * (hi - lo) + lo


def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype="float32", name=None,
                     alg="auto_select"):
    """Normal values: mean + stddev * N(0, 1) (tf.random.stateless_normal)."""
    dt = _float_type(dtype, "stateless_normal")
    z = apply("StatelessRandomNormal", [key_of(seed)], shape=_shape(shape),
              alg=algorithm(alg), dtype=dtypes.hlo_name(dt))
    return _affine(z, mean, stddev, dt)


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype="float32",
                               name=None, alg="auto_select"):
    """Normal values cut at two standard deviations: mean + stddev * z, |z| < 2
    (tf.random.stateless_truncated_normal)."""
    dt = _float_type(dtype, "stateless_truncated_normal")
    z = apply("StatelessTruncatedNormal", [key_of(seed)], shape=_shape(shape),
              alg=algorithm(alg), dtype=dtypes.hlo_name(dt))
    return _affine(z, mean, stddev, dt)


def _affine(z, mean, stddev, dt):
    if not (_is_static_number(stddev) and float(stddev) == 1.0):
        z = z * to_tensor(stddev, dt)
    if not (_is_static_number(mean) and float(mean) == 0.0):
        z = z + to_tensor(mean, dt)
    return z


def stateless_categorical(logits, num_samples, seed, dtype="int64", name=None,
                          alg="auto_select"):
    """[batch, num_samples] class indices drawn from the unnormalized log-probabilities
    `logits` [batch, num_classes] (tf.random.stateless_categorical), by the Gumbel-max
    trick: argmax(logits + g) with g = -log(-log(u)), u uniform in [tiny, 1).
    (`alg` is ours; TensorFlow's function has none and uses auto_select.)"""
    from .math import argmax, log
    logits = to_float(logits)
    if logits.ndim != 2:
        raise user_error(ValueError, f"stateless_categorical: logits must be "
                                     f"[batch_size, num_classes], got {logits.aval_text()}")
    if isinstance(num_samples, Tensor) or not isinstance(num_samples, numbers.Integral) \
            or num_samples < 0:
        raise user_error(TypeError, f"stateless_categorical: num_samples must be a "
                                    f"non-negative Python int, got {num_samples!r}")
    out_type = dtypes.canonical(dtype)
    if out_type not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise user_error(TypeError, f"stateless_categorical: dtype must be int32 or int64, "
                                    f"got {out_type.name}")
    batch, classes = logits.shape
    dt = logits.dtype
    tiny = float(ml_dtypes.finfo(dt).tiny)     # numpy's finfo lacks bfloat16
    u = apply("StatelessRandomUniform", [key_of(seed)], shape=(batch, int(num_samples), classes),
              alg=algorithm(alg), dtype=dtypes.hlo_name(dt), minval=tiny, maxval=1.0)
    gumbel = -log(-log(u))
    from .array import expand_dims
    scores = expand_dims(logits, 1) + gumbel
    return argmax(scores, -1, out_type.name)


def dropout(x, rate, noise_shape=None, seed=None, name=None, alg="auto_select"):
    """tf.nn.dropout: each element (or each slice, with noise_shape) is kept with
    probability 1 - rate and scaled by 1 / (1 - rate), else set to 0.

    `seed` is required: a [2] seed or a Python int, as the stateless ops take (there
    is no hidden global generator). `noise_shape` broadcasts to x's shape; None
    entries take x's size. rate must be in [0, 1).
    """
    x = to_float(x)
    if seed is None:
        raise user_error(ValueError, "dropout: pass seed= (a [2] seed or an int): xlapy "
                                     "has no global random state")
    if _is_static_number(rate):
        if not 0 <= float(rate) < 1:
            raise user_error(ValueError, f"dropout: rate must be in [0, 1), got {rate!r}")
        if float(rate) == 0:
            return x
    if noise_shape is None:
        dims = x.shape
    else:
        given = list(noise_shape)
        if len(given) != x.ndim:
            raise user_error(ValueError, f"dropout: noise_shape {given} must have x's rank "
                                         f"{x.ndim}")
        dims = tuple(x.shape[i] if d is None else int(d) for i, d in enumerate(given))
        if any(d not in (1, n) for d, n in zip(dims, x.shape)):
            raise user_error(ValueError, f"dropout: noise_shape {list(dims)} does not "
                                         f"broadcast to {list(x.shape)}")
    from .math import greater_equal, where
    u = apply("StatelessRandomUniform", [key_of(seed)], shape=tuple(dims),
              alg=algorithm(alg), dtype=dtypes.hlo_name(x.dtype))
    rate_t = to_tensor(rate, x.dtype)
    keep = greater_equal(u, rate_t)
    scaled = x * (1.0 / (1.0 - rate_t))
    return where(keep, scaled, 0.0 * scaled)


experimental_stateless_dropout = dropout


def split_key(key, num: int, alg="auto_select") -> Tensor:
    """u32[num, 2]: `num` keys made from `key` (JAX's split)."""
    return apply("StatelessRandomSplit", [key_of(key)], num=int(num), alg=algorithm(alg))


class Generator(NamedTuple):
    """tf.random.Generator with an explicit state: a pytree holding one u32[2] array.

    Philox by default (auto_select); `Generator.from_seed(s, alg="threefry")` gives a
    ThreefryGenerator. Every draw returns (values, new generator); see the module
    docstring. Draws must run inside a traced function (jit_compile).
    """
    state: Any

    alg = "philox"

    @classmethod
    def from_seed(cls, seed, alg=None) -> "Generator":
        return _generator_class(alg)(key_array(seed))

    @classmethod
    def from_state(cls, state, alg=None) -> "Generator":
        return _generator_class(alg)(state)

    from_key = from_state

    def _next(self):
        keys = split_key(self.state, 2, self.alg)
        from .array import reshape, slice as slice_
        new = reshape(slice_(keys, [0, 0], [1, 2]), [2])
        sub = reshape(slice_(keys, [1, 0], [1, 2]), [2])
        return type(self)(new), sub

    def uniform(self, shape, minval=0, maxval=None, dtype="float32", name=None):
        gen, sub = self._next()
        return stateless_uniform(shape, sub, minval, maxval, dtype, alg=self.alg), gen

    def uniform_full_int(self, shape, dtype="uint64", name=None):
        gen, sub = self._next()
        return stateless_uniform(shape, sub, None, None, dtype, alg=self.alg), gen

    def normal(self, shape, mean=0.0, stddev=1.0, dtype="float32", name=None):
        gen, sub = self._next()
        return stateless_normal(shape, sub, mean, stddev, dtype, alg=self.alg), gen

    def truncated_normal(self, shape, mean=0.0, stddev=1.0, dtype="float32", name=None):
        gen, sub = self._next()
        return stateless_truncated_normal(shape, sub, mean, stddev, dtype, alg=self.alg), gen

    def make_seeds(self, count=1):
        """([2, count] int64 seeds for the stateless ops, new generator), as TF's shape."""
        gen, sub = self._next()
        from .array import transpose
        return cast(transpose(split_key(sub, count, self.alg), [1, 0]), "int64"), gen

    def split(self, count=1):
        """(list of `count` independent generators, new generator)."""
        gen, sub = self._next()
        keys = split_key(sub, count, self.alg)
        from .array import reshape, slice as slice_
        children = [type(self)(reshape(slice_(keys, [i, 0], [1, 2]), [2]))
                    for i in range(count)]
        return children, gen


class PhiloxGenerator(Generator):
    __slots__ = ()
    alg = "philox"


class ThreefryGenerator(Generator):
    __slots__ = ()
    alg = "threefry"


def _generator_class(alg):
    return ThreefryGenerator if algorithm(alg) == "threefry" else PhiloxGenerator
