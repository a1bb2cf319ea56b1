"""The transformer of train_transformer.py trained with Megatron-style tensor parallelism.

The model is examples/transformer_model.py's (the same parameters and maths as
examples/train_transformer.py: pre-LN blocks of causal multi-head attention and a GELU
feed-forward, learned positions, Adam), on the same character corpus. Only the
parameters' PartitionSpecs differ: each block's attention heads and its feed-forward
hidden dimension are split over the mesh axis "model" (Mesh(np.arange(2), ("model",))):

    attention query/key/value kernels [d, heads, dim]  P(None, "model")  column-parallel
              query/key/value biases  [heads, dim]     P("model")
              output kernel           [heads, dim, d]  P("model")        row-parallel
    ff1 kernel [d, d_ff] P(None, "model"), bias P("model")               column-parallel
    ff2 kernel [d_ff, d] P("model")                                      row-parallel

A column-parallel layer needs no communication (each device computes its heads or its
hidden units); the row-parallel layer after it gives partial sums that one all-reduce
adds. So the forward pass of a block has one all-reduce after attention and one after
the feed-forward network, which the SPMD partitioner inserts from the specs alone
(jit_compile(step, mesh=..., in_shardings=..., out_shardings=...)); embeddings, layer
norms and the output layer are replicated. Adam's slots take the parameters' specs.
The backward pass adds two more per block (the input gradients of the column-parallel
layers: query, key and value's summed before their one all-reduce).

The same step runs unpartitioned on one device; the script trains both from the same
initial parameters on the same batches and prints the two loss curves side by side and
their largest relative difference (f32 rounding: the partial sums are added in another
order). Dropout is off by default so that the two runs see the same numbers
(`--dropout 0.1` trains with it; its masks are a function of the step's seed).

    python examples/train_transformer_tp.py [--steps 10] [--devices 2]
    mpirun -n 2 python examples/train_transformer_tp.py     # one device per MPI rank
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_transformer import Vocab, batches, make_corpus  # noqa: E402
from transformer_model import Config, init_params, loss_fn  # noqa: E402

import xlapy  # noqa: E402
from xlapy.frontend import optimizers  # noqa: E402
from xlapy.frontend.distribute import Mesh, PartitionSpec as P  # noqa: E402

# small enough for CI; the corpus's vocabulary fills in vocab_size
SMALL = dict(seq_len=16, d_model=32, num_heads=4, num_layers=2, d_ff=64)


def make_config(vocab_size: int, dropout: float = 0.0, **sizes) -> Config:
    return Config(vocab_size=vocab_size, dropout=dropout, **{**SMALL, **sizes})


def block_specs(axis: str = "model") -> dict:
    """Megatron's layout of one block (transformer_model.init_params' names)."""
    column = {"kernel": P(None, axis), "bias": P(axis)}     # output dimension split
    return {"ln1": None, "ln2": None,
            "attention": {"query": column, "key": column, "value": column,
                          "output": {"kernel": P(axis), "bias": None}},   # row-parallel
            "ff1": column,
            "ff2": {"kernel": P(axis), "bias": None}}                    # row-parallel


def param_specs(params, axis: str = "model") -> dict:
    """A spec per parameter subtree: the blocks as block_specs, the rest replicated."""
    return {k: block_specs(axis) if k.startswith("block") else None for k in params}


def state_specs(state, specs) -> dict:
    """Adam's state: its slots shaped (and so split) like the parameters."""
    return {k: None if k == "iterations" else specs for k in state}


def make_train_step(config: Config, optimizer):
    """(params, opt_state, batch, seed) -> (params, opt_state, loss), as in
    train_transformer.make_train_step."""
    def train_step(params, opt_state, batch, seed):
        loss, grads = xlapy.value_and_grad(loss_fn)(params, batch, config,
                                                     config.dropout > 0, seed)
        params, opt_state = optimizer.apply(params, grads, opt_state)
        return params, opt_state, loss
    return train_step


def tensor_parallel(step, mesh: Mesh, params, opt_state):
    specs = param_specs(params)
    st = state_specs(opt_state, specs)
    return xlapy.jit_compile(step, mesh=mesh, in_shardings=(specs, st, None, None),
                             out_shardings=(specs, st, None))


def data(config_sizes: dict | None = None, batch: int = 8, seed: int = 0):
    """(config, a stream of [batch, seq_len + 1] windows) on train_transformer's corpus."""
    rng = np.random.default_rng(seed)
    text = make_corpus(rng, 400)
    vocab = Vocab(text)
    config = make_config(len(vocab), **(config_sizes or {}))
    return config, batches(vocab.encode(text), batch, config.seq_len, rng)


def main(steps: int = 10, devices: int = 2, verbose: bool = True, dropout: float = 0.0,
         learning_rate: float = 3e-3, seed: int = 0):
    """Trains on `devices` (tensor parallel) and on one device; returns both loss lists."""
    config, stream = data({"dropout": dropout}, seed=seed)
    mesh = Mesh(np.arange(devices), ("model",))
    optimizer = optimizers.Adam(learning_rate)
    params0 = init_params(config, seed)
    state0 = optimizer.init(params0)
    step = make_train_step(config, optimizer)
    tp_step = tensor_parallel(step, mesh, params0, state0)
    one_step = xlapy.jit_compile(step)
    tp, one = (params0, state0), (params0, state0)
    tp_losses, one_losses = [], []
    if verbose:
        print(f"tensor parallel on {devices} devices"
              f"{' (MPI ranks)' if tp_step.distributed else ''} vs 1 device "
              f"({config.num_layers} layers, d_model {config.d_model}, {config.num_heads} "
              f"heads, d_ff {config.d_ff}, vocabulary {config.vocab_size})")
        print(f"{'step':>4} {'loss, ' + str(devices) + ' devices':>18} {'loss, 1 device':>16}")
    for i in range(steps):
        batch = next(stream)
        step_seed = np.array([seed, i], np.int32)
        *tp, tp_loss = tp_step(*tp, batch, step_seed)
        *one, one_loss = one_step(*one, batch, step_seed)
        tp_losses.append(float(tp_loss))
        one_losses.append(float(one_loss))
        if verbose:
            print(f"{i:>4} {tp_losses[-1]:>18.6f} {one_losses[-1]:>16.6f}")
    return tp_losses, one_losses


def forward_module(devices: int = 2):
    """The partitioned HLO of the loss (the forward pass) on `devices` devices."""
    config, stream = data()
    mesh = Mesh(np.arange(devices), ("model",))
    params = init_params(config, 0)
    forward = xlapy.jit_compile(lambda p, b: loss_fn(p, b, config), mesh=mesh,
                                in_shardings=(param_specs(params), None),
                                backend="interpreter")
    return forward.compile(params, next(stream)).module, config


def train_step_module(devices: int = 2):
    """The partitioned HLO of the whole training step (forward, backward, Adam)."""
    config, stream = data()
    optimizer = optimizers.Adam(3e-3)
    params = init_params(config, 0)
    state = optimizer.init(params)
    specs = param_specs(params)
    st = state_specs(state, specs)
    step = xlapy.jit_compile(make_train_step(config, optimizer),
                             mesh=Mesh(np.arange(devices), ("model",)),
                             in_shardings=(specs, st, None, None), out_shardings=(specs, st, None),
                             backend="interpreter")
    return step.compile(params, state, next(stream), np.zeros(2, np.int32)).module, config


def collectives_per_block(devices: int = 2, whole_step: bool = False) -> dict:
    """Collective opcodes in the partitioned forward pass (or the whole training step),
    per transformer block."""
    module, config = (train_step_module if whole_step else forward_module)(devices)
    counts: dict = {}
    for instr in module.instructions():
        if instr.opcode in ("all-reduce", "all-gather", "all-to-all", "collective-permute",
                            "reduce-scatter"):
            counts[instr.opcode] = counts.get(instr.opcode, 0) + 1
    return {k: v / config.num_layers for k, v in counts.items()}


def largest_relative_difference(a, b) -> float:
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.0)
    args = parser.parse_args()
    from xlapy.frontend.sharding import _under_mpirun
    devices = _under_mpirun() or args.devices
    rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    tp, one = main(args.steps, devices, verbose=rank == 0, dropout=args.dropout)
    if rank == 0:
        print(f"largest relative difference: {largest_relative_difference(tp, one):.2e}")
