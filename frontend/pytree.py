"""Pytrees: nested tuples, lists and dicts of leaves, flattened and rebuilt.

`flatten(tree)` gives the leaves in order (dict keys sorted) and a hashable
`treedef` describing the nesting; `unflatten(treedef, leaves)` rebuilds it.
None is an empty node (no leaf), as in JAX; named tuples keep their type.
"""
from __future__ import annotations

from typing import Any, Callable

LEAF = ("*",)


def flatten(tree, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, tuple]:
    leaves: list = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def _flatten(tree, leaves: list, is_leaf) -> tuple:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return LEAF
    if tree is None:
        return ("none",)
    if isinstance(tree, tuple):
        kind = type(tree) if hasattr(tree, "_fields") else tuple
        return ("tuple", kind, tuple(_flatten(t, leaves, is_leaf) for t in tree))
    if isinstance(tree, list):
        return ("list", tuple(_flatten(t, leaves, is_leaf) for t in tree))
    if isinstance(tree, dict):
        try:
            keys = tuple(sorted(tree))
        except TypeError:
            raise TypeError(f"pytree dict keys must be sortable, got {list(tree)}") from None
        return ("dict", keys, tuple(_flatten(tree[k], leaves, is_leaf) for k in keys))
    leaves.append(tree)
    return LEAF


def unflatten(treedef: tuple, leaves) -> Any:
    it = iter(leaves)
    result = _unflatten(treedef, it)
    if next(it, _END) is not _END:
        raise ValueError("unflatten: more leaves than the tree has places")
    return result


_END = object()


def _unflatten(treedef: tuple, it):
    tag = treedef[0]
    if treedef == LEAF:
        leaf = next(it, _END)
        if leaf is _END:
            raise ValueError("unflatten: fewer leaves than the tree has places")
        return leaf
    if tag == "none":
        return None
    if tag == "tuple":
        children = [_unflatten(t, it) for t in treedef[2]]
        return treedef[1](*children) if treedef[1] is not tuple else tuple(children)
    if tag == "list":
        return [_unflatten(t, it) for t in treedef[1]]
    if tag == "dict":
        return {k: _unflatten(t, it) for k, t in zip(treedef[1], treedef[2])}
    raise ValueError(f"unflatten: bad treedef {treedef!r}")


def describe(treedef: tuple) -> str:
    """A short text form of a treedef for error messages: (*, [*, *], {a: *})."""
    tag = treedef[0]
    if treedef == LEAF:
        return "*"
    if tag == "none":
        return "None"
    if tag == "tuple":
        inner = ", ".join(describe(t) for t in treedef[2])
        return f"({inner},)" if len(treedef[2]) == 1 else f"({inner})"
    if tag == "list":
        return "[" + ", ".join(describe(t) for t in treedef[1]) + "]"
    return "{" + ", ".join(f"{k!r}: {describe(t)}" for k, t in zip(treedef[1], treedef[2])) + "}"
