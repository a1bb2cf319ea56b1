"""Shape rules of leaves, tuples, control flow and the remaining ops.

Calls (`call`, `fusion`), loops (`while`) and `conditional` take their result
from the called computations' roots and check that the computations accept the
operands. Leaves (`parameter`, `constant`) and opaque ops (`custom-call`, the
rng ops) take their shape from the hint.
"""
from __future__ import annotations

from .shape import Shape
from .shape_rules_common import (array, check_params_match, fail, need_hint, rule,
                                 root_shape, scalar)

FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom")


@rule("parameter", "constant", "custom-call")
def given_shape(opcode, shapes, attrs, hint):
    """The instruction's own shape: nothing to infer from."""
    return need_hint(hint, f"a {opcode} declares its shape")


@rule("tuple")
def tuple_shape(opcode, shapes, attrs, hint):
    return Shape.tuple_of(shapes)


@rule("get-tuple-element")
def get_tuple_element_shape(opcode, shapes, attrs, hint):
    (t,) = shapes
    if not t.is_tuple:
        fail(f"operand {t} is not a tuple")
    index = attrs.get("index")
    if not isinstance(index, int) or not 0 <= index < len(t.tuple_shapes):
        fail(f"index {index} out of range for {t} ({len(t.tuple_shapes)} elements)")
    return t.tuple_shapes[index]


@rule("call")
def call_shape(opcode, shapes, attrs, hint):
    comp = attrs.get("to_apply")
    check_params_match(comp, "to_apply", shapes)
    return root_shape(comp, "to_apply")


@rule("fusion")
def fusion_shape(opcode, shapes, attrs, hint):
    kind = attrs.get("kind")
    if kind not in FUSION_KINDS:
        fail(f"kind must be one of {', '.join(FUSION_KINDS)}, got {kind!r}")
    comp = attrs.get("calls")
    check_params_match(comp, "calls", shapes)
    return root_shape(comp, "calls")


def scan_parts(shapes, attrs) -> tuple[list, list, int]:
    """(input shapes, init shapes, scan dimension) of a scan, checked."""
    carries = attrs.get("num_carries", 0)
    if not isinstance(carries, int) or isinstance(carries, bool) or \
            not 0 <= carries < len(shapes):
        fail(f"num_carries must be a count from 0 to {len(shapes) - 1} (the operands are "
             f"the inputs, then the carries' initial values), got {carries!r}")
    inputs, inits = list(shapes[:len(shapes) - carries]), list(shapes[len(shapes) - carries:])
    dims = tuple(attrs.get("dimensions", ()))
    if len(dims) != 1:
        fail(f"needs dimensions={{d}} with the one scanned dimension, got {list(dims)}")
    (d,) = dims
    length = None
    for i, s in enumerate(inputs):
        if not s.is_array or not 0 <= d < s.rank:
            fail(f"input {i} {s} has no dimension {d} to scan")
        if length is None:
            length = s.dims[d]
        elif s.dims[d] != length:
            fail(f"input {i} {s} has {s.dims[d]} steps along dimension {d}, input 0 has "
                 f"{length}")
    return inputs, inits, d


@rule("scan")
def scan_shape(opcode, shapes, attrs, hint):
    """scan(inputs..., inits...), num_carries=c, dimensions={d}: to_apply(input slices...,
    carries...) -> (outputs..., carries...); the result is (the outputs stacked along d,
    the final carries), or the one array alone (XLA's ScanExpander defines it so)."""
    inputs, inits, d = scan_parts(shapes, attrs)
    comp = attrs.get("to_apply")
    slices = [Shape(s.element_type, s.dims[:d] + s.dims[d + 1:]) for s in inputs]
    check_params_match(comp, "to_apply", slices + inits)
    got = root_shape(comp, "to_apply")
    parts = list(got.tuple_shapes) if got.is_tuple else [got]
    n_out = len(parts) - len(inits)
    if n_out < 0 or parts[n_out:] != inits:
        fail(f"to_apply {comp.name} returns {got}: expected the outputs, then the carries "
             f"{Shape.tuple_of(inits)}")
    length = inputs[0].dims[d] if inputs else 0
    stacked = []
    for i, p in enumerate(parts[:n_out]):
        if not p.is_array or d > p.rank:
            fail(f"output {i} of to_apply {p} cannot be stacked along dimension {d}")
        stacked.append(Shape(p.element_type, p.dims[:d] + (length,) + p.dims[d:]))
    if not got.is_tuple:
        return stacked[0] if stacked else inits[0]
    return Shape.tuple_of(stacked + inits)


@rule("while")
def while_shape(opcode, shapes, attrs, hint):
    """while(init): condition maps the state to pred[], body maps the state to itself."""
    (state,) = shapes
    cond, body = attrs.get("condition"), attrs.get("body")
    check_params_match(cond, "condition", [state])
    check_params_match(body, "body", [state])
    if root_shape(cond, "condition") != Shape.scalar("pred"):
        fail(f"condition {cond.name} returns {cond.root.shape}, expected pred[]")
    if root_shape(body, "body") != state:
        fail(f"body {body.name} returns {body.root.shape}, expected the state {state}")
    return state


def branches_of(attrs) -> list:
    """Branch computations in index order; a pred conditional is (true, false)."""
    if "branch_computations" in attrs:
        return list(attrs["branch_computations"])
    return [attrs.get("true_computation"), attrs.get("false_computation")]


@rule("conditional")
def conditional_shape(opcode, shapes, attrs, hint):
    """conditional(selector, arg_0, ..., arg_k): branch i takes arg_i; all return one shape."""
    if not shapes:
        fail("needs a branch selector")
    selector, args = scalar(shapes[0], "branch selector"), shapes[1:]
    branches = branches_of(attrs)
    if selector.element_type == "pred":
        if len(branches) != 2:
            fail(f"a pred selector needs 2 branches, got {len(branches)}")
    elif selector.element_type != "s32":
        fail(f"branch selector must be pred[] or s32[], got {selector}")
    if not branches:
        fail("needs at least one branch")
    if len(args) != len(branches):
        fail(f"{len(branches)} branches but {len(args)} branch operands")
    result = None
    for i, (comp, arg) in enumerate(zip(branches, args)):
        check_params_match(comp, f"branch {i}", [arg])
        got = root_shape(comp, f"branch {i}")
        if result is None:
            result = got
        elif got != result:
            fail(f"branch {i} ({comp.name}) returns {got}, branch 0 returns {result}")
    return result


@rule("opt-barrier")
def opt_barrier_shape(opcode, shapes, attrs, hint):
    (x,) = shapes
    return x


@rule("after-all")
def after_all_shape(opcode, shapes, attrs, hint):
    """A token; the operands, of any shape, only order it after them (XLA's verifier
    takes `after-all(%neg)`: an edge from a value into a token chain)."""
    return Shape("token")


@rule("rng")
def rng_shape(opcode, shapes, attrs, hint):
    """rng(a, b): scalar bounds, the hint's dims, their element type."""
    if len(shapes) != 2:
        fail(f"needs 2 scalar bounds, got {len(shapes)} operands")
    a, b = scalar(shapes[0], "lower bound"), scalar(shapes[1], "upper bound")
    out = array(need_hint(hint, "the result dims"), "result")
    if not a.element_type == b.element_type == out.element_type:
        fail(f"bounds {a}, {b} and result {out} must share an element type")
    return out


@rule("rng-bit-generator")
def rng_bit_generator_shape(opcode, shapes, attrs, hint):
    """rng-bit-generator(state) -> (new state, random bits of the hint's shape)."""
    (state,) = shapes
    out = need_hint(hint, "the shape of the random bits")
    if not out.is_tuple or len(out.tuple_shapes) != 2 or out.tuple_shapes[0] != state:
        fail(f"result {out} must be (state {state}, bits)")
    return out


@rule("rng-get-and-update-state")
def rng_state_shape(opcode, shapes, attrs, hint):
    return Shape("u64", (2,))


def _token(shape, what: str):
    if shape.element_type != "token":
        fail(f"{what} must be a token, got {shape}")


def _transfer_state(shape, what: str):
    """(data, u32[] context, token[]): the value a send or recv starts."""
    if not (shape.is_tuple and len(shape.tuple_shapes) == 3
            and shape.tuple_shapes[1] == Shape.scalar("u32")
            and shape.tuple_shapes[2].element_type == "token"):
        fail(f"{what} {shape} must be (data, u32[], token[])")
    return shape.tuple_shapes[0]


@rule("send")
def send_shape(opcode, shapes, attrs, hint):
    """send(data, token) -> (data, u32[] context, token[])."""
    data, token = shapes
    _token(token, "operand 1")
    return Shape.tuple_of([data, Shape.scalar("u32"), Shape("token")])


@rule("send-done")
def send_done_shape(opcode, shapes, attrs, hint):
    _transfer_state(shapes[0], "operand")
    return Shape("token")


@rule("recv")
def recv_shape(opcode, shapes, attrs, hint):
    """recv(token) -> (data of the declared shape, u32[] context, token[])."""
    _token(shapes[0], "operand")
    out = need_hint(hint, "the received shape")
    _transfer_state(out, "result")
    return out


@rule("recv-done")
def recv_done_shape(opcode, shapes, attrs, hint):
    data = _transfer_state(shapes[0], "operand")
    return Shape.tuple_of([data, Shape("token")])


@rule("infeed")
def infeed_shape(opcode, shapes, attrs, hint):
    """infeed(token) -> (data of the declared shape, token[])."""
    _token(shapes[0], "operand")
    out = need_hint(hint, "the fed shape")
    if not (out.is_tuple and len(out.tuple_shapes) == 2
            and out.tuple_shapes[1].element_type == "token"):
        fail(f"result {out} must be (data, token[])")
    return out


@rule("outfeed")
def outfeed_shape(opcode, shapes, attrs, hint):
    """outfeed(data, token) -> token[]; `outfeed_shape`, when given, is the data's."""
    data, token = shapes
    _token(token, "operand 1")
    declared = attrs.get("outfeed_shape")
    if declared is not None and declared != data:
        fail(f"outfeed_shape {declared} differs from the operand {data}")
    return Shape("token")


@rule("partition-id", "replica-id")
def id_shape(opcode, shapes, attrs, hint):
    return Shape.scalar("u32")

