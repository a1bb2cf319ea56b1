"""examples/train_transformer_tp.py, CI-sized: train_transformer.py's model
(examples/transformer_model.py) with Megatron tensor parallelism on 2 devices trains with
one device's losses (f32 tolerance), the partitioned forward has one all-reduce per
attention block and one per MLP block and nothing else, and the example runs under
mpirun -n 2."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.frontend.test_mesh import mpirun_command

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_transformer_tp.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_transformer_tp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tensor_parallel_losses_equal_one_device():
    tp, one = load_example().main(steps=3, devices=2, verbose=False)
    np.testing.assert_allclose(tp, one, rtol=2e-5, atol=1e-6)
    assert tp[-1] < tp[0]


def test_one_all_reduce_per_block_in_forward():
    ex = load_example()
    assert ex.collectives_per_block(2) == {"all-reduce": 2.0}
    # each all-reduce adds a row-parallel layer's partial sums: [batch * time, d_model]
    module, config = ex.forward_module(2)
    reduces = [i for i in module.instructions() if i.opcode == "all-reduce"]
    assert all(i.shape.dims[-1] == config.d_model for i in reduces)


def test_two_all_reduces_per_block_in_backward():
    # forward 2; backward: the attention input's gradient (query, key and value's
    # partial sums added, then one all-reduce) and the feed-forward input's
    assert load_example().collectives_per_block(2, whole_step=True) == {"all-reduce": 4.0}


def test_model_is_train_transformers():
    """The same parameter tree as examples/train_transformer.py's model, every block's
    kernels split as Megatron's layout says."""
    ex = load_example()
    config, _ = ex.data()
    params = ex.init_params(config, 0)
    specs = ex.param_specs(params)
    assert sorted(specs) == sorted(params)
    att = specs["block0"]["attention"]
    assert att["query"]["kernel"] == ex.P(None, "model") and att["output"]["kernel"] == ex.P("model")
    assert params["block0"]["attention"]["query"]["kernel"].shape == \
        (config.d_model, config.num_heads, config.d_model // config.num_heads)


@pytest.mark.skipif(mpirun_command() is None, reason="mpirun or mpi4py missing "
                    "(pip install 'xlapy[mpi]')")
def test_example_under_mpirun():
    env = dict(os.environ, XLAPY_COLLECTIVE_TIMEOUT="60")
    done = subprocess.run([*mpirun_command(), "-n", "2", sys.executable, str(EXAMPLE),
                           "--steps", "2"], capture_output=True, text=True, env=env,
                          timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(MPI ranks)" in done.stdout and done.stdout.count("tensor parallel") == 1
    rows = [line.split() for line in done.stdout.splitlines() if line[:4].strip().isdigit()]
    assert len(rows) == 2
    for _, ours, single in rows:
        assert abs(float(ours) - float(single)) <= 2e-5 * abs(float(single)) + 1e-6
