"""Tensor: the symbolic value a traced function computes with.

A Tensor is an abstract value (a shape and a numpy dtype) plus where it comes
from: output `index` of a traced `node`, or ENTRY parameter `index` when
`node` is None. It has no data. Python operators and the numpy-like methods
(`.T`, `.reshape`, `.sum`, ...) call the functions of `frontend.ops`, so
`x @ w + b` records MatMul and Add nodes exactly as `ops.add(ops.matmul(x, w), b)`
would.

`==` and `!=` are elementwise (as in numpy and TensorFlow), so tensors hash by
identity.
"""
from __future__ import annotations

import math

import numpy as np


def _ops():
    from . import ops          # ops imports this module: bind late
    return ops


class Tensor:
    """A traced value: `shape` (tuple of ints) and `dtype` (numpy dtype)."""

    # numpy_array + tensor: numpy's ufuncs step aside, Python calls Tensor.__radd__.
    __array_ufunc__ = None
    __array_priority__ = 1000
    __hash__ = object.__hash__

    def __init__(self, graph, node, index: int, shape: tuple[int, ...], dtype: np.dtype):
        self.graph = graph
        self.node = node
        self.index = index
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    # --- abstract value ------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def aval_text(self) -> str:
        """"float32[2,3]": dtype and shape, as error messages print it."""
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        origin = f"{self.node.op}:{self.index}" if self.node else f"param {self.index}"
        return f"Tensor({self.aval_text()}, {origin})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self):
        raise TypeError("a traced Tensor has no value at trace time: use ops.where() "
                        "instead of Python `if`/`and`/`or` on tensors")

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __array__(self, *args, **kwargs):
        raise TypeError(f"a traced Tensor ({self.aval_text()}) cannot become a numpy array "
                        "inside jit_compile: use frontend.ops functions on it")

    # --- arithmetic ----------------------------------------------------------------
    def __add__(self, other): return _ops().add(self, other)
    def __radd__(self, other): return _ops().add(other, self)
    def __sub__(self, other): return _ops().subtract(self, other)
    def __rsub__(self, other): return _ops().subtract(other, self)
    def __mul__(self, other): return _ops().multiply(self, other)
    def __rmul__(self, other): return _ops().multiply(other, self)
    def __truediv__(self, other): return _ops().divide(self, other)
    def __rtruediv__(self, other): return _ops().divide(other, self)
    def __floordiv__(self, other): return _ops().floordiv(self, other)
    def __rfloordiv__(self, other): return _ops().floordiv(other, self)
    def __mod__(self, other): return _ops().floormod(self, other)
    def __rmod__(self, other): return _ops().floormod(other, self)
    def __pow__(self, other): return _ops().pow(self, other)
    def __rpow__(self, other): return _ops().pow(other, self)
    def __matmul__(self, other): return _ops().matmul(self, other)
    def __rmatmul__(self, other): return _ops().matmul(other, self)
    def __neg__(self): return _ops().negative(self)
    def __pos__(self): return self
    def __abs__(self): return _ops().abs(self)
    def __invert__(self): return _ops().logical_not(self)
    def __and__(self, other): return _ops().logical_and(self, other)
    def __rand__(self, other): return _ops().logical_and(other, self)
    def __or__(self, other): return _ops().logical_or(self, other)
    def __ror__(self, other): return _ops().logical_or(other, self)

    # --- comparisons (elementwise) ---------------------------------------------------
    def __eq__(self, other): return _ops().equal(self, other)
    def __ne__(self, other): return _ops().not_equal(self, other)
    def __lt__(self, other): return _ops().less(self, other)
    def __le__(self, other): return _ops().less_equal(self, other)
    def __gt__(self, other): return _ops().greater(self, other)
    def __ge__(self, other): return _ops().greater_equal(self, other)

    # --- indexing and numpy-like methods ----------------------------------------------
    def __getitem__(self, index): return _ops().getitem(self, index)

    @property
    def T(self) -> "Tensor":
        return _ops().transpose(self)

    def reshape(self, *shape) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _ops().reshape(self, shape)

    def astype(self, dtype) -> "Tensor":
        return _ops().cast(self, dtype)

    def sum(self, axis=None, keepdims=False) -> "Tensor":
        return _ops().reduce_sum(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False) -> "Tensor":
        return _ops().reduce_mean(self, axis, keepdims)

    def max(self, axis=None, keepdims=False) -> "Tensor":
        return _ops().reduce_max(self, axis, keepdims)

    def min(self, axis=None, keepdims=False) -> "Tensor":
        return _ops().reduce_min(self, axis, keepdims)

    def prod(self, axis=None, keepdims=False) -> "Tensor":
        return _ops().reduce_prod(self, axis, keepdims)

    def argmax(self, axis=None) -> "Tensor":
        return _ops().argmax(self, axis)

    def argmin(self, axis=None) -> "Tensor":
        return _ops().argmin(self, axis)

    def transpose(self, *perm) -> "Tensor":
        if len(perm) == 1 and isinstance(perm[0], (tuple, list)):
            perm = perm[0]
        return _ops().transpose(self, perm or None)
