"""Every registered op either has a gradient or is explicitly non-differentiable
(zero gradient) or explicitly without a gradient (an error naming the op)."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import frontend
from xlapy.frontend import grad, ops, register_gradient, registered_ops
from xlapy.frontend.autodiff import (NO_GRADIENT, NON_DIFFERENTIABLE, NoGradientError,
                               gradient_function, registered_gradients)


def test_every_registered_op_is_accounted_for():
    ops_ = set(registered_ops())
    with_gradient = set(registered_gradients())
    missing = ops_ - with_gradient - NON_DIFFERENTIABLE - set(NO_GRADIENT)
    assert not missing, f"ops with no gradient and not listed as non-differentiable: {missing}"


def test_the_lists_do_not_overlap_and_name_real_ops():
    ops_ = set(registered_ops())
    with_gradient = set(registered_gradients())
    assert not with_gradient & NON_DIFFERENTIABLE
    assert not with_gradient & set(NO_GRADIENT)
    assert not NON_DIFFERENTIABLE & set(NO_GRADIENT)
    assert (with_gradient | NON_DIFFERENTIABLE | set(NO_GRADIENT)) <= ops_


def test_argmax_and_comparisons_pass_zero_gradient():
    def f(x):
        i = ops.argmax(x, output_type="int32")
        return ops.reduce_sum(ops.cast(i, "float64") + ops.cast(x > 0, "float64"))
    np.testing.assert_array_equal(grad(f, backend="interpreter")(np.array([1.0, 3.0])), 0)


def test_second_order_through_a_gradient_kernel_is_a_clear_error():
    def pool_grad_sum(x):
        return ops.reduce_sum(grad(lambda y: ops.reduce_sum(ops.max_pool2d(y, 2, 2, "VALID")))(x) * x)
    with pytest.raises(NoGradientError, match="MaxPoolGrad") as info:
        grad(pool_grad_sum, backend="interpreter")(np.ones((1, 2, 2, 1)))
    assert "second-order" in str(info.value)


def test_unknown_op_has_no_gradient():
    with pytest.raises(NoGradientError, match="no gradient registered for op 'Bogus'"):
        gradient_function("Bogus")


def test_register_gradient_refuses_a_second_registration():
    with pytest.raises(ValueError, match="already registered"):
        register_gradient("Exp")(lambda node, grads: grads)


def test_frontend_exports_the_api():
    for name in ("grad", "value_and_grad", "register_gradient", "cond", "while_loop",
                 "fori_loop"):
        assert callable(getattr(frontend, name)), name
