"""jit_compile: trace a Python function once per input signature, compile, cache.

    @jit_compile
    def f(x, w):
        return ops.relu(x @ w)

    f(x, w)                          # numpy in, numpy out (traced + compiled once)
    f.lower(x, w).as_hlo_text()      # the HLO the trace produced (before passes)
    c = f.lower(x, w).compile()
    c.as_hlo_text(), c.as_llvm_ir(), c.as_asm(), c.cost_analysis(), c(x, w)

The cache key of a call is its signature: the pytree structure of the
arguments, every leaf's shape and dtype, and the values of the static
arguments (`static_argnums`, which must be hashable). A call whose signature
was seen reuses that executable; any difference traces and compiles anew, so
the cache cannot return an executable built for other shapes or dtypes.

Arguments are pytrees (tuples, lists, dicts) of numpy arrays and Python
scalars; a list of plain numbers is one array. Python floats and ints enter
as float32 and int32 (see frontend/dtypes.py). Results come back as numpy
arrays in the pytree structure the function returned.

`backend="cpu"` compiles with backend_cpu; `backend="interpreter"` runs the
(optimized) module on the numpy reference evaluator — slower, but it runs
every op the evaluator knows, which the tests use as the reference.
"""
from __future__ import annotations

import functools
import inspect
import numbers

import numpy as np

from . import pytree
from .compiled import _MISS, Compiled, check_pipeline
from .signature import CallSignature, check_arguments, make_signature
from .trace import Graph, tracing
from .lowering import lower_graph

BACKENDS = ("cpu", "interpreter")


class JitFunction:
    """A function compiled per input signature; see the module docstring."""

    def __init__(self, fn, *, static_argnums=(), pipeline="default", intra_op_threads=None,
                 backend: str = "cpu", name: str | None = None, max_isa: str | None = None):
        if not callable(fn):
            raise TypeError(f"jit_compile: expected a function, got {fn!r}")
        if backend not in BACKENDS:
            raise ValueError(f"jit_compile: backend must be one of {BACKENDS}, got {backend!r}")
        if intra_op_threads is not None and (not isinstance(intra_op_threads, int)
                                             or intra_op_threads < 1):
            raise ValueError(f"jit_compile: intra_op_threads must be a positive int, "
                             f"got {intra_op_threads!r}")
        check_pipeline(pipeline)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "fn")
        if isinstance(static_argnums, numbers.Integral):
            static_argnums = (static_argnums,)
        self.static_argnums = tuple(int(i) for i in static_argnums)
        self.pipeline = pipeline
        self.intra_op_threads = intra_op_threads
        if max_isa is not None:
            from ..backend_cpu.target import resolve
            resolve(max_isa=max_isa)          # an unknown level fails here, clearly
        self.max_isa = max_isa
        self.backend = backend
        try:
            self._signature = inspect.signature(fn)
        except (TypeError, ValueError):
            self._signature = None
        self._cache: dict[tuple, Lowered] = {}
        # (shape, dtype) of each positional ndarray -> Compiled: calls of plain arrays
        # (no kwargs, no static arguments) whose signature the slow path has checked.
        self._fast: dict[tuple, Compiled] = {}
        self._last: Compiled | None = None  # the last fast call's (tried first)
        self.trace_count = 0            # how many times fn was traced (tests read it)

    # --- calling -------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not kwargs:
            # The fast paths: the signature of the last call again (one check per
            # argument), or positional numpy arrays whose shapes and dtypes were seen
            # before; both skip pytree flattening and the signature objects.
            last = self._last
            if last is not None:
                fast = last._fast
                if fast is not None:
                    result = fast(args)
                    if result is not None:
                        return result
                result = last.call_checked(args)       # (the bound dispatch declined)
                if result is not _MISS:
                    return result
            try:
                compiled = self._fast[tuple([(a.shape, a.dtype) for a in args])]
            except (KeyError, AttributeError, TypeError):
                compiled = None
            if compiled is not None:
                result = compiled.call_exact(args)
                if result is not _MISS:
                    self._last = compiled
                    return result
        sig = make_signature(self.name, self.static_argnums, args, kwargs)
        if sig is None:
            # Called from inside another trace: inline the function into that trace.
            return self.fn(*args, **kwargs)
        compiled = self._lower(sig, args, kwargs).compile()
        if not kwargs and not self.static_argnums and len(sig.arrays) == len(args) \
                and all(type(a) is np.ndarray and a is b for a, b in zip(args, sig.arrays)):
            self._fast[tuple([(a.shape, a.dtype) for a in args])] = compiled
        return compiled.run_flat(sig.arrays)

    def signature_of(self, args, kwargs) -> CallSignature:
        sig = make_signature(self.name, self.static_argnums, args, kwargs)
        if sig is None:
            raise TypeError(f"{self.name}: lower() and compiled calls take arrays, "
                            "not traced tensors")
        return sig

    def lower(self, *args, **kwargs) -> "Lowered":
        """The traced and lowered function for these arguments' signature (cached)."""
        return self._lower(self.signature_of(args, kwargs), args, kwargs)

    def _lower(self, sig: CallSignature, args, kwargs) -> "Lowered":
        lowered = self._cache.get(sig.key)
        if lowered is None:
            check_arguments(self.name, self._signature, args, kwargs)
            lowered = self._trace(sig)
            self._cache[sig.key] = lowered
        return lowered

    def _trace(self, sig: CallSignature) -> "Lowered":
        self.trace_count += 1
        from . import ops
        graph = Graph(self.name)
        with tracing(graph):
            params = [graph.parameter(a.shape, a.dtype) for a in sig.arrays]
            args, kwargs = sig.rebuild(params)
            result = self.fn(*args, **kwargs)
            leaves, out_tree = pytree.flatten(result)
            outputs = [ops.to_tensor(leaf) for leaf in leaves]
        module = lower_graph(graph, outputs, self.name)
        return Lowered(self, sig, module, graph, outputs, out_tree)

    # --- the cache -----------------------------------------------------------------------
    def cache_size(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        self._cache.clear()
        self._fast.clear()

    def __repr__(self) -> str:
        return f"<jit_compile {self.name} backend={self.backend} pipeline={self.pipeline!r}>"


class Lowered:
    """A traced function as HLO, before passes: inspect it, evaluate it, compile it."""

    def __init__(self, jit: JitFunction, sig: CallSignature, module, graph, outputs, out_tree):
        self.jit, self.signature, self.module = jit, sig, module
        self.graph, self.outputs, self.out_tree = graph, outputs, out_tree
        self._compiled: Compiled | None = None

    def as_hlo_text(self) -> str:
        return self.module.to_text()

    def as_hlo_module(self):
        return self.module

    def fresh_module(self):
        """A new copy of `module`, lowered again from the traced graph (for a
        consumer that rewrites it in place; lowering is ~10x cheaper than
        parsing the module's text)."""
        return lower_graph(self.graph, self.outputs, self.jit.name)

    def compile(self) -> Compiled:
        if self._compiled is None:
            self._compiled = Compiled(self)
        return self._compiled

    def evaluate(self, *args, **kwargs):
        """Runs the unoptimized module on the reference evaluator (numpy in, numpy out)."""
        from ..hlo import evaluate
        arrays = self.check_call(args, kwargs)
        return pytree.unflatten(self.out_tree, evaluate(self.module, arrays))

    def check_call(self, args, kwargs) -> list:
        """The flattened arrays of a call, after checking it fits this signature."""
        sig = self.jit.signature_of(args, kwargs)
        self.signature.check_same(sig)
        return sig.arrays


def jit_compile(fn=None, *, static_argnums=(), pipeline="default", intra_op_threads=None,
                backend: str = "cpu", name: str | None = None, max_isa: str | None = None,
                mesh=None, **sharding_options):
    """Compiles `fn` per input signature: `@jit_compile` or `jit_compile(fn, ...)`.

    static_argnums: positions of arguments that are Python values baked into the
        trace (hashable; each distinct value traces anew).
    pipeline: "default" (the CPU pipeline), "O0" or None (no passes), another
        pipeline name, or a callable / pass taking an HloModule.
    intra_op_threads: threads per kernel launch (default: the runtime's setting).
    backend: "cpu" (LLVM) or "interpreter" (the numpy reference evaluator).
    max_isa: "sse4.2", "avx2" or "avx512": compile for the host capped at this x86
        level (default: $XLAPY_CPU_MAX_ISA, else the host).
    mesh: a distribute.Mesh: the function is partitioned over its devices (SPMD),
        with `in_shardings`, `out_shardings`, `return_shards`, `distributed`
        (frontend/sharding.py).
    """
    options = dict(static_argnums=static_argnums, pipeline=pipeline,
                   intra_op_threads=intra_op_threads, backend=backend, name=name,
                   max_isa=max_isa)
    if mesh is not None:
        from .sharding import ShardedFunction
        make = functools.partial(ShardedFunction, mesh=mesh, **sharding_options, **options)
    elif sharding_options:
        raise TypeError(f"jit_compile: {', '.join(sorted(sharding_options))} need mesh=")
    else:
        make = functools.partial(JitFunction, **options)
    return make if fn is None else make(fn)
