"""`hlo-opt`: run HLO passes on a text file and print, draw, compile or run the result.

    hlo-opt FILE.hlo                       parse, verify, default pipeline, print HLO
    hlo-opt FILE.hlo --passes=dce,cse      just these passes, in this order
    hlo-opt FILE.hlo --pipeline=O0         a named pipeline (default, O0)
    hlo-opt FILE.hlo --emit=hlo|dot|llvm|asm
    hlo-opt FILE.hlo --dump-dir DIR        the module after every pass (NNN-pass.hlo)
    hlo-opt FILE.hlo --stats               opcode and kernel counts before/after, and the
                                           time and changed flag of each pass (stderr)
    hlo-opt FILE.hlo --explain             every fusion decision of the passes, then each
                                           kernel's strategy and why the others declined
    hlo-opt FILE.hlo --run [--inputs IN.npz] [--outputs OUT.npz] [--repeat N]
    hlo-opt FILE.hlo --run --profile [--repeat N] [--trace T.json]
                                           the per-kernel table of the runs (time, share,
                                           GB/s, GFLOP/s, roofline; the first of several
                                           runs left out); --trace writes the Chrome trace
                                           (passes, compile phases, every thunk) for
                                           Perfetto; under mpirun each rank writes its own
                                           (T.rank1.json, ...) and rank 0 prints the table
    hlo-opt FILE.hlo --run --devices N     N devices in this process (default: the module's
                                           replica_count * num_partitions); npz keys
                                           d{d}_arg{i} in, d{d}_out{j} out
    mpirun -n N hlo-opt FILE.hlo --run --distributed mpi
                                           rank r runs device r on d{r}_arg*; rank 0 writes
                                           --outputs with every device's results
    hlo-opt ANNOTATED.hlo --run --devices N
                                           a module with sharding= and no collectives (not
                                           yet partitioned, as JAX's jit emits it): the
                                           partitioner makes N devices' program (N: --devices,
                                           else num_partitions, else the shardings' device
                                           count); keys arg{i} / out{j} hold whole arrays,
                                           under mpirun too (every rank reads the inputs)
    hlo-opt --list-passes
    hlo-opt - < FILE.hlo                   read standard input; -o FILE writes the output

Every error (missing file, parse error with line:column, verifier error,
unknown pass, an --inputs file that does not fit the module, a constant printed
without its contents, a parameter larger than the machine's memory, ...) is one
line on stderr and a non-zero exit status.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np

from .. import hlo
from .. import passes
from ..runtime import profiler
from ..passes.graphviz import to_dot
from ..passes.hlo_utils import count_kernels
from .sharding import ShardedProgram, device_count_of, needs_partitioning


class CliError(Exception):
    """A user error: printed as one line, exit status 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):          # argparse would print usage and exit 2
        raise CliError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hlo-opt", description="Optimize an HLO text module with xlapy's passes.")
    p.add_argument("file", nargs="?", help="HLO text file, or - for standard input")
    p.add_argument("--passes", help="comma-separated pass names, run in this order")
    p.add_argument("--pipeline", default="default", help="named pipeline: default or O0")
    p.add_argument("--emit", default="hlo", choices=["hlo", "dot", "llvm", "asm"])
    p.add_argument("--dump-dir", help="write the module after every pass into this folder")
    p.add_argument("--stats", action="store_true", help="print opcode and kernel counts")
    p.add_argument("--explain", action="store_true",
                   help="print every fusion decision and every kernel's strategy, with the "
                        "reasons for what was declined, instead of the module")
    p.add_argument("--list-passes", action="store_true", help="list the registered passes")
    p.add_argument("--no-verify", action="store_true", help="skip the verifier")
    p.add_argument("-o", "--output", help="write the result here instead of stdout")
    p.add_argument("--run", action="store_true", help="compile and run on the CPU backend")
    p.add_argument("--inputs", help=".npz with arg0, arg1, ... (random inputs when absent)")
    p.add_argument("--outputs", help=".npz to receive out0, out1, ...")
    p.add_argument("--repeat", type=int, default=1, help="runs to time (prints the median)")
    p.add_argument("--profile", action="store_true", help="with --run: print a per-kernel "
                   "table of the runs (use --repeat 10: the first run is left out)")
    p.add_argument("--trace", metavar="FILE", help="with --run: write a Chrome trace-event "
                   "JSON of the passes, the compile and every thunk (open in Perfetto)")
    p.add_argument("--devices", type=int, help="run on N devices in this process (default: "
                   "the module's replica_count * num_partitions); npz keys d{d}_arg{i}, "
                   "d{d}_out{j} when the module runs on more than one")
    p.add_argument("--distributed", choices=["mpi"], help="one device per MPI rank (start "
                   "with mpirun -n N); rank 0 writes --outputs")
    p.add_argument("--max-isa", choices=["sse4.2", "avx2", "avx512"],
                   help="compile for the host capped at this x86 level (like XLA's "
                        "--xla_cpu_max_isa; default: $XLAPY_CPU_MAX_ISA, else the host)")
    p.add_argument("--cpu", help="compile for this x86 CPU (LLVM's name: haswell, znver4, ...)")
    p.add_argument("--target-triple", help="compile for another architecture, e.g. "
                                           "aarch64-linux-gnu (--emit=llvm/asm only)")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.profile or args.trace:
            return _profiled(args)
        return _main(args)
    except CliError as e:
        return _fail(str(e))
    except hlo.ParseError as e:
        return _fail(f"parse error: line {e.line}, column {e.column}: {e.message}")
    except hlo.VerifyError as e:
        return _fail(f"verify error: {_one_line(e)}")
    except passes.PassError as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))
    except MemoryError as e:
        return _fail(f"out of memory: {_one_line(e)}")
    except NotImplementedError as e:
        return _fail(f"not supported: {_one_line(e)}")
    except (hlo.EvaluationError, ValueError, TypeError, KeyError) as e:
        return _fail(f"{type(e).__name__}: {_one_line(e)}")
    except Exception as e:  # noqa: BLE001 -- a bug of ours: still one line, no traceback
        return _fail(f"internal error ({type(e).__name__}: {_one_line(e)}); please report it")


def _fail(message: str) -> int:
    print(f"hlo-opt: error: {message}", file=sys.stderr)
    return 1


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split("\n")[0].split())


def _main(args) -> int:
    if args.list_passes:
        _write(args, "".join(f"{name}\n" for name in passes.pass_names()))
        return 0
    if args.file is None:
        raise CliError("no input file (use - for standard input, or --list-passes)")
    if args.repeat < 1:
        raise CliError("--repeat must be at least 1")
    if (args.devices is not None or args.distributed) and not args.run:
        raise CliError("--devices and --distributed go with --run")
    if args.devices is not None and args.devices < 1:
        raise CliError("--devices must be at least 1")
    if args.explain and (args.run or args.emit != "hlo"):
        raise CliError("--explain prints the decisions instead of the module; it does not "
                       "combine with --run or --emit")
    module = hlo.parse_module(_read(args.file))
    if not args.no_verify:
        hlo.verify(module, context="input")
    if args.run and needs_partitioning(module):
        return _run_sharded(args, module)
    before = _stats(module) if args.stats else None
    pipeline = _pipeline(args)
    with profiler.span("HLO passes"):
        pipeline.run(module)
    if profiler.active is not None:
        from ..backend_cpu.compiler import trace_passes
        trace_passes(pipeline.records)
    if not args.no_verify:
        hlo.verify(module, context="after the pipeline")
    if before is not None:
        _print_stats(before, _stats(module))
        _print_pass_times(pipeline.records)
    if args.explain:
        _write(args, _explanation(pipeline, module, args))
        return 0
    if args.run:
        return _run(args, module)
    _write(args, _emit(args.emit, module, args))
    return 0


def _read(file: str) -> str | bytes:
    # Bytes: the parser names the line and column of a byte that is not UTF-8.
    if file == "-":
        stream = getattr(sys.stdin, "buffer", None)       # a text-only stdin has none
        return stream.read() if stream is not None else sys.stdin.read()
    return Path(file).read_bytes()


def _write(args, text: str) -> None:
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)


def _pipeline(args) -> passes.HloPassPipeline:
    options = dict(verify_each=not args.no_verify, dump_dir=args.dump_dir, explain=args.explain)
    if args.passes is not None:
        return passes.pipeline_from_text(args.passes, **options)
    return passes.named_pipeline(args.pipeline, **options)


def _emit(kind: str, module: hlo.HloModule, args) -> str:
    if kind == "hlo":
        return hlo.print_module(module)
    if kind == "dot":
        return to_dot(module)
    executable = _compile(module, args)
    return executable.as_llvm_ir() if kind == "llvm" else executable.as_asm()


def _compile_options(args):
    """(CompileOptions, its target) from the target flags; a bad one is a CliError."""
    from .. import backend_cpu
    from ..backend_cpu.target import TargetError
    try:
        options = backend_cpu.CompileOptions(max_isa=args.max_isa, cpu=args.cpu,
                                             triple=args.target_triple)
        return options, options.target()
    except TargetError as e:
        raise CliError(str(e).replace("backend_cpu: ", "")) from None


def _compile(module: hlo.HloModule, args, **devices):
    _check_constants(module)
    from .. import backend_cpu
    options, target = _compile_options(args)
    if args.run and not target.runs_on_host:
        raise CliError(f"--run: this host cannot execute code for {target.describe()}; "
                       f"use --emit=asm or --emit=llvm to see it")
    if devices:
        options = dataclasses.replace(options, **devices)
        try:
            options.devices(module)
        except ValueError as e:
            raise CliError(str(e).replace("compile: ", "")) from None
    return backend_cpu.compile(module, options)


def _check_constants(module: hlo.HloModule) -> None:
    """Code needs the values of constants; a dump may have left them out (`{...}`)."""
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "constant" and instr.literal is None:
                raise CliError(f"constant %{instr.name} ({instr.shape.to_text()}) has elided "
                               f"contents ({{...}}): the file was printed without large "
                               f"literals; dump it again with them to compile or run it")


# --- --explain ------------------------------------------------------------------------

def _explanation(pipeline: passes.HloPassPipeline, module: hlo.HloModule, args) -> str:
    """The fusion decisions of the passes (per pass, one line each), then the strategy
    of every kernel the backend emits for the result, with the rows it declined."""
    _check_constants(module)
    from ..backend_cpu.compiler import emitted_strategies
    options, target = _compile_options(args)
    lines = ["== fusion decisions, per pass =="]
    lines += passes.explain_lines(pipeline.explanations) or ["(no fusion pass ran)"]
    lines.append(f"== kernel strategies, per kernel (target {target.describe()}) ==")
    for choice in emitted_strategies(module.to_text(), target, options):
        lines += choice.lines()
    return "\n".join(lines) + "\n"


# --- --stats --------------------------------------------------------------------------

def _stats(module: hlo.HloModule) -> tuple[Counter, int]:
    ops = Counter(i.opcode for i in module.entry.instructions)
    return ops, count_kernels(module)


def _print_stats(before: tuple[Counter, int], after: tuple[Counter, int]) -> None:
    (ops_b, kernels_b), (ops_a, kernels_a) = before, after
    lines = [f"{'entry opcode':24s} {'before':>7s} {'after':>7s}"]
    for op in sorted(set(ops_b) | set(ops_a)):
        lines.append(f"{op:24s} {ops_b[op]:7d} {ops_a[op]:7d}")
    lines.append(f"{'kernels':24s} {kernels_b:7d} {kernels_a:7d}")
    print("\n".join(lines), file=sys.stderr)


def _print_pass_times(records: list[passes.PassRecord]) -> None:
    lines = [f"{'pass':24s} {'changed':>7s} {'ms':>8s}"]
    lines += [f"{r.name:24s} {'yes' if r.changed else 'no':>7s} {r.seconds * 1e3:8.2f}"
              for r in records]
    print("\n".join(lines), file=sys.stderr)


# --- --profile, --trace ----------------------------------------------------------------

def _profiled(args) -> int:
    """_main under a trace; then the table (rank 0 under MPI) and the trace file (one per
    rank under MPI)."""
    if not args.run:
        raise CliError("--profile and --trace go with --run")
    rank = 0
    if args.distributed:
        from ..runtime.mpi_communicator import _mpi
        rank = _mpi().COMM_WORLD.Get_rank()
    recorder = profiler.start()
    try:
        status = _main(args)
    finally:
        profiler.stop()
    if status != 0:
        return status
    if args.trace:
        path = args.trace
        if rank:                          # t.json -> t.rank1.json (t.json.gz alike)
            folder, name = os.path.split(path)
            stem, dot, suffix = name.partition(".")
            path = os.path.join(folder, f"{stem}.rank{rank}{dot}{suffix}")
        print(f"trace: {recorder.write(path)}", file=sys.stderr)
    if args.profile and rank == 0:
        from ..backend_cpu import profiling
        warmup = 1 if args.repeat > 1 else 0
        result = profiling.summarize(recorder, warmup=warmup)
        note = " (the first left out as warm-up)" if warmup else \
            " (the only run: it pays for paging memory in; use --repeat 10)"
        _write(args, f"profile of {args.repeat} run{'s' * (args.repeat != 1)}{note}\n"
                     f"{result.table()}\n")
    return status


# --- --run ---------------------------------------------------------------------------

def _run(args, module: hlo.HloModule) -> int:
    if args.distributed:
        return _run_mpi(args, module)
    devices = args.devices or module.replica_count * module.num_partitions
    if devices > 1:
        return _run_devices(args, module, devices)
    inputs = _inputs(args.inputs, module)
    executable = _compile(module, args)
    times, results = [], None
    for _ in range(args.repeat):
        start = time.perf_counter()
        results = executable.run(*inputs)
        times.append(time.perf_counter() - start)
    results = _flatten(results)
    if args.outputs:
        np.savez(args.outputs, **{f"out{i}": r for i, r in enumerate(results)})
    for i, r in enumerate(results):
        print(f"out{i}: {r.dtype}{list(r.shape)}", file=sys.stderr)
    print(f"median time: {np.median(times) * 1e3:.3f} ms over {args.repeat} run(s)",
          file=sys.stderr)
    return 0


def _run_devices(args, module: hlo.HloModule, devices: int) -> int:
    """--devices N: every device in this process (run_devices)."""
    inputs = [_inputs(args.inputs, module, d) for d in range(devices)]
    executable = _compile(module, args, num_devices=devices)
    times, results = [], None
    for _ in range(args.repeat):
        start = time.perf_counter()
        results = executable.run_devices(inputs)
        times.append(time.perf_counter() - start)
    results = [_flatten(r) for r in results]
    _save_devices(args, results)
    print(f"median time: {np.median(times) * 1e3:.3f} ms over {args.repeat} run(s) "
          f"of {devices} devices", file=sys.stderr)
    return 0


def _save_devices(args, results: list[list[np.ndarray]]) -> None:
    if args.outputs:
        np.savez(args.outputs, **{f"d{d}_out{j}": r for d, outs in enumerate(results)
                                  for j, r in enumerate(outs)})
    for j, r in enumerate(results[0]):
        print(f"out{j}: {r.dtype}{list(r.shape)} per device", file=sys.stderr)


def _run_mpi(args, module: hlo.HloModule) -> int:
    """--distributed mpi: this rank runs its device; rank 0 gathers and writes every
    device's outputs. An error on one rank ends every rank (the communicator's abort),
    so none waits for it."""
    executable = None
    try:
        try:
            executable = _compile(module, args, num_devices=args.devices, distributed="mpi")
        except ImportError as e:
            raise CliError(f"--distributed mpi: {_one_line(e)}") from None
        rank = executable.device
        inputs = _inputs(args.inputs, module, rank)
        times, results = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            results = executable.run(*inputs)
            times.append(time.perf_counter() - start)
        results = _flatten(results)
        comm = executable.communicator
        gathered = []
        for r in results:
            r = np.ascontiguousarray(r).reshape(r.shape)     # (ascontiguousarray: >= 1-d)
            every = np.empty((comm.num_devices,) + r.shape, r.dtype)
            comm.all_gather(rank, None, r, every)
            gathered.append(every)
    except (CliError, hlo.EvaluationError, ValueError, TypeError, KeyError, OSError,
            NotImplementedError, RuntimeError) as e:
        comm = executable.communicator if executable is not None else None
        if comm is None or isinstance(e, _collective_error()):
            raise
        # The other ranks would wait for this one: the communicator prints one line
        # naming the rank and its error, and ends every rank (MPI Abort).
        comm.abort(comm.local_devices[0], e)
        raise
    if rank == 0:
        _save_devices(args, [[g[d] for g in gathered] for d in range(comm.num_devices)])
        print(f"median time: {np.median(times) * 1e3:.3f} ms over {args.repeat} run(s) "
              f"on rank 0 of {comm.num_devices}", file=sys.stderr)
    return 0


def _run_sharded(args, module: hlo.HloModule) -> int:
    """--run on an annotated, not yet partitioned module: whole arrays in and out
    (frontend/sharding.py's ShardedProgram partitions, splits and reassembles)."""
    if args.stats or args.dump_dir:
        raise CliError("--stats and --dump-dir show one module's passes; an annotated "
                       "module is partitioned first: run --passes=sharding-propagation,"
                       "spmd-partitioner on it without --run to see the program")
    options, target = _compile_options(args)
    if not target.runs_on_host:
        raise CliError(f"--run: this host cannot execute code for {target.describe()}")
    devices = args.devices
    if args.distributed:
        from ..runtime.mpi_communicator import _mpi
        world = _mpi().COMM_WORLD.Get_size()
        if devices is not None and devices != world:
            raise CliError(f"--devices {devices} but mpirun started {world} ranks")
        devices = world
    devices = devices or device_count_of(module) or 1
    default = args.passes is None and args.pipeline == "default"
    program = ShardedProgram(module, devices, distributed=args.distributed,
                             pipeline="default" if default else _pipeline(args),
                             max_isa=args.max_isa,
                             compile_options={"cpu": args.cpu, "triple": args.target_triple})
    inputs = _inputs(args.inputs, module)
    times, results = [], None
    for _ in range(args.repeat):
        start = time.perf_counter()
        results = program.run(*inputs)
        times.append(time.perf_counter() - start)
    if args.distributed and program.device != 0:
        return 0
    if args.outputs:
        np.savez(args.outputs, **{f"out{i}": r for i, r in enumerate(results)})
    for i, r in enumerate(results):
        print(f"out{i}: {r.dtype}{list(r.shape)} (whole, from {devices} devices)",
              file=sys.stderr)
    print(f"median time: {np.median(times) * 1e3:.3f} ms over {args.repeat} run(s) "
          f"of {devices} devices", file=sys.stderr)
    return 0


def _collective_error():
    from ..runtime import CollectiveError
    return CollectiveError


def _inputs(path: str | None, module: hlo.HloModule, device: int | None = None
            ) -> list[np.ndarray]:
    """The entry's arguments (`device`: that device's, keys d{device}_arg{i})."""
    params = module.entry.parameters
    _check_memory(params)
    if path is None:
        rng = np.random.default_rng(0 if device is None else device)
        return [_random(rng, p.shape) for p in params]
    prefix = "" if device is None else f"d{device}_"
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile):
        raise CliError(f"{path}: not a .npz archive of arrays (numpy.savez writes one)") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise CliError(f"{path}: a single array, not a .npz archive; save the inputs with "
                       f"numpy.savez(FILE, arg0=..., arg1=...)")
    with archive as data:
        missing = [f"{prefix}arg{i}" for i in range(len(params))
                   if f"{prefix}arg{i}" not in data.files]
        if missing:
            raise CliError(f"{path}: missing {', '.join(missing)} (the entry takes "
                           f"{len(params)} parameter{'s' * (len(params) != 1)}; "
                           f"it has {', '.join(data.files) or 'no arrays'})")
        try:
            arrays = [data[f"{prefix}arg{i}"] for i in range(len(params))]
        except (ValueError, OSError, zipfile.BadZipFile) as e:
            raise CliError(f"{path}: cannot read its arrays ({_one_line(e)})") from None
    for i, (param, array) in enumerate(zip(params, arrays)):
        _check_input(path, i, param, array, prefix)
    return arrays


def _check_input(path: str, i: int, param, array: np.ndarray, prefix: str = "") -> None:
    shape = param.shape
    where = f"{path}: {prefix}arg{i} is {array.dtype}{list(array.shape)}, but parameter {i} (%{param.name})"
    if not shape.is_array:
        raise CliError(f"{where} is the tuple {shape.to_text()}; tuple parameters cannot be "
                       f"given in an .npz")
    expected = hlo.numpy_dtype(shape.element_type)
    if array.dtype != expected:
        raise CliError(f"{where} is {shape.to_text()} (numpy {np.dtype(expected)})")
    if tuple(array.shape) != tuple(shape.dims):
        raise CliError(f"{where} is {shape.to_text()}")


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(params) -> None:
    """A parameter that cannot fit in memory fails here, before numpy tries."""
    memory = _memory_bytes()
    if memory is None:
        return
    total = 0
    for p in params:
        size = sum(leaf.nbytes for leaf in p.shape.leaves())
        total += size
        if size > memory:
            raise CliError(f"parameter {p.parameter_number} (%{p.name}: {p.shape.to_text()}) "
                           f"needs {_bytes(size)}, more than this machine's "
                           f"{_bytes(memory)} of memory: cannot allocate it")
    if total > memory:
        raise CliError(f"the {len(params)} parameters need {_bytes(total)} together, more "
                       f"than this machine's {_bytes(memory)} of memory: cannot allocate them")


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


def _random(rng: np.random.Generator, shape: hlo.Shape) -> np.ndarray:
    if not shape.is_array:
        raise CliError(f"cannot make a random input of shape {shape}; pass --inputs")
    dtype = hlo.numpy_dtype(shape.element_type)
    if shape.dtype.is_pred:
        return rng.random(shape.dims) < 0.5
    if shape.dtype.is_integer:
        return rng.integers(0, 10, size=shape.dims, dtype=dtype)
    if dtype in (np.float32, np.float64):          # no temporary array of twice the size
        return rng.standard_normal(shape.dims, dtype=dtype)
    return rng.standard_normal(shape.dims).astype(dtype)


def _flatten(value) -> list[np.ndarray]:
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _flatten(v)]
    return [np.asarray(value)]


if __name__ == "__main__":
    sys.exit(main())
