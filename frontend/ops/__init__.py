"""frontend.ops: the user-facing functions, with TensorFlow's names and signatures.

Each function records one (or a few) op nodes in the current trace; inside a
`jit_compile`d function they take Tensors, numpy arrays and Python scalars:

    @jit_compile
    def mlp(x, w1, b1, w2):
        h = ops.relu(ops.bias_add(ops.matmul(x, w1), b1))
        return ops.softmax(h @ w2)
"""
from .core import apply, apply_multi, cast, constant, promote, to_tensor
from .math import (BINARY_FUNCTIONS, UNARY_FUNCTIONS, acos, acosh, argmax, argmin, asin,
                   asinh, atan, atanh, clip_by_global_norm, clip_by_norm, clip_by_value,
                   complex, count_nonzero, cosh, cumprod, cumsum, cumulative_logsumexp, digamma,
                   divide_no_nan, erfc, erfinv, floordiv, floormod, is_inf, is_nan, lgamma,
                   log_sigmoid, logical_not, logical_xor, mod, neg, reciprocal, reduce_all,
                   reduce_any, reduce_euclidean_norm, reduce_logsumexp, reduce_max,
                   reduce_mean, reduce_min, reduce_prod, reduce_std, reduce_sum,
                   reduce_variance, select, sinh, square, squared_difference, truediv,
                   truncatediv, where, xlog1py, xlogy)
from .array import (argsort, broadcast_to, concat, expand_dims, fill, gather, gather_nd,
                    getitem, identity, linspace, meshgrid, one_hot, ones, ones_like, pad,
                    range, repeat, reshape, reverse, roll, scatter_nd, searchsorted,
                    sequence_mask, slice, sort, split, squeeze, stack, stop_gradient,
                    strided_slice, tensor_scatter_nd_add, tensor_scatter_nd_max,
                    tensor_scatter_nd_min, tensor_scatter_nd_sub, tensor_scatter_nd_update,
                    tile, transpose, unstack, zeros, zeros_like)
from .linalg import batch_matmul, einsum, eye, matmul, norm
from .nn import (avg_pool2d, bias_add, conv2d, depthwise_conv2d, elu, gelu, layer_norm,
                 leaky_relu, log_softmax, max_pool2d, relu, relu6, rms_norm, selu, silu,
                 softmax, softmax_cross_entropy_with_logits, softplus,
                 sparse_softmax_cross_entropy_with_logits, swish)
from . import image           # tf.image.resize
from . import signal          # tf.signal's Fourier transforms: ops.signal.fft, ...

from . import collective      # TF's collective ops: ops.collective.all_reduce, ...
from ..sharding import with_sharding_constraint   # a sharding= annotation (SPMD partitioning)
from . import random          # tf.random's stateless ops and Generator: ops.random.*
from .random import dropout   # tf.nn.dropout (stateless: seed= is required)

# One function per row of frontend/elementwise_table.py (add, less, exp, tanh, floor, ...).
globals().update(BINARY_FUNCTIONS)
globals().update(UNARY_FUNCTIONS)

# TensorFlow's dtype names: ops.float32, ops.bfloat16, ops.bool, ... (numpy dtypes).
from .. import dtypes as _dtypes
globals().update({_n.rstrip("_"): getattr(_dtypes, _n) for _n in _dtypes.TF_NAMES})
