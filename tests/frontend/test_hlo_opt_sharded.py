"""hlo-opt --run on annotated, not yet partitioned modules (sharding=, no collectives):
whole arrays arg{i} in, whole results out{j}, the partitioned program on N devices
(N from --devices, num_partitions or the shardings). JAX's auto_* global modules give
XLA's per-device outputs reassembled; hand-written ones the evaluator's numbers on the
whole module; per-device modules keep their d{d}_arg{i} keys; mpirun -n 2 too."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy import hlo
from xlapy.frontend import hlo_opt
from xlapy.frontend.sharding import ShardedProgram, assemble, needs_partitioning
from tests.corpus_util import assert_close
from tests.mpi_util import mpirun_command, needs_mpi

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus_devices"


@pytest.mark.parametrize("name", ["auto_matmul", "auto_matmul_chain_2x2", "auto_reduce_2x2",
                                  "auto_reshard"])
def test_corpus_global_modules_give_xla_outputs(name, tmp_path):
    path = CORPUS / f"{name}.global.hlo"
    module = hlo.parse_module(path.read_text())
    assert needs_partitioning(module)
    z = np.load(CORPUS / f"{name}.npz")
    n = module.num_partitions
    # XLA's per-device arguments and results, reassembled into whole arrays
    shapes = ShardedProgram(module, n, backend="interpreter")
    whole = {f"arg{i}": assemble([z[f"d{d}_arg{i}"] for d in range(n)], s, tuple(sh.dims),
                                 z[f"d0_arg{i}"].dtype)
             for i, (s, sh) in enumerate(zip(shapes.param_shardings, shapes.param_shapes))}
    np.savez(tmp_path / "in.npz", **whole)
    assert hlo_opt.main([str(path), "--run", "--inputs", str(tmp_path / "in.npz"),
                         "--outputs", str(tmp_path / "out.npz")]) == 0
    got = np.load(tmp_path / "out.npz")
    assert sorted(got.files) == [f"out{j}" for j in range(len(shapes.result_shapes))]
    for j, (s, sh) in enumerate(zip(shapes.result_shardings, shapes.result_shapes)):
        want = assemble([z[f"d{d}_out{j}"] for d in range(n)], s, tuple(sh.dims),
                        z[f"d0_out{j}"].dtype)
        assert_close(got[f"out{j}"], want, f"{name} out{j}")


# Hand-written: no num_partitions; a contraction split on 2 devices, a convert, a reduce
# over a split dimension, an uneven (5-row) array, a tuple result.
ANNOTATED = """
HloModule annotated

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[5,6] parameter(0), sharding={devices=[1,2]0,1}
  w = f32[6,4] parameter(1), sharding={devices=[2,1]0,1}
  i = s32[5,4] parameter(2), sharding={devices=[2,1]1,0}
  d = f32[5,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[5,4] convert(i)
  t = f32[5,4] tanh(d)
  m = f32[5,4] multiply(t, c), sharding={devices=[2,1]0,1}
  z = f32[] constant(0)
  r = f32[4] reduce(m, z), dimensions={0}, to_apply=add
  ROOT out = (f32[5,4], f32[4]) tuple(m, r)
}
"""


def arguments(module, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for i, p in enumerate(module.entry.parameters):
        dims = tuple(p.shape.dims)
        if p.shape.element_type == "s32":
            out[f"arg{i}"] = rng.integers(-3, 4, dims).astype(np.int32)
        else:
            out[f"arg{i}"] = rng.standard_normal(dims).astype(np.float32)
    return out


@pytest.mark.parametrize("devices", [None, ["--devices", "2"]])
def test_hand_written_module(devices, tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(ANNOTATED)
    module = hlo.parse_module(ANNOTATED)
    args = arguments(module)
    np.savez(tmp_path / "in.npz", **args)
    assert hlo_opt.main([str(path), "--run", *(devices or []), "--inputs",
                         str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")]) == 0
    want = hlo.evaluate(module, [args[f"arg{i}"] for i in range(3)])
    got = np.load(tmp_path / "out.npz")
    for j, w in enumerate(want):
        assert_close(got[f"out{j}"], w, f"out{j}")


def test_four_devices_2x2_and_replicated_parameter(tmp_path):
    text = """
HloModule grid, num_partitions=4

ENTRY main {
  a = f32[6,8] parameter(0), sharding={devices=[2,2]0,1,2,3}
  b = f32[8,3] parameter(1), sharding={replicated}
  e = f32[6,8] exponential(a)
  ROOT d = f32[6,3] dot(e, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}
}
"""
    module = hlo.parse_module(text)
    args = arguments(module, 1)
    program = ShardedProgram(module, 4)
    got = program.run(*args.values())
    want = hlo.evaluate(module, list(args.values()))
    assert_close(got[0], want[0], "out0")
    shards = program.run_shards(*args.values())[0]
    assert [s.shape for s in shards] == [(3, 3)] * 4
    assert_close(shards[2], want[0][3:], "device 2's rows")


def test_per_device_module_keeps_device_keys(tmp_path):
    case = CORPUS / "auto_matmul"
    module = hlo.parse_module((CORPUS / "auto_matmul.hlo").read_text())
    assert not needs_partitioning(module)            # XLA's partitioned program
    out = tmp_path / "out.npz"
    assert hlo_opt.main([f"{case}.hlo", "--run", "--inputs", f"{case}.npz",
                         "--outputs", str(out)]) == 0
    assert "d3_out0" in np.load(out).files


def test_errors_are_one_line(tmp_path, capsys):
    path = tmp_path / "m.hlo"
    path.write_text(ANNOTATED)
    assert hlo_opt.main([str(path), "--run", "--devices", "3"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "2 devices" in err and "3" in err, err
    assert hlo_opt.main([str(path), "--run", "--stats"]) == 1
    assert "partitioned first" in capsys.readouterr().err


@needs_mpi
def test_under_mpirun(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(ANNOTATED)
    module = hlo.parse_module(ANNOTATED)
    args = arguments(module, 2)
    np.savez(tmp_path / "in.npz", **args)
    hlo_opt_cmd = [sys.executable, "-m", "xlapy.frontend.hlo_opt"]
    done = subprocess.run([*mpirun_command(), "-n", "2", *hlo_opt_cmd, str(path), "--run",
                           "--distributed", "mpi", "--inputs", str(tmp_path / "in.npz"),
                           "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True,
                          timeout=240, cwd=ROOT, env=dict(os.environ,
                                                          XLAPY_COLLECTIVE_TIMEOUT="60"))
    assert done.returncode == 0, done.stdout + done.stderr
    want = hlo.evaluate(module, [args[f"arg{i}"] for i in range(3)])
    got = np.load(tmp_path / "out.npz")
    for j, w in enumerate(want):
        assert_close(got[f"out{j}"], w, f"out{j}")
