"""Real Flax/optax models (issue 19): JAX's HLO compiled by xlapy, beside XLA.

Three jitted steps written with Flax (linen) and optax, lowered by JAX to HLO text
(`jax.jit(f).lower(*args).as_text(dialect="hlo")`, the unoptimized module, what
xlapy is given), compiled by xlapy (`xlapy.hlo.parse_module` + `xlapy.backend_cpu.compile`
with the default pass pipeline, as `hlo-opt --run`) and by XLA (`lowered.compile()`),
outputs checked against XLA's (DESIGN.md tolerances) and timed:

    lm       a 2-layer causal transformer LM's AdamW training step (embedding,
             pre-LN attention + MLP blocks, tied softmax cross-entropy); the
             attention projections have no biases: the key bias's gradient is zero
             in exact arithmetic, so Adam turns its rounding noise into steps of
             +-lr, where no two compilers agree
    lstm     a 16-step LSTM (nn.RNN over nn.LSTMCell, a lax.scan) forward + gradient
    dropout  nn.Dropout(0.1) with the threefry key on a [B, S, D] activation

For each: xlapy compile s, XLA compile s, xlapy step ms, XLA step ms (medians, the two
steps called in turn), ratio. Needs
JAX, Flax and optax (run in a venv holding them and xlapy, e.g. /work/jaxvenv):

    /work/jaxvenv/bin/python benchmarks/bench_models.py
    /work/jaxvenv/bin/python benchmarks/bench_models.py --models lm --small --profile

`--small` uses the configurations stored as test material in tests/models/
(tools/make_model_corpus.py imports `build` from here); `--profile` prints
xlapy's per-kernel table of each step.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("XLAPY_DISABLE_DISK_CACHE", "1")   # before xlapy is imported
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _common import fmt_ms, host_line, load_average  # noqa: E402

MODELS = ("lm", "lstm", "dropout")

# The configurations: "full" for the benchmark, "small" for tests/models/.
CONFIGS = {
    "lm": {"full": dict(vocab=4096, d=256, heads=4, ff=1024, layers=2, seq=128, batch=8),
           "small": dict(vocab=128, d=32, heads=2, ff=64, layers=2, seq=16, batch=2)},
    "lstm": {"full": dict(hidden=256, features=64, steps=16, batch=16),
             "small": dict(hidden=64, features=16, steps=16, batch=4)},
    "dropout": {"full": dict(shape=(16, 128, 256), rate=0.1),
                "small": dict(shape=(2, 32, 128), rate=0.1)},
}


# --- the models -----------------------------------------------------------------------------

def _lm(cfg):
    import jax
    import jax.numpy as jnp
    import flax.linen as nn
    import optax

    class Block(nn.Module):
        d: int
        heads: int
        ff: int

        @nn.compact
        def __call__(self, x, mask):
            h = nn.LayerNorm()(x)
            x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads, use_bias=False)(
                h, h, mask=mask)
            h = nn.LayerNorm()(x)
            h = nn.Dense(self.d)(nn.gelu(nn.Dense(self.ff)(h)))
            return x + h

    class LM(nn.Module):
        vocab: int
        d: int
        heads: int
        ff: int
        layers: int
        seq: int

        @nn.compact
        def __call__(self, tokens):
            embed = nn.Embed(self.vocab, self.d)
            pos = self.param("pos", nn.initializers.normal(0.02), (self.seq, self.d))
            x = embed(tokens) + pos[: tokens.shape[1]]
            mask = nn.make_causal_mask(tokens)
            for _ in range(self.layers):
                x = Block(self.d, self.heads, self.ff)(x, mask)
            return embed.attend(nn.LayerNorm()(x))

    model = LM(cfg["vocab"], cfg["d"], cfg["heads"], cfg["ff"], cfg["layers"], cfg["seq"])
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1)).astype(np.int32)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    params = model.init(jax.random.PRNGKey(0), inputs)
    tx = optax.adamw(1e-3, weight_decay=0.01)
    opt_state = tx.init(params)

    def step(params, opt_state, inputs, targets):
        def loss_fn(p):
            logits = model.apply(p, inputs)
            return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    # One optimizer step first, so Adam's moments and count are not all zeros (through
    # a jit of its own: one of `step` here would put XLA's executable in JAX's cache).
    params, opt_state, _ = jax.jit(lambda *a: step(*a))(params, opt_state, inputs, targets)
    return step, (params, opt_state, jnp.asarray(inputs), jnp.asarray(targets))


def _lstm(cfg):
    import jax
    import jax.numpy as jnp
    import flax.linen as nn

    class Model(nn.Module):
        hidden: int

        @nn.compact
        def __call__(self, x):
            h = nn.RNN(nn.LSTMCell(self.hidden))(x)
            return nn.Dense(1)(h[:, -1])

    model = Model(cfg["hidden"])
    rng = np.random.default_rng(1)
    x = rng.standard_normal((cfg["batch"], cfg["steps"], cfg["features"])).astype(np.float32)
    y = rng.standard_normal((cfg["batch"], 1)).astype(np.float32)
    params = model.init(jax.random.PRNGKey(1), x)

    def step(params, x, y):
        def loss_fn(p):
            return jnp.mean((model.apply(p, x) - y) ** 2)
        return jax.value_and_grad(loss_fn)(params)

    return step, (params, jnp.asarray(x), jnp.asarray(y))


def _dropout(cfg):
    import jax
    import jax.numpy as jnp
    import flax.linen as nn

    layer = nn.Dropout(cfg["rate"])
    rng = np.random.default_rng(2)
    x = rng.standard_normal(cfg["shape"]).astype(np.float32)
    key = jax.random.PRNGKey(42)                     # uint32[2], threefry

    def step(key, x):
        return layer.apply({}, x, deterministic=False, rngs={"dropout": key})

    return step, (key, jnp.asarray(x))


def build(name: str, size: str = "full"):
    """(step function, example args as pytrees) of model `name` at `size`."""
    makers = {"lm": _lm, "lstm": _lstm, "dropout": _dropout}
    if name not in makers:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return makers[name](CONFIGS[name][size])


def lower(name: str, size: str = "full"):
    """(jax lowered step, HLO text, flat numpy args) of model `name`."""
    import jax
    step, args = build(name, size)
    lowered = jax.jit(step).lower(*args)
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    return lowered, lowered.as_text(dialect="hlo"), args, flat


# --- measuring --------------------------------------------------------------------------------

def interleaved_ms(fns, repeat: int, warmup: int = 2) -> list[float]:
    """Median wall time (ms) of each of `fns`, called in turn `repeat` times, so that
    on a shared machine both sides see the same load."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, spent in zip(fns, times):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [statistics.median(t) * 1e3 for t in times]


def measure(name: str, size: str, repeat: int, profile: bool) -> dict:
    import jax
    from xlapy import backend_cpu, hlo
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from tests.corpus_util import assert_all_close

    lowered, text, args, flat = lower(name, size)
    t0 = time.perf_counter()
    compiled_xla = lowered.compile()
    xla_compile = time.perf_counter() - t0
    expected = [np.asarray(o) for o in jax.tree_util.tree_leaves(compiled_xla(*args))]

    t0 = time.perf_counter()
    ours = backend_cpu.compile(hlo.parse_module(text),
                               backend_cpu.CompileOptions(pipeline="default"))
    our_compile = time.perf_counter() - t0
    assert_all_close(ours.run(*flat), expected, f"{name} ({size})")

    def run_xla():
        jax.block_until_ready(compiled_xla(*args))
    our_ms, xla_ms = interleaved_ms([lambda: ours.run(*flat), run_xla], repeat)
    if profile:
        from xlapy.backend_cpu import profiling
        print(profiling.profile(ours, flat).table(limit=25))
    return {"compile": our_compile, "xla_compile": xla_compile, "step_ms": our_ms,
            "xla_ms": xla_ms}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--small", action="store_true", help="the tests/models/ configurations")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--profile", action="store_true", help="xlapy's per-kernel table")
    args = ap.parse_args(argv)
    size = "small" if args.small else "full"
    print(host_line())
    print(f"{load_average()}; configurations: {size}")
    print(f"{'model':8s} {'xlapy compile':>13s} {'XLA compile':>11s} {'xlapy step':>11s} "
          f"{'XLA step':>9s} {'ratio':>6s}  config")
    for name in args.models.split(","):
        r = measure(name, size, args.repeat, args.profile)
        cfg = " ".join(f"{k}={v}" for k, v in CONFIGS[name][size].items())
        print(f"{name:8s} {r['compile']:11.2f} s {r['xla_compile']:9.2f} s "
              f"{fmt_ms(r['step_ms']):>11s} {fmt_ms(r['xla_ms']):>9s} "
              f"{r['step_ms'] / r['xla_ms']:6.2f}  {cfg}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
