"""`sort` on the host with numpy when the comparator is a plain key compare.

Why a library call: a sort is not a loop nest. The LLVM kernel of emitters/merge_sort.py
(a merge sort of a permutation that calls the comparator per compare) is the
general path, but it runs one thread at a few tens of cycles per compare. XLA's
CPU backend does not generate sorts either: it calls a sort from its C++
runtime. Our runtime library is numpy: its sorts are vectorized (AVX-512 on
this host) and release the GIL, so rows are sorted on the intra-op threads.

numpy can only sort by a key, so the comparator must be one a key reproduces
exactly (`match_sort`):

    ROOT compare(f(p[2k]), f(p[2k+1])), direction=LT or GT   [, type=TOTALORDER]

where `f` is the same scalar function on both sides: the identity (the usual
case), or the canonicalization JAX emits (-0 -> +0, every NaN -> +NaN), or
XLA's integer rewrite of a TOTALORDER compare. Operand k is the key; the
others ride along. `f` is computed on the whole key array by the reference
evaluator (a handful of numpy operations), so the key is the comparator's
own view of each element. Then

- integers and pred compare by value; floats with TOTALORDER by their bits
  mapped to unsigned integers (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN);
- floats with a plain compare: -0 == +0 and f32/f64 denormals read as zero
  (as the compare does). A NaN makes the comparator no strict weak order, and
  the result then depends on the sort algorithm: rows whose key holds a NaN
  are sorted by the reference evaluator's merge sort (hlo/eval_sort.py, which
  calls the comparator on whole arrays), so they match the reference;
- every key becomes unsigned bits in the same order; GT complements them
  (`~bits`) and still sorts stably, so equal keys keep their input order, as
  the comparator says (not a reversed ascending sort).

`stable_order` sorts (key bits, index) pairs packed in 64-bit words with a plain
vectorized sort: 7x faster than numpy's stable argsort (a timsort).

Other comparators (several keys combined with select/or, LE/GE, bf16 keys)
compile to the LLVM kernel; a recognized one compiles no kernel at all.
"""
from __future__ import annotations

import sys

import numpy as np

from .. import runtime
from ..hlo.dtypes import numpy_dtype
from ..hlo.eval_sort import sort_order
from ..hlo.evaluator import EvalContext, evaluate_instruction

from .executable import physical_dims
from .thunks import array_at, link_threads

# Key element types numpy sorts exactly as the comparator orders them.
_KEY_TYPES = frozenset({"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                        "f16", "f32", "f64"})
# Float types whose denormals a plain compare reads as zero (XLA CPU's DAZ; f16 is
# computed in f32, where it has no denormals).
_FLUSHED = {np.dtype(np.float32): np.finfo(np.float32).tiny,
            np.dtype(np.float64): np.finfo(np.float64).tiny}
# Attributes that annotate an instruction without changing its value.
_ANNOTATIONS = frozenset({"metadata", "backend_config", "frontend_attributes", "sharding",
                          "statistics_viz"})
# Sorts of fewer elements run on the caller alone.
PARALLEL_MIN_ELEMENTS = 1 << 16
# Opcodes `f` may use besides elementwise ones: all on scalars.
_KEY_OPCODES = frozenset({"constant", "bitcast", "parameter"})


class SortKey:
    """How one comparator orders elements: by `f(operand[index])`, LT or GT."""

    def __init__(self, index: int, steps: list, descending: bool, total_order: bool):
        self.index = index                  # the key operand
        self.steps = steps                  # f's instructions in post order ([] = identity)
        self.descending = descending
        self.total_order = total_order

    def sort_key(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(key, undecided): unsigned integers whose stable ascending sort is the
        comparator's order -- except in rows holding an `undecided` element (a NaN
        under a plain float compare: such rows are ordered by the comparator itself,
        and by the algorithm that calls it). `undecided` is None if there are none."""
        key = self._apply_f(values)
        undecided = None
        if key.dtype.kind == "f":
            if not self.total_order:
                nan = np.isnan(key)
                undecided = nan if nan.any() else None
                tiny = _FLUSHED.get(key.dtype)
                if tiny is not None:
                    key = np.where(np.abs(key) < tiny, key.dtype.type(0), key)
                key = key + key.dtype.type(0)      # -0 + 0 is +0: one key for both zeros
            key = _total_order_bits(key)
        elif key.dtype.kind == "i":
            # Flipping the sign bit maps [min, max] onto the unsigned range in order.
            unsigned = np.dtype(f"u{key.dtype.itemsize}")
            key = key.view(unsigned) ^ unsigned.type(1 << (8 * key.dtype.itemsize - 1))
        elif key.dtype == np.bool_:
            key = key.view(np.uint8)
        return (~key if self.descending else key), undecided

    def _apply_f(self, values: np.ndarray) -> np.ndarray:
        if not self.steps:
            return values
        computed = {}
        for instr in self.steps:
            if instr.opcode == "parameter":
                computed[id(instr)] = values
            else:
                computed[id(instr)] = evaluate_instruction(
                    instr, [computed[id(o)] for o in instr.operands])
        return np.broadcast_to(computed[id(self.steps[-1])], values.shape)


def match_sort(instr) -> SortKey | None:
    """The key of `instr`'s comparator if numpy can sort by it exactly, else None
    (why_not_host_sort says why)."""
    key = _sort_key(instr)
    return key if isinstance(key, SortKey) else None


def why_not_host_sort(instr) -> str | None:
    """Why numpy cannot sort `instr` exactly (match_sort), or None."""
    key = _sort_key(instr)
    return key if isinstance(key, str) else None


def _sort_key(instr) -> SortKey | str:
    """match_sort's key, or the reason there is none."""
    if instr.opcode != "sort":
        return "not a sort"
    comp = instr.attrs.get("to_apply")
    if comp is None:
        return "no comparator"
    if len(instr.dims()) != 1:
        return "not one sort dimension"
    root = comp.root
    direction = root.attrs.get("direction")
    if root.opcode != "compare":
        return f"the comparator's root is {root.opcode}, not one compare"
    if direction not in ("LT", "GT"):
        return f"the comparator compares {direction} (a key sort takes LT or GT)"
    if root.operands[0].shape.element_type not in _KEY_TYPES:
        return f"{root.operands[0].shape.element_type} keys"
    lhs, rhs = root.operands
    for first, second, descending in ((lhs, rhs, direction == "GT"),
                                      (rhs, lhs, direction == "LT")):
        params = _params_of(first)
        if len(params) != 1 or params[0] % 2 or not _same_function(first, second, params[0]):
            continue
        steps = _post_order(first)
        if not all(_is_scalar_step(s) for s in steps):
            return "the key is not computed by scalar elementwise steps"
        identity = len(steps) == 1
        return SortKey(params[0] // 2, [] if identity else steps, descending,
                       root.attrs.get("type") == "TOTALORDER")
    return "the comparator does not compare one function of an operand's two values"


def _params_of(node) -> list[int]:
    return sorted({s.parameter_number for s in _post_order(node) if s.opcode == "parameter"})


def _post_order(node) -> list:
    order, seen = [], set()

    def visit(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        for o in n.operands:
            visit(o)
        order.append(n)
    visit(node)
    return order


def _is_scalar_step(instr) -> bool:
    shape = instr.shape
    return shape.is_array and not shape.dims and shape.element_type in _KEY_TYPES | {"bf16"} \
        and (instr.opcode in _KEY_OPCODES or instr.info.is_elementwise) \
        and not instr.info.side_effect and "to_apply" not in instr.attrs


def _same_function(a, b, param: int) -> bool:
    """True if `b` computes from parameter param+1 what `a` computes from `param`."""
    if a.opcode == "parameter":
        return b.opcode == "parameter" and a.parameter_number == param \
            and b.parameter_number == param + 1 and a.shape == b.shape
    if a.opcode != b.opcode or a.shape != b.shape or len(a.operands) != len(b.operands):
        return False
    if a.opcode == "constant":
        return _literal_bytes(a) == _literal_bytes(b)
    if _semantic_attrs(a) != _semantic_attrs(b):
        return False
    return all(_same_function(x, y, param) for x, y in zip(a.operands, b.operands))


def _semantic_attrs(instr) -> dict:
    """The attributes that change what an instruction computes (not its metadata)."""
    return {k: v for k, v in instr.attrs.items() if k not in _ANNOTATIONS}


def _literal_bytes(instr) -> bytes | None:
    if instr.literal is None:
        return None
    return np.asarray(instr.literal, numpy_dtype(instr.shape.element_type)).tobytes()


def _total_order_bits(x: np.ndarray) -> np.ndarray:
    """Unsigned integers ordered like the floats `x` in IEEE total order
    (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN): a negative float has all its
    bits flipped (a larger magnitude comes first), a positive one its sign bit.
    The evaluator's `total_order_key` gives the same order as signed integers; this
    unsigned form takes two array operations instead of a `where`, on the sort's
    hot path."""
    signed = np.dtype(f"i{x.dtype.itemsize}")
    bits = x.view(signed)
    flip = (bits >> (8 * signed.itemsize - 1)) | signed.type(np.iinfo(signed).min)
    return (bits ^ flip).view(np.dtype(f"u{signed.itemsize}"))


def stable_order(key: np.ndarray, axis: int) -> np.ndarray:
    """The permutation that sorts the unsigned integers `key` along `axis` stably
    (what np.argsort(kind="stable") returns).

    numpy's stable argsort is a timsort (~90 ms for 2^20 elements), its plain sort
    of 64-bit integers a vectorized quicksort (~5 ms). So a key of at most 32 bits
    becomes the high half of a 64-bit word whose low half is the element's index;
    the words are all distinct, so no sort can reorder equal keys, and after a
    plain sort the low halves are the stable permutation. A wider key is first
    ranked (`_rank`), and its rank takes its place in the words.
    """
    n = key.shape[axis]
    if n >= 1 << 32 or sys.byteorder != "little":
        return np.argsort(key, axis=axis, kind="stable")
    moved = np.moveaxis(key, axis, -1)
    if key.dtype.itemsize > 4:
        moved = _rank(moved)
    halves = np.empty(moved.shape + (2,), np.uint32)     # (index, key): little-endian words
    halves[..., 0] = np.arange(n, dtype=np.uint32)
    halves[..., 1] = moved
    halves.view(np.uint64)[..., 0].sort(axis=-1)
    return np.moveaxis(halves[..., 0].astype(np.intp), -1, axis)


def _rank(key: np.ndarray) -> np.ndarray:
    """For each element of the rows of `key`, the number of distinct smaller keys
    in its row (uint32): the same order as `key`, in 32 bits (rows of < 2^32)."""
    order = np.argsort(key, axis=-1)                  # unstable, vectorized
    ranked = np.take_along_axis(key, order, axis=-1)
    rises = np.zeros(key.shape, np.uint32)
    np.not_equal(ranked[..., 1:], ranked[..., :-1], out=rises[..., 1:], casting="unsafe")
    rank = np.empty(key.shape, np.uint32)
    np.put_along_axis(rank, order, np.cumsum(rises, axis=-1, dtype=np.uint32), axis=-1)
    return rank


def _row_blocks(layout: "_Layout", axis: int, numel: int, threads: int) -> list[tuple]:
    """Index tuples splitting a sort into blocks of whole rows, one per thread: along
    the longest other dimension, and only when there is enough work to share."""
    dims = [layout.dims[p] for p in layout.to_logical]        # logical dims
    batch = [d for d in range(len(dims)) if d != axis]
    if threads < 2 or numel < PARALLEL_MIN_ELEMENTS or not batch:
        return [()]
    split = max(batch, key=lambda d: dims[d])
    bounds = np.linspace(0, dims[split], min(threads, dims[split]) + 1).astype(int)
    lead = (slice(None),) * split
    return [lead + (slice(lo, hi),) for lo, hi in zip(bounds[:-1], bounds[1:])]


class _Layout:
    """One buffer as a logical numpy view: its physical dims, dtype and the transpose
    from memory order back to logical order."""

    def __init__(self, shape):
        self.dims = physical_dims(shape)
        self.dtype = numpy_dtype(shape.element_type)
        self.to_logical = tuple(int(d) for d in np.argsort(list(reversed(shape.minor_to_major()))))

    def view(self, address: int) -> np.ndarray:
        return array_at(address, self.dims, self.dtype).transpose(self.to_logical)


class SortThunk:
    """Sorts operand slots `reads` into output slots `writes` with numpy, by `key`."""

    def __init__(self, key: SortKey, dimension: int, comparator, reads, writes,
                 operand_shapes, output_shapes):
        self.key, self.dimension, self.comparator = key, dimension, comparator
        self.reads, self.writes = list(reads), list(writes)
        self.inputs = [_Layout(s) for s in operand_shapes]
        self.outputs = [_Layout(s) for s in output_shapes]
        self.numel = int(np.prod(output_shapes[0].dims, dtype=np.int64))
        self.reference_runs = 0       # sorts whose key could not decide (NaN, plain compare)
        self._blocks = [()]

    def link(self, lookup, threads: int | None = None) -> None:
        self._blocks = _row_blocks(self.outputs[0], self.dimension, self.numel,
                                   link_threads(threads))

    def run(self, table, address, keep, ctx=None) -> None:
        if self.numel == 0:
            return
        values = [layout.view(table[slot]) for layout, slot in zip(self.inputs, self.reads)]
        results = [layout.view(table[slot]) for layout, slot in zip(self.outputs, self.writes)]
        blocks = self._blocks
        if len(blocks) == 1:
            self.reference_runs += self._sort_block(values, results)
            return
        # Rows are independent, and numpy's sorts and gathers release the GIL.
        used = [False] * len(blocks)

        def sort_block(i):
            block = blocks[i]
            used[i] = self._sort_block([v[block] for v in values], [r[block] for r in results])
        runtime.default_thread_pool().parallel_for(len(blocks), sort_block)
        self.reference_runs += any(used)

    def _sort_block(self, values, results) -> bool:
        """Sorts the rows of `values` into `results`; True if the reference had to."""
        key, undecided = self.key.sort_key(values[self.key.index])
        order = stable_order(key, self.dimension)
        if undecided is not None:
            order = self._reference_order(values, undecided, order)
        for result, value in zip(results, values):
            result[...] = np.take_along_axis(value, order, axis=self.dimension)
        return undecided is not None

    def _reference_order(self, values, undecided, order) -> np.ndarray:
        """`order` with the rows holding an undecided key sorted by the reference's
        merge sort, which calls the comparator: the result depends on that algorithm."""
        axis = self.dimension
        n = order.shape[axis]

        def rows(x):
            return np.moveaxis(x, axis, -1).reshape(-1, n)
        nan_rows = rows(undecided).any(axis=1)
        flat = rows(order).copy()
        flat[nan_rows] = sort_order(self.comparator, EvalContext(),
                                    [rows(v)[nan_rows] for v in values])
        moved_shape = np.moveaxis(order, axis, -1).shape
        return np.moveaxis(flat.reshape(moved_shape), -1, axis)
