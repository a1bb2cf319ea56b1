"""Makes tests/hlo/data/ml_dtypes_xla.npz: what XLA's CPU backend computes for the
narrow element types (bf16, the 8-bit floats, s2/s4/u2/u4), as reference material
for tests/hlo/test_ml_dtypes.py.

Run with the JAX environment (never a dependency of xlapy):

    XLA_FLAGS= /work/jaxvenv/bin/python tools/make_ml_dtypes_reference.py

Keys:
  convert/SRC/DST   the bits (as unsigned integers of the type's width, or the values
                    for integer types) of convert(source values of SRC) to DST
  src/SRC           the source values (as SRC)
  op/OP/T           XLA's result of OP (add, multiply, divide, exponential, maximum)
                    on the pairs src/T, src/T reversed, as T
"""
from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import ml_dtypes as md
import numpy as np

jax.config.update("jax_enable_x64", True)

NARROW_FLOATS = {"bf16": md.bfloat16, "f8e5m2": md.float8_e5m2, "f8e4m3fn": md.float8_e4m3fn,
                 "f8e4m3b11fnuz": md.float8_e4m3b11fnuz, "f8e5m2fnuz": md.float8_e5m2fnuz,
                 "f8e4m3fnuz": md.float8_e4m3fnuz, "f8e8m0fnu": md.float8_e8m0fnu,
                 "f8e4m3": md.float8_e4m3, "f8e3m4": md.float8_e3m4}
NARROW_INTS = {"s2": md.int2, "s4": md.int4, "u2": md.uint2, "u4": md.uint4}
WIDE = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "s32": np.int32,
        "u8": np.uint8, "s64": np.int64}
ALL = {**WIDE, **NARROW_FLOATS, **NARROW_INTS}


def sources(name, rng):
    dt = np.dtype(ALL[name])
    if name in NARROW_FLOATS or name in NARROW_INTS or dt.itemsize == 1:
        width = 16 if name == "bf16" else 8
        bits = np.arange(1 << width, dtype=np.uint64)
        if name == "bf16":
            bits = np.concatenate([bits[::97], bits[:64], bits[0x7F00:0x7F90], bits[0xFF70:]])
        if name in NARROW_INTS:
            lo, hi = int(md.iinfo(dt).min), int(md.iinfo(dt).max)
            return np.arange(lo, hi + 1).astype(dt)
        if name == "u8":
            return bits.astype(np.uint8)
        return bits.astype(np.uint16 if width == 16 else np.uint8).view(dt)
    if dt.kind in "iu":
        special = [0, 1, -1, 2, 3, 7, 8, -8, -9, 15, 16, 17, 100, -100, 127, 128, 255, 256,
                   448, 449, 57344, 65504, 65536, 2**24 + 1, 2**31 - 1, -2**31]
        special = [v for v in special if np.iinfo(dt).min <= v <= np.iinfo(dt).max]
        rand = rng.integers(np.iinfo(dt).min // 2, np.iinfo(dt).max // 2, 64, dtype=np.int64)
        return np.concatenate([np.array(special, dt), rand.astype(dt)])
    finfo = np.finfo(dt)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, 1.5, 2.5, 3.0,
               448, 449, 464, 465, 480, 500, 57344, 61439, 61440, 65504, 30, 31, 240, 241,
               15.5, 15.75, 16, 17, 1e6, float(finfo.max), float(finfo.tiny), float(finfo.tiny) / 4,
               float(finfo.smallest_subnormal), 2.0**-6, 2.0**-7, 2.0**-9, 2.0**-10, 2.0**-14,
               2.0**-16, 2.0**-17, 2.0**-13, 2.0**-11, 2.0**-126, 2.0**-127, 2.0**-128,
               1.0 + 2**-8 + 2**-30, 1.0 + 2**-4 + 2**-30, 1.0 + 2**-3 + 2**-30,
               1.0 + 2**-5 + 2**-40, 1.125, 1.0625, 1.03125, 0.1, 1 / 3]
    with np.errstate(all="ignore"):
        special = np.array(special, np.float64).astype(dt)
        # Near ties of the narrow types: midpoints nudged by tiny amounts.
        mids = []
        for target in NARROW_FLOATS.values():
            grid = np.arange(256, dtype=np.uint8).view(target).astype(np.float64) \
                if np.dtype(target).itemsize == 1 else None
            if grid is None:
                continue
            grid = np.unique(grid[np.isfinite(grid)])
            m = (grid[1:] + grid[:-1]) / 2
            mids.append(rng.choice(m, 24))
        mids = np.concatenate(mids)
        nudged = np.concatenate([mids, mids * (1 + 2.0**-30), mids * (1 - 2.0**-30),
                                 mids * (1 + 2.0**-20)])
        rand = rng.standard_normal(128) * np.exp2(rng.integers(-20, 20, 128))
        values = np.concatenate([special, nudged.astype(dt), rand.astype(dt)]).astype(dt)
    return np.concatenate([values, -values])


def bits_of(a):
    """Arrays numpy reads back without ml_dtypes: bits of narrow floats, values of ints."""
    a = np.asarray(a)
    if a.dtype in [np.dtype(t) for t in NARROW_INTS.values()]:
        return a.astype(np.int8)
    if a.dtype in [np.dtype(t) for t in NARROW_FLOATS.values()]:
        return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)
    return a


def main():
    rng = np.random.default_rng(17)
    out = {}
    srcs = {name: sources(name, rng) for name in ALL}
    for name, values in srcs.items():
        out[f"src/{name}"] = bits_of(values)
    convert = jax.jit(lambda x, t: x.astype(t), static_argnums=1)
    for src, values in srcs.items():
        for dst, dt in ALL.items():
            if src not in NARROW_FLOATS and src not in NARROW_INTS \
                    and dst not in NARROW_FLOATS and dst not in NARROW_INTS:
                continue
            out[f"convert/{src}/{dst}"] = bits_of(np.asarray(convert(values, dt)))
    ops = {"add": jnp.add, "multiply": jnp.multiply, "divide": jnp.divide,
           "exponential": lambda a, b: jnp.exp(a), "maximum": jnp.maximum,
           "subtract": jnp.subtract}
    for name, dt in NARROW_FLOATS.items():
        a = srcs[name]
        b = a[::-1].copy()
        for op, fn in ops.items():
            out[f"op/{op}/{name}"] = bits_of(np.asarray(jax.jit(fn)(a, b)))
    for name, dt in NARROW_INTS.items():
        a = np.tile(srcs[name], len(srcs[name]))
        b = np.repeat(srcs[name], len(srcs[name]))
        out[f"pairs/{name}"] = np.stack([bits_of(a), bits_of(b)])
        for op in ("add", "multiply", "subtract", "maximum"):
            out[f"op/{op}/{name}"] = bits_of(np.asarray(jax.jit(ops[op])(a, b)))
    path = pathlib.Path(__file__).resolve().parents[1] / "tests/hlo/data/ml_dtypes_xla.npz"
    np.savez_compressed(path, **out)
    print(path, len(out), "arrays", path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
