"""The verifier: a valid module passes; each broken invariant gives its own message.

Each case builds a small valid module with the builder, breaks one thing, and
checks the VerifyError names the computation, the instruction and the problem.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.hlo import HloBuilder, HloComputation, HloInstruction, HloModule, Shape, VerifyError, verify

from .shape_helpers import S

F4 = S("f32[4]")


def small_module():
    """main(x: f32[4], y: f32[4]) = reduce(x + y, 0, add) plus a tuple with a gte."""
    b = HloBuilder("main")
    x, y = b.parameter(F4, "x"), b.parameter(F4, "y")
    s = b.add(x, y)
    r = b.reduce(s, b.constant(np.float32(0)), dims=[0],
                 to_apply=b.scalar_computation("sum", "add", "f32"))
    t = b.tuple([s, r])
    b.get_tuple_element(t, 1, name="second")
    return b.build_module()


def entry_instr(module, name):
    return module.entry.instruction(name)


def test_valid_module_passes():
    verify(small_module())


def test_verify_error_is_a_value_error():
    assert issubclass(VerifyError, ValueError)


def _wrong_shape(m):
    entry_instr(m, "add").shape = S("f32[5]")


def _wrong_type(m):
    entry_instr(m, "second").shape = S("s32[]")


def _arity(m):
    add = entry_instr(m, "add")
    add.set_operands([add.operands[0]])


def _foreign_operand(m):
    other = m.computation("sum").parameter(0)
    entry_instr(m, "add").replace_operand(0, other)


def _detached_operand(m):
    ghost = HloInstruction("parameter", F4, name="ghost", parameter_number=0)
    entry_instr(m, "add").replace_operand(0, ghost)


def _missing_user(m):
    entry_instr(m, "x").users.clear()


def _stale_user(m):
    entry_instr(m, "x").users.append(entry_instr(m, "tuple"))


def _param_gap(m):
    entry_instr(m, "y").parameter_number = 2


def _param_duplicate(m):
    entry_instr(m, "y").parameter_number = 0


def _no_root(m):
    m.entry.root = None


def _root_elsewhere(m):
    m.entry.root = m.computation("sum").root


def _bad_reducer(m):
    b = HloBuilder("isum")
    b.add(b.parameter(S("s32[]")), b.parameter(S("s32[]")), name="iadd")
    comp = b.build()
    m.add_computation(comp)
    entry_instr(m, "reduce").attrs["to_apply"] = comp


def _callee_outside(m):
    b = HloBuilder("stray")
    b.add(b.parameter(S("f32[]"), "sa"), b.parameter(S("f32[]"), "sb"), name="stray_add")
    entry_instr(m, "reduce").attrs["to_apply"] = b.build()


def _no_entry(m):
    m.entry = None


def _entry_outside(m):
    b = HloBuilder("other")
    b.parameter(F4, "z")
    m.entry = b.build()


def _duplicate_instr_name(m):
    m.computation("sum").parameter(0).name = "x"


def _duplicate_comp_name(m):
    m.entry.name = "sum"


def _cycle(m):
    add = entry_instr(m, "add")
    x = entry_instr(m, "x")
    neg = HloInstruction("negate", F4, [add], name="neg")
    m.entry.add_instruction(neg)
    add.replace_operand(0, neg)
    assert x not in add.operands


def _recursion(m):
    sum_comp = m.computation("sum")
    b_root = sum_comp.root
    call = HloInstruction("call", S("f32[]"), [b_root.operands[0], b_root.operands[1]],
                          {"to_apply": m.entry}, name="back")
    sum_comp.add_instruction(call)


def _bad_gte(m):
    entry_instr(m, "second").attrs["index"] = 7


def _constant_literal(m):
    entry_instr(m, "constant").literal = np.zeros(3, np.float32)


# (id, how to break the module, fragments the message must contain)
CASES = [
    ("shape", _wrong_shape, ["computation main", "%add = f32[5] add(%x, %y)",
                             "shape f32[5] does not match the inferred f32[4]"]),
    ("element-type", _wrong_type, ["%second = s32[]", "does not match the inferred f32[]"]),
    ("arity", _arity, ["%add = f32[4] add(%x)", "add takes 2 operands, has 1"]),
    ("foreign-operand", _foreign_operand, ["computation sum, instruction %lhs",
                                           "user %add is not in sum"]),
    ("detached-operand", _detached_operand, ["operand %ghost belongs to no computation"]),
    ("missing-user", _missing_user, ["is missing from the users of its operand %x"]),
    ("stale-user", _stale_user, ["lists %tuple as a user, but is not its operand"]),
    ("parameter-gap", _param_gap, ["computation main", "numbered 0..1", "[0, 2]"]),
    ("parameter-duplicate", _param_duplicate, ["[0, 0]"]),
    ("no-root", _no_root, ["computation main: has no root"]),
    ("root-elsewhere", _root_elsewhere, ["is not one of its instructions"]),
    ("reducer", _bad_reducer, ["%reduce = f32[] reduce(%add, %constant)",
                               "to_apply computation isum takes (s32[], s32[])"]),
    ("callee-outside", _callee_outside, ["calls computation stray, which is not in the module"]),
    ("no-entry", _no_entry, ["has no entry computation"]),
    ("entry-outside", _entry_outside, ["entry computation other is not in the module"]),
    ("instr-names", _duplicate_instr_name, ["instruction name x is used in computation sum and in main"]),
    ("comp-names", _duplicate_comp_name, ["two computations are named sum"]),
    ("cycle", _cycle, ["has a cycle", "%add", "%neg"]),
    ("recursion", _recursion, ["recursive calls", "main", "sum"]),
    ("gte-index", _bad_gte, ["get-tuple-element: index 7 out of range"]),
    ("literal", _constant_literal, ["literal has dims [3], the shape says []"]),
]


@pytest.mark.parametrize("breaker,fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_module_is_rejected(breaker, fragments):
    module = small_module()
    breaker(module)
    with pytest.raises(VerifyError) as info:
        verify(module)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_float_only_op_on_integers():
    b = HloBuilder("main")
    p = b.parameter(S("s32[4]"), "p")
    neg = b.negate(p)
    module = b.build_module(neg)
    neg.opcode = "exponential"     # bypass the builder's own check
    with pytest.raises(VerifyError, match="exponential: operand type s32 not allowed"):
        verify(module)


def test_context_names_the_pass():
    module = small_module()
    _wrong_shape(module)
    with pytest.raises(VerifyError, match=r"^after pass dce: computation main, instruction %add"):
        verify(module, context="after pass dce")


def test_fusion_kind_and_signature():
    sub = HloBuilder("fused")
    p = sub.parameter(F4, "fp")
    fused = sub.build(sub.exp(p))
    b = HloBuilder("main")
    x = b.parameter(F4, "x")
    f = b.fusion(fused, [x], kind="kLoop")
    module = b.build_module(f)
    verify(module)
    f.attrs["kind"] = "kSuper"
    with pytest.raises(VerifyError, match="kind must be one of kLoop, kInput, kOutput, kCustom"):
        verify(module)
    f.attrs["kind"] = "kCustom"
    p.shape = fused.root.shape = S("f32[5]")    # fused is consistent, the call is not
    with pytest.raises(VerifyError, match=r"calls computation fused parameter 0 is f32\[5\], "
                                          r"operand is f32\[4\]"):
        verify(module)


def test_while_signature_checked():
    state = S("(s32[], f32[4])")
    cond = HloBuilder("cond")
    c = cond.get_tuple_element(cond.parameter(state), 0)
    cond_comp = cond.build(cond.compare(c, cond.constant(np.int32(10)), "LT"))
    body = HloBuilder("body")
    s = body.parameter(state)
    i = body.get_tuple_element(s, 0)
    v = body.get_tuple_element(s, 1)
    body_comp = body.build(body.tuple([body.add(i, body.constant(np.int32(1))), body.exp(v)]))
    b = HloBuilder("main")
    init = b.tuple([b.constant(np.int32(0)), b.parameter(F4)])
    w = b.while_(cond_comp, body_comp, init)
    module = b.build_module(w)
    verify(module)
    body_comp.root = body_comp.instructions[-2]      # the exp: f32[4], not the state
    with pytest.raises(VerifyError, match=r"body body returns f32\[4\], expected the state"):
        verify(module)


def test_layouts_are_ignored_and_bitcasts_reinterpret():
    b = HloBuilder("main")
    x = b.parameter(Shape("f32", (2, 16, 32), layout=(2, 1, 0)), "x")
    c = b.op("copy", [x], Shape("f32", (2, 16, 32), layout=(1, 2, 0)))
    bc = b.bitcast(c, Shape("f32", (32, 32), layout=(0, 1)))
    as_int = b.bitcast(b.reshape(bc, (1024,)), Shape("s32", (1024,)))
    verify(b.build_module(as_int))


def test_empty_module_entry_is_reported_not_crashing():
    module = HloModule("m")
    comp = HloComputation("e")
    module.add_computation(comp, entry=True)
    with pytest.raises(VerifyError, match="computation e: has no root"):
        verify(module)
