"""Reference semantics of `rng-bit-generator` and `rng`: counter-based generators in numpy.

rng-bit-generator(state) -> (new state, bits) gives XLA's bits exactly. XLA's CPU
backend expands the op (RngBitGeneratorExpander) into the generators of its
client library (prng.cc); this module computes the same functions on whole
arrays:

- THREEFRY (`algorithm=rng_three_fry`): Threefry-2x32 with 20 rounds. The state is
  u64[2] = (key, counter). Element i of the flattened output (or of half of it, for
  32-bit outputs) encrypts the 64-bit counter `counter + i` split into two 32-bit
  words (low, high) under the key split the same way. A 64-bit output takes both
  words of one block (low word first); a 32-bit output takes the two words of a
  block as two neighbours along one dimension (the first even dimension, else the
  largest), so only half as many blocks are used. The counter advances by the
  number of blocks.
- PHILOX (`rng_philox`, and `rng_default`, which XLA's CPU compiler maps to PHILOX):
  Philox-4x32 with 10 rounds on a 128-bit counter. State u64[3] = (key, counter
  low, counter high); for u64[2] = (key, counter), the counter's high half is the
  key and only the low half is stored back. Block i encrypts `counter + i` (128-bit
  addition) and gives four 32-bit words, which fill the flattened output in order
  (two 64-bit values per block for 64-bit outputs). The counter advances by the
  number of blocks.
- 8- and 16-bit outputs are the low bits of the 32-bit output of the same shape
  (as XLA does); signed outputs carry the same bits.

`rng(a, b), distribution=...` has no bit-exact counterpart in XLA (its expander
seeds from a process-wide counter, so XLA's numbers change from run to run and
compile to compile). Here it is deterministic given the module, a documented
generator: Philox-4x32 keyed by the first 8 bytes of SHA-256 of the
instruction's name, counter 0, every execution giving the same numbers:

- rng_uniform on floats: 32 random bits per element (64 for f64); the top 24
  (53) bits make u in [0, 1) exactly, computed in f32 (f64), then `a + u * (b - a)`
  rounded to the result type (f16 and bf16 from f32, so b itself may appear);
- rng_uniform on integers: XLA's mapping `a + (d >> 1) + (d - (d >> 1))` with
  `d = bits mod (b - a)` (unsigned arithmetic): uniform in [a, b); a when b <= a;
- rng_normal(mu, sigma): Box-Muller on consecutive pairs of uniforms (u1, u2):
  `r = sqrt(-2 log max(u1, 1e-7))`, the pair `(r sin 2 pi u2, r cos 2 pi u2)` fills
  two neighbouring elements of the flattened output; `mu + sigma * z`.
"""
from __future__ import annotations

import hashlib

import numpy as np

from .eval_common import EvaluationError, np_dtype_of, round_to_bf16
from .opcodes import reference

_U32 = np.uint32
_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)


def _split64(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(_U64)
    return (x & _MASK32).astype(_U32), (x >> _U64(32)).astype(_U32)


def _join64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(_U64) | (hi.astype(_U64) << _U64(32))


def _rotl(v: np.ndarray, r: int) -> np.ndarray:
    return (v << _U32(r)) | (v >> _U32(32 - r))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0: int, k1: int):
    """Threefry-2x32, 20 rounds: the two words of every counter block (uint32 arrays)."""
    rotations = (13, 15, 26, 6, 17, 29, 16, 24)
    ks = (_U32(k0), _U32(k1), _U32(0x1BD11BDA ^ k0 ^ k1))
    with np.errstate(over="ignore"):
        x0 = x0 + ks[0]
        x1 = x1 + ks[1]
        for block in range(5):
            for r in rotations[4 * (block % 2):4 * (block % 2) + 4]:
                x0 = x0 + x1
                x1 = _rotl(x1, r) ^ x0
            # Key injection after every four rounds, with the block number.
            x0 = x0 + ks[(block + 1) % 3]
            x1 = x1 + ks[(block + 2) % 3] + _U32(block + 1)
    return x0, x1


def philox4x32(words: list, k0: int, k1: int) -> list:
    """Philox-4x32, 10 rounds, on four uint32 arrays (one counter block per element)."""
    m_a, m_b = _U64(0xD2511F53), _U64(0xCD9E8D57)
    x = list(words)
    key = [k0, k1]
    for _ in range(10):
        p0 = x[0].astype(_U64) * m_a
        p1 = x[2].astype(_U64) * m_b
        hi0, lo0 = (p0 >> _U64(32)).astype(_U32), (p0 & _MASK32).astype(_U32)
        hi1, lo1 = (p1 >> _U64(32)).astype(_U32), (p1 & _MASK32).astype(_U32)
        x = [hi1 ^ x[1] ^ _U32(key[0]), lo1, hi0 ^ x[3] ^ _U32(key[1]), lo0]
        key = [(key[0] + 0x9E3779B9) & 0xFFFFFFFF, (key[1] + 0xBB67AE85) & 0xFFFFFFFF]
    return x


# --- THREEFRY -------------------------------------------------------------------------

def _split_dim(dims: tuple) -> int:
    """The dimension a 32-bit Threefry output pairs its words along (XLA's choice)."""
    for d, n in enumerate(dims):
        if n % 2 == 0:
            return d
    return max(range(len(dims)), key=lambda d: (dims[d], -d))


def threefry_bits(key: int, counter: int, dims: tuple, bits: int) -> tuple[np.ndarray, int]:
    """(bits of shape `dims` as uint32 or uint64, the new counter)."""
    k0, k1 = key & 0xFFFFFFFF, key >> 32
    if bits == 64:
        n = int(np.prod(dims, dtype=np.int64))
        with np.errstate(over="ignore"):
            ctr = _U64(counter) + np.arange(n, dtype=_U64)
        x0, x1 = threefry2x32(*_split64(ctr), k0, k1)
        return _join64(x0, x1).reshape(dims), (counter + n) & 0xFFFFFFFFFFFFFFFF
    if not dims:
        half, split = (1,), 0
    else:
        split = _split_dim(dims)
        half = dims[:split] + ((dims[split] + 1) // 2,) + dims[split + 1:]
    n = int(np.prod(half, dtype=np.int64))
    with np.errstate(over="ignore"):
        ctr = _U64(counter) + np.arange(n, dtype=_U64)
    x0, x1 = threefry2x32(*_split64(ctr), k0, k1)
    new_counter = (counter + n) & 0xFFFFFFFFFFFFFFFF
    if not dims:
        return x0.reshape(()), new_counter
    # The two words of a block are neighbours along the split dimension.
    paired = np.stack([x0.reshape(half), x1.reshape(half)], axis=split + 1)
    full = paired.reshape(dims[:split] + (2 * half[split],) + dims[split + 1:])
    return full[(slice(None),) * split + (slice(0, dims[split]),)], new_counter


# --- PHILOX ---------------------------------------------------------------------------

def philox_bits(key: int, counter: tuple[int, int], dims: tuple, bits: int
                ) -> tuple[np.ndarray, tuple[int, int]]:
    """(bits of shape `dims`, the new 128-bit counter as (low, high))."""
    n = int(np.prod(dims, dtype=np.int64))
    words_needed = n * (2 if bits == 64 else 1)
    blocks = -(-words_needed // 4)
    low, high = counter
    with np.errstate(over="ignore"):
        lows = _U64(low) + np.arange(blocks, dtype=_U64)
    carry = lows < _U64(low)
    highs = np.where(carry, _U64((high + 1) & 0xFFFFFFFFFFFFFFFF), _U64(high))
    words = [*_split64(lows), *_split64(highs)]
    out = philox4x32(words, key & 0xFFFFFFFF, key >> 32)
    new_low = (low + blocks) & 0xFFFFFFFFFFFFFFFF
    new_counter = (new_low, (high + (new_low < low)) & 0xFFFFFFFFFFFFFFFF)
    if bits == 64:
        pairs = np.stack([_join64(out[0], out[1]), _join64(out[2], out[3])], axis=1)
        return pairs.reshape(-1)[:n].reshape(dims), new_counter
    return np.stack(out, axis=1).reshape(-1)[:n].reshape(dims), new_counter


# --- the ops ----------------------------------------------------------------------------

ALGORITHMS = {"rng_default": "philox", "rng_philox": "philox", "rng_three_fry": "threefry"}


def rng_bit_generator(algorithm: str, state: np.ndarray, dims: tuple, out_dtype: np.dtype
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(new state, bits): XLA's rng-bit-generator (see the module docstring)."""
    which = ALGORITHMS.get(algorithm)
    if which is None:
        raise ValueError(f"unknown algorithm {algorithm!r}")
    out_dtype = np.dtype(out_dtype)
    if out_dtype.kind not in "iu" or out_dtype.itemsize not in (1, 2, 4, 8):
        raise ValueError(f"rng-bit-generator produces integers of 8 to 64 bits, not {out_dtype}")
    state = np.asarray(state)
    if state.dtype != np.uint64 or state.ndim != 1:
        raise ValueError(f"the state must be a u64 vector, got {state.dtype}{list(state.shape)}")
    bits = 64 if out_dtype.itemsize == 8 else 32
    s = [int(v) for v in state]
    if which == "threefry":
        if len(s) != 2:
            raise ValueError(f"THREEFRY takes a u64[2] state, got u64[{len(s)}]")
        values, counter = threefry_bits(s[0], s[1], tuple(dims), bits)
        new_state = [s[0], counter]
    else:
        if len(s) not in (2, 3):
            raise ValueError(f"PHILOX takes a u64[2] or u64[3] state, got u64[{len(s)}]")
        counter = (s[1], s[2]) if len(s) == 3 else (s[1], s[0])
        values, (low, high) = philox_bits(s[0], counter, tuple(dims), bits)
        new_state = [s[0], low, high] if len(s) == 3 else [s[0], low]
    unsigned = np.dtype(f"u{out_dtype.itemsize}")
    values = values.astype(unsigned).view(out_dtype)       # narrower: the low bits
    return np.array(new_state, np.uint64), values


def rng_key(name: str) -> int:
    """The Philox key of an `rng` instruction: 8 bytes of SHA-256 of its name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def _uniform01(key: int, n: int, wide: bool) -> np.ndarray:
    """n floats in [0, 1): f64 from 53 of 64 bits if `wide`, else f32 from 24 of 32."""
    bits, _ = philox_bits(key, (0, 0), (n,), 64 if wide else 32)
    if wide:
        return (bits >> _U64(11)).astype(np.float64) * np.float64(2.0 ** -53)
    return (bits >> _U32(8)).astype(np.float32) * np.float32(2.0 ** -24)


def rng(distribution: str, a: np.ndarray, b: np.ndarray, dims: tuple, element_type: str,
        out_dtype: np.dtype, key: int) -> np.ndarray:
    """The documented `rng` generator (module docstring)."""
    n = int(np.prod(dims, dtype=np.int64))
    out_dtype = np.dtype(out_dtype)
    if out_dtype.kind in "iu":
        if distribution != "rng_uniform":
            raise ValueError(f"{distribution} needs a floating-point result")
        unsigned = np.dtype(f"u{out_dtype.itemsize}")
        bits, _ = philox_bits(key, (0, 0), (n,), 64 if out_dtype.itemsize == 8 else 32)
        lo, hi = np.asarray(a).astype(out_dtype), np.asarray(b).astype(out_dtype)
        span = (hi.astype(unsigned) - lo.astype(unsigned)) if hi > lo else unsigned.type(0)
        if span == 0:
            return np.full(dims, lo, out_dtype)
        with np.errstate(over="ignore"):
            d = bits.astype(unsigned) % span
            half = d >> unsigned.type(1)
            value = (lo.astype(unsigned) + half + (d - half)).view(out_dtype)
        return value.reshape(dims)
    if out_dtype.kind != "f":
        raise ValueError(f"rng cannot produce {element_type}")
    wide = element_type == "f64"
    calc = np.float64 if wide else np.float32
    a, b = np.asarray(a).astype(calc), np.asarray(b).astype(calc)
    with np.errstate(all="ignore"):
        if distribution == "rng_uniform":
            value = a + _uniform01(key, n, wide) * (b - a)
        elif distribution == "rng_normal":
            pairs = -(-n // 2)
            u = _uniform01(key, 2 * pairs, wide)
            r = np.sqrt(calc(-2) * np.log(np.maximum(u[0::2], calc(1e-7))))
            theta = calc(2 * np.pi) * u[1::2]
            z = np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1).reshape(-1)[:n]
            value = a + b * z
        else:
            raise ValueError(f"unknown distribution {distribution!r}")
    value = value.reshape(dims).astype(out_dtype)
    if element_type == "bf16":
        value = round_to_bf16(value)
    return value


@reference("rng-bit-generator")
def rng_bit_generator_ref(instr, operands, ctx):
    bits_shape = instr.shape.tuple_shapes[1]
    try:
        state, values = rng_bit_generator(instr.attrs.get("algorithm", "rng_default"),
                                          operands[0], bits_shape.dims, np_dtype_of_shape(bits_shape))
    except ValueError as e:
        raise EvaluationError(f"{instr.name}: rng-bit-generator: {e}") from None
    return (state, values)


def np_dtype_of_shape(shape) -> np.dtype:
    d = shape.dtype.numpy
    if d is None:
        raise EvaluationError(f"element type {shape.element_type} has no numpy form")
    return d


@reference("rng")
def rng_ref(instr, operands, ctx):
    try:
        return rng(instr.attrs.get("distribution", "rng_uniform"), operands[0], operands[1],
                   instr.shape.dims, instr.shape.element_type, np_dtype_of(instr),
                   rng_key(instr.name))
    except ValueError as e:
        raise EvaluationError(f"{instr.name}: rng: {e}") from None
