"""frontend.optimizers against Keras's update rules written out in numpy (float64 here,
compiled in float32 and float64), inside one jit_compile'd step with the gradient."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontend import jit_compile, ops, optimizers, value_and_grad


# --- the rules, one numpy function per optimizer (Keras 3's update, step = t) -----------

def sgd_ref(w, g, s, t, lr=0.01, momentum=0.0, nesterov=False, wd=None):
    if wd:
        w = w - w * wd * lr
    if momentum == 0:
        return w - lr * g, s
    m = momentum * s["m"] - lr * g
    return (w + momentum * m - lr * g if nesterov else w + m), {"m": m}


def adam_ref(w, g, s, t, lr=0.001, b1=0.9, b2=0.999, eps=1e-7, amsgrad=False, wd=None):
    if wd:
        w = w - w * wd * lr
    m = s["m"] + (g - s["m"]) * (1 - b1)
    v = s["v"] + (g * g - s["v"]) * (1 - b2)
    out = {"m": m, "v": v}
    if amsgrad:
        v = out["vh"] = np.maximum(s["vh"], v)
    alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return w - alpha * m / (np.sqrt(v) + eps), out


def rmsprop_ref(w, g, s, t, lr=0.001, rho=0.9, momentum=0.0, eps=1e-7, centered=False):
    v = rho * s["v"] + (1 - rho) * g * g
    out = {"v": v}
    den = v
    if centered:
        a = out["a"] = rho * s["a"] + (1 - rho) * g
        den = v - a * a
    inc = lr * g / np.sqrt(den + eps)
    if momentum:
        mo = out["mo"] = momentum * s["mo"] + inc
        return w - mo, out
    return w - inc, out


CASES = [
    ("sgd", lambda: optimizers.SGD(), lambda *a: sgd_ref(*a)),
    ("sgd_momentum", lambda: optimizers.SGD(0.05, momentum=0.9),
     lambda *a: sgd_ref(*a, lr=0.05, momentum=0.9)),
    ("sgd_nesterov", lambda: optimizers.SGD(0.05, momentum=0.5, nesterov=True),
     lambda *a: sgd_ref(*a, lr=0.05, momentum=0.5, nesterov=True)),
    ("adam", lambda: optimizers.Adam(), lambda *a: adam_ref(*a)),
    ("adam_amsgrad", lambda: optimizers.Adam(0.01, beta_1=0.8, amsgrad=True),
     lambda *a: adam_ref(*a, lr=0.01, b1=0.8, amsgrad=True)),
    ("adamw", lambda: optimizers.AdamW(0.01), lambda *a: adam_ref(*a, lr=0.01, wd=0.004)),
    ("rmsprop", lambda: optimizers.RMSprop(), lambda *a: rmsprop_ref(*a)),
    ("rmsprop_centered_momentum", lambda: optimizers.RMSprop(0.01, momentum=0.9, centered=True),
     lambda *a: rmsprop_ref(*a, lr=0.01, momentum=0.9, centered=True)),
    ("sgd_weight_decay", lambda: optimizers.SGD(0.1, weight_decay=0.01),
     lambda *a: sgd_ref(*a, lr=0.1, wd=0.01)),
]
SLOT_NAMES = {"momentum": "m", "velocity": "v", "velocity_hat": "vh", "average_gradient": "a"}


def _reference_run(ref, params, grads_per_step, opt):
    """Three steps of the numpy rule on every leaf (float64)."""
    out = {}
    for k, w in params.items():
        w = w.astype(np.float64)
        s = {"m": 0 * w, "v": 0 * w, "vh": 0 * w, "a": 0 * w, "mo": 0 * w}
        for t, grads in enumerate(grads_per_step, 1):
            w, new = ref(w, grads[k].astype(np.float64), s, t)
            s.update(new)
        out[k] = w
    return out


@pytest.mark.parametrize("name,make,ref", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_three_steps_match_the_rule(name, make, ref, dtype):
    rng = np.random.default_rng(1)
    params = {"w": rng.standard_normal((3, 4)).astype(dtype),
              "b": rng.standard_normal(4).astype(dtype)}
    grads = [{k: rng.standard_normal(v.shape).astype(dtype) for k, v in params.items()}
             for _ in range(3)]
    opt = make()
    step = jit_compile(lambda p, g, s: opt.apply(p, g, s), name=f"opt_{name}")
    p, s = params, opt.init(params)
    p_np, s_np = params, opt.init(params)
    for g in grads:
        p, s = step(p, g, s)
        p_np, s_np = opt.apply(p_np, g, s_np)        # the same code on numpy arrays
    expected = _reference_run(ref, params, grads, opt)
    rtol = 2e-5 if dtype == np.float32 else 1e-12
    for k in params:
        assert p[k].dtype == dtype
        np.testing.assert_allclose(p[k], expected[k], rtol=rtol, atol=rtol * 1e-2, err_msg=k)
        np.testing.assert_allclose(p_np[k], expected[k], rtol=rtol, atol=rtol * 1e-2)
    assert int(s["iterations"]) == 3 and s["iterations"].dtype == np.int64
    assert sorted(s) == sorted(["iterations", *opt.slots])


def test_keras_defaults():
    assert optimizers.SGD().learning_rate == 0.01
    adam = optimizers.Adam()
    assert (adam.learning_rate, adam.beta_1, adam.beta_2, adam.epsilon) == (0.001, 0.9, 0.999, 1e-7)
    assert optimizers.AdamW().weight_decay == 0.004
    rms = optimizers.RMSprop()
    assert (rms.learning_rate, rms.rho, rms.momentum, rms.epsilon) == (0.001, 0.9, 0.0, 1e-7)
    assert isinstance(optimizers.get("adamw"), optimizers.AdamW)


def test_update_compiles_into_the_gradient_step():
    """One module: loss, gradient and Adam update; a least-squares fit converges."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 5)).astype(np.float32)
    true_w = rng.standard_normal((5, 1)).astype(np.float32)
    y = x @ true_w
    opt = optimizers.Adam(learning_rate=0.1)

    def loss_fn(params, x, y):
        return ops.reduce_mean(ops.square(ops.matmul(x, params["w"]) + params["b"] - y))

    @jit_compile
    def step(params, state, x, y):
        loss, grads = value_and_grad(loss_fn)(params, x, y)
        params, state = opt.apply(params, grads, state)
        return params, state, loss

    params = {"w": np.zeros((5, 1), np.float32), "b": np.zeros(1, np.float32)}
    state = opt.init(params)
    losses = []
    for _ in range(150):
        params, state, loss = step(params, state, x, y)
        losses.append(float(loss))
    assert step.trace_count == 1
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(params["w"], true_w, atol=2e-2)


def test_schedule_and_traced_learning_rate():
    params = {"w": np.ones(3, np.float32)}
    grads = {"w": np.full(3, 2.0, np.float32)}
    opt = optimizers.SGD(learning_rate=lambda step: 0.1 * step)
    p, s = jit_compile(opt.apply)(params, grads, opt.init(params))
    np.testing.assert_allclose(p["w"], 1 - 0.1 * 2)
    p, s = jit_compile(opt.apply)(p, grads, s)
    np.testing.assert_allclose(p["w"], 0.8 - 0.2 * 2, rtol=1e-6)

    def with_lr(params, grads, state, lr):
        return optimizers.SGD(learning_rate=lr).apply(params, grads, state)
    p, _ = jit_compile(with_lr)(params, grads, optimizers.SGD().init(params), np.float32(0.25))
    np.testing.assert_allclose(p["w"], 0.5)


def test_user_errors():
    opt = optimizers.Adam()
    params = {"w": np.ones(2, np.float32)}
    with pytest.raises(ValueError, match="structure"):
        opt.apply(params, {"v": np.ones(2, np.float32)}, opt.init(params))
    with pytest.raises(ValueError, match="init"):
        opt.apply(params, params, {})
    with pytest.raises(ValueError, match="beta_1"):
        optimizers.Adam(beta_1=1.5)
    with pytest.raises(ValueError, match="learning_rate"):
        optimizers.SGD(-1)
    with pytest.raises(ValueError, match="unknown optimizer"):
        optimizers.get("lamb")
