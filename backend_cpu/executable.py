"""The compiled form of a module: programs of thunks over buffer tables.

A `Program` is one compiled computation (the entry, a while body, a branch):
its slots (buffer_assignment.py), its thunks in schedule order, and which
slots hold its parameters and results. `execute` builds the call's buffer
table (constants pre-bound in a template, the temp arena and the outputs
fresh), runs the thunks -- in order on the calling thread, or on streams when
independent large kernels can overlap (inter_op.py) -- and returns the result
arrays in *physical* layout.

`CpuExecutable` wraps the entry program for users: it checks arguments,
converts numpy arrays (logical, row-major) to and from the physical layouts
of the entry's parameters and results, keeps the JIT engine alive and offers
`as_llvm_ir()`, `as_asm()`, `as_hlo_text()`, `memory_stats()` and
`kernel_strategies()` (how each kernel was emitted, strategies.py).
"""
from __future__ import annotations

import ctypes

import numpy as np

from .. import runtime
from ..hlo.dtypes import numpy_dtype

from . import inter_op, target as targets
from .buffer_assignment import Slot
from .llvm import target_machine


def physical_dims(shape) -> tuple[int, ...]:
    """Dimensions of a shape in memory order (major-most first)."""
    return tuple(shape.dims[d] for d in reversed(shape.minor_to_major()))


def to_physical(array: np.ndarray, shape) -> np.ndarray:
    if shape.has_default_layout():
        return array
    return np.ascontiguousarray(array.transpose(tuple(reversed(shape.minor_to_major()))))


def to_logical(array: np.ndarray, shape) -> np.ndarray:
    if shape.has_default_layout():
        return array
    order = list(reversed(shape.minor_to_major()))
    return np.ascontiguousarray(array.transpose(np.argsort(order)))


def address_of(array: np.ndarray) -> int:
    """The data address of an array: 0.6 us through a ctypes view of its buffer, where
    `array.ctypes.data` builds a helper object (2.4 us; on a tiny call that counts).
    Read-only and empty arrays take the slow way."""
    try:
        return ctypes.addressof(_CHAR.from_buffer(array))
    except (TypeError, ValueError, BufferError):
        return array.ctypes.data


_CHAR = ctypes.c_char

# Below this size a plain numpy allocation is cheaper than the caching allocator.
_SMALL_BYTES = 64 * 1024


def _allocate(dims, dtype, nbytes: int) -> np.ndarray:
    """A fresh array: small ones from numpy, large ones already paged in (runtime)."""
    if nbytes < _SMALL_BYTES:
        return np.empty(dims, dtype)
    return runtime.empty(dims, dtype)


class Program:
    """One compiled computation (see the module docstring)."""

    def __init__(self, name: str, slots: list[Slot], thunks: list, param_slots: list[int],
                 outputs: list[tuple[int, object]], arena_size: int):
        self.name = name
        self.slots, self.thunks = slots, thunks
        self.param_slots = param_slots
        self.outputs = outputs                  # (slot, root leaf Shape) in order
        self.arena_size = arena_size
        self._temps = [(i, s.offset) for i, s in enumerate(slots) if s.kind == "temp"]
        self._result_layout = [(slot, physical_dims(shape), numpy_dtype(shape.element_type))
                               for slot, shape in outputs]
        output_slots = {i for i, s in enumerate(slots) if s.kind == "output"}
        self._fresh_outputs = [(slot, dims, dtype, slots[slot].nbytes)
                               for slot, dims, dtype in self._result_layout if slot in output_slots]
        self._all_fresh = len(self._fresh_outputs) == len(self._result_layout)
        self._build_template()

    def _build_template(self) -> None:
        """The buffer table's constant part (also after the disk cache loads the
        program: cache_format.py stores everything else)."""
        self._table_type = ctypes.c_void_p * max(1, len(self.slots))
        self._template = self._table_type()
        for i, s in enumerate(self.slots):
            if s.kind == "constant":
                self._template[i] = s.array.ctypes.data
        self._linked = False
        self._stream_plan = None

    def link(self, lookup) -> None:
        if self._linked:
            return
        for thunk in self.thunks:
            thunk.link(lookup)
        # Independent large kernels run on streams (inter_op.py); usually there are none.
        self._stream_plan = inter_op.plan(self.thunks, self.slots,
                                          runtime.get_options().inter_op_threads)
        self._linked = True

    @property
    def stream_plan(self):
        """The inter-op StreamPlan, or None when the thunks run in order on the caller."""
        return self._stream_plan

    def execute(self, input_addresses) -> list[np.ndarray]:
        table = self._table_type.from_buffer_copy(self._template)
        for slot, address in zip(self.param_slots, input_addresses):
            table[slot] = address
        arena = None
        if self.arena_size:
            arena = _allocate((self.arena_size,), np.uint8, self.arena_size)
            base = address_of(arena)
            for slot, offset in self._temps:
                table[slot] = base + offset
        fresh = {}
        for slot, dims, dtype, nbytes in self._fresh_outputs:
            array = _allocate(dims, dtype, nbytes)
            fresh[slot] = array
            table[slot] = address_of(array)
        keep: dict = {}
        address = ctypes.addressof(table)
        if self._stream_plan is None:
            for thunk in self.thunks:
                thunk.run(table, address, keep)
        else:
            inter_op.run(self._stream_plan, self.thunks, table, address, keep)
        if self._all_fresh:           # the common case: every result is a fresh output
            return list(fresh.values())
        results = []
        for slot, dims, dtype in self._result_layout:
            array = fresh.get(slot)
            if array is None:         # bound at run time by a while/conditional/call thunk
                array = keep[slot].reshape(-1).view(dtype).reshape(dims)
            results.append(array)
        del arena
        return results

    def kernel_count(self) -> int:
        return sum(1 for t in self.thunks if hasattr(t, "kernel"))


class CpuExecutable:
    """A compiled module: `run(*arrays) -> list[np.ndarray]` (tuple results flattened)."""

    def __init__(self, program: Program, params: list, *, jit, hlo_text: str,
                 compile_seconds: float, llvm_ir: str | None = None,
                 llvm_source: str | None = None, strength_reduction: bool = True,
                 light_pipeline: bool = False, target=None, kernel_strategies=None):
        """`llvm_ir`: the optimized LLVM IR; or `llvm_source`, the IR before
        optimization, which `as_llvm_ir()` optimizes again when first asked.
        `strength_reduction`: how the code generator ran (`as_asm()` runs it alike);
        `light_pipeline`: how the optimizer ran (`as_llvm_ir()` runs it alike).
        `target`: what the code was compiled for (target.py; default the current one);
        `jit` is None when the host cannot run it, and then `run` refuses.
        `kernel_strategies`: the compiler's strategies.Choice records, or a function
        that makes them when first asked."""
        if llvm_ir is None and llvm_source is None:
            raise TypeError("CpuExecutable: give llvm_ir or llvm_source")
        self._program = program
        self._jit = jit                        # keeps the machine code alive
        if target is None:
            target = targets.current()
        self.target = target
        self._llvm_ir = llvm_ir
        self._llvm_source = llvm_source
        self._strength_reduction = strength_reduction
        self._light_pipeline = light_pipeline
        self._hlo_text = hlo_text
        self._params = [shape for _, shape in params]        # (name, Shape) per parameter
        self._param_names = [name for name, _ in params]
        self._param_checks = [(numpy_dtype(s.element_type) if s.is_array else None,
                               tuple(s.dims), s.has_default_layout()) for s in self._params]
        self._default_outputs = all(shape.has_default_layout() for _, shape in program.outputs)
        self.compile_seconds = compile_seconds
        self._asm = None
        self._kernel_strategies = kernel_strategies

    # --- running ---------------------------------------------------------------------
    def run(self, *arrays) -> list[np.ndarray]:
        if self._jit is None:
            raise RuntimeError(f"run: this executable was compiled for {self.target.describe()}, "
                               f"which this host cannot execute; as_asm() and as_llvm_ir() "
                               f"show its code")
        if len(arrays) != len(self._params):
            raise TypeError(f"run: expected {len(self._params)} arguments, got {len(arrays)}")
        bound, addresses = [], []
        for i, (value, (dtype, dims, default_layout)) in enumerate(zip(arrays, self._param_checks)):
            array = value
            if not (type(value) is np.ndarray and value.dtype == dtype and value.shape == dims
                    and default_layout and value.flags.c_contiguous and value.flags.aligned):
                array = self._check_argument(i, value, self._params[i])
            bound.append(array)
            addresses.append(address_of(array))
        results = self._program.execute(addresses)
        if self._default_outputs:
            return results
        return [to_logical(r, shape) for r, (_, shape) in zip(results, self._program.outputs)]

    __call__ = run

    def _check_argument(self, i: int, value, shape) -> np.ndarray:
        name = f"parameter {i} ({self._param_names[i]})"
        if shape.is_tuple:
            raise NotImplementedError(f"run: {name} is a tuple; tuple parameters are not supported")
        array = np.asarray(value)
        expected = numpy_dtype(shape.element_type)
        if array.dtype != expected:
            raise TypeError(f"run: {name} must have dtype {expected} ({shape.element_type}), "
                            f"got {array.dtype}")
        if array.shape != tuple(shape.dims):
            raise ValueError(f"run: {name} must have shape {tuple(shape.dims)}, got {array.shape}")
        array = to_physical(array, shape)
        if not (array.flags.c_contiguous and array.flags.aligned):
            array = np.ascontiguousarray(array).copy() if not array.flags.aligned \
                else np.ascontiguousarray(array)
        return array

    # --- introspection -------------------------------------------------------------------
    def as_llvm_ir(self) -> str:
        """The optimized LLVM IR of every kernel.

        Computed on first use from the IR the compiler emitted: the optimizer is
        deterministic, so this is the code that was compiled to machine code.
        """
        if self._llvm_ir is None:
            module = target_machine.parse_and_verify(self._llvm_source, self.target)
            self._llvm_ir = str(target_machine.optimize(module, light=self._light_pipeline,
                                                     target=self.target))
        return self._llvm_ir

    def as_asm(self) -> str:
        """The target's assembly of the optimized IR."""
        if self._asm is None:
            self._asm = target_machine.assembly(
                target_machine.parse_and_verify(self.as_llvm_ir(), self.target),
                strength_reduction=self._strength_reduction, target=self.target)
        return self._asm

    def as_hlo_text(self) -> str:
        """The HLO module that was compiled (after the pipeline, if any)."""
        return self._hlo_text

    def kernel_strategies(self) -> list:
        """How each kernel was emitted, in the order the compiler emitted them (while
        bodies, branches and host sorts included): (kernel name, the strategy that
        emitted it, ((declined strategy, its reason), ...)) per kernel, the strategies
        being the rows of strategies.STRATEGIES, in table order."""
        if callable(self._kernel_strategies):
            self._kernel_strategies = self._kernel_strategies()
        return list(self._kernel_strategies or ())

    def memory_stats(self) -> dict:
        p = self._program
        return {
            "arena_bytes": p.arena_size,
            "constant_bytes": sum(s.nbytes for s in p.slots if s.kind == "constant"),
            "output_bytes": sum(s.nbytes for s in p.slots if s.kind == "output"),
            "num_slots": len(p.slots),
            "num_kernels": p.kernel_count(),
        }
