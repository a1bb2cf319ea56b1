"""End-to-end training steps (issue 19): first compile and step time, xlapy beside JAX.

Three steps, each forward + backward + SGD update in one compiled function:

    gpt      a pre-LayerNorm GPT block, B=8 S=256 D=512 H=8 FF=2048 (loss: mean square)
    convnet  two 3x3 convs + relu + 2x2 max-pool, dense to 10 classes, B=32 32x32x3
    mlp      784-1024-1024-10, batch 256, softmax cross-entropy

For each: xlapy's first compile (the disk cache off; tracing and lowering excluded,
as JAX's `lower().compile()`), the process's CPU seconds in it (all threads: less
disturbed by other load than the wall time), its compile phases from the profiler's
spans (HLO passes, IR emission, LLVM optimize and codegen summed over the compile
threads -- which start while the kernels are still emitted -- of which `glue` is the
wrappers' module, GEMM library, link, and `other`: the rest of the compile, outside
every phase), the step time, and JAX's
beside when jax is importable (run it in a venv holding both, e.g. /work/jaxvenv).
Then the GPT model with `--layers` blocks against one block, and a second process
with the disk cache on (cold, then warm, in a fresh cache folder).

    python benchmarks/bench_e2e.py                     # everything
    python benchmarks/bench_e2e.py --steps mlp --no-jax --no-layers --no-disk
    XLAPY_COMPILE_THREADS=1 python benchmarks/bench_e2e.py   # LLVM on one thread

The GEMM library routines are compiled once per process: the first step measured
pays for them (the table says which did); `--fresh` measures each step in a
subprocess of its own, so each pays (what a new process compiling it pays).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("XLAPY_DISABLE_DISK_CACHE", "1")   # before xlapy is imported
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _common import fmt_ms, host_line, import_jax, load_average, median_ms  # noqa: E402

STEPS = ("gpt", "convnet", "mlp")
GPT = dict(B=8, S=256, D=512, H=8, FF=2048)
LR = 0.01

# Compile phases (span names of backend_cpu/compiler.py) shown in the table.
PHASES = (("passes", "HLO passes"), ("emit", "emit LLVM IR"), ("opt", "LLVM optimize"),
          ("codegen", "LLVM codegen"), ("gemm", "GEMM library"), ("link", "link"))
LLVM_SPANS = ("LLVM parse and verify", "LLVM optimize", "LLVM codegen")


# --- the models, written once for xlapy's frontend and once for JAX ----------------------------

def init_gpt(rng, layers: int, d: int, ff: int) -> dict:
    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    p = {}
    for i in range(layers):
        p[f"b{i}"] = {"ln1_g": np.ones(d, np.float32), "ln1_b": np.zeros(d, np.float32),
                      "wqkv": w(d, 3 * d), "bqkv": np.zeros(3 * d, np.float32),
                      "wo": w(d, d), "bo": np.zeros(d, np.float32),
                      "ln2_g": np.ones(d, np.float32), "ln2_b": np.zeros(d, np.float32),
                      "w1": w(d, ff), "b1": np.zeros(ff, np.float32),
                      "w2": w(ff, d), "b2": np.zeros(d, np.float32)}
    return p


def gpt_loss(xp, p, x, heads: int):
    """Mean square of the blocks' output: pre-LN attention (causal) + GELU MLP."""
    B, S, D = x.shape
    hd = D // heads
    mask = xp.tril(S)

    def ln(v, g, b):
        mean = xp.mean(v, -1, keepdims=True)
        c = v - mean
        var = xp.mean(c * c, -1, keepdims=True)
        return c * xp.rsqrt(var + 1e-5) * g + b

    for i in range(len(p)):
        q = p[f"b{i}"]
        h = ln(x, q["ln1_g"], q["ln1_b"])
        qkv = xp.matmul(xp.reshape(h, (B * S, D)), q["wqkv"]) + q["bqkv"]
        qkv = xp.transpose(xp.reshape(qkv, (B, S, 3, heads, hd)), (2, 0, 3, 1, 4))
        qs, ks, vs = qkv[0], qkv[1], qkv[2]                       # [B, H, S, hd]
        scores = xp.bmm(qs, xp.transpose(ks, (0, 1, 3, 2))) * float(1.0 / np.sqrt(hd))
        scores = xp.where(mask, scores, -1e9)
        att = xp.bmm(xp.softmax(scores), vs)                       # [B, H, S, hd]
        att = xp.reshape(xp.transpose(att, (0, 2, 1, 3)), (B * S, D))
        x = x + xp.reshape(xp.matmul(att, q["wo"]) + q["bo"], (B, S, D))
        h = xp.reshape(ln(x, q["ln2_g"], q["ln2_b"]), (B * S, D))
        f = xp.matmul(xp.gelu(xp.matmul(h, q["w1"]) + q["b1"]), q["w2"]) + q["b2"]
        x = x + xp.reshape(f, (B, S, D))
    return xp.mean(x * x)


def init_convnet(rng) -> dict:
    def w(*shape):
        return (rng.standard_normal(shape) * np.sqrt(2 / np.prod(shape[:-1]))).astype(np.float32)
    return {"c1": w(3, 3, 3, 32), "cb1": np.zeros(32, np.float32),
            "c2": w(3, 3, 32, 64), "cb2": np.zeros(64, np.float32),
            "d": w(8 * 8 * 64, 10), "db": np.zeros(10, np.float32)}


def convnet_loss(xp, p, x, labels):
    h = xp.maxpool(xp.relu(xp.conv(x, p["c1"]) + p["cb1"]))
    h = xp.maxpool(xp.relu(xp.conv(h, p["c2"]) + p["cb2"]))
    logits = xp.matmul(xp.reshape(h, (x.shape[0], -1)), p["d"]) + p["db"]
    return xp.xent(logits, labels)


def init_mlp(rng, sizes=(784, 1024, 1024, 10)) -> dict:
    return {f"w{i}": (rng.standard_normal((m, n)) * np.sqrt(2 / m)).astype(np.float32)
            for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:]))} | \
           {f"b{i}": np.zeros(n, np.float32) for i, n in enumerate(sizes[1:])}


def mlp_loss(xp, p, x, labels):
    h = x
    n = len(p) // 2
    for i in range(n):
        h = xp.matmul(h, p[f"w{i}"]) + p[f"b{i}"]
        if i < n - 1:
            h = xp.relu(h)
    return xp.xent(h, labels)


class XlapyOps:
    """The few operations the models use, on xlapy's frontend."""

    def __init__(self):
        from xlapy.frontend import ops
        self.o = ops

    def mean(self, v, axis=None, keepdims=False):
        return self.o.reduce_mean(v, axis=axis, keepdims=keepdims)

    def rsqrt(self, v):
        return self.o.rsqrt(v)

    def matmul(self, a, b):
        return self.o.matmul(a, b)

    bmm = matmul

    def reshape(self, v, shape):
        return self.o.reshape(v, list(shape))

    def transpose(self, v, perm):
        return self.o.transpose(v, list(perm))

    def tril(self, s):
        return np.tril(np.ones((s, s), bool))

    def where(self, c, a, b):
        return self.o.where(c, a, self.o.fill(a.shape, np.float32(b)) if np.isscalar(b) else b)

    def softmax(self, v):
        return self.o.softmax(v, axis=-1)

    def gelu(self, v):
        return self.o.gelu(v)

    def relu(self, v):
        return self.o.relu(v)

    def conv(self, x, w):
        return self.o.conv2d(x, w, 1, "SAME")

    def maxpool(self, x):
        return self.o.max_pool2d(x, ksize=2, strides=2, padding="VALID")

    def xent(self, logits, labels):
        return self.o.reduce_mean(self.o.sparse_softmax_cross_entropy_with_logits(labels, logits))


class JaxOps:
    def __init__(self, jax):
        self.jax, self.jnp = jax, jax.numpy

    def mean(self, v, axis=None, keepdims=False):
        return self.jnp.mean(v, axis=axis, keepdims=keepdims)

    def rsqrt(self, v):
        return self.jax.lax.rsqrt(v)

    def matmul(self, a, b):
        return self.jnp.matmul(a, b)

    bmm = matmul

    def reshape(self, v, shape):
        return self.jnp.reshape(v, shape)

    def transpose(self, v, perm):
        return self.jnp.transpose(v, perm)

    def tril(self, s):
        return np.tril(np.ones((s, s), bool))

    def where(self, c, a, b):
        return self.jnp.where(c, a, b)

    def softmax(self, v):
        return self.jax.nn.softmax(v, axis=-1)

    def gelu(self, v):
        return self.jax.nn.gelu(v, approximate=False)

    def relu(self, v):
        return self.jax.nn.relu(v)

    def conv(self, x, w):
        return self.jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def maxpool(self, x):
        return self.jax.lax.reduce_window(x, -np.inf, self.jax.lax.max, (1, 2, 2, 1),
                                          (1, 2, 2, 1), "VALID")

    def xent(self, logits, labels):
        logp = self.jax.nn.log_softmax(logits)
        return -self.jnp.mean(self.jnp.take_along_axis(logp, labels[:, None], axis=1))


def make_step(name: str, layers: int = 1):
    """(loss(xp, params, *inputs), params, inputs) of step `name`."""
    rng = np.random.default_rng(0)
    if name == "gpt":
        g = GPT
        params = init_gpt(rng, layers, g["D"], g["FF"])
        x = rng.standard_normal((g["B"], g["S"], g["D"])).astype(np.float32)
        return (lambda xp, p, x: gpt_loss(xp, p, x, g["H"])), params, (x,)
    if name == "convnet":
        x = rng.standard_normal((32, 32, 32, 3)).astype(np.float32)
        labels = rng.integers(0, 10, 32).astype(np.int32)
        return convnet_loss, init_convnet(rng), (x, labels)
    if name == "mlp":
        x = rng.standard_normal((256, 784)).astype(np.float32)
        labels = rng.integers(0, 10, 256).astype(np.int32)
        return mlp_loss, init_mlp(rng), (x, labels)
    raise ValueError(f"unknown step {name!r}; choose from {', '.join(STEPS)}")


# --- measuring -----------------------------------------------------------------------------------

def xlapy_step(name: str, layers: int = 1, repeat: int = 5) -> dict:
    """First compile (seconds), its phases, step time (ms) of xlapy's step `name`."""
    from xlapy.frontend import jit_compile, value_and_grad
    from xlapy.runtime import profiler
    loss, params, inputs = make_step(name, layers)
    xp = XlapyOps()

    @jit_compile
    def train_step(p, *inputs):
        value, grads = value_and_grad(lambda q: loss(xp, q, *inputs))(p)
        return {k: _update(p[k], grads[k]) for k in p}, value

    lowered = train_step.lower(params, *inputs)
    recorder = profiler.start()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        compiled = lowered.compile()
    finally:
        profiler.stop()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    phases = {}
    for key, span in PHASES:
        phases[key] = sum(e.seconds for e in recorder.events if e.name == span)
    # The glue module's share of the LLVM spans (machine_code: `quick`), and what the
    # compile spent outside every phase (printing and hashing the module, building
    # thunks, buffer assignment: the backend's bookkeeping).
    phases["glue"] = sum(e.seconds for e in recorder.events
                         if e.name in LLVM_SPANS and (e.args or {}).get("quick"))
    walls = ("HLO passes", "emit LLVM IR", "LLVM compile", "GEMM library", "link")
    phases["other"] = max(0.0, seconds - sum(e.seconds for e in recorder.events
                                             if e.name in walls))
    # Kernel thunks and the distinct kernel bodies LLVM compiled for them (kernel_cache).
    llvm = next((e.args for e in recorder.events if e.name == "LLVM compile"), None) or {}
    kernels = {"thunks": llvm.get("kernel_thunks"), "bodies": llvm.get("kernels")}
    ms = median_ms(lambda: compiled(params, *inputs), repeat)
    return {"compile": seconds, "cpu": cpu, "phases": phases, "kernels": kernels, "step_ms": ms}


def _update(p, g):
    if isinstance(p, dict):
        return {k: _update(p[k], g[k]) for k in p}
    return p - LR * g


def jax_step(name: str, layers: int = 1, repeat: int = 5) -> dict | None:
    jax, _ = import_jax()
    if jax is None:
        return None
    loss, params, inputs = make_step(name, layers)
    xp = JaxOps(jax)

    def train_step(p, *inputs):
        value, grads = jax.value_and_grad(lambda q: loss(xp, q, *inputs))(p)
        return jax.tree_util.tree_map(lambda a, b: a - LR * b, p, grads), value

    lowered = jax.jit(train_step).lower(params, *inputs)
    t0 = time.perf_counter()
    compiled = lowered.compile()
    seconds = time.perf_counter() - t0

    def run():
        jax.block_until_ready(compiled(params, *inputs))
    return {"compile": seconds, "step_ms": median_ms(run, repeat)}


def in_subprocess(args: list[str], env: dict | None = None) -> dict:
    """Runs this script's --child mode and returns the JSON it prints."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args],
                         env={**os.environ, **(env or {})}, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def phases_text(phases: dict, cpu: float | None = None) -> str:
    keys = [k for k, _ in PHASES] + ["glue", "other"]
    text = " ".join(f"{k} {phases[k]:.2f}" for k in keys if phases.get(k))
    return text if cpu is None else f"cpu {cpu:.2f}: {text}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--layers", type=int, default=12, help="the deep GPT's blocks")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--no-layers", action="store_true", help="skip the N-layer GPT")
    ap.add_argument("--no-disk", action="store_true", help="skip the disk-cache processes")
    ap.add_argument("--fresh", action="store_true", help="each step in its own process")
    ap.add_argument("--child", nargs=3, metavar=("STEP", "LAYERS", "REPEAT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        step, layers, repeat = args.child[0], int(args.child[1]), int(args.child[2])
        print(json.dumps(xlapy_step(step, layers, repeat)))
        return 0
    print(host_line())
    print(f"load: {load_average()}; compile threads: "
          f"{os.environ.get('XLAPY_COMPILE_THREADS', 'default')}")
    print(f"{'step':10s} {'xlapy compile':>13s} {'XLA compile':>11s} {'xlapy step':>11s} "
          f"{'XLA step':>9s} {'ratio':>6s}  phases (s)")
    for name in args.steps.split(","):
        ours = in_subprocess([name, "1", str(args.repeat)]) if args.fresh \
            else xlapy_step(name, 1, args.repeat)
        theirs = None if args.no_jax else jax_step(name, 1, args.repeat)
        xc = f"{theirs['compile']:.2f} s" if theirs else "-"
        xs = fmt_ms(theirs["step_ms"]) if theirs else "-"
        ratio = f"{ours['step_ms'] / theirs['step_ms']:.2f}" if theirs else "-"
        print(f"{name:10s} {ours['compile']:11.2f} s {xc:>11s} {fmt_ms(ours['step_ms']):>11s} "
              f"{xs:>9s} {ratio:>6s}  {phases_text(ours['phases'], ours['cpu'])}", flush=True)
    if not args.no_layers:
        one = in_subprocess(["gpt", "1", "1"])
        deep = in_subprocess(["gpt", str(args.layers), "1"])
        print(f"gpt {args.layers} layers vs 1 (fresh processes): {deep['compile']:.2f} s vs "
              f"{one['compile']:.2f} s = {deep['compile'] / one['compile']:.2f}x", flush=True)
        for label, run in ((f"{args.layers} layers", deep), ("1 layer", one)):
            k = run.get("kernels", {})
            print(f"  {label:10s} {phases_text(run['phases'], run['cpu'])}   kernels {k.get('thunks')}, "
                  f"distinct bodies {k.get('bodies')}", flush=True)
    if not args.no_disk:
        with tempfile.TemporaryDirectory() as folder:
            env = {"XLAPY_DISABLE_DISK_CACHE": "0", "XLAPY_CACHE_DIR": folder}
            cold = in_subprocess(["gpt", "1", "1"], env)
            warm = in_subprocess(["gpt", "1", "1"], env)
        print(f"gpt, disk cache on, second process: {warm['compile']:.3f} s vs cold "
              f"{cold['compile']:.2f} s = {100 * warm['compile'] / cold['compile']:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
