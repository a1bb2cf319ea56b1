"""The compiled form of a module: programs of thunks over buffer tables.

A `Program` is one compiled computation (the entry, a while body, a branch):
its slots (buffer_assignment.py), its thunks in schedule order, and which
slots hold its parameters and results. `execute` builds the call's buffer
table (constants pre-bound in a template, the temp arena and the outputs
fresh), runs the thunks -- in order on the calling thread, or on streams when
independent large kernels can overlap (inter_op.py) -- and returns the result
arrays in *physical* layout. While a trace runs (runtime/profiler.py), it records
the execution and each thunk as spans (`trace_row`: what the compiler recorded
in `thunk.profile`); otherwise the trace costs one check per execution.

`CpuExecutable` wraps the entry program for users: it checks arguments,
converts numpy arrays (logical, row-major) to and from the physical layouts
of the entry's parameters and results, keeps the JIT engine alive and offers
`as_llvm_ir()`, `as_asm()`, `as_hlo_text()`, `memory_stats()` and
`kernel_strategies()` (how each kernel was emitted, strategies.py).
"""
from __future__ import annotations

import ctypes
import hashlib
import threading

import numpy as np

from .. import runtime
from ..hlo.dtypes import numpy_dtype
from ..runtime import mpi_communicator
from ..runtime import profiler as _profiler

from . import inter_op, target as targets
from .buffer_assignment import Slot
from .llvm import target_machine
from .thunks import DeviceContext


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

    # (a class default: programs stored in the disk cache before the field existed)
    in_place: tuple = ()

    def __init__(self, name: str, slots: list[Slot], thunks: list, param_slots: list[int],
                 outputs: list[tuple[int, object]], arena_size: int, in_place=()):
        """`in_place` (a while body): the state leaves whose result is their parameter's
        buffer, updated in place; `execute` returns None for them."""
        self.name = name
        if in_place:
            self.in_place = tuple(in_place)
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
        self._lean = None                 # set by link: see _lean_plan
        self._trace_rows = None           # per thunk (name, category, args): tracing only

    def link(self, lookup, threads: int | None = None) -> None:
        """Binds the thunks to machine code; `threads`: intra-op threads per execution
        (None: the runtime option; a program of N devices gets its share)."""
        if self._linked:
            return
        for thunk in self.thunks:
            thunk.link(lookup, threads)
        # Independent large kernels run on streams (inter_op.py); usually there are none.
        self._stream_plan = inter_op.plan(self.thunks, self.slots,
                                          runtime.get_options().inter_op_threads)
        self._lean = self._lean_plan()
        self._linked = True

    def _lean_plan(self):
        """What `execute` needs when every thunk is a kernel run inline as one slice and
        every result is a fresh output (the usual small program): the native calls and
        the outputs to allocate, so a call runs no per-thunk Python. Else None."""
        calls = [getattr(t, "_single", None) for t in self.thunks]
        if self._stream_plan is not None or not self._all_fresh or None in calls:
            return None
        outputs = tuple((slot, dims, dtype, nbytes < _SMALL_BYTES)
                        for slot, dims, dtype, nbytes in self._fresh_outputs)
        return tuple(calls), outputs

    @property
    def stream_plan(self):
        """The inter-op StreamPlan, or None when the thunks run in order on the caller."""
        return self._stream_plan

    def execute(self, input_addresses, ctx=None) -> list[np.ndarray]:
        """Runs the program as the device of `ctx` (thunks.DeviceContext; None: the only
        device). While a trace runs (runtime.profiler), every thunk is a span."""
        rec = _profiler.active            # the only cost of tracing when it is off
        if rec is not None:
            start = _profiler.now()
        table = self._table_type.from_buffer_copy(self._template)
        for slot, address in zip(self.param_slots, input_addresses):
            table[slot] = address
        arena = None
        if self.arena_size:
            arena = _allocate((self.arena_size,), np.uint8, self.arena_size)
            base = address_of(arena)
            for slot, offset in self._temps:
                table[slot] = base + offset
        lean = self._lean
        if lean is not None and rec is None:
            results = []
            for slot, dims, dtype, small in lean[1]:
                array = np.empty(dims, dtype) if small else runtime.empty(dims, dtype)
                results.append(array)
                table[slot] = address_of(array)
            address = ctypes.addressof(table)
            for call, begin, end in lean[0]:
                call(address, begin, end)
            return results
        fresh = {}
        for slot, dims, dtype, nbytes in self._fresh_outputs:
            array = _allocate(dims, dtype, nbytes)
            fresh[slot] = array
            table[slot] = address_of(array)
        keep: dict = {}
        address = ctypes.addressof(table)
        if rec is not None:
            self._run_traced(rec, start, table, address, keep, ctx)
        elif self._stream_plan is None:
            for thunk in self.thunks:
                thunk.run(table, address, keep, ctx)
        else:               # kernels and copies only: they need no device context
            inter_op.run(self._stream_plan, self.thunks, table, address, keep)
        if self._all_fresh:           # the common case: every result is a fresh output
            return list(fresh.values())
        results = []
        for slot, dims, dtype in self._result_layout:
            array = fresh.get(slot)
            if array is None and self.slots[slot].kind == "param":
                results.append(None)  # a while body's state leaf, updated in place
                continue
            if array is None:         # bound at run time by a while/conditional/call thunk
                array = keep[slot].reshape(-1).view(dtype).reshape(dims)
            results.append(array)
        del arena
        return results

    def kernel_count(self) -> int:
        return sum(1 for t in self.thunks if hasattr(t, "kernel"))

    # --- tracing (runtime.profiler) --------------------------------------------------------
    def _run_traced(self, rec, start: int, table, address, keep, ctx) -> None:
        """The thunks, each recorded as a span on the device's pid, inside a span of the
        program: a "step" when no other program runs on this thread, else a "program"
        (a while body, a branch) nested in its thunk's span."""
        if self._trace_rows is None:
            self._trace_rows = [trace_row(t) for t in self.thunks]
        pid = _profiler.device_pid(ctx.device if ctx is not None else 0)
        depth = rec.enter()
        try:
            if self._stream_plan is None:
                for thunk, (name, cat, args) in zip(self.thunks, self._trace_rows):
                    t0 = _profiler.now()
                    if cat == "kernel" and thunk._single is None and thunk.dims.slices:
                        _profiler.launch(rec, pid, thunk.kernel, thunk.dims, address, name)
                    else:
                        thunk.run(table, address, keep, ctx)
                    rec.add(name, cat, t0, _profiler.now(), pid, args)
            else:
                inter_op.run(self._stream_plan, self.thunks, table, address, keep,
                             trace=(rec, pid, self._trace_rows))
        finally:
            rec.leave()
            rec.add(self.name, "step" if depth == 0 else "program", start, _profiler.now(),
                    pid, {"thunks": len(self.thunks)})


# Thunk classes by the trace category of their spans (others: "host").
_CATEGORIES = {"KernelThunk": "kernel", "CopyThunk": "copy", "WhileThunk": "while",
               "ConditionalThunk": "conditional", "CallThunk": "call"}


def trace_row(thunk) -> tuple[str, str, dict]:
    """(name, category, args) of a thunk's spans: what the compiler recorded about it
    (`thunk.profile`: the HLO instruction, op, strategy, bytes, flops) and its launch."""
    info = dict(getattr(thunk, "profile", None) or {})
    kind = type(thunk).__name__
    cat = _CATEGORIES.get(kind) or ("collective" if hasattr(thunk, "issue") or kind in (
        "StartThunk", "DoneThunk", "DeviceIdThunk") else "host")
    name = info.pop("name", None) or getattr(thunk, "name", None) or kind
    if cat == "kernel":
        info["kernel"] = thunk.name
        info["partitions"] = len(thunk.dims.slices) if thunk.dims is not None else 0
    elif cat == "copy":
        info.setdefault("op", "copy")
        info.setdefault("bytes_read", thunk.nbytes)
        info.setdefault("bytes_written", thunk.nbytes)
    info.setdefault("op", kind)
    return name, cat, info


class _Addresses(list):
    """Argument addresses that keep the (converted) arrays they point into alive."""
    __slots__ = ("arrays",)

    def __init__(self, addresses, arrays):
        super().__init__(addresses)
        self.arrays = arrays


_mpi_lock = threading.Lock()
_mpi_comm = None


def _mpi_communicator():
    """The process's MpiCommunicator, made at the first compile with distributed="mpi"
    (making one is collective: every rank compiles its executables in the same order)."""
    global _mpi_comm
    with _mpi_lock:
        if _mpi_comm is None:
            _mpi_comm = mpi_communicator.MpiCommunicator()
        return _mpi_comm


class CpuExecutable:
    """A compiled module: `run(*arrays) -> list[np.ndarray]` (tuple results flattened)."""

    def __init__(self, program: Program, params: list, *, jit, hlo_text,
                 compile_seconds: float, llvm_ir: str | None = None,
                 llvm_source: str | None = None, strength_reduction: bool = True,
                 light_pipeline: bool = False, target=None, kernel_strategies=None,
                 devices: tuple[int, int] = (1, 1), distributed: str | None = None):
        """`llvm_ir`: the optimized LLVM IR; or `llvm_source`, the IR before
        optimization, which `as_llvm_ir()` optimizes again when first asked.
        `strength_reduction`: how the code generator ran (`as_asm()` runs it alike);
        `light_pipeline`: how the optimizer ran (`as_llvm_ir()` runs it alike): one bool,
        or one per module of a list `llvm_source`.
        `hlo_text`: the module's text, or a function that prints it when first asked
        (the compiler hands over the compiled module's `to_text`: 40 ms of printing for
        the 12-layer GPT step that nobody may read).
        `target`: what the code was compiled for (target.py; default the current one);
        `jit` is None when the host cannot run it, and then `run` refuses.
        `kernel_strategies`: the compiler's strategies.Choice records, or a function
        that makes them when first asked. `devices`: (replica_count, num_partitions)
        the program runs with; `distributed`: None (its devices in this process) or
        "mpi" (this process runs the device of its MPI rank)."""
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
        # (_light_pipeline: every kernel took the light pipeline; _light_modules: per module)
        self._light_modules = list(light_pipeline) if isinstance(light_pipeline, (list, tuple)) \
            else None
        self._light_pipeline = all(self._light_modules[1:] or [False]) \
            if self._light_modules is not None else light_pipeline
        self._hlo_text = hlo_text
        self._fingerprint = None
        self._params = [shape for _, shape in params]        # (name, Shape) per parameter
        self._param_names = [name for name, _ in params]
        self._param_checks = [(numpy_dtype(s.element_type) if s.is_array else None,
                               tuple(s.dims), s.has_default_layout()) for s in self._params]
        self._default_outputs = all(shape.has_default_layout() for _, shape in program.outputs)
        self.compile_seconds = compile_seconds
        self._asm = None
        self._kernel_strategies = kernel_strategies
        self.replica_count, self.num_partitions = devices
        self.num_devices = devices[0] * devices[1]
        self.distributed = distributed
        self._comm = None                      # MPI: the process's communicator
        self._in_process = None                # run_devices: kept between calls
        self._in_process_lock = threading.Lock()
        self.device = None                     # MPI: the rank's device
        self._checked = False                  # MPI: the ranks compared fingerprints
        if distributed == "mpi":
            self._comm = _mpi_communicator()
            if self._comm.num_devices != self.num_devices:
                raise ValueError(f"compile: the module runs on {self.num_devices} devices, "
                                 f"but MPI runs {self._comm.num_devices} ranks (start it "
                                 f"with mpirun -n {self.num_devices})")
            self.device = self._comm.local_devices[0]

    @property
    def communicator(self):
        """Under MPI, the runtime's MpiCommunicator the ranks meet through (else None)."""
        return self._comm

    # --- running ---------------------------------------------------------------------
    def _context(self, device: int, comm) -> DeviceContext:
        P = self.num_partitions
        return DeviceContext(device, device // P, device % P, comm)

    def run_exact(self, arrays) -> list[np.ndarray] | None:
        """The results of `run(*arrays)` when the arrays are exactly the parameters
        (numpy arrays of their dtypes and shapes, C order, aligned) of a program of one
        device whose results need no relayout; else None, having run nothing (the caller
        then takes `run`, which converts or explains). The dispatch of a repeated call."""
        checks = self._param_checks
        if self._jit is None or self.num_devices > 1 or self.distributed is not None \
                or not self._default_outputs or len(arrays) != len(checks):
            return None
        addresses = []
        for value, (dtype, dims, default_layout) in zip(arrays, checks):
            if type(value) is not np.ndarray or value.dtype != dtype or value.shape != dims \
                    or not default_layout:
                return None
            flags = value.flags
            if not (flags.c_contiguous and flags.aligned):
                return None
            addresses.append(address_of(value))
        return self._program.execute(addresses)

    def fast_function(self, first_only: bool = False):
        """The dispatch of a repeated call as one closure, or None where it does not apply
        (several devices, MPI, results to relayout, a program that is not lean: see
        Program._lean_plan). `fast(args)` takes a tuple of numpy arrays; when they are
        exactly the parameters (types, shapes, C order, aligned, writable) and no trace
        runs, it runs the kernels and returns the results (the first only, with
        `first_only`), else None having run nothing, and the caller takes `run`.
        Everything a call would look up is bound once here: a call costs the checks, the
        buffer table and the native calls (jit of `x + 1.0` on f32[4]: 8.6 -> 5.7 us on a
        loaded 2-core host)."""
        program = self._program
        if self._jit is None or self.num_devices > 1 or self.distributed is not None \
                or not self._default_outputs or program._lean is None \
                or not all(dtype is not None and default for dtype, _, default in self._param_checks):
            return None
        calls, outputs = program._lean
        checks = tuple((dtype, dims, slot, dtype.itemsize) for (dtype, dims, _), slot
                       in zip(self._param_checks, program.param_slots))
        count = len(checks)
        template, copy_table = program._template, program._table_type.from_buffer_copy
        arena_size, temps = program.arena_size, tuple(program._temps)
        addressof, view, ndarray, empty = ctypes.addressof, _CHAR.from_buffer, np.ndarray, np.empty
        small = arena_size < _SMALL_BYTES

        def fast(args):
            if len(args) != count or _profiler.active is not None:
                return None
            table = copy_table(template)
            for value, (dtype, dims, slot, itemsize) in zip(args, checks):
                if type(value) is not ndarray or value.shape != dims \
                        or (value.dtype is not dtype and value.dtype != dtype):
                    return None
                try:
                    address = addressof(view(value))    # C-contiguous and writable only
                except (TypeError, ValueError, BufferError):
                    return None
                if address % itemsize:
                    return None
                table[slot] = address
            if arena_size:
                arena = empty(arena_size, np.uint8) if small else runtime.empty((arena_size,), np.uint8)
                base = addressof(view(arena))
                for slot, offset in temps:
                    table[slot] = base + offset
            results = []
            for slot, dims, dtype, small_output in outputs:
                array = empty(dims, dtype) if small_output else runtime.empty(dims, dtype)
                results.append(array)
                table[slot] = addressof(view(array)) if array.size else array.ctypes.data
            address = addressof(table)
            for call, begin, end in calls:
                call(address, begin, end)
            return results[0] if first_only else results

        return fast

    def run(self, *arrays) -> list[np.ndarray]:
        """Runs the program on its one device; under MPI (`distributed="mpi"`), on this
        rank's device (`self.device`), meeting the other ranks in its collectives."""
        if self.distributed is None:
            if self._jit is None or self.num_devices > 1 or len(arrays) != len(self._params):
                self._check_single("run", len(arrays))
            results = self.run_exact(arrays)        # the lean path: exactly the parameters
            if results is not None:
                return results
            results = self._program.execute(self._bind(arrays, "run"))
            return results if self._default_outputs else self._finish(results)
        self._check_runnable("run")
        addresses = self._bind(arrays, "run")
        ctx = self._context(self.device, self._comm)
        try:
            if not self._checked:
                self._comm.check_same_program(self.device, self.fingerprint)
                self._checked = True
            results = self._program.execute(addresses, ctx)
        except runtime.CollectiveError:
            raise
        except BaseException as exc:
            self._comm.abort(self.device, exc)
            raise
        return self._finish(results)

    __call__ = run

    def run_devices(self, args_per_device, timeout: float | None = None) -> list[list]:
        """Runs every device in this process, one thread each (with its share of the
        intra-op threads): `args_per_device[d]` are device d's arguments; returns each
        device's outputs. A device that raises makes the others stop with a
        CollectiveError naming it; its own error is raised here, noting the device.
        `timeout`: seconds a device may wait for its peers in one collective (default
        the runtime's collective_timeout)."""
        if self.distributed is not None:
            raise ValueError("run_devices: this executable was compiled with "
                             "distributed='mpi'; each rank calls run(*its_arguments)")
        self._check_runnable("run_devices")
        try:
            per_device = list(args_per_device)
        except TypeError:
            raise TypeError("run_devices: give a list of argument lists, one per "
                            "device") from None
        n = self.num_devices
        if len(per_device) != n:
            raise ValueError(f"run_devices: the executable runs on {n} device"
                             f"{'s' * (n != 1)}, got arguments for {len(per_device)}")
        bound = []
        for d, args in enumerate(per_device):
            try:
                bound.append(self._bind(list(args), f"run_devices: device {d}"))
            except TypeError as e:
                raise type(e)(str(e)) from None
        if n == 1:
            return [self._finish(self._program.execute(bound[0]))]
        comm, shared = self._devices_communicator(timeout)
        try:
            outputs = comm.run(lambda d: self._program.execute(bound[d],
                                                               self._context(d, comm)))
        except BaseException:
            if shared:
                self._in_process = None        # failed: the next call makes a new one
            comm.close()
            raise
        finally:
            if shared:
                self._in_process_lock.release()
        if not shared:
            comm.close()
        return [self._finish(results) for results in outputs]

    def _devices_communicator(self, timeout):
        """(communicator, shared) for one run_devices call. A training loop calls once per
        step: the executable keeps its communicator and device threads between calls (a
        new one per call cost about a millisecond a step) and holds its lock for the call;
        a call made while another runs gets a fresh one of its own (shared=False)."""
        want = timeout if timeout is not None else runtime.get_options().collective_timeout
        if not self._in_process_lock.acquire(blocking=False):
            return runtime.InProcessCommunicator(self.num_devices, timeout=timeout), False
        comm = self._in_process
        if comm is None or comm.failure is not None or comm.timeout != float(want):
            if comm is not None:
                comm.close()
            comm = self._in_process = runtime.InProcessCommunicator(self.num_devices,
                                                                    timeout=timeout)
        return comm, True

    def _check_single(self, what: str, count: int) -> None:
        self._check_runnable(what)
        if self.num_devices > 1:
            raise ValueError(f"{what}: this executable runs on {self.num_devices} devices; "
                             f"call run_devices(args_per_device)")
        if count != len(self._params):
            raise TypeError(f"{what}: expected {len(self._params)} arguments, got {count}")

    def _check_runnable(self, what: str) -> None:
        if self._jit is None:
            raise RuntimeError(f"{what}: this executable was compiled for "
                               f"{self.target.describe()}, which this host cannot execute; "
                               f"as_asm() and as_llvm_ir() show its code")

    def _finish(self, results: list) -> list[np.ndarray]:
        if self._default_outputs:
            return results
        return [to_logical(r, shape) for r, (_, shape) in zip(results, self._program.outputs)]

    def _bind(self, arrays, what: str) -> list[int]:
        """Checks and converts the arguments; returns their addresses (a list that keeps
        the converted arrays alive)."""
        if len(arrays) != len(self._params):
            raise TypeError(f"{what}: expected {len(self._params)} arguments, "
                            f"got {len(arrays)}")
        bound, addresses = [], []
        for i, (value, (dtype, dims, default_layout)) in enumerate(zip(arrays, self._param_checks)):
            array = value
            if not (type(value) is np.ndarray and value.dtype == dtype and value.shape == dims
                    and default_layout and value.flags.c_contiguous and value.flags.aligned):
                array = self._check_argument(i, value, self._params[i], what)
            bound.append(array)
            addresses.append(address_of(array))
        return _Addresses(addresses, bound)

    def _check_argument(self, i: int, value, shape, what: str = "run") -> np.ndarray:
        name = f"parameter {i} ({self._param_names[i]})"
        if shape.is_tuple:
            raise NotImplementedError(f"{what}: {name} is a tuple; tuple parameters are not "
                                      f"supported")
        array = np.asarray(value)
        expected = numpy_dtype(shape.element_type)
        if array.dtype != expected:
            raise TypeError(f"{what}: {name} must have dtype {expected} ({shape.element_type}), "
                            f"got {array.dtype}")
        if array.shape != tuple(shape.dims):
            raise ValueError(f"{what}: {name} must have shape {tuple(shape.dims)}, got {array.shape}")
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
            # The compiler's source is one module text, or several (kernel_cache.py: the
            # glue and each kernel's module), optimized apart and linked into one here.
            sources = [self._llvm_source] if isinstance(self._llvm_source, str) \
                else list(self._llvm_source)
            module = None
            for i, source in enumerate(sources):
                light = self._light_modules[i] if self._light_modules is not None \
                    else self._light_pipeline
                part = target_machine.optimize(target_machine.parse_and_verify(source, self.target),
                                               light=light, target=self.target)
                if module is None:
                    module = part
                else:
                    module.link_in(part)
            self._llvm_ir = str(module)
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
        if not isinstance(self._hlo_text, str):
            self._hlo_text = self._hlo_text()
        return self._hlo_text

    @property
    def fingerprint(self) -> str:
        """A hash of the compiled module's text and its devices (MPI ranks compare it)."""
        if self._fingerprint is None:
            self._fingerprint = hashlib.sha256(
                f"{self.as_hlo_text()}\0devices={self.replica_count, self.num_partitions}"
                .encode()).hexdigest()[:32]
        return self._fingerprint

    def kernel_strategies(self) -> list:
        """How each kernel was emitted, in the order the compiler emitted them (while
        bodies, branches and host sorts included): (kernel name, the strategy that
        emitted it, ((declined strategy, its reason), ...)) per kernel, the strategies
        being the rows of strategies.STRATEGIES, in table order."""
        if callable(self._kernel_strategies):
            self._kernel_strategies = self._kernel_strategies()
        return list(self._kernel_strategies or ())

    def memory_stats(self) -> dict:
        """The entry program's buffers, in bytes: `argument_bytes` (the parameters),
        `output_bytes` (fresh result arrays per call), `arena_bytes` (the temp arena,
        one allocation per call), `constant_bytes` (bound once), `dynamic_bytes` (values
        allocated as they are made: while/conditional state, host-op results), and
        `code_bytes`, the object code loaded (0 when nothing was compiled). A while body
        or branch allocates its own arena per run, not counted here."""
        p = self._program
        by_kind: dict = {}
        for slot in p.slots:
            by_kind[slot.kind] = by_kind.get(slot.kind, 0) + slot.nbytes
        code = getattr(self._jit, "object_code", None) or b""
        return {
            "arena_bytes": p.arena_size,
            "argument_bytes": by_kind.get("param", 0),
            "constant_bytes": by_kind.get("constant", 0),
            "output_bytes": by_kind.get("output", 0),
            "dynamic_bytes": by_kind.get("dynamic", 0),
            "code_bytes": sum(len(c) for c in code) if isinstance(code, (list, tuple))
            else len(code),
            "num_slots": len(p.slots),
            "num_kernels": p.kernel_count(),
        }
