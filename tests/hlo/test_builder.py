"""HloBuilder: build, verify, print, parse back, and evaluate small modules.

The evaluator (numpy) is the oracle for a few programs built here, so these
tests check that the builder wires operands, attributes and called
computations the way the rest of hlo/ reads them.
"""
from __future__ import annotations

import numpy as np
import pytest

from xlapy.hlo import HloBuilder, Shape, evaluate, parse_module, print_module, verify
from xlapy.hlo.builder import make_window
from xlapy.hlo.shape_inference import ShapeError

from .shape_helpers import S


def round_trip(module) -> str:
    """Verifies, prints, parses back and checks the text is stable; returns it."""
    verify(module)
    text = print_module(module)
    again = parse_module(text)
    verify(again)
    assert print_module(again) == text
    return text


def softmax_module(rows=4, cols=6):
    b = HloBuilder("softmax")
    x = b.parameter(Shape("f32", (rows, cols)), "x")
    m = b.reduce(x, b.constant(np.float32(-np.inf)), dims=[1],
                 to_apply=b.scalar_computation("max", "maximum", "f32"))
    e = b.exp(b.subtract(x, b.broadcast(m, (rows, cols), dims=[0])))
    s = b.reduce(e, b.constant(np.float32(0)), dims=[1],
                 to_apply=b.scalar_computation("sum", "add", "f32"))
    return b.build_module(b.divide(e, b.broadcast(s, (rows, cols), dims=[0])))


def test_softmax_builds_verifies_round_trips_and_evaluates():
    module = softmax_module()
    assert [c.name for c in module.computations] == ["max", "sum", "softmax"]
    assert module.entry.name == "softmax"
    round_trip(module)
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    (out,) = evaluate(module, [x])
    ref = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-6)


def test_scalar_computations_are_shared():
    b = HloBuilder()
    assert b.scalar_computation("sum", "add", "f32") is b.scalar_computation("s2", "add", "f32")
    assert b.scalar_computation("isum", "add", "s32") is not b.scalar_computation("sum", "add", "f32")


def test_names_are_unique_across_builders():
    b = HloBuilder("main")
    x = b.parameter(S("f32[4]"))
    other = HloBuilder("callee")           # an unrelated builder reusing the same names
    body = other.build(other.negate(other.parameter(S("f32[4]"))))
    module = b.build_module(b.negate(b.call(body, [x])))
    names = [i.name for i in module.instructions()]
    assert len(names) == len(set(names))
    round_trip(module)


def test_parameters_are_numbered_in_order_unless_given():
    b = HloBuilder()
    p0, p1 = b.parameter(S("f32[]")), b.parameter(S("s32[]"))
    p3 = b.parameter(S("f32[]"), number=3)
    p4 = b.parameter(S("f32[]"))
    assert [p.parameter_number for p in (p0, p1, p3, p4)] == [0, 1, 3, 4]


@pytest.mark.parametrize("value,dtype,expected", [
    (1.5, None, "f32[]"), (3, None, "s32[]"), (True, None, "pred[]"),
    (np.float64(2), None, "f64[]"), (np.arange(6, dtype=np.int64).reshape(2, 3), None, "s64[2,3]"),
    (1.5, "f16", "f16[]"), ([1, 2, 3], "u8", "u8[3]"),
])
def test_constant_types(value, dtype, expected):
    c = HloBuilder().constant(value, dtype)
    assert c.shape == S(expected)
    assert c.literal.shape == c.shape.dims


def test_shape_errors_are_raised_where_the_mistake_is():
    b = HloBuilder()
    x, y = b.parameter(S("f32[4]")), b.parameter(S("f32[5]"))
    with pytest.raises(ShapeError, match=r"add: operand shapes f32\[4\] and f32\[5\] differ"):
        b.add(x, y)
    with pytest.raises(ShapeError, match=r"requested shape f32\[5\] but inferred f32\[4\]"):
        b.op("negate", [x], S("f32[5]"))
    # check=False trusts the shape (a parser's path); the verifier catches it later.
    bad = b.op("negate", [x], S("f32[5]"), check=False)
    with pytest.raises(Exception, match="does not match the inferred"):
        verify(b.build_module(bad))


def test_movement_ops():
    b = HloBuilder()
    x = b.parameter(S("f32[4,6]"))
    i = b.parameter(S("s32[]"))
    cases = [
        (b.transpose(x, [1, 0]), "f32[6,4]"),
        (b.reshape(x, [2, 12]), "f32[2,12]"),
        (b.slice(x, [1, 0], [4, 6], [2, 3]), "f32[2,2]"),
        (b.pad(x, b.constant(np.float32(0)), [(1, -1, 1), (0, 2)]), "f32[7,8]"),
        (b.concatenate([x, x], 0), "f32[8,6]"),
        (b.reverse(x, [1]), "f32[4,6]"),
        (b.iota(S("s32[4,6]"), 1), "s32[4,6]"),
        (b.dynamic_slice(x, [i, i], [2, 3]), "f32[2,3]"),
        (b.dynamic_update_slice(x, b.slice(x, [0, 0], [1, 6]), [i, i]), "f32[4,6]"),
        (b.bitcast_convert(x, "s32"), "s32[4,6]"),
        (b.convert(x, "f16"), "f16[4,6]"),
        (b.clamp(b.constant(np.float32(0)), x, b.constant(np.float32(1))), "f32[4,6]"),
        (b.select(b.compare(x, x, "LT"), x, x), "f32[4,6]"),
        (b.broadcast(x, (3, 4, 6), [1, 2]), "f32[3,4,6]"),
        (b.shift_left(i, i), "s32[]"),
        (b.and_(i, i), "s32[]"),
        (b.not_(i), "s32[]"),
    ]
    for instr, expected in cases:
        assert instr.shape == S(expected), instr
    round_trip(b.build_module(b.tuple([c for c, _ in cases])))


def test_gather_scatter_sort_evaluate():
    b = HloBuilder("main")
    table = b.parameter(S("f32[5,3]"), "table")
    idx = b.parameter(S("s32[4,1]"), "idx")
    rows = b.gather(table, idx, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                    index_vector_dim=1, slice_sizes=[1, 3])
    summed = b.scatter(table, idx, rows, b.scalar_computation("sum", "add", "f32"),
                       update_window_dims=[1], inserted_window_dims=[0],
                       scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    flat = b.reshape(table, [15])
    ordered = b.sort([flat], 0, b.comparator("lt", ["f32"]), is_stable=True)
    module = b.build_module(b.tuple([rows, summed, ordered]))
    round_trip(module)
    t = np.arange(15, dtype=np.float32).reshape(5, 3)[::-1].copy()
    ix = np.array([[0], [4], [4], [2]], np.int32)
    got_rows, got_sum, got_sorted = evaluate(module, [t, ix])
    np.testing.assert_array_equal(got_rows, t[ix[:, 0]])
    expected = t.copy()
    np.add.at(expected, ix[:, 0], t[ix[:, 0]])
    np.testing.assert_array_equal(got_sum, expected)
    np.testing.assert_array_equal(got_sorted, np.sort(t.ravel()))


def test_argmax_is_a_variadic_reduce():
    b = HloBuilder("main")
    x = b.parameter(S("f32[3,5]"))
    r = b.sub_builder("argmax")
    va, ia, v, i = (r.parameter(S(t)) for t in ("f32[]", "s32[]", "f32[]", "s32[]"))
    keep = r.compare(va, v, "GE")
    reducer = r.build(r.tuple([r.select(keep, va, v), r.select(keep, ia, i)]))
    red = b.reduce([x, b.iota(S("s32[3,5]"), 1)],
                   [b.constant(np.float32(-np.inf)), b.constant(np.int32(0))], [1], reducer)
    assert red.shape == S("(f32[3], s32[3])")
    module = b.build_module(b.get_tuple_element(red, 1))
    round_trip(module)
    xs = np.array([[1, 5, 2, 5, 0], [9, 1, 1, 1, 1], [0, 0, 0, 0, 3]], np.float32)
    (out,) = evaluate(module, [xs])
    np.testing.assert_array_equal(out, xs.argmax(1))


def test_dot_and_convolution():
    b = HloBuilder("main")
    a, w = b.parameter(S("s8[2,3]")), b.parameter(S("s8[3,4]"))
    d = b.dot(a, w, result_type="s32")
    assert d.shape == S("s32[2,4]")
    x, k = b.parameter(S("f32[1,5,5,2]")), b.parameter(S("f32[3,3,2,4]"))
    c = b.convolution(x, k, make_window([3, 3], [2, 2], [(1, 1), (1, 1)]), "b01f_01io->b01f")
    assert c.shape == S("f32[1,3,3,4]")
    bd = b.dot(x, x, lhs_contracting=[3], rhs_contracting=[3], lhs_batch=[0], rhs_batch=[0])
    assert bd.shape == S("f32[1,5,5,5,5]")
    module = b.build_module(b.tuple([d, c]))
    round_trip(module)
    av = np.arange(6, dtype=np.int8).reshape(2, 3)
    wv = np.arange(12, dtype=np.int8).reshape(3, 4)
    xv = np.ones((1, 5, 5, 2), np.float32)
    kv = np.ones((3, 3, 2, 4), np.float32)
    got_d, got_c = evaluate(module, [av, wv, xv, kv])
    np.testing.assert_array_equal(got_d, av.astype(np.int32) @ wv.astype(np.int32))
    assert got_c[0, 1, 1, 0] == 18 and got_c[0, 0, 0, 0] == 8    # full window / corner


def test_windowed_reductions():
    b = HloBuilder("main")
    x = b.parameter(S("f32[1,4,4,1]"))
    zero = b.constant(np.float32(0))
    window = make_window([1, 2, 2, 1], [1, 2, 2, 1])
    pooled = b.reduce_window(x, b.constant(np.float32(-np.inf)), window,
                             b.scalar_computation("max", "maximum", "f32"))
    sel = b.sub_builder("ge")
    ge = sel.build(sel.compare(sel.parameter(S("f32[]")), sel.parameter(S("f32[]")), "GE"))
    grad = b.select_and_scatter(x, b.broadcast(b.constant(np.float32(1)), (1, 2, 2, 1)), zero,
                                window, ge, b.scalar_computation("sum", "add", "f32"))
    module = b.build_module(b.tuple([pooled, grad]))
    round_trip(module)
    xv = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    got_pool, got_grad = evaluate(module, [xv])
    np.testing.assert_array_equal(got_pool[0, :, :, 0], [[5, 7], [13, 15]])
    assert got_grad.sum() == 4 and got_grad[0, 1, 1, 0] == 1


def test_while_loop_and_conditional_evaluate():
    state = S("(s32[], f32[3])")
    cond = HloBuilder("cond")
    n = cond.get_tuple_element(cond.parameter(state), 0)
    cond_comp = cond.build(cond.compare(n, cond.constant(np.int32(5)), "LT"))
    body = HloBuilder("body")
    s = body.parameter(state)
    i, v = body.get_tuple_element(s, 0), body.get_tuple_element(s, 1)
    body_comp = body.build(body.tuple([body.add(i, body.constant(np.int32(1))),
                                       body.add(v, v)]))
    b = HloBuilder("main")
    x = b.parameter(S("f32[3]"))
    loop = b.while_(cond_comp, body_comp, b.tuple([b.constant(np.int32(0)), x]))
    doubled = b.get_tuple_element(loop, 1)
    neg = b.sub_builder("neg")
    neg_comp = neg.build(neg.negate(neg.parameter(S("f32[3]"))))
    ident = b.sub_builder("ident")
    ident_comp = ident.build(ident.parameter(S("f32[3]")))
    which = b.parameter(S("s32[]"))
    picked = b.conditional(which, [neg_comp, ident_comp], [doubled, doubled])
    module = b.build_module(picked)
    round_trip(module)
    xv = np.array([1, -2, 0.5], np.float32)
    np.testing.assert_array_equal(evaluate(module, [xv, np.int32(0)])[0], -32 * xv)
    np.testing.assert_array_equal(evaluate(module, [xv, np.int32(1)])[0], 32 * xv)


def test_fusion_and_custom_call_and_opt_barrier():
    sub = HloBuilder("fused")
    p = sub.parameter(S("f32[4]"))
    fused = sub.build(sub.multiply(p, sub.exp(p)))
    b = HloBuilder("main")
    x = b.parameter(S("f32[4]"))
    f = b.fusion(fused, [x])
    assert fused.is_fusion_computation and f.attrs["kind"] == "kLoop"
    barrier = b.opt_barrier(b.tuple([f, x]))
    module = b.build_module(barrier)
    text = round_trip(module)
    assert "kind=kLoop, calls=fused" in text.replace("%", "")
    cc = b.custom_call("my_target", [x], S("f32[2]"))
    assert cc.shape == S("f32[2]") and cc.attrs["custom_call_target"] == "my_target"


def test_build_defaults_to_the_last_instruction_and_rejects_foreign_roots():
    b = HloBuilder("main")
    x = b.parameter(S("f32[]"))
    last = b.negate(x)
    assert b.build().root is last
    other = HloBuilder("other")
    with pytest.raises(ValueError, match="not in computation other"):
        other.build(last)
    with pytest.raises(ValueError, match="is empty"):
        HloBuilder("empty").build()


def test_unique_names_are_the_smallest_free_suffix():
    """The builder names `base`, then `base.N` with the smallest N not taken, across its
    sub-builders, also around names given explicitly (it keeps a counter per base)."""
    b = HloBuilder("names")
    x = b.parameter(Shape("f32", (4,)), "x")
    given = {3: "add.7", 10: "add.12", 20: "neg.2"}
    taken, names = set(), []

    def reference(base):
        name, n = base, 0
        while name in taken:
            n += 1
            name = f"{base}.{n}"
        taken.add(name)
        return name
    taken.add("x")
    sub = b.sub_builder("inner")
    for i in range(30):
        base = "add" if i % 3 else "neg"
        builder = sub if i % 5 == 0 else b
        opcode = "add" if base == "add" else "negate"
        operands = [x, x] if base == "add" else [x]
        if builder is sub:
            operands = [sub.parameter(Shape("f32", (4,)), f"p{i}")]
            taken.add(f"p{i}")
            opcode, operands = "negate", operands
        name = given.get(i)
        instr = builder.op(opcode, operands, name=name or base)
        names.append(instr.name)
        assert instr.name == reference(name or base), (i, names)
