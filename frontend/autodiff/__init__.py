"""frontend.autodiff: reverse-mode automatic differentiation of traced functions.

    from xlapy.frontend import grad, value_and_grad, register_gradient

A TensorFlow-style gradient registry (`register_gradient`) maps op names to
functions that build each op's gradient with frontend ops; `backprop.vjp`
walks a traced graph backwards through them; `grad` / `value_and_grad` are
the user API. Modules: registry, backprop, api, util, and the gradients by op
family: grads_math (elementwise, activations), grads_array (reductions,
shapes, indexing), grads_nn (contractions, softmax, losses, normalization,
convolution, pooling), grads_complex (complex numbers and Fourier transforms, TF's
conjugate convention), grads_control_flow (cond, while), grads_collective
(the collectives: none, and why), grad_kernels (the gradient-only kernels such as
Conv2DBackpropInput).
"""
from . import (grad_kernels, grads_array, grads_collective, grads_complex,  # noqa: F401
               grads_control_flow, grads_math, grads_nn)
from .api import grad, value_and_grad
from .backprop import vjp
from .registry import (NON_DIFFERENTIABLE, NO_GRADIENT, NoGradientError, gradient_function,
                       register_gradient, register_no_gradient, registered_gradients)

__all__ = ["grad", "value_and_grad", "vjp", "register_gradient", "register_no_gradient",
           "gradient_function", "registered_gradients", "NON_DIFFERENTIABLE", "NO_GRADIENT",
           "NoGradientError"]
