"""Training a small decoder-only transformer on characters, end to end in xlapy.

The corpus is made here (no downloads): sentences from a tiny grammar ("the old cat
sees a red ball near the house.") whose structure a 2-layer model learns quickly.
The model is examples/transformer_model.py (causal multi-head attention, pre-LN
blocks, dropout); one jit_compile'd step holds forward, backward and the Adam
update. It prints the loss curve and tokens/s, can save and restore its parameters
(np.savez), and samples text at the end (ops.random.stateless_categorical).

    python3 examples/train_transformer.py --steps 300
    python3 examples/train_transformer.py --steps 100 --save /tmp/tf.npz
    python3 examples/train_transformer.py --steps 50 --restore /tmp/tf.npz
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transformer_model import (Config, count_params, flat_params, forward, init_params,  # noqa: E402
                               load_params, loss_fn, save_params)

from xlapy.frontend import jit_compile, ops, optimizers, value_and_grad  # noqa: E402

_SUBJECTS = ["the cat", "a dog", "the old man", "my sister", "the bird", "a small child"]
_VERBS = ["sees", "finds", "likes", "paints", "carries", "wants"]
_ADJECTIVES = ["red", "big", "quiet", "green", "tiny", "bright"]
_OBJECTS = ["ball", "house", "tree", "river", "book", "hat"]
_PLACES = ["near the house", "in the garden", "by the river", "under the tree", "at home"]


def make_corpus(rng, sentences: int = 2000) -> str:
    """Sentences of the grammar: subject verb [a|the] [adjective] object [place]."""
    out = []
    for _ in range(sentences):
        words = [rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(["a", "the"])]
        if rng.random() < 0.6:
            words.append(rng.choice(_ADJECTIVES))
        words.append(rng.choice(_OBJECTS))
        if rng.random() < 0.5:
            words.append(rng.choice(_PLACES))
        out.append(" ".join(words) + ".")
    return " ".join(out)


class Vocab:
    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.index[c] for c in text], np.int32)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def make_train_step(config: Config, optimizer):
    """The compiled step: (params, opt_state, batch, seed) -> (params, opt_state, loss)."""
    @jit_compile
    def train_step(params, opt_state, batch, seed):
        loss, grads = value_and_grad(loss_fn)(params, batch, config, True, seed)
        params, opt_state = optimizer.apply(params, grads, opt_state)
        return params, opt_state, loss
    return train_step


def make_eval_loss(config: Config):
    return jit_compile(lambda params, batch: loss_fn(params, batch, config))


def batches(data: np.ndarray, batch: int, length: int, rng):
    """Random windows of length + 1 tokens, forever."""
    while True:
        starts = rng.integers(0, len(data) - length - 1, size=batch)
        yield np.stack([data[s:s + length + 1] for s in starts])


def sample(params, config: Config, vocab: Vocab, prompt: str, length: int, seed: int = 0,
           temperature: float = 0.8) -> str:
    """`length` characters after `prompt`, drawn one at a time from the model."""
    @jit_compile
    def next_token(params, window, position, key):
        logits = forward(params, window, config)                       # [1, T, V]
        row = ops.gather(ops.reshape(logits, [config.seq_len, config.vocab_size]), position)
        return ops.random.stateless_categorical(ops.reshape(row, [1, -1]) / temperature,
                                                1, key, dtype="int32")
    ids = list(vocab.encode(prompt))
    for i in range(length):
        context = ids[-config.seq_len:]
        window = np.zeros((1, config.seq_len), np.int32)
        window[0, :len(context)] = context
        key = np.array([seed, i], np.int32)
        token = next_token(params, window, np.int32(len(context) - 1), key)
        ids.append(int(token[0, 0]))
    return vocab.decode(ids)


def main(steps: int = 300, batch: int = 16, config: Config | None = None,
         learning_rate: float = 3e-3, print_every: int = 25, save: str | None = None,
         restore: str | None = None, sample_chars: int = 120, seed: int = 0,
         verbose: bool = True):
    """Trains; returns (losses per step, held-out loss before and after, params)."""
    rng = np.random.default_rng(seed)
    text = make_corpus(rng)
    vocab = Vocab(text)
    data = vocab.encode(text)
    split = int(len(data) * 0.9)
    train, held_out = data[:split], data[split:]
    config = config or Config(vocab_size=len(vocab))
    if config.vocab_size != len(vocab):
        raise ValueError(f"config.vocab_size {config.vocab_size} != corpus vocabulary "
                         f"{len(vocab)}")
    params = load_params(restore, config) if restore else init_params(config, seed)
    optimizer = optimizers.Adam(learning_rate)
    opt_state = optimizer.init(params)
    train_step = make_train_step(config, optimizer)
    eval_loss = make_eval_loss(config)
    eval_batch = next(batches(held_out, 32, config.seq_len, np.random.default_rng(1)))
    before = float(eval_loss(params, eval_batch))
    if verbose:
        print(f"corpus {len(data)} chars, vocabulary {len(vocab)}; model {count_params(params)} "
              f"parameters ({config.num_layers} layers, d_model {config.d_model}, "
              f"{config.num_heads} heads, context {config.seq_len}); held-out loss "
              f"{before:.3f}" + (f" (restored from {restore})" if restore else ""))
    losses = []
    stream = batches(train, batch, config.seq_len, rng)
    t_start = time.perf_counter()
    t_compiled = None
    for step in range(steps):
        step_seed = np.array([seed, step], np.int32)
        params, opt_state, loss = train_step(params, opt_state, next(stream), step_seed)
        losses.append(float(loss))
        if step == 0:
            t_compiled = time.perf_counter()
        if verbose and (step % print_every == 0 or step == steps - 1):
            done = step  # steps after the first (which includes tracing and compiling)
            rate = done * batch * config.seq_len / max(time.perf_counter() - t_compiled,
                                                        1e-9) if done else float("nan")
            print(f"step {step:4d}  loss {losses[-1]:.4f}  {rate:8.0f} tokens/s")
    after = float(eval_loss(params, eval_batch))
    if verbose and steps:
        compile_s = t_compiled - t_start
        run_s = time.perf_counter() - t_compiled
        tokens = (steps - 1) * batch * config.seq_len
        print(f"held-out loss {before:.3f} -> {after:.3f}; first step (trace + compile) "
              f"{compile_s:.1f} s; then {tokens / max(run_s, 1e-9):.0f} tokens/s "
              f"({run_s / max(steps - 1, 1) * 1e3:.1f} ms/step)")
    if save:
        save_params(save, params, config)
        if verbose:
            print(f"saved parameters to {save}")
    if verbose and sample_chars:
        print("sample:", repr(sample(params, config, vocab, "the ", sample_chars, seed)))
    return losses, (before, after), params


def _parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--save", metavar="PATH", help="np.savez the parameters after training")
    p.add_argument("--restore", metavar="PATH", help="start from parameters saved by --save")
    p.add_argument("--sample", type=int, default=120, help="characters to sample at the end")
    p.add_argument("--print-every", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


if __name__ == "__main__":
    args = _parse()
    main(steps=args.steps, batch=args.batch, learning_rate=args.learning_rate,
         print_every=args.print_every, save=args.save, restore=args.restore,
         sample_chars=args.sample, seed=args.seed)
