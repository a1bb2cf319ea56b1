"""The signature of a call to a jit function: what decides whether a compiled
executable may be reused.

    key = (pytree structure of the dynamic arguments,
           (shape, dtype) of every leaf,
           values of the static arguments)

`make_signature` also checks the call itself (the argument count against the
function's Python signature) and turns the leaves into numpy arrays.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import dtypes, pytree
from .tensor import Tensor


def is_number_list(value) -> bool:
    """A (nested) non-empty list of plain numbers: one array leaf, not a pytree."""
    if not isinstance(value, list) or not value:
        return False
    return all(isinstance(v, numbers.Number) and not isinstance(v, np.ndarray)
               or is_number_list(v) for v in value)


def _as_leaf_array(leaf, i: int) -> np.ndarray:
    try:
        return dtypes.as_array(leaf)
    except (TypeError, ValueError) as e:
        raise TypeError(f"argument leaf {i} ({type(leaf).__name__} {leaf!r:.40}) is not an "
                        f"array: {e}") from None


class CallSignature:
    """The arguments of one call, split into array leaves and static values."""

    def __init__(self, name, static, treedef, arrays, n_args):
        self.name = name
        self.static = static                  # ((position, value), ...)
        self.treedef = treedef
        self.arrays = arrays
        self.n_args = n_args
        self.avals = tuple((a.shape, a.dtype.str) for a in arrays)
        self.key = (treedef, self.avals, static)

    def rebuild(self, leaves):
        """(args, kwargs) with `leaves` in place of the arrays and the statics put back."""
        dyn_args, kwargs = pytree.unflatten(self.treedef, leaves)
        args = list(dyn_args)
        for pos, value in self.static:
            args[pos] = value
        return tuple(args), kwargs

    def check_same(self, other: "CallSignature") -> None:
        """Raises a clear TypeError/ValueError when `other` does not fit this signature."""
        if other.key == self.key:
            return
        if other.static != self.static:
            raise ValueError(f"{self.name}: static arguments {other.static} differ from "
                             f"the compiled {self.static}")
        if other.treedef != self.treedef:
            raise TypeError(f"{self.name}: argument structure {pytree.describe(other.treedef)} "
                            f"differs from the compiled {pytree.describe(self.treedef)}")
        for i, (want, got) in enumerate(zip(self.avals, other.avals)):
            if want[1] != got[1]:
                raise TypeError(f"{self.name}: argument leaf {i} has dtype "
                                f"{np.dtype(got[1]).name}, the compiled function takes "
                                f"{np.dtype(want[1]).name}")
            if want[0] != got[0]:
                raise ValueError(f"{self.name}: argument leaf {i} has shape {list(got[0])}, "
                                 f"the compiled function takes {list(want[0])}")


def check_arguments(name, py_signature, args, kwargs) -> None:
    """TypeError when the call does not fit the function's Python signature.

    Only needed on a cache miss: a call with other arguments has another pytree
    structure, hence another key, so it never hits an entry made by a valid call.
    """
    if py_signature is not None:
        try:
            py_signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{name}(): {e}") from None


def make_signature(name, static_argnums, args, kwargs) -> CallSignature | None:
    """The call's signature, or None when an argument is a traced Tensor (the call
    comes from inside another trace)."""
    n = len(args)
    static_pos = set()
    for i in static_argnums:
        if not -n <= i < n:
            raise ValueError(f"{name}(): static_argnums has {i} but the call passes "
                             f"{n} positional arguments")
        static_pos.add(i % n)
    static = tuple((i, args[i]) for i in sorted(static_pos))
    for i, value in static:
        try:
            hash(value)
        except TypeError:
            raise TypeError(f"{name}(): static argument {i} must be hashable, got "
                            f"{type(value).__name__}") from None
    dyn_args = tuple(None if i in static_pos else a for i, a in enumerate(args))
    leaves, treedef = pytree.flatten((dyn_args, dict(kwargs)), is_leaf=is_number_list)
    if any(isinstance(leaf, Tensor) for leaf in leaves):
        return None
    arrays = [_as_leaf_array(leaf, i) for i, leaf in enumerate(leaves)]
    return CallSignature(name, static, treedef, arrays, n)
