"""Hypothesis strategies that break real HLO text in the ways people and tools do.

`mutated_corpus_texts()` takes a file of the corpus (XLA's own output) and
applies one or two mutations: a token deleted, duplicated or swapped with
another, the file truncated, a dimension or element type changed, an opcode
replaced by an unknown one, an absurdly large dimension, deep nesting of
brackets, or garbage bytes. The result is text (str); invalid UTF-8 is
represented with surrogate escapes, which is what reading such a file with
`errors="surrogateescape"` gives.
"""
from __future__ import annotations

import re

from hypothesis import strategies as st

from tests.corpus_util import hlo_paths

# Names (with % and dots), numbers, and every other single non-space character.
TOKEN = re.compile(r"%?[A-Za-z_][\w.\-]*|-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|\S")
SHAPE_DIM = re.compile(r"(?<=[\[,])\d+(?=[\],])")
ELEMENT_TYPE = re.compile(r"\b(f32|f16|f64|bf16|s32|s64|s8|u8|u32|pred)\[")
OPCODE = re.compile(r"(?<=\] )[a-z][a-z\-]*(?=\()")
HUGE = ("99999999999999999999999", "9223372036854775807", "4294967296", "-1", "1000000000")


def small_corpus_texts(max_chars: int = 6000) -> list[str]:
    """The corpus files short enough to mutate and re-parse quickly."""
    texts = [p.read_text() for p in hlo_paths()]
    return sorted((t for t in texts if len(t) <= max_chars), key=len)


def _spans(pattern, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


@st.composite
def _replace_one(draw, text: str, pattern, replacements) -> str:
    spans = _spans(pattern, text)
    if not spans:
        return text
    start, end = draw(st.sampled_from(spans))
    return text[:start] + draw(replacements) + text[end:]


@st.composite
def _token_edit(draw, text: str) -> str:
    spans = _spans(TOKEN, text)
    if not spans:
        return text
    i = draw(st.integers(0, len(spans) - 1))
    start, end = spans[i]
    kind = draw(st.sampled_from(["delete", "duplicate", "swap"]))
    if kind == "delete":
        return text[:start] + text[end:]
    if kind == "duplicate":
        return text[:end] + " " + text[start:end] + text[end:]
    j = draw(st.integers(0, len(spans) - 1))
    (a, b), (c, d) = sorted([spans[i], spans[j]])
    if b > c:
        return text
    return text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]


@st.composite
def _insert_at_random(draw, text: str, payload) -> str:
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(payload) + text[at:]


NESTING = st.sampled_from(["(", "{", "[", "({", "f32["]).flatmap(
    lambda opener: st.integers(50, 20000).map(lambda n: opener * n))
# Bytes that are not UTF-8, as `surrogateescape` decodes them.
BAD_UTF8 = st.binary(min_size=1, max_size=8).map(
    lambda b: (b"\xff\xfe" + b).decode("utf-8", errors="surrogateescape"))
GARBAGE = st.one_of(BAD_UTF8, st.text(max_size=12), st.sampled_from(["\x00", "\t\r", "\u2028",
                                                                       "/*", "\"", "ENTRY"]))


def mutation(text: str) -> st.SearchStrategy[str]:
    """One mutation of `text` (see the module docstring)."""
    return st.one_of(
        _token_edit(text),
        st.integers(0, len(text)).map(lambda n: text[:n]),                     # truncated
        _replace_one(text, SHAPE_DIM, st.sampled_from(("0", "1", "7", "3") + HUGE)),
        _replace_one(text, ELEMENT_TYPE, st.sampled_from(["f32[", "s32[", "pred[", "c64[",
                                                          "f8[", "token[", "tuple["])),
        _replace_one(text, OPCODE, st.sampled_from(["frobnicate", "add", "tuple", "parameter",
                                                    "constant", "fusion", "while", "reduce"])),
        _insert_at_random(text, NESTING),
        _insert_at_random(text, GARBAGE),
    )


@st.composite
def mutated_corpus_texts(draw, texts: list[str]) -> str:
    """A corpus text with one or two mutations applied."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 2))):
        text = draw(mutation(text))
    return text
