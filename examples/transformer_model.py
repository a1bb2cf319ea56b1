"""A small decoder-only transformer as pure functions (the model of train_transformer.py).

    config = Config(vocab_size=40)
    params = init_params(config, seed=0)                  # a dict pytree of numpy arrays
    logits = forward(params, tokens, config)              # inside a trace (jit_compile)
    loss = loss_fn(params, batch, config, training=True, seed=step_seed)

Pre-LayerNorm blocks: x + MHA(LN(x)) with a causal mask, then x + FF(LN(x)) with a
GELU between two Dense layers; learned position embeddings; a final LayerNorm and a
Dense head to the vocabulary. Built from frontend.nn's layers (Keras's initializers)
and ops.random's dropout, so everything is a pure function of (params, inputs, seed):
another program (tensor-parallel training, say) can import this file and shard the
parameter dict (`block{i}/attention/{query,key,value,output}/{kernel,bias}`,
`block{i}/ff1/kernel`, ... see `init_params`) without touching the maths.

Dropout (rate `config.dropout`, training only) follows the embedding sum, the
attention probabilities, the attention output and the feed-forward output; every
dropout gets its own key, split from the step's `seed` ([2] integers). `embed`,
`block` and `head` are forward's pieces (pipeline stages use them).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlapy.frontend import nn, ops, pytree


@dataclass(frozen=True)
class Config:
    vocab_size: int
    seq_len: int = 64          # tokens per training sequence (and the model's context)
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.1


def _layers(config: Config):
    """The layer objects (configuration only; parameters live in the dict)."""
    head_dim = config.d_model // config.num_heads
    return {
        "embed": nn.Embedding(config.vocab_size, config.d_model),
        "ln1": nn.LayerNormalization(), "ln2": nn.LayerNormalization(),
        "attention": nn.MultiHeadAttention(config.num_heads, head_dim, dropout=config.dropout),
        "ff1": nn.Dense(config.d_ff, activation="gelu"), "ff2": nn.Dense(config.d_model),
        "ln_f": nn.LayerNormalization(), "head": nn.Dense(config.vocab_size),
    }


def init_params(config: Config, seed=0) -> dict:
    """{"embed", "position", "block0", ..., "ln_f", "head"}: numpy float32 arrays."""
    if config.d_model % config.num_heads:
        raise ValueError(f"d_model {config.d_model} must be a multiple of num_heads "
                         f"{config.num_heads}")
    L = _layers(config)
    seeds = iter(nn.split_seed(seed, 4 + 4 * config.num_layers))
    d = config.d_model
    params = {"embed": L["embed"].init(next(seeds)),
              "position": nn.random_uniform(next(seeds), (config.seq_len, d)),
              "ln_f": L["ln_f"].init(None, (d,)),
              "head": L["head"].init(next(seeds), (d,))}
    for i in range(config.num_layers):
        params[f"block{i}"] = {
            "ln1": L["ln1"].init(None, (d,)),
            "attention": L["attention"].init(next(seeds), (None, None, d)),
            "ln2": L["ln2"].init(None, (d,)),
            "ff1": L["ff1"].init(next(seeds), (d,)),
            "ff2": L["ff2"].init(next(seeds), (config.d_ff,)),
        }
    return params


def count_params(params) -> int:
    leaves, _ = pytree.flatten(params)
    return int(sum(np.size(p) for p in leaves))


def _dropout_keys(seed, count: int):
    keys = ops.random.split_key(seed, count)
    return [ops.reshape(ops.slice(keys, [i, 0], [1, 2]), [2]) for i in range(count)]


def forward(params, tokens, config: Config, training: bool = False, seed=None):
    """Logits [batch, time, vocab] for int32 tokens [batch, time] (time <= seq_len)."""
    tokens = ops.to_tensor(tokens)
    t = tokens.shape[1]
    if t > config.seq_len:
        raise ValueError(f"sequence of {t} tokens is longer than the context {config.seq_len}")
    drop = training and config.dropout > 0
    if drop and seed is None:
        raise ValueError("training with dropout needs seed= (a [2] seed per step)")
    keys = _dropout_keys(seed, 1 + 3 * config.num_layers) if drop else None
    x = embed(params, tokens, config, keys[0] if drop else None)
    for i in range(config.num_layers):
        x = block(params[f"block{i}"], x, config, keys[1 + 3 * i:4 + 3 * i] if drop else None)
    return head(params, x, config)


# The pieces of `forward`, for programs that place them apart (pipeline stages). A
# dropout key (or the block's three: attention probabilities, attention output,
# feed-forward output) turns dropout on; None leaves it off.

def embed(params, tokens, config: Config, key=None):
    """Token plus position embeddings [batch, time, d_model]."""
    L = _layers(config)
    tokens = ops.to_tensor(tokens)
    x = L["embed"].apply(params["embed"], tokens)
    x = x + ops.slice(params["position"], [0, 0], [tokens.shape[1], config.d_model])
    return x if key is None else ops.dropout(x, config.dropout, seed=key)


def block(p, x, config: Config, keys=None):
    """One pre-LN block: x + MHA(LN(x)), then x + FF(LN(x))."""
    L = _layers(config)
    drop = keys is not None
    h = L["ln1"].apply(p["ln1"], x)
    a = L["attention"].apply(p["attention"], h, h, use_causal_mask=True, training=drop,
                             seed=keys[0] if drop else None)
    x = x + (ops.dropout(a, config.dropout, seed=keys[1]) if drop else a)
    h = L["ln2"].apply(p["ln2"], x)
    f = L["ff2"].apply(p["ff2"], L["ff1"].apply(p["ff1"], h))
    return x + (ops.dropout(f, config.dropout, seed=keys[2]) if drop else f)


def head(params, x, config: Config):
    """The final LayerNorm and the vocabulary projection: logits."""
    L = _layers(config)
    return L["head"].apply(params["head"], L["ln_f"].apply(params["ln_f"], x))


def loss_fn(params, batch, config: Config, training: bool = False, seed=None):
    """Mean next-token cross-entropy of int32 batch [B, T + 1] (inputs [:, :-1],
    targets [:, 1:])."""
    batch = ops.to_tensor(batch)
    b, t1 = batch.shape
    inputs = ops.slice(batch, [0, 0], [b, t1 - 1])
    targets = ops.slice(batch, [0, 1], [b, t1 - 1])
    logits = forward(params, inputs, config, training, seed)
    return ops.reduce_mean(ops.sparse_softmax_cross_entropy_with_logits(targets, logits))


# --- saving and restoring ----------------------------------------------------------------------

def flat_params(params, prefix=""):
    """("block0/attention/query/kernel", array) pairs, sorted by name."""
    for k in sorted(params):
        v = params[k]
        if isinstance(v, dict):
            yield from flat_params(v, f"{prefix}{k}/")
        else:
            yield f"{prefix}{k}", v


def save_params(path, params, config: Config) -> None:
    """np.savez of every array under its "a/b/c" name, plus the config."""
    arrays = dict(flat_params(params))
    arrays["__config__"] = np.array(repr(config))
    np.savez(path, **arrays)


def load_params(path, config: Config) -> dict:
    """The parameters saved by save_params; their names and shapes must be config's."""
    like = init_params(config, 0)
    with np.load(path) as data:
        saved = {k: data[k] for k in data.files}
    saved.pop("__config__", None)
    expected = dict(flat_params(like))
    if set(saved) != set(expected):
        missing = sorted(set(expected) - set(saved))[:3]
        extra = sorted(set(saved) - set(expected))[:3]
        raise ValueError(f"{path}: parameters do not match the model (missing {missing}, "
                         f"unexpected {extra})")
    for name, ref in expected.items():
        if saved[name].shape != ref.shape:
            raise ValueError(f"{path}: {name} has shape {saved[name].shape}, the model "
                             f"wants {ref.shape}")

    def rebuild(tree, prefix=""):
        return {k: rebuild(v, f"{prefix}{k}/") if isinstance(v, dict)
                else saved[f"{prefix}{k}"] for k, v in tree.items()}
    return rebuild(like)
