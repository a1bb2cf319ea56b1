"""frontend.ops.random: stateless random numbers, the explicit-state Generator and dropout.

The bits and uniform floats are checked against values JAX computes for the same key
(the literal table below, made with jax 0.10.2 outside this repository), normals to a
few ulps of JAX's; the distributions by their moments; reproducibility across calls,
backends and thread counts; dropout by its mask and its gradient.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from xlapy import hlo
from xlapy.frontend import jit_compile, ops, value_and_grad

R = ops.random

# jax.random.{bits, uniform, normal, truncated_normal, split} for
# jax.random.wrap_key_data(np.array(key, np.uint32), impl="threefry2x32" | "philox4x32");
# floats as float.hex() where they must agree bit for bit.
JAX = {('philox', (0, 0)): {'bits32': [[2686016204, 4095654627, 1086656016],
                                 [3230305457, 4095299535, 2058420124]],
                      'bits64': [7361108121267848589, 7696869384507318857, 6412682573025110972],
                      'f16': ['0x1.6b00000000000p-2', '0x1.7580000000000p-1',
                              '0x1.c000000000000p-5', '0x1.1900000000000p-1',
                              '0x1.3f00000000000p-2'],
                      'f32': ['0x1.4032b40000000p-1', '0x1.e83d740000000p-1',
                              '0x1.0314380000000p-2', '0x1.8115180000000p-1',
                              '0x1.e8329c0000000p-1'],
                      'f64': ['0x1.989fa35785a70p-2', '0x1.ab4317b3a88d8p-2',
                              '0x1.63f9b34c19ff8p-2'],
                      'gen_state': [1713891541, 3781805453],
                      'gen_uniform': ['0x1.dad0900000000p-3', '0x1.4f2fe40000000p-1',
                                      '0x1.590c780000000p-2', '0x1.e7d5000000000p-6'],
                      'normal32': [0.3196597397327423, 1.6807459592819214, -0.6650575995445251,
                                   0.6811575293540955, 1.6798951625823975,
                                   -0.052002836018800735],
                      'normal64': [-0.25581597020351554, -0.20893849734985603,
                                   -0.39172091087100563, 0.9041465653120985,
                                   -0.5230284776940264, -0.22980975249642954],
                      'split': [[1713891541, 3781805453], [768504805, 323543615],
                                [3710895380, 2918555867]],
                      'trunc32': [0.30464494228363037, 1.4981682300567627, -0.6303125023841858,
                                  0.6453284025192261, 1.4975605010986328,
                                  -0.049634773284196854]},
 ('philox', (4294967295, 12345)): {'bits32': [[284602507, 2709649347, 753235203],
                                              [2350216609, 720414331, 4171507823]],
                                   'bits64': [16925087167552276433, 13535566347728537808,
                                              6140289206933991758],
                                   'f16': ['0x1.6100000000000p-1', '0x1.ef80000000000p-1',
                                           '0x1.d400000000000p-2', '0x1.d600000000000p-2',
                                           '0x1.4c80000000000p-1'],
                                   'f32': ['0x1.0f6b000000000p-4', '0x1.4303ec0000000p-1',
                                           '0x1.672ba00000000p-3', '0x1.182ae80000000p-1',
                                           '0x1.5785300000000p-3'],
                                   'f64': ['0x1.d5c3fa363cf38p-1', '0x1.77affbc1ec2e8p-1',
                                           '0x1.54dac20115dccp-2'],
                                   'gen_state': [3940678939, 511297489],
                                   'gen_uniform': ['0x1.20fba00000000p-4',
                                                   '0x1.a76fc00000000p-5',
                                                   '0x1.87eb7c0000000p-1',
                                                   '0x1.de8a400000000p-5'],
                                   'normal32': [-1.5042059421539307, 0.334209680557251,
                                                -0.9331308007240295, 0.11859623342752457,
                                                -0.9631562829017639, 1.899564504623413],
                                   'normal64': [1.3885212705358039, 0.6242385154730755,
                                                -0.43201365355736626, 0.4442241162224338,
                                                -0.6853012956155695, -0.13808709020020707],
                                   'split': [[3940678939, 511297489], [1570222677, 1943436172],
                                             [850520449, 4150556351]],
                                   'trunc32': [-1.365810513496399, 0.31846481561660767,
                                               -0.8773559331893921, 0.11317635327577591,
                                               -0.9045470356941223, 1.6430391073226929]},
 ('threefry', (0, 0)): {'bits32': [[4070199207, 4202968722, 1427181096],
                                   [2012915765, 2447653815, 710830403]],
                        'bits64': [7719171245655871230, 3989946895414531357,
                                   17807037942121513089],
                        'f16': ['0x1.3e00000000000p-2', '0x1.b400000000000p-3',
                                '0x1.c000000000000p-5', '0x1.5000000000000p-1',
                                '0x1.dc00000000000p-3'],
                        'f32': ['0x1.e5349c0000000p-1', '0x1.f5086c0000000p-1',
                                '0x1.5444380000000p-2', '0x1.dfeaa00000000p-2',
                                '0x1.23c8740000000p-1'],
                        'f64': ['0x1.ac80056666e90p-2', '0x1.baf91c7e6ed88p-3',
                                '0x1.ee3e9d53441c8p-1'],
                        'gen_state': [1797259609, 2579123966],
                        'gen_uniform': ['0x1.de02000000000p-8', '0x1.5648000000000p-6',
                                        '0x1.29b0bc0000000p-1', '0x1.7285a80000000p-2'],
                        'normal32': [1.622642159461975, 2.0252647399902344, -0.4335944354534149,
                                     -0.07861734926700592, 0.17609089612960815,
                                     -0.9720892310142517],
                        'normal64': [-0.2058421394796434, -0.7847657764467411,
                                     1.8160866726679836, 0.1878440128937887,
                                     0.08086788103743275, -0.3721107933346203],
                        'split': [[1797259609, 2579123966], [928981903, 3453687069],
                                  [4146024105, 2718843009]],
                        'trunc32': [1.4559592008590698, 1.714748740196228, -0.4126753509044647,
                                    -0.07503343373537064, 0.16800101101398468,
                                    -0.912614107131958]},
 ('threefry', (4294967295, 12345)): {'bits32': [[3781839815, 2039913388, 1623751357],
                                                [2456148307, 2849528260, 555886976]],
                                     'bits64': [13945916010761786238, 4928757659356687702,
                                                13664349902303002475],
                                     'f16': ['0x1.2f00000000000p-2', '0x1.3700000000000p-1',
                                             '0x1.ea00000000000p-2', '0x1.b280000000000p-1',
                                             '0x1.6700000000000p-2'],
                                     'f32': ['0x1.c2d4940000000p-1', '0x1.e65a680000000p-2',
                                             '0x1.8321e80000000p-2', '0x1.24cbb00000000p-1',
                                             '0x1.53b0b00000000p-1'],
                                     'f64': ['0x1.8313b17241c72p-1', '0x1.1199dbe8f7c38p-2',
                                             '0x1.7b430badbad3ep-1'],
                                     'gen_state': [3247036601, 551785342],
                                     'gen_uniform': ['0x1.a471000000000p-7',
                                                     '0x1.ab06800000000p-1',
                                                     '0x1.5dffe00000000p-4',
                                                     '0x1.a9afa00000000p-2'],
                                     'normal32': [1.17763090133667, -0.06282161176204681,
                                                  -0.31058239936828613, 0.18112824857234955,
                                                  0.4219176769256592, -1.1291017532348633],
                                     'normal64': [0.693524021280892, -0.6213384256563991,
                                                  0.6456466553069713, -0.4885106692768253,
                                                  0.24359883341209349, -0.5425608537569997],
                                     'split': [[3247036601, 551785342],
                                               [1147565818, 1039199574],
                                               [3181479382, 3714711403]],
                                     'trunc32': [1.0948734283447266, -0.0599597692489624,
                                                 -0.2960200905799866, 0.17280223965644836,
                                                 0.4016251862049103, -1.0524848699569702]}}

CASES = sorted(JAX)


def interp(fn, *args):
    return jit_compile(fn, backend="interpreter", pipeline=None)(*args)


def _floats(hexes, dtype):
    return np.array([float.fromhex(h) for h in hexes]).astype(dtype)


@pytest.mark.parametrize("alg,key", CASES)
def test_bits_and_uniform_match_jax(alg, key):
    ref = JAX[(alg, key)]
    seed = np.array(key, np.uint32)
    out = interp(lambda s: (R.stateless_uniform((2, 3), s, None, None, "uint32", alg=alg),
                            R.stateless_uniform((3,), s, None, None, "uint64", alg=alg),
                            R.stateless_uniform((5,), s, alg=alg),
                            R.stateless_uniform((3,), s, dtype="float64", alg=alg),
                            R.stateless_uniform((5,), s, dtype="float16", alg=alg),
                            R.split_key(s, 3, alg=alg)), seed)
    bits32, bits64, f32, f64, f16, split = out
    np.testing.assert_array_equal(bits32, np.array(ref["bits32"], np.uint32))
    np.testing.assert_array_equal(bits64, np.array(ref["bits64"], np.uint64))
    np.testing.assert_array_equal(f32, _floats(ref["f32"], np.float32))
    np.testing.assert_array_equal(f64, _floats(ref["f64"], np.float64))
    np.testing.assert_array_equal(f16, _floats(ref["f16"], np.float16))
    np.testing.assert_array_equal(split, np.array(ref["split"], np.uint32))


@pytest.mark.parametrize("alg,key", CASES)
def test_normals_match_jax(alg, key):
    ref = JAX[(alg, key)]
    seed = np.array(key, np.uint32)
    n32, n64, t32 = interp(lambda s: (
        R.stateless_normal((6,), s, alg=alg), R.stateless_normal((6,), s, dtype="float64", alg=alg),
        R.stateless_truncated_normal((6,), s, alg=alg)), seed)
    # erfinv is a polynomial in both; XLA contracts u * (b - a) + a into an fma
    np.testing.assert_allclose(n32, ref["normal32"], rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(t32, ref["trunc32"], rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(n64, ref["normal64"], rtol=1e-12, atol=1e-13)


def test_seed_forms_agree():
    """A [2] int32/int64 seed is the key (a mod 2^32, b mod 2^32); a Python pair too."""
    def f(s32, s64):
        return (R.stateless_uniform((4,), s32), R.stateless_uniform((4,), s64),
                R.stateless_uniform((4,), [-1, 7]), R.stateless_uniform((4,), np.array([-1, 7])))
    a, b, c, d = interp(f, np.array([-1, 7], np.int32), np.array([2 ** 32 - 1, 7], np.int64))
    for other in (b, c, d):
        np.testing.assert_array_equal(a, other)
    u = interp(lambda s: R.stateless_uniform((4,), s), np.array([0xFFFFFFFF, 7], np.uint32))
    np.testing.assert_array_equal(a, u)


def test_reproducible_across_calls_backends_and_threads():
    seed = np.array([3, 4], np.int32)

    def f(s):
        return (R.stateless_normal((33, 17), s), R.stateless_uniform((1000,), s, alg="threefry"),
                R.stateless_uniform((5, 7), s, 0, 10, "int32"))
    ref = interp(f, seed)
    one = jit_compile(f, intra_op_threads=1)
    two = jit_compile(f, intra_op_threads=2)
    for got in (one(seed), one(seed), two(seed)):
        for r, g in zip(ref, got):
            # the CPU backend may contract u * span + lo into an fma: a few ulps
            np.testing.assert_allclose(g, r, rtol=2e-6, atol=2e-6)
    np.testing.assert_array_equal(one(seed)[1], two(seed)[1])
    np.testing.assert_array_equal(ref[2], two(seed)[2])
    other = interp(f, np.array([3, 5], np.int32))
    assert not np.array_equal(ref[1], other[1])


@pytest.mark.parametrize("alg", ["philox", "threefry"])
def test_distributions(alg):
    n = 40000
    seed = np.array([11, 12], np.int64)
    u, z, t, zm = interp(lambda s: (
        R.stateless_uniform((n,), s, -1.0, 3.0, alg=alg), R.stateless_normal((n,), s, alg=alg),
        R.stateless_truncated_normal((n,), s, alg=alg),
        R.stateless_normal((n,), s, mean=5.0, stddev=2.0, dtype="float64", alg=alg)), seed)
    assert u.min() >= -1 and u.max() < 3
    assert abs(u.mean() - 1) < 5 * math.sqrt(16 / 12 / n)
    assert abs(z.mean()) < 5 / math.sqrt(n) and abs(z.std() - 1) < 0.02
    assert np.all(np.abs(t) < 2)
    assert abs(t.mean()) < 5 / math.sqrt(n) and abs(t.std() - 0.87962566) < 0.02
    assert zm.dtype == np.float64 and abs(zm.mean() - 5) < 0.05 and abs(zm.std() - 2) < 0.04
    # quartiles of the normal
    np.testing.assert_allclose(np.quantile(z, [0.25, 0.5, 0.75]), [-0.6745, 0, 0.6745], atol=0.03)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32", "uint64"])
def test_uniform_integers_follow_tensorflow_rule(dtype):
    """minval + bits mod (maxval - minval), with bits of the type's width."""
    seed = np.array([5, 6], np.int32)
    width = np.dtype(dtype).itemsize * 8
    lo, hi = (-7, 100) if dtype[0] == "i" else (3, 1000)
    vals, bits = interp(lambda s: (
        R.stateless_uniform((200,), s, lo, hi, dtype),
        R.stateless_uniform((200,), s, None, None, f"uint{width}")), seed)
    assert vals.dtype == np.dtype(dtype)
    expected = lo + (bits.astype(object) % (hi - lo))
    np.testing.assert_array_equal(vals.astype(object), expected)
    assert vals.min() >= lo and vals.max() < hi and len(set(vals.tolist())) > 50


def test_uniform_traced_bounds_and_integer_extremes():
    seed = np.array([1, 1], np.int32)
    lo = np.float32(2.0)
    vals, full = interp(lambda s, lo: (
        R.stateless_uniform((500,), s, lo, lo + 0.5),
        R.stateless_uniform((500,), s, np.int32(-2 ** 31), np.int32(2 ** 31 - 1), "int32")),
        seed, lo)
    assert vals.min() >= 2 and vals.max() < 2.5
    assert full.min() < -2 ** 30 and full.max() > 2 ** 30


def test_categorical_frequencies():
    with np.errstate(divide="ignore"):
        logits = np.log(np.array([[0.1, 0.2, 0.7, 0], [0.25, 0.25, 0.25, 0.25]], np.float32))
    n = 20000
    out = interp(lambda lg, s: R.stateless_categorical(lg, n, s), logits,
                 np.array([9, 9], np.int32))
    assert out.shape == (2, n) and out.dtype == np.int64
    assert not np.any(out[0] == 3)                      # log(0) = -inf: never drawn
    for row, p in zip(out, np.exp(logits.astype(np.float64))):
        freq = np.bincount(row, minlength=4) / n
        np.testing.assert_allclose(freq, p, atol=5 * np.sqrt(0.25 / n))
    small = interp(lambda lg, s: R.stateless_categorical(lg, 3, s, dtype="int32"), logits,
                   np.array([9, 9], np.int32))
    assert small.shape == (2, 3) and small.dtype == np.int32


def test_dropout_mask_scale_and_noise_shape():
    x = np.arange(1, 1 + 200 * 30, dtype=np.float32).reshape(200, 30)
    seed = np.array([2, 3], np.int32)
    y, cols = interp(lambda x, s: (ops.dropout(x, 0.25, seed=s),
                                   ops.dropout(x, 0.5, noise_shape=[1, None], seed=s)), x, seed)
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.03
    col_kept = cols != 0
    assert np.all(col_kept == col_kept[:1])             # whole columns kept or dropped
    np.testing.assert_allclose(cols[col_kept], x[col_kept] * 2, rtol=1e-6)
    same = interp(lambda x, s: ops.dropout(x, 0.0, seed=s), x, seed)
    np.testing.assert_array_equal(same, x)


def test_dropout_gradient():
    """d sum(w * dropout(x)) / dx = w * mask / (1 - rate); checked by finite differences."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5))
    w = rng.standard_normal((6, 5))
    seed = np.array([4, 4], np.int32)

    def loss(x, w, s):
        return ops.reduce_sum(w * ops.dropout(x, 0.4, seed=s))
    f = jit_compile(lambda x, w, s: value_and_grad(loss)(x, w, s), backend="interpreter")
    value, g = f(x, w, seed)
    eps = 1e-6
    for i, j in [(0, 0), (2, 3), (5, 4), (3, 1)]:
        xp, xm = x.copy(), x.copy()
        xp[i, j] += eps
        xm[i, j] -= eps
        fd = (f(xp, w, seed)[0] - f(xm, w, seed)[0]) / (2 * eps)
        assert abs(g[i, j] - fd) < 1e-6
    mask = interp(lambda x, s: ops.dropout(x, 0.4, seed=s), np.ones((6, 5)), seed) != 0
    np.testing.assert_allclose(g, w * mask / 0.6, rtol=1e-12)


@pytest.mark.parametrize("alg,key", CASES)
def test_generator_draw_is_jax_split_chain(alg, key):
    gen = R.Generator.from_seed(np.array(key, np.uint32), alg=alg)
    assert gen.alg == alg and gen.state.dtype == np.uint32

    @jit_compile
    def draw(gen):
        values, gen = gen.uniform((4,))
        return values, gen
    values, new = draw(gen)
    ref = JAX[(alg, key)]
    np.testing.assert_array_equal(values, _floats(ref["gen_uniform"], np.float32))
    assert type(new) is type(gen)
    np.testing.assert_array_equal(new.state, np.array(ref["gen_state"], np.uint32))
    again, newer = draw(new)                          # carried state: new numbers
    assert not np.array_equal(values, again)
    assert draw.trace_count == 1


def test_generator_methods():
    gen = R.Generator.from_seed(1234)                 # Python int: key (0, 1234)
    np.testing.assert_array_equal(gen.state, [0, 1234])

    def f(gen):
        n, gen = gen.normal((3, 4), mean=1.0, stddev=0.5, dtype="float64")
        t, gen = gen.truncated_normal((10,))
        i, gen = gen.uniform((5,), 0, 3, "int64")
        full, gen = gen.uniform_full_int((2,))
        seeds, gen = gen.make_seeds(3)
        children, gen = gen.split(2)
        a, _ = children[0].uniform((3,))
        b, _ = children[1].uniform((3,))
        return n, t, i, full, seeds, a, b, gen
    n, t, i, full, seeds, a, b, gen2 = interp(f, gen)
    assert n.shape == (3, 4) and n.dtype == np.float64
    assert np.all(np.abs(t) < 2) and i.dtype == np.int64 and np.all((0 <= i) & (i < 3))
    assert full.dtype == np.uint64 and seeds.shape == (2, 3) and seeds.dtype == np.int64
    assert not np.array_equal(a, b)
    assert type(gen2) is R.PhiloxGenerator


def test_user_errors():
    seed = np.array([1, 2], np.int32)
    with pytest.raises(ValueError, match="unknown random algorithm"):
        interp(lambda s: R.stateless_uniform((2,), s, alg="mt19937"), seed)
    with pytest.raises(ValueError, match="seed must be"):
        interp(lambda s: R.stateless_uniform((2,), s), np.array([1, 2, 3], np.int32))
    with pytest.raises(ValueError, match="needs maxval"):
        interp(lambda s: R.stateless_uniform((2,), s, dtype="int32"), seed)
    with pytest.raises(TypeError, match="floating"):
        interp(lambda s: R.stateless_normal((2,), s, dtype="int32"), seed)
    with pytest.raises(ValueError, match="rate must be in"):
        interp(lambda x, s: ops.dropout(x, 1.0, seed=s), np.ones(3, np.float32), seed)
    with pytest.raises(ValueError, match="seed="):
        interp(lambda x: ops.dropout(x, 0.5), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="negative"):
        interp(lambda s: R.stateless_uniform((2, -1), s), seed)


def test_erfinv_accuracy():
    """erf(erfinv(x)) == x: f32 to a few ulps of x, f64 to ~1e-15 inside |x| < 0.999."""
    from xlapy.frontend.kernels.random import erfinv

    def run(x):
        b = hlo.HloBuilder("erfinv")
        p = b.parameter(hlo.Shape("f64" if x.dtype == np.float64 else "f32", x.shape))
        module = b.build_module(erfinv(b, p))
        out = hlo.evaluate(module, [x])
        return np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
    x64 = np.concatenate([np.linspace(-0.9989, 0.9989, 2001), [0.0, 1e-30, -1e-8]])
    y64 = run(x64)
    np.testing.assert_allclose([math.erf(v) for v in y64], x64, rtol=1e-14, atol=1e-15)
    x32 = np.linspace(-0.9999999, 0.9999999, 4001).astype(np.float32)
    y32 = run(x32)
    back = np.array([math.erf(v) for v in y32.astype(np.float64)])
    # d erf/dy is at most 1.13: an error of a few ulps of y shows as a few ulps of x
    np.testing.assert_allclose(back, x32, rtol=3e-7, atol=1e-7)
