"""`evaluate_devices`: the reference evaluator on every device of a module at once.

    outputs = hlo.evaluate_devices(module, args_per_device)   # outputs[d][j]

A module with `replica_count=R, num_partitions=P` runs on N = R * P devices;
`args_per_device[d]` are device d's arguments (ENTRY parameter order) and
`outputs[d]` its results, tuples flattened as `hlo.evaluate` flattens them.
Device d is replica d // P, partition d % P (hlo/collectives.py).

Each device runs in a thread of its own; they meet at a `Rendezvous` for every
execution of a collective (eval_collective.py), so collectives inside loops and
called computations work. A device that raises makes the others fail at their
next collective instead of waiting; a device that never arrives (its program
took another branch) is reported once the others are left waiting on it, or
after `timeout` seconds. Errors name the device and the instruction.
"""
from __future__ import annotations

import threading

from . import collectives
from .eval_collective import DeviceSlot, PeerFailed, Rendezvous
from .eval_common import EvaluationError
from .evaluator import EvalContext, _check_args, _check_static, _flatten, evaluate_computation

__all__ = ["evaluate_devices"]

DEFAULT_TIMEOUT = 60.0


def evaluate_devices(module, args_per_device, *, flush_denormals: bool = True,
                     timeout: float = DEFAULT_TIMEOUT) -> list[list]:
    """Runs every device of `module`; returns each device's outputs (see above)."""
    entry = module.entry
    _check_static(module)
    if entry is None:
        raise EvaluationError(f"module {module.name} has no entry computation")
    R, P = module.replica_count, module.num_partitions
    n = R * P
    args_per_device = list(args_per_device)
    if len(args_per_device) != n:
        raise EvaluationError(f"module {module.name} runs on {n} device{'s' * (n != 1)} "
                              f"(replica_count={R}, num_partitions={P}), got arguments for "
                              f"{len(args_per_device)}")
    checked = []
    for d, args in enumerate(args_per_device):
        try:
            checked.append(_check_args(entry, list(args)))
        except EvaluationError as e:
            raise EvaluationError(f"device {d}: {e}") from None
    _check_collectives(module, R, P)
    if n == 1:
        ctx = EvalContext(flush_denormals, DeviceSlot(0, R, P))
        return [_flatten(evaluate_computation(entry, checked[0], ctx=ctx))]

    rendezvous = Rendezvous(n, timeout)
    outputs: list = [None] * n
    errors: dict[int, BaseException] = {}

    def run(d: int) -> None:
        try:
            ctx = EvalContext(flush_denormals, DeviceSlot(d, R, P, rendezvous))
            outputs[d] = _flatten(evaluate_computation(entry, checked[d], ctx=ctx))
            rendezvous.finish(d)
        except BaseException as e:       # reported below, with the device
            errors[d] = e
            rendezvous.fail(d, e)

    threads = [threading.Thread(target=run, args=(d,), name=f"hlo-device-{d}", daemon=True)
               for d in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        # The first device that failed on its own, not one that gave up waiting for it.
        d, error = min(errors.items(),
                       key=lambda item: (isinstance(item[1], PeerFailed), item[0]))
        if isinstance(error, EvaluationError):
            raise EvaluationError(f"device {d}: {error}") from error
        raise EvaluationError(f"device {d}: {type(error).__name__}: {error}") from error
    return outputs


def _check_collectives(module, R: int, P: int) -> None:
    """Groups and pairs that do not fit the devices: one clear error before any thread."""
    for instr in module.instructions():
        if not instr.info.collective:
            continue
        try:
            if collectives.is_async_done(instr):
                collectives.async_start_of(instr)
            elif instr.opcode in ("collective-permute", "collective-permute-start"):
                collectives.permute_pairs(instr, R, P)
            else:
                collectives.device_groups(instr, R, P)
        except collectives.CollectiveError as e:
            raise EvaluationError(f"{e} (replica_count={R}, num_partitions={P})") from None
