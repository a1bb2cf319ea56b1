"""XLA's full layout syntax: `{1,0:T(8,128)(2,1)S(1)E(4)}`.

A layout is the minor-to-major order of the dimensions, then optionally a colon
and items, each a letter code with parenthesized arguments:

    T(8,128)(2,1)   tiles, outermost first (one parenthesized group per tile;
                    `*` is a combined dimension, as in T(2,*)(4))
    S(1)            memory space
    E(4)            element size in bits
    L(n)            tail padding alignment, in elements
    D(D,C)          dimension level types (sparse layouts)
    #(s32) *(s32)   index and pointer types of sparse layouts
    SC(...)         split configs;  M(n) dynamic-shape metadata prefix bytes;
    P(...)          the physical shape of a sparse array

`parse_layout("1,0:T(8,128)(2,1)")` checks the text and returns the order and
the items in canonical spelling (no spaces); Shape keeps that text in
`layout_extra` and prints it back. Only the order computes; `tiles`,
`memory_space` and `element_size_bits` read the items for whoever needs them.
"""
from __future__ import annotations

import re

__all__ = ["LayoutError", "parse_layout", "tiles", "memory_space", "element_size_bits"]


class LayoutError(ValueError):
    """A layout whose text is not XLA's layout syntax."""


# Letter codes XLA writes after the colon; T takes several groups, the rest one.
_CODES = ("SC", "T", "S", "E", "L", "D", "M", "P", "#", "*")
_GROUP = r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)"     # one (...) group, one nested level
_ITEM_RE = re.compile(r"(SC|T|S|E|L|D|M|P|#|\*)((?:" + _GROUP + r")+)")
_TILE_DIM_RE = re.compile(r"[0-9]+|\*")


def parse_layout(text: str) -> tuple[tuple[int, ...], str]:
    """`"1,0:T(8,128)S(1)"` (the text inside the braces) -> ((1, 0), "T(8,128)S(1)")."""
    order_text, colon, extra = text.partition(":")
    order_text = order_text.strip()
    if order_text and not re.fullmatch(r"[0-9]+(\s*,\s*[0-9]+)*", order_text):
        raise LayoutError(f"a layout starts with its minor-to-major dimension numbers, "
                          f"got {{{text}}}")
    order = tuple(int(v) for v in re.findall(r"[0-9]+", order_text))
    if not colon:
        return order, ""
    compact = re.sub(r"\s+", "", extra)
    pos, seen = 0, set()
    while pos < len(compact):
        m = _ITEM_RE.match(compact, pos)
        if m is None:
            raise LayoutError(f"unknown layout item at {compact[pos:]!r} in {{{text}}} "
                              f"(expected one of {', '.join(c + '(...)' for c in _CODES)})")
        code = m.group(1)
        if code in seen:
            raise LayoutError(f"layout item {code}(...) is given twice in {{{text}}}")
        seen.add(code)
        groups = re.findall(_GROUP, m.group(2))
        if code != "T" and len(groups) != 1:
            raise LayoutError(f"layout item {code} takes one (...) group in {{{text}}}")
        if code == "T":
            for g in groups:
                if not all(_TILE_DIM_RE.fullmatch(d) for d in g.split(",")):
                    raise LayoutError(f"a tile is a list of sizes or '*', got T({g})")
        if code in ("S", "E", "L", "M") and not groups[0].isdigit():
            raise LayoutError(f"layout item {code} takes one number, got {code}({groups[0]})")
        pos = m.end()
    return order, compact


def _items(extra: str) -> dict[str, list[str]]:
    return {m.group(1): re.findall(_GROUP, m.group(2)) for m in _ITEM_RE.finditer(extra)}


def tiles(extra: str) -> tuple[tuple[int | None, ...], ...]:
    """The tiles of `layout_extra`, outermost first; None stands for `*`."""
    return tuple(tuple(None if d == "*" else int(d) for d in g.split(","))
                 for g in _items(extra).get("T", []))


def memory_space(extra: str) -> int:
    """S(n) of `layout_extra`; 0 (the default memory) when absent."""
    return int(_items(extra).get("S", ["0"])[0])


def element_size_bits(extra: str) -> int:
    """E(n) of `layout_extra`; 0 (the element type's own size) when absent."""
    return int(_items(extra).get("E", ["0"])[0])
