"""HloBuilder: build HLO computations and modules in Python, with shape inference.

One builder builds one computation. Every method adds an instruction and
returns it (an `HloInstruction`, usable as an operand of later calls); its
shape is inferred from the operands by `infer_shape`, so a mistake raises a
`ShapeError` at the line that made it, not later in the verifier.

    b = HloBuilder("softmax")
    x = b.parameter(Shape("f32", (32, 100)), "x")
    m = b.reduce(x, b.constant(np.float32(-np.inf)), dims=[1],
                 to_apply=b.scalar_computation("max", "maximum", "f32"))
    e = b.exp(b.subtract(x, b.broadcast(m, (32, 100), dims=[0])))
    s = b.reduce(e, b.constant(np.float32(0)), dims=[1],
                 to_apply=b.scalar_computation("sum", "add", "f32"))
    out = b.divide(e, b.broadcast(s, (32, 100), dims=[0]))
    module = b.build_module(out)           # entry + the two reducers

Sub-computations (loop bodies, branches, custom reducers) come from
`b.sub_builder(name)`, which shares the instruction namespace, so names stay
unique in the module; `build_module` collects every computation the entry
calls, callees first.

Elementwise ops have one method each, named after the opcode with `_` for `-`
(`b.exponential(x)`, `b.log_plus_one(x)`, `b.shift_left(a, n)`), plus short
aliases (`exp`, `sub`, `mul`, `div`, `max`, `min`, `neg`) and trailing `_` for
Python keywords (`and_`, `or_`, `not_`, `while_`). Anything else goes through
`b.op(opcode, operands, shape=None, **attrs)`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .dtypes import from_numpy, numpy_dtype
from .ir import (HloComputation, HloInstruction, HloModule, PadDim, ReplicaGroups, SliceDim,
                 Window, WindowDim, callees_first)
from .opcodes import OPCODES
from .shape import Shape
from .shape_inference import infer_shape
from .shape_rules_common import ShapeError


def _as_list(x) -> list[HloInstruction]:
    return [x] if isinstance(x, HloInstruction) else list(x)


def make_window(sizes: Sequence[int], strides: Sequence[int] | None = None,
                padding: Sequence[tuple[int, int]] | None = None,
                base_dilation: Sequence[int] | None = None,
                window_dilation: Sequence[int] | None = None) -> Window:
    """A `Window` from per-dim lists: make_window([1, 2, 2, 1], strides=[1, 2, 2, 1])."""
    n = len(sizes)
    strides = strides or [1] * n
    padding = padding or [(0, 0)] * n
    base_dilation = base_dilation or [1] * n
    window_dilation = window_dilation or [1] * n
    return Window(tuple(WindowDim(int(s), int(st), int(lo), int(hi), int(wd), int(bd))
                        for s, st, (lo, hi), bd, wd
                        in zip(sizes, strides, padding, base_dilation, window_dilation)))


class HloBuilder:
    """Builds one HloComputation; `sub_builder` makes the computations it calls."""

    def __init__(self, name: str = "main", *, _names: set[str] | None = None,
                 _counters: dict[str, int] | None = None):
        self.computation = HloComputation(name)
        self._names = _names if _names is not None else set()   # shared with sub-builders
        # base name -> the last suffix `_unique` gave it (shared too): every smaller
        # suffix is taken (names are never given back), so the search starts after it.
        self._counters = _counters if _counters is not None else {}
        self._next_parameter = 0
        self._scalar_cache: dict[tuple, HloComputation] = {}

    # --- the generic entry point ------------------------------------------------
    def op(self, opcode: str, operands=(), shape: Shape | None = None, *,
           name: str | None = None, check: bool = True, **attrs) -> HloInstruction:
        """Adds `opcode(operands)` with `attrs`; the shape is inferred.

        `shape` is a hint for ops that need one (see `infer_shape`); for the others
        it must agree with the inferred shape (its layout is kept). `check=False`
        trusts `shape` as is (for a parser that leaves checking to the verifier).
        """
        operands = _as_list(operands)
        if check or shape is None:
            inferred = infer_shape(opcode, [o.shape for o in operands], attrs, result_hint=shape)
            if shape is not None and inferred != shape:
                raise ShapeError(f"{opcode}: requested shape {shape} but inferred {inferred}")
            shape = shape if shape is not None else inferred
        instr = HloInstruction(opcode, shape, operands, attrs, name=self._unique(name or opcode))
        return self.computation.add_instruction(instr)

    def _unique(self, base: str) -> str:
        """`base`, else `base.N` with the smallest free N (a lowering of thousands of
        ops: counting from 1 each time made this quadratic, 0.5 s of the 12-layer GPT
        step's lowering)."""
        name, n = base, 0
        if name in self._names:
            n = self._counters.get(base, 0)
            while True:
                n += 1
                name = f"{base}.{n}"
                if name not in self._names:
                    break
            self._counters[base] = n
        self._names.add(name)
        return name

    # --- leaves -------------------------------------------------------------------
    def parameter(self, shape: Shape, name: str | None = None,
                  number: int | None = None) -> HloInstruction:
        """The next parameter (numbered 0, 1, ... in call order unless `number` is given)."""
        if number is None:
            number = self._next_parameter
        self._next_parameter = max(self._next_parameter, number + 1)
        instr = HloInstruction("parameter", shape, name=self._unique(name or f"p{number}"),
                               parameter_number=number)
        return self.computation.add_instruction(instr)

    def constant(self, value, dtype: str | None = None, name: str | None = None) -> HloInstruction:
        """A constant from a numpy scalar/array or Python number: constant(np.float32(0)).

        `dtype` (an HLO type name) overrides the numpy type: constant(1.5, "f16").
        """
        if dtype is None:
            literal = np.asarray(value)
            if literal.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
                literal = literal.astype(np.float32)     # a bare Python float means f32
            elif literal.dtype == np.int64 and not isinstance(value, (np.ndarray, np.generic)):
                literal = literal.astype(np.int32)       # and a bare int means s32
            dtype = from_numpy(literal.dtype).name
        else:
            literal = np.asarray(value, dtype=numpy_dtype(dtype))
        instr = HloInstruction("constant", Shape(dtype, literal.shape),
                               name=self._unique(name or "constant"), literal=literal)
        return self.computation.add_instruction(instr)

    # --- sub-computations ---------------------------------------------------------
    def sub_builder(self, name: str) -> "HloBuilder":
        """A builder for a computation this one calls; shares the name space."""
        return HloBuilder(name, _names=self._names, _counters=self._counters)

    def scalar_computation(self, name: str, opcode: str, dtype: str) -> HloComputation:
        """(a: dtype[], b: dtype[]) -> opcode(a, b): a reducer such as add or maximum.

        Cached per (opcode, dtype), so repeated reductions share one computation.
        """
        key = (opcode, dtype)
        if key not in self._scalar_cache:
            sub = self.sub_builder(name)
            a = sub.parameter(Shape.scalar(dtype), "lhs")
            b = sub.parameter(Shape.scalar(dtype), "rhs")
            self._scalar_cache[key] = sub.build(sub.op(opcode, [a, b]))
        return self._scalar_cache[key]

    def comparator(self, name: str, dtypes: Sequence[str], direction: str = "LT",
                   key: int = 0) -> HloComputation:
        """A sort comparator over operands of `dtypes` that compares operand `key`.

        It takes (lhs_0, rhs_0, lhs_1, rhs_1, ...) and returns pred[]; floats compare
        in XLA's total order (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN).
        """
        sub = self.sub_builder(name)
        params = [sub.parameter(Shape.scalar(t), f"{side}{i}")
                  for i, t in enumerate(dtypes) for side in ("lhs", "rhs")]
        lhs, rhs = params[2 * key], params[2 * key + 1]
        kind = "TOTALORDER" if lhs.shape.dtype.is_float else None
        return sub.build(sub.compare(lhs, rhs, direction, kind))

    # --- finishing ------------------------------------------------------------------
    def build(self, root: HloInstruction | None = None) -> HloComputation:
        """Sets the root (default: the last instruction added) and returns the computation."""
        comp = self.computation
        if root is None:
            if not comp.instructions:
                raise ValueError(f"computation {comp.name} is empty")
            root = comp.instructions[-1]
        if root.parent is not comp:
            raise ValueError(f"root {root.name} is not in computation {comp.name}")
        comp.root = root
        return comp

    def build_module(self, root: HloInstruction | None = None,
                     name: str | None = None, *, replica_count: int = 1,
                     num_partitions: int = 1) -> HloModule:
        """A module whose entry is this computation, with every computation it calls,
        on `replica_count` x `num_partitions` devices."""
        entry = self.build(root)
        module = HloModule(name or entry.name)
        module.replica_count = replica_count
        module.num_partitions = num_partitions
        for comp in callees_first([entry]):
            # Computations from unrelated builders may reuse names ("p0", "add");
            # the module's namespace is shared, so clashes get a ".N" suffix.
            for instr in comp.instructions:
                instr.name = module.uniquify(instr.name)
            module.add_computation(comp, entry=comp is entry)
        return module

    # --- elementwise ----------------------------------------------------------------
    def compare(self, a, b, direction: str, type: str | None = None, **kw) -> HloInstruction:
        """compare(a, b, "LT") -> pred; `type` is FLOAT, TOTALORDER, SIGNED or UNSIGNED."""
        attrs = {"direction": direction}
        if type is not None:
            attrs["type"] = type
        return self.op("compare", [a, b], **attrs, **kw)

    def select(self, pred, on_true, on_false, **kw) -> HloInstruction:
        return self.op("select", [pred, on_true, on_false], **kw)

    def clamp(self, lo, x, hi, **kw) -> HloInstruction:
        """clamp(lo, x, hi); lo and hi may be scalars."""
        return self.op("clamp", [lo, x, hi], **kw)

    def convert(self, x, dtype: str, **kw) -> HloInstruction:
        return self.op("convert", [x], x.shape.with_element_type(dtype), **kw)

    def bitcast_convert(self, x, dtype: str, **kw) -> HloInstruction:
        """Same-width reinterpretation (f32 <-> u32); for other widths use op() with a shape."""
        return self.op("bitcast-convert", [x], x.shape.with_element_type(dtype), **kw)

    # --- data movement --------------------------------------------------------------
    def broadcast(self, x, shape: "Shape | Sequence[int]", dims: Sequence[int] = (),
                  **kw) -> HloInstruction:
        """Operand dim i goes to result dim dims[i]: broadcast(v, (32, 100), dims=[0])."""
        if not isinstance(shape, Shape):
            shape = Shape(x.shape.element_type, tuple(shape))
        return self.op("broadcast", [x], shape, dimensions=tuple(dims), **kw)

    def reshape(self, x, dims: Sequence[int], **kw) -> HloInstruction:
        return self.op("reshape", [x], x.shape.with_dims(dims), **kw)

    def bitcast(self, x, shape: Shape, **kw) -> HloInstruction:
        return self.op("bitcast", [x], shape, **kw)

    def transpose(self, x, perm: Sequence[int], **kw) -> HloInstruction:
        """Result dim i is operand dim perm[i]."""
        return self.op("transpose", [x], dimensions=tuple(perm), **kw)

    def slice(self, x, starts: Sequence[int], limits: Sequence[int],
              strides: Sequence[int] | None = None, **kw) -> HloInstruction:
        strides = strides or [1] * len(starts)
        return self.op("slice", [x], slice=tuple(SliceDim(a, b, c) for a, b, c
                                                 in zip(starts, limits, strides)), **kw)

    def pad(self, x, value, padding: Sequence[tuple[int, ...]], **kw) -> HloInstruction:
        """padding: per dim (low, high) or (low, high, interior); low/high may be negative."""
        return self.op("pad", [x, value], padding=tuple(PadDim(*p) for p in padding), **kw)

    def concatenate(self, operands, dim: int, **kw) -> HloInstruction:
        return self.op("concatenate", operands, dimensions=(dim,), **kw)

    def reverse(self, x, dims: Sequence[int], **kw) -> HloInstruction:
        return self.op("reverse", [x], dimensions=tuple(dims), **kw)

    def iota(self, shape: Shape, iota_dimension: int, **kw) -> HloInstruction:
        return self.op("iota", [], shape, iota_dimension=iota_dimension, **kw)

    def dynamic_slice(self, x, starts: Sequence[HloInstruction], sizes: Sequence[int],
                      **kw) -> HloInstruction:
        """Starts are scalar integer instructions, one per dim (clamped into range at run time)."""
        return self.op("dynamic-slice", [x, *starts], dynamic_slice_sizes=tuple(sizes), **kw)

    def dynamic_update_slice(self, x, update, starts: Sequence[HloInstruction],
                             **kw) -> HloInstruction:
        return self.op("dynamic-update-slice", [x, update, *starts], **kw)

    def gather(self, operand, indices, *, offset_dims, collapsed_slice_dims, start_index_map,
               index_vector_dim: int, slice_sizes, operand_batching_dims=(),
               start_indices_batching_dims=(), indices_are_sorted: bool = False,
               **kw) -> HloInstruction:
        """XLA gather; the dimension numbers are keyword-only, as in the text format."""
        attrs = {"offset_dims": tuple(offset_dims),
                 "collapsed_slice_dims": tuple(collapsed_slice_dims),
                 "start_index_map": tuple(start_index_map)}
        if operand_batching_dims:
            attrs["operand_batching_dims"] = tuple(operand_batching_dims)
            attrs["start_indices_batching_dims"] = tuple(start_indices_batching_dims)
        attrs["index_vector_dim"] = index_vector_dim
        attrs["slice_sizes"] = tuple(slice_sizes)
        if indices_are_sorted:
            attrs["indices_are_sorted"] = True
        return self.op("gather", [operand, indices], **attrs, **kw)

    def scatter(self, operands, indices, updates, to_apply: HloComputation, *,
                update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
                index_vector_dim: int, input_batching_dims=(), scatter_indices_batching_dims=(),
                indices_are_sorted: bool = False, unique_indices: bool = False,
                **kw) -> HloInstruction:
        """XLA scatter of N operands with N updates, combined by `to_apply`."""
        attrs = {"update_window_dims": tuple(update_window_dims),
                 "inserted_window_dims": tuple(inserted_window_dims),
                 "scatter_dims_to_operand_dims": tuple(scatter_dims_to_operand_dims)}
        if input_batching_dims:
            attrs["input_batching_dims"] = tuple(input_batching_dims)
            attrs["scatter_indices_batching_dims"] = tuple(scatter_indices_batching_dims)
        attrs["index_vector_dim"] = index_vector_dim
        if indices_are_sorted:
            attrs["indices_are_sorted"] = True
        if unique_indices:
            attrs["unique_indices"] = True
        attrs["to_apply"] = to_apply
        return self.op("scatter", [*_as_list(operands), indices, *_as_list(updates)],
                       **attrs, **kw)

    # --- reductions, sort, dot, convolution --------------------------------------
    def reduce(self, operands, inits, dims: Sequence[int], to_apply: HloComputation,
               **kw) -> HloInstruction:
        """Reduces `dims` away; N operands and N inits give a tuple (argmax-style)."""
        return self.op("reduce", [*_as_list(operands), *_as_list(inits)],
                       dimensions=tuple(dims), to_apply=to_apply, **kw)

    def reduce_window(self, operands, inits, window: Window, to_apply: HloComputation,
                      **kw) -> HloInstruction:
        """One result per window position; build the window with make_window()."""
        return self.op("reduce-window", [*_as_list(operands), *_as_list(inits)],
                       window=window, to_apply=to_apply, **kw)

    def select_and_scatter(self, operand, source, init, window: Window,
                           select: HloComputation, scatter: HloComputation,
                           **kw) -> HloInstruction:
        return self.op("select-and-scatter", [operand, source, init], window=window,
                       select=select, scatter=scatter, **kw)

    def sort(self, operands, dim: int, comparator: HloComputation, is_stable: bool = False,
             **kw) -> HloInstruction:
        attrs = {"dimensions": (dim,)}
        if is_stable:
            attrs["is_stable"] = True
        return self.op("sort", operands, **attrs, to_apply=comparator, **kw)

    def dot(self, lhs, rhs, lhs_contracting: Sequence[int] = (1,),
            rhs_contracting: Sequence[int] = (0,), lhs_batch: Sequence[int] = (),
            rhs_batch: Sequence[int] = (), result_type: str | None = None,
            **kw) -> HloInstruction:
        """dot_general; the defaults are a matmul. result_type: e.g. "s32" for s8 inputs."""
        attrs = {}
        if lhs_batch:
            attrs["lhs_batch_dims"] = tuple(lhs_batch)
        attrs["lhs_contracting_dims"] = tuple(lhs_contracting)
        if rhs_batch:
            attrs["rhs_batch_dims"] = tuple(rhs_batch)
        attrs["rhs_contracting_dims"] = tuple(rhs_contracting)
        hint = None
        if result_type is not None:
            hint = infer_shape("dot", [lhs.shape, rhs.shape], attrs,
                               Shape.scalar(result_type))
        return self.op("dot", [lhs, rhs], hint, **attrs, **kw)

    def convolution(self, lhs, rhs, window: Window, dim_labels: str,
                    feature_group_count: int = 1, batch_group_count: int = 1,
                    result_type: str | None = None, **kw) -> HloInstruction:
        """convolution(x, w, make_window([3, 3], padding=[(1, 1), (1, 1)]), "b01f_01io->b01f")."""
        attrs = {"window": window, "dim_labels": dim_labels}
        if feature_group_count != 1:
            attrs["feature_group_count"] = feature_group_count
        if batch_group_count != 1:
            attrs["batch_group_count"] = batch_group_count
        hint = None
        if result_type is not None:
            hint = infer_shape("convolution", [lhs.shape, rhs.shape], attrs,
                               Shape.scalar(result_type))
        return self.op("convolution", [lhs, rhs], hint, **attrs, **kw)

    # --- tuples and control flow ------------------------------------------------------
    def tuple(self, elements, **kw) -> HloInstruction:
        return self.op("tuple", elements, **kw)

    def get_tuple_element(self, t, index: int, **kw) -> HloInstruction:
        return self.op("get-tuple-element", [t], index=index, **kw)

    def call(self, comp: HloComputation, operands, **kw) -> HloInstruction:
        return self.op("call", operands, to_apply=comp, **kw)

    def fusion(self, comp: HloComputation, operands, kind: str = "kLoop", **kw) -> HloInstruction:
        comp.is_fusion_computation = True
        return self.op("fusion", operands, kind=kind, calls=comp, **kw)

    def while_(self, condition: HloComputation, body: HloComputation, init,
               **kw) -> HloInstruction:
        """while(init): runs `body` on the state while `condition` returns true."""
        return self.op("while", [init], condition=condition, body=body, **kw)

    def conditional(self, selector, branches: Sequence[HloComputation], operands,
                    **kw) -> HloInstruction:
        """Runs branches[selector] on its operand; a pred selector means (true, false)."""
        return self.op("conditional", [selector, *_as_list(operands)],
                       branch_computations=tuple(branches), **kw)

    def opt_barrier(self, x, **kw) -> HloInstruction:
        return self.op("opt-barrier", [x], **kw)

    def custom_call(self, target: str, operands, shape: Shape, **kw) -> HloInstruction:
        return self.op("custom-call", operands, shape, custom_call_target=target, **kw)

    # --- collectives (hlo/collectives.py says what the groups mean) --------------------
    # `replica_groups`: a ReplicaGroups or a list of id lists (() = everyone);
    # `channel_id` / `use_global_device_ids` pick the group mode. all-gather and
    # reduce-scatter need `group_size` (the number of participants of each group),
    # which depends on the module's devices.
    def all_reduce(self, operands, to_apply: HloComputation, replica_groups=(), **kw):
        return self.op("all-reduce", operands, to_apply=to_apply,
                       **_collective_attrs(replica_groups, kw))

    def all_gather(self, operands, dim: int, group_size: int, replica_groups=(), **kw):
        operands = _as_list(operands)
        hint = _resized([o.shape for o in operands], dim, lambda n: n * group_size)
        return self.op("all-gather", operands, hint, dimensions=(dim,),
                       **_collective_attrs(replica_groups, kw))

    def reduce_scatter(self, operands, dim: int, group_size: int, to_apply: HloComputation,
                       replica_groups=(), **kw):
        operands = _as_list(operands)
        for o in operands:
            if o.shape.is_array and dim < o.shape.rank and o.shape.dims[dim] % group_size:
                raise ShapeError(f"reduce-scatter: dimension {dim} of {o.shape} is not "
                                 f"divisible by the group size {group_size}")
        hint = _resized([o.shape for o in operands], dim, lambda n: n // group_size)
        return self.op("reduce-scatter", operands, hint, dimensions=(dim,), to_apply=to_apply,
                       **_collective_attrs(replica_groups, kw))

    def all_to_all(self, operands, dim: int | None = None, replica_groups=(), **kw):
        """With `dim`: one array split and concatenated along it; without: the tuple form."""
        if dim is not None:
            kw["dimensions"] = (dim,)
        return self.op("all-to-all", operands, **_collective_attrs(replica_groups, kw))

    def collective_permute(self, operands, pairs, **kw):
        return self.op("collective-permute", operands,
                       source_target_pairs=tuple((int(s), int(t)) for s, t in pairs), **kw)

    def collective_broadcast(self, operands, replica_groups=(), **kw):
        return self.op("collective-broadcast", operands, **_collective_attrs(replica_groups, kw))

    def replica_id(self, **kw) -> HloInstruction:
        return self.op("replica-id", [], **kw)

    def partition_id(self, **kw) -> HloInstruction:
        return self.op("partition-id", [], **kw)


def _collective_attrs(replica_groups, kw: dict) -> dict:
    groups = (replica_groups if isinstance(replica_groups, ReplicaGroups)
              else ReplicaGroups(tuple(tuple(g) for g in replica_groups)))
    return {"replica_groups": groups, **kw}


def _resized(shapes, dim: int, size) -> Shape:
    out = [s.with_dims(tuple(size(n) if d == dim else n for d, n in enumerate(s.dims)))
           if s.is_array and dim < s.rank else s for s in shapes]
    return out[0] if len(out) == 1 else Shape.tuple_of(out)


# --- one method per elementwise opcode -------------------------------------------------

_KEYWORDS = {"and", "or", "not"}
_ALIASES = {"exp": "exponential", "neg": "negate", "sub": "subtract", "mul": "multiply",
            "div": "divide", "max": "maximum", "min": "minimum", "rem": "remainder",
            "pow": "power", "clz": "count-leading-zeros"}


def _elementwise_method(opcode: str):
    def method(self, *operands: HloInstruction, **kw) -> HloInstruction:
        return self.op(opcode, list(operands), **kw)
    method.__name__ = opcode.replace("-", "_")
    method.__doc__ = f"Elementwise `{opcode}` of operands with equal shapes."
    return method


def _install_elementwise_methods() -> None:
    for opcode, info in OPCODES.items():
        if info.kind in ("unary", "binary"):
            py = opcode.replace("-", "_")
            setattr(HloBuilder, py + "_" if py in _KEYWORDS else py, _elementwise_method(opcode))
    for alias, opcode in _ALIASES.items():
        setattr(HloBuilder, alias, _elementwise_method(opcode))


_install_elementwise_methods()
