"""A small causal transformer trained with Megatron-style tensor parallelism on 2 devices.

Each block's attention heads and its MLP's hidden dimension are split over the mesh
axis "model" (Mesh(np.arange(2), ("model",))): the query/key/value projections and
the first MLP layer are column-parallel (their output dimension split, no
communication), the attention output projection and the second MLP layer
row-parallel (their input dimension split: partial sums, one all-reduce). So the
forward pass of a block has one all-reduce after attention and one after the MLP,
which the SPMD partitioner inserts from the parameters' PartitionSpecs alone
(jit_compile(step, mesh=..., in_shardings=..., out_shardings=...)). Embeddings,
layer norms and the output layer are replicated.

The same step runs unpartitioned on one device; the script trains both from the
same initial parameters on the same batches and prints the two loss curves side
by side (equal up to f32 rounding: the partial sums are added in another order).

    python examples/train_transformer_tp.py [--steps 10] [--devices 2]
    mpirun -n 2 python examples/train_transformer_tp.py     # one device per MPI rank
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import xlapy
from xlapy import ops
from xlapy.frontend.distribute import Mesh, PartitionSpec as P

CONFIG = dict(vocab=32, d_model=32, heads=4, head_dim=8, d_ff=64, layers=2, seq=8, batch=4)


def init_params(config=CONFIG, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    d, h, k, f, v = (config[n] for n in ("d_model", "heads", "head_dim", "d_ff", "vocab"))

    def normal(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    blocks = []
    for _ in range(config["layers"]):
        blocks.append({
            "ln1": np.ones(d, np.float32), "ln2": np.ones(d, np.float32),
            "wq": normal(d, h, k), "wk": normal(d, h, k), "wv": normal(d, h, k),
            "wo": normal(h, k, d, scale=1.0 / np.sqrt(h * k)),
            "w1": normal(d, f), "b1": np.zeros(f, np.float32),
            "w2": normal(f, d), "b2": np.zeros(d, np.float32)})
    return {"embed": normal(v, d, scale=0.5), "blocks": blocks, "ln_f": np.ones(d, np.float32),
            "out": normal(d, v)}


def param_specs(params) -> dict:
    """Megatron's layout: heads and the MLP hidden dim split over "model"."""
    block = {"ln1": None, "ln2": None,
             "wq": P(None, "model"), "wk": P(None, "model"), "wv": P(None, "model"),
             "wo": P("model"),                          # row-parallel: heads are its input
             "w1": P(None, "model"), "b1": P("model"),  # column-parallel
             "w2": P("model"), "b2": None}              # row-parallel
    return {"embed": None, "blocks": [block] * len(params["blocks"]), "ln_f": None,
            "out": None}


def layer_norm(x, gamma, eps=1e-5):
    mean = ops.reduce_mean(x, axis=-1, keepdims=True)
    centered = x - mean
    var = ops.reduce_mean(ops.square(centered), axis=-1, keepdims=True)
    return centered * ops.rsqrt(var + eps) * gamma


def attention(x, p, causal):
    q = ops.einsum("btd,dhk->bthk", x, p["wq"])        # column-parallel: heads split
    k = ops.einsum("btd,dhk->bthk", x, p["wk"])
    v = ops.einsum("btd,dhk->bthk", x, p["wv"])
    scores = ops.einsum("bthk,bshk->bhts", q, k) * (1.0 / np.sqrt(p["wq"].shape[-1]))
    scores = ops.where(causal, scores, ops.fill(scores.shape, -1e9))
    weights = ops.softmax(scores, axis=-1)
    out = ops.einsum("bhts,bshk->bthk", weights, v)
    return ops.einsum("bthk,hkd->btd", out, p["wo"])   # row-parallel: all-reduce


def mlp(x, p):
    hidden = ops.gelu(ops.einsum("btd,df->btf", x, p["w1"]) + p["b1"])   # column-parallel
    return ops.einsum("btf,fd->btd", hidden, p["w2"]) + p["b2"]          # row-parallel


def loss_fn(params, tokens, targets):
    seq = tokens.shape[1]
    causal = np.tril(np.ones((seq, seq), bool))
    h = ops.gather(params["embed"], tokens)
    for p in params["blocks"]:
        h = h + attention(layer_norm(h, p["ln1"]), p, causal)
        h = h + mlp(layer_norm(h, p["ln2"]), p)
    logits = ops.einsum("btd,dv->btv", layer_norm(h, params["ln_f"]), params["out"])
    return ops.reduce_mean(ops.sparse_softmax_cross_entropy_with_logits(labels=targets,
                                                                          logits=logits))


def train_step(params, tokens, targets, lr=0.05):
    loss, grads = xlapy.value_and_grad(loss_fn)(params, tokens, targets)
    return _sgd(params, grads, lr), loss


def _sgd(params, grads, lr):
    if isinstance(params, dict):
        return {k: _sgd(params[k], grads[k], lr) for k in params}
    if isinstance(params, list):
        return [_sgd(p, g, lr) for p, g in zip(params, grads)]
    return params - lr * grads


def make_batches(steps, config=CONFIG, seed=1):
    """A copy task with a shift: the next token is the previous one plus 1 (mod vocab)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        start = rng.integers(0, config["vocab"], (config["batch"], 1))
        seq = (start + np.arange(config["seq"] + 1)) % config["vocab"]
        out.append((seq[:, :-1].astype(np.int32), seq[:, 1:].astype(np.int32)))
    return out


def tensor_parallel_step(mesh: Mesh, params):
    specs = param_specs(params)
    return xlapy.jit_compile(train_step, mesh=mesh, in_shardings=(specs, None, None),
                             out_shardings=(specs, None))


def main(steps: int = 10, devices: int = 2, verbose: bool = True):
    """Trains on `devices` (tensor parallel) and on one device; returns both loss lists."""
    mesh = Mesh(np.arange(devices), ("model",))
    params0 = init_params()
    tp_step = tensor_parallel_step(mesh, params0)
    one_step = xlapy.jit_compile(train_step)
    batches = make_batches(steps)
    tp_params, one_params = params0, params0
    tp_losses, one_losses = [], []
    if verbose:
        print(f"tensor parallel on {devices} devices"
              f"{' (MPI ranks)' if tp_step.distributed else ''} vs 1 device")
        print(f"{'step':>4} {'loss, ' + str(devices) + ' devices':>18} {'loss, 1 device':>16}")
    for i, (tokens, targets) in enumerate(batches):
        tp_params, tp_loss = tp_step(tp_params, tokens, targets)
        one_params, one_loss = one_step(one_params, tokens, targets)
        tp_losses.append(float(tp_loss))
        one_losses.append(float(one_loss))
        if verbose:
            print(f"{i:>4} {tp_losses[-1]:>18.6f} {one_losses[-1]:>16.6f}")
    return tp_losses, one_losses


def collectives_per_block(devices: int = 2) -> dict:
    """Collective opcodes in the partitioned forward pass, per transformer block."""
    mesh = Mesh(np.arange(devices), ("model",))
    params = init_params()
    specs = param_specs(params)
    tokens, targets = make_batches(1)[0]
    forward = xlapy.jit_compile(loss_fn, mesh=mesh, in_shardings=(specs, None, None),
                                backend="interpreter")
    module = forward.compile(params, tokens, targets).module
    counts: dict = {}
    for instr in module.entry.instructions:
        if instr.opcode in ("all-reduce", "all-gather", "all-to-all", "collective-permute",
                            "reduce-scatter"):
            counts[instr.opcode] = counts.get(instr.opcode, 0) + 1
    return {k: v / len(params["blocks"]) for k, v in counts.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--devices", type=int, default=2)
    args = parser.parse_args()
    from xlapy.frontend.sharding import _under_mpirun
    devices = _under_mpirun() or args.devices
    rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    tp, one = main(args.steps, devices, verbose=rank == 0)
    if rank == 0:
        print(f"largest relative difference: "
              f"{max(abs(a - b) / abs(b) for a, b in zip(tp, one)):.2e}")
