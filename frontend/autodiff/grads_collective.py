"""Gradients of the collective ops (ops/collective.py): none, with the reason.

Which gradient a cross-replica op should have depends on what the replicas'
losses add up to (JAX's psum transposes to psum, which counts every replica's
loss once). Rather than pick a convention that gives a surprising factor of N,
a backward pass through a collective is an error that says what to do instead:
differentiate the per-replica loss and all-reduce the gradients, as
frontend.distribute.value_and_grad does. ReplicaId has no inputs.
"""
from __future__ import annotations

from .registry import register_gradient, register_no_gradient

NO_GRADIENT_REASON = ("collectives have no gradient: differentiate the per-replica loss and "
                      "all-reduce the gradients (frontend.distribute.value_and_grad)")

for _op in ("CollectiveReduceV2", "CollectiveGatherV2", "CollectiveBcastV2",
            "CollectiveReduceStart", "CollectiveReduceDone"):
    register_no_gradient(_op, NO_GRADIENT_REASON)


@register_gradient("ReplicaId")
def _replica_id_grad(node, grads):
    return []                       # no inputs, nothing to hand back
