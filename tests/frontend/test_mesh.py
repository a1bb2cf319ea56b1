"""Mesh, PartitionSpec, jit_compile(mesh=..., in_shardings=..., out_shardings=...) and
ops.with_sharding_constraint: the partitioned program on 1, 2 and 4 in-process devices
(and under mpirun -n 2) gives the numbers of the unsharded function (DESIGN.md's f32
tolerance), whole arrays or per-device shards."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy import ops
from xlapy.frontend.distribute import Mesh, PartitionSpec as P
from xlapy.frontend.sharding import spec_to_sharding
from tests.mpi_util import mpirun_command, needs_mpi

ROOT = Path(__file__).resolve().parents[2]
TOL = dict(rtol=2e-5, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


# --- Mesh and PartitionSpec ---------------------------------------------------------------

def test_mesh_attributes():
    mesh = Mesh(np.arange(4).reshape(2, 2), ("data", "model"))
    assert mesh.shape == {"data": 2, "model": 2}
    assert mesh.size == 4 and mesh.axis_names == ("data", "model")
    assert mesh.devices.tolist() == [[0, 1], [2, 3]]
    assert Mesh(np.arange(3), "x").shape == {"x": 3}


@pytest.mark.parametrize("devices, names, message", [
    (np.arange(4).reshape(2, 2), ("a",), "axis names"),
    (np.array([0, 2]), ("a",), "each id"),
    (np.arange(4).reshape(2, 2), ("a", "a"), "distinct"),
    (np.array([0.0, 1.0]), ("a",), "integer"),
])
def test_mesh_errors(devices, names, message):
    with pytest.raises((ValueError, TypeError), match=message):
        Mesh(devices, names)


# What JAX's NamedSharding prints for these specs on Mesh(arange(4).reshape(2, 2), (a, b)).
@pytest.mark.parametrize("spec, rank, text", [
    (P("a", None), 2, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
    (P(None, "b"), 2, "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}"),
    (P("a", "b"), 2, "{devices=[2,2]<=[4]}"),
    (P("b", "a"), 2, "{devices=[2,2]0,2,1,3}"),
    (P(("a", "b")), 2, "{devices=[4,1]<=[4]}"),
    (P(None, ("b", "a")), 2, "{devices=[1,4]0,2,1,3}"),
    (P(), 3, "{replicated}"),
    (None, 1, "{replicated}"),
    (P(None, None, "b"), 3, "{devices=[1,1,2,2]0,2,1,3 last_tile_dim_replicate}"),
])
def test_spec_to_sharding(spec, rank, text):
    mesh = Mesh(np.arange(4).reshape(2, 2), ("a", "b"))
    assert spec_to_sharding(mesh, spec, rank).canonical_text() == text


@pytest.mark.parametrize("spec, message", [
    (P("c"), "not an axis"), (P("a", "a"), "used twice"), (P("a", None, None), "3 entries"),
])
def test_spec_errors(spec, message):
    mesh = Mesh(np.arange(4).reshape(2, 2), ("a", "b"))
    with pytest.raises(ValueError, match=message):
        spec_to_sharding(mesh, spec, 2)


# --- sharded jit_compile vs the unsharded function ---------------------------------------

def mlp(x, w1, w2):
    h = ops.relu(x @ w1)
    return ops.softmax(h @ w2)


@pytest.mark.parametrize("mesh_shape, in_specs, out_spec", [
    ((1,), (P("d"), None, None), P("d")),
    ((2,), (P("d"), None, None), P("d")),                    # data parallel
    ((2,), (None, P(None, "d"), P("d", None)), None),         # Megatron: column then row
    ((4,), (P(None, "d"), P("d", None), None), P(None, "d")),  # contraction split, uneven out
    ((2, 2), (P("d", None), P(None, "m"), P("m", None)), P("d")),
])
def test_sharded_mlp_equals_unsharded(mesh_shape, in_specs, out_spec):
    names = ("d", "m")[:len(mesh_shape)]
    mesh = Mesh(np.arange(int(np.prod(mesh_shape))).reshape(mesh_shape), names)
    x, w1, w2 = rand(6, 8), rand(8, 12, seed=1), rand(12, 5, seed=2)
    f = xlapy.jit_compile(mlp, mesh=mesh, in_shardings=in_specs, out_shardings=out_spec)
    want = xlapy.jit_compile(mlp)(x, w1, w2)
    np.testing.assert_allclose(f(x, w1, w2), want, **TOL)
    text = f.lower(x, w1, w2).as_hlo_text()
    assert "sharding=" in text


def test_uneven_sizes_and_constraint_inside():
    mesh = Mesh(np.arange(4).reshape(2, 2), ("a", "b"))

    def fn(x, y):
        z = ops.with_sharding_constraint(ops.exp(x) + y, P("b", "a"))
        return ops.reduce_sum(z * 2.0, axis=1), ops.transpose(z)
    x, y = rand(5, 7), rand(5, 7, seed=3)
    f = xlapy.jit_compile(fn, mesh=mesh, in_shardings=P("a", "b"), out_shardings=(None, P("a")))
    got = f(x, y)
    with mesh:          # the same function unpartitioned: the annotation changes nothing
        want = xlapy.jit_compile(fn)(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **TOL)
    text = f.lower(x, y).as_hlo_text()
    assert "copy(" in text and "{devices=[2,2]0,2,1,3}" in text


def test_pytree_prefix_shardings_and_dict_outputs():
    mesh = Mesh(np.arange(2), ("x",))

    def fn(params, batch):
        h = ops.tanh(batch["x"] @ params["w"] + params["b"])
        return {"h": h, "loss": ops.reduce_mean(ops.square(h - batch["y"]))}
    params = {"w": rand(4, 6), "b": rand(6, seed=1)}
    batch = {"x": rand(8, 4, seed=2), "y": rand(8, 6, seed=3)}
    f = xlapy.jit_compile(fn, mesh=mesh,
                          in_shardings=({"w": P(None, "x"), "b": P("x")}, P("x")),
                          out_shardings={"h": P("x", None), "loss": None})
    got, want = f(params, batch), xlapy.jit_compile(fn)(params, batch)
    np.testing.assert_allclose(got["h"], want["h"], **TOL)
    np.testing.assert_allclose(got["loss"], want["loss"], **TOL)


def test_training_step_with_gradients_through_constraints():
    mesh = Mesh(np.arange(2), ("m",))

    def loss(w1, w2, x, y):
        h = ops.with_sharding_constraint(ops.relu(x @ w1), P(None, "m"))
        return ops.reduce_mean(ops.square(h @ w2 - y))

    def step(w1, w2, x, y):
        value, (g1, g2) = xlapy.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, y)
        return w1 - 0.1 * g1, w2 - 0.1 * g2, value
    args = rand(8, 6), rand(6, 4, seed=1), rand(5, 8, seed=2), rand(5, 4, seed=3)
    f = xlapy.jit_compile(step, mesh=mesh, in_shardings=(P(None, "m"), P("m", None), None, None),
                          out_shardings=(P(None, "m"), P("m", None), None))
    with mesh:
        want = xlapy.jit_compile(step)(*args)
    for g, w in zip(f(*args), want):
        np.testing.assert_allclose(g, w, **TOL)


def test_return_shards():
    mesh = Mesh(np.arange(4).reshape(2, 2), ("a", "b"))
    x = rand(5, 6)
    f = xlapy.jit_compile(lambda x: x * 3.0, mesh=mesh, in_shardings=P("a"),
                          out_shardings=P("a", "b"), return_shards=True)
    shards = f(x)
    assert len(shards) == 4
    # device d = (a, b) = divmod(d, 2); rows split 3 + 2, columns 3 + 3
    for d, piece in enumerate(shards):
        i, j = divmod(d, 2)
        np.testing.assert_allclose(piece, 3 * x[3 * i:3 * i + 3, 3 * j:3 * j + 3], **TOL)
    assert shards[2].shape == (2, 3)


def test_interpreter_backend_and_cache():
    mesh = Mesh(np.arange(2), ("x",))
    f = xlapy.jit_compile(lambda a, b: a @ b, mesh=mesh, in_shardings=(P(None, "x"), P("x")),
                          backend="interpreter")
    a, b = rand(3, 4), rand(4, 2, seed=1)
    np.testing.assert_allclose(f(a, b), a @ b, **TOL)
    f(a, b)
    assert f._jit.trace_count == 1
    assert "all-reduce" in f.compile(a, b).as_hlo_text()


def test_errors():
    mesh = Mesh(np.arange(2), ("x",))
    with pytest.raises(ValueError, match="no mesh"):
        xlapy.jit_compile(lambda a: ops.with_sharding_constraint(a, P("x")))(rand(2))
    f = xlapy.jit_compile(lambda a, b: a + b, mesh=mesh, in_shardings=(P("x"),))
    with pytest.raises(ValueError, match="1 entries for 2 positional"):
        f(rand(2), rand(2))
    g = xlapy.jit_compile(lambda a: a, mesh=mesh, in_shardings=P("y"))
    with pytest.raises(ValueError, match="argument leaf 0.*'y' is not an axis"):
        g(rand(2))
    h = xlapy.jit_compile(lambda a: a, mesh=mesh, in_shardings=({"k": P("x")},))
    with pytest.raises(ValueError, match="does not match the structure"):
        h([rand(2), rand(2)])
    with pytest.raises(TypeError, match="need mesh="):
        xlapy.jit_compile(lambda a: a, in_shardings=P("x"))


# --- MPI -----------------------------------------------------------------------------------

@needs_mpi
def test_sharded_function_under_mpirun():
    env = dict(os.environ, XLAPY_COLLECTIVE_TIMEOUT="60")
    done = subprocess.run([*mpirun_command(), "-n", "2", sys.executable,
                           str(Path(__file__).with_name("mpi_mesh_worker.py"))],
                          capture_output=True, text=True, env=env, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0 ok" in done.stdout and "rank 1 ok" in done.stdout, done.stdout
