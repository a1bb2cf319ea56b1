"""Optimizers with Keras's names, defaults and update rules, as pure functions of pytrees.

    opt = optimizers.Adam(learning_rate=1e-3)
    state = opt.init(params)                       # numpy zeros shaped like params

    @jit_compile
    def train_step(params, state, x, y):
        loss, grads = value_and_grad(loss_fn)(params, x, y)
        params, state = opt.apply(params, grads, state)   # compiled into the same step
        return params, state, loss

`params` and `grads` are pytrees of one structure (dicts, lists, tuples of arrays);
`state` is a dict: "iterations" (an int64 scalar, Keras's counter) and one pytree per
slot ("momentum", "velocity", ...). `apply` works on traced tensors inside a trace and
on numpy arrays outside one (the same code: Tensors and arrays share the operators),
so the rules can be checked against numpy directly.

The rules are Keras 3's (keras/src/optimizers/*.py), step = iterations + 1:
  SGD      m = momentum*m - lr*g;  w += m  (nesterov: w += momentum*m - lr*g);
           momentum 0: w -= lr*g
  Adam     m += (g - m)(1 - beta_1);  v += (g^2 - v)(1 - beta_2);
           (amsgrad: vhat = max(vhat, v), used for v)
           w -= lr sqrt(1 - beta_2^step)/(1 - beta_1^step) * m / (sqrt(v) + epsilon)
  AdamW    Adam after the decoupled decay w -= w * weight_decay * lr
  RMSprop  v = rho v + (1 - rho) g^2;  (centered: a = rho a + (1 - rho) g, v - a^2)
           inc = lr g / sqrt(v (- a^2) + epsilon);  w -= inc  (momentum: m = momentum m
           + inc; w -= m)
Every optimizer takes Keras's `weight_decay` (None: off), applied as AdamW's. The
learning rate may be a number, a traced scalar, or a callable of the step (a schedule).
Not done: clipnorm/clipvalue/global_clipnorm, EMA, gradient accumulation.
"""
from __future__ import annotations

import numpy as np

from . import ops, pytree
from .tensor import Tensor


def _is_traced(*values) -> bool:
    return any(isinstance(v, Tensor) for v in values)


def _sqrt(x):
    return ops.sqrt(x) if isinstance(x, Tensor) else np.sqrt(x)


def _maximum(x, y):
    return ops.maximum(x, y) if _is_traced(x, y) else np.maximum(x, y)


def _as_float(x, like):
    """`x` (a number, array or tensor) in the float type of `like`."""
    if isinstance(like, Tensor):
        return ops.cast(x, like.dtype) if isinstance(x, Tensor) else np.asarray(x, like.dtype)
    return np.asarray(x, dtype=np.asarray(like).dtype)


class Optimizer:
    """Base class: `init(params) -> state`, `apply(params, grads, state) -> (params,
    state)`. Subclasses name their slots and write `update_one` for one leaf."""

    slots: tuple[str, ...] = ()

    def __init__(self, learning_rate, weight_decay=None, name=None):
        if not callable(learning_rate) and not isinstance(learning_rate, Tensor):
            if float(learning_rate) < 0:
                raise ValueError(f"{type(self).__name__}: learning_rate must be >= 0, "
                                 f"got {learning_rate!r}")
        if weight_decay is not None and float(weight_decay) < 0:
            raise ValueError(f"{type(self).__name__}: weight_decay must be >= 0 or None")
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.name = name or type(self).__name__.lower()

    # --- the pure interface --------------------------------------------------------------
    def init(self, params) -> dict:
        """Zero slots shaped like params, and iterations = 0."""
        leaves, tree = pytree.flatten(params)
        state = {"iterations": np.zeros((), np.int64)}
        for slot in self.slots:
            state[slot] = pytree.unflatten(tree, [np.zeros(np.shape(p), _dtype_of(p))
                                                  for p in leaves])
        return state

    def apply(self, params, grads, state):
        """(new params, new state) after one step on `grads` (same structure as params)."""
        leaves, tree = pytree.flatten(params)
        grad_leaves, grad_tree = pytree.flatten(grads)
        if grad_tree != tree:
            raise ValueError(f"{self.name}: grads have structure "
                             f"{pytree.describe(grad_tree)}, params {pytree.describe(tree)}")
        if "iterations" not in state or any(s not in state for s in self.slots):
            raise ValueError(f"{self.name}: state must come from init() (slots "
                             f"{['iterations', *self.slots]}), got keys {sorted(state)}")
        slot_leaves = {}
        for slot in self.slots:
            sl, st = pytree.flatten(state[slot])
            if st != tree:
                raise ValueError(f"{self.name}: state[{slot!r}] does not match params' "
                                 f"structure")
            slot_leaves[slot] = sl
        iterations = state["iterations"]
        step = iterations + 1
        new_leaves, new_slots = [], {s: [] for s in self.slots}
        for i, (w, g) in enumerate(zip(leaves, grad_leaves)):
            lr = self._lr(step, w)
            slots = {s: slot_leaves[s][i] for s in self.slots}
            if self.weight_decay:
                w = w - w * _as_float(self.weight_decay, w) * lr
            g = _as_float(g, w)
            w, slots = self.update_one(w, g, slots, lr, _as_float(step, w))
            new_leaves.append(w)
            for s in self.slots:
                new_slots[s].append(slots[s])
        new_state = {"iterations": step}
        for s in self.slots:
            new_state[s] = pytree.unflatten(tree, new_slots[s])
        return pytree.unflatten(tree, new_leaves), new_state

    def _lr(self, step, like):
        lr = self.learning_rate
        if callable(lr):
            lr = lr(step)
        return _as_float(lr, like)

    def update_one(self, w, g, slots: dict, lr, step):
        raise NotImplementedError

    def get_config(self) -> dict:
        return {k: v for k, v in vars(self).items()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if k != "name")
        return f"{type(self).__name__}({args})"


def _dtype_of(x):
    return x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype


def _check_unit(owner: str, name: str, value, closed_low=True) -> float:
    value = float(value)
    if not (0 <= value <= 1 if closed_low else 0 < value <= 1):
        raise ValueError(f"{owner}: {name} must be in [0, 1], got {value!r}")
    return value


class SGD(Optimizer):
    """keras.optimizers.SGD(learning_rate=0.01, momentum=0.0, nesterov=False)."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None,
                 name="SGD"):
        super().__init__(learning_rate, weight_decay, name)
        self.momentum = _check_unit("SGD", "momentum", momentum)
        self.nesterov = bool(nesterov)
        self.slots = ("momentum",) if self.momentum else ()

    def update_one(self, w, g, slots, lr, step):
        if not self.momentum:
            return w - lr * g, slots
        mu = _as_float(self.momentum, w)
        m = mu * slots["momentum"] - lr * g
        w = w + (mu * m - lr * g) if self.nesterov else w + m
        return w, {"momentum": m}


class Adam(Optimizer):
    """keras.optimizers.Adam(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
    amsgrad=False)."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, weight_decay=None, name="adam"):
        super().__init__(learning_rate, weight_decay, name)
        self.beta_1 = _check_unit(type(self).__name__, "beta_1", beta_1)
        self.beta_2 = _check_unit(type(self).__name__, "beta_2", beta_2)
        self.epsilon = float(epsilon)
        self.amsgrad = bool(amsgrad)
        self.slots = ("momentum", "velocity") + (("velocity_hat",) if self.amsgrad else ())

    def update_one(self, w, g, slots, lr, step):
        b1, b2 = _as_float(self.beta_1, w), _as_float(self.beta_2, w)
        if isinstance(step, Tensor):
            b1_power, b2_power = ops.pow(b1, step), ops.pow(b2, step)
        else:
            b1_power, b2_power = b1 ** step, b2 ** step
        alpha = lr * _sqrt(1 - b2_power) / (1 - b1_power)
        m = slots["momentum"] + (g - slots["momentum"]) * (1 - b1)
        v = slots["velocity"] + (g * g - slots["velocity"]) * (1 - b2)
        out = {"momentum": m, "velocity": v}
        if self.amsgrad:
            v = out["velocity_hat"] = _maximum(slots["velocity_hat"], v)
        return w - alpha * m / (_sqrt(v) + _as_float(self.epsilon, w)), out


class AdamW(Adam):
    """keras.optimizers.AdamW(learning_rate=0.001, weight_decay=0.004, beta_1=0.9,
    beta_2=0.999, epsilon=1e-7, amsgrad=False): Adam with decoupled weight decay."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, amsgrad=False, name="adamw"):
        if weight_decay is None:
            raise ValueError("AdamW: weight_decay must be a number (use Adam for none)")
        super().__init__(learning_rate, beta_1, beta_2, epsilon, amsgrad, weight_decay, name)


class RMSprop(Optimizer):
    """keras.optimizers.RMSprop(learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
    centered=False)."""

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False, weight_decay=None, name="rmsprop"):
        super().__init__(learning_rate, weight_decay, name)
        self.rho = _check_unit("RMSprop", "rho", rho)
        self.momentum = _check_unit("RMSprop", "momentum", momentum)
        self.epsilon = float(epsilon)
        self.centered = bool(centered)
        self.slots = ("velocity",) + (("momentum",) if self.momentum else ()) + \
            (("average_gradient",) if self.centered else ())

    def update_one(self, w, g, slots, lr, step):
        rho = _as_float(self.rho, w)
        v = rho * slots["velocity"] + (1 - rho) * g * g
        out = {"velocity": v}
        denominator = v
        if self.centered:
            a = out["average_gradient"] = rho * slots["average_gradient"] + (1 - rho) * g
            denominator = v - a * a
        increment = lr * g / _sqrt(denominator + _as_float(self.epsilon, w))
        if self.momentum:
            m = out["momentum"] = _as_float(self.momentum, w) * slots["momentum"] + increment
            return w - m, out
        return w - increment, out


def get(identifier) -> Optimizer:
    """An optimizer from its Keras name ("adam", "sgd", "adamw", "rmsprop") with defaults."""
    if isinstance(identifier, Optimizer):
        return identifier
    table = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}
    try:
        return table[str(identifier).lower()]()
    except KeyError:
        raise ValueError(f"unknown optimizer {identifier!r}; expected one of "
                         f"{sorted(table)}") from None
