"""Compiled: a lowered function after the pass pipeline, ready to run.

With the CPU backend it wraps a `backend_cpu.CpuExecutable`; with the
interpreter backend it runs the optimized module on the reference evaluator.
Either way it shows the HLO after passes and a cost analysis computed from it.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from . import pytree
from .cost import cost_analysis

_NO_PASSES = (None, "none", "O0")
_MISS = object()             # call_exact: the arguments are not exactly the signature's


def check_pipeline(pipeline) -> None:
    """An error now (not at the first call) for a pipeline jit_compile cannot use."""
    if pipeline in _NO_PASSES or pipeline == "default":
        return
    if isinstance(pipeline, str):
        from ..passes import PassError, named_pipeline
        try:
            named_pipeline(pipeline)
        except PassError as e:
            raise ValueError(f"jit_compile: {e}") from None
    elif not (callable(pipeline) or hasattr(pipeline, "run")):
        raise TypeError(f"jit_compile: pipeline must be a name, a callable or a pass, "
                        f"got {pipeline!r}")


def _pipeline_callable(pipeline):
    """What the backend's CompileOptions.pipeline takes: None, "default" or a callable."""
    if pipeline in _NO_PASSES:
        return None
    if pipeline == "default":
        return "default"
    if isinstance(pipeline, str):
        from ..passes import named_pipeline
        return named_pipeline(pipeline)
    return pipeline


def _run_pipeline(module, pipeline):
    """A copy of `module` after `pipeline` (for the interpreter backend)."""
    from ..hlo import parse_module
    copy = parse_module(module.to_text())
    p = _pipeline_callable(pipeline)
    if p == "default":
        from ..passes import cpu_pipeline
        p = cpu_pipeline()
    if p is not None:
        p.run(copy) if hasattr(p, "run") else p(copy)
    return copy


class Compiled:
    """The executable for one signature: `__call__`, HLO after passes, LLVM IR, assembly."""

    def __init__(self, lowered):
        self.lowered = lowered
        self._plain_avals = _plain_avals(lowered.signature)
        self._one_leaf = lowered.out_tree == pytree.LEAF
        jit = lowered.jit
        self.backend = jit.backend
        self._fast = None       # args -> results or None (CpuExecutable.fast_function)
        if self.backend == "cpu":
            self._executable = _compile_cpu(lowered, jit.pipeline, jit.intra_op_threads,
                                            jit.max_isa)
            if self._plain_avals is not None:
                fast = self._executable.fast_function(first_only=self._one_leaf)
                if fast is not None and not self._one_leaf:
                    out_tree = lowered.out_tree

                    def fast_tree(args, fast=fast):
                        results = fast(args)
                        return None if results is None else pytree.unflatten(out_tree, results)
                    self._fast = fast_tree
                else:
                    self._fast = fast
            self._optimized_text = None       # (printed when first asked: as_hlo_text)
            self._optimized = None
        else:
            self._executable = None
            self._optimized = _run_pipeline(lowered.module, jit.pipeline)
            self._optimized_text = self._optimized.to_text()

    def __call__(self, *args, **kwargs):
        if not kwargs:
            result = self.call_exact(args)
            if result is not _MISS:
                return result
        return self.run_flat(self.lowered.check_call(args, kwargs))

    def call_exact(self, args):
        """The result for positional arrays that are exactly what the signature takes
        (the dispatch of a repeated call: no pytree flattening, one check per argument),
        else _MISS, having run nothing."""
        if self._plain_avals is None:
            return _MISS
        fast = self._fast
        if fast is not None:
            result = fast(args)
            if result is not None:
                return result
        return self.call_checked(args)

    def call_checked(self, args):
        """`call_exact` after the bound dispatch declined (or where there is none): the
        checks of `run_exact`, then the run; _MISS when the arguments are not exactly
        the signature's."""
        if self._plain_avals is None:
            return _MISS
        if self._executable is not None:
            results = self._executable.run_exact(args)
            if results is None:
                return _MISS
            if self._one_leaf:
                return results[0]
            return pytree.unflatten(self.lowered.out_tree, results)
        if len(args) != len(self._plain_avals) or not all(
                type(a) is np.ndarray and (a.shape, a.dtype) == aval
                for a, aval in zip(args, self._plain_avals)):
            return _MISS
        return self.run_flat(args)

    def run_flat(self, arrays):
        """Runs on the flattened argument arrays (already checked); returns the pytree."""
        if self._executable is not None:
            results = self._executable.run(*arrays)
        else:
            from ..hlo import evaluate
            results = evaluate(self._optimized, arrays)
        return pytree.unflatten(self.lowered.out_tree, list(results))

    def as_hlo_text(self) -> str:
        """The HLO module after the pass pipeline."""
        if self._optimized_text is None:
            self._optimized_text = self._executable.as_hlo_text()
        return self._optimized_text

    def as_hlo_module(self):
        if self._optimized is None:
            from ..hlo import parse_module
            self._optimized = parse_module(self.as_hlo_text())
        return self._optimized

    def as_llvm_ir(self) -> str:
        return self._need_cpu("as_llvm_ir").as_llvm_ir()

    def as_asm(self) -> str:
        return self._need_cpu("as_asm").as_asm()

    def profile(self, *args, repeat: int = 10, warmup: int = 1, trace=None, file=None,
                **kwargs):
        """Runs on `args` `warmup` times, then `repeat` times under the profiler, and
        prints the per-kernel table (time per step, share, GB/s, GFLOP/s, fraction of
        this host's roofline; slowest first) to `file` (default stdout; None-like
        False: no print). `trace`: also write the Chrome trace there. Returns the
        backend's Profile (`.rows`, `.table()`)."""
        executable = self._need_cpu("profile")
        if executable.num_devices > 1:
            raise NotImplementedError("profile: this function runs on several devices; "
                                      "trace its calls with xlapy.profiler.trace(path)")
        from ..backend_cpu import profiling
        arrays = self.lowered.check_call(args, kwargs)
        result = profiling.profile(executable, list(arrays), repeat=repeat, warmup=warmup,
                                   trace=trace)
        if file is not False:
            import sys
            print(result.table(), file=file or sys.stdout)
        return result

    def cost_analysis(self) -> dict:
        """{"flops", "transcendentals", "bytes accessed"} of the optimized module."""
        return cost_analysis(self.as_hlo_module())

    def memory_analysis(self) -> "CompiledMemoryStats":
        """Bytes of the compiled program's buffers per device, with the field names of
        JAX's `compiled.memory_analysis()` (see CompiledMemoryStats)."""
        stats = self._need_cpu("memory_analysis").memory_stats()
        temp = stats["arena_bytes"] + stats["dynamic_bytes"]
        return CompiledMemoryStats(
            generated_code_size_in_bytes=stats["code_bytes"],
            argument_size_in_bytes=stats["argument_bytes"],
            output_size_in_bytes=stats["output_bytes"],
            alias_size_in_bytes=0,
            temp_size_in_bytes=temp,
            constant_size_in_bytes=stats["constant_bytes"],
            peak_memory_in_bytes=(stats["argument_bytes"] + stats["output_bytes"] + temp
                                  + stats["constant_bytes"]))

    def _need_cpu(self, what: str):
        if self._executable is None:
            raise NotImplementedError(f"{what}: the interpreter backend compiles no LLVM code "
                                      "(use backend='cpu')")
        return self._executable


@dataclasses.dataclass(frozen=True)
class CompiledMemoryStats:
    """`Compiled.memory_analysis()`: JAX's field names, in bytes, per device.

    argument   the parameters (the caller's arrays; read in place, never copied)
    output     the results: fresh arrays each call
    alias      outputs that reuse an argument's buffer: none (no donation yet)
    temp       the temp arena (one allocation per call, buffers reused by liveness)
               plus values allocated as they are made (loop state, host-op results)
    generated_code   the object code loaded for the kernels
    constant   literals bound into the program once (XLA counts them elsewhere)
    peak_memory      argument + output + temp + constant: everything live during a
                     call (an upper bound; a while body's own arena comes on top)
    The host_* fields are 0: every buffer is host memory, counted above."""
    generated_code_size_in_bytes: int
    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    temp_size_in_bytes: int
    constant_size_in_bytes: int
    peak_memory_in_bytes: int
    host_generated_code_size_in_bytes: int = 0
    host_argument_size_in_bytes: int = 0
    host_output_size_in_bytes: int = 0
    host_alias_size_in_bytes: int = 0
    host_temp_size_in_bytes: int = 0


def _plain_avals(sig):
    """((shape, dtype) per argument) when the signature is just positional arrays (no
    static arguments, no nesting, no kwargs) -- calls then need no pytree flattening --
    else None."""
    n = len(sig.arrays)
    if sig.static or sig.n_args != n:
        return None
    if sig.treedef != pytree.flatten((tuple(range(n)), {}))[1]:
        return None
    return tuple((shape, np.dtype(dtype)) for shape, dtype in sig.avals)


def _compile_cpu(lowered, pipeline, intra_op_threads, max_isa=None, **more_options):
    """The backend's executable for `lowered`; `more_options` are further CompileOptions
    fields (frontend/distribute.py: num_devices, distributed)."""
    from .. import backend_cpu
    import dataclasses
    fields = {f.name for f in dataclasses.fields(backend_cpu.CompileOptions)}
    options = {"pipeline": _pipeline_callable(pipeline), "max_isa": max_isa, **more_options}

    def compile_(**extra):
        # The pipeline rewrites a copy of the module (the Lowered keeps its own for
        # as_hlo_text and evaluate): the backend's clone of it, made only if the backend
        # compiles (not on a cache hit). A clone of the 12-layer GPT step takes 10 ms,
        # lowering the graph again took 65 ms.
        return backend_cpu.compile(lowered.module, backend_cpu.CompileOptions(**options, **extra))
    if intra_op_threads is None:
        return compile_()
    for name in ("intra_op_threads", "threads"):
        if name in fields:
            return compile_(**{name: intra_op_threads})
    # The backend fixes each kernel's work units and partition count from the
    # runtime's options: compile and link under the requested count (the backend's
    # caches key on it).
    from .. import runtime
    previous = runtime.get_options().intra_op_threads
    runtime.configure(intra_op_threads=intra_op_threads)
    try:
        return compile_()
    finally:
        runtime.configure(intra_op_threads=previous)
