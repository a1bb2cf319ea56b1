"""All-reduce bus bandwidth: xlapy's communicators next to mpi4py's own Allreduce.

Run by hand from the repository root (not part of the test suite):

    python3 benchmarks/bench_collectives.py                  # 4 KiB .. 256 MiB, N = 2 and 4
    python3 benchmarks/bench_collectives.py --small          # smoke run: 4 KiB .. 1 MiB
    python3 benchmarks/bench_collectives.py --devices 2 --max-bytes 64M --repeat 9

Rows: f32 sum all-reduce of `bytes` per device on N devices. Bus bandwidth is
bytes * 2(N-1)/N / time, the data each device must move at least (NCCL's and OSU's
convention), so rows of different N compare. Columns:

    in-process     InProcessCommunicator(N): N threads of this process
    mpi xlapy      MpiCommunicator.all_reduce under `mpirun -n N` (this script re-launches
                   itself for those rows)
    mpi4py         comm.Allreduce on the same numpy buffers in the same run: the engine's
                   own speed; `x/mpi4py` is xlapy's time over it (issue 16's target: <= 1.1
                   at >= 1 MiB)
    %copy          in-process bus bandwidth over this machine's copy bandwidth (numpy
                   copy of 64 MiB, bytes copied / time; target: >= 50% at 64 MiB)

A time is the median over repeats of the slowest device's time per call, each repeat
starting from a barrier. Without mpi4py/mpirun the MPI columns print `-`. Every result is
checked (a wrong sum prints `!!` and the script exits with status 1).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import load_average  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20


def parse_bytes(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": KIB, "M": MIB, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * scale)


def sizes_between(low: int, high: int) -> list[int]:
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size *= 4
    return sizes


def inner_calls(size: int) -> int:
    """Back-to-back calls per timing: enough that small sizes are not all clock and barrier."""
    return max(1, min(50, (8 * MIB) // size))


def bus_gbs(size: int, n: int, seconds: float) -> float:
    return size * 2 * (n - 1) / n / seconds / 1e9


def header() -> str:
    try:
        from _common import host_line
        return host_line()
    except Exception as exc:  # noqa: BLE001 - the header must not stop the benchmark
        return f"host: ({type(exc).__name__} reading the target: {exc})"


def copy_bandwidth(repeat: int) -> float:
    """GB/s of numpy copying 64 MiB (bytes copied / time)."""
    source = np.ones(64 * MIB // 4, np.float32)
    target = np.empty_like(source)
    times = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        np.copyto(target, source)
        times.append(time.perf_counter() - start)
    return source.nbytes / statistics.median(times[1:]) / 1e9


def expected_sum(n: int) -> float:
    return n * (n + 1) / 2          # device d sends d + 1 everywhere


# --- in-process ----------------------------------------------------------------------------

def bench_in_process(n: int, sizes: list[int], repeat: int) -> tuple[dict, list[str]]:
    from xlapy.runtime import InProcessCommunicator

    comm = InProcessCommunicator(n)
    seconds: dict = {size: [[0.0] * n for _ in range(repeat)] for size in sizes}
    wrong: list[str] = []

    def device(d):
        for size in sizes:
            send = np.full(size // 4, d + 1, np.float32)
            recv = np.empty_like(send)
            inner = inner_calls(size)
            comm.all_reduce(d, None, send, recv)                # warm-up: pages, threads
            for r in range(repeat):
                comm.barrier(d)
                start = time.perf_counter()
                for _ in range(inner):
                    comm.all_reduce(d, None, send, recv)
                seconds[size][r][d] = (time.perf_counter() - start) / inner
            if not np.all(recv == expected_sum(n)):
                wrong.append(f"in-process N={n} {size} B on device {d}")

    comm.run(device)
    return {size: statistics.median(max(per_device) for per_device in seconds[size])
            for size in sizes}, wrong


# --- MPI: this script under mpirun --------------------------------------------------------

def mpirun_command() -> list[str] | None:
    beside = os.path.join(os.path.dirname(sys.executable), "mpirun")
    found = beside if os.path.exists(beside) else shutil.which("mpirun")
    if found is None:
        return None
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    if "Open MPI" in version or "OpenRTE" in version:
        return [found, "--allow-run-as-root", "--oversubscribe"]
    return [found]


def bench_mpi(n: int, sizes: list[int], repeat: int) -> tuple[dict, str | None]:
    """{size: (xlapy seconds, mpi4py seconds)} from `mpirun -n n` of this script."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return {}, "mpi4py is not installed (pip install 'xlapy[mpi]')"
    command = mpirun_command()
    if command is None:
        return {}, "mpirun not found"
    child = command + ["-n", str(n), sys.executable, os.path.abspath(__file__), "--mpi-child",
                       "--sizes", ",".join(map(str, sizes)), "--repeat", str(repeat)]
    done = subprocess.run(child, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return {}, f"mpirun -n {n} failed: {done.stderr.strip().splitlines()[-1:]}"
    rows = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["size"]] = (row["xlapy"], row["mpi4py"], row["ok"])
    return rows, None


def mpi_child(sizes: list[int], repeat: int) -> None:
    from mpi4py import MPI

    from xlapy.runtime.mpi_communicator import MpiCommunicator

    world = MPI.COMM_WORLD
    comm = MpiCommunicator(world)
    rank, n = world.Get_rank(), world.Get_size()
    elapsed = np.zeros(1)
    slowest = np.zeros(1)

    def timed(call, inner):
        world.Barrier()
        start = time.perf_counter()
        for _ in range(inner):
            call()
        elapsed[0] = (time.perf_counter() - start) / inner
        world.Allreduce(elapsed, slowest, MPI.MAX)
        return float(slowest[0])

    for size in sizes:
        send = np.full(size // 4, rank + 1, np.float32)
        recv = np.empty_like(send)
        inner = inner_calls(size)

        def ours():
            comm.all_reduce(rank, None, send, recv)

        def raw():
            world.Allreduce(send, recv, MPI.SUM)

        ours()
        raw()
        mine, theirs = [], []
        for _ in range(repeat):             # interleaved: both see the same machine load
            mine.append(timed(ours, inner))
            theirs.append(timed(raw, inner))
        ours()
        ok = bool(np.all(recv == expected_sum(n)))
        all_ok = world.allreduce(ok, MPI.LAND)
        if rank == 0:
            print(json.dumps({"size": size, "xlapy": statistics.median(mine),
                              "mpi4py": statistics.median(theirs), "ok": all_ok}), flush=True)


# --- the table -----------------------------------------------------------------------------

def fmt_size(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def fmt_gbs(value: float | None) -> str:
    return "-" if value is None else f"{value:7.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="4 KiB .. 1 MiB, 3 repeats")
    parser.add_argument("--devices", default="2,4", help="device counts, e.g. 2,4")
    parser.add_argument("--max-bytes", default="256M", help="largest size per device")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--no-mpi", action="store_true", help="in-process rows only")
    parser.add_argument("--mpi-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.mpi_child:
        mpi_child([int(s) for s in args.sizes.split(",")], args.repeat)
        return 0

    high = MIB if args.small else parse_bytes(args.max_bytes)
    repeat = args.repeat or (3 if args.small else 7)
    sizes = sizes_between(4 * KIB, high)
    devices = [int(d) for d in args.devices.split(",")]

    print(header())
    print(load_average())
    copy_gbs = copy_bandwidth(repeat)
    print(f"copy bandwidth: {copy_gbs:.2f} GB/s (numpy copy of 64 MiB, bytes copied / time)")
    print("f32 sum all-reduce, bus bandwidth GB/s = bytes * 2(N-1)/N / time "
          f"(median of {repeat}, slowest device)")
    print(f"{'bytes':>8} {'N':>2} | {'in-process':>10} {'%copy':>6} | {'mpi xlapy':>9} "
          f"{'mpi4py':>7} {'x/mpi4py':>8}")
    failures = []
    for n in devices:
        local, wrong = bench_in_process(n, sizes, repeat)
        failures += wrong
        remote, why_not = ({}, "--no-mpi") if args.no_mpi else bench_mpi(n, sizes, repeat)
        for size in sizes:
            inproc = bus_gbs(size, n, local[size])
            ours = theirs = ratio = None
            if size in remote:
                mine, raw, ok = remote[size]
                ours, theirs = bus_gbs(size, n, mine), bus_gbs(size, n, raw)
                ratio = mine / raw
                if not ok:
                    failures.append(f"mpi N={n} {size} B")
            print(f"{fmt_size(size):>8} {n:>2} | {fmt_gbs(inproc):>10} "
                  f"{100 * inproc / copy_gbs:5.0f}% | {fmt_gbs(ours):>9} {fmt_gbs(theirs):>7} "
                  f"{'-' if ratio is None else f'{ratio:.2f}':>8}")
        if why_not:
            print(f"   (no MPI rows for N={n}: {why_not})")
    for failure in failures:
        print(f"!! wrong all-reduce result: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
