"""Shape rules of the library ops (topk, cholesky, triangular-solve, fft, batch norm),
reduce-precision, map, stochastic-convert, and the scheduling wrappers
(add-dependency, domain, async-start/-update/-done, copy-start/-done).

The shapes follow XLA's ShapeInference: topk and batch norm return tuples,
cholesky and triangular-solve work on the two minor dimensions with the others
as batch, fft transforms the `len(fft_length)` minor dimensions.
"""
from __future__ import annotations

from .shape import Shape
from .shape_rules_common import array, check_params_match, fail, need_hint, root_shape, rule

_FLOATS = ("f16", "bf16", "f32", "f64")
_COMPLEX_OF = {"f32": "c64", "f64": "c128"}
_REAL_OF = {"c64": "f32", "c128": "f64"}


def float_array(shape: Shape, what: str) -> Shape:
    array(shape, what)
    if not shape.dtype.is_float:
        fail(f"{what} must be floating point, got {shape}")
    return shape


@rule("reduce-precision")
def reduce_precision_shape(opcode, shapes, attrs, hint):
    """Same shape; at least one exponent bit (XLA's limit), mantissa bits >= 0."""
    (x,) = shapes
    float_array(x, "operand")
    e, m = attrs.get("exponent_bits"), attrs.get("mantissa_bits")
    if not isinstance(e, int) or e < 1:
        fail(f"exponent_bits must be an integer >= 1, got {e!r}")
    if not isinstance(m, int) or m < 0:
        fail(f"mantissa_bits must be an integer >= 0, got {m!r}")
    return x


@rule("map")
def map_shape(opcode, shapes, attrs, hint):
    """map(a, b, ...): the operands' dims, to_apply's scalar result type."""
    if not shapes:
        fail("needs at least one operand")
    dims = array(shapes[0]).dims
    for s in shapes:
        if array(s).dims != dims:
            fail(f"operands {shapes[0]} and {s} differ in dimensions")
    comp = attrs.get("to_apply")
    check_params_match(comp, "to_apply", [Shape.scalar(s.element_type) for s in shapes])
    out = root_shape(comp, "to_apply")
    if not out.is_array or out.dims:
        fail(f"to_apply must return a scalar, returns {out}")
    given = attrs.get("dimensions")
    if given is not None and tuple(given) != tuple(range(len(dims))):
        fail(f"dimensions must be every dimension {list(range(len(dims)))}, got {list(given)}")
    return Shape(out.element_type, dims)


@rule("stochastic-convert")
def stochastic_convert_shape(opcode, shapes, attrs, hint):
    """stochastic-convert(x, random): x float, random unsigned of x's width; the result
    (an integer type) from the hint."""
    x, random = shapes
    float_array(x, "operand")
    array(random, "random")
    if random.dims != x.dims:
        fail(f"random {random} must have the operand's dimensions {x}")
    if not random.dtype.is_unsigned or random.dtype.bits != x.dtype.bits:
        fail(f"random must be an unsigned integer of {x.dtype.bits} bits, got {random}")
    out = array(need_hint(hint, "the result element type"), "result")
    if out.dims != x.dims or not out.dtype.is_integer:
        fail(f"result {out} must be an integer array of the operand's dimensions")
    return out


@rule("topk")
def topk_shape(opcode, shapes, attrs, hint):
    """topk(x), k: (values, s32 indices) with the minor dimension cut to k."""
    (x,) = shapes
    array(x)
    k = attrs.get("k")
    if x.rank < 1:
        fail(f"operand must have rank >= 1, got {x}")
    if not isinstance(k, int) or not 0 <= k <= x.dims[-1]:
        fail(f"k must be in [0, {x.dims[-1]}], got {k!r}")
    dims = x.dims[:-1] + (k,)
    return Shape.tuple_of([Shape(x.element_type, dims), Shape("s32", dims)])


def _square_minor(a: Shape, what: str) -> int:
    if a.rank < 2 or a.dims[-1] != a.dims[-2]:
        fail(f"{what} must have square minor dimensions, got {a}")
    return a.dims[-1]


@rule("cholesky")
def cholesky_shape(opcode, shapes, attrs, hint):
    (a,) = shapes
    _float_or_complex(a, "operand")
    _square_minor(a, "operand")
    return a


def _float_or_complex(shape: Shape, what: str) -> Shape:
    array(shape, what)
    if not (shape.dtype.is_float or shape.element_type in _REAL_OF):
        fail(f"{what} must be floating point or complex, got {shape}")
    return shape


@rule("triangular-solve")
def triangular_solve_shape(opcode, shapes, attrs, hint):
    """a [..., m, m] with b [..., m, n] (left_side) or [..., n, m]: the result is b's."""
    a, b = shapes
    _float_or_complex(a, "a")
    _float_or_complex(b, "b")
    if a.element_type != b.element_type:
        fail(f"a {a} and b {b} differ in element type")
    m = _square_minor(a, "a")
    if b.rank != a.rank or b.dims[:-2] != a.dims[:-2]:
        fail(f"a {a} and b {b} differ in batch dimensions")
    left = attrs.get("left_side", False)
    if (b.dims[-2] if left else b.dims[-1]) != m:
        side = "rows" if left else "columns"
        fail(f"b {b} must have {m} {side} (left_side={str(bool(left)).lower()})")
    return b


@rule("fft")
def fft_shape(opcode, shapes, attrs, hint):
    (x,) = shapes
    array(x)
    kind, lengths = attrs.get("fft_type"), tuple(attrs.get("fft_length") or ())
    if kind not in ("FFT", "IFFT", "RFFT", "IRFFT"):
        fail(f"fft_type must be FFT, IFFT, RFFT or IRFFT, got {kind!r}")
    if not 1 <= len(lengths) <= 3 or len(lengths) > x.rank:
        fail(f"fft_length {list(lengths)} must name 1 to 3 of the operand's {x.rank} dimensions")
    minor = x.dims[x.rank - len(lengths):]
    if kind in ("FFT", "IFFT"):
        if x.element_type not in _REAL_OF:
            fail(f"{kind} needs a complex operand, got {x}")
        if minor != lengths:
            fail(f"fft_length {list(lengths)} must equal the minor dimensions of {x}")
        return x
    if kind == "RFFT":
        if x.element_type not in _COMPLEX_OF:
            fail(f"RFFT needs an f32 or f64 operand, got {x}")
        if minor != lengths:
            fail(f"fft_length {list(lengths)} must equal the minor dimensions of {x}")
        dims = x.dims[:-1] + (lengths[-1] // 2 + 1 if lengths[-1] else 0,)
        return Shape(_COMPLEX_OF[x.element_type], dims)
    if x.element_type not in _REAL_OF:
        fail(f"IRFFT needs a complex operand, got {x}")
    want = lengths[:-1] + (lengths[-1] // 2 + 1 if lengths[-1] else 0,)
    if minor != want:
        fail(f"IRFFT with fft_length {list(lengths)} needs minor dimensions {list(want)}, "
             f"got {x}")
    return Shape(_REAL_OF[x.element_type], x.dims[:-1] + (lengths[-1],))


def _feature(x: Shape, attrs) -> int:
    f = attrs.get("feature_index")
    if not isinstance(f, int) or not 0 <= f < x.rank:
        fail(f"feature_index must be a dimension of {x}, got {f!r}")
    epsilon = attrs.get("epsilon")
    try:
        float(getattr(epsilon, "text", epsilon))
    except (TypeError, ValueError):
        fail(f"epsilon must be a number, got {epsilon!r}")
    return x.dims[f]


def _per_feature(shapes, names, x: Shape, c: int) -> None:
    for s, name in zip(shapes, names):
        float_array(s, name)
        if s.element_type != x.element_type or s.dims != (c,):
            fail(f"{name} must be {x.element_type}[{c}], got {s}")


@rule("batch-norm-training")
def batch_norm_training_shape(opcode, shapes, attrs, hint):
    x = float_array(shapes[0], "operand")
    c = _feature(x, attrs)
    _per_feature(shapes[1:], ("scale", "offset"), x, c)
    vec = Shape(x.element_type, (c,))
    return Shape.tuple_of([x, vec, vec])


@rule("batch-norm-inference")
def batch_norm_inference_shape(opcode, shapes, attrs, hint):
    x = float_array(shapes[0], "operand")
    c = _feature(x, attrs)
    _per_feature(shapes[1:], ("scale", "offset", "mean", "variance"), x, c)
    return x


@rule("batch-norm-grad")
def batch_norm_grad_shape(opcode, shapes, attrs, hint):
    x = float_array(shapes[0], "operand")
    c = _feature(x, attrs)
    _per_feature(shapes[1:4], ("scale", "mean", "variance"), x, c)
    if shapes[4] != x:
        fail(f"grad_output {shapes[4]} must have the operand's shape {x}")
    vec = Shape(x.element_type, (c,))
    return Shape.tuple_of([x, vec, vec])


@rule("add-dependency")
def add_dependency_shape(opcode, shapes, attrs, hint):
    """add-dependency(x, token): x, ordered after the token."""
    x, token = shapes
    if token.element_type != "token":
        fail(f"the second operand must be a token, got {token}")
    return x


@rule("domain")
def domain_shape(opcode, shapes, attrs, hint):
    (x,) = shapes
    return x


@rule("async-start")
def async_start_shape(opcode, shapes, attrs, hint):
    """((operands...), the called computation's result, context...): the context
    elements come from the hint (XLA's async contexts are opaque, often u32[] / s32[])."""
    comp = attrs.get("calls")
    check_params_match(comp, "calls", shapes)
    result = root_shape(comp, "calls")
    base = [Shape.tuple_of(shapes), result]
    if hint is None:
        return Shape.tuple_of(base)
    if not hint.is_tuple or len(hint.tuple_shapes) < 2 or list(hint.tuple_shapes[:2]) != base:
        fail(f"result {hint} must start with (({', '.join(map(str, shapes))}), {result})")
    return hint


@rule("async-update")
def async_update_shape(opcode, shapes, attrs, hint):
    (x,) = shapes
    if not x.is_tuple or len(x.tuple_shapes) < 2:
        fail(f"operand must be an async-start's tuple, got {x}")
    return x


@rule("async-done")
def async_done_shape(opcode, shapes, attrs, hint):
    (x,) = shapes
    if not x.is_tuple or len(x.tuple_shapes) < 2:
        fail(f"operand must be an async-start's tuple, got {x}")
    return x.tuple_shapes[1]


@rule("copy-start")
def copy_start_shape(opcode, shapes, attrs, hint):
    """(destination, source, context u32[])."""
    (x,) = shapes
    array(x)
    base = Shape.tuple_of([x, x, Shape.scalar("u32")])
    if hint is None:
        return base
    if not hint.is_tuple or len(hint.tuple_shapes) != 3 or list(hint.tuple_shapes[:2]) != [x, x]:
        fail(f"result {hint} must be ({x}, {x}, context)")
    return hint


@rule("copy-done")
def copy_done_shape(opcode, shapes, attrs, hint):
    (x,) = shapes
    if not x.is_tuple or len(x.tuple_shapes) != 3:
        fail(f"operand must be a copy-start's tuple, got {x}")
    return x.tuple_shapes[0]
