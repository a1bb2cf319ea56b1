"""The random module generator behind `tests.hlo_strategies.hlo_modules`.

`ModuleGenerator(draw, options).generate()` grows one ENTRY computation with
`hlo.HloBuilder`: it keeps a pool of array-valued instructions and repeatedly
picks an op family (one `_make_*` method each), draws its operands from the
pool (or makes fresh leaves of the shape it needs: a parameter, a constant or
an iota) and appends the result to the pool. Because the builder infers every
shape, an invalid combination raises at once; the makers only draw
combinations that are valid by construction, and `generate` still asserts
`hlo.verify` so a mistake here cannot hide.
"""
from __future__ import annotations

from math import prod

import numpy as np
from hypothesis import strategies as st

from xlapy.hlo import HloBuilder, HloInstruction, HloModule, Shape, verify
from xlapy.hlo.builder import make_window
from tests import hlo_strategies as hs

MAX_PARAMETERS = 5
SMALL_DIMS = (0, 1, 1, 2, 2, 3, 4, 5)


class ModuleGenerator:
    """Draws one module; see the module docstring."""

    def __init__(self, draw, options: "hs.GenOptions"):
        self.draw, self.opt = draw, options
        self.b = HloBuilder("main")
        self.pool: list[HloInstruction] = []
        self._sub_count = 0
        self.makers = [self._make_unary, self._make_unary, self._make_binary,
                       self._make_binary, self._make_binary, self._make_compare,
                       self._make_select, self._make_clamp, self._make_convert,
                       self._make_broadcast, self._make_reshape, self._make_transpose,
                       self._make_slice, self._make_concatenate, self._make_pad,
                       self._make_reverse, self._make_iota, self._make_reduce,
                       self._make_reduce, self._make_dot, self._make_dynamic_slice,
                       self._make_gather, self._make_scatter, self._make_dynamic_update_slice,
                       self._make_sort, self._make_reduce_window]
        if options.control_flow:
            self.makers += [self._make_while, self._make_conditional]

    # --- the driver --------------------------------------------------------------------
    def generate(self) -> HloModule:
        target = self.draw(st.integers(1, self.opt.max_instructions))
        self.pool.append(self.leaf(self.random_shape()))
        while len(self.b.computation.instructions) < target:
            made = self.draw(st.sampled_from(self.makers))()
            if made is not None:
                self.pool.append(made)
        module = self.b.build_module(self._root(), name="fuzz")
        verify(module)
        return module

    def _root(self) -> HloInstruction:
        last = self.pool[-1]
        if len(self.pool) == 1 or self.draw(st.integers(0, 3)) > 0:
            return last
        others = self.draw(st.lists(st.sampled_from(self.pool[:-1]), max_size=2))
        return self.b.tuple([*others, last])

    # --- shapes, leaves and operands ---------------------------------------------------------
    def random_type(self) -> str:
        return self.draw(st.sampled_from(self.opt.dtypes))

    def random_dims(self, max_rank: int = 3) -> tuple[int, ...]:
        dims = tuple(self.draw(st.lists(st.sampled_from(SMALL_DIMS), max_size=max_rank)))
        return dims if prod(dims) <= self.opt.max_elements else dims[:1]

    def random_shape(self) -> Shape:
        return Shape(self.random_type(), self.random_dims())

    def n_parameters(self) -> int:
        return sum(1 for i in self.b.computation.instructions if i.opcode == "parameter")

    def leaf(self, shape: Shape) -> HloInstruction:
        """A fresh parameter, constant, broadcast scalar constant or iota of `shape`."""
        kinds = ["constant", "splat"]
        if self.n_parameters() < MAX_PARAMETERS:
            kinds += ["parameter", "parameter"]
        if shape.rank and shape.element_type != "pred":
            kinds.append("iota")
        kind = self.draw(st.sampled_from(kinds))
        t = shape.element_type
        if kind == "parameter":
            return self.b.parameter(self._with_random_layout(shape))
        if kind == "iota":
            return self.b.iota(shape, self.draw(st.integers(0, shape.rank - 1)))
        if kind == "splat":
            scalar = self.b.constant(self.draw(hs.element_strategy(t, self.opt.exact_sums)), t)
            return self.b.broadcast(scalar, shape, dims=())
        literal = self.draw(hs.arrays(t, shape.dims, self.opt.exact_sums))
        return self.b.constant(literal, t)

    def _with_random_layout(self, shape: Shape) -> Shape:
        """Sometimes a non-default layout (minor-to-major order): the backend must
        read such parameters in their physical order."""
        if shape.rank < 2 or self.draw(st.integers(0, 3)) > 0:
            return shape
        return Shape(shape.element_type, shape.dims,
                     layout=tuple(self.draw(st.permutations(range(shape.rank)))))

    def pick(self, accept=lambda instr: True) -> HloInstruction | None:
        choices = [i for i in self.pool if accept(i)]
        return self.draw(st.sampled_from(choices)) if choices else None

    def value_of(self, shape: Shape) -> HloInstruction:
        """An operand of exactly `shape`: from the pool when one fits, else a fresh leaf."""
        same = [i for i in self.pool if i.shape == shape]
        if same and self.draw(st.booleans()):
            return self.draw(st.sampled_from(same))
        return self.leaf(shape)

    def scalar_int(self, element_type: str, lo: int, hi: int) -> HloInstruction:
        """A scalar index: a constant in [lo, hi] or a parameter (any value: clamped)."""
        if self.n_parameters() < MAX_PARAMETERS and self.draw(st.integers(0, 3)) == 0:
            return self.b.parameter(Shape.scalar(element_type))
        value = self.draw(st.integers(lo, hi))
        return self.b.constant(np.array(value, hs.numpy_type(element_type)), element_type)

    def unary_ops(self, element_type: str, shape_preserving: bool = False) -> tuple:
        fam = hs.family(element_type)
        ops = hs.UNARY[fam]
        if fam == "f" and self.opt.transcendental and not shape_preserving:
            ops = ops + hs.TRANSCENDENTAL_UNARY
        if shape_preserving:
            ops = tuple(o for o in ops if o != "is-finite")
        if element_type in hs.UNSIGNED_TYPES:       # |x| and sign(x) need a signed type
            ops = tuple(o for o in ops if o not in ("abs", "sign"))
        return ops

    def binary_ops(self, element_type: str, transcendental: bool = True) -> tuple:
        fam = hs.family(element_type)
        ops = hs.BINARY[fam]
        if fam == "f" and self.opt.transcendental and transcendental:
            ops = ops + hs.TRANSCENDENTAL_BINARY
        return ops

    def fits(self, dims) -> bool:
        return prod(dims) <= self.opt.max_elements

    # --- elementwise --------------------------------------------------------------------------
    def _make_unary(self):
        x = self.pick()
        return self.b.op(self.draw(st.sampled_from(self.unary_ops(x.shape.element_type))), [x])

    def _make_binary(self):
        x = self.pick()
        y = self.value_of(x.shape)
        op = self.draw(st.sampled_from(self.binary_ops(x.shape.element_type)))
        return self.b.op(op, [x, y] if self.draw(st.booleans()) else [y, x])

    def canonical_nans(self, x: HloInstruction) -> HloInstruction:
        """x with every NaN replaced by +NaN.

        The sign of a NaN made by arithmetic is unspecified (x86 makes -NaN, numpy
        often +NaN), and only a TOTALORDER compare can see it; canonical NaNs keep
        such compares (and sorts) deterministic.
        """
        if not x.shape.dtype.is_float:
            return x
        t = x.shape.element_type
        nan = self.b.broadcast(self.b.constant(np.array(np.nan, hs.numpy_type(t)), t), x.shape)
        return self.b.select(self.b.compare(x, x, "NE"), nan, x)

    def _make_compare(self):
        x = self.pick()
        y = self.value_of(x.shape)
        kind = None
        if x.shape.dtype.is_float and self.draw(st.booleans()):
            kind = "TOTALORDER"
            x, y = self.canonical_nans(x), self.canonical_nans(y)
        return self.b.compare(x, y, self.draw(st.sampled_from(hs.DIRECTIONS)), kind)

    def _make_select(self):
        x = self.pick()
        pred = self.value_of(Shape("pred", x.shape.dims))
        return self.b.select(pred, x, self.value_of(x.shape))

    def _make_clamp(self):
        x = self.pick()
        bound = Shape.scalar(x.shape.element_type) if self.draw(st.booleans()) else x.shape
        return self.b.clamp(self.value_of(bound), x, self.value_of(bound))

    def _make_convert(self):
        return self.b.convert(self.pick(), self.random_type())

    # --- data movement ------------------------------------------------------------------------
    def _make_broadcast(self):
        x = self.pick(lambda i: i.shape.rank < 3)
        if x is None:
            return None
        rank = x.shape.rank + self.draw(st.integers(0, 2))
        kept = sorted(self.draw(st.permutations(range(rank)))[:x.shape.rank])
        dims = [self.draw(st.sampled_from(SMALL_DIMS)) for _ in range(rank)]
        for source, target in enumerate(kept):
            dims[target] = x.shape.dims[source]
        if not self.fits(dims):
            return None
        return self.b.broadcast(x, dims, dims=kept)

    def _make_reshape(self):
        x = self.pick()
        n = x.shape.numel
        if n == 0:
            dims = [0] + [self.draw(st.sampled_from(SMALL_DIMS)) for _ in range(
                self.draw(st.integers(0, 2)))]
        else:
            dims = [f for f in _prime_factors(n)]
            while len(dims) > 3:             # merge neighbours until the rank is small
                i = self.draw(st.integers(0, len(dims) - 2))
                dims[i:i + 2] = [dims[i] * dims[i + 1]]
            for _ in range(self.draw(st.integers(0, 4 - len(dims)))):
                dims.insert(self.draw(st.integers(0, len(dims))), 1)
        dims = list(self.draw(st.permutations(dims)))
        return self.b.reshape(x, dims)

    def _make_transpose(self):
        x = self.pick()
        return self.b.transpose(x, self.draw(st.permutations(range(x.shape.rank))))

    def _make_slice(self):
        x = self.pick()
        starts, limits, strides = [], [], []
        for d in x.shape.dims:
            start = self.draw(st.integers(0, d))
            starts.append(start)
            limits.append(self.draw(st.integers(start, d)))
            strides.append(self.draw(st.integers(1, 3)))
        return self.b.slice(x, starts, limits, strides)

    def _make_concatenate(self):
        x = self.pick(lambda i: i.shape.rank > 0)
        if x is None:
            return None
        d = self.draw(st.integers(0, x.shape.rank - 1))

        def matches(i):
            s = i.shape
            return s.element_type == x.shape.element_type and s.rank == x.shape.rank and all(
                a == b for k, (a, b) in enumerate(zip(s.dims, x.shape.dims)) if k != d)
        parts = [x] + self.draw(st.lists(st.sampled_from([i for i in self.pool if matches(i)]),
                                         min_size=1, max_size=2))
        dims = list(x.shape.dims)
        dims[d] = sum(p.shape.dims[d] for p in parts)
        return self.b.concatenate(parts, d) if self.fits(dims) else None

    def _make_pad(self):
        x = self.pick()
        t = x.shape.element_type
        value = self.b.constant(self.draw(hs.element_strategy(t, self.opt.exact_sums)), t)
        padding = []
        for d in x.shape.dims:
            low, high = self.draw(st.integers(-2, 2)), self.draw(st.integers(-2, 2))
            interior = self.draw(st.integers(0, 2))
            if low + high + d + max(d - 1, 0) * interior < 0:
                low = high = 0
            padding.append((low, high, interior))
        dims = [lo + hi + d + max(d - 1, 0) * i for (lo, hi, i), d in zip(padding, x.shape.dims)]
        return self.b.pad(x, value, padding) if self.fits(dims) else None

    def _make_reverse(self):
        x = self.pick()
        dims = self.draw(st.lists(st.integers(0, max(x.shape.rank - 1, 0)), unique=True,
                                  max_size=x.shape.rank))
        return self.b.reverse(x, sorted(dims))

    def _make_iota(self):
        t = self.draw(st.sampled_from([d for d in self.opt.dtypes if d != "pred"] or ["s32"]))
        dims = self.random_dims()
        if not dims:
            dims = (self.draw(st.sampled_from(SMALL_DIMS)),)
        return self.b.iota(Shape(t, dims), self.draw(st.integers(0, len(dims) - 1)))

    # --- reductions and dot ----------------------------------------------------------------------
    def _make_reduce(self):
        x = self.pick()
        t = x.shape.element_type
        ops = hs.REDUCERS[hs.family(t)]
        if hs.family(t) == "f" and not self.opt.float_sums:
            ops = ("maximum", "minimum")
        op = self.draw(st.sampled_from(ops))
        dims = sorted(self.draw(st.lists(st.integers(0, max(x.shape.rank - 1, 0)), unique=True,
                                         max_size=x.shape.rank)))
        reducer = self.b.scalar_computation(f"{op}_{t}", op, t)
        init = self.b.constant(hs.reducer_identity(op, t), t)
        return self.b.reduce(x, init, dims, reducer)

    def _make_reduce_window(self):
        """A pooling-style window (size, stride, low/high padding with the identity)."""
        x = self.pick(lambda i: i.shape.rank > 0)
        if x is None:
            return None
        t = x.shape.element_type
        op = self.draw(st.sampled_from(hs.REDUCERS[hs.family(t)]))
        if hs.family(t) == "f" and not self.opt.float_sums:
            op = self.draw(st.sampled_from(["maximum", "minimum"]))
        sizes, strides, padding = [], [], []
        for d in x.shape.dims:
            low, high = self.draw(st.integers(0, 1)), self.draw(st.integers(0, 1))
            sizes.append(self.draw(st.integers(1, max(1, d + low + high))))
            strides.append(self.draw(st.integers(1, 2)))
            padding.append((low, high))
        window = make_window(sizes, strides, padding)
        reducer = self.b.scalar_computation(f"{op}_{t}", op, t)
        init = self.b.constant(hs.reducer_identity(op, t), t)
        return self.b.reduce_window(x, init, window, reducer)

    def _make_dot(self):
        def fits(i):
            t = i.shape.element_type
            return 1 <= i.shape.rank <= 3 and t != "pred" and (
                self.opt.float_sums or hs.family(t) != "f")
        x = self.pick(fits)
        if x is None:
            return None
        t, dims = x.shape.element_type, x.shape.dims
        n = self.draw(st.sampled_from(SMALL_DIMS))
        if len(dims) == 1:                                   # [k] . [k] or [k] . [k,n]
            rhs_dims = (dims[0],) if self.draw(st.booleans()) else (dims[0], n)
            return self.b.dot(x, self.value_of(Shape(t, rhs_dims)), (0,), (0,))
        if len(dims) == 2:                                   # [m,k] . [k,n]
            return self.b.dot(x, self.value_of(Shape(t, (dims[1], n))))
        rhs = self.value_of(Shape(t, (dims[0], dims[2], n)))  # [b,m,k] . [b,k,n]
        out = (dims[0], dims[1], n)
        if not self.fits(out):
            return None
        return self.b.dot(x, rhs, (2,), (1,), (0,), (0,))

    # --- indexing -------------------------------------------------------------------------------
    def _make_dynamic_slice(self):
        x = self.pick(lambda i: i.shape.rank > 0)
        if x is None:
            return None
        index_type = self.draw(st.sampled_from(["s32", "s32", "s64", "u32"]))
        starts = [self.scalar_int(index_type, 0 if index_type[0] == "u" else -3, d + 3)
                  for d in x.shape.dims]
        sizes = [self.draw(st.integers(0, d)) for d in x.shape.dims]
        return self.b.dynamic_slice(x, starts, sizes)

    def _make_gather(self):
        x = self.pick(lambda i: i.shape.rank > 0 and i.shape.dims[0] > 0)
        if x is None:
            return None
        dims = x.shape.dims
        k = self.draw(st.integers(0, 3))
        if self.n_parameters() < MAX_PARAMETERS and self.draw(st.integers(0, 3)) == 0:
            indices = self.b.parameter(Shape("s32", (k, 1)))
        else:
            values = self.draw(st.lists(st.integers(-3, dims[0] + 3), min_size=k, max_size=k))
            indices = self.b.constant(np.array(values, np.int32).reshape(k, 1), "s32")
        sizes = (1,) + tuple(self.draw(st.integers(0, d)) for d in dims[1:])
        if not self.fits((k,) + sizes[1:]):
            return None
        return self.b.gather(x, indices, offset_dims=tuple(range(1, len(dims))),
                             collapsed_slice_dims=(0,), start_index_map=(0,),
                             index_vector_dim=1, slice_sizes=sizes)

    def _make_dynamic_update_slice(self):
        x = self.pick(lambda i: i.shape.rank > 0)
        if x is None:
            return None
        sizes = tuple(self.draw(st.integers(0, d)) for d in x.shape.dims)
        update = self.value_of(Shape(x.shape.element_type, sizes))
        index_type = self.draw(st.sampled_from(["s32", "s64", "u32"]))
        starts = [self.scalar_int(index_type, 0 if index_type[0] == "u" else -3, d + 3)
                  for d in x.shape.dims]
        return self.b.dynamic_update_slice(x, update, starts)

    def _make_scatter(self):
        """Rows of x combined with k update windows at row indices that may repeat or
        fall outside (then the window is dropped)."""
        x = self.pick(lambda i: i.shape.rank > 0 and i.shape.dims[0] > 0)
        if x is None:
            return None
        dims, t = x.shape.dims, x.shape.element_type
        k = self.draw(st.integers(0, 3))
        values = self.draw(st.lists(st.integers(-2, dims[0] + 1), min_size=k, max_size=k))
        indices = self.b.constant(np.array(values, np.int32).reshape(k, 1), "s32")
        window = tuple(self.draw(st.integers(0, d)) for d in dims[1:])
        updates = self.value_of(Shape(t, (k,) + window))
        combiners = hs.REDUCERS[hs.family(t)]
        if hs.family(t) == "f" and not self.opt.float_sums:
            combiners = ("maximum", "minimum")
        op = self.draw(st.sampled_from(combiners))
        combiner = self.b.scalar_computation(f"{op}_{t}", op, t)
        return self.b.scatter(x, indices, updates, combiner,
                              update_window_dims=tuple(range(1, len(dims))),
                              inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
                              index_vector_dim=1)

    def _make_sort(self):
        """Sorts one dimension, keyed on the first of 1-2 operands (argsort-style)."""
        x = self.pick(lambda i: i.shape.rank > 0)
        if x is None:
            return None
        dim = self.draw(st.integers(0, x.shape.rank - 1))
        operands = [self.canonical_nans(x)]           # the comparator is TOTALORDER
        if self.draw(st.booleans()):
            operands.append(self.b.iota(Shape("s32", x.shape.dims), dim))
        self._sub_count += 1
        comparator = self.b.comparator(f"compare{self._sub_count}",
                                       [o.shape.element_type for o in operands],
                                       self.draw(st.sampled_from(["LT", "GT"])))
        # Only a stable sort is deterministic when keys tie (the iota tells them apart).
        result = self.b.sort(operands, dim, comparator, is_stable=len(operands) > 1)
        if len(operands) == 1:
            return result
        return self.b.get_tuple_element(result, self.draw(st.integers(0, 1)))

    # --- control flow ------------------------------------------------------------------------------
    def _sub(self, kind: str) -> HloBuilder:
        self._sub_count += 1
        return self.b.sub_builder(f"{kind}{self._sub_count}")

    def _step(self, b: HloBuilder, v: HloInstruction) -> HloInstruction:
        """One shape-preserving op on `v` inside a sub-computation."""
        t = v.shape.element_type
        if self.draw(st.booleans()):
            return b.op(self.draw(st.sampled_from(self.unary_ops(t, shape_preserving=True))), [v])
        scalar = b.constant(self.draw(hs.element_strategy(t, self.opt.exact_sums)), t)
        other = b.broadcast(scalar, v.shape, dims=())
        return b.op(self.draw(st.sampled_from(self.binary_ops(t, transcendental=False))),
                    [v, other])

    def _make_while(self):
        """while (i < trips) { i += 1; v = step(v) }: 0 to 3 trips."""
        x = self.pick()
        state = Shape.tuple_of([Shape.scalar("s32"), x.shape])
        cond = self._sub("cond")
        p = cond.parameter(state)
        trips = cond.constant(np.int32(self.draw(st.integers(0, 3))))
        cond.compare(cond.get_tuple_element(p, 0), trips, "LT")
        body = self._sub("body")
        q = body.parameter(state)
        i = body.add(body.get_tuple_element(q, 0), body.constant(np.int32(1)))
        body.tuple([i, self._step(body, body.get_tuple_element(q, 1))])
        init = self.b.tuple([self.b.constant(np.int32(0)), x])
        loop = self.b.while_(cond.build(), body.build(), init)
        return self.b.get_tuple_element(loop, 1)

    def _make_conditional(self):
        """A pred selector picks one of two branches; an s32 one of 1-3 (out of range: last)."""
        x = self.pick()
        if self.draw(st.booleans()):
            selector, count = self.value_of(Shape.scalar("pred")), 2
        else:
            selector, count = self.scalar_int("s32", -1, 3), self.draw(st.integers(1, 3))
        branches = []
        for _ in range(count):
            branch = self._sub("branch")
            branches.append(branch.build(self._step(branch, branch.parameter(x.shape))))
        return self.b.conditional(selector, branches, [x] * count)


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors
