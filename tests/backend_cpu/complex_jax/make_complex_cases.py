"""Writes the complex cases of tests/backend_cpu/test_complex.py with JAX (XLA's numbers).

Run with a Python that has jax (never a dependency of xlapy):

    /work/jaxvenv/bin/python tests/backend_cpu/complex_jax/make_complex_cases.py

Each case is `NAME.hlo` (JAX's unoptimized HLO), `NAME.opt.hlo` (after XLA's CPU
pipeline, with XLA's fusions) and `NAME.npz` (the arguments `arg0, arg1, ...` and
XLA's CPU results `out0, out1, ...`), like tests/corpus.
"""
from __future__ import annotations

from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).parent


def complex_math(z, w):
    """Elementwise math, conj, a matrix product and sums on c64."""
    q = jnp.exp(z) * w / (z + 1)
    return (q, jnp.sqrt(z), jnp.log(w), jnp.abs(z), jnp.tanh(z), jnp.sin(z) - jnp.cos(w),
            jnp.conj(z) @ w.T, jnp.sum(z * w, axis=1), jnp.real(z) * jnp.imag(w),
            (z == w) | (jnp.abs(z) > 1.0), jnp.expm1(z), jnp.log1p(w), jax.lax.rsqrt(z),
            jnp.tan(w), jnp.sign(z), jax.lax.logistic(z))


def spectral_filter(x, h):
    """A real signal filtered in the frequency domain, in f64 / c128."""
    spectrum = jnp.fft.rfft(x, axis=-1) * jnp.fft.rfft(h, n=x.shape[-1])
    y = jnp.fft.irfft(spectrum, n=x.shape[-1], axis=-1)
    c = jnp.fft.fft(x.astype(jnp.complex128), axis=0)
    return y, jnp.mean(jnp.abs(c) ** 2, axis=1), jnp.prod(c[:, :4] / 10, axis=0)


def write(name: str, fn, args) -> None:
    jitted = jax.jit(fn)
    lowered = jitted.lower(*args)
    (HERE / f"{name}.hlo").write_text(lowered.as_text(dialect="hlo"))
    (HERE / f"{name}.opt.hlo").write_text(lowered.compile().as_text())
    outs = jax.tree_util.tree_leaves(jitted(*args))
    np.savez(HERE / f"{name}.npz", **{f"arg{i}": np.asarray(a) for i, a in enumerate(args)},
             **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)})


def main() -> None:
    rng = np.random.default_rng(7)

    def c64(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    write("complex_math_c64", complex_math, (c64(6, 9), c64(6, 9)))
    write("spectral_filter_c128", spectral_filter,
          (rng.standard_normal((8, 32)), rng.standard_normal(5)))


if __name__ == "__main__":
    main()
