"""Stateless random-number kernels: counter-based bit generators written as HLO integer ops.

Every kernel takes a key, a `u32[2]` array, and static attributes (the output
shape, the algorithm, the dtype), and computes its output as a pure function of
the key and of each element's position: the same key gives the same values in
every call, on every thread count and in every compiled program (a fused,
partitioned or vectorized kernel computes each element on its own).

Two generators, both built from the HLO integer opcodes the backend computes
today (add, multiply, xor, shifts, convert):

  threefry  Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random
            numbers: as easy as 1, 2, 3"). Element i of a draw hashes the
            64-bit counter i, split as (hi, lo) = (i >> 32, i & 0xffffffff),
            under the key; its 32 bits are the xor of the two output words.
  philox    Philox-4x32 with 10 rounds (same paper); the counter words are
            (hi, lo, 0, 0) and the 32 bits are the xor of the four outputs.
            The 32x32->64 multiply-high is a u64 multiply.

These are exactly the bits of `jax.random.bits` for a key made with
`jax.random.wrap_key_data(key, impl="threefry2x32" | "philox4x32")` with
`jax_threefry_partitionable` on (JAX's default), and the float conversions
below are JAX's, so tests check the values against JAX bit for bit (uniform)
or to a few ulps (normal, which goes through erfinv). TensorFlow's own stateless
ops derive their key and counter from the seed by a different scramble, so the
values are not TensorFlow's; the distributions, the reproducibility and the
signatures are.

A 64-bit draw (float64) concatenates the two Threefry words (hi << 32 | lo) or
the first two Philox words. A 16-bit draw keeps the low 16 bits of the 32-bit
value and an 8-bit draw (bfloat16, 7 mantissa bits) the low 8.

HLO also has `rng-bit-generator` (Philox or Threefry over an explicit state);
once the CPU backend computes it, `StatelessRandomBits` may lower to it instead:
these kernels would then give XLA's bit layout rather than JAX's.

Kernels:
  StatelessRandomBits(key)            u{8,16,32,64}[shape]
  StatelessRandomUniform(key)         float in [0, 1)  (mantissa bits under exponent 0)
  StatelessRandomNormal(key)          sqrt(2) * erfinv(u), u uniform in (-1, 1)
  StatelessTruncatedNormal(key)       the same with u in (erf(-sqrt 2), erf(sqrt 2)),
                                      clamped inside (-2, 2)
  StatelessRandomUniformInt(key, lo, hi)  lo + bits mod (hi - lo), TensorFlow's rule
  StatelessRandomSplit(key)           u32[num, 2]: `num` new keys (JAX's split)
"""
from __future__ import annotations

import math

import numpy as np

from ...hlo import Shape
from ..registry import XlaOpKernel, register_xla_op
from .common import is_integer

ALGORITHMS = ("threefry", "philox")

_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_THREEFRY_PARITY = 0x1BD11BDA
_PHILOX_M0, _PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
_PHILOX_W0, _PHILOX_W1 = 0x9E3779B9, 0xBB67AE85

# Bits drawn per float type (JAX's choice: the float's width, at least 8 bits past
# the mantissa), the unsigned type of the float's width and its mantissa size.
_FLOAT_BITS = {"f16": (16, "u16", 10), "bf16": (8, "u16", 7), "f32": (32, "u32", 23),
               "f64": (64, "u64", 52)}


class _Ints:
    """Elementwise unsigned-integer arithmetic on arrays of one shape (constants broadcast)."""

    def __init__(self, b, dims):
        self.b, self.dims = b, tuple(dims)

    def const(self, value, etype="u32"):
        return self.b.broadcast(self.b.constant(value, etype), self.dims)

    def add(self, x, y):
        return self.b.add(x, y)

    def xor(self, x, y):
        return self.b.xor(x, y)

    def rotl(self, x, r):
        """x rotated left by r (a u32 array of x's shape, 0 < r < 32)."""
        return self.b.or_(self.b.shift_left(x, r),
                          self.b.shift_right_logical(x, self.b.subtract(self.const(32), r)))

    def mul_hi_lo(self, m: int, x):
        """(hi, lo) 32-bit halves of the 64-bit product m * x."""
        b = self.b
        wide = b.multiply(b.convert(x, "u64"), self.const(m, "u64"))
        hi = b.convert(b.shift_right_logical(wide, self.const(32, "u64")), "u32")
        return hi, b.convert(wide, "u32")


def _counted_loop(b, name: str, trips: int, values, body_fn):
    """`values` after `trips` runs of body_fn(builder, i, values) -> values, as an HLO
    while loop (i is the s32 trip number). The rounds of a generator are a loop, as
    JAX lowers them: unrolled, one draw is a fused kernel of ~1000 integer ops, which
    the fusion pass merges in time quadratic in its size (tens of seconds per draw)."""
    shapes = [Shape.scalar("s32")] + [v.shape for v in values]
    state_shape = Shape.tuple_of(shapes)

    cond_b = b.sub_builder(f"{name}_cond")
    state = cond_b.parameter(state_shape, "state")
    i = cond_b.get_tuple_element(state, 0)
    cond = cond_b.build(cond_b.compare(i, cond_b.constant(trips, "s32"), "LT"))

    body_b = b.sub_builder(f"{name}_body")
    state = body_b.parameter(state_shape, "state")
    parts = [body_b.get_tuple_element(state, k) for k in range(len(shapes))]
    out = body_fn(body_b, parts[0], parts[1:])
    step = body_b.add(parts[0], body_b.constant(1, "s32"))
    body = body_b.build(body_b.tuple([step] + list(out)))

    result = b.while_(cond, body, b.tuple([b.constant(0, "s32")] + list(values)))
    return [b.get_tuple_element(result, k) for k in range(1, len(shapes))]


def threefry2x32(b, k0, k1, x0, x1):
    """Threefry-2x32-20 of the counters (x0, x1) (u32 arrays of one shape) under the key
    (k0, k1) (u32 scalars): two u32 arrays. Five groups of four rounds, one loop trip
    each; the key schedule ks rotates by one word per group."""
    dims = tuple(x0.shape.dims)
    ks = [k0, k1, b.xor(b.xor(k0, k1), b.constant(_THREEFRY_PARITY, "u32"))]
    x0 = b.add(x0, b.broadcast(ks[0], dims))
    x1 = b.add(x1, b.broadcast(ks[1], dims))

    def group(sb, i, values):
        x0, x1, ka, kb, kc = values
        c = _Ints(sb, dims)
        even = sb.compare(sb.remainder(i, sb.constant(2, "s32")), sb.constant(0, "s32"), "EQ")
        for r_even, r_odd in zip(*_THREEFRY_ROTATIONS):
            r = sb.broadcast(sb.select(even, sb.constant(r_even, "u32"),
                                       sb.constant(r_odd, "u32")), dims)
            x0 = sb.add(x0, x1)
            x1 = sb.xor(x0, c.rotl(x1, r))
        # key injection: ks[g+1], ks[g+2] + g + 1 (ka, kb, kc hold ks[g+1], ks[g+2], ks[g])
        trip = sb.convert(sb.add(i, sb.constant(1, "s32")), "u32")
        x0 = sb.add(x0, sb.broadcast(ka, dims))
        x1 = sb.add(x1, sb.broadcast(sb.add(kb, trip), dims))
        return [x0, x1, kb, kc, ka]

    x0, x1, *_ = _counted_loop(b, "threefry", 5, [x0, x1, ks[1], ks[2], ks[0]], group)
    return [x0, x1]


def philox4x32(b, k0, k1, x0, x1, x2, x3):
    """Philox-4x32-10 of the counter (x0..x3) (u32 arrays of one shape) under the key
    (k0, k1) (u32 scalars): four u32 arrays. One round per loop trip."""
    dims = tuple(x0.shape.dims)

    def round_(sb, i, values):
        x0, x1, x2, x3, k0, k1 = values
        c = _Ints(sb, dims)
        hi0, lo0 = c.mul_hi_lo(_PHILOX_M0, x0)
        hi1, lo1 = c.mul_hi_lo(_PHILOX_M1, x2)
        x0, x1, x2, x3 = (sb.xor(sb.xor(hi1, x1), sb.broadcast(k0, dims)), lo1,
                          sb.xor(sb.xor(hi0, x3), sb.broadcast(k1, dims)), lo0)
        # the key advances by the Weyl constants between rounds
        return [x0, x1, x2, x3, sb.add(k0, sb.constant(_PHILOX_W0, "u32")),
                sb.add(k1, sb.constant(_PHILOX_W1, "u32"))]

    return _counted_loop(b, "philox", 10, [x0, x1, x2, x3, k0, k1], round_)[:4]


def _key_words(b, key):
    """The key's two u32 words (scalars)."""
    if tuple(key.shape.dims) != (2,) or key.shape.element_type != "u32":
        raise TypeError(f"a random key must be u32[2], got {key.shape.element_type}"
                        f"{list(key.shape.dims)}")
    return [b.reshape(b.slice(key, [i], [i + 1]), []) for i in (0, 1)]


def _counters(b, dims):
    """(hi, lo) u32 halves of each element's row-major position in `dims`."""
    n = math.prod(dims)
    if n >= 2 ** 32:
        raise ValueError(f"a random draw of {n} elements is too large (at most 2^32 - 1)")
    ints = _Ints(b, dims)
    lo = b.reshape(b.iota(Shape("u32", (n,)), 0), dims)
    return ints.const(0), lo


def _hash(b, key, dims, alg: str, words: int = 2):
    """The generator's output words for every element of `dims` (threefry: 2, philox: 4)."""
    ints = _Ints(b, dims)
    k0, k1 = _key_words(b, key)
    hi, lo = _counters(b, dims)
    if alg == "threefry":
        return threefry2x32(b, k0, k1, hi, lo)
    if alg == "philox":
        return list(philox4x32(b, k0, k1, hi, lo, ints.const(0), ints.const(0)))
    raise ValueError(f"unknown random algorithm {alg!r}; expected one of {ALGORITHMS}")


def random_bits(b, key, dims, alg: str, width: int):
    """u{width}[dims] of random bits (see the module docstring for the layout)."""
    dims = tuple(dims)
    out = _hash(b, key, dims, alg)
    ints = _Ints(b, dims)
    if width == 64:
        hi, lo = (b.convert(w, "u64") for w in out[:2])
        return b.or_(b.shift_left(hi, ints.const(32, "u64")), lo)
    bits = out[0]
    for w in out[1:]:
        bits = ints.xor(bits, w)
    if width == 32:
        return bits
    if width in (8, 16):
        return b.convert(bits, f"u{width}")       # the low bits (convert wraps)
    raise ValueError(f"random bits come in widths 8, 16, 32 and 64, not {width}")


def unit_uniform(b, key, dims, alg: str, etype: str):
    """Floats in [0, 1) of type `etype`: random mantissa bits under the exponent of 1.0,
    minus 1."""
    if etype not in _FLOAT_BITS:
        raise TypeError(f"random floats are f16, bf16, f32 or f64, not {etype}")
    nbits, utype, nmant = _FLOAT_BITS[etype]
    bits = random_bits(b, key, dims, alg, nbits)
    if bits.shape.element_type != utype:
        bits = b.convert(bits, utype)
    width = int(utype[1:])
    ints = _Ints(b, dims)
    one_bits = np.array(1.0, Shape.scalar(etype).dtype.numpy).view(f"uint{width}")
    mantissa = b.shift_right_logical(bits, ints.const(nbits - nmant, utype))
    floats = b.bitcast_convert(b.or_(mantissa, ints.const(int(one_bits), utype)), etype)
    return b.subtract(floats, ints.const(1.0, etype))


def scaled_uniform(b, key, dims, alg: str, etype: str, lo: float, hi: float):
    """max(lo, u * (hi - lo) + lo) for u uniform in [0, 1) (JAX's uniform)."""
    ints = _Ints(b, dims)
    u = unit_uniform(b, key, dims, alg, etype)
    lo_c, span = ints.const(lo, etype), ints.const(hi - lo, etype)
    return b.maximum(lo_c, b.add(b.multiply(u, span), lo_c))


# --- the inverse error function --------------------------------------------------------

# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single
# precision: erfinv(x) = x * p(w), w = -log(1 - x^2), one polynomial for w < 5 (in
# w - 2.5) and one for the tail (in sqrt(w) - 3); highest degree first.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def erfinv(b, x):
    """erfinv(x) for x in (-1, 1): f32 and narrower computed in f32 (about 2 ulps);
    f64 adds two Newton steps on erf where |x| < 0.999 (about 1e-15 there; the f32
    value beyond, whose relative error is a few 1e-7)."""
    etype = x.shape.element_type
    dims = tuple(x.shape.dims)
    c = _Ints(b, dims)
    x32 = x if etype == "f32" else b.convert(x, "f32")
    w = b.negate(b.log_plus_one(b.negate(b.multiply(x32, x32))))
    central = b.subtract(w, c.const(2.5, "f32"))
    tail = b.subtract(b.sqrt(w), c.const(3.0, "f32"))
    use_central = b.compare(w, c.const(5.0, "f32"), "LT")
    arg = b.select(use_central, central, tail)
    p = b.select(use_central, c.const(_ERFINV_CENTRAL[0], "f32"), c.const(_ERFINV_TAIL[0], "f32"))
    for ci, ti in zip(_ERFINV_CENTRAL[1:], _ERFINV_TAIL[1:]):
        coef = b.select(use_central, c.const(ci, "f32"), c.const(ti, "f32"))
        p = b.add(coef, b.multiply(p, arg))
    y32 = b.multiply(p, x32)
    if etype != "f64":
        return y32 if etype == "f32" else b.convert(y32, etype)
    # y <- y - (erf(y) - x) / erf'(y), erf'(y) = 2/sqrt(pi) exp(-y^2), twice (the error
    # squares: 1e-7 -> 1e-13 -> rounding). Near |x| = 1 erf(y) - x cancels and erf'
    # underflows: keep the f32 value there.
    y = b.convert(y32, "f64")
    newton = y
    for _ in range(2):
        slope = b.multiply(c.const(2 / math.sqrt(math.pi), "f64"),
                           b.exponential(b.negate(b.multiply(newton, newton))))
        newton = b.subtract(newton, b.divide(b.subtract(b.erf(newton), x), slope))
    inner = b.compare(b.abs(x), c.const(0.999, "f64"), "LT")
    return b.select(inner, newton, y)


def _static_dims(ctx):
    dims = tuple(int(d) for d in ctx.attr("shape"))
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {list(dims)} has a negative dimension")
    return dims


def _alg(ctx) -> str:
    alg = ctx.attr("alg")
    if alg not in ALGORITHMS:
        raise ValueError(f"unknown random algorithm {alg!r}; expected one of {ALGORITHMS}")
    return alg


@register_xla_op("StatelessRandomBits")
class StatelessRandomBits(XlaOpKernel):
    """Random bits u{width}[shape] from the key; attrs shape, alg, width."""

    def compile(self, ctx):
        ctx.set_output(0, random_bits(ctx.builder, ctx.input(0), _static_dims(ctx), _alg(ctx),
                                      int(ctx.attr("width", 32))))


@register_xla_op("StatelessRandomUniform")
class StatelessRandomUniform(XlaOpKernel):
    """Floats in [minval, maxval) (attrs; default [0, 1)) of type `dtype` from the key."""

    def compile(self, ctx):
        ctx.set_output(0, scaled_uniform(ctx.builder, ctx.input(0), _static_dims(ctx),
                                         _alg(ctx), ctx.attr("dtype"),
                                         float(ctx.attr("minval", 0.0)),
                                         float(ctx.attr("maxval", 1.0))))


@register_xla_op("StatelessRandomNormal")
class StatelessRandomNormal(XlaOpKernel):
    """Standard normal floats: sqrt(2) * erfinv(u), u uniform in [nextafter(-1, 0), 1)."""

    def compile(self, ctx):
        b, etype = ctx.builder, ctx.attr("dtype")
        dims = _static_dims(ctx)
        np_type = np.dtype(Shape.scalar(etype).dtype.numpy).type
        lo = float(np.nextafter(np_type(-1), np_type(0)))
        u = scaled_uniform(b, ctx.input(0), dims, _alg(ctx), etype, lo, 1.0)
        ctx.set_output(0, b.multiply(_Ints(b, dims).const(math.sqrt(2), etype), erfinv(b, u)))


@register_xla_op("StatelessTruncatedNormal")
class StatelessTruncatedNormal(XlaOpKernel):
    """Standard normal floats cut to (-2, 2): the inverse CDF of a uniform on
    [erf(-sqrt 2), erf(sqrt 2)), clamped to the open interval."""

    def compile(self, ctx):
        b, etype = ctx.builder, ctx.attr("dtype")
        dims = _static_dims(ctx)
        np_type = np.dtype(Shape.scalar(etype).dtype.numpy).type
        edge = math.erf(2 / math.sqrt(2))
        u = scaled_uniform(b, ctx.input(0), dims, _alg(ctx), etype,
                           float(np_type(-edge)), float(np_type(edge)))
        c = _Ints(b, dims)
        out = b.multiply(c.const(math.sqrt(2), etype), erfinv(b, u))
        lo = float(np.nextafter(np_type(-2), np_type(0)))
        hi = float(np.nextafter(np_type(2), np_type(0)))
        ctx.set_output(0, b.clamp(c.const(lo, etype), out, c.const(hi, etype)))


@register_xla_op("StatelessRandomUniformInt")
class StatelessRandomUniformInt(XlaOpKernel):
    """Integers in [minval, maxval) (scalar inputs 1 and 2, of the result's type):
    minval + bits mod (maxval - minval) in unsigned arithmetic, as TensorFlow (a bias of
    at most range / 2^bits toward small values). maxval <= minval gives minval."""

    def compile(self, ctx):
        b = ctx.builder
        key, lo, hi = ctx.inputs
        etype = lo.shape.element_type
        if not is_integer(etype) or hi.shape.element_type != etype:
            raise TypeError(f"minval and maxval must be integers of one type, got "
                            f"{etype} and {hi.shape.element_type}")
        if lo.shape.dims or hi.shape.dims:
            raise ValueError("minval and maxval must be scalars")
        dims = _static_dims(ctx)
        width = max(32, int(etype[1:]))
        utype = f"u{width}"
        bits = random_bits(b, key, dims, _alg(ctx), width)
        wide = etype if int(etype[1:]) == width else f"{etype[0]}{width}"
        lo_w, hi_w = b.convert(lo, wide), b.convert(hi, wide)
        span = b.convert(b.subtract(hi_w, lo_w), utype)   # wraps like the C++ unsigned range
        span = b.select(b.compare(hi_w, lo_w, "GT"), span, b.constant(1, utype))
        offset = b.remainder(bits, b.broadcast(span, dims))
        value = b.add(b.broadcast(lo_w, dims), b.convert(offset, wide))
        ctx.set_output(0, value if wide == etype else b.convert(value, etype))


@register_xla_op("StatelessRandomSplit")
class StatelessRandomSplit(XlaOpKernel):
    """`num` new keys u32[num, 2] from the key: the generator's first two words at
    counters 0..num-1 (threefry: (0, i); philox: (0, 0, 0, i)), as JAX's split."""

    def compile(self, ctx):
        b = ctx.builder
        num = int(ctx.attr("num"))
        alg = _alg(ctx)
        dims = (num,)
        k0, k1 = _key_words(b, ctx.input(0))
        hi, lo = _counters(b, dims)
        if alg == "threefry":
            w0, w1 = threefry2x32(b, k0, k1, hi, lo)
        else:
            zero = _Ints(b, dims).const(0)
            w0, w1, _, _ = philox4x32(b, k0, k1, zero, zero, hi, lo)
        ctx.set_output(0, b.concatenate([b.reshape(w, (num, 1)) for w in (w0, w1)], 1))
