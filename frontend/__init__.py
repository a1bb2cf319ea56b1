"""frontend: tf2xla-style op kernels, tracing and the jit_compile decorator.

    from xlapy.frontend import jit_compile, ops

    @jit_compile
    def predict(x, w, b):
        return ops.softmax(ops.bias_add(x @ w, b))

    predict(x, w, b)                              # numpy arrays in and out
    predict.lower(x, w, b).as_hlo_text()          # HLO before passes
    predict.lower(x, w, b).compile().as_hlo_text()  # after the CPU pipeline

Modules: tensor (Tensor and its operators), trace (Graph, Node, tracing),
registry (XlaOpKernel, register_xla_op, lookup), kernels/ (the kernels by
family), ops/ (the user API, TensorFlow names), dtypes (promotion rules),
lowering (graph -> HLO), jit / signature / compiled (jit_compile, Lowered,
Compiled), cost (cost analysis), pytree, distribute (tf.distribute-style
strategies: MirroredStrategy, MultiWorkerMirroredStrategy, the replica context,
all-reduced gradients) and bucketing (gradient buckets); ops.collective has TF's
collective ops, ops.random tf.random's stateless ops; nn (Keras-style layers) and
optimizers (Keras's optimizers) are pure functions of pytrees. `hlo_opt` is the hlo-opt command.
"""
from . import kernels  # noqa: F401  (registers every kernel)
from . import ops
from .jit import JitFunction, Lowered, jit_compile
from .compiled import Compiled
from .registry import (UnknownOpError, XlaOpContext, XlaOpKernel, lookup, register_xla_op,
                       registered_ops)
from .tensor import Tensor
from .trace import Graph, Node, tracing
from .autodiff import grad, register_gradient, value_and_grad
from .control_flow import cond, fori_loop, while_loop
from . import distribute
from . import nn, optimizers   # Keras-style layers and optimizers, pure functions of pytrees

__all__ = ["jit_compile", "JitFunction", "Lowered", "Compiled", "ops", "Tensor", "Graph",
           "Node", "tracing", "XlaOpKernel", "XlaOpContext", "register_xla_op", "lookup",
           "registered_ops", "UnknownOpError", "grad", "value_and_grad", "register_gradient",
           "cond", "while_loop", "fori_loop", "distribute", "nn", "optimizers"]
